"""A streaming job: JSON orders from a RocketMQ topic, totals per minute, into Parquet.

Reads ``format("rocketmq")``, parses each body as an order, and counts orders and sums
amounts per one-minute event-time window. A window is written once the watermark (the
newest event time seen, less ``--lateness``) has passed its end, so each Parquet row is
final. The checkpoint makes the job resumable: run it again and it picks up where it
stopped, with no order counted twice.

    python examples/spark/orders_per_minute.py --namesrv 127.0.0.1:9876 --topic orders \\
        --out /tmp/orders-per-minute --checkpoint /tmp/orders-per-minute.ckpt --available-now

Without ``--available-now`` it runs until stopped, a micro-batch every ``--every`` seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER_SCHEMA = "orderId BIGINT, customer STRING, amount DOUBLE, ts BIGINT"


def per_minute(
    spark: Any, namesrv: str, topic: str, lateness: str, max_per_trigger: int | None
) -> Any:
    """The streaming DataFrame of per-minute totals (not started)."""
    reader = (
        spark.readStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    orders = (
        reader.load()
        .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"))
        .select("o.*")
        .where(F.col("orderId").isNotNull())  # bodies that are not orders are dropped
        .withColumn("eventTime", F.timestamp_millis("ts"))
    )
    return (
        orders.withWatermark("eventTime", lateness)
        .groupBy(F.window("eventTime", "1 minute").alias("minute"))
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount"))
        .select(
            F.col("minute.start").alias("minuteStart"),
            F.col("minute.end").alias("minuteEnd"),
            "orders",
            "amount",
        )
    )


def start(
    spark: Any,
    namesrv: str,
    topic: str,
    out: str,
    checkpoint: str,
    *,
    available_now: bool,
    every_s: int = 10,
    lateness: str = "1 minute",
    max_per_trigger: int | None = None,
) -> Any:
    """Start the job; returns the StreamingQuery."""
    writer = (
        per_minute(spark, namesrv, topic, lateness, max_per_trigger)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .queryName("orders_per_minute")
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{every_s} seconds")
    )
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--out", required=True, help="Parquet directory")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    parser.add_argument("--every", type=int, default=10, help="seconds between micro-batches")
    parser.add_argument("--lateness", default="1 minute", help="how late an order may arrive")
    parser.add_argument("--max-per-trigger", type=int, help="messages per micro-batch at most")
    args = parser.parse_args()
    # Local runs: Spark's Python workers must use this interpreter (it has the connector),
    # not whatever python3 is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName("orders-per-minute")
        .config("spark.sql.shuffle.partitions", "8")  # a few minutes of windows, not 200 tasks
        .getOrCreate()
    )
    query = start(
        spark,
        args.namesrv,
        args.topic,
        args.out,
        args.checkpoint,
        available_now=args.available_now,
        every_s=args.every,
        lateness=args.lateness,
        max_per_trigger=args.max_per_trigger,
    )
    query.awaitTermination()
    spark.read.parquet(args.out).orderBy("minuteStart").show(truncate=False)


if __name__ == "__main__":
    main()
