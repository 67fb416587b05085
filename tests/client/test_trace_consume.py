"""Trace records of consumers and transactions (Java's ConsumeMessageTraceHookImpl and
EndTransactionTraceHookImpl): ``PushConsumer(trace=True)`` writes a SubBefore when a listener
gets a message and a SubAfter with its cost and outcome, paired by request id;
``SimpleConsumer(trace=True)`` a SubBefore per message received and a SubAfter when it is
acked; ``TransactionProducer(trace=True)`` the half message's Pub and an EndTransaction record
for each decision, the local one and the check-back's. Each is read back with
``Admin.query_trace`` (and the consumes with ``mqadmin queryMsgTraceById``)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ConsumeFromWhere,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageView,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionProducer,
)
from client.admin import Admin
from client.trace import ConsumeReturnType, MessageType, TraceType, TraceView
from tests.client.conftest import create_topic
from tests.support import BrokerFactory, wait_dispatched, wait_until

TOPIC = "TopicTracedConsume"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def trace_of(
    namesrv: NameServer, broker: Broker, msg_id: str, kinds: int, timeout_s: float = 10.0
) -> list[TraceView]:
    """The records about ``msg_id`` once they are of ``kinds`` distinct types (trace messages
    go out up to half a second after the event)."""
    views: list[TraceView] = []
    async with Admin(namesrv.address) as admin:

        async def enough() -> bool:
            nonlocal views
            await wait_dispatched(broker)
            views = await admin.query_trace(msg_id)
            return len({v.trace_type for v in views}) >= kinds

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not await enough():
            if loop.time() > deadline:
                pytest.fail(f"trace of {msg_id}: {[v.trace_type for v in views]}")
            await asyncio.sleep(0.1)
    return views


def one(views: list[TraceView], kind: TraceType) -> TraceView:
    found = [v for v in views if v.trace_type is kind]
    assert len(found) == 1, [v.trace_type for v in views]
    return found[0]


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    broker = await start_broker(trace_topic_enable=True)
    await create_topic(broker, TOPIC, queues=2)
    return broker


async def test_push_consumer_records_each_outcome(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-traced-c", namesrv.address, trace=True) as producer:
        sent = {
            body: await producer.send(Message(TOPIC, body, keys=[f"k-{body.decode()}"]))
            for body in (b"ok", b"later", b"boom")
        }
    seen: list[bytes] = []

    async def listener(msg: MessageView) -> ConsumeResult:
        seen.append(msg.body)
        if msg.body == b"boom":
            raise RuntimeError("the listener fails")
        return ConsumeResult.RECONSUME_LATER if msg.body == b"later" else ConsumeResult.SUCCESS

    consumer = PushConsumer("cg-traced", namesrv.address, consume_from_where=FIRST, trace=True)
    consumer.subscribe(TOPIC)(listener)
    async with consumer:
        await wait_until(lambda: len(seen) >= 3, "three consumes")
    expected = {
        b"ok": (True, ConsumeReturnType.SUCCESS),
        b"later": (False, ConsumeReturnType.FAILED),
        b"boom": (False, ConsumeReturnType.EXCEPTION),
    }
    for body, (success, code) in expected.items():
        msg_id = sent[body].msg_id
        views = await trace_of(namesrv, broker, msg_id, kinds=3)
        before = one(views, TraceType.SUB_BEFORE).context
        after = next(v.context for v in views if v.trace_type is TraceType.SUB_AFTER)
        assert (before.group, after.group) == ("cg-traced", "cg-traced")
        assert after.request_id == before.request_id != ""
        assert before.beans[0].keys == after.beans[0].keys == f"k-{body.decode()}"
        assert before.beans[0].retry_times == 0
        assert (after.success, after.context_code) == (success, int(code)), body
        assert after.time_ms >= before.time_ms and after.cost_ms >= 0
        assert one(views, TraceType.PUB).group == "pg-traced-c"


async def test_a_consume_past_its_timeout_is_recorded_as_such(
    namesrv: NameServer, broker: Broker
) -> None:
    async with Producer("pg-traced-t", namesrv.address) as producer:
        sent = await producer.send(Message(TOPIC, b"slow"))
    started = asyncio.Event()

    async def listener(_msg: MessageView) -> None:
        started.set()
        await asyncio.sleep(30)

    consumer = PushConsumer(
        "cg-traced-t",
        namesrv.address,
        consume_from_where=FIRST,
        trace=True,
        consume_timeout_s=0.2,
    )
    consumer.subscribe(TOPIC)(listener)
    async with consumer:
        await asyncio.wait_for(started.wait(), 5)
        views = await trace_of(namesrv, broker, sent.msg_id, kinds=2)
    after = next(v.context for v in views if v.trace_type is TraceType.SUB_AFTER)
    assert (after.success, after.context_code) == (False, int(ConsumeReturnType.TIME_OUT))


async def test_orderly_consumer_records_its_consumes(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-traced-o", namesrv.address) as producer:
        sent = await producer.send(Message(TOPIC, b"in order"))
    seen: list[str] = []
    consumer = PushConsumer(
        "cg-traced-o", namesrv.address, consume_from_where=FIRST, orderly=True, trace=True
    )

    @consumer.subscribe(TOPIC)
    def listener(msg: MessageView) -> None:  # a plain function: run on a thread
        seen.append(msg.msg_id)

    async with consumer:
        await wait_until(lambda: sent.msg_id in seen, "the consume")
        views = await trace_of(namesrv, broker, sent.msg_id, kinds=2)
    after = one(views, TraceType.SUB_AFTER).context
    assert (after.group, after.success, after.context_code) == ("cg-traced-o", True, 0)


async def test_simple_consumer_records_receive_and_ack(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-traced-s", namesrv.address) as producer:
        acked = await producer.send(Message(TOPIC, b"acked", tags="T"))
        left = await producer.send(Message(TOPIC, b"left", tags="T"))
    async with SimpleConsumer(
        "cg-traced-s",
        namesrv.address,
        subscriptions={TOPIC: "*"},
        consume_from_where=FIRST,
        await_duration=timedelta(seconds=1),
        trace=True,
    ) as consumer:
        got: dict[str, Any] = {}
        for _ in range(20):
            for msg in await consumer.receive(invisible_duration=timedelta(seconds=60)):
                got[msg.msg_id] = msg
            if len(got) == 2:
                break
        assert set(got) == {acked.msg_id, left.msg_id}
        await consumer.ack(got[acked.msg_id])
        assert got[acked.msg_id].trace_context is None  # written: an ack is traced once
        views = await trace_of(namesrv, broker, acked.msg_id, kinds=2)
        before = one(views, TraceType.SUB_BEFORE).context
        after = one(views, TraceType.SUB_AFTER).context
        assert after.request_id == before.request_id and after.success
        assert before.group == after.group == "cg-traced-s"
        # Received but never acked: a SubBefore and no SubAfter.
        unacked = await trace_of(namesrv, broker, left.msg_id, kinds=1)
        assert [v.trace_type for v in unacked] == [TraceType.SUB_BEFORE]


async def test_transaction_records_half_send_and_each_end(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(
        trace_topic_enable=True, transaction_check_interval_ms=100, transaction_timeout_ms=200
    )
    await create_topic(broker, TOPIC)

    def executor(msg: Message, _arg: Any) -> LocalTransactionState:
        if msg.body == b"unsure":
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.COMMIT

    checked = asyncio.Event()

    def checker(_msg: MessageView) -> LocalTransactionState:
        checked.set()
        return LocalTransactionState.ROLLBACK

    async with TransactionProducer(
        "pg-traced-tx", namesrv.address, executor=executor, checker=checker, trace=True
    ) as producer:
        sure = await producer.send_message_in_transaction(
            Message(TOPIC, b"sure", tags="TagT", keys=["order-1"])
        )
        unsure = await producer.send_message_in_transaction(Message(TOPIC, b"unsure"))
        await asyncio.wait_for(checked.wait(), 10)
        views = await trace_of(namesrv, broker, sure.msg_id, kinds=2)
        pub = one(views, TraceType.PUB).context
        assert pub.beans[0].msg_type is MessageType.TRANS_HALF and pub.group == "pg-traced-tx"
        end = one(views, TraceType.END_TRANSACTION).context
        bean = end.beans[0]
        assert (bean.transaction_state, bean.from_transaction_check) == ("COMMIT_MESSAGE", False)
        assert (bean.topic, bean.tags, bean.keys) == (TOPIC, "TagT", "order-1")
        assert bean.msg_type is MessageType.TRANS_COMMIT and bean.store_host == broker.address

        async def both_ends() -> list[TraceView]:
            views = await trace_of(namesrv, broker, unsure.msg_id, kinds=2)
            return [v for v in views if v.trace_type is TraceType.END_TRANSACTION]

        ends = await both_ends()
        for _ in range(50):
            if len(ends) >= 2:
                break
            await asyncio.sleep(0.1)
            ends = await both_ends()
    states = [(v.context.beans[0].transaction_state, v.context.beans[0].from_transaction_check)
              for v in ends]  # fmt: skip
    assert states[:2] == [("UNKNOW", False), ("ROLLBACK_MESSAGE", True)]
