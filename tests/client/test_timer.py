"""Timer messages from the SDK: ``Message(deliver_at=...)`` / ``Message(delay=...)`` travel
as RocketMQ 5's TIMER_DELIVER_MS / TIMER_DELAY_MS and arrive at their time, never early."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from broker.namesrv.server import NameServer
from client import (
    BrokerError,
    ConsumeFromWhere,
    ConsumeResult,
    InvalidMessageError,
    Message,
    MessageView,
    Producer,
    PushConsumer,
)
from tests.client.conftest import create_topic
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicTimerSdk"


async def test_deliver_at_and_delay_arrive_on_time(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(timer_precision_ms=100)
    await create_topic(broker, TOPIC, queues=2)
    got: dict[bytes, tuple[MessageView, float]] = {}

    async def listener(msg: MessageView) -> ConsumeResult:
        got[msg.body] = (msg, time.time())
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        "cg-timer", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)(listener)
    async with consumer, Producer("pg-timer", namesrv.address) as producer:
        sent_at = time.time()
        at = datetime.now(UTC) + timedelta(milliseconds=800)
        timed = await producer.send(
            Message(TOPIC, b"at", tags="TagA", keys=["k-at"], deliver_at=at)
        )
        await producer.send(Message(TOPIC, b"in", delay=timedelta(milliseconds=500)))
        await producer.send(Message(TOPIC, b"now"))
        await wait_until(lambda: b"now" in got, "the plain message")
        assert b"at" not in got and b"in" not in got
        await wait_until(lambda: len(got) == 3, "the timers", timeout_s=5)
        await asyncio.sleep(0.3)
    assert len(got) == 3
    msg, when = got[b"at"]
    assert when >= at.timestamp()
    assert msg.store_timestamp >= int(at.timestamp() * 1000)
    assert msg.properties["TIMER_OUT_MS"] == str(int(at.timestamp() * 1000))
    assert (msg.topic, msg.tags, msg.keys, msg.msg_id) == (TOPIC, "TagA", ["k-at"], timed.msg_id)
    # The trigger stays, as on 5.x (with TIMER_OUT_MS a send-back is not timed again).
    assert msg.properties["TIMER_DELIVER_MS"] == str(int(at.timestamp() * 1000))
    assert "REAL_TOPIC" not in msg.properties
    assert got[b"in"][1] - sent_at >= 0.5


def test_timer_arguments_are_checked_before_sending() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=5)
    bad = {
        "no time zone": Message(TOPIC, b"x", deliver_at=datetime.now() + timedelta(seconds=5)),
        "not both": Message(TOPIC, b"x", deliver_at=soon, delay=timedelta(seconds=1)),
        "excludes a delay_level": Message(TOPIC, b"x", delay=timedelta(seconds=1), delay_level=2),
        "is negative": Message(TOPIC, b"x", delay=timedelta(seconds=-1)),
    }
    for why, msg in bad.items():
        with pytest.raises(InvalidMessageError, match=why):
            msg.validate()


async def test_a_batch_of_timers_is_refused_and_a_too_far_one_by_the_broker(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(timer_max_delay_sec=60)
    await create_topic(broker, TOPIC, queues=1)
    async with Producer("pg-timer-bad", namesrv.address) as producer:
        with pytest.raises(InvalidMessageError, match="delay level or a timer"):
            await producer.send_batch([Message(TOPIC, b"a", delay=timedelta(seconds=1))])
        with pytest.raises(BrokerError, match="timerMaxDelaySec"):
            await producer.send(Message(TOPIC, b"far", delay=timedelta(hours=1)))
