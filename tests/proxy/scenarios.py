"""Scenarios the RocketMQ 5 client suites run: the Python client's (tests/proxy/
test_rmq5_client.py) and the Java and Go clients' (tests/interop/test_rmq5_clients.py).

Their drivers (``rmq5_driver.py``, ``interop/java5/Java5Client.java``, ``interop/go5/main.go``)
read the same steps
and print the same JSON lines, so a scenario is written once: its steps, and the checks of
what the client saw. Each suite adds the checks only its client's lines allow, and runs the
steps with its own runner and broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from client import ConsumeFromWhere, MessageView, ReceivedMessage, SimpleConsumer
from tests.processes import unique

Steps = list[dict[str, Any]]


class Run(Protocol):
    """A driver's run: its JSON lines of one event."""

    def of(self, event: str) -> list[dict[str, Any]]: ...


def spec(body: str) -> dict[str, Any]:
    """The message the scenarios send: a body, a tag, two keys, two user properties."""
    return {
        "body": body,
        "tag": "TagA",
        "keys": ["order-1", "user-7"],
        "properties": {"color": "red", "seq": "1"},
    }


def lines(run: Run, event: str, label: str | None = None) -> list[dict[str, Any]]:
    """The ``event`` lines of ``run`` (of the step ``label`` only, if given)."""
    return [e for e in run.of(event) if label is None or e["label"] == label]


def assert_like(msg: dict[str, Any], sent: dict[str, Any]) -> None:
    """A received message carries the body, tag, keys and user properties it was sent with."""
    got = (msg["body"], msg["tag"], msg["keys"], msg["properties"])
    want = (sent["body"], sent.get("tag"), sorted(sent.get("keys", [])), sent.get("properties", {}))
    assert got == want


async def receive_4x(
    consumer: SimpleConsumer, count: int, within_s: float = 15
) -> list[ReceivedMessage]:
    """Receive with the 4.x SDK's SimpleConsumer until ``count`` messages came (fails after
    ``within_s``)."""
    got: list[ReceivedMessage] = []
    async with asyncio.timeout(within_s):
        while len(got) < count:
            got += await consumer.receive(16, timedelta(seconds=10))
    return got


def send_steps(topic: str, message: dict[str, Any]) -> Steps:
    return [
        {"op": "producer", "topics": [topic]},
        {"op": "send", "topic": topic, "messages": [message]},
    ]


def type_refusal_steps(topic: str, message: dict[str, Any]) -> Steps:
    """For a NORMAL topic: a FIFO message, a delayed one (both refused by the client, which
    reads the topic's ``message.type`` in its route), then a normal one."""
    return [
        {"op": "producer", "topics": [topic]},
        {"op": "send", "topic": topic,
         "messages": [{**message, "group": "g1"}, {**message, "delay_ms": 2000}, message]},
    ]  # fmt: skip


# ------------------------------------------------------------------ receive and ack


def normal_steps(topic: str, group: str, message: dict[str, Any], within_s: float) -> Steps:
    """Send one, receive it and ack it; past its invisible time nothing comes back."""
    return [
        *send_steps(topic, message),
        {"op": "simple", "group": group, "topic": topic},
        {"label": "first", "op": "receive", "invisible_s": 2, "until": 1, "within_s": within_s,
         "ack": True},
        {"op": "sleep", "s": 2.5},  # past the invisible time: an un-acked one would be back
        {"label": "again", "op": "receive", "invisible_s": 2},
    ]  # fmt: skip


