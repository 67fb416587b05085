"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) against the
broker's gRPC front end (broker/proxy, RocketMQ 5's proxy in local mode).

Each test runs the client as a driver process (``rmq5_driver.py`` in ``.venv-rmq5``, see
conftest.py) on a script of steps against a real broker in this event loop, then checks what
the client saw (bodies, tags, keys, properties, message ids, delivery attempts, order) and,
where it says more, what the broker stored, read back with the 4.x SDK.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from broker.broker import Broker
from broker.proxy.apis import definition_pb2 as pb
from client import Message, Producer
from tests.processes import DriverRun, unique
from tests.proxy.conftest import (
    ProxyBrokerFactory,
    Rmq5,
    create_group,
    create_topic,
    read_queue,
    read_topic,
)
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
from tests.support import wait_until

# The client's scenarios run in make test only: tests/proxy/test_grpc_protocol.py covers
# the same broker paths on both event loops.
pytestmark = pytest.mark.once

TOPIC_NOT_FOUND = pb.TOPIC_NOT_FOUND  # 40402

SPEC = spec("hello from five")


@pytest.mark.slow
async def test_normal_message_is_received_once_and_acked(broker5: Broker, rmq5: Rmq5) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_normal")
    run = await rmq5.run(broker, normal_steps(topic, unique("g5_normal"), SPEC, within_s=10))
    sent, msg = check_normal(run, topic, SPEC)
    assert msg["message_type"] == "NORMAL"
    stored = [m for q in (await read_topic(broker, topic)).values() for m in q]
    assert [(m.body, m.msg_id) for m in stored] == [(SPEC["body"].encode(), sent["message_id"])]


# ------------------------------------------------------------------------ 4.x and 5.x


async def test_a_5x_message_reads_the_same_to_the_4x_sdk(broker5: Broker, rmq5: Rmq5) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_to4")
    run = await rmq5.run(broker, send_steps(topic, SPEC))
    (sent,) = lines(run, "sent")
    msg = await read_by_4x(broker.config.namesrv_addr or "", topic)
    check_read_by_4x(msg, sent, topic, SPEC)
    assert (msg.topic, msg.delivery_attempt) == (topic, 1)


async def test_a_4x_message_reads_the_same_to_the_5x_client(broker5: Broker, rmq5: Rmq5) -> None:
    broker = broker5
    topic = await create_topic(broker, "t4_to5")
    async with Producer(unique("p4_to5"), broker.config.namesrv_addr) as producer:
        sent = await producer.send(
            Message(
                topic,
                SPEC["body"].encode(),
                tags=SPEC["tag"],
                keys=SPEC["keys"],
                properties=SPEC["properties"],
            )
        )
    run = await rmq5.run(
        broker,
        [
            {"op": "simple", "group": unique("g5_from4"), "topic": topic, "expression": "TagA"},
            {"op": "receive", "invisible_s": 10, "until": 1, "within_s": 10, "ack": True},
        ],
    )
    (msg,) = lines(run, "msg")
    assert_like(msg, SPEC)
    assert msg["message_id"] == sent.msg_id
    assert (msg["topic"], msg["delivery_attempt"], msg["message_type"]) == (topic, 1, "NORMAL")
    assert not msg["corrupted"]
    assert len(lines(run, "acked")) == 1


# ------------------------------------------------------------------------- FIFO, delay


@pytest.mark.slow
async def test_fifo_messages_of_a_group_keep_one_queue_and_their_order(
    broker5: Broker, rmq5: Rmq5
) -> None:
    """A FIFO group's receive hands out a message group's messages in send order, and holds
    back the rest of that group's queue while a batch of it is un-acked."""
    topic = await create_topic(broker5, "t5_fifo")
    group = create_group(broker5, "g5_fifo", consume_message_orderly=True)
    got = check_fifo(await rmq5.run(broker5, fifo_steps(topic, group, within_s=10)))
    assert {e["message_type"] for e in got} == {"FIFO"}
    check_fifo_queues(await read_topic(broker5, topic))


async def send_delayed_then_receive(broker: Broker, rmq5: Rmq5) -> DriverRun:
    """A message sent 3 to 4 s ahead: a receive at once (1 s of long polling), then
    receives until it comes."""
    topic = await create_topic(broker, "t5_delay")
    return await rmq5.run(
        broker,
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": [{**SPEC, "delay_s": 3}]},
            {"op": "simple", "group": unique("g5_delay"), "topic": topic},
            {"label": "early", "op": "receive", "invisible_s": 10},
            {"label": "due", "op": "receive", "invisible_s": 10, "until": 1, "within_s": 15,
             "ack": True},
        ],
    )  # fmt: skip


@pytest.mark.slow
async def test_a_delayed_message_arrives_at_its_delivery_time(broker5: Broker, rmq5: Rmq5) -> None:
    run = await send_delayed_then_receive(broker5, rmq5)
    (sent,) = lines(run, "sent")
    assert lines(run, "msg", "early") == []
    (msg,) = lines(run, "msg", "due")
    assert_like(msg, SPEC)
    assert msg["message_id"] == sent["message_id"]
    # Not before its time (the timer never fires early), and not much after.
    assert sent["deliver_at_ms"] <= msg["at_ms"] < sent["deliver_at_ms"] + 5000


