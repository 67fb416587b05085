"""TraceDispatcher (client/trace_dispatch.py) against a real broker: records batched into
trace messages keyed for queryMsgTraceById, written on shutdown too, dropped (not waited for)
when the queue is full, and a broker that refuses them never reaches the caller."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Producer
from client.admin import Admin
from client.trace import TRACE_TOPIC, TraceBean, TraceContext, TraceType
from client.trace_dispatch import TraceDispatcher, inner_group
from tests.client.conftest import stored
from tests.support import BrokerFactory, wait_dispatched, wait_until


def new_dispatcher(namesrv: NameServer, **kw: Any) -> TraceDispatcher:
    inner = inner_group("PG", "PRODUCE")
    sender = Producer(inner, namesrv.address, instance_name=inner, auto_batch=False)
    return TraceDispatcher(sender, **kw)


def pub(n: int) -> TraceContext:
    bean = TraceBean(msg_id=f"7F000001A1B218B4AAC27C1C2D3E{n:04X}", topic="T", keys=f"k{n}")
    return TraceContext(TraceType.PUB, "PG", [bean], 1_700_000_000_000 + n, cost_ms=1)


async def trace_messages(broker: Broker, topic: str = TRACE_TOPIC) -> int:
    await wait_dispatched(broker)
    return len(await stored(broker, topic, range(1)))


async def test_records_are_batched_into_trace_messages_found_by_id_and_key(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    dispatcher = new_dispatcher(namesrv, flush_after_s=0.3)
    await dispatcher.start()
    try:
        assert all(dispatcher.append(pub(n)) for n in range(50))
        await wait_until(lambda: broker.store.get_max_offset(TRACE_TOPIC, 0) >= 1, "a trace", 5)
    finally:
        await dispatcher.shutdown()
    assert await trace_messages(broker) < 50  # gathered, not one message per record
    async with Admin(namesrv.address) as admin:
        (view,) = await admin.query_trace(pub(7).beans[0].msg_id)
        assert (view.trace_type, view.context.time_ms) == (TraceType.PUB, 1_700_000_000_007)
        by_key = await admin.query_by_key(TRACE_TOPIC, "k9")
        assert len(by_key) == 1


async def test_shutdown_writes_what_is_queued(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    dispatcher = new_dispatcher(namesrv, flush_after_s=60)
    await dispatcher.start()
    for n in range(3):
        dispatcher.append(pub(n))
    await dispatcher.shutdown()  # long before the 60 s a batch would wait
    assert await trace_messages(broker) == 1
    assert not dispatcher.append(pub(4))  # stopped: refused, not queued


async def test_a_full_queue_drops_records_instead_of_waiting(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    await start_broker(trace_topic_enable=True)
    dispatcher = new_dispatcher(namesrv, queue_size=4)
    await dispatcher.start()
    try:
        accepted = [dispatcher.append(pub(n)) for n in range(20)]  # no await: nothing drains
        assert accepted.count(True) == 4
        assert dispatcher.dropped == 16
    finally:
        await dispatcher.shutdown()


async def test_a_refused_trace_is_logged_never_raised(
    namesrv: NameServer, start_broker: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    await start_broker(auto_create_topic_enable=False)  # no trace topic, none auto-created
    dispatcher = new_dispatcher(namesrv, flush_after_s=0.05)
    await dispatcher.start()
    with caplog.at_level(logging.WARNING, logger="client.trace_dispatch"):
        dispatcher.append(pub(1))
        await wait_until(lambda: dispatcher.failed == 1, "the failed trace send", 10)
        await dispatcher.shutdown()
    assert "trace_send_failed" in caplog.text
