"""``Producer(trace=True)`` (enableMsgTrace): each send the broker took leaves a Pub record,
found by ``Admin.query_trace`` with the producer's group, the broker's address, the ids the
send returned and its cost; none for a refused send or when the broker says traceOn=false."""

from __future__ import annotations

import pytest

from broker.namesrv.server import NameServer
from client import Message, Producer
from client.admin import Admin
from client.errors import ClientError
from client.trace import DEFAULT_REGION, MessageType, TraceType
from remoting.errors import RocketMQError
from tests.client.conftest import create_topic, stored
from tests.support import BrokerFactory, wait_dispatched

TOPIC = "TopicTraced"
TRACE = "RMQ_SYS_TRACE_TOPIC"


async def test_each_send_leaves_a_pub_record(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True, auto_create_topic_enable=False)
    await create_topic(broker, TOPIC)
    async with Producer("pg-traced", namesrv.address, trace=True) as producer:
        plain = await producer.send(Message(TOPIC, b"hello", tags="TagA", keys=["o-1", "u-7"]))
        delayed = await producer.send(Message(TOPIC, b"later", delay_level=1))
        with pytest.raises((ClientError, RocketMQError)):  # not sent: no record
            await producer.send(Message("NoSuchTopicHere", b"x"))
    await wait_dispatched(broker)
    async with Admin(namesrv.address) as admin:
        (view,) = await admin.query_trace(plain.msg_id)
        ctx = view.context
        bean = ctx.beans[0]
        assert (ctx.trace_type, ctx.group, ctx.region_id, ctx.success) == (
            TraceType.PUB, "pg-traced", DEFAULT_REGION, True,
        )  # fmt: skip
        assert (bean.topic, bean.tags, bean.keys, bean.body_length) == (TOPIC, "TagA", "o-1 u-7", 5)
        assert (bean.offset_msg_id, bean.store_host) == (plain.offset_msg_id, broker.address)
        assert bean.msg_type is MessageType.NORMAL and ctx.cost_ms >= 0
        assert view.client_host == "127.0.0.1"
        (later,) = await admin.query_trace(delayed.msg_id)
        assert later.context.beans[0].msg_type is MessageType.DELAY
        found = await admin.query_by_key("RMQ_SYS_TRACE_TOPIC", "o-1")  # by business key too
        assert len(found) == 1
    records = sum(len(m.body.split(b"\x02")) - 1 for m in await stored(broker, TRACE, range(1)))
    assert records == 2  # the two sends the broker took


async def test_no_record_when_the_broker_turns_tracing_off(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True, trace_on=False)
    await create_topic(broker, TOPIC)
    async with Producer("pg-traced", namesrv.address, trace=True) as producer:
        sent = await producer.send(Message(TOPIC, b"quiet"))
    await wait_dispatched(broker)
    assert broker.store.get_max_offset("RMQ_SYS_TRACE_TOPIC", 0) == 0
    async with Admin(namesrv.address) as admin:
        assert await admin.query_trace(sent.msg_id) == []


async def test_batches_and_orderly_sends_are_traced_message_by_message(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await create_topic(broker, TOPIC)
    async with Producer("pg-traced-b", namesrv.address, trace=True) as producer:
        batch = [Message(TOPIC, f"b{n}".encode(), keys=[f"batch-{n}"]) for n in range(3)]
        sent = await producer.send_batch(batch)
        ordered = await producer.send_orderly(Message(TOPIC, b"in order"), sharding_key="k")
    await wait_dispatched(broker)
    ids = sent.msg_id.split(",")
    assert len(ids) == 3
    async with Admin(namesrv.address) as admin:
        for n, msg_id in enumerate(ids):
            (view,) = await admin.query_trace(msg_id)
            bean = view.context.beans[0]
            assert (view.trace_type, bean.keys, bean.body_length) == (
                TraceType.PUB,
                f"batch-{n}",
                2,
            )
            assert bean.offset_msg_id == sent.offset_msg_id.split(",")[n]
        (view,) = await admin.query_trace(ordered.msg_id)
        assert view.context.beans[0].msg_type is MessageType.NORMAL  # what a 4.9 reader knows
