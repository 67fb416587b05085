"""A push consumer's own figures per topic: pull and consume latency and rates.

RocketMQ counterpart: ``org.apache.rocketmq.client.stat.ConsumerStatsManager`` and the
``ConsumeStatus`` it reports in ``ConsumerRunningInfo.statusTable`` (mqadmin consumerStatus's
``#Consumer RT&TPS#`` table, rocketmq-exporter's ``rocketmq_client_*`` series).

Java keeps a cumulative sum per key and samples it every 10 seconds; the minute figures are
the difference across the last minute's samples. Here each key keeps 10-second buckets for
an hour (a bucket only when something happened in it): a record adds to the current bucket,
and a read sums the buckets of the last minute (rates, averages) or hour (failed messages).
Recording is two integer additions and one bucket check; the figures are computed only when
someone asks.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

BUCKET_S = 10
MINUTE_BUCKETS = 6  # the current bucket and the five before: the last 50 to 60 seconds
HOUR_BUCKETS = 360


class _Window:
    """(bucket number, value sum, count) per 10-second bucket, the last hour's."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: deque[list[int]] = deque()

    def add(self, bucket: int, value: int, times: int) -> None:
        buckets = self.buckets
        if buckets and buckets[-1][0] == bucket:
            last = buckets[-1]
            last[1] += value
            last[2] += times
            return
        buckets.append([bucket, value, times])
        while buckets[0][0] <= bucket - HOUR_BUCKETS:
            buckets.popleft()

    def since(self, first_bucket: int) -> tuple[int, int]:
        """The value sum and count of the buckets from ``first_bucket`` on."""
        value = times = 0
        for number, v, t in reversed(self.buckets):
            if number < first_bucket:
                break
            value += v
            times += t
        return value, times


class _TopicStats:
    __slots__ = ("consume_failed", "consume_ok", "consume_rt", "pull_rt", "pull_tps")

    def __init__(self) -> None:
        self.pull_rt = _Window()
        self.pull_tps = _Window()
        self.consume_rt = _Window()
        self.consume_ok = _Window()
        self.consume_failed = _Window()


class ConsumerStats:
    """One consumer group's figures, per topic (its retry topic included)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._topics: dict[str, _TopicStats] = {}

    def _of(self, topic: str) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats()
        return stats

    def pulled(self, topic: str, rt_ms: int, found: int) -> None:
        """One pull answered after ``rt_ms`` with ``found`` messages (``incPullRT``,
        ``incPullTPS``)."""
        stats = self._of(topic)
        bucket = int(self._clock()) // BUCKET_S
        stats.pull_rt.add(bucket, rt_ms, 1)
        if found:
            stats.pull_tps.add(bucket, found, 1)

    def consumed(self, topic: str, rt_ms: int, ok: bool) -> None:
        """One message's consume took ``rt_ms`` and succeeded or not (``incConsumeRT``,
        ``incConsumeOKTPS`` / ``incConsumeFailedTPS``)."""
        stats = self._of(topic)
        bucket = int(self._clock()) // BUCKET_S
        stats.consume_rt.add(bucket, rt_ms, 1)
        (stats.consume_ok if ok else stats.consume_failed).add(bucket, 1, 1)

    def status(self, topic: str) -> dict[str, float | int]:
        """``ConsumeStatus`` of ``topic``: average pull and consume times (ms) and pull,
        consume-OK and consume-failed rates (per second) over the last minute; messages that
        failed in the last hour."""
        stats = self._topics.get(topic)
        doc: dict[str, float | int] = {
            "pullRT": 0.0,
            "pullTPS": 0.0,
            "consumeRT": 0.0,
            "consumeOKTPS": 0.0,
            "consumeFailedTPS": 0.0,
            "consumeFailedMsgs": 0,
        }
        if stats is None:
            return doc
        now = self._clock()
        bucket = int(now) // BUCKET_S
        first = bucket - MINUTE_BUCKETS + 1
        span = max(now - first * BUCKET_S, 1.0)

        def avg(window: _Window) -> float:
            value, times = window.since(first)
            return value / times if times else 0.0

        def tps(window: _Window) -> float:
            return window.since(first)[0] / span

        doc["pullRT"] = avg(stats.pull_rt)
        doc["pullTPS"] = tps(stats.pull_tps)
        doc["consumeRT"] = avg(stats.consume_rt)
        doc["consumeOKTPS"] = tps(stats.consume_ok)
        doc["consumeFailedTPS"] = tps(stats.consume_failed)
        doc["consumeFailedMsgs"] = stats.consume_failed.since(bucket - HOUR_BUCKETS + 1)[0]
        return doc
