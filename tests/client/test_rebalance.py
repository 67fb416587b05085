"""Queue allocation strategies (client/rebalance.py) against Apache RocketMQ 4.9's Java client.

Golden values come from two places: the averaging strategies are small enough to work out by
hand from the Java source, and the consistent-hash assignments were produced by running the
real ``org.apache.rocketmq:rocketmq-client:4.9.8`` (from Maven Central, on OpenJDK 17) with a
throwaway harness outside the repo: it built ``new MessageQueue(topic, broker, i)`` for each
queue, sorted queues and client ids with ``Collections.sort`` as ``RebalanceImpl`` does, and
printed ``new AllocateMessageQueueConsistentHash(n).allocate("G", cid, mqAll, cidAll)`` for
every cid. The same harness agreed with this module on 19,545 random (strategy, queues,
clients, virtual node count) allocations, duplicated client ids included.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.rebalance import (
    STRATEGIES,
    AllocateStrategy,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_by_config,
    allocate_consistent_hash,
    message_queue_key,
)
from remoting.route import MessageQueue

PROPERTY = settings(max_examples=150, deadline=None)


def queues(
    count: int, topic: str = "T", brokers: Sequence[str] = ("broker-a",)
) -> list[MessageQueue]:
    """A topic's queues, sorted as RebalanceImpl sorts them before allocating."""
    return sorted(MessageQueue(topic, b, i) for b in brokers for i in range(count))


def assignment(
    strategy: AllocateStrategy, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    """What each consumer of the group computes for itself, as every member runs it."""
    return {cid: strategy("G", cid, mq_all, cid_all) for cid in cid_all}


def ids(assigned: dict[str, list[MessageQueue]]) -> dict[str, list[int]]:
    return {cid: [mq.queue_id for mq in mqs] for cid, mqs in assigned.items()}


def owners(assigned: dict[str, list[MessageQueue]]) -> dict[MessageQueue, str]:
    return {mq: cid for cid, mqs in assigned.items() for mq in mqs}


# ------------------------------------------------------------------ golden: averaging


def test_averagely_eight_queues_three_consumers() -> None:
    got = ids(assignment(allocate_averagely, queues(8), ["c1", "c2", "c3"]))
    assert got == {"c1": [0, 1, 2], "c2": [3, 4, 5], "c3": [6, 7]}


def test_by_circle_eight_queues_three_consumers() -> None:
    got = ids(assignment(allocate_averagely_by_circle, queues(8), ["c1", "c2", "c3"]))
    assert got == {"c1": [0, 3, 6], "c2": [1, 4, 7], "c3": [2, 5]}


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle])
def test_more_consumers_than_queues_leaves_the_surplus_idle(strategy: AllocateStrategy) -> None:
    got = ids(assignment(strategy, queues(3), ["c1", "c2", "c3", "c4", "c5"]))
    assert got == {"c1": [0], "c2": [1], "c3": [2], "c4": [], "c5": []}


