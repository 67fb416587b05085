"""client.fault: the latency → not-available table, isolation, pick_one_at_least, the
publish info built from a route, and queue selection that avoids unavailable brokers and
comes back to them once their time is up (a fake clock, no sleeping)."""

from __future__ import annotations

from collections import Counter

import pytest

from client.fault import (
    FaultStrategy,
    LatencyFaultTolerance,
    TopicPublishInfo,
    not_available_duration_ms,
)
from remoting.bodies import PERM_READ, PERM_WRITE
from remoting.route import BrokerData, MessageQueue, QueueData, TopicRouteData


class FakeClock:
    """Seconds, as ``time.monotonic``; moved by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize(
    ("latency_ms", "duration_ms"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549.9, 0),
        (550, 30_000),
        (999, 30_000),
        (1000, 60_000),
        (1999, 60_000),
        (2000, 120_000),
        (3000, 180_000),
        (14_999, 180_000),
        (15_000, 600_000),
        (30_000, 600_000),
    ],
)
def test_duration_table(latency_ms: float, duration_ms: int) -> None:
    assert not_available_duration_ms(latency_ms) == duration_ms


def test_slow_broker_unavailable_for_its_duration() -> None:
    clock = FakeClock()
    lft = LatencyFaultTolerance(clock)
    assert lft.is_available("a")  # never seen: available
    lft.update("a", 1200, isolation=False)  # ≥ 1000 ms → 60 s
    lft.update("b", 20, isolation=False)  # fast → 0 s
    assert not lft.is_available("a")
    assert lft.is_available("b")
    clock.advance(59.999)
    assert not lft.is_available("a")
    clock.advance(0.001)
    assert lft.is_available("a")
    lft.update("a", 10, isolation=False)  # a fast send clears it at once
    assert lft.is_available("a")


def test_isolation_counts_as_30_s_latency() -> None:
    """A failed send is recorded as 30 000 ms of latency, which the table maps to 600 s, as
    Java's ``computeNotAvailableDuration(30000)`` does. (The module docstring says 180 s.)"""
    clock = FakeClock()
    lft = LatencyFaultTolerance(clock)
    lft.update("a", 1, isolation=True)
    assert lft.items["a"].latency_ms == 30_000
    clock.advance(599)
    assert not lft.is_available("a")
    clock.advance(1)
    assert lft.is_available("a")


def test_pick_one_at_least() -> None:
    clock = FakeClock()
    lft = LatencyFaultTolerance(clock)
    assert lft.pick_one_at_least() is None
    lft.update("a", 1, isolation=True)
    lft.update("b", 3500, isolation=False)  # 180 s, lower latency than the isolated one
    lft.update("c", 3600, isolation=False)
    assert lft.pick_one_at_least() == "b"
    clock.advance(1)
    lft.update("c", 3500, isolation=False)  # same latency as b, available later
    assert lft.pick_one_at_least() == "b"


# --------------------------------------------------------------------------- publish info


def route(*brokers: tuple[str, int, int, bool], order_conf: str | None = None) -> TopicRouteData:
    """(broker name, write queues, perm, has master) per broker."""
    return TopicRouteData(
        queue_datas=[QueueData(name, n, n, perm) for name, n, perm, _ in brokers],
        broker_datas=[
            BrokerData("c", name, {0: f"127.0.0.1:{10911 + i}"} if master else {1: "x:1"})
            for i, (name, _, _, master) in enumerate(brokers)
        ],
        order_topic_conf=order_conf,
    )


RW = PERM_READ | PERM_WRITE


def test_publish_info_from_route() -> None:
    info = TopicPublishInfo.from_route(
        "T",
        route(
            ("broker-b", 2, RW, True),
            ("broker-a", 3, RW, True),
            ("broker-ro", 4, PERM_READ, True),  # not writable
            ("broker-slave", 4, RW, False),  # no master
        ),
    )
    assert info.ok and info.have_route and not info.order_topic
    assert info.queues == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-a", 2),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]
    assert not TopicPublishInfo.from_route("T", route(("x", 4, PERM_READ, True))).ok
    assert not TopicPublishInfo().ok


def test_publish_info_order_topic_conf() -> None:
    info = TopicPublishInfo.from_route(
        "T", route(("broker-a", 8, RW, True), order_conf="broker-a:2;broker-b:1;bad")
    )
    assert info.order_topic
    assert info.queues == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
    ]


def two_brokers(queues: int = 4) -> TopicPublishInfo:
    return TopicPublishInfo.from_route(
        "T", route(("broker-a", queues, RW, True), ("broker-b", queues, RW, True))
    )


