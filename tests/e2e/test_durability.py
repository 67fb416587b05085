"""What survives the broker: a clean restart keeps topics, consumer offsets and messages, and
``kill -9`` under SYNC_FLUSH loses no message whose ``send_sync`` returned OK.

Each test starts its own broker on its own store and restarts it on the same store; clients
are new processes for each incarnation (a restarted Aerolite standalone has new ports).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    COMMITTED_SETTLE_S,
    PROPERTY_KEYS,
    Clients,
    Sent,
    assert_same_messages,
    consume,
    send,
)
from tests.processes import Broker, unique

pytestmark = pytest.mark.e2e


def _messages(prefix: str, count: int) -> list[Sent]:
    return [
        Sent(
            body=f"{prefix}-{i}" + ("!" * 5000 if i % 10 == 9 else ""),
            tags=("TagA", "TagB")[i % 2],
            keys=(f"{prefix}-{i}",),
            properties=(("seq", str(i)),),
        )
        for i in range(count)
    ]


def test_clean_restart_keeps_topics_offsets_and_messages(
    tmp_path: Path,
    launch: Callable[..., Broker],
    client_factory: Callable[[Broker], Clients],
) -> None:
    store = tmp_path / "store"
    broker = launch(store)
    clients = client_factory(broker)
    topic, group = unique("e2e_restart"), unique("e2e_restart")
    consumed, pending = _messages("consumed", 40), _messages("pending", 25)
    send(clients, topic, consumed)
    first = consume(clients, topic, group, len(consumed), settle_s=COMMITTED_SETTLE_S)
    assert_same_messages(first, consumed)
    send(clients, topic, pending)
    broker.stop()

    broker = launch(store)
    clients = client_factory(broker)
    # Offsets: the group resumes after what it consumed before the restart.
    run = consume(clients, topic, group, len(pending), settle_s=4.0)
    assert_same_messages(run, pending)
    # Messages: everything is still readable from offset 0.
    pull = clients.cpp(
        "pull", group=unique("e2e_restart_pull"), topic=topic, property_keys=PROPERTY_KEYS
    )
    pull.finish()
    assert_same_messages(pull, consumed + pending)
    # Topics: the route came back with the restart, and the topic still takes sends.
    late = _messages("late", 5)
    send(clients, topic, late)
    assert_same_messages(consume(clients, topic, group, len(late)), late)


def test_kill_9_under_sync_flush_loses_no_acknowledged_message(
    tmp_path: Path,
    launch: Callable[..., Broker],
    client_factory: Callable[[Broker], Clients],
) -> None:
    store = tmp_path / "store"
    broker = launch(store, {"flushDiskType": "SYNC_FLUSH"})
    clients = client_factory(broker)
    topic = unique("e2e_kill9")
    attempted = _messages("kill9", 3000)
    producer = clients.cpp(
        "produce",
        group=unique("e2e_kill9_producer"),
        topic=topic,
        messages=[m.cpp_spec() for m in attempted],
        send_timeout_ms=2000,
        max_consecutive_errors=3,
        deadline_s=60,
    )
    # Kill while sends are in flight, not between them.
    assert producer.wait_for(
        lambda r: sum(e.get("status") == "OK" for e in r.of("sent")) >= 300, 60.0
    ), "the producer never got 300 acknowledgements"
    broker.kill()
    producer.finish(timeout_s=90)
    acked = [attempted[e["index"]] for e in producer.of("sent") if e.get("status") == "OK"]
    assert len(acked) >= 300
    assert len(acked) < len(attempted), "the kill came too late to test anything"

    broker = launch(store, {"flushDiskType": "SYNC_FLUSH"})
    clients = client_factory(broker)
    pull = clients.cpp(
        "pull", group=unique("e2e_kill9_pull"), topic=topic, property_keys=PROPERTY_KEYS
    )
    pull.finish()
    got = {e["body"] for e in pull.of("msg")}
    lost = [m.body[:40] for m in acked if m.body not in got]
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
    # Whatever else survived (sent but not yet acknowledged at the kill) must be intact.
    by_body = {m.body: m for m in attempted}
    unknown = [b[:40] for b in got if b not in by_body]
    assert not unknown, f"messages nobody sent: {unknown[:5]}"
    for event in pull.of("msg"):
        sent = by_body[event["body"]]
        assert event["tags"] == sent.tags
        assert event["keys"] == " ".join(sent.keys)
        assert event["properties"] == dict(sent.properties)
