"""The console's live view: every few seconds, each broker's figures and each group's lag,
with the last hour of both kept in memory for the charts and pushed to open pages.

RocketMQ counterpart: rocketmq-dashboard's ``DashboardCollectTask`` (a broker's TPS once a
minute, written to JSON files, polled by the page every 5 s). Here a sample is taken every
``interval_s`` through the admin client (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO per
broker, GET_CONSUME_STATS per group) and handed to every waiting server-sent-events stream;
nothing is written to disk, and a restart of the console starts the hour afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from client.admin import Admin, ClusterInfo
from client.errors import RemotingError, RocketMQError
from remoting.bodies import BUILTIN_GROUPS, MALFORMED_BODY
from remoting.route import MASTER_ID, MessageQueue

log = logging.getLogger(__name__)

# what asking the cluster can fail with: a refusal, no answer, or an answer that does not parse
CLUSTER_FAILURES: tuple[type[Exception], ...] = (RocketMQError, *MALFORMED_BODY)
HISTORY_S = 3600.0
MAX_GROUPS = 500  # groups sampled per round; an operator with more reads mqadmin


def is_system_group(group: str) -> bool:
    """RocketMQ's built-in groups (MixAll's, the dashboard's set) and the broker's internal
    ``CID_RMQ_SYS_*`` groups."""
    return group in BUILTIN_GROUPS or group.startswith("CID_RMQ_SYS_")


def _first_tps(text: str | None) -> float:
    """``putTps`` and friends are ``"10s 1min 10min"`` figures; the first is the live one."""
    if not text:
        return 0.0
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


def _int(table: dict[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


@dataclass(slots=True)
class BrokerSample:
    """One broker process as the last round saw it."""

    cluster: str
    name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    answering: bool = True  # with an error: it answered, refusing (else no answer at all)
    replication_lag_bytes: int | None = None  # a slave: its master's log end minus its own

    @property
    def role(self) -> str:
        return "master" if self.broker_id == MASTER_ID else "slave"

    @property
    def key(self) -> str:
        return f"{self.name}:{self.broker_id}"

    @property
    def version(self) -> str:
        return self.runtime.get("brokerVersionDesc", "-")

    @property
    def in_tps(self) -> float:
        return _first_tps(self.runtime.get("putTps"))

    @property
    def out_tps(self) -> float:
        return _first_tps(self.runtime.get("getTransferedTps"))

    @property
    def disk_ratio(self) -> float | None:
        try:
            return float(self.runtime["commitLogDiskRatio"])
        except (KeyError, ValueError):
            return None

    @property
    def commit_log_max_offset(self) -> int | None:
        return _int(self.runtime, "commitLogMaxOffset")

    @property
    def slaves_connected(self) -> int:
        """A master's slaves connected now (``haConnectionNum``); its lag means nothing
        without one."""
        return _int(self.runtime, "haConnectionNum") or 0

    @property
    def dispatch_behind_bytes(self) -> int | None:
        return _int(self.runtime, "dispatchBehindBytes")

    @property
    def flush_behind(self) -> str:
        """``remainHowManyDataToFlush`` as the broker words it (Apache's ``"12.34 KB"``)."""
        return self.runtime.get("remainHowManyDataToFlush", "-")


@dataclass(slots=True)
class GroupSample:
    """One consumer group's position in every queue it reads, as the last round saw it."""

    group: str
    tps: float = 0.0
    queues: dict[MessageQueue, tuple[int, int, int]] = field(default_factory=dict)
    error: str | None = None

    @property
    def lag(self) -> int:
        return sum(max(0, broker - consumer) for broker, consumer, _ in self.queues.values())


class Series:
    """(unix seconds, value) pairs of the last ``HISTORY_S``, oldest first."""

    __slots__ = ("points",)

    def __init__(self, maxlen: int) -> None:
        self.points: deque[tuple[float, float]] = deque(maxlen=maxlen)

    def add(self, ts: float, value: float) -> None:
        self.points.append((ts, value))

    def columns(self) -> tuple[list[float], list[float]]:
        return [p[0] for p in self.points], [p[1] for p in self.points]


class Sampler:
    """Samples the cluster every ``interval_s``; ``wait_for(generation)`` wakes the streams."""

    def __init__(self, admin: Admin, interval_s: float = 5.0) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self._maxlen = max(2, int(HISTORY_S / interval_s))
        self.generation = 0
        self.sampled_at = 0.0
        self.error: str | None = None
        self.brokers: list[BrokerSample] = []
        self.clusters: dict[str, list[str]] = {}
        self.groups: dict[str, GroupSample] = {}
        self.system_groups: list[str] = []  # seen on the brokers, not sampled
        self.broker_in: dict[str, Series] = {}
        self.broker_out: dict[str, Series] = {}
        self.group_lag: dict[str, Series] = {}
        self._changed = asyncio.Condition()
        self._event: tuple[int, bytes] | None = None

    # ------------------------------------------------------------------ the loop

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            began = time.monotonic()
            try:
                await self.sample_once()
            except Exception:  # a round that fails is logged; the next one tries again
                log.exception("dashboard sample failed")
            wait = max(0.5, self.interval_s - (time.monotonic() - began))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), wait)

    async def sample_once(self) -> None:
        try:
            info = await self.admin.cluster_info()
        except CLUSTER_FAILURES as exc:
            self.error = f"the name server {self.admin.namesrv} did not answer: {exc}"
            await self._publish()
            return
        self.error = None
        self.clusters = info.clusters
        brokers = await self._sample_brokers(info)
        self.brokers = brokers
        self.groups = await self._sample_groups(brokers)
        now = time.time()
        for b in brokers:
            if b.error is None:
                self._series(self.broker_in, b.key).add(now, b.in_tps)
                self._series(self.broker_out, b.key).add(now, b.out_tps)
        for g in self.groups.values():
            if g.error is None:
                self._series(self.group_lag, g.group).add(now, g.lag)
        self.sampled_at = now
        await self._publish()

    async def ensure_sampled(self) -> None:
        """A round now if none has ended yet: the first page of a fresh console shows
        figures, not blanks until the loop's first round."""
        if not self.sampled_at and self.error is None:
            await self.sample_once()

    def _series(self, table: dict[str, Series], key: str) -> Series:
        series = table.get(key)
        if series is None:
            series = table[key] = Series(self._maxlen)
        return series

    async def _publish(self) -> None:
        async with self._changed:
            self.generation += 1
            self._changed.notify_all()

    async def wait_for(self, generation: int, timeout_s: float) -> int:
        """The generation after ``generation`` once a round ends (or the same on timeout)."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.generation != generation), timeout_s
                )
            return self.generation

    async def _sample_brokers(self, info: ClusterInfo) -> list[BrokerSample]:
        samples = [
            BrokerSample(data.cluster, name, broker_id, addr)
            for name, data in sorted(info.brokers.items())
            for broker_id, addr in sorted(data.broker_addrs.items())
        ]

        async def ask(sample: BrokerSample) -> None:
            try:
                sample.runtime = await self.admin.runtime_info(sample.addr)
            except CLUSTER_FAILURES as exc:
                sample.error = str(exc)
                # refused (Apache's 4.9 broker fails this in its first minute) is not down
                sample.answering = not isinstance(exc, RemotingError)

        await asyncio.gather(*(ask(s) for s in samples))
        masters = {s.name: s for s in samples if s.broker_id == MASTER_ID}
        for s in samples:
            master = masters.get(s.name)
            if s.broker_id != MASTER_ID and master is not None:
                ahead, own = master.commit_log_max_offset, s.commit_log_max_offset
                if ahead is not None and own is not None:
                    s.replication_lag_bytes = max(0, ahead - own)
        return samples

    async def _sample_groups(self, brokers: Iterable[BrokerSample]) -> dict[str, GroupSample]:
        names: set[str] = set()
        for b in brokers:
            if b.broker_id == MASTER_ID and b.error is None:
                try:
                    names.update(await self.admin.subscription_groups(b.addr))
                except CLUSTER_FAILURES as exc:
                    log.info("dashboard cannot list groups of %s: %s", b.addr, exc)
        self.system_groups = sorted(g for g in names if is_system_group(g))
        chosen = sorted(g for g in names if not is_system_group(g))[:MAX_GROUPS]
        samples = {g: GroupSample(g) for g in chosen}

        async def ask(sample: GroupSample) -> None:
            try:
                tps, table = await self.admin.consume_stats(sample.group)
            except CLUSTER_FAILURES as exc:
                sample.error = str(exc)
                return
            sample.tps = tps
            sample.queues = {
                mq: (w.broker_offset, w.consumer_offset, w.last_timestamp)
                for mq, w in table.items()
            }

        # a few at a time: a cluster with hundreds of groups must not queue a burst of
        # requests ahead of the clients' own on the brokers
        limit = asyncio.Semaphore(8)

        async def bounded(sample: GroupSample) -> None:
            async with limit:
                await ask(sample)

        await asyncio.gather(*(bounded(s) for s in samples.values()))
        return samples

    # ------------------------------------------------------------------ views

    def snapshot(self) -> dict[str, Any]:
        """What an open page updates itself from: the live figures, keyed as the pages'
        ``data-live`` attributes name them, and each chart's newest point."""
        live: dict[str, str] = {}
        points: dict[str, list[float]] = {}
        for b in self.brokers:
            live[f"broker.{b.key}.in"] = f"{b.in_tps:,.1f}"
            live[f"broker.{b.key}.out"] = f"{b.out_tps:,.1f}"
            if b.dispatch_behind_bytes is not None:
                live[f"broker.{b.key}.dispatch"] = f"{b.dispatch_behind_bytes:,}"
            if b.replication_lag_bytes is not None:
                live[f"broker.{b.key}.replication"] = f"{b.replication_lag_bytes:,}"
            if b.disk_ratio is not None:
                live[f"broker.{b.key}.disk"] = f"{b.disk_ratio:.1%}"
        for key, series in self.broker_in.items():
            if series.points:
                points[f"in.{key}"] = list(series.points[-1])
        for key, series in self.broker_out.items():
            if series.points:
                points[f"out.{key}"] = list(series.points[-1])
        for g in self.groups.values():
            live[f"group.{g.group}.lag"] = f"{g.lag:,}"
            live[f"group.{g.group}.tps"] = f"{g.tps:,.1f}"
            per_topic: dict[str, int] = {}
            for mq, (broker, consumer, _) in g.queues.items():
                lag = max(0, broker - consumer)
                live[f"queue.{g.group}.{mq.topic}.{mq.broker_name}.{mq.queue_id}"] = f"{lag:,}"
                per_topic[mq.topic] = per_topic.get(mq.topic, 0) + lag
            for topic, lag in per_topic.items():
                live[f"topiclag.{g.group}.{topic}"] = f"{lag:,}"
        for group, series in self.group_lag.items():
            if series.points:
                points[f"lag.{group}"] = list(series.points[-1])
        return {
            "generation": self.generation,
            "sampledAt": self.sampled_at,
            "error": self.error,
            "live": live,
            "points": points,
        }

    def event_bytes(self) -> bytes:
        """The last sample as one server-sent event, encoded once per round however many
        pages are open."""
        cached = self._event
        if cached is None or cached[0] != self.generation:
            data = json.dumps(self.snapshot(), separators=(",", ":"))
            cached = self._event = (self.generation, f"event: sample\ndata: {data}\n\n".encode())
        return cached[1]

    def history(self, kind: str, key: str) -> tuple[list[float], list[float]]:
        table = {"in": self.broker_in, "out": self.broker_out, "lag": self.group_lag}.get(kind)
        series = table.get(key) if table is not None else None
        return series.columns() if series is not None else ([], [])