def test_averagely_ten_queues_four_consumers_front_loads_the_remainder() -> None:
    # mod = 2: the first two consumers take 3, the last two take 2 (startIndex = i*2 + 2).
    got = ids(assignment(allocate_averagely, queues(10), ["a", "b", "c", "d"]))
    assert got == {"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7], "d": [8, 9]}


def test_averagely_spans_brokers_in_sorted_order() -> None:
    mq_all = queues(2, brokers=("broker-a", "broker-b"))
    got = assignment(allocate_averagely, mq_all, ["c1", "c2"])
    assert got == {"c1": mq_all[:2], "c2": mq_all[2:]}
    assert {mq.broker_name for mq in got["c1"]} == {"broker-a"}


# ------------------------------------------------------------------ golden: consistent hash


def test_message_queue_key_is_javas_to_string() -> None:
    mq = MessageQueue("TopicTest", "broker-a", 3)
    assert message_queue_key(mq) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"


def test_consistent_hash_matches_java_eight_queues_three_clients() -> None:
    # rocketmq-client 4.9.8, AllocateMessageQueueConsistentHash() (10 virtual nodes),
    # topic "T", broker "broker-a", queues 0..7, clients c1, c2, c3: see the module docstring.
    got = ids(assignment(allocate_consistent_hash, queues(8), ["c1", "c2", "c3"]))
    assert got == {"c1": [0, 4], "c2": [1, 2, 5, 6, 7], "c3": [3]}


def test_consistent_hash_matches_java_after_a_fourth_client_joins() -> None:
    # rocketmq-client 4.9.8, same inputs plus "c4". Compared with the three-client golden above,
    # the five queues that move (1, 2, 4, 5, 6) all move to the newcomer.
    got = ids(assignment(allocate_consistent_hash, queues(8), ["c1", "c2", "c3", "c4"]))
    assert got == {"c1": [0], "c2": [7], "c3": [3], "c4": [1, 2, 4, 5, 6]}


def test_consistent_hash_matches_java_two_brokers_real_client_ids() -> None:
    # rocketmq-client 4.9.8, 10 virtual nodes, topic "TopicTest", 4 queues on each of
    # broker-a and broker-b, client ids in RocketMQ's ip@pid form.
    mq_all = queues(4, topic="TopicTest", brokers=("broker-a", "broker-b"))
    cid_all = ["192.168.0.1@1001", "192.168.0.2@1002", "192.168.0.3@1003"]
    got = {
        cid: [(mq.broker_name, mq.queue_id) for mq in mqs]
        for cid, mqs in assignment(allocate_consistent_hash, mq_all, cid_all).items()
    }
    assert got == {
        "192.168.0.1@1001": [("broker-a", 2), ("broker-b", 0), ("broker-b", 1)],
        "192.168.0.2@1002": [],
        "192.168.0.3@1003": [
            ("broker-a", 0),
            ("broker-a", 1),
            ("broker-a", 3),
            ("broker-b", 2),
            ("broker-b", 3),
        ],
    }


def test_consistent_hash_matches_java_with_three_virtual_nodes() -> None:
    # rocketmq-client 4.9.8, new AllocateMessageQueueConsistentHash(3), otherwise as above.
    got = ids(
        {
            cid: allocate_consistent_hash("G", cid, queues(8), ["c1", "c2", "c3"], 3)
            for cid in ["c1", "c2", "c3"]
        }
    )
    assert got == {"c1": [0], "c2": [2, 5, 7], "c3": [1, 3, 4, 6]}


def test_consistent_hash_ring_collision_keeps_the_later_node_like_javas_treemap() -> None:
    # md5("k51295-0") and md5("k8712-0") share their first four bytes (found by a birthday
    # search), so with one virtual node each both clients land on the same ring point. Java's
    # TreeMap.put keeps the one added last (sorted order: "k8712"), and rocketmq-client 4.9.8
    # gives it all 64 queues while "k51295" gets none.
    mq_all = queues(64)
    cid_all = ["k51295", "k8712"]
    assert allocate_consistent_hash("G", "k51295", mq_all, cid_all, 1) == []
    assert allocate_consistent_hash("G", "k8712", mq_all, cid_all, 1) == mq_all


def test_consistent_hash_with_no_virtual_nodes_routes_nowhere() -> None:
    # Java's router returns null on an empty ring, so nobody gets anything.
    assert allocate_consistent_hash("G", "c1", queues(4), ["c1"], 0) == []


def test_consistent_hash_rejects_negative_virtual_nodes() -> None:
    with pytest.raises(ValueError, match="illegal virtualNodeCnt :-1"):
        allocate_consistent_hash("G", "c1", queues(4), ["c1"], -1)


def test_consistent_hash_moves_fewer_queues_than_averagely_when_a_consumer_joins() -> None:
    mq_all = queues(32, topic="TopicTest", brokers=("broker-a", "broker-b"))
    before = [f"10.0.0.{i}@{1000 + i}" for i in range(8)]
    after = sorted([*before, "10.0.0.8@1008"])

    def moved(strategy: AllocateStrategy) -> int:
        old, new = (
            owners(assignment(strategy, mq_all, before)),
            owners(assignment(strategy, mq_all, after)),
        )
        return sum(old[mq] != new[mq] for mq in mq_all)

    # 64 queues, 8 -> 9 consumers: consistent hash moves 8, averagely 28, by circle 56.
    assert (
        moved(allocate_consistent_hash)
        < moved(allocate_averagely)
        < moved(allocate_averagely_by_circle)
    )
    assert moved(allocate_consistent_hash) <= len(mq_all) // 4


# ------------------------------------------------------------------ checks shared with Java


@pytest.mark.parametrize("strategy", list(STRATEGIES.values()))
def test_empty_arguments_raise_javas_messages_in_javas_order(strategy: AllocateStrategy) -> None:
    with pytest.raises(ValueError, match=r"^currentCID is empty$"):
        strategy("G", "", [], [])
    with pytest.raises(ValueError, match=r"^mqAll is null or mqAll empty$"):
        strategy("G", "c1", [], [])
    with pytest.raises(ValueError, match=r"^cidAll is null or cidAll empty$"):
        strategy("G", "c1", queues(1), [])


@pytest.mark.parametrize("strategy", list(STRATEGIES.values()))
def test_a_consumer_missing_from_cid_all_gets_nothing_and_is_logged(
    strategy: AllocateStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="client")
    assert strategy("G", "stranger", queues(4), ["c1", "c2"]) == []
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            "client.rebalance",
            logging.INFO,
            "consumer_not_in_cid_all consumer_group=G current_cid=stranger cid_all=['c1', 'c2']",
        )
    ]


