"""A batch job: copy the messages a topic stored in a time range into another topic.

The read starts at the first message stored at ``--from`` and ends before the first stored
at ``--to`` (the broker's search-offset-by-time, per queue, made exact by the connector);
bodies, tags, keys and user properties travel as they were, and every copy carries
``SPARK_WRITE_ID`` so a consumer can drop the duplicates a retried task may send. Typical
use: replay an incident window into a scratch topic, or re-feed a consumer that mishandled
an hour of traffic. Times are ISO-8601, epoch milliseconds, ``now``, or relative to now
(``now-90m``, ``now-1h``, ``now-2d``); by default the last hour.

    python examples/spark/replay_time_range.py --namesrv 127.0.0.1:9876 --topic orders \\
        --target orders-replay --from now-1h --to now
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

_RELATIVE = re.compile(r"now-(\d+)([smhd])")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def epoch_ms(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from epoch ms, ``now``, a time relative to now (``now-30m``,
    ``now-1h``, ``now-2d``), or an ISO-8601 time (``Z`` or an offset; naive means UTC)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if text == "now":
        return now
    if text.isdigit():
        return int(text)
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return now - int(relative.group(1)) * _UNIT_MS[relative.group(2)]
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
    times = "ISO time, epoch ms, 'now' or now-30m / now-1h / now-2d"
    parser.add_argument("--from", dest="start", default="now-1h", help=f"{times} (now-1h)")
    parser.add_argument("--to", dest="end", default="now", help=f"{times} (now)")
    args = parser.parse_args()
    now_ms = int(time.time() * 1000)
    try:
        start_ms, end_ms = epoch_ms(args.start, now_ms), epoch_ms(args.end, now_ms)
    except ValueError as exc:
        parser.error(f"{exc}; times are {times}")
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
