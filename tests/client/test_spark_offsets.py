"""The Spark connector's logic without a JVM: options, offsets JSON, admission control,
range planning, the Arrow schema and the write-side conversion, and that everything Spark
ships between processes pickles. (tests/spark runs the same code inside Spark.)"""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.message import MessageView
from client.spark.offsets import (
    OffsetSpec,
    QueueRange,
    SparkOptionError,
    admit,
    cap,
    merge_new_queues,
    offsets_from_json,
    offsets_to_json,
    parse_source_options,
    plan_ranges,
    resolve,
)

pa = pytest.importorskip("pyarrow", reason="the spark extra is not installed")
pytest.importorskip("pyspark", reason="the spark extra is not installed")

NS = "127.0.0.1:9876"


def q(i: int, topic: str = "T", broker: str = "b") -> tuple[str, str, int]:
    return (topic, broker, i)


# ---------------------------------------------------------------------------- offsets JSON


def test_offsets_json_round_trips_with_string_keys_in_order() -> None:
    offsets = {q(10): 5, q(2): 7, ("A", "b", 0): 1, q(0, broker="a"): 3}
    doc = offsets_to_json(offsets)
    # Spark stores JSON text and hands it back parsed; ids must survive as strings in order.
    text = json.dumps(doc)
    assert text == '{"A": {"b": {"0": 1}}, "T": {"a": {"0": 3}, "b": {"2": 7, "10": 5}}}'
    assert offsets_from_json(json.loads(text)) == offsets
    assert offsets_from_json(text) == offsets


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"T": 3}', "broker names"),
        ('{"T": {"b": [1]}}', "queue ids"),
        ('{"T": {"b": {"x": 1}}}', "not an integer"),
        ('{"T": {"b": {"0": -3}}}', "-2 \\(earliest\\)"),
        ('{"T": {"b": {"0": "5"}}}', "must be an integer"),
        ('{"T": {"b": {"0": true}}}', "must be an integer"),
    ],
)
def test_malformed_offsets_name_the_problem(doc: str, message: str) -> None:
    with pytest.raises(SparkOptionError, match=message):
        offsets_from_json(doc)


# ---------------------------------------------------------------------------- options


