"""The transaction check under store refusals (issue 19, review of M11, findings 9 and 10).

A half message checked ``transactionCheckMax`` times is copied to TRANS_CHECK_MAX_TIME_TOPIC
before the scan moves past it; a store that refuses that copy for now (a full disk) must hold
the scan there, not lose the copy. A half message with an immunity time of its own whose
renewed copy the store refuses for good is set aside, and its producer is asked one last time
at the record's own offsets, as on the other set-aside path.

The scans are run by hand (``check_once``) on brokers whose own check loop waits an hour. The
full disk is the store's disk guard refusing for real: its usage measurement reads 99 %.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import structlog

from broker.broker import Broker
from codec import MAX_PROPERTIES_BYTES, inner_from_record
from remoting.client import RemotingClient
from remoting.command import RemotingCommand
from tests.broker.test_poison import padded
from tests.broker.test_transaction import DISCARDED, GROUP, producer, send_half
from tests.support import BrokerFactory, ClientFactory, wait_dispatched, wait_until

HOUR_MS = 3_600_000


@contextmanager
def full_disk(broker: Broker) -> Iterator[None]:
    """The disk guard measures 99 % used: it refuses every put until this exits."""
    retention = broker.store.retention
    measure: Callable[[], float] = retention.disk_used_ratio
    retention.disk_used_ratio = lambda: 0.99
    retention.check_disk()
    assert retention.disk_full
    try:
        yield
    finally:
        retention.disk_used_ratio = measure
        retention.check_disk()
        assert not retention.disk_full


def events(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == event]


async def test_a_discard_refused_for_a_full_disk_is_kept_for_a_later_round(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(
        transaction_check_interval_ms=HOUR_MS, transaction_timeout_ms=1, transaction_check_max=1
    )
    service = broker.transactions
    await send_half(client, broker, b"stuck")
    await asyncio.sleep(0.01)  # older than the 1 ms timeout
    first = await service.check_once()  # checked once (nobody to ask): renewed at offset 1
    assert (first.no_producer, first.discarded) == (1, 0), first
    await wait_dispatched(broker)
    with structlog.testing.capture_logs() as logs, full_disk(broker):
        refused = await service.check_once()
    assert (refused.discarded, service.discarded) == (0, 0), refused
    assert [e["status"] for e in events(logs, "transaction_discard_refused")] == [
        "SERVICE_NOT_AVAILABLE"
    ]
    assert broker.store.get_max_offset(DISCARDED, 0) == 0
    # The disk has room again: the next round copies it where discarded messages are kept.
    kept = await service.check_once()
    assert (kept.discarded, service.discarded, service.set_aside) == (1, 1, 0), kept
    await wait_dispatched(broker)
    assert broker.store.get_max_offset(DISCARDED, 0) == 1
    assert await service.check_once() == type(kept)()  # and moved past it


async def test_a_set_aside_half_message_with_an_immunity_time_is_asked_once(
    start_broker: BrokerFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    broker = await start_broker(transaction_check_interval_ms=HOUR_MS, transaction_timeout_ms=1)
    _producer, checks = await producer(start_client, broker)
    # Checked in an hour at the earliest; properties 10 bytes under the limit, so that
    # TRAN_PREPARED_QUEUE_OFFSET, which the renewed copy adds, is refused for good.
    sent = {"TAGS": "TagT", "UNIQ_KEY": "U" * 24, "WAIT": "true", "TRAN_MSG": "true"}
    sent["PGROUP"] = GROUP
    sent["CHECK_IMMUNITY_TIME_IN_SECONDS"] = "3600"
    added = {"REAL_TOPIC": "TopicTx", "REAL_QID": "1", "CLUSTER": broker.config.broker_cluster_name}
    pad = padded(sent, added, room=10)
    immune = await send_half(
        client,
        broker,
        b"immune",
        extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": "3600", "pad": pad},
    )
    stored = broker.store.look_message_by_offset(immune.commit_log_offset)
    assert stored is not None
    assert len(inner_from_record(stored)[0].properties.encode()) == MAX_PROPERTIES_BYTES - 10
    with structlog.testing.capture_logs() as logs:
        done = await broker.transactions.check_once()
    assert (done.set_aside, done.renewed, done.checked) == (1, 0, 1), done
    [line] = events(logs, "transaction_half_set_aside")
    assert (line["status"], line["uniq_key"]) == ("PROPERTIES_SIZE_EXCEEDED", immune.msg_id)

    def asked() -> list[RemotingCommand]:
        return [c for c in checks.received if c.ext_fields.get("msgId") == immune.msg_id]

    await wait_until(lambda: bool(asked()), "the one last check", 5.0)
    [check] = asked()
    assert int(check.ext_fields["commitLogOffset"]) == immune.commit_log_offset
    assert int(check.ext_fields["tranStateTableOffset"]) == immune.queue_offset
