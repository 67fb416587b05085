"""``mqadmin queryMsgTraceById`` and ``Admin.query_trace`` on a broker holding trace messages
as traced 4.9 clients write them (records from client/trace.py, keyed by message id and key,
on ``RMQ_SYS_TRACE_TOPIC``): the text exactly as RocketMQ prints it, JSON, a custom trace
topic, and an id nothing traced."""

from __future__ import annotations

import time

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Message, Producer
from client.admin import Admin
from client.trace import (
    TRACE_TOPIC,
    TraceBean,
    TraceContext,
    TraceType,
    encode_trace,
    trace_keys,
)
from tests.client.test_admin_cli import CliError, mqadmin, mqadmin_text
from tests.support import BrokerFactory, wait_dispatched

MSG_ID = "7F000001A1B218B4AAC27C1C2D3E0000"
OTHER_ID = "7F000001A1B218B4AAC27C1C2D3E0001"
SENT_MS = 1_700_000_000_123


def traced_events() -> list[list[TraceContext]]:
    """Three trace messages: the send, one group's consume (two tries), another group's."""
    pub = TraceContext(
        TraceType.PUB, "PG_demo",
        [TraceBean(msg_id=MSG_ID, topic="TopicTest", tags="TagA", keys="OrderID188",
                   store_host="127.0.0.1:10911", body_length=11)],
        SENT_MS, "DefaultRegion", cost_ms=3,
    )  # fmt: skip

    def consume(group: str, at: int, ok: bool, request: str) -> list[TraceContext]:
        bean = TraceBean(msg_id=MSG_ID, keys="OrderID188")
        return [
            TraceContext(TraceType.SUB_BEFORE, group, [bean], at - 5, "DefaultRegion",
                         request_id=request),
            TraceContext(TraceType.SUB_AFTER, group, [bean], at, "DefaultRegion", cost_ms=5,
                         success=ok, request_id=request, context_code=0 if ok else 4),
        ]  # fmt: skip

    other = TraceContext(
        TraceType.PUB, "PG_demo", [TraceBean(msg_id=OTHER_ID, keys="OrderID188")], SENT_MS
    )
    return [
        [pub, other],
        consume("CG_b", SENT_MS + 400, False, "R1") + consume("CG_b", SENT_MS + 1400, True, "R2"),
        consume("CG_a", SENT_MS + 500, True, "R3"),
    ]


async def write_traces(namesrv: NameServer, broker: Broker, topic: str = TRACE_TOPIC) -> None:
    async with Producer("_INNER_TRACE_PRODUCER-test", namesrv.address) as producer:
        for contexts in traced_events():
            body = "".join(encode_trace(c) for c in contexts).encode()
            await producer.send(Message(topic, body, keys=trace_keys(contexts)))
    await wait_dispatched(broker)


def when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def row(*cells: str) -> str:
    return "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n".format(*cells)


async def test_the_trace_prints_as_rocketmq_prints_it(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await write_traces(namesrv, broker)
    text = await mqadmin_text(namesrv, "queryMsgTraceById", "-i", MSG_ID)
    sub_header = row(
        "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"
    )
    # CG_b before CG_a: java.util.HashMap's order (bucket 8 before 9 of its 16)
    assert text == (
        row("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
        + row("Pub", "PG_demo", "127.0.0.1", when(SENT_MS), "3ms", "success")
        + "\n"
        + sub_header
        + row("Sub", "CG_b", "127.0.0.1", when(SENT_MS + 400), "5ms", "failed")
        + row("Sub", "CG_b", "127.0.0.1", when(SENT_MS + 1400), "5ms", "success")
        + "\n"
        + sub_header
        + row("Sub", "CG_a", "127.0.0.1", when(SENT_MS + 500), "5ms", "success")
        + "\n"
    )


async def test_json_a_custom_topic_and_the_sdk_agree(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True, msg_trace_topic_name="OrdersTrace")
    await write_traces(namesrv, broker, "OrdersTrace")
    rows = await mqadmin(namesrv, "queryMsgTraceById", "-i", MSG_ID, "-t", "OrdersTrace")
    assert [(r["type"], r["group"], r["status"]) for r in rows] == [
        ("Pub", "PG_demo", "success"),
        ("SubBefore", "CG_b", "success"),
        ("SubAfter", "CG_b", "failed"),
        ("SubBefore", "CG_b", "success"),
        ("SubAfter", "CG_b", "success"),
        ("SubBefore", "CG_a", "success"),
        ("SubAfter", "CG_a", "success"),
    ]
    async with Admin(namesrv.address) as admin:
        views = await admin.query_trace(OTHER_ID, "OrdersTrace")
        assert [(v.trace_type, v.context.beans[0].keys) for v in views] == [
            (TraceType.PUB, "OrderID188")
        ]
        # the default topic does not exist here
        with pytest.raises(Exception, match=TRACE_TOPIC):
            await admin.query_trace(MSG_ID)


async def test_an_id_nothing_traced_is_said_so(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(trace_topic_enable=True)
    await write_traces(namesrv, broker)
    with pytest.raises(CliError) as err:
        await mqadmin_text(namesrv, "queryMsgTraceById", "-i", "7F000001A1B218B4AAC27C1C2D3EFFFF")
    assert "no trace of message" in err.value.stderr
