"""SimpleConsumer against a real broker: receive, ack, invisible duration, redelivery with a
growing delivery attempt, the dead-letter queue, and a restart in between."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    BrokerError,
    ClientStateError,
    ConsumeFromWhere,
    InvalidArgumentError,
    Message,
    Producer,
    ReceivedMessage,
    SimpleConsumer,
)
from remoting.bodies import SubscriptionGroupConfig
from remoting.codes import ResponseCode
from tests.client.conftest import create_topic
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicSimple"
SHORT = timedelta(milliseconds=300)


def consumer(namesrv: NameServer, group: str = "cg-simple", **kw: object) -> SimpleConsumer:
    return SimpleConsumer(
        group,
        namesrv.address,
        subscriptions={TOPIC: "*"},
        await_duration=timedelta(seconds=2),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **kw,  # type: ignore[arg-type]
    )


async def send(namesrv: NameServer, *bodies: bytes, tags: str | None = None) -> None:
    async with Producer("pg-simple", namesrv.address) as producer:
        for body in bodies:
            await producer.send(Message(TOPIC, body, tags=tags))


async def receive_all(sc: SimpleConsumer, want: int, invisible: timedelta) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    async with asyncio.timeout(10):
        while len(got) < want:
            got += await sc.receive(16, invisible)
    return got


async def test_receive_and_ack(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    await send(namesrv, b"a", b"b", b"c")
    async with consumer(namesrv) as sc:
        got = await receive_all(sc, 3, SHORT)
        # decoded when read, as a PushConsumer's views are: not copied field by field
        assert not {"body", "keys", "properties", "msg_id"} & set(vars(got[0]))
        assert sorted(m.body for m in got) == [b"a", b"b", b"c"]
        assert "body" in vars(got[0])
        assert {m.delivery_attempt for m in got} == {1}
        assert all(m.topic == TOPIC and m.receipt_handle for m in got)
        for msg in got:
            await sc.ack(msg)
        await asyncio.sleep(0.6)  # two invisible durations
        assert await sc.receive(16, SHORT) == []  # waits await_duration, then nothing


async def test_an_unacked_message_comes_back_and_a_late_ack_is_refused(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    await send(namesrv, b"again")
    async with consumer(namesrv) as sc:
        (first,) = await receive_all(sc, 1, SHORT)
        (second,) = await receive_all(sc, 1, SHORT)  # after the invisible duration
        assert (second.body, second.topic, second.delivery_attempt) == (b"again", TOPIC, 2)
        assert second.msg_id == first.msg_id
        with pytest.raises(BrokerError, match="expired or unknown"):
            await sc.ack(first)
        await sc.ack(second)


async def test_change_invisible_duration(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=1)
    await send(namesrv, b"slow", b"fast")
    async with consumer(namesrv) as sc:
        got = {m.body: m for m in await receive_all(sc, 2, timedelta(milliseconds=500))}
        old_receipt = got[b"slow"].receipt_handle
        await sc.change_invisible_duration(got[b"slow"], timedelta(seconds=3))
        assert got[b"slow"].receipt_handle != old_receipt
        await sc.change_invisible_duration(got[b"fast"], timedelta(milliseconds=20))
        (back,) = await receive_all(sc, 1, timedelta(seconds=5))
        assert back.body == b"fast"  # the shortened one; the extended one stays away
        await asyncio.sleep(0.6)
        stale = dataclasses.replace(got[b"slow"], receipt_handle=old_receipt)
        with pytest.raises(BrokerError):
            await sc.ack(stale)
        await sc.ack(got[b"slow"])
        await sc.ack(back)


async def test_after_max_attempts_the_message_is_a_dead_letter(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    broker.subscription_groups.update(SubscriptionGroupConfig("cg-simple-dlq", retry_max_times=2))
    await send(namesrv, b"poison")
    attempts = []
    async with consumer(namesrv, "cg-simple-dlq") as sc:
        for _ in range(3):
            (msg,) = await receive_all(sc, 1, timedelta(milliseconds=100))
            attempts.append(msg.delivery_attempt)
        await wait_until(
            lambda: broker.store.get_max_offset("%DLQ%cg-simple-dlq", 0) == 1, "the DLQ"
        )
    assert attempts == [1, 2, 3]


async def test_redelivery_survives_a_broker_restart(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    root = tmp_path / "simple-restart"
    broker = await start_broker(root=root)
    await create_topic(broker, TOPIC, queues=1)
    await send(namesrv, b"kept", b"done")
    async with consumer(namesrv) as sc:
        got = {m.body: m for m in await receive_all(sc, 2, timedelta(seconds=1))}
        await sc.ack(got[b"done"])
    await broker.shutdown()
    broker = await start_broker(root=root)
    async with consumer(namesrv) as sc:
        (back,) = await receive_all(sc, 1, SHORT)
        assert (back.body, back.delivery_attempt) == (b"kept", 2)
        await sc.ack(back)


async def test_two_consumers_share_a_group(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    await send(namesrv, *(f"m{n}".encode() for n in range(30)))
    async with consumer(namesrv) as one, consumer(namesrv, instance_name="second") as two:
        seen: list[bytes] = []

        async def drain(sc: SimpleConsumer) -> None:
            while len(seen) < 30:
                for msg in await sc.receive(4, timedelta(seconds=10)):
                    seen.append(msg.body)
                    await sc.ack(msg)

        async with asyncio.timeout(15):
            await asyncio.gather(drain(one), drain(two))
    assert sorted(seen) == sorted(f"m{n}".encode() for n in range(30))


async def test_arguments_are_checked(namesrv: NameServer, broker: Broker) -> None:
    with pytest.raises(InvalidArgumentError):
        SimpleConsumer("cg", namesrv.address, await_duration=timedelta(seconds=-1))
    sc = SimpleConsumer("cg", namesrv.address, subscriptions={TOPIC: "*"})
    with pytest.raises(ClientStateError, match="not started"):
        await sc.receive()
    async with sc:
        with pytest.raises(InvalidArgumentError, match=r"within 1\.\.32"):
            await sc.receive(33)
        with pytest.raises(InvalidArgumentError, match="under 10 ms"):
            await sc.receive(1, timedelta(milliseconds=1))


async def test_an_sql92_subscription_receives_only_matching_messages_and_their_retries(
    namesrv: NameServer, broker: Broker
) -> None:
    """The broker filters a pop by SQL92 on each record's properties (PopMessageProcessor's
    ExpressionMessageFilter), without enablePropertyFilter, and on the pop retry topic too:
    a matching message not acked comes back, the others never come."""
    assert not broker.config.enable_property_filter
    await create_topic(broker, TOPIC, queues=2)
    async with Producer("pg-simple", namesrv.address) as producer:
        for n in range(8):
            props = {"n": str(n), "region": "eu" if n % 2 else "us"}
            await producer.send(Message(TOPIC, f"m{n}".encode(), properties=props))
        await producer.send(Message(TOPIC, b"no-props"))  # no property: never matches
    sc = consumer(namesrv, "cg-simple-sql")
    sc.subscribe(TOPIC, sql="region = 'eu' AND n BETWEEN 2 AND 7")
    async with sc:
        got = await receive_all(sc, 3, SHORT)
        assert sorted(m.body for m in got) == [b"m3", b"m5", b"m7"]
        back = await receive_all(sc, 3, timedelta(seconds=10))  # none acked: all come back
        assert sorted((m.body, m.delivery_attempt) for m in back) == [
            (b"m3", 2),
            (b"m5", 2),
            (b"m7", 2),
        ]
        for msg in back:
            await sc.ack(msg)
        assert await sc.receive(16, SHORT) == []
    # The same group switched to a tag expression takes everything from its offset on:
    # the non-matching messages were passed over, not left behind.
    sc = consumer(namesrv, "cg-simple-sql")
    async with sc:
        assert await sc.receive(16, SHORT) == []


async def test_an_sql92_expression_that_does_not_parse_is_refused_by_the_broker(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    sc = consumer(namesrv, "cg-simple-badsql")
    sc.subscribe(TOPIC, sql="region = ")
    async with sc:
        with pytest.raises(BrokerError, match="parse the consumer's subscription failed") as err:
            await sc.receive(1, SHORT)
        assert err.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    with pytest.raises(InvalidArgumentError, match="non-blank"):
        sc.subscribe(TOPIC, sql="  ")