def test_strategy_table_uses_javas_names() -> None:
    expected = {
        "AVG": allocate_averagely,
        "AVG_BY_CIRCLE": allocate_averagely_by_circle,
        "CONSISTENT_HASH": allocate_consistent_hash,
    }
    assert expected == STRATEGIES


def test_by_config_ignores_its_inputs() -> None:
    pinned = [MessageQueue("T", "broker-b", 5), MessageQueue("T", "broker-a", 1)]
    strategy = allocate_by_config(pinned)
    # Java's AllocateMessageQueueByConfig skips check(): even empty inputs return the list.
    assert strategy("G", "", [], []) == pinned
    assert strategy("G", "c9", queues(8), ["c1"]) == pinned
    strategy("G", "c1", [], []).clear()  # a caller's copy; the configuration is unchanged
    pinned.clear()  # and so is the caller's original list
    assert strategy("G", "c1", [], []) == [
        MessageQueue("T", "broker-b", 5),
        MessageQueue("T", "broker-a", 1),
    ]


# ------------------------------------------------------------------ properties

CLIENT_IDS = st.lists(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
    | st.builds("10.0.0.{}@{}".format, st.integers(0, 255), st.integers(1, 99999)),
    min_size=1,
    max_size=10,
    unique=True,
).map(sorted)
QUEUES = st.builds(
    queues,
    st.integers(1, 24),
    st.sampled_from(["T", "TopicTest", "%RETRY%group"]),
    st.lists(st.sampled_from(["broker-a", "broker-b", "broker-c"]), min_size=1, unique=True),
)


@PROPERTY
@given(strategy=st.sampled_from(list(STRATEGIES.values())), mq_all=QUEUES, cid_all=CLIENT_IDS)
def test_every_queue_goes_to_exactly_one_consumer(
    strategy: AllocateStrategy, mq_all: list[MessageQueue], cid_all: list[str]
) -> None:
    assigned = assignment(strategy, mq_all, cid_all)
    counts = Counter(mq for mqs in assigned.values() for mq in mqs)
    assert counts == Counter(mq_all)
    for mqs in assigned.values():  # each share keeps mq_all's order
        assert mqs == sorted(mqs)


@PROPERTY
@given(mq_all=QUEUES, cid_all=CLIENT_IDS)
def test_averaging_shares_differ_by_at_most_one(
    mq_all: list[MessageQueue], cid_all: list[str]
) -> None:
    for strategy in (allocate_averagely, allocate_averagely_by_circle):
        sizes = [len(mqs) for mqs in assignment(strategy, mq_all, cid_all).values()]
        assert max(sizes) - min(sizes) <= 1
        assert min(sizes) == len(mq_all) // len(cid_all)


@PROPERTY
@given(mq_all=QUEUES, cid_all=CLIENT_IDS.filter(lambda c: len(c) >= 2))
def test_averagely_gives_contiguous_runs_in_consumer_order(
    mq_all: list[MessageQueue], cid_all: list[str]
) -> None:
    assigned = assignment(allocate_averagely, mq_all, cid_all)
    assert [mq for cid in cid_all for mq in assigned[cid]] == mq_all


@PROPERTY
@given(
    mq_all=QUEUES,
    cid_all=CLIENT_IDS,
    newcomer=st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
)
def test_consistent_hash_moves_queues_only_to_a_newcomer(
    mq_all: list[MessageQueue], cid_all: list[str], newcomer: str
) -> None:
    before = owners(assignment(allocate_consistent_hash, mq_all, cid_all))
    joined = sorted({*cid_all, newcomer})
    after = owners(assignment(allocate_consistent_hash, mq_all, joined))
    assert all(after[mq] in (before[mq], newcomer) for mq in mq_all)
