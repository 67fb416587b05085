"""A batch job: copy the messages a topic stored in a time range into another topic.

The read starts at the first message stored at ``--from`` and ends before the first stored
at ``--to`` (the broker's search-offset-by-time, per queue); bodies, tags, keys and user
properties travel as they were, and every copy carries ``SPARK_WRITE_ID`` so a consumer can
drop the duplicates a retried task may send. Typical use: replay an incident window into a
scratch topic, or re-feed a consumer that mishandled an hour of traffic.

    python examples/spark/replay_time_range.py --namesrv 127.0.0.1:9876 --topic orders \\
        --target orders-replay --from 2026-11-22T10:00:00Z --to 2026-11-22T11:00:00Z
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def epoch_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (``Z`` or an offset; naive means UTC)."""
    if text.isdigit():
        return int(text)
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def replay(spark: Any, namesrv: str, topic: str, *, target: str, start_ms: int, end_ms: int) -> int:
    """Copy ``topic``'s messages stored in ``[start_ms, end_ms)`` to ``target``; returns how
    many were copied."""
    window = (
        spark.read.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingTimestamp", str(start_ms))
        .option("endingTimestamp", str(end_ms))
        .load()
        .select(
            "body",
            "tags",
            "keys",
            # the source's own write ids would clash with the replay's, so they stay behind
            F.map_filter("properties", lambda k, _v: k != F.lit("SPARK_WRITE_ID")).alias(
                "properties"
            ),
        )
        .cache()
    )
    count = window.count()
    if count:
        window.write.format("rocketmq").option("namesrv", namesrv).option("topic", target).mode(
            "append"
        ).save()
    window.unpersist()
    return int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument("--target", required=True, help="the topic to write")
    parser.add_argument("--from", dest="start", required=True, help="ISO time or epoch ms")
    parser.add_argument("--to", dest="end", required=True, help="ISO time or epoch ms")
    args = parser.parse_args()
    start_ms, end_ms = epoch_ms(args.start), epoch_ms(args.end)
    if end_ms <= start_ms:
        parser.error("--to must be after --from")
    # Local runs: Spark's Python workers must use this interpreter (it has the connector),
    # not whatever python3 is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.appName("replay-time-range").getOrCreate()
    copied = replay(
        spark, args.namesrv, args.topic, target=args.target, start_ms=start_ms, end_ms=end_ms
    )
    print(f"copied {copied} messages from {args.topic} to {args.target}")


if __name__ == "__main__":
    main()
