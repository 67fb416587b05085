"""``df.write`` and ``df.writeStream`` of ``format("rocketmq")``, read back through the
source: every row arrives once, with its keys, tags and properties, and a unique
``SPARK_WRITE_ID = queryId:batchId:partition:row``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import StandaloneBroker, start_standalone
from tests.spark.conftest import SMALL_STORE, create_topic, queue_bounds

ROWS = 10_000


def _read(spark: Any, namesrv: str, topic: str) -> Any:
    return spark.read.format("rocketmq").option("namesrv", namesrv).option("topic", topic).load()


def test_batch_write_then_read_back(spark: Any, broker: StandaloneBroker) -> None:
    from pyspark.sql import functions as F

    topic = "SparkWritten"
    create_topic(broker.namesrv, broker.broker, topic, 4)
    df = (
        spark.range(ROWS)
        .repartition(3)
        .select(
            F.concat(F.lit("payload-"), F.col("id").cast("string")).cast("binary").alias("body"),
            F.concat(F.lit("key-"), F.col("id").cast("string")).alias("keys"),
            F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tags"),
            F.create_map(
                F.lit("source"), F.lit("spark"), F.lit("n"), F.col("id").cast("string")
            ).alias("properties"),
        )
    )
    df.write.format("rocketmq").option("namesrv", broker.namesrv).option("topic", topic).mode(
        "append"
    ).save()

    assert sum(hi for _, hi in queue_bounds(broker.namesrv, topic).values()) == ROWS
    back = _read(spark, broker.namesrv, topic).select(
        "keys",
        F.col("body").cast("string").alias("body"),
        "tags",
        F.col("properties")["n"].alias("n"),
        F.col("properties")["SPARK_WRITE_ID"].alias("write_id"),
    )
    rows = back.collect()
    assert len(rows) == ROWS
    assert {(r["keys"], r["body"]) for r in rows} == {
        (f"key-{i}", f"payload-{i}") for i in range(ROWS)
    }
    assert all(r["tags"] == ("even" if int(r["n"]) % 2 == 0 else "odd") for r in rows)
    assert all(r["keys"] == f"key-{r['n']}" for r in rows)
    ids = [r["write_id"] for r in rows]
    assert len(set(ids)) == ROWS
    parts = {tuple(i.split(":")[:3]) for i in ids}
    assert {p[1] for p in parts} == {"0"}  # a batch write is batch 0 of its own write id
    assert len({p[0] for p in parts}) == 1 and len(parts) == 3  # one write, 3 partitions

    by_tag = (
        spark.read.format("rocketmq")
        .option("namesrv", broker.namesrv)
        .option("topic", topic)
        .option("subExpression", "even")
        .load()
    )
    assert by_tag.count() == ROWS // 2


def test_write_columns_choose_topic_queue_and_keys(spark: Any, broker: StandaloneBroker) -> None:
    from pyspark.sql import functions as F

    a, b = "SparkRoutedA", "SparkRoutedB"
    create_topic(broker.namesrv, broker.broker, a, 4)
    create_topic(broker.namesrv, broker.broker, b, 4)
    df = spark.range(200).select(
        F.col("id").cast("string").alias("body"),
        F.when(F.col("id") < 100, a).otherwise(b).alias("topic"),
        F.lit(2).alias("queueId"),
        F.array(F.lit("x"), F.col("id").cast("string")).alias("keys"),
    )
    df.write.format("rocketmq").option("namesrv", broker.namesrv).mode("append").save()
    for topic in (a, b):
        bounds = queue_bounds(broker.namesrv, topic)
        assert {q: hi for (_, q), (_, hi) in bounds.items()} == {0: 0, 1: 0, 2: 100, 3: 0}
    keys = {r["keys"] for r in _read(spark, broker.namesrv, a).collect()}
    assert keys == {f"x {i}" for i in range(100)}


def test_write_errors_name_the_problem(spark: Any, broker: StandaloneBroker) -> None:
    from pyspark.sql import functions as F

    no_body = spark.range(3).select(F.col("id").cast("string").alias("payload"))
    with pytest.raises(Exception, match="needs a column body"):
        no_body.write.format("rocketmq").option("namesrv", broker.namesrv).option(
            "topic", "SparkWritten"
        ).mode("append").save()
    bad_queue = spark.range(3).select(
        F.col("id").cast("string").alias("body"), F.lit(9).alias("queueId")
    )
    create_topic(broker.namesrv, broker.broker, "SparkFourQueues", 4)
    with pytest.raises(Exception, match="has no queue 9"):
        bad_queue.write.format("rocketmq").option("namesrv", broker.namesrv).option(
            "topic", "SparkFourQueues"
        ).mode("append").save()


def test_streaming_write_of_two_micro_batches(
    spark: Any, broker: StandaloneBroker, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    source, sink = "SparkStreamIn", "SparkStreamOut"
    create_topic(broker.namesrv, broker.broker, source, 2)
    create_topic(broker.namesrv, broker.broker, sink, 2)
    spark.range(600).select(
        F.concat(F.lit("s-"), F.col("id").cast("string")).alias("body")
    ).write.format("rocketmq").option("namesrv", broker.namesrv).option("topic", source).mode(
        "append"
    ).save()

    query = (
        spark.readStream.format("rocketmq")
        .option("namesrv", broker.namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "300")
        .load()
        .select("body", F.lit("relayed").alias("tags"))
        .writeStream.format("rocketmq")
        .option("namesrv", broker.namesrv)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [300, 300]

    rows = (
        _read(spark, broker.namesrv, sink)
        .select(
            F.col("body").cast("string").alias("body"),
            "tags",
            F.col("properties")["SPARK_WRITE_ID"].alias("wid"),
        )
        .collect()
    )
    assert sorted(r["body"] for r in rows) == sorted(f"s-{i}" for i in range(600))
    assert {r["tags"] for r in rows} == {"relayed"}
    ids = [r["wid"] for r in rows]
    assert len(set(ids)) == 600
    assert {i.split(":")[0] for i in ids} == {str(query.id)}
    assert {i.split(":")[1] for i in ids} == {"0", "1"}


def test_delay_level_and_deliver_at_columns(spark: Any, broker: StandaloneBroker) -> None:
    from pyspark.sql import functions as F

    topic = "SparkDelayed"
    create_topic(broker.namesrv, broker.broker, topic, 2)
    sent_ms = int(time.time() * 1000)
    df = spark.createDataFrame(
        [("by-level", 1, None), ("by-time", None, sent_ms + 1500)],
        "body STRING, delayTimeLevel INT, deliverAt BIGINT",
    )
    df.write.format("rocketmq").option("namesrv", broker.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    deadline = time.monotonic() + 30
    rows: list[Any] = []
    while time.monotonic() < deadline:
        rows = (
            _read(spark, broker.namesrv, topic)
            .select(
                F.col("body").cast("string").alias("body"),
                F.unix_millis("storeTimestamp").alias("t"),
            )
            .collect()
        )
        if len(rows) == 2:
            break
        time.sleep(0.5)
    stored = {r["body"]: r["t"] for r in rows}
    assert set(stored) == {"by-level", "by-time"}
    # Level 1 is 1 s by default; the timer is never early.
    assert stored["by-level"] >= sent_ms + 900
    assert stored["by-time"] >= sent_ms + 1500


def test_a_refused_send_fails_the_task_with_the_brokers_reason(spark: Any, tmp_path: Path) -> None:
    strict = start_standalone(tmp_path / "strict", SMALL_STORE | {"maxMessageSize": str(32 << 10)})
    try:
        create_topic(strict.namesrv, strict.broker, "SparkStrict", 1)
        # Random bytes: the producer's compression cannot bring them under the broker's limit.
        df = spark.createDataFrame([(bytearray(os.urandom(40_000)),)], "body BINARY")
        # MessageIllegalError with the broker's remark, from the failed task.
        with pytest.raises(Exception, match="exceeds maxMessageSize 32768"):
            df.write.format("rocketmq").option("namesrv", strict.namesrv).option(
                "topic", "SparkStrict"
            ).mode("append").save()
    finally:
        strict.stop()
