"""SQL92 subscriptions end to end: the SDK subscribes with ``sql=``, the broker (with
``enablePropertyFilter=true``) evaluates the expression on each stored message's properties,
and refuses, at ``start()``, an expression it cannot parse or a filter it does not offer."""

from __future__ import annotations

import asyncio

import pytest

from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, MessageView, Producer, PullConsumer, PushConsumer
from client.errors import ClientError
from tests.client.conftest import Received, create_topic
from tests.support import BrokerFactory

TOPIC = "TopicSql"
EXPRESSION = "a >= 5 AND region = 'eu' OR vip IS NOT NULL"


def _expected(i: int) -> bool:
    return (i >= 5 and i % 2 == 0) or i == 1


async def _send(namesrv: NameServer) -> None:
    async with Producer("pg-sql", namesrv.address) as producer:
        for i in range(12):
            props = {"a": str(i), "region": "eu" if i % 2 == 0 else "us"}
            if i == 1:
                props["vip"] = "yes"
            await producer.send(Message(TOPIC, f"m-{i}".encode(), properties=props))


async def test_push_consumer_gets_only_what_the_expression_selects(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(enable_property_filter=True)
    await create_topic(broker, TOPIC, queues=2)
    await _send(namesrv)
    received = Received()
    consumer = PushConsumer(
        "cg-sql", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, sql=EXPRESSION)(received.add)
    wanted = sorted(f"m-{i}".encode() for i in range(12) if _expected(i))
    async with consumer:
        await received.wait_for(len(wanted))
        await asyncio.sleep(0.3)  # nothing else turns up
    assert sorted(received.bodies()) == wanted


async def test_pull_consumer_with_sql(namesrv: NameServer, start_broker: BrokerFactory) -> None:
    broker = await start_broker(enable_property_filter=True)
    await create_topic(broker, TOPIC, queues=2)
    await _send(namesrv)
    got: list[MessageView] = []
    consumer = PullConsumer(
        "cg-sql-pull",
        namesrv.address,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, sql="a BETWEEN 3 AND 4")
    async with consumer:
        async with asyncio.timeout(10):
            while len(got) < 2:
                got += await consumer.poll(0.5)
        got += await consumer.poll(0.3)
    assert sorted(m.body for m in got) == [b"m-3", b"m-4"]


async def test_start_fails_when_the_broker_offers_no_property_filter(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker()  # enablePropertyFilter defaults to false, as in RocketMQ
    await create_topic(broker, TOPIC, queues=1)
    consumer = PushConsumer("cg-sql-off", namesrv.address)
    consumer.subscribe(TOPIC, sql="a > 1")(Received().add)
    with pytest.raises(ClientError, match="does not support consumer to filter message by SQL92"):
        await consumer.start()
    await consumer.shutdown()  # a failed start leaves nothing to stop


@pytest.mark.parametrize("bad", ["a >", "a = 'open", "a IN (1, 2)", "(a = 1"])
async def test_start_fails_on_an_expression_the_broker_cannot_parse(
    namesrv: NameServer, start_broker: BrokerFactory, bad: str
) -> None:
    broker = await start_broker(enable_property_filter=True)
    await create_topic(broker, TOPIC, queues=1)
    consumer = PushConsumer("cg-sql-bad", namesrv.address)
    consumer.subscribe(TOPIC, sql=bad)(Received().add)
    with pytest.raises(ClientError, match="does not parse"):
        await consumer.start()


def test_blank_sql_is_refused_at_subscribe() -> None:
    consumer = PushConsumer("cg-sql-blank", "127.0.0.1:1")
    with pytest.raises(ClientError, match="non-blank"):
        consumer.subscribe(TOPIC, sql="  ")
