"""Which message queue a send goes to, avoiding brokers that were slow or failed.

RocketMQ counterpart: ``MQFaultStrategy``, ``LatencyFaultToleranceImpl`` and
``TopicPublishInfo``. Each send's latency marks its broker unavailable for a while:
latency ≥ 50/100/550/1000/2000/3000/15000 ms → 0/0/30/60/120/180/600 s; a failed send counts
as 30 s of latency (isolation), so a dead broker is skipped for 600 s and then tried again.
Queues are taken round-robin, skipping unavailable brokers; when every broker is marked, the
least bad one is used anyway. With the strategy off, a retry still avoids the broker that
just failed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from remoting.bodies import PERM_WRITE
from remoting.route import MessageQueue, TopicRouteData

LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
ISOLATION_LATENCY_MS = 30_000


def not_available_duration_ms(latency_ms: float) -> int:
    for limit, duration in zip(
        reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS), strict=True
    ):
        if latency_ms >= limit:
            return duration
    return 0


@dataclass(slots=True)
class _FaultItem:
    latency_ms: float
    start_ms: float  # available again from this moment


class LatencyFaultTolerance:
    """Broker name → when it is available again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.items: dict[str, _FaultItem] = {}

    def _now_ms(self) -> float:
        return self._clock() * 1000

    def update(self, broker_name: str, latency_ms: float, *, isolation: bool) -> None:
        latency = ISOLATION_LATENCY_MS if isolation else latency_ms
        duration = not_available_duration_ms(latency)
        self.items[broker_name] = _FaultItem(latency, self._now_ms() + duration)

    def is_available(self, broker_name: str) -> bool:
        item = self.items.get(broker_name)
        return item is None or self._now_ms() >= item.start_ms

    def pick_one_at_least(self) -> str | None:
        """The broker most likely to work among the marked ones (lowest latency, then
        soonest available), as Java's ``pickOneAtLeast`` does."""
        if not self.items:
            return None
        return min(self.items.items(), key=lambda kv: (kv[1].latency_ms, kv[1].start_ms))[0]


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of a topic, in route order."""

    queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_route: bool = False
    _next: int = field(default_factory=lambda: random.randrange(1 << 16))  # noqa: S311

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        info = cls(have_route=True)
        if route.order_topic_conf:
            # "broker-a:4;broker-b:4": ordered topics keep exactly these queues.
            for item in route.order_topic_conf.split(";"):
                name, _, count = item.partition(":")
                if count.isdigit():
                    info.queues.extend(MessageQueue(topic, name, i) for i in range(int(count)))
            info.order_topic = True
            return info
        masters = {b.broker_name for b in route.broker_datas if b.master_addr}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if qd.perm & PERM_WRITE and qd.broker_name in masters:
                info.queues.extend(
                    MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
                )
        return info

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def _step(self) -> int:
        self._next = (self._next + 1) & 0x7FFFFFFF
        return self._next

    def select_run(self, count: int) -> list[MessageQueue] | None:
        """What ``count`` calls of ``select()`` would choose, in one step: the queues in the
        order of first use, call ``k`` of the run choosing ``run[k % len(queues)]``; the
        counter moved on by ``count``. None, and nothing moved, when it would wrap within
        the run (each choice is then made alone)."""
        n = len(self.queues)
        start = self._next
        if not n or start + count > 0x7FFFFFFF:
            return None
        self._next = start + count
        return [self.queues[(start + 1 + k) % n] for k in range(min(n, count))]

    def select(self, last_broker: str | None = None) -> MessageQueue:
        """Round-robin, avoiding ``last_broker`` when another broker has queues."""
        if last_broker is not None:
            for _ in range(len(self.queues)):
                mq = self.queues[self._step() % len(self.queues)]
                if mq.broker_name != last_broker:
                    return mq
        return self.queues[self._step() % len(self.queues)]


class FaultStrategy:
    """``MQFaultStrategy``: choose a queue, and learn from each send's latency."""

    def __init__(self, *, enabled: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(clock)

    def select_run(self, info: TopicPublishInfo, count: int) -> list[MessageQueue] | None:
        """``count`` calls of ``select(info, None)`` at once (``TopicPublishInfo.select_run``)
        while every broker of the topic is available, as each of those calls would find;
        None where each choice must be made alone."""
        if self.enabled and self.tolerance.items:
            available = self.tolerance.is_available
            if not all(available(name) for name in {mq.broker_name for mq in info.queues}):
                return None
        return info.select_run(count)

    def select(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select(last_broker)
        n = len(info.queues)
        for _ in range(n):
            mq = info.queues[info._step() % n]
            if self.tolerance.is_available(mq.broker_name):
                return mq
        # Every broker is marked: try the least bad one, if it still has queues here.
        least = self.tolerance.pick_one_at_least()
        candidates = [mq for mq in info.queues if mq.broker_name == least]
        if candidates:
            return candidates[info._step() % len(candidates)]
        return info.select(last_broker)

    def update(self, broker_name: str, latency_ms: float, *, isolation: bool) -> None:
        if self.enabled:
            self.tolerance.update(broker_name, latency_ms, isolation=isolation)
