"""The SDK against Apache RocketMQ's own name server and broker (4.9.7 from Maven Central).

Proves the SDK is a RocketMQ client, not only an Aerolite one: it finds the broker is not
Aerolite and speaks JSON headers; sends (single, compressed, batch, orderly, oneway) and a
push consumer and a pull consumer round-trip through the Java broker with fields intact.
The jars come from ``tests/interop/broker/pom.xml`` (``mvn dependency:copy-dependencies``,
once, reused while the pom is unchanged: ``tests.bench.java_rocketmq.resolve_jars``, which
the benchmarks share); the Java processes are started and stopped by PID through the e2e
suite's ``JavaRocketMQ`` helper.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import ConsumeResult, Message, MessageView, Producer, PushConsumer, SendStatus
from client.instance import ClientInstance
from client.pull_consumer import PullConsumer
from remoting.codes import SerializeType
from tests.bench.java_rocketmq import resolve_jars
from tests.processes import Broker, JavaRocketMQ, unique

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def java_lib() -> Path:
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("java and mvn are needed")
    return resolve_jars()


@pytest.fixture
def java_broker(java_lib: Path, tmp_path: Path) -> Iterator[Broker]:
    java = JavaRocketMQ(java_lib)
    broker = java.start_broker(tmp_path / "store")
    try:
        yield broker
    finally:
        broker.kill()
        java.shutdown()


async def test_sdk_round_trip_through_apache_rocketmq(java_broker: Broker) -> None:
    topic = unique("interop_sdk")
    sent = [
        Message(
            topic,
            f"m{i}".encode(),
            tags=("TagA", "TagB")[i % 2],
            keys=[f"k{i}"],
            properties={"seq": str(i)},
        )
        for i in range(20)
    ]
    big = Message(topic, b"B" * 9000, tags="TagA", keys=["big"])
    async with Producer(unique("interop_pg"), namesrv=java_broker.namesrv) as producer:
        for msg in sent:
            result = await producer.send(msg)
            assert result.status is SendStatus.SEND_OK, result
        assert (await producer.send(big)).status is SendStatus.SEND_OK
        batch = [Message(topic, f"b{i}".encode(), tags="TagB") for i in range(5)]
        batch_result = await producer.send_batch(batch)
        assert len(batch_result.msg_id.split(",")) == 5
        ordered = await producer.send_orderly(Message(topic, b"o", tags="TagA"), "key-1")
        await producer.send_oneway(Message(topic, b"oneway", tags="TagB"))
        instance = producer._instance
        assert instance is not None
        # The SDK found out this broker is not Aerolite: JSON headers, as Java clients send.
        assert set(instance._serialize.values()) == {SerializeType.JSON}

    expected = {m.body for m in sent} | {big.body, b"o", b"oneway"} | {m.body for m in batch}
    received: dict[bytes, MessageView] = {}
    done = asyncio.Event()
    consumer = PushConsumer(unique("interop_cg"), namesrv=java_broker.namesrv)

    @consumer.subscribe(topic)
    async def handle(msg: MessageView) -> ConsumeResult:
        received[msg.body] = msg
        if expected <= set(received):
            done.set()
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                await done.wait()
    finally:
        await consumer.shutdown()
    assert set(received) == expected
    first = received[b"m1"]
    assert (first.tags, first.keys, first.properties["seq"]) == ("TagB", ["k1"], "1")
    assert received[big.body].body == big.body  # compressed on the wire, inflated here
    assert received[b"o"].queue_id == ordered.message_queue.queue_id

    # A pull consumer in assign mode reads the same queue from its start.
    pull = PullConsumer(unique("interop_pull"), namesrv=java_broker.namesrv, auto_commit=False)
    pull.assign([ordered.message_queue])
    await pull.start()
    try:
        await pull.seek_to_begin(ordered.message_queue)
        polled: list[MessageView] = []
        async with asyncio.timeout(30):
            while not any(m.body == b"o" for m in polled):
                polled += await pull.poll(1.0)
    finally:
        await pull.shutdown()
    assert all(m.queue_id == ordered.message_queue.queue_id for m in polled)
    assert all(i._users > 0 for i in ClientInstance.live())
