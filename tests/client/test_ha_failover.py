"""Reading from the slave when the master is gone: a consumer group goes on from the offsets
it committed on the master (which the slave copied), with no gap and nothing read twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.config import BrokerRole
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, Producer, PushConsumer
from tests.client.conftest import Received, create_topic
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicFailover"
GROUP = "cg-failover"


def consumer(namesrv: NameServer, received: Received) -> PushConsumer:
    c = PushConsumer(
        GROUP, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    c.subscribe(TOPIC)(received.add)
    return c


async def test_a_group_continues_on_the_slave_when_the_master_stops(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    master = await start_broker("broker-a", root=tmp_path / "master")
    slave = await start_broker(
        "broker-a", root=tmp_path / "slave", broker_role=BrokerRole.SLAVE, broker_id=1
    )
    await create_topic(master, TOPIC, queues=2)
    async with Producer("pg-failover", namesrv.address) as producer:
        for n in range(20):
            await producer.send(Message(TOPIC, f"before-{n}".encode()))
        first = Received()
        async with consumer(namesrv, first):
            await first.wait_for(20, timeout_s=10)
            await asyncio.sleep(0.2)
        # shutdown committed the offsets to the master; the slave copies them
        assert sum(master.offsets.queues_of(GROUP, TOPIC).values()) == 20
        for n in range(10):
            await producer.send(Message(TOPIC, f"after-{n}".encode()))
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to have everything",
    )
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    assert sum(slave.offsets.queues_of(GROUP, TOPIC).values()) == 20
    await master.shutdown()  # unregisters: the route now names only the slave

    second = Received()
    async with consumer(namesrv, second):
        await second.wait_for(10, timeout_s=15)
        await asyncio.sleep(0.5)  # nothing more comes
    assert sorted(second.bodies()) == sorted(f"after-{n}".encode() for n in range(10))


async def test_a_slow_consumer_follows_the_masters_suggestion_to_the_slave(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    # slaveReadEnable with accessMessageInMemoryMaxRatio=0: every consumer behind the end is
    # "slow", so the master's pull replies suggest brokerId 1 and the pulls move there.
    master = await start_broker(
        "broker-a",
        root=tmp_path / "master",
        slave_read_enable=True,
        store={"access_message_in_memory_max_ratio": 0},
    )
    slave = await start_broker(
        "broker-a", root=tmp_path / "slave", broker_role=BrokerRole.SLAVE, broker_id=1
    )
    await create_topic(master, TOPIC, queues=2)
    async with Producer("pg-suggest", namesrv.address) as producer:
        for n in range(30):
            await producer.send(Message(TOPIC, f"m-{n}".encode()))
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to have everything",
    )
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    received = Received()
    c = PushConsumer(
        GROUP,
        namesrv.address,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=4,
    )
    c.subscribe(TOPIC)(received.add)
    async with c:
        await received.wait_for(30, timeout_s=15)
    assert sorted(received.bodies()) == sorted(f"m-{n}".encode() for n in range(30))
    # The first pull of each queue went to the master; the rest to the slave.
    assert slave.stats.group_get[GROUP] > 0
    assert master.stats.group_get[GROUP] < 30
