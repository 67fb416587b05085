"""Master and slave brokers (in-process, loopback): the slave finds its master's HA address
through the name server, replicates its commit log and serves pulls from it; a SYNC_MASTER
acknowledges a send only once a slave has it, and answers SLAVE_NOT_AVAILABLE without one."""

from __future__ import annotations

from broker.broker import Broker
from broker.config import BrokerRole
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.route import loads
from tests.broker.conftest import runtime_info
from tests.support import BrokerFactory, pull, record_body, records, send, send_ok, wait_until

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

    # Both sides show the replication in their runtime info.
    await wait_until(
        lambda: (
            master.ha is not None and master.ha.acked_offset == master.store.commit_log.max_offset
        ),
        "the slave's ack of everything",
    )
    table = await runtime_info(client, master.address)
    assert table["haConnectionNum"] == "1"
    assert table["haSlaveAckOffset"] == table["commitLogMaxOffset"]
    assert table["haSlaveFallBehindBytes"] == "0"
    table = await runtime_info(client, slave.address)
    assert table["haMasterAddress"] == master._ha_server_addr()


async def test_consumer_offsets_reach_the_slave(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    slave = await slave_of(start_broker, master)
    master.offsets.commit("cg-ha", TOPIC, 0, 7)
    master.subscription_groups.find("cg-ha")
    master.schedule.offsets[2] = 4  # delay level 2 delivered up to queue offset 4
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    assert slave.offsets.query("cg-ha", TOPIC, 0) == 7
    assert slave.subscription_groups.table.get("cg-ha") is not None
    assert slave.schedule.offsets == {2: 4}
    # persisted where a restarted slave (or one promoted to master) reads it back
    assert loads(slave.schedule.path.read_bytes())["offsetTable"] == {"2": 4}


async def test_delay_offsets_from_a_java_master_parse(start_broker: BrokerFactory) -> None:
    # A Java master's fastjson writes the Integer keys of delayOffset.json unquoted.
    broker = await start_broker()
    broker.schedule.load_json(loads(b'{"offsetTable":{1:3,2:7,99:1}}'))
    assert broker.schedule.offsets == {1: 3, 2: 7}  # there is no level 99: skipped


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


async def test_the_master_points_a_slow_consumer_at_the_slave(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    # accessMessageInMemoryMaxRatio=0: every byte behind the end counts as "not in memory",
    # so any consumer that is behind at all is slow.
    master = await start_broker(
        slave_read_enable=True, store={"access_message_in_memory_max_ratio": 0}
    )
    for n in range(5):
        await send_ok(client, master.address, TOPIC, f"m{n}".encode(), queue_id=0)
    behind = await pull(client, master.address, TOPIC, queue_id=0, max_nums=1)
    assert behind.code == ResponseCode.SUCCESS
    assert behind.ext_fields["suggestWhichBrokerId"] == "1"  # whichBrokerWhenConsumeSlowly
    caught_up = await pull(client, master.address, TOPIC, queue_id=0, offset=5)
    assert caught_up.code == ResponseCode.PULL_NOT_FOUND
    assert caught_up.ext_fields["suggestWhichBrokerId"] == "0"  # the group's brokerId

    plain = await start_broker(store={"access_message_in_memory_max_ratio": 0})
    for n in range(5):
        await send_ok(client, plain.address, TOPIC, f"m{n}".encode(), queue_id=0)
    # slaveReadEnable=false (the default): always the master.
    got = await pull(client, plain.address, TOPIC, queue_id=0, max_nums=1)
    assert got.ext_fields["suggestWhichBrokerId"] == "0"


async def test_a_slave_behind_never_moves_a_consumer_offset(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    slave = await slave_of(start_broker, master)
    for n in range(3):
        await send_ok(client, master.address, TOPIC, f"m{n}".encode(), queue_id=0)
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to catch up",
    )
    assert slave.slave_sync is not None
    await slave.slave_sync.sync_all()
    await wait_until(lambda: slave.store.dispatch_behind_bytes == 0, "the slave's dispatch")
    # Offset 10 is beyond what the slave has (3): a master would answer PULL_OFFSET_MOVED
    # (back to 0, as the queue still starts at 0); a slave (offsetCheckInSlave=false) asks
    # for a retry from the same offset.
    on_master = await pull(client, master.address, TOPIC, queue_id=0, offset=10)
    assert on_master.code == ResponseCode.PULL_OFFSET_MOVED
    assert on_master.ext_fields["nextBeginOffset"] == "0"
    on_slave = await pull(client, slave.address, TOPIC, queue_id=0, offset=10)
    assert on_slave.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert on_slave.ext_fields["nextBeginOffset"] == "10"
    # A queue the slave has nothing in yet keeps the requested offset too.
    empty = await pull(client, slave.address, TOPIC, queue_id=1, offset=5)
    assert empty.ext_fields["nextBeginOffset"] == "5"
    assert empty.code == ResponseCode.PULL_RETRY_IMMEDIATELY


async def test_a_slave_serves_a_topic_its_master_has_not_told_it_about_yet(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    # The topic is born after the slave's last sync (no sync_all here): its messages are
    # replicated, and a consumer that moves to the slave when the master dies reads them.
    master = await start_broker()
    slave = await slave_of(start_broker, master)
    for n in range(4):
        await send_ok(client, master.address, "TopicBornLate", f"late-{n}".encode(), queue_id=0)
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to catch up",
    )
    await wait_until(lambda: slave.store.dispatch_behind_bytes == 0, "the slave's dispatch")
    assert slave.topics.get("TopicBornLate") is None
    response = await pull(client, slave.address, "TopicBornLate", queue_id=0)
    assert response.code == ResponseCode.SUCCESS, response
    assert len(records(response.body_bytes)) == 4
    # A queue the slave has nothing for is empty, not an error.
    empty = await pull(client, slave.address, "TopicBornLate", queue_id=3)
    assert empty.code == ResponseCode.PULL_NOT_FOUND
    # The master still refuses topics it does not have.
    unknown = await pull(client, master.address, "NoSuchTopicAnywhere", queue_id=0)
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
