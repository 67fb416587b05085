"""A push consumer's own figures per topic: pull and consume latency and rates.

RocketMQ counterpart: ``org.apache.rocketmq.client.stat.ConsumerStatsManager`` and the
``ConsumeStatus`` it reports in ``ConsumerRunningInfo.statusTable`` (mqadmin consumerStatus's
``#Consumer RT&TPS#`` table, rocketmq-exporter's ``rocketmq_client_*`` series).

Java keeps a cumulative sum per key and samples it every 10 seconds; the minute figures are
the difference across the last minute's samples. Here each topic keeps one list per
10-second bucket for an hour (a bucket only when something happened in it) holding every
figure at once: a record reads the clock once, finds the current bucket and adds to it;
the figures are summed only when someone asks. Times are summed as seconds and averaged
to milliseconds when read.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

BUCKET_S = 10
MINUTE_BUCKETS = 6  # the current bucket and the five before: the last 50 to 60 seconds
HOUR_BUCKETS = 360

# A bucket's slots.
NUMBER, PULL_RT, PULLS, PULLED, CONSUME_RT, CONSUMES, OK, FAILED = range(8)

Bucket = list[float]


class ConsumerStats:
    """One consumer group's figures, per topic (its retry topic included)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._topics: dict[str, deque[Bucket]] = {}

    def _bucket(self, topic: str, now: float) -> Bucket:
        """The current bucket of ``topic``, begun when the last one is older (the hour's
        oldest let go)."""
        number = now // BUCKET_S
        buckets = self._topics.get(topic)
        if buckets is None:
            buckets = self._topics[topic] = deque()
        while buckets and buckets[0][NUMBER] <= number - HOUR_BUCKETS:
            buckets.popleft()
        bucket = [number, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        buckets.append(bucket)
        return bucket

    def pulled(self, topic: str, began: float, found: int) -> None:
        """A pull sent at ``began`` (the clock's time) answered now with ``found`` messages
        (``incPullRT``, ``incPullTPS``)."""
        now = self._clock()
        buckets = self._topics.get(topic)
        # Inlined: the current bucket, the usual case (a record is per message)
        if buckets and buckets[-1][NUMBER] == now // BUCKET_S:
            bucket = buckets[-1]
        else:
            bucket = self._bucket(topic, now)
        bucket[PULL_RT] += now - began
        bucket[PULLS] += 1
        bucket[PULLED] += found

    def consumed(self, topic: str, began: float, ok: bool) -> None:
        """One message's consume, begun at ``began``, ended now, well or not
        (``incConsumeRT``, ``incConsumeOKTPS`` / ``incConsumeFailedTPS``)."""
        now = self._clock()
        buckets = self._topics.get(topic)
        if buckets and buckets[-1][NUMBER] == now // BUCKET_S:
            bucket = buckets[-1]
        else:
            bucket = self._bucket(topic, now)
        bucket[CONSUME_RT] += now - began
        bucket[CONSUMES] += 1
        bucket[OK if ok else FAILED] += 1

    def status(self, topic: str) -> dict[str, float | int]:
        """``ConsumeStatus`` of ``topic``: average pull and consume times (ms) and pull,
        consume-OK and consume-failed rates (per second) over the last minute; messages that
        failed in the last hour."""
        now = self._clock()
        number = now // BUCKET_S
        first = number - MINUTE_BUCKETS + 1
        minute = [0.0] * 8
        failed_in_hour = 0.0
        for bucket in self._topics.get(topic, ()):
            if bucket[NUMBER] <= number - HOUR_BUCKETS:
                continue
            failed_in_hour += bucket[FAILED]
            if bucket[NUMBER] >= first:
                for slot in range(1, 8):
                    minute[slot] += bucket[slot]
        span = max(now - first * BUCKET_S, 1.0)
        return {
            "pullRT": minute[PULL_RT] * 1000 / minute[PULLS] if minute[PULLS] else 0.0,
            "pullTPS": minute[PULLED] / span,
            "consumeRT": minute[CONSUME_RT] * 1000 / minute[CONSUMES] if minute[CONSUMES] else 0.0,
            "consumeOKTPS": minute[OK] / span,
            "consumeFailedTPS": minute[FAILED] / span,
            "consumeFailedMsgs": int(failed_in_hour),
        }
