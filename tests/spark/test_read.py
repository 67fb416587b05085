"""``spark.read`` and ``spark.readStream`` of ``format("rocketmq")`` against a real broker.

One topic of 100,000 messages over 8 queues serves both: the batch read must see each
message exactly once, and a rate-limited AvailableNow stream must cut it into exactly
40,000 / 40,000 / 20,000, then after a restart on the same checkpoint read only what came
after. Nothing is mocked: Spark's own planner and workers call the connector.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from client import Message
from client.spark.listener import OffsetCommitListener
from tests.processes import StandaloneBroker
from tests.spark.conftest import (
    committed,
    create_topic,
    produce_round_robin,
    queue_bounds,
)

TOPIC = "SparkOrders"
QUEUES = 8
TOTAL = 100_000
TAGS = ("TagA", "TagB", "TagC")


def _message(i: int) -> Message:
    return Message(
        TOPIC, f"m{i}".encode(), tags=TAGS[i % 3], keys=f"k{i}", properties={"k": f"v{i}"}
    )


@pytest.fixture(scope="module")
def orders(broker: StandaloneBroker) -> dict[str, Any]:
    create_topic(broker.namesrv, broker.broker, TOPIC, QUEUES)
    produce_round_robin(broker.namesrv, [_message(i) for i in range(TOTAL)], batch=250)
    bounds = queue_bounds(broker.namesrv, TOPIC)
    # 400 batches round-robin over 8 queues: the setup itself is exact, or the test is moot.
    assert sorted(bounds.values()) == [(0, TOTAL // QUEUES)] * QUEUES, bounds
    return {"namesrv": broker.namesrv, "bounds": bounds}


def _reader(spark: Any, namesrv: str, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("namesrv", namesrv).option("topic", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_sees_every_message_once(spark: Any, orders: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    df = _reader(spark, orders["namesrv"], startingOffsets="earliest")
    assert df.rdd.getNumPartitions() == QUEUES
    stats = df.agg(
        F.count("*").alias("n"),
        F.countDistinct("queueId", "queueOffset").alias("distinct"),
    ).collect()[0]
    assert (stats["n"], stats["distinct"]) == (TOTAL, TOTAL)
    per_queue = {
        r["queueId"]: (r["lo"], r["hi"], r["n"])
        for r in df.groupBy("queueId")
        .agg(
            F.min("queueOffset").alias("lo"),
            F.max("queueOffset").alias("hi"),
            F.count("*").alias("n"),
        )
        .collect()
    }
    assert per_queue == {q: (0, TOTAL // QUEUES - 1, TOTAL // QUEUES) for q in range(QUEUES)}
    bodies = Counter(df.select("body").toArrow().column("body").to_pylist())
    assert bodies == Counter(f"m{i}".encode() for i in range(TOTAL))
    sample = df.where(F.col("keys") == "k4242").collect()
    assert len(sample) == 1
    row = sample[0]
    assert row["properties"]["k"] == "v4242"
    assert row["tags"] == TAGS[4242 % 3]
    assert row["topic"] == TOPIC and row["brokerName"] and len(row["msgId"]) == 32
    assert row["storeTimestamp"] is not None and row["bornTimestamp"] is not None


def test_batch_read_filters_tags_at_the_broker(spark: Any, orders: dict[str, Any]) -> None:
    df = _reader(spark, orders["namesrv"], subExpression="TagA")
    keys = {r["keys"] for r in df.select("keys").collect()}
    assert keys == {f"k{i}" for i in range(TOTAL) if i % 3 == 0}
    both = _reader(spark, orders["namesrv"], subExpression="TagA || TagC").count()
    assert both == sum(1 for i in range(TOTAL) if i % 3 != 1)


def test_batch_read_filters_by_sql_at_the_broker(spark: Any, orders: dict[str, Any]) -> None:
    df = _reader(spark, orders["namesrv"], sqlFilter="k IN ('v7', 'v70', 'v700') OR k = 'v99999'")
    assert sorted(r["keys"] for r in df.collect()) == ["k7", "k70", "k700", "k99999"]


def test_batch_read_offset_json_and_partition_split(spark: Any, orders: dict[str, Any]) -> None:
    broker_name = next(iter(orders["bounds"]))[0]
    starting = {TOPIC: {broker_name: {"0": 100, "1": -2, "2": -1}}}
    ending = {
        TOPIC: {
            broker_name: {"0": 200, "1": 50, "2": -1, "3": 10}
            | {str(q): 60 for q in range(4, QUEUES)}
        }
    }
    df = _reader(
        spark,
        orders["namesrv"],
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
        maxMessagesPerPartition="30",
    )
    counts = {r["queueId"]: r["count"] for r in df.groupBy("queueId").count().collect()}
    # queue 0: 100..199; 1: 0..49; 2: latest..latest, nothing; 3: 0..9; the rest 0..59 (a
    # queue the starting JSON leaves out starts at earliest).
    assert counts == {0: 100, 1: 50, 3: 10} | {q: 60 for q in range(4, QUEUES)}
    # Ranges of at most 30: 100 → 4, 50 → 2, 10 → 1, 60 → 2 each.
    assert df.rdd.getNumPartitions() == 4 + 2 + 1 + 2 * (QUEUES - 4)
    offsets = sorted(r["queueOffset"] for r in df.where("queueId = 0").collect())
    assert offsets == list(range(100, 200))


def test_batch_read_by_timestamp(spark: Any, orders: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    df = _reader(spark, orders["namesrv"])
    times = sorted(
        r["t"] for r in df.select(F.unix_millis("storeTimestamp").alias("t")).distinct().collect()
    )
    assert len(times) > 10  # 100,000 messages take longer than a few milliseconds to store
    # A cut in the middle of the production run splits the queues in two.
    cut_ms = times[len(times) // 2]
    after = _reader(spark, orders["namesrv"], startingTimestamp=str(cut_ms))
    before = _reader(spark, orders["namesrv"], endingTimestamp=str(cut_ms))
    assert after.where(F.unix_millis("storeTimestamp") < cut_ms).count() == 0
    assert before.where(F.unix_millis("storeTimestamp") >= cut_ms).count() == 0
    n_after, n_before = after.count(), before.count()
    assert n_after > 0 and n_before > 0
    assert n_after + n_before == TOTAL


def test_bad_options_fail_with_the_option_named(spark: Any, orders: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="namesrv"):
        spark.read.format("rocketmq").option("topic", TOPIC).load().count()
    with pytest.raises(Exception, match="startingOffsets"):
        _reader(spark, orders["namesrv"], startingOffsets="yesterday").count()
    with pytest.raises(Exception, match="NoSuchTopic"):
        spark.read.format("rocketmq").option("namesrv", orders["namesrv"]).option(
            "topic", "NoSuchTopic"
        ).load().count()


def _stream(spark: Any, namesrv: str, out: Path, checkpoint: Path, group: str) -> Any:
    return (
        spark.readStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "40000")
        .option("consumerGroup", group)
        .option("commitOffsets", "true")
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _wait_for_commits(
    namesrv: str, group: str, want: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    deadline = time.monotonic() + 30
    got: dict[tuple[str, int], int] = {}
    while time.monotonic() < deadline:
        got = committed(namesrv, group, TOPIC)
        if got == want:
            break
        time.sleep(0.2)
    return got


def test_stream_rate_limit_available_now_and_restart(
    spark: Any, orders: dict[str, Any], broker: StandaloneBroker, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    namesrv, group = orders["namesrv"], "spark-stream-orders"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    listener = OffsetCommitListener(namesrv, group)
    spark.streams.addListener(listener)
    try:
        query = _stream(spark, namesrv, out, checkpoint, group)
        assert query.awaitTermination(300)
        assert query.exception() is None
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert sizes == [40_000, 40_000, 20_000]
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        # The source reports the brokers' ends, which the progress shows as latestOffset.
        latest = json.loads(progress[0]["sources"][0]["latestOffset"])
        assert sum(v for b in latest[TOPIC].values() for v in b.values()) == TOTAL
        first_end = json.loads(progress[0]["sources"][0]["endOffset"])
        assert sorted(v for b in first_end[TOPIC].values() for v in b.values()) == [5000] * QUEUES
        written = spark.read.parquet(str(out))
        assert written.count() == TOTAL
        assert written.select("queueId", "queueOffset").distinct().count() == TOTAL

        end = {k: hi for k, (_, hi) in queue_bounds(namesrv, TOPIC).items()}
        assert _wait_for_commits(namesrv, group, end) == end

        extra = [
            Message(TOPIC, f"late{i}".encode(), tags="TagB", keys=f"late{i}") for i in range(1000)
        ]
        produce_round_robin(namesrv, extra, batch=125)
        query = _stream(spark, namesrv, out, checkpoint, group)
        assert query.awaitTermination(300)
        assert query.exception() is None
        assert sum(p["numInputRows"] for p in query.recentProgress) == 1000
        written = spark.read.parquet(str(out))
        assert written.count() == TOTAL + 1000
        assert written.select("queueId", "queueOffset").distinct().count() == TOTAL + 1000
        assert written.where(F.col("body").cast("string").startswith("late")).count() == 1000

        end = {k: hi for k, (_, hi) in queue_bounds(namesrv, TOPIC).items()}
        assert _wait_for_commits(namesrv, group, end) == end
    finally:
        spark.streams.removeListener(listener)


def test_stream_by_pattern_picks_up_new_topics_from_their_start(
    spark: Any, broker: StandaloneBroker, tmp_path: Path
) -> None:
    namesrv = broker.namesrv
    create_topic(namesrv, broker.broker, "SparkPatA", 2)
    produce_round_robin(namesrv, [Message("SparkPatA", b"a%d" % i) for i in range(40)], batch=10)

    def run() -> Any:
        query = (
            spark.readStream.format("rocketmq")
            .option("namesrv", namesrv)
            .option("topicPattern", "SparkPat.*")
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
        return spark.read.parquet(str(tmp_path / "out"))

    assert run().count() == 40
    # A topic that appears later, and more in the old one: the new topic's queues are read
    # from offset 0 although the query started long before them.
    create_topic(namesrv, broker.broker, "SparkPatB", 3)
    produce_round_robin(namesrv, [Message("SparkPatB", b"b%d" % i) for i in range(30)], batch=10)
    produce_round_robin(namesrv, [Message("SparkPatA", b"c%d" % i) for i in range(20)], batch=10)
    out = run()
    assert out.count() == 90
    per_topic = {r["topic"]: r["count"] for r in out.groupBy("topic").count().collect()}
    assert per_topic == {"SparkPatA": 60, "SparkPatB": 30}
    assert out.select("topic", "queueId", "queueOffset").distinct().count() == 90
