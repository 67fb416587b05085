"""Our SDK and the official C++ client (PyPI rocketmq 0.4.4) through one broker, both ways:
tags, keys, user properties and a compressed body survive, each message arrives once.

The SDK runs in the test's own event loop against the shared standalone broker (or, with
AEROLITE_E2E_TARGET=java-lib:DIR, Apache RocketMQ's: the SDK then speaks JSON headers, having
found the broker is not Aerolite).
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from client import ConsumeResult, Message, MessageView, Producer, PushConsumer, SendStatus
from tests.e2e.conftest import PROPERTY_KEYS, Clients, Sent, assert_same_messages, consume, send
from tests.processes import Broker, unique

pytestmark = pytest.mark.e2e


def mixed(prefix: str, count: int) -> list[Sent]:
    return [
        Sent(
            body=(f"{prefix}-{i} " + "z" * 6000) if i == 2 else f"{prefix}-{i} ✓",
            tags=("TagA", "TagB")[i % 2],
            keys=(f"{prefix}-k{i}", "shared"),
            properties=(("seq", str(i)), ("color", "green")),
        )
        for i in range(count)
    ]


def to_message(topic: str, sent: Sent) -> Message:
    return Message(
        topic,
        sent.body.encode(),
        tags=sent.tags,
        keys=list(sent.keys),
        properties=dict(sent.properties),
    )


def fingerprint(
    msg: MessageView,
) -> tuple[str, str | None, str | None, tuple[tuple[str, str], ...]]:
    props = tuple(sorted((k, v) for k, v in msg.properties.items() if k in PROPERTY_KEYS))
    return (msg.body.decode(), msg.tags, " ".join(msg.keys) or None, props)


async def test_sdk_producer_to_cpp_push_consumer(cluster: Broker, clients: Clients) -> None:
    topic = unique("e2e_sdk2cpp")
    messages = mixed("from-sdk", 40)
    async with Producer(unique("e2e_sdk_producer"), namesrv=cluster.namesrv) as producer:
        for sent in messages:
            result = await producer.send(to_message(topic, sent))
            assert result.status is SendStatus.SEND_OK
    # The C++ driver runs in its own process; wait for it off the event loop.
    run = await asyncio.to_thread(
        consume, clients, topic, unique("e2e_cpp_from_sdk"), len(messages)
    )
    assert_same_messages(run, messages)


async def test_cpp_producer_to_sdk_push_consumer(cluster: Broker, clients: Clients) -> None:
    topic = unique("e2e_cpp2sdk")
    messages = mixed("from-cpp", 40)
    await asyncio.to_thread(send, clients, topic, messages)
    received: list[MessageView] = []
    all_in = asyncio.Event()
    consumer = PushConsumer(unique("e2e_sdk_consumer"), namesrv=cluster.namesrv)

    @consumer.subscribe(topic)
    async def handle(msg: MessageView) -> ConsumeResult:
        received.append(msg)
        if len(received) >= len(messages):
            all_in.set()
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                await all_in.wait()
        await asyncio.sleep(2.0)  # a duplicate or an extra would show up here
    finally:
        await consumer.shutdown()
    got = sorted(fingerprint(m) for m in received)
    want = sorted(m.fingerprint() for m in messages)
    assert got == want
    # The C++ client's ids are UNIQ_KEYs; the SDK shows them as msg_id.
    assert all(len(m.msg_id) == 32 for m in received)
