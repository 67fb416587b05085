"""The push consumer's parts own their background tasks (issue 21, M13 item 3).

``client.pull_service`` runs a pull loop per queue, ``client.consume_concurrently`` its
workers and the consume-timeout watchdog, ``client.consume_orderly`` a consume task per
queue with messages; ``PushConsumer`` starts them and stops them, at ``shutdown()`` and when
``start()`` fails half-way. Against a real name server and broker; a task is recognised by
the name its part gives it.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ClientError, Message, MessageView, Producer, PushConsumer
from tests.client.conftest import Received, create_topic
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicParts"
# pull-<topic>-<queue>, consume-<i>, consume-timeout, consume-orderly, consumer-routes (the
# broker, in the same loop, has its own pull-hold task).
PART_TASKS = (f"pull-{TOPIC}-", "consume-", "consumer-routes")


def part_tasks() -> list[str]:
    return sorted(
        t.get_name()
        for t in asyncio.all_tasks()
        if not t.done() and t.get_name().startswith(PART_TASKS)
    )


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
async def test_shutdown_stops_every_task_the_parts_started(
    namesrv: NameServer, broker: Broker, producer: Producer, orderly: bool
) -> None:
    await create_topic(broker, TOPIC, queues=2)
    received = Received()
    release = asyncio.Event()

    async def handle(msg: MessageView) -> None:
        received.add(msg)
        if msg.body == b"slow":
            await release.wait()  # still in the listener when shutdown begins

    consumer = PushConsumer("cg-parts", namesrv.address, orderly=orderly, consume_concurrency=3)
    consumer.subscribe(TOPIC)(handle)
    await consumer.start()
    try:
        for i in range(6):
            await producer.send(Message(TOPIC, f"m-{i}".encode()))
        await received.wait_for(6)
        running = part_tasks()
        assert [n for n in running if n.startswith("pull-TopicParts-")] == [
            "pull-TopicParts-0",
            "pull-TopicParts-1",
        ]
        if not orderly:
            assert {"consume-0", "consume-1", "consume-2", "consume-timeout"} <= set(running)
        await producer.send(Message(TOPIC, b"slow"))
        await received.wait_for(7)
        if orderly:
            assert "consume-orderly" in part_tasks()
    finally:
        await consumer.shutdown(grace_s=0.1)
    release.set()
    assert part_tasks() == []


async def test_a_failed_start_stops_what_it_started(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """A broker that refuses the SQL92 subscription fails start() after the workers and
    the offset store were made: they are let go, and the group can start again."""
    broker = await start_broker()  # no enablePropertyFilter
    await create_topic(broker, TOPIC, queues=1)
    refused = PushConsumer("cg-parts-sql", namesrv.address)
    refused.subscribe(TOPIC, sql="a > 1")(Received().add)
    with pytest.raises(ClientError, match="SQL92"):
        await refused.start()
    assert part_tasks() == []
    received = Received()
    retried = PushConsumer("cg-parts-sql", namesrv.address)
    retried.subscribe(TOPIC)(received.add)
    async with retried, Producer("pg-parts", namesrv.address) as producer:
        await wait_until(lambda: bool(retried.process_queues), "a queue assigned")
        await producer.send(Message(TOPIC, b"after"))
        await received.wait_for(1)
    assert part_tasks() == []
