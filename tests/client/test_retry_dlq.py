"""Retry, dead letters and delayed sends through the SDK against a real broker
(protocol.md §13.3 and §13.6).

A PushConsumer whose listener answers RECONSUME_LATER hands the message back
(CONSUMER_SEND_MSG_BACK); it comes back through %RETRY%<group> with the original topic
restored and one more reconsume, while the original queue's offset has already moved on.
After ``max_reconsume_times`` the broker puts it in %DLQ%<group>. A Producer's
``delay_level`` holds a message back by that level's delay. STORE_DEFAULTS make every delay
level 100 ms unless a test sets its own.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import client.instance
from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageQueue,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
)
from tests.client.conftest import create_topic, stored
from tests.client.test_push_consumer import committed, make_consumer
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicRetryDlq"


@pytest.fixture
def fast_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consumers commit offsets every 5 s in RocketMQ; every 0.1 s here."""
    monkeypatch.setattr(client.instance, "PERSIST_OFFSETS_S", 0.1)


async def test_reconsume_later_twice_then_success(
    namesrv: NameServer, broker: Broker, producer: Producer, fast_commits: None
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    sent = await producer.send(Message(TOPIC, b"flaky", tags="TagR", keys=["r-1"]))
    original_mq = MessageQueue(TOPIC, broker.config.broker_name, 0)
    seen: list[MessageView] = []
    local_offsets: list[int] = []
    lock = threading.Lock()

    # Its own client instance: the producer's was started before the monkeypatch.
    consumer = PushConsumer("cg-flaky", namesrv.address, instance_name="flaky")

    async def handle(msg: MessageView) -> ConsumeResult:
        offsets = consumer.offsets
        with lock:
            seen.append(msg)
            local_offsets.append(-99 if offsets is None else offsets.read(original_mq))
        return ConsumeResult.SUCCESS if msg.reconsume_times >= 2 else ConsumeResult.RECONSUME_LATER

    consumer.subscribe(TOPIC, "*")(handle)
    async with consumer:
        await wait_until(lambda: len(seen) >= 3, "two retries", timeout_s=10)
        # The original queue's offset went past the message when it was handed back; the
        # broker has that commit too, while the retries still run through %RETRY%.
        await wait_until(lambda: committed(broker, "cg-flaky", TOPIC) == {0: 1}, "the commit")
        await asyncio.sleep(0.5)  # success: nothing comes a fourth time
    assert [m.reconsume_times for m in seen] == [0, 1, 2]
    assert [m.topic for m in seen] == [TOPIC] * 3
    assert {m.msg_id for m in seen} == {sent.msg_id}
    assert [m.body for m in seen] == [b"flaky"] * 3
    assert [m.tags for m in seen] == ["TagR"] * 3
    assert [m.keys for m in seen] == [["r-1"]] * 3
    # The retries were stored in the retry topic, each a new record.
    assert [m.queue_offset for m in seen[1:]] == [0, 1]
    assert len({m.commit_log_offset for m in seen}) == 3
    assert seen[1].properties["RETRY_TOPIC"] == TOPIC
    assert seen[1].properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    assert seen[2].properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    # When the first retry arrived, the original queue was already committed past it.
    assert local_offsets[1:] == [1, 1]
    assert broker.store.get_max_offset("%RETRY%cg-flaky", 0) == 2
    assert broker.topics.get("%DLQ%cg-flaky") is None


async def test_always_failing_message_ends_in_the_dlq(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    await create_topic(broker, TOPIC, queues=2)
    sent = await producer.send(Message(TOPIC, b"poison", tags="TagP", keys=["p-1"]))
    calls: list[tuple[str, int]] = []

    async def always_fail(msg: MessageView) -> ConsumeResult:
        calls.append((msg.topic, msg.reconsume_times))
        return ConsumeResult.RECONSUME_LATER

    async with make_consumer(namesrv, "cg-poison", always_fail, TOPIC, max_reconsume_times=2):
        await wait_until(
            lambda: broker.store.get_max_offset("%DLQ%cg-poison", 0) == 1,
            "the dead letter",
            timeout_s=10,
        )
        await asyncio.sleep(0.5)  # nothing more is delivered
    assert calls == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    dead = await stored(broker, "%DLQ%cg-poison", range(1))
    assert len(dead) == 1
    letter = dead[0]
    assert letter.body == b"poison"
    assert letter.topic == "%DLQ%cg-poison"
    assert letter.msg_id == sent.msg_id
    assert letter.reconsume_times == 3
    assert letter.tags == "TagP"
    assert letter.keys == ["p-1"]
    assert letter.properties["RETRY_TOPIC"] == TOPIC
    assert letter.properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    tc = broker.topics.get("%DLQ%cg-poison")
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    # Two retries went through the retry topic; the third failure went straight to the DLQ.
    assert broker.store.get_max_offset("%RETRY%cg-poison", 0) == 2


async def test_a_dead_letter_can_be_read_and_sent_again(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    original = Message(TOPIC, b"fix-me", tags="TagF", keys=["f-1"], properties={"order": "7"})
    await producer.send(original)
    fixed = asyncio.Event()
    seen: list[MessageView] = []

    async def fail_until_fixed(msg: MessageView) -> ConsumeResult:
        seen.append(msg)
        return ConsumeResult.SUCCESS if fixed.is_set() else ConsumeResult.RECONSUME_LATER

    # max_reconsume_times=0: the first failure goes straight to the dead-letter queue
    consumer = make_consumer(namesrv, "cg-redrive", fail_until_fixed, TOPIC, max_reconsume_times=0)
    async with consumer:
        await wait_until(
            lambda: broker.store.get_max_offset("%DLQ%cg-redrive", 0) == 1, "the dead letter"
        )
        # An operator reads the dead-letter topic like any other (it is readable, as in 4.9)…
        reader = PullConsumer(
            "cg-dlq-reader",
            namesrv.address,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        reader.subscribe("%DLQ%cg-redrive")
        letters: list[MessageView] = []
        async with reader, asyncio.timeout(10):
            while not letters:
                letters += await reader.poll(0.5)
        (letter,) = letters
        assert letter.topic == "%DLQ%cg-redrive"
        # …fixes the cause and sends it again, to the topic it was first sent to.
        again = letter.to_message()
        assert (again.topic, again.body, again.tags, again.keys) == (
            TOPIC,
            b"fix-me",
            "TagF",
            ["f-1"],
        )
        assert again.properties == {"order": "7"}
        fixed.set()
        await producer.send(again)
        await wait_until(lambda: len(seen) == 2, "the re-sent message")
    assert [(m.topic, m.body, m.properties["order"]) for m in seen] == [
        (TOPIC, b"fix-me", "7"),
        (TOPIC, b"fix-me", "7"),
    ]


async def test_listener_exception_is_a_retry(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    await producer.send(Message(TOPIC, b"raises"))
    times: list[int] = []

    def handle(msg: MessageView) -> ConsumeResult:
        times.append(msg.reconsume_times)
        if msg.reconsume_times == 0:
            raise RuntimeError("first try fails")
        return ConsumeResult.SUCCESS

    async with make_consumer(namesrv, "cg-raises", handle, TOPIC):
        await wait_until(lambda: len(times) >= 2, "the retry", timeout_s=10)
        await asyncio.sleep(0.3)
    assert times == [0, 1]


async def test_delay_level_holds_a_message_back(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    levels_ms = [100, 800] + [100] * 16
    broker = await start_broker(
        store={"message_delay_level": " ".join(f"{ms}ms" for ms in levels_ms)}
    )
    await create_topic(broker, TOPIC, queues=1)
    arrivals: list[tuple[MessageView, float]] = []

    async def handle(msg: MessageView) -> ConsumeResult:
        arrivals.append((msg, time.time()))
        return ConsumeResult.SUCCESS

    async with (
        Producer("delay-producer", namesrv.address) as producer,
        make_consumer(namesrv, "cg-delay", handle, TOPIC) as consumer,
    ):
        await wait_until(lambda: bool(consumer.process_queues), "the consumer's queues")
        await asyncio.sleep(1.0)  # the broker's schedule service has begun its rounds
        t0 = time.time()
        sent = await producer.send(Message(TOPIC, b"wait for it", tags="TagW", delay_level=2))
        await wait_until(lambda: bool(arrivals), "the delayed message", timeout_s=5)
        await asyncio.sleep(0.3)
    [(msg, at)] = arrivals
    assert at - t0 >= 0.8, f"arrived {at - t0:.3f} s after the send"
    assert at - t0 <= 3.8, f"arrived {at - t0:.3f} s after the send"
    assert msg.store_timestamp - msg.born_timestamp >= 800
    assert msg.msg_id == sent.msg_id
    assert msg.topic == TOPIC
    assert msg.queue_id == sent.message_queue.queue_id
    assert msg.body == b"wait for it"
    assert msg.tags == "TagW"
    assert msg.properties["DELAY"] == "2"
    assert msg.reconsume_times == 0