@pytest.mark.slow
async def test_a_delayed_message_is_received_as_delay_with_its_delivery_time(
    broker5: Broker, rmq5: Rmq5
) -> None:
    run = await send_delayed_then_receive(broker5, rmq5)
    (sent,) = lines(run, "sent")
    (msg,) = lines(run, "msg", "due")
    assert msg["message_id"] == sent["message_id"]
    assert (msg["message_type"], msg["delivery_timestamp"]) == ("DELAY", sent["deliver_at_ms"])


# ------------------------------------------------------------------------ transactions


@pytest.mark.slow
async def test_a_committed_transaction_is_delivered_a_rolled_back_one_never(
    broker5: Broker, rmq5: Rmq5
) -> None:
    topic = await create_topic(broker5, "t5_tx")
    check_tx(await rmq5.run(broker5, tx_steps(topic, unique("g5_tx"), SPEC, "ROLLBACK")), SPEC)
    stored = [m.body for q in (await read_topic(broker5, topic)).values() for m in q]
    assert stored == [b"tx-commit"]


@pytest.mark.slow
async def test_an_orphaned_transaction_is_checked_back_on_telemetry_and_committed(
    start_proxy_broker: ProxyBrokerFactory, rmq5: Rmq5
) -> None:
    broker = await start_proxy_broker(
        transaction_check_interval_ms=1000, transaction_timeout_ms=1000
    )
    topic = await create_topic(broker, "t5_orphan")
    run = await rmq5.run(
        broker,
        [
            {"op": "producer", "topics": [topic], "checker": "COMMIT"},
            {"op": "transaction", "topic": topic, "message": SPEC, "end": "none"},
            {"op": "wait_checks", "count": 1, "within_s": 20},
            {"op": "simple", "group": unique("g5_orphan"), "topic": topic},
            {"label": "committed", "op": "receive", "invisible_s": 10, "until": 1,
             "within_s": 10, "ack": True},
            {"label": "again", "op": "receive", "invisible_s": 10},
        ],
    )  # fmt: skip
    (sent,) = lines(run, "sent")
    assert [e["end"] for e in lines(run, "ended")] == ["none"]  # left to the broker
    checked = lines(run, "checked")
    assert checked, "the broker never asked the producer about its half message"
    assert {c["message_id"] for c in checked} == {sent["message_id"]}
    assert_like(checked[0], SPEC)  # the half message as the Telemetry command carried it
    (msg,) = lines(run, "msg", "committed")
    assert_like(msg, SPEC)
    assert msg["message_id"] == sent["message_id"]
    assert lines(run, "msg", "again") == []
    stored = [m.msg_id for q in (await read_topic(broker, topic)).values() for m in q]
    assert stored == [sent["message_id"]]


# ------------------------------------------------------------- invisible time, retries


@pytest.mark.slow
async def test_an_unacked_message_comes_back_after_its_invisible_time(
    broker5: Broker, rmq5: Rmq5
) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_invisible")
    steps = invisible_steps(topic, unique("g5_invisible"), SPEC, within_s=10)
    check_invisible(await rmq5.run(broker, steps), topic, SPEC)


@pytest.mark.slow
async def test_change_invisible_duration_extends_and_its_new_handle_acks(
    broker5: Broker, rmq5: Rmq5
) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_change")
    steps = change_steps(topic, unique("g5_change"), SPEC, within_s=10)
    check_change(await rmq5.run(broker, steps), SPEC)


@pytest.mark.slow
async def test_a_message_never_acked_goes_to_the_dlq_after_max_attempts(
    broker5: Broker, rmq5: Rmq5
) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_dlq")
    group = create_group(broker, "g5_dlq", retry_max_times=1)  # 2 deliveries in all
    sent = check_dlq_tries(await rmq5.run(broker, dlq_steps(topic, group, SPEC)))
    dlq = f"%DLQ%{group}"
    await wait_until(lambda: broker.store.get_max_offset(dlq, 0) == 1, "the dead letter", 5)
    (dead,) = await read_queue(broker, dlq)
    check_read_by_4x(dead, sent, topic, SPEC)


@pytest.mark.slow
async def test_an_sql92_filter_receives_the_matching_messages(broker5: Broker, rmq5: Rmq5) -> None:
    """FilterExpression(..., SQL): the broker pops by the expression on each message's
    properties, retries included; the others never come."""
    topic = await create_topic(broker5, "t5_sql")
    check_sql(await rmq5.run(broker5, sql_steps(topic, unique("g5_sql"), within_s=10)))


# ----------------------------------------------------------------------- push consumer


