"""The trace topic a broker makes with ``traceTopicEnable`` (TopicConfigManager's
``msgTraceTopicName``): one queue, read-write, a system topic (not deletable, not listed as a
user topic), registered with the name server so traced clients find its route."""

from __future__ import annotations

from broker.namesrv.server import NameServer
from remoting.bodies import PERM_READ, PERM_WRITE
from tests.support import BrokerFactory, wait_until


async def test_trace_topic_enable_makes_the_trace_topic_at_start(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    tc = broker.topics.get("RMQ_SYS_TRACE_TOPIC")
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    assert tc.perm & (PERM_READ | PERM_WRITE) == PERM_READ | PERM_WRITE
    assert broker.topics.is_system_topic("RMQ_SYS_TRACE_TOPIC")
    await wait_until(
        lambda: namesrv.routes.pick_topic_route("RMQ_SYS_TRACE_TOPIC") is not None, "its route", 5
    )


async def test_a_custom_trace_topic_is_a_system_topic_and_the_default_is_not_made(
    start_broker: BrokerFactory,
) -> None:
    broker = await start_broker(trace_topic_enable=True, msg_trace_topic_name="OrdersTrace")
    tc = broker.topics.get("OrdersTrace")
    assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    assert broker.topics.is_system_topic("OrdersTrace")
    assert broker.topics.get("RMQ_SYS_TRACE_TOPIC") is None
    plain = await start_broker()
    assert plain.topics.get("RMQ_SYS_TRACE_TOPIC") is None  # off by default, as in RocketMQ
