"""``BrokerStats``: message counters and rates an operator asks the broker for.

RocketMQ counterpart: ``BrokerStats`` / ``BrokerStatsManager`` as far as
GET_BROKER_RUNTIME_INFO and GET_CONSUME_STATS report them: messages put and got, and rates
over the last sampling window (10 s).
"""

from __future__ import annotations

import time
from collections import defaultdict

SAMPLE_INTERVAL_S = 10.0


class BrokerStats:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.put_total = 0
        self.get_total = 0
        self.group_get: dict[str, int] = defaultdict(int)
        self._sample_at = self.started
        self._last: tuple[float, int, int, dict[str, int]] = (self.started, 0, 0, {})
        self._rates: tuple[float, float, dict[str, float]] = (0.0, 0.0, {})

    def on_put(self, count: int) -> None:
        self.put_total += count

    def on_get(self, group: str, count: int) -> None:
        self.get_total += count
        self.group_get[group] += count

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
