"""``BrokerStats``: message counters and rates an operator asks the broker for.

RocketMQ counterpart: ``BrokerStats`` / ``BrokerStatsManager`` as far as
GET_BROKER_RUNTIME_INFO and GET_CONSUME_STATS report them: messages put and got, and rates
over the last sampling window (10 s).
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict

SAMPLE_INTERVAL_S = 10.0
# Upper bounds of the put-latency histogram, seconds (the last bucket is +Inf).
PUT_LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class BrokerStats:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.put_total = 0
        self.get_total = 0
        self.group_get: dict[str, int] = defaultdict(int)
        # Per topic and per (group, topic), and put latency buckets: read by the metrics
        # endpoint at scrape time, so counting costs a dict update per request and no more.
        self.topic_put: dict[str, int] = defaultdict(int)
        self.topic_put_bytes: dict[str, int] = defaultdict(int)
        self.group_topic_get: dict[tuple[str, str], int] = defaultdict(int)
        self.group_topic_get_bytes: dict[tuple[str, str], int] = defaultdict(int)
        self.put_latency_counts = [0] * (len(PUT_LATENCY_BUCKETS_S) + 1)
        self.put_latency_sum_s = 0.0
        self._sample_at = self.started
        self._last: tuple[float, int, int, dict[str, int]] = (self.started, 0, 0, {})
        self._rates: tuple[float, float, dict[str, float]] = (0.0, 0.0, {})

    def on_put(
        self, count: int, topic: str = "", nbytes: int = 0, latency_s: float | None = None
    ) -> None:
        self.put_total += count
        if topic:
            self.topic_put[topic] += count
            self.topic_put_bytes[topic] += nbytes
        if latency_s is not None:
            self.put_latency_counts[bisect.bisect_left(PUT_LATENCY_BUCKETS_S, latency_s)] += 1
            self.put_latency_sum_s += latency_s

    def on_get(self, group: str, count: int, topic: str = "", nbytes: int = 0) -> None:
        self.get_total += count
        self.group_get[group] += count
        if topic:
            self.group_topic_get[(group, topic)] += count
            self.group_topic_get_bytes[(group, topic)] += nbytes

    def sample(self) -> None:
        """Take a rate sample (the broker calls this every ``SAMPLE_INTERVAL_S``)."""
        now = time.monotonic()
        then, put, got, groups = self._last
        dt = max(now - then, 1e-3)
        self._rates = (
            (self.put_total - put) / dt,
            (self.get_total - got) / dt,
            {g: (n - groups.get(g, 0)) / dt for g, n in self.group_get.items()},
        )
        self._last = (now, self.put_total, self.get_total, dict(self.group_get))

    def put_tps(self) -> float:
        return self._rates[0]

    def get_tps(self) -> float:
        return self._rates[1]

    def consume_tps(self, group: str) -> float:
        return self._rates[2].get(group, 0.0)

    def runtime_text(self) -> str:
        """RocketMQ's ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
        s = int(time.monotonic() - self.started)
        days, hours, minutes = s // 86400, s % 86400 // 3600, s % 3600 // 60
        return f"[ {days} days, {hours} hours, {minutes} minutes, {s % 60} seconds ]"
