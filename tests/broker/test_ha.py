"""Master and slave brokers (in-process, loopback): the slave finds its master's HA address
through the name server, replicates its commit log and serves pulls from it; a SYNC_MASTER
acknowledges a send only once a slave has it, and answers SLAVE_NOT_AVAILABLE without one."""

from __future__ import annotations

from broker.broker import Broker
from broker.config import BrokerRole
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from tests.broker.conftest import (
    BrokerFactory,
    pull,
    record_body,
    records,
    send,
    send_ok,
    wait_until,
)

TOPIC = "TopicHa"


async def slave_of(start_broker: BrokerFactory, master: Broker) -> Broker:
    slave = await start_broker(broker_role=BrokerRole.SLAVE, broker_id=1)
    await wait_until(
        lambda: slave.ha_client is not None and slave.ha_client.connected_to is not None,
        "the slave to reach its master",
        timeout_s=5,
    )
    assert slave.ha_client is not None
    assert slave.ha_client.connected_to == master._ha_server_addr()
    return slave


async def test_the_slave_replicates_and_serves_pulls(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    slave = await slave_of(start_broker, master)
    for n in range(20):
        await send_ok(client, master.address, TOPIC, f"m{n}".encode(), queue_id=n % 2)
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to catch up",
        timeout_s=5,
    )
    await wait_until(lambda: slave.store.dispatch_behind_bytes == 0, "the slave's dispatch")
    # The slave learns the master's topics (and offsets, groups) every 10 s; one round now.
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    assert slave.topics.get(TOPIC) is not None
    response = await pull(client, slave.address, TOPIC, queue_id=0)
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    assert [record_body(body, infos, i) for i in range(len(infos))] == [
        f"m{n}".encode() for n in range(0, 20, 2)
    ]
    refused = await send(client, slave.address, TOPIC, b"to-a-slave")
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE


async def test_consumer_offsets_reach_the_slave(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    slave = await slave_of(start_broker, master)
    master.offsets.commit("cg-ha", TOPIC, 0, 7)
    master.subscription_groups.find("cg-ha")
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    assert slave.offsets.query("cg-ha", TOPIC, 0) == 7
    assert slave.subscription_groups.table.get("cg-ha") is not None


async def test_sync_master_waits_for_its_slave(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker(broker_role=BrokerRole.SYNC_MASTER)
    alone = await send(client, master.address, TOPIC, b"no-slave-yet")
    assert alone.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored, but not replicated
    slave = await slave_of(start_broker, master)
    await wait_until(
        lambda: master.ha is not None and master.ha.slave_ok(), "the slave to catch up", 5
    )
    for n in range(10):
        response = await send(client, master.address, TOPIC, f"sync-{n}".encode())
        assert response.code == ResponseCode.SUCCESS, response
        # Acknowledged: the slave has the bytes already.
        assert slave.store.commit_log.max_offset >= master.store.commit_log.max_offset
