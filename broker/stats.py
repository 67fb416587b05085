"""``BrokerStats``: message counters and rates an operator asks the broker for.

RocketMQ counterpart: ``BrokerStats`` / ``BrokerStatsManager`` as far as
GET_BROKER_RUNTIME_INFO, GET_CONSUME_STATS and VIEW_BROKER_STATS_DATA report them: messages
put and got, rates over the last sampling window (10 s), and ``StatsItem``'s windows: a
snapshot of each counter every 10 s (the last 7 make the minute), every 10 minutes (the
last 7 make the hour) and every hour (the last 25 make the day); a window's figures are
what changed between its first and last snapshot.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from remoting.bodies import BrokerStatsData, StatsSnapshot

SAMPLE_INTERVAL_S = 10.0
# StatsItem's windows: samples kept, and how many 10 s samples apart they are taken.
MINUTE_SAMPLES, HOUR_SAMPLES, DAY_SAMPLES = 7, 7, 25
HOUR_EVERY, DAY_EVERY = 60, 360  # every 10 minutes, every hour
# The statistics VIEW_BROKER_STATS_DATA serves (BrokerStatsManager's names), and what their
# keys are: a topic, ``topic@group``, or the cluster's name for the broker's totals.
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
GROUP_GET_NUMS, GROUP_GET_SIZE = "GROUP_GET_NUMS", "GROUP_GET_SIZE"
BROKER_PUT_NUMS, BROKER_GET_NUMS = "BROKER_PUT_NUMS", "BROKER_GET_NUMS"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
# StoreStatsService's put-latency buckets, as putMessageDistributeTime names them; their
# bounds (10 ms ... 10 s) are all bounds of the put-latency histogram below too, so this
# minute's counts are differences of that histogram's, not counted a second time per put.
PUT_DISTRIBUTION_S = (0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0)
PUT_DISTRIBUTION_NAMES = (
    "<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s", "1~2s",
    "2~3s", "3~4s", "4~5s", "5~10s", "10s~",
)  # fmt: skip
DISTRIBUTION_RESET_SAMPLES = 6  # every minute
TPS_WINDOWS_S = (10, 60, 600)  # StoreStatsService's getPutTps etc.: "<10 s> <60 s> <600 s>"
# Upper bounds of the put-latency histogram, seconds (the last bucket is +Inf).
PUT_LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 3.0,
    4.0, 5.0, 10.0,
)  # fmt: skip


Snapshot = tuple[int, int, int]  # (epoch ms, value, calls)


@dataclass(slots=True)
class _Windows:
    minute: deque[Snapshot] = field(default_factory=lambda: deque(maxlen=MINUTE_SAMPLES))
    hour: deque[Snapshot] = field(default_factory=lambda: deque(maxlen=HOUR_SAMPLES))
    day: deque[Snapshot] = field(default_factory=lambda: deque(maxlen=DAY_SAMPLES))


def _window(snapshots: deque[Snapshot]) -> StatsSnapshot:
    """``StatsItem.computeStatsData``: the change between the first and last snapshot."""
    if len(snapshots) < 2:
        return StatsSnapshot()
    (t0, v0, c0), (t1, v1, c1) = snapshots[0], snapshots[-1]
    total = v1 - v0
    tps = total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0
    calls = c1 - c0
    return StatsSnapshot(total, tps, total / calls if calls > 0 else 0.0)


class BrokerStats:
    def __init__(self, cluster: str = "DefaultCluster") -> None:
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
        # Requests behind those counts (a batch is one), for the windows' per-call average.
        self.put_calls = 0
        self.get_calls = 0
        self.topic_put_calls: dict[str, int] = defaultdict(int)
        self.group_topic_get_calls: dict[tuple[str, str], int] = defaultdict(int)
        self.group_topic_send_back: dict[tuple[str, str], int] = defaultdict(int)
        self.cluster = cluster
        self._windows: dict[tuple[str, str], _Windows] = {}
        self._ticks = 0
        # StoreStatsService's figures for GET_BROKER_RUNTIME_INFO: pulls that found
        # messages and those that did not, the slowest put and get, this minute's put
        # latencies, and the totals at the last two local midnights (BrokerStats.record).
        self.get_miss = 0  # pulls that found nothing (get_calls: those that found some)
        self.put_max_s = 0.0
        self.get_max_ms = 0.0
        self._minute_base = [0] * (len(PUT_LATENCY_BUCKETS_S) + 1)  # the histogram then
        self._history: deque[tuple[float, int, int, int, int]] = deque(
            maxlen=TPS_WINDOWS_S[-1] // int(SAMPLE_INTERVAL_S) + 1
        )
        self._day = time.localtime().tm_yday
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0
        self._sampled_ms = int(time.time() * 1000)  # the last sample (the start before one)
        self.put_latency_counts = [0] * (len(PUT_LATENCY_BUCKETS_S) + 1)
        self.put_latency_sum_s = 0.0
        self._sample_at = self.started
        self._last: tuple[float, int, int, dict[str, int]] = (self.started, 0, 0, {})
        self._rates: tuple[float, float, dict[str, float]] = (0.0, 0.0, {})

    def on_put(
        self, count: int, topic: str = "", nbytes: int = 0, latency_s: float | None = None
    ) -> None:
        self.put_total += count
        self.put_calls += 1
        if topic:
            self.topic_put[topic] += count
            self.topic_put_bytes[topic] += nbytes
            self.topic_put_calls[topic] += 1
        if latency_s is not None:
            self.put_latency_counts[bisect.bisect_left(PUT_LATENCY_BUCKETS_S, latency_s)] += 1
            self.put_latency_sum_s += latency_s
            if latency_s > self.put_max_s:  # noqa: PLR1730 - a compare, not a call, per put
                self.put_max_s = latency_s

    def on_get(self, group: str, count: int, topic: str = "", nbytes: int = 0) -> None:
        self.get_total += count
        self.get_calls += 1
        self.group_get[group] += count
        if topic:
            key = (group, topic)
            self.group_topic_get[key] += count
            self.group_topic_get_bytes[key] += nbytes
            self.group_topic_get_calls[key] += 1

    def on_get_miss(self) -> None:
        """A pull that found no message (getMissTps)."""
        self.get_miss += 1

    def on_get_time(self, seconds: float) -> None:
        ms = seconds * 1000
        self.get_max_ms = max(self.get_max_ms, ms)

    def on_send_back(self, group: str, topic: str) -> None:
        """A consumer sent a message back for a later retry (SNDBCK_PUT_NUMS)."""
        self.group_topic_send_back[(group, topic)] += 1

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
        self._history.append((now, self.put_total, self.get_calls, self.get_miss, self.get_total))
        self._sample_windows()
        if self._ticks % DISTRIBUTION_RESET_SAMPLES == 0:
            self._minute_base = list(self.put_latency_counts)
        today = time.localtime().tm_yday
        if today != self._day:  # a local midnight went by
            self._day = today
            self.put_yesterday_morning, self.put_today_morning = (
                self.put_today_morning,
                self.put_total,
            )
            self.get_yesterday_morning, self.get_today_morning = (
                self.get_today_morning,
                self.get_total,
            )

    def tps_triplet(self, which: int) -> str:
        """``"<10 s> <60 s> <600 s>"`` rates of a counter (1 put, 2 pulls that found, 3 pulls
        that did not, 4 messages got; 5: 2 + 3), each over the samples that window has."""
        history = self._history
        if len(history) < 2:
            return "0.00 0.00 0.00"
        last = history[-1]
        out = []
        for window_s in TPS_WINDOWS_S:
            back = min(len(history) - 1, round(window_s / SAMPLE_INTERVAL_S))
            first = history[-1 - back]
            dt = max(last[0] - first[0], 1e-3)
            n: float
            if which == 5:
                n = (last[2] + last[3]) - (first[2] + first[3])
            else:
                n = last[which] - first[which]
            out.append(f"{n / dt:.2f}")
        return " ".join(out)

    @property
    def put_distribution(self) -> list[int]:
        """This minute's puts per putMessageDistributeTime bucket (``<=0ms`` stays 0: a put
        takes time), from the put-latency histogram's counts since the minute began."""
        bounds = PUT_LATENCY_BUCKETS_S
        out = [0]
        seen = 0
        for bound in PUT_DISTRIBUTION_S:
            upto = bounds.index(bound) + 1
            n = sum(self.put_latency_counts[:upto]) - sum(self._minute_base[:upto])
            out.append(n - seen)
            seen = n
        total = sum(self.put_latency_counts) - sum(self._minute_base)
        out.append(total - seen)
        return out

    def put_distribution_text(self) -> str:
        """``putMessageDistributeTime``: ``[<=0ms]:N [0~10ms]:N … [10s~]:N `` this minute."""
        return "".join(
            f"[{name}]:{n} "
            for name, n in zip(PUT_DISTRIBUTION_NAMES, self.put_distribution, strict=True)
        )

    def put_latency_quantile_ms(self, q: float) -> float:
        """The put latency at quantile ``q`` since boot, as the upper bound of its bucket
        (-1 before any put)."""
        total = sum(self.put_latency_counts)
        if not total:
            return -1.0
        need = q * total
        seen = 0
        for i, n in enumerate(self.put_latency_counts):
            seen += n
            if seen >= need:
                bound = PUT_LATENCY_BUCKETS_S[min(i, len(PUT_LATENCY_BUCKETS_S) - 1)]
                return bound * 1000
        return PUT_LATENCY_BUCKETS_S[-1] * 1000

    def _counters(self) -> Iterator[tuple[str, str, int, int]]:
        """Every statistic with its key, value and calls, as VIEW_BROKER_STATS_DATA names
        them."""
        yield BROKER_PUT_NUMS, self.cluster, self.put_total, self.put_calls
        yield BROKER_GET_NUMS, self.cluster, self.get_total, self.get_calls
        for topic, n in self.topic_put.items():
            calls = self.topic_put_calls.get(topic, 0)
            yield TOPIC_PUT_NUMS, topic, n, calls
            yield TOPIC_PUT_SIZE, topic, self.topic_put_bytes.get(topic, 0), calls
        for (group, topic), n in self.group_topic_get.items():
            calls = self.group_topic_get_calls.get((group, topic), 0)
            key = f"{topic}@{group}"
            yield GROUP_GET_NUMS, key, n, calls
            yield GROUP_GET_SIZE, key, self.group_topic_get_bytes.get((group, topic), 0), calls
        for (group, topic), n in self.group_topic_send_back.items():
            yield SNDBCK_PUT_NUMS, f"{topic}@{group}", n, n

    def _sample_windows(self, now_ms: Callable[[], float] = time.time) -> None:
        self._ticks += 1
        hour, day = self._ticks % HOUR_EVERY == 0, self._ticks % DAY_EVERY == 0
        ms = int(now_ms() * 1000)
        windows = self._windows
        for name, key, value, calls in list(self._counters()):
            w = windows.get((name, key))
            if w is None:
                # Counted since the last sample: it was 0 then, so its first window already
                # holds what it counted (RocketMQ's starts at the first sample, losing that).
                w = windows[(name, key)] = _Windows()
                zero = (self._sampled_ms, 0, 0)
                w.minute.append(zero)
                w.hour.append(zero)
                w.day.append(zero)
            snap = (ms, value, calls)
            w.minute.append(snap)
            if hour:
                w.hour.append(snap)
            if day:
                w.day.append(snap)
        self._sampled_ms = ms

    def view(self, name: str, key: str) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: ``name`` of ``key`` over the last minute, hour and day;
        None when the broker has no such statistic (nothing counted for that key yet)."""
        w = self._windows.get((name, key))
        if w is None:
            return None
        return BrokerStatsData(_window(w.minute), _window(w.hour), _window(w.day))

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