def test_round_robin_covers_every_queue() -> None:
    info = two_brokers()
    picked = Counter(info.select() for _ in range(80))
    assert set(picked) == set(info.queues)
    assert set(picked.values()) == {10}


def test_select_avoids_last_broker() -> None:
    info = two_brokers()
    for _ in range(20):
        assert info.select("broker-a").broker_name == "broker-b"
        assert info.select("broker-b").broker_name == "broker-a"
    single = TopicPublishInfo.from_route("T", route(("broker-a", 2, RW, True)))
    assert single.select("broker-a").broker_name == "broker-a"  # nowhere else to go


# --------------------------------------------------------------------------- the strategy


def test_strategy_avoids_unavailable_broker_and_recovers() -> None:
    clock = FakeClock()
    strategy = FaultStrategy(enabled=True, clock=clock)
    info = two_brokers()
    strategy.update("broker-a", 5, isolation=True)  # a send to broker-a failed
    assert not strategy.tolerance.is_available("broker-a")
    for _ in range(40):
        assert strategy.select(info, None).broker_name == "broker-b"
    clock.advance(600)
    assert strategy.tolerance.is_available("broker-a")
    picked = Counter(strategy.select(info, None).broker_name for _ in range(40))
    assert picked == {"broker-a": 20, "broker-b": 20}


def test_strategy_all_marked_uses_least_bad() -> None:
    clock = FakeClock()
    strategy = FaultStrategy(enabled=True, clock=clock)
    info = two_brokers()
    strategy.update("broker-a", 5, isolation=True)
    strategy.update("broker-b", 700, isolation=False)  # slow, 30 s
    for _ in range(10):
        assert strategy.select(info, None).broker_name == "broker-b"
    clock.advance(30)
    picked = {strategy.select(info, None).broker_name for _ in range(10)}
    assert picked == {"broker-b"}  # available again; broker-a still isolated


def test_strategy_least_bad_without_queues_falls_back() -> None:
    """The least bad broker does not serve this topic: plain round robin, avoiding the last
    broker."""
    strategy = FaultStrategy(enabled=True, clock=FakeClock())
    info = two_brokers()
    strategy.update("broker-x", 1, isolation=False)
    strategy.update("broker-x", 600, isolation=False)
    strategy.update("broker-a", 1, isolation=True)
    strategy.update("broker-b", 1, isolation=True)
    assert strategy.tolerance.pick_one_at_least() == "broker-x"
    for _ in range(10):
        assert strategy.select(info, "broker-a").broker_name == "broker-b"


def test_strategy_disabled_learns_nothing() -> None:
    strategy = FaultStrategy(enabled=False, clock=FakeClock())
    info = two_brokers()
    strategy.update("broker-a", 5, isolation=True)
    assert strategy.tolerance.items == {}
    assert {strategy.select(info, None).broker_name for _ in range(10)} == {
        "broker-a",
        "broker-b",
    }
    assert strategy.select(info, "broker-a").broker_name == "broker-b"


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("count", [0, 1, 3, 8, 9, 64, 100])
def test_select_run_is_count_selections_at_once(enabled: bool, count: int) -> None:
    """The producer's coalesced flush assigns a run of messages in one step: the same
    queues, message by message, as one select each, and the round robin left where those
    selections would leave it."""
    for queues in (3, 4):
        one, run = two_brokers(queues), two_brokers(queues)
        one._next = run._next = 12_345
        strategy = FaultStrategy(enabled=enabled, clock=FakeClock())
        expected = [strategy.select(one, None) for _ in range(count)]
        chosen = strategy.select_run(run, count)
        assert chosen is not None
        assert [chosen[k % len(run.queues)] for k in range(count)] == expected
        assert run._next == one._next
        assert strategy.select(run, None) == strategy.select(one, None)


def test_select_run_leaves_marked_brokers_and_the_wrap_to_select() -> None:
    clock = FakeClock()
    strategy = FaultStrategy(enabled=True, clock=clock)
    info = two_brokers()
    strategy.update("broker-x", 5, isolation=True)  # not a broker of this topic
    assert strategy.select_run(info, 8) is not None
    strategy.update("broker-a", 5, isolation=True)
    before = info._next
    assert strategy.select_run(info, 8) is None
    assert info._next == before
    clock.advance(600)
    assert strategy.select_run(info, 8) is not None
    info._next = 0x7FFFFFFF - 3  # the counter wraps within the run: one by one
    assert strategy.select_run(info, 8) is None
    assert strategy.select_run(info, 3) is not None
    assert FaultStrategy(enabled=True).select_run(TopicPublishInfo(), 4) is None