def check_normal(
    run: Run, topic: str, message: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Received once as sent, first attempt, digest accepted, acked, not back; the send and
    the received message's lines."""
    (sent,) = lines(run, "sent")
    (msg,) = lines(run, "msg", "first")
    assert_like(msg, message)
    assert msg["message_id"] == sent["message_id"]
    assert (msg["topic"], msg["delivery_attempt"]) == (topic, 1)
    assert not msg["corrupted"]  # the broker's MD5 digest matched the client's
    assert [a["index"] for a in lines(run, "acked")] == [0]
    assert lines(run, "msg", "again") == []
    return sent, msg


def invisible_steps(topic: str, group: str, message: dict[str, Any], within_s: float) -> Steps:
    """Receive without acking: back after its 1 s invisible time, then acked."""
    return [
        *send_steps(topic, message),
        {"op": "simple", "group": group, "topic": topic},
        {"label": "first", "op": "receive", "invisible_s": 1, "until": 1, "within_s": within_s},
        {"label": "back", "op": "receive", "invisible_s": 10, "until": 1, "within_s": 15,
         "ack": True},
        {"op": "sleep", "s": 1.5},
        {"label": "after", "op": "receive", "invisible_s": 10},
    ]  # fmt: skip


def check_invisible(run: Run, topic: str, message: dict[str, Any]) -> None:
    """The same message twice, attempts 1 then 2, a second later, with a new handle."""
    (sent,) = lines(run, "sent")
    (first,) = lines(run, "msg", "first")
    (back,) = lines(run, "msg", "back")
    for msg in (first, back):
        assert_like(msg, message)
        assert (msg["message_id"], msg["topic"]) == (sent["message_id"], topic)
    assert (first["delivery_attempt"], back["delivery_attempt"]) == (1, 2)
    assert back["at_ms"] - first["at_ms"] >= 1000 - 50
    assert back["receipt_handle"] != first["receipt_handle"]
    assert [a["index"] for a in lines(run, "acked")] == [1]
    assert lines(run, "msg", "after") == []


def change_steps(topic: str, group: str, message: dict[str, Any], within_s: float) -> Steps:
    """Receive for 2 s, change it to 6 s: still hidden at 3 s; the new handle acks."""
    return [
        *send_steps(topic, message),
        {"op": "simple", "group": group, "topic": topic},
        {"label": "first", "op": "receive", "invisible_s": 2, "until": 1, "within_s": within_s},
        {"op": "change", "index": 0, "invisible_s": 6},
        {"op": "sleep", "s": 3},  # past the first 2 s: still invisible
        {"label": "extended", "op": "receive", "invisible_s": 10},
        {"op": "ack", "indices": [0]},  # with the handle the change answered
        {"op": "sleep", "s": 3.5},  # past the 6 s: acked, so gone for good
        {"label": "after", "op": "receive", "invisible_s": 10},
    ]  # fmt: skip


def check_change(run: Run, message: dict[str, Any]) -> None:
    (msg,) = lines(run, "msg", "first")
    assert_like(msg, message)
    (changed,) = lines(run, "changed")
    assert changed["old"] == msg["receipt_handle"] and changed["new"]
    assert changed["new"] != changed["old"]
    assert lines(run, "change_error") == []
    assert lines(run, "msg", "extended") == []
    assert [a["index"] for a in lines(run, "acked")] == [0]
    assert lines(run, "ack_error") == []
    assert lines(run, "msg", "after") == []


# ------------------------------------------------------------------------------ FIFO

# Two message groups, interleaved: each must keep its own order.
FIFO_SPECS = [{"body": f"{g}-{i}", "group": f"{g}_group"} for i in range(5) for g in "ab"]


def fifo_steps(topic: str, group: str, within_s: float) -> Steps:
    """A FIFO group (consumeMessageOrderly): a batch of 2, a receive while it is un-acked,
    then the rest."""
    return [
        {"op": "producer", "topics": [topic]},
        {"op": "send", "topic": topic, "messages": FIFO_SPECS},
        {"op": "simple", "group": group, "topic": topic},
        {"label": "head", "op": "receive", "max": 2, "invisible_s": 10, "until": 2,
         "within_s": within_s},
        {"label": "blocked", "op": "receive", "invisible_s": 10},
        {"op": "ack", "indices": "all"},
        {"label": "rest", "op": "receive", "invisible_s": 10, "until_total": 10,
         "within_s": within_s + 10, "ack": True},
    ]  # fmt: skip


def check_fifo(run: Run) -> list[dict[str, Any]]:
    """A message group's messages came in send order, first attempt, with their group; the
    rest of its queue was held back while its first batch was un-acked. Every ``msg`` line."""
    assert [e["body"] for e in lines(run, "sent")] == [s["body"] for s in FIFO_SPECS]
    head = [e["body"] for e in lines(run, "msg", "head")]
    g = head[0][0]  # the message group the first batch came from
    assert head == [f"{g}-0", f"{g}-1"], head
    blocked = [e["body"] for e in lines(run, "msg", "blocked")]
    assert not [b for b in blocked if b.startswith(g)], blocked  # held back until acked
    assert lines(run, "ack_error") == []
    got = lines(run, "msg")
    for g in "ab":
        mine = [e for e in got if e["body"].startswith(f"{g}-")]
        assert [e["body"] for e in mine] == [f"{g}-{i}" for i in range(5)]
        assert {e["message_group"] for e in mine} == {f"{g}_group"}
        assert {e["delivery_attempt"] for e in mine} == {1}
    return got


def check_fifo_queues(queues: Mapping[int, Sequence[MessageView]]) -> None:
    """On the broker: each message group in one queue, in the order it was sent."""
    for g in "ab":
        holding = {q: [m.body.decode() for m in ms if m.body.startswith(g.encode())]
                   for q, ms in queues.items()}  # fmt: skip
        holding = {q: bodies for q, bodies in holding.items() if bodies}
        assert list(holding.values()) == [[f"{g}-{i}" for i in range(5)]], holding


# ---------------------------------------------------------------------- transactions


def tx_steps(topic: str, group: str, message: dict[str, Any], checker: object) -> Steps:
    """Two transactions ended at once, one committed (``tx-commit``), one rolled back
    (``tx-rollback``); then a receive. ``checker``: the producer's answer to a check back
    (in the driver's form), which should never be asked."""
    return [
        {"op": "producer", "topics": [topic], "checker": checker},
        {"op": "transaction", "topic": topic, "message": {**message, "body": "tx-commit"},
         "end": "commit"},
        {"op": "transaction", "topic": topic, "message": {**message, "body": "tx-rollback"},
         "end": "rollback"},
        {"op": "simple", "group": group, "topic": topic},
        {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 4, "ack": True},
    ]  # fmt: skip


def check_tx(run: Run, message: dict[str, Any]) -> None:
    """Both ended as asked, none checked back; only the committed one is received."""
    sent = {e["body"]: e for e in lines(run, "sent")}
    assert all(e["transaction_id"] for e in sent.values()), sent
    assert [e["end"] for e in lines(run, "ended")] == ["commit", "rollback"]
    assert lines(run, "end_error") == []
    (msg,) = lines(run, "msg")
    assert_like(msg, {**message, "body": "tx-commit"})
    assert msg["message_id"] == sent["tx-commit"]["message_id"]
    assert lines(run, "checked") == []  # both were ended before the first check


# ---------------------------------------------------------------------- SQL92 filter

SQL = "a BETWEEN 2 AND 4 AND color = 'red'"


def sql_messages() -> list[dict[str, Any]]:
    """Six messages, ``a`` 0..5, and one without ``a``: three match ``SQL``."""
    sent = [{**spec(f"m{i}"), "properties": {"color": "red", "a": str(i)}} for i in range(6)]
    return [*sent, spec("no-a")]


def sql_steps(topic: str, group: str, within_s: float) -> Steps:
    """Receive with ``SQL`` (not acked), then again past the invisible time: the three
    matching messages twice, nothing else."""
    return [
        {"op": "producer", "topics": [topic]},
        {"op": "send", "topic": topic, "messages": sql_messages()},
        {"op": "simple", "group": group, "topic": topic, "expression": SQL,
         "expression_type": "SQL92"},
        {"label": "first", "op": "receive", "invisible_s": 1, "until": 3, "within_s": within_s},
        {"label": "back", "op": "receive", "invisible_s": 10, "until": 3, "within_s": 15,
         "ack": True},
        {"op": "sleep", "s": 1.5},
        {"label": "after", "op": "receive", "invisible_s": 10},
    ]  # fmt: skip


def check_sql(run: Run) -> None:
    for label, attempt in (("first", 1), ("back", 2)):
        got = lines(run, "msg", label)
        assert sorted(m["body"] for m in got) == ["m2", "m3", "m4"], label
        assert {m["delivery_attempt"] for m in got} == {attempt}
    assert lines(run, "msg", "after") == []


# -------------------------------------------------------------------- dead letters


def dlq_steps(topic: str, group: str, message: dict[str, Any]) -> Steps:
    """Never acked, in a group of 2 deliveries: then the dead-letter queue."""
    return [
        *send_steps(topic, message),
        {"op": "simple", "group": group, "topic": topic},
        {"label": "tries", "op": "receive", "invisible_s": 1, "until": 2, "within_s": 15},
        {"op": "sleep", "s": 1.5},
        {"label": "after", "op": "receive", "invisible_s": 1},
    ]


def check_dlq_tries(run: Run) -> dict[str, Any]:
    """Delivered twice (attempts 1, 2), then no more; the send's line."""
    (sent,) = lines(run, "sent")
    tries = lines(run, "msg", "tries")
    assert [(m["message_id"], m["delivery_attempt"]) for m in tries] == [
        (sent["message_id"], 1),
        (sent["message_id"], 2),
    ]
    assert lines(run, "msg", "after") == []
    return sent


def check_read_by_4x(
    msg: MessageView, sent: dict[str, Any], topic: str, message: dict[str, Any]
) -> None:
    """A 5.x client's message as the 4.x SDK reads it (from its topic, or as a dead letter
    whose RETRY_TOPIC names it): body, tag, keys, the sender's properties, its id."""
    assert (msg.body, msg.tags, sorted(msg.keys)) == (
        message["body"].encode(),
        message["tag"],
        message["keys"],
    )
    # The SDK's user_properties leave out 4.x's reserved names; the 5.x born host
    # (__BORNHOST) is not one of them, so only the sender's own are compared.
    assert {k: msg.user_properties.get(k) for k in message["properties"]} == message["properties"]
    assert msg.msg_id == sent["message_id"]  # the 5.x message id is the 4.x UNIQ_KEY
    if msg.topic.startswith("%DLQ%"):
        assert msg.properties.get("RETRY_TOPIC") == topic


async def read_by_4x(namesrv: str, topic: str) -> ReceivedMessage:
    """The one message of ``topic``, received and acked by a new group of the 4.x SDK."""
    async with SimpleConsumer(
        unique("g4_from5"),
        namesrv,
        subscriptions={topic: "TagA"},
        await_duration=timedelta(seconds=1),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        got = await receive_4x(consumer, 1)
        await consumer.ack(got[0])
    (msg,) = got
    return msg