@pytest.mark.slow
async def test_push_consumer_acks_successes_and_retries_failures_into_the_dlq(
    broker5: Broker, rmq5: Rmq5
) -> None:
    broker = broker5
    topic = await create_topic(broker, "t5_push")
    group = create_group(broker, "g5_push", retry_max_times=2)  # 3 deliveries in all
    specs = [{**SPEC, "body": body} for body in ("ok-1", "ok-2", "fail-1")]
    run = await rmq5.run(
        broker,
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": specs},
            {"op": "push", "group": group, "topic": topic, "fail_prefix": "fail-",
             "until_ok": 2, "until_failed": 3, "settle_s": 3, "within_s": 45},
        ],
        deadline_s=75,
    )  # fmt: skip
    sent = {e["body"]: e["message_id"] for e in lines(run, "sent")}
    (pushed,) = lines(run, "pushed")
    assert pushed["reason"] == "expected", pushed
    got = lines(run, "msg")
    for msg in got:
        assert_like(msg, {**SPEC, "body": msg["body"]})
        assert msg["message_id"] == sent[msg["body"]]
    ok = sorted((m["body"], m["delivery_attempt"]) for m in got if m["result"] == "SUCCESS")
    assert ok == [("ok-1", 1), ("ok-2", 1)]  # consumed once: acked
    failed = [(m["body"], m["delivery_attempt"]) for m in got if m["result"] == "FAILURE"]
    assert failed == [("fail-1", 1), ("fail-1", 2), ("fail-1", 3)]
    dlq = f"%DLQ%{group}"
    await wait_until(lambda: broker.store.get_max_offset(dlq, 0) == 1, "the dead letter", 5)
    (dead,) = await read_queue(broker, dlq)
    assert (dead.body, dead.msg_id) == (b"fail-1", sent["fail-1"])
    # The successes were acked (their invisible time is a minute and renewed, so only the
    # broker can tell): nothing of the group is left in flight.
    await wait_until(
        lambda: not [ck for ck in broker.pop.checkpoints.values() if ck.group == group],
        "every delivery of the group acked or dead-lettered",
        5,
    )


# ------------------------------------------------------------------------------ errors


async def test_a_send_to_an_unknown_topic_fails_naming_topic_not_found(
    broker5: Broker, rmq5: Rmq5
) -> None:
    """Never created: the client's route query is refused with TOPIC_NOT_FOUND, which the
    client only logs before raising its own error. Created, routed, then gone from the
    broker: SendMessage itself is refused, and the client raises NotFoundException with the
    code. Either way the broker goes on serving."""
    broker = broker5
    topic = await create_topic(broker, "t5_known")
    gone = await create_topic(broker, "t5_gone")
    missing = unique("t5_missing")
    run = rmq5.start(
        broker,
        [
            {"op": "producer", "topics": [topic, gone]},
            {"op": "wait_go", "within_s": 30},
            {"label": "missing", "op": "send", "topic": missing, "messages": [SPEC]},
            {"label": "gone", "op": "send", "topic": gone, "messages": [SPEC]},
            {"label": "known", "op": "send", "topic": topic, "messages": [SPEC]},
        ],
    )
    assert await rmq5.wait_for(run, lambda r: bool(lines(r, "waiting")), 30), run.describe()
    assert broker.topics.delete(gone)
    rmq5.go(run)
    await rmq5.finish(run)
    assert lines(run, "went")[0]["go"]

    assert lines(run, "sent", "missing") == []
    (error,) = lines(run, "send_error", "missing")
    assert error["text"] == f"failed to fetch topic:{missing} route.", error
    refusals = [e["text"] for e in lines(run, "client_error", "missing")]
    assert any(f"{TOPIC_NOT_FOUND}, topic[{missing}] not exist" in t for t in refusals), refusals
    assert broker.topics.get(missing) is None  # and no topic was made for it

    assert lines(run, "sent", "gone") == []
    (error,) = lines(run, "send_error", "gone")
    assert (error["type"], error["code"]) == ("NotFoundException", TOPIC_NOT_FOUND), error
    assert gone in error["text"], error

    (sent,) = lines(run, "sent", "known")  # the broker still serves the next call
    assert sent["message_id"]
    stored = [m.msg_id for q in (await read_topic(broker, topic)).values() for m in q]
    assert stored == [sent["message_id"]]


# ------------------------------------------------------------------ the broker's hygiene


async def test_a_closed_telemetry_stream_leaves_no_pending_task(
    broker5: Broker, rmq5: Rmq5
) -> None:
    broker = broker5
    loop = asyncio.get_running_loop()
    reports: list[dict[str, Any]] = []
    outer = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    try:
        topic = await create_topic(broker, "t5_stream")
        run = await rmq5.run(broker, [{"op": "producer", "topics": [topic]}])
        assert lines(run, "producer_started")
        # The producer has shut down: it said so (NotifyClientTermination), then closed its
        # Telemetry stream, whose handler ends.
        await wait_until(lambda: not broker.grpc.clients.clients, "the producer to leave", 10)
        for _ in range(30):
            gc.collect()
            await asyncio.sleep(0.1)
            if reports:
                break
    finally:
        loop.set_exception_handler(outer)
    assert [(c.get("message"), repr(c.get("task"))[:120]) for c in reports] == []