def test_options_defaults_follow_the_kafka_source() -> None:
    batch = parse_source_options({"namesrv": NS, "topic": "T"}, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and batch.include_properties
    assert batch.expression == ("*", "TAG")
    stream = parse_source_options({"NameSrv": NS, "Topics": "b, a,a"}, streaming=True)
    assert stream.starting.kind == "latest"
    assert stream.topics == ("a", "b")
    sql = parse_source_options({"namesrv": NS, "topic": "T", "sqlFilter": "a > 1"}, streaming=False)
    assert sql.expression == ("a > 1", "SQL92")


def test_options_json_and_timestamps() -> None:
    opts = parse_source_options(
        {
            "namesrv": NS,
            "topic": "T",
            "startingOffsets": '{"T": {"b": {"0": -2, "1": 17}}}',
            "endingTimestamp": "1700000000000",
            "maxMessagesPerPartition": "500",
        },
        streaming=False,
    )
    assert opts.starting == OffsetSpec("json", {q(0): -2, q(1): 17})
    assert opts.ending == OffsetSpec("timestamp", timestamp_ms=1_700_000_000_000)
    assert opts.max_messages_per_partition == 500
    timed = parse_source_options(
        {"namesrv": NS, "topic": "T", "startingTimestamp": "5", "startingOffsets": "latest"},
        streaming=True,
    )
    assert timed.starting.kind == "timestamp"  # the timestamp wins, as in Spark's Kafka source


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topic": "T"}, False, "namesrv"),
        ({"namesrv": NS}, False, "exactly one of the options topic"),
        ({"namesrv": NS, "topic": "T", "topicPattern": "T.*"}, False, "got topic, topicpattern"),
        ({"namesrv": NS, "topicPattern": "("}, False, "topicPattern is not a regular"),
        ({"namesrv": NS, "topic": " , "}, False, "names no topic"),
        ({"namesrv": NS, "topic": "T", "startingOffsets": "soon"}, False, "startingOffsets must"),
        ({"namesrv": NS, "topic": "T", "endingOffsets": "earliest"}, False, "cannot be earliest"),
        ({"namesrv": NS, "topic": "T", "endingOffsets": '{"T":{"b":{"0":-2}}}'}, False, "-2"),
        ({"namesrv": NS, "topic": "T", "endingOffsets": "latest"}, True, "batch reads only"),
        ({"namesrv": NS, "topic": "T", "maxMessagesPerTrigger": "10"}, False, "streaming"),
        ({"namesrv": NS, "topic": "T", "maxMessagesPerTrigger": "0"}, True, "positive integer"),
        ({"namesrv": NS, "topic": "T", "maxMessagesPerPartition": "x"}, False, "positive"),
        ({"namesrv": NS, "topic": "T", "startingTimestamp": "noon"}, False, "epoch milli"),
        ({"namesrv": NS, "topic": "T", "failOnDataLoss": "maybe"}, False, "true or false"),
        ({"namesrv": NS, "topic": "T", "commitOffsets": "true"}, True, "consumerGroup"),
        ({"namesrv": NS, "topic": "T", "sqlFilter": "a=1", "subExpression": "x"}, False, "exclude"),
        ({"namesrv": NS, "topic": "T", "accessKey": "ak"}, False, "go together"),
        (
            {"namesrv": NS, "topic": "T", "startingTimestamp": "9", "endingTimestamp": "3"},
            False,
            "before startingTimestamp",
        ),
    ],
)
def test_bad_options_name_the_option(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(SparkOptionError, match=message):
        parse_source_options(options, streaming=streaming)


def test_resolve_specs_against_queue_bounds() -> None:
    bounds = {q(0): (5, 50), q(1): (0, 20)}
    assert resolve(OffsetSpec("earliest"), bounds, default_latest=False) == {q(0): 5, q(1): 0}
    assert resolve(OffsetSpec("latest"), bounds, default_latest=False) == {q(0): 50, q(1): 20}
    spec = OffsetSpec("json", {q(0): -1})
    assert resolve(spec, bounds, default_latest=False) == {q(0): 50, q(1): 0}
    assert resolve(spec, bounds, default_latest=True) == {q(0): 50, q(1): 20}
    timed = resolve(
        OffsetSpec("timestamp", timestamp_ms=1),
        bounds,
        by_time={q(0): 0, q(1): 30},
        default_latest=False,
    )
    assert timed == {q(0): 5, q(1): 20}  # clamped into the queue's bounds
    with pytest.raises(SparkOptionError, match="T/b/7"):
        resolve(OffsetSpec("json", {q(7): 1}), bounds, default_latest=False)


# ---------------------------------------------------------------------------- planning


def test_plan_ranges_split_and_skip_empty_queues() -> None:
    ranges = plan_ranges({q(0): 0, q(1): 10, q(2): 4}, {q(0): 25, q(1): 10, q(2): 4, q(3): 3}, 10)
    assert ranges == [
        QueueRange("T", "b", 0, 0, 10),
        QueueRange("T", "b", 0, 10, 20),
        QueueRange("T", "b", 0, 20, 25),
        QueueRange("T", "b", 3, 0, 3),  # a queue unknown to start reads from 0
    ]
    assert plan_ranges({q(0): 7}, {q(0): 7}, None) == []


def test_admission_splits_in_proportion_to_backlog() -> None:
    start = {q(i): 0 for i in range(8)}
    latest = {q(i): 12_500 for i in range(8)}
    first = admit(start, latest, 40_000)
    assert first == {q(i): 5_000 for i in range(8)}
    second = admit(first, latest, 40_000)
    assert second == {q(i): 10_000 for i in range(8)}
    assert admit(second, latest, 40_000) == latest


def test_admission_never_starves_a_small_queue() -> None:
    start = {q(0): 0, q(1): 0, q(2): 0}
    latest = {q(0): 1_000_000, q(1): 1_000_000, q(2): 3}
    end = admit(start, latest, 100)
    assert sum(end[k] - start[k] for k in start) == 100
    assert end[q(2)] >= 1


def test_admission_with_more_waiting_queues_than_the_cap_turns_round() -> None:
    start = {q(i): 0 for i in range(5)}
    latest = {q(i): 1 for i in range(5)}
    served: set[tuple[str, str, int]] = set()
    offsets = start
    for _ in range(3):
        end = admit(offsets, latest, 2)
        assert sum(end[k] - offsets[k] for k in offsets) <= 2
        served |= {k for k in end if end[k] > offsets[k]}
        offsets = end
    assert served == set(start)


@given(
    st.dictionaries(
        st.integers(0, 20),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 3000),
)
def test_admission_properties(queues: dict[int, tuple[int, int]], limit: int) -> None:
    start = {q(i): lo for i, (lo, _) in queues.items()}
    latest = {q(i): lo + extra for i, (lo, extra) in queues.items()}
    end = admit(start, latest, limit)
    taken = {k: end[k] - start[k] for k in start}
    backlog = {k: latest[k] - start[k] for k in start}
    assert all(0 <= taken[k] <= backlog[k] for k in start)
    total = sum(backlog.values())
    assert sum(taken.values()) == min(total, limit)
    waiting = [k for k in start if backlog[k]]
    if len(waiting) <= limit:
        assert all(taken[k] >= 1 for k in waiting)


def test_available_now_target_caps_latest_and_drops_new_queues() -> None:
    target = {q(0): 10, q(1): 5}
    assert cap({q(0): 50, q(1): 3, q(2): 9}, target) == {q(0): 10, q(1): 3}
    assert cap({q(0): 50}, None) == {q(0): 50}
    assert merge_new_queues({q(1): 4}, [q(0), q(1)]) == {q(0): 0, q(1): 4}


# ---------------------------------------------------------------------------- Spark-facing


def _view(i: int, **changes: object) -> MessageView:
    fields: dict[str, object] = {
        "topic": "T",
        "body": f"body{i}".encode(),
        "tags": "TagA",
        "keys": ["k1", "k2"],
        "properties": {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U", "user": str(i)},
        "msg_id": "U" * 32,
        "offset_msg_id": "0" * 32,
        "queue_id": 3,
        "queue_offset": i,
        "commit_log_offset": 100 * i,
        "born_timestamp": 1_700_000_000_123,
        "store_timestamp": 1_700_000_000_456,
        "born_host": "127.0.0.1:1",
        "store_host": "127.0.0.1:2",
        "reconsume_times": 1,
        "sys_flag": 0,
        "flag": 7,
        "broker_name": "broker-a",
        "body_crc": 0,
    }
    fields.update(changes)
    return MessageView(**fields)  # type: ignore[arg-type]


def test_arrow_batches_match_the_declared_schema_exactly() -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    from client.spark.arrow import ARROW_SCHEMA, SCHEMA_DDL, to_record_batch

    batch = to_record_batch([_view(0), _view(1, keys=[], tags=None)], include_properties=True)
    assert batch.schema == ARROW_SCHEMA
    # The Arrow schema is the one Spark derives from the DDL the source declares.
    spark_type = from_arrow_schema(ARROW_SCHEMA)
    assert spark_type.simpleString() == (
        "struct<topic:string,brokerName:string,queueId:int,queueOffset:bigint,msgId:string,"
        "offsetMsgId:string,tags:string,keys:string,body:binary,"
        "properties:map<string,string>,bornTimestamp:timestamp,storeTimestamp:timestamp,"
        "reconsumeTimes:int,flag:int>"
    )
    ddl = SCHEMA_DDL.replace("MAP<STRING, STRING>", "MAP<STRING,STRING>").lower()
    assert ddl == ", ".join(f"{f.name.lower()} {f.dataType.simpleString()}" for f in spark_type)
    rows = batch.to_pylist()
    assert rows[0]["properties"] == [("user", "0")]  # the columns' own properties stripped
    assert rows[0]["keys"] == "k1 k2" and rows[1]["keys"] is None and rows[1]["tags"] is None
    assert rows[0]["storeTimestamp"] == datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=UTC)
    bare = to_record_batch([_view(2)], include_properties=False)
    assert bare.schema == ARROW_SCHEMA and bare.to_pylist()[0]["properties"] is None


def test_write_rows_become_messages() -> None:
    from client.spark.arrow import WriteSchemaError, batch_to_messages, check_write_columns

    batch = pa.RecordBatch.from_pydict(
        {
            "body": ["a", "b"],
            "keys": [["k1", "k2"], None],
            "tags": ["t", None],
            "properties": pa.array([[("p", "1")], None], pa.map_(pa.string(), pa.string())),
            "queueId": pa.array([None, 2], pa.int32()),
            "deliverAt": pa.array([None, 1_700_000_000_000], pa.int64()),
            "ignored": [1, 2],
        }
    )
    out = batch_to_messages(batch, topic_option="T", write_id_prefix="q:0:1", first_row=10)
    (m0, q0), (m1, q1) = out
    assert (m0.topic, m0.body, m0.key_list, m0.tags, q0) == ("T", b"a", ["k1", "k2"], "t", None)
    assert m0.properties == {"p": "1", "SPARK_WRITE_ID": "q:0:1:10"}
    assert m1.properties == {"SPARK_WRITE_ID": "q:0:1:11"} and q1 == 2
    assert m1.deliver_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    null_body = pa.RecordBatch.from_pydict({"body": pa.array([None], pa.binary())})
    with pytest.raises(WriteSchemaError, match="row 0 has a null body"):
        batch_to_messages(null_body, topic_option="T", write_id_prefix="x", first_row=0)
    with pytest.raises(WriteSchemaError, match="name the topic"):
        check_write_columns(["body"], {"body": "binary"}, None)
    with pytest.raises(WriteSchemaError, match="column queueId is string"):
        check_write_columns(["body", "queueId"], {"body": "binary", "queueId": "string"}, "T")


def _round_trip(thing: object) -> Any:
    return pickle.loads(pickle.dumps(thing))  # noqa: S301 - our own objects, as Spark does


def test_what_spark_ships_between_processes_pickles() -> None:
    from client.spark.source import (
        QueuePartition,
        RocketMQBatchReader,
        RocketMQBatchWriter,
        RocketMQStreamReader,
        WriteOptions,
        WriteReport,
    )

    opts = parse_source_options({"namesrv": NS, "topic": "T"}, streaming=True)
    reader = RocketMQStreamReader(opts)
    reader._target = {q(0): 5}
    part = QueuePartition(QueueRange("T", "b", 0, 1, 9))
    writer = RocketMQBatchWriter(WriteOptions(NS, "T", "g", None, None))
    for thing in (reader, RocketMQBatchReader(opts), part, writer, WriteReport(3, 10)):
        copy = _round_trip(thing)
        assert type(copy) is type(thing)
    assert _round_trip(part) == part
    assert _round_trip(reader)._target == {q(0): 5}
    assert _round_trip(writer).write_id == writer.write_id
    # An empty micro-batch plans nothing and asks no broker.
    start = offsets_to_json({q(0): 4})
    assert reader.partitions(start, start) == []
