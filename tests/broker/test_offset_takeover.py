"""After an outage the master takes over the consumer offsets clients committed to its slave
(the larger offset wins), and an operator's reset made on the master meanwhile stays.

Consumers move to the slave while the master is gone and commit their progress there. The
slave's sync copied the master's table over its own at the first round after the master came
back, so those commits were lost, and a consumer that loaded its offsets from the master
afterwards received again everything it had consumed during the outage (29,710 duplicates
after one master restart). Real master and slave brokers; the master restarts on its own
store and ports.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

import structlog
from structlog.testing import capture_logs

from broker.broker import Broker
from broker.config import BrokerRole
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.headers import (
    QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from tests.support import BrokerFactory, call, pull, record_body, records, send_ok, wait_until

TOPIC = "TopicTakeover"
GROUP = "cg-takeover"
RESET_GROUP = "cg-reset"
BACK_GROUP = "cg-back"  # its consumer commits on the master again before the slave offers
MESSAGES = 20


@contextlib.contextmanager
def info_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """``capture_logs`` with info lines too (the suite keeps warnings and errors only)."""
    previous = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=previous)


async def commit(client: RemotingClient, addr: str, group: str, queue_id: int, offset: int) -> None:
    """UPDATE_CONSUMER_OFFSET, as a consumer's offset store sends it."""
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=TOPIC, queue_id=queue_id, commit_offset=offset
    )
    response = await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    assert response.code == ResponseCode.SUCCESS, response


async def committed(client: RemotingClient, addr: str, group: str, queue_id: int) -> int:
    """QUERY_CONSUMER_OFFSET: where a consumer starting now begins."""
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=TOPIC, queue_id=queue_id)
    response = await call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
    assert response.code == ResponseCode.SUCCESS, response
    return int(response.ext_fields["offset"])


async def consume_from_broker_offset(client: RemotingClient, addr: str, group: str) -> list[bytes]:
    """What a consumer starting from the broker's offset of queue 0 receives."""
    offset = await committed(client, addr, group, 0)
    response = await pull(client, addr, TOPIC, queue_id=0, offset=offset, group=group)
    if response.code == ResponseCode.PULL_NOT_FOUND:
        return []
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    return [record_body(body, infos, i) for i in range(len(infos))]


async def slave_of(start_broker: BrokerFactory, master: Broker) -> Broker:
    slave = await start_broker(broker_role=BrokerRole.SLAVE, broker_id=1)
    await wait_until(
        lambda: slave.ha_client is not None and slave.ha_client.connected_to is not None,
        "the slave to reach its master",
        timeout_s=5,
    )
    return slave


async def test_the_master_takes_over_offsets_committed_to_its_slave_and_keeps_a_reset(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    root, port, ha_port = master.config.store.root_dir, master.server.port, master.ha_port
    slave = await slave_of(start_broker, master)
    assert slave.slave_sync is not None
    for n in range(MESSAGES):
        await send_ok(client, master.address, TOPIC, f"m{n}".encode(), queue_id=0)
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to catch up",
    )
    # Every group consumed 5 messages, committed to the master, copied by the slave.
    for group in (GROUP, RESET_GROUP, BACK_GROUP):
        await commit(client, master.address, group, 0, 5)
    await slave.slave_sync.sync_all()
    assert slave.offsets.query(GROUP, TOPIC, 0) == 5

    # The master is gone: consumers go on from the slave and commit there.
    await master.shutdown()
    await commit(client, slave.address, GROUP, 0, 15)
    await commit(client, slave.address, RESET_GROUP, 0, 12)
    await commit(client, slave.address, BACK_GROUP, 0, 15)
    await slave.slave_sync.sync_all()  # the master cannot be reached: nothing changes
    assert slave.offsets.query(GROUP, TOPIC, 0) == 15

    # Back on its own store and ports; before the slave's next round an operator resets
    # RESET_GROUP to the first message (mqadmin resetOffsetByTime, forced).
    master = await start_broker(root=root, listen_port=port, ha_listen_port=ha_port)
    assert master.offsets.query(GROUP, TOPIC, 0) == 5
    reset = ResetOffsetRequestHeader(topic=TOPIC, group=RESET_GROUP, timestamp=0, is_force=True)
    response = await call(
        client, master.address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset.to_ext_fields()
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert master.offsets.query(RESET_GROUP, TOPIC, 0) == 0
    # BACK_GROUP's consumer is back on the master and commits there (after a reset of its
    # own, say): its word is newer than the slave's, larger or not.
    await commit(client, master.address, BACK_GROUP, 0, 9)

    with info_logs() as logs:
        await slave.slave_sync.sync_all()
    # The larger offset won; the reset and the newer commit stayed; the slave copied them.
    for broker in (master, slave):
        assert broker.offsets.query(GROUP, TOPIC, 0) == 15
        assert broker.offsets.query(RESET_GROUP, TOPIC, 0) == 0
        assert broker.offsets.query(BACK_GROUP, TOPIC, 0) == 9
    assert slave.slave_sync.offers == {}
    offered = [e for e in logs if e["event"] == "slave_sync_offsets_offered"]
    assert [(e["offered"], e["taken"]) for e in offered] == [(3, 1)]
    taken = [e for e in logs if e["event"] == "offsets_taken_over"]
    assert [(e["group"], e["offset"], e["previous"]) for e in taken] == [(GROUP, 15, 5)]

    # A consumer starting from the master's offsets receives only what was not consumed.
    got = await consume_from_broker_offset(client, master.address, GROUP)
    assert got == [f"m{n}".encode() for n in range(15, MESSAGES)]
    got = await consume_from_broker_offset(client, master.address, RESET_GROUP)
    assert got == [f"m{n}".encode() for n in range(MESSAGES)]
