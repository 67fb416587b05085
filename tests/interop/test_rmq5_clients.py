"""The official RocketMQ 5 clients, Java (``rocketmq-client-java`` 5.2.0) and Go
(``rocketmq-clients/golang/v5`` v5.1.2), against Aerolite's RocketMQ 5 endpoint
(broker/proxy), each scenario run with each client (clients5.py): a Producer's normal, FIFO,
delayed and transactional sends (commit, rollback, orphans checked back through the
TransactionChecker), a SimpleConsumer's receive, ack, invisible time and change of it, SQL92
filters, the dead-letter queue after the group's max attempts, messages crossing between the
5.x client and Aerolite's own 4.x SDK both ways, and TLS on a ``tlsServerMode=permissive``
port. The steps and most checks are tests/proxy/scenarios.py's, which the Python 5.x client's
suite runs too; what only one client does is in test_java5_client.py / test_go5_client.py.

The broker is ``python -m broker standalone`` (one per module, quick settings), topics and
groups are made first with ``mqadmin`` (5.x clients need their routes from the start; RocketMQ
5's ``-a +message.type=...`` and ``-o true`` for FIFO), and what reached the broker is read
back with the 4.x SDK: rmq5_broker.py. Every process is stopped by PID.
"""

from __future__ import annotations

import pytest

from client import Message, Producer
from tests.interop.clients5 import Client5
from tests.interop.rmq5_broker import (
    Aerolite5,
    create_group,
    create_topic,
    read_dead_letters,
    read_topic,
)
from tests.processes import unique
from tests.proxy.scenarios import (
    assert_like,
    change_steps,
    check_change,
    check_dlq_tries,
    check_fifo,
    check_fifo_queues,
    check_invisible,
    check_normal,
    check_read_by_4x,
    check_sql,
    check_tx,
    dlq_steps,
    fifo_steps,
    invisible_steps,
    lines,
    normal_steps,
    read_by_4x,
    send_steps,
    spec,
    sql_steps,
    tx_steps,
)

pytestmark = pytest.mark.interop

SPEC = spec("hello from a 5.x client")


def names(client: Client5, what: str) -> tuple[str, str]:
    """A topic prefix and a new group name for ``what``, naming the client."""
    return f"{client.name}_{what}", unique(f"{client.name}g_{what}")


# ------------------------------------------------------------------ producer, simple consumer


async def test_normal_send_then_receive_and_ack(aerolite5: Aerolite5, client5: Client5) -> None:
    prefix, group = names(client5, "normal")
    topic = create_topic(aerolite5, prefix)
    run = await client5.arun(normal_steps(topic, group, SPEC, within_s=15))
    sent, msg = check_normal(client5.wire(run), topic, SPEC)
    assert (msg["message_group"], msg["delivery_timestamp"]) == (None, None)
    assert lines(run, "ack_error") == []
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert [(m.body, m.msg_id, m.tags) for m in stored] == [
        (SPEC["body"].encode(), sent["message_id"], SPEC["tag"])
    ]


# ---------------------------------------------------------------------------- FIFO, delay


async def test_fifo_message_groups_are_received_in_order(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """A FIFO topic and a consumeMessageOrderly group: a message group's messages come in send
    order, and the rest of its queue is held back while a batch of it is un-acked."""
    prefix, _ = names(client5, "fifo")
    topic = create_topic(aerolite5, prefix, "FIFO")
    group = create_group(aerolite5, f"{client5.name}g_fifo", "-o", "true")
    check_fifo(await client5.arun(fifo_steps(topic, group, within_s=15), deadline_s=75))
    check_fifo_queues(await read_topic(aerolite5, topic))


def test_a_delayed_message_arrives_at_its_delivery_time(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """A DELAY topic; a message sent 3 s ahead: a receive at once (long polling of 1 to 2 s)
    finds nothing, the receives after it get the message at its time, with that time."""
    prefix, group = names(client5, "delay")
    topic = create_topic(aerolite5, prefix, "DELAY")
    run = client5.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": [{**SPEC, "delay_ms": 3000}]},
            {"op": "simple", "group": group, "topic": topic},
            {"label": "early", "op": "receive", "invisible_s": 10},
            {"label": "due", "op": "receive", "invisible_s": 10, "until": 1, "within_s": 15,
             "ack": True},
        ],
    )  # fmt: skip
    (sent,) = lines(run, "sent")
    assert lines(run, "msg", "early") == []
    (msg,) = lines(run, "msg", "due")
    assert_like(msg, SPEC)
    assert msg["message_id"] == sent["message_id"]
    assert msg["delivery_timestamp"] == sent["deliver_at_ms"]
    # Not before its time (the timer never fires early), and not much after.
    assert sent["deliver_at_ms"] <= msg["at_ms"] < sent["deliver_at_ms"] + 5000


