"""The broker's retry path seen from the SDK: RECONSUME_LATER sends the message back
(CONSUMER_SEND_MSG_BACK), it returns through %RETRY%<group> after the delay level, and after
max_reconsume_times it lands in %DLQ%<group>. STORE_DEFAULTS make every level 100 ms."""

from __future__ import annotations

import asyncio

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeResult, Message, MessageView, Producer
from tests.client.conftest import create_topic, stored, wait_until
from tests.client.test_push_consumer import committed, make_consumer

TOPIC = "TopicRetry"


async def test_failed_message_comes_back_through_the_retry_topic(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    await producer.send(Message(TOPIC, b"flaky", tags="T"))
    seen: list[tuple[str, int, str | None]] = []

    async def handle(msg: MessageView) -> ConsumeResult:
        seen.append((msg.topic, msg.reconsume_times, msg.tags))
        return ConsumeResult.SUCCESS if msg.reconsume_times >= 2 else ConsumeResult.RECONSUME_LATER

    async with make_consumer(namesrv, "cg-retry", handle, TOPIC):
        await wait_until(lambda: len(seen) >= 3, "two retries", timeout_s=10)
        # The original queue moved on at once: the retries live in the retry topic.
        await wait_until(lambda: committed(broker, "cg-retry", TOPIC) == {0: 1}, "the commit")
    assert seen == [(TOPIC, 0, "T"), (TOPIC, 1, "T"), (TOPIC, 2, "T")]
    assert broker.topics.get("%RETRY%cg-retry") is not None
    assert broker.topics.get("%DLQ%cg-retry") is None


async def test_message_failing_past_max_reconsume_times_goes_to_the_dlq(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    sent = await producer.send(Message(TOPIC, b"poison", keys=["p-1"]))
    calls: list[int] = []

    async def always_fail(msg: MessageView) -> ConsumeResult:
        calls.append(msg.reconsume_times)
        return ConsumeResult.RECONSUME_LATER

    async with make_consumer(namesrv, "cg-dlq", always_fail, TOPIC, max_reconsume_times=2):
        await wait_until(
            lambda: broker.store.get_max_offset("%DLQ%cg-dlq", 0) == 1, "the DLQ", timeout_s=10
        )
        await asyncio.sleep(0.3)  # no further delivery
    assert calls == [0, 1, 2]
    dead = await stored(broker, "%DLQ%cg-dlq", range(1))
    assert [m.body for m in dead] == [b"poison"]
    assert dead[0].msg_id == sent.msg_id
    assert dead[0].reconsume_times == 3
    assert dead[0].properties["RETRY_TOPIC"] == TOPIC
    assert dead[0].keys == ["p-1"]
