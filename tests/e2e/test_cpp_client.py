"""The official RocketMQ Python client (PyPI ``rocketmq`` 0.4.4, C++ client 1.2.x) against the
broker: every way it sends, and every way it consumes, loses and invents nothing.

- 1,000 sync sends (tags, keys, user properties, non-ASCII text, bodies over 4 KiB that the
  client compresses) come back exactly once each to a clustering PushConsumer, and exactly from
  offset 0 through a PullConsumer;
- a ``TagA || TagB`` subscription gets those tags and nothing else;
- orderly sends keep their per-key order through an orderly PushConsumer;
- oneway sends arrive;
- a consumer group restarted after a clean stop resumes at its committed offsets;
- broadcasting delivers every message to each consumer of the group.

All tests share one broker, each with its own topics and groups.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.e2e.conftest import (
    COMMITTED_SETTLE_S,
    PROPERTY_KEYS,
    Clients,
    Sent,
    assert_same_messages,
    bodies,
    consume,
    diagnose,
    send,
)
from tests.processes import Broker, unique

# Once: make test-asyncio leaves a third-party client's scenarios out (pyproject's marker).
pytestmark = [pytest.mark.e2e, pytest.mark.once]

TAGS = ("TagA", "TagB", "TagC")
MESSAGES = 1000
# The C++ client compresses bodies over 4 KiB (compressMsgBodyOverHowmuch = 4096).
LARGE_EVERY = 97


def _large_body(i: int) -> str:
    # Pseudo-random letters: compressible enough to be worth it, but not to nothing.
    rng = random.Random(i)
    size = 5_000 + (i * 7919) % 60_000
    return f"large-{i}-" + "".join(rng.choice("abcdefghij \n") for _ in range(size))


def catalogue(count: int, run: str) -> list[Sent]:
    """``count`` messages with every field the C++ client can set."""
    messages = []
    for i in range(count):
        props = [("seq", str(i)), ("color", ("red", "green", "blue")[i % 3]), ("run", run)]
        if i % 10 == 0:
            props.append(("note", "naïve café ✓"))  # UTF-8 in the properties string
        body = _large_body(i) if i % LARGE_EVERY == 5 else f"msg-{i} héllo ✓ {run}"
        messages.append(
            Sent(
                body=body,
                tags=TAGS[i % 3],
                keys=(f"key-{i}", f"order-{i % 17}"),
                properties=tuple(props),
            )
        )
    return messages


@dataclass(frozen=True)
class Published:
    topic: str
    messages: list[Sent]


@pytest.fixture(scope="module")
def published(
    cluster: Broker, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Published]:
    """1,000 messages sent once with ``send_sync`` on a fresh topic, read by several tests."""
    if cluster.procs:
        diagnose(request, "shared broker log", cluster.log_tail)
    clients = Clients(cluster.namesrv, tmp_path_factory.mktemp("published"), request)
    try:
        topic = unique("e2e_sync")
        messages = catalogue(MESSAGES, uuid.uuid4().hex[:8])
        send(clients, topic, messages)
        yield Published(topic, messages)
    finally:
        clients.close()


def test_sync_sent_messages_reach_a_clustering_push_consumer_exactly_once(
    clients: Clients, published: Published
) -> None:
    assert sum(len(m.body) > 4096 for m in published.messages) >= 10
    run = consume(clients, published.topic, unique("e2e_all"), MESSAGES, deadline_s=90)
    assert_same_messages(run, published.messages)
    # First deliveries only: nothing was retried through %RETRY%.
    assert {e["reconsume_times"] for e in run.of("msg")} == {0}
    assert {e["topic"] for e in run.of("msg")} == {published.topic}


def test_tag_filtered_consumer_gets_only_its_tags(clients: Clients, published: Published) -> None:
    wanted = [m for m in published.messages if m.tags in ("TagA", "TagB")]
    run = consume(
        clients, published.topic, unique("e2e_tags"), len(wanted), expression="TagA || TagB"
    )
    assert {e["tags"] for e in run.of("msg")} <= {"TagA", "TagB"}
    assert_same_messages(run, wanted)


def test_pull_consumer_reads_every_queue_from_offset_zero(
    clients: Clients, published: Published
) -> None:
    run = clients.cpp(
        "pull", group=unique("e2e_pull"), topic=published.topic, property_keys=PROPERTY_KEYS
    )
    done = run.finish()
    assert len(done["queues"]) >= 1, done
    assert_same_messages(run, published.messages)
    # Each queue was read from 0 without gaps: its offsets are 0..end-1, each once.
    by_queue: dict[int, list[int]] = {}
    for event in run.of("msg"):
        by_queue.setdefault(event["queue_id"], []).append(event["queue_offset"])
    for queue in done["queues"]:
        offsets = by_queue.get(queue["queue_id"], [])
        assert offsets == list(range(queue["end_offset"])), queue


def test_orderly_send_and_orderly_consumer_keep_per_key_order(clients: Clients) -> None:
    topic = unique("e2e_orderly")
    keys, per_key = 5, 40
    # Interleave the keys on the wire so that order within a queue is really tested.
    messages = [
        Sent(
            body=f"order-{k}-step-{s}",
            tags="Ord",
            keys=(f"order-{k}",),
            properties=(("seq", str(s)), ("color", f"k{k}")),
            shard=k,
        )
        for s in range(per_key)
        for k in range(keys)
    ]
    sent = send(clients, topic, messages, mode="orderly")
    # The hashing selector puts a key on queue shard % queue count: one queue per key.
    run = consume(
        clients, topic, unique("e2e_orderly"), len(messages), orderly=True, thread_count=4
    )
    assert_same_messages(run, messages)
    steps: dict[str, list[int]] = {}
    queues: dict[str, set[int]] = {}
    for event in run.of("msg"):
        key = event["properties"]["color"]
        steps.setdefault(key, []).append(int(event["properties"]["seq"]))
        queues.setdefault(key, set()).add(event["queue_id"])
    for key, seq in steps.items():
        assert seq == list(range(per_key)), f"{key} consumed out of order: {seq}"
        assert len(queues[key]) == 1, f"{key} spread over queues {queues[key]}"
    assert len(sent.of("sent")) == len(messages)


def test_oneway_sends_arrive(clients: Clients) -> None:
    topic = unique("e2e_oneway")
    messages = [
        Sent(body=f"oneway-{i}", tags="Oneway", keys=(f"ow-{i}",), properties=(("seq", str(i)),))
        for i in range(20)
    ]
    send(clients, topic, messages, mode="oneway")
    run = consume(clients, topic, unique("e2e_oneway"), len(messages))
    assert_same_messages(run, messages)


def test_restarted_consumer_resumes_from_its_committed_offset(clients: Clients) -> None:
    topic = unique("e2e_resume")
    group = unique("e2e_resume")
    first = [Sent(body=f"first-{i}", tags="R", properties=(("seq", str(i)),)) for i in range(30)]
    second = [Sent(body=f"second-{i}", tags="R", properties=(("seq", str(i)),)) for i in range(20)]
    send(clients, topic, first)
    run1 = consume(clients, topic, group, len(first), settle_s=COMMITTED_SETTLE_S)
    assert_same_messages(run1, first)
    # The consumer was stopped cleanly after a periodic offset commit (see COMMITTED_SETTLE_S).
    send(clients, topic, second)
    run2 = consume(clients, topic, group, len(second), settle_s=4.0)
    redelivered = sorted(set(bodies(run2)) & {m.body for m in first})
    assert not redelivered, f"already consumed messages came again: {redelivered[:5]}"
    assert_same_messages(run2, second)


def test_broadcasting_delivers_every_message_to_every_consumer(clients: Clients) -> None:
    topic = unique("e2e_bcast")
    group = unique("e2e_bcast")
    # The topic must exist before the consumers look up its route.
    send(clients, topic, [Sent(body="probe-seed", tags="Probe")])
    consumers = [
        clients.cpp(
            "push",
            group=group,
            topic=topic,
            model="broadcasting",
            instance_name=f"bcast{n}",
            probe_prefix="probe-",
            property_keys=PROPERTY_KEYS,
            deadline_s=90,
        )
        for n in range(2)
    ]
    for consumer in consumers:
        consumer.wait_started()
    # A broadcasting consumer without a local offset file starts at each queue's max offset, so
    # only messages sent after its rebalance reach it. Probe every queue (orderly sends pick the
    # queue) until both consumers saw a probe from each.
    for attempt in range(10):
        probes = [Sent(body=f"probe-{attempt}-{q}", tags="Probe", shard=q) for q in range(8)]
        send(clients, topic, probes, mode="orderly")
        if all(
            c.wait_for(lambda r: len({e["queue_id"] for e in r.of("probe")}) >= 4, 3.0)
            for c in consumers
        ):
            break
    else:
        pytest.fail("broadcasting consumers never received probes from every queue")

    messages = catalogue(100, "bcast")
    send(clients, topic, messages)
    for consumer in consumers:
        consumer.wait_for(lambda r: len(r.of("msg")) >= len(messages), 60.0)
    for consumer in consumers:
        consumer.stop()
    for consumer in consumers:
        assert_same_messages(consumer, messages)