# ------------------------------------------------------------------------------ transactions


async def test_transaction_commit_is_delivered_rollback_never(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """(The Go client's Commit and RollBack never return an error, they log one: the broker's
    side shows what they did.)"""
    prefix, group = names(client5, "tx")
    topic = create_topic(aerolite5, prefix, "TRANSACTION")
    # Were either checked back after all, the answer would be its own end.
    checker = {"bodies": {"tx-commit": "COMMIT", "tx-rollback": "ROLLBACK"}}
    check_tx(await client5.arun(tx_steps(topic, group, SPEC, checker)), SPEC)
    stored = [m.body for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert stored == [b"tx-commit"]


async def test_orphaned_transactions_are_checked_back_and_resolved(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """Two half messages left undecided: the broker asks the producer (a
    RecoverOrphanedTransactionCommand on its Telemetry stream); the TransactionChecker
    commits one and rolls back the other."""
    prefix, group = names(client5, "orphan")
    topic = create_topic(aerolite5, prefix, "TRANSACTION")
    checker = {"default": "UNKNOWN", "bodies": {"orphan-commit": "COMMIT",
                                                "orphan-rollback": "ROLLBACK"}}  # fmt: skip
    run = await client5.arun(
        [
            {"op": "producer", "topics": [topic], "checker": checker},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-commit"},
             "end": "none"},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-rollback"},
             "end": "none"},
            {"op": "wait_checks", "count": 2, "within_s": 30},
            {"op": "simple", "group": group, "topic": topic},
            {"label": "committed", "op": "receive", "invisible_s": 10, "until": 1,
             "within_s": 15, "ack": True},
            {"op": "sleep", "s": 2.5},  # more check rounds: the rolled-back one stays away
            {"label": "again", "op": "receive", "invisible_s": 10},
        ],
        deadline_s=90,
    )  # fmt: skip
    sent = {e["body"]: e for e in lines(run, "sent")}
    assert [e["end"] for e in lines(run, "ended")] == ["none", "none"]  # left to the broker
    checked = lines(run, "checked")
    assert {(c["body"], c["answer"]) for c in checked} == {
        ("orphan-commit", "COMMIT"),
        ("orphan-rollback", "ROLLBACK"),
    }, checked
    for check in checked:  # the half message as the Telemetry command carried it
        assert check["message_id"] == sent[check["body"]]["message_id"]
        assert_like(check, {**SPEC, "body": check["body"]})
    (msg,) = lines(run, "msg", "committed")
    assert_like(msg, {**SPEC, "body": "orphan-commit"})
    assert msg["message_id"] == sent["orphan-commit"]["message_id"]
    assert lines(run, "msg", "again") == []
    stored = [m.msg_id for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert stored == [sent["orphan-commit"]["message_id"]]


# ------------------------------------------------------------- filters, invisible time, DLQ


def test_a_sql92_filter_receives_the_matching_messages(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """FilterExpression(..., SQL92): the broker pops by the expression on each message's
    properties, retries included; the others never come."""
    prefix, group = names(client5, "sql")
    topic = create_topic(aerolite5, prefix)
    check_sql(client5.run(sql_steps(topic, group, within_s=15)))


def test_an_unacked_message_comes_back_after_its_invisible_time(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    prefix, group = names(client5, "invisible")
    topic = create_topic(aerolite5, prefix)
    check_invisible(client5.run(invisible_steps(topic, group, SPEC, within_s=15)), topic, SPEC)


def test_change_invisible_duration_extends_and_its_new_handle_acks(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    prefix, group = names(client5, "change")
    topic = create_topic(aerolite5, prefix)
    check_change(client5.run(change_steps(topic, group, SPEC, within_s=15)), SPEC)


async def test_a_message_never_acked_goes_to_the_dlq_after_max_attempts(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    prefix, _ = names(client5, "dlq")
    topic = create_topic(aerolite5, prefix)
    group = create_group(aerolite5, f"{client5.name}g_dlq", "-r", "1")  # 2 deliveries in all
    sent = check_dlq_tries(await client5.arun(dlq_steps(topic, group, SPEC)))
    (dead,) = await read_dead_letters(aerolite5, group, 1)
    check_read_by_4x(dead, sent, topic, SPEC)


# --------------------------------------------------------------------------- 5.x and 4.x


async def test_a_5x_message_reads_the_same_to_the_4x_sdk(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    prefix, _ = names(client5, "to4")
    topic = create_topic(aerolite5, prefix)
    run = await client5.arun(send_steps(topic, SPEC))
    (sent,) = lines(run, "sent")
    msg = await read_by_4x(aerolite5.namesrv, topic)
    check_read_by_4x(msg, sent, topic, SPEC)
    assert (msg.topic, msg.delivery_attempt) == (topic, 1)


async def test_a_4x_message_reads_the_same_to_the_5x_client(
    aerolite5: Aerolite5, client5: Client5
) -> None:
    """Fields as the 5.x client reads them; a body the SDK compressed (4 KiB or more) comes
    as GZIP with the digest of the bytes on the wire, which the client checks and inflates;
    the tag expression leaves out the other tag."""
    prefix, group = names(client5, "from4")
    topic = create_topic(aerolite5, prefix)
    big = "".join(f"{i:05d}," for i in range(2000))  # 12 000 bytes
    async with Producer(unique("p4_to_5"), aerolite5.namesrv) as producer:
        sent = await producer.send(
            Message(
                topic,
                SPEC["body"].encode(),
                tags=SPEC["tag"],
                keys=SPEC["keys"],
                properties=SPEC["properties"],
            )
        )
        await producer.send(Message(topic, b"not for TagA", tags="TagB"))
        sent_big = await producer.send(Message(topic, big.encode(), tags="TagA", keys=["big"]))
    run = await client5.arun(
        [
            {"op": "simple", "group": group, "topic": topic, "expression": "TagA"},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
            {"label": "again", "op": "receive", "invisible_s": 10},
        ]
    )
    got = {m["message_id"]: m for m in lines(client5.wire(run), "msg")}
    assert set(got) == {sent.msg_id, sent_big.msg_id}
    msg = got[sent.msg_id]
    assert_like(msg, SPEC)
    assert (msg["topic"], msg["delivery_attempt"]) == (topic, 1)
    large = got[sent_big.msg_id]
    assert (large["body"], large["tag"], large["keys"]) == (big, "TagA", ["big"])
    assert not msg["corrupted"] and not large["corrupted"]
    assert len(lines(run, "acked")) == 2
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert any(m.msg_id == sent_big.msg_id and m.sys_flag & 0x1 for m in stored), (
        "the big body was not stored compressed: the test no longer covers GZIP"
    )


# -------------------------------------------------------------------------------------- TLS


def test_a_default_client_meets_a_permissive_tls_broker(
    aerolite5_tls: Aerolite5, client5_tls: Client5
) -> None:
    """Both clients turn TLS on by default (Go has no switch) and trust any certificate: a
    client as it comes sends and receives over TLS; a plaintext one on the same port reads
    what it sent."""
    prefix, group = names(client5_tls, "tls")
    topic = create_topic(aerolite5_tls, prefix)
    tls = client5_tls.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": [SPEC, {**SPEC, "body": "second"}]},
            {"op": "simple", "group": group, "topic": topic},
            {"op": "receive", "invisible_s": 10, "until": 1, "within_s": 15, "ack": True,
             "max": 1},
        ],
        ssl=None,
    )  # fmt: skip
    assert [e["ssl_enabled"] for e in lines(tls, "configured")] == [True]
    sent = {e["body"]: e["message_id"] for e in lines(tls, "sent")}
    (first,) = lines(tls, "msg")
    assert first["message_id"] == sent[first["body"]]
    assert_like(first, {**SPEC, "body": first["body"]})
    plain = client5_tls.run(
        [
            {"op": "simple", "group": unique(f"{client5_tls.name}g_plain"), "topic": topic},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
        ],
        ssl=False,
    )
    assert [e["ssl_enabled"] for e in lines(plain, "configured")] == [False]
    assert sorted(m["message_id"] for m in lines(plain, "msg")) == sorted(sent.values())
