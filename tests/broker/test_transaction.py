"""Transactional messages on the wire (protocol.md §7.6, §13.5): half messages, END_TRANSACTION
commit / rollback / unknown, and the check-back service with CHECK_TRANSACTION_STATE, against a
real broker through our RemotingClient acting as a Java-style producer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from broker.broker import Broker
from codec import decode_offset_msg_id, decode_record
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.headers import EndTransactionRequestHeader
from tests.broker.conftest import heartbeat
from tests.support import (
    BrokerFactory,
    ClientFactory,
    call,
    pull,
    record_body,
    record_props,
    records,
    send,
    wait_dispatched,
    wait_until,
)

TOPIC = "TopicTx"
GROUP = "pg-tx"
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
DISCARDED = "TRANS_CHECK_MAX_TIME_TOPIC"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
FAST_CHECKS: dict[str, Any] = {"transaction_check_interval_ms": 100, "transaction_timeout_ms": 200}


class Half:
    """A half message as the producer knows it from its send result."""

    def __init__(self, response: RemotingCommand, uniq_key: str) -> None:
        assert response.code == ResponseCode.SUCCESS, response
        self.queue_offset = int(response.ext_fields["queueOffset"])
        _, self.commit_log_offset = decode_offset_msg_id(response.ext_fields["msgId"])
        self.msg_id = uniq_key


async def send_half(
    client: RemotingClient,
    broker: Broker,
    body: bytes,
    *,
    group: str = GROUP,
    extra: dict[str, str] | None = None,
) -> Half:
    uniq = f"UNIQ{time.monotonic_ns():020d}"
    props = {"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": uniq, **(extra or {})}
    response = await send(
        client,
        broker.address,
        TOPIC,
        body,
        queue_id=1,
        sys_flag=0x4,
        tags="TagT",
        extra=props,
        born_timestamp=int(time.time() * 1000),  # the check timeout counts from it
    )
    return Half(response, uniq)


def end_header(
    half: Half, kind: int, *, group: str = GROUP, from_check: bool = False
) -> dict[str, str]:
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
        commit_or_rollback=kind,
        from_transaction_check=from_check,
        msg_id=half.msg_id,
        transaction_id=half.msg_id,
    ).to_ext_fields()


async def end(
    client: RemotingClient,
    broker: Broker,
    half: Half,
    kind: int,
    *,
    group: str = GROUP,
    from_check: bool = False,
) -> RemotingCommand:
    ext = end_header(half, kind, group=group, from_check=from_check)
    return await call(client, broker.address, RequestCode.END_TRANSACTION, ext)


async def delivered(client: RemotingClient, broker: Broker) -> list[bytes]:
    await wait_dispatched(broker)
    response = await pull(client, broker.address, TOPIC, queue_id=1)
    if response.code != ResponseCode.SUCCESS:
        return []
    body = response.body_bytes
    infos = records(body)
    return [record_body(body, infos, i) for i in range(len(infos))]


class Checks:
    """CHECK_TRANSACTION_STATE requests the broker sends to this producer connection."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []
        self.table = ProcessorTable()
        self.table.register(
            RequestCode.CHECK_TRANSACTION_STATE, self._on_check, Lane("checks", capacity=100)
        )

    async def _on_check(self, conn: Connection, request: RemotingCommand) -> None:
        self.received.append(request)


async def producer(start_client: ClientFactory, broker: Broker) -> tuple[RemotingClient, Checks]:
    checks = Checks()
    client = await start_client(processors=checks.table)
    await heartbeat(client, broker.address, "10.0.0.9@tx", "cg-unused", producer_groups=(GROUP,))
    return client, checks


def half_from_check(check: RemotingCommand) -> Half:
    ext = check.ext_fields
    half = Half.__new__(Half)
    half.queue_offset = int(ext["tranStateTableOffset"])
    half.commit_log_offset = int(ext["commitLogOffset"])
    half.msg_id = ext["msgId"]
    return half


# ------------------------------------------------------------------------ end transaction


async def test_commit_delivers_the_message_with_the_commit_type(
    broker: Broker, client: RemotingClient
) -> None:
    half = await send_half(client, broker, b"paid", extra={"k": "v"})
    assert await delivered(client, broker) == []  # invisible until committed
    response = await end(client, broker, half, COMMIT)
    assert response.code == ResponseCode.SUCCESS, response
    assert await delivered(client, broker) == [b"paid"]
    got = await pull(client, broker.address, TOPIC, queue_id=1)
    (info,) = records(got.body_bytes)
    assert info.sys_flag & 0xC == COMMIT
    assert info.prepared_transaction_offset == half.commit_log_offset
    props = record_props(info)
    assert (props["TAGS"], props["k"], props["UNIQ_KEY"]) == ("TagT", "v", half.msg_id)
    # The op record: tag d, the half queue offset as text, in the op queue 0.
    assert broker.store.get_max_offset(OP, 0) == 1
    op = await pull(client, broker.address, OP, queue_id=0)
    (op_info,) = records(op.body_bytes)
    assert record_body(op.body_bytes, [op_info], 0) == str(half.queue_offset).encode()
    assert record_props(op_info)["TAGS"] == "d"


async def test_rollback_writes_only_the_op_record(broker: Broker, client: RemotingClient) -> None:
    half = await send_half(client, broker, b"cancelled")
    response = await end(client, broker, half, ROLLBACK)
    assert response.code == ResponseCode.SUCCESS, response
    assert await delivered(client, broker) == []
    assert broker.store.get_max_offset(OP, 0) == 1


async def test_unknown_is_ignored_without_an_answer(broker: Broker, client: RemotingClient) -> None:
    half = await send_half(client, broker, b"undecided")
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, end_header(half, UNKNOWN))
    await client.invoke_oneway(broker.address, request)
    await asyncio.sleep(0.2)
    assert await delivered(client, broker) == []
    assert broker.store.get_max_offset(OP, 0) == 0


async def test_oneway_commit_as_java_and_cpp_send_it(
    broker: Broker, client: RemotingClient
) -> None:
    half = await send_half(client, broker, b"oneway")
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, end_header(half, COMMIT))
    await client.invoke_oneway(broker.address, request)
    await wait_until(lambda: broker.store.get_max_offset(TOPIC, 1) == 1, "the commit")
    assert await delivered(client, broker) == [b"oneway"]


async def test_end_transaction_checks_the_half_message(
    broker: Broker, client: RemotingClient
) -> None:
    half = await send_half(client, broker, b"guarded")
    wrong_group = await end(client, broker, half, COMMIT, group="someone-else")
    assert (wrong_group.code, wrong_group.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The producer group wrong",
    )
    bad_table = Half.__new__(Half)
    bad_table.__dict__.update(vars(half))
    bad_table.queue_offset = half.queue_offset + 7
    response = await end(client, broker, bad_table, COMMIT)
    assert response.remark == "The transaction state table offset wrong"
    nowhere = Half.__new__(Half)
    nowhere.__dict__.update(vars(half))
    nowhere.commit_log_offset = 10**9
    response = await end(client, broker, nowhere, COMMIT)
    assert response.remark == "Find prepared transaction message failed"
    odd = await end(client, broker, half, 5)
    assert odd.code == ResponseCode.SYSTEM_ERROR
    assert "commitOrRollback 5" in (odd.remark or "")
    # A normal message is not a half message, whatever its properties say.
    plain = await send(client, broker.address, TOPIC, b"plain", queue_id=0, extra={"PGROUP": GROUP})
    not_half = Half(plain, "x")
    response = await end(client, broker, not_half, COMMIT)
    assert "not a half message" in (response.remark or "")
    assert await delivered(client, broker) == []
    assert (await end(client, broker, half, COMMIT)).code == ResponseCode.SUCCESS
    assert await delivered(client, broker) == [b"guarded"]


async def test_missing_header_fields_are_a_system_error(
    broker: Broker, client: RemotingClient
) -> None:
    response = await call(
        client, broker.address, RequestCode.END_TRANSACTION, {"producerGroup": GROUP}
    )
    assert response.code == ResponseCode.SYSTEM_ERROR


# -------------------------------------------------------------------------- check-back


async def test_an_undecided_message_is_checked_back_and_committed(
    start_broker: BrokerFactory, start_client: ClientFactory
) -> None:
    broker = await start_broker(**FAST_CHECKS)
    client, checks = await producer(start_client, broker)
    half = await send_half(client, broker, b"later")
    await wait_until(lambda: len(checks.received) == 1, "the check", timeout_s=5)
    check = checks.received[0]
    ext = check.ext_fields
    assert ext["msgId"] == ext["transactionId"] == half.msg_id
    assert int(ext["tranStateTableOffset"]) == half.queue_offset + 1  # appended again
    assert ext["offsetMsgId"]
    # The body is the half message as a record, for its real topic and queue.
    info = decode_record(check.body_bytes, 0)
    assert (info.topic, info.queue_id) == (TOPIC, 1)
    assert record_props(info)["TRANSACTION_CHECK_TIMES"] == "1"
    response = await end(client, broker, half_from_check(check), COMMIT, from_check=True)
    assert response.code == ResponseCode.SUCCESS
    assert await delivered(client, broker) == [b"later"]
    await asyncio.sleep(0.6)  # several check rounds: decided, so never asked again
    assert len(checks.received) == 1


async def test_a_check_answered_with_rollback_delivers_nothing(
    start_broker: BrokerFactory, start_client: ClientFactory
) -> None:
    broker = await start_broker(**FAST_CHECKS)
    client, checks = await producer(start_client, broker)
    await send_half(client, broker, b"no")
    await wait_until(lambda: len(checks.received) == 1, "the check", timeout_s=5)
    half = half_from_check(checks.received[0])
    assert (await end(client, broker, half, ROLLBACK, from_check=True)).code == 0
    await asyncio.sleep(0.6)
    assert len(checks.received) == 1
    assert await delivered(client, broker) == []


async def test_a_message_never_decided_is_dropped_after_the_max_checks(
    start_broker: BrokerFactory, start_client: ClientFactory
) -> None:
    broker = await start_broker(transaction_check_max=3, **FAST_CHECKS)
    client, checks = await producer(start_client, broker)
    await send_half(client, broker, b"stuck")
    await wait_until(
        lambda: broker.store.get_max_offset(DISCARDED, 0) == 1, "the discard", timeout_s=8
    )
    assert [c.ext_fields["tranStateTableOffset"] for c in checks.received] == ["1", "2", "3"]
    await asyncio.sleep(0.5)
    assert len(checks.received) == 3
    assert await delivered(client, broker) == []
    assert broker.transactions.discarded == 1


async def test_check_immunity_time_of_the_message_is_honoured(
    start_broker: BrokerFactory, start_client: ClientFactory
) -> None:
    broker = await start_broker(**FAST_CHECKS)
    client, checks = await producer(start_client, broker)
    sent_at = time.monotonic()
    await send_half(client, broker, b"slow", extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": "1"})
    fast = await send_half(client, broker, b"fast")
    # The message behind the immune one is checked on time…
    await wait_until(lambda: len(checks.received) >= 1, "the first check", timeout_s=5)
    assert checks.received[0].ext_fields["msgId"] == fast.msg_id
    # …and the immune one only after its own second.
    await wait_until(lambda: len(checks.received) >= 2, "the second check", timeout_s=5)
    assert time.monotonic() - sent_at >= 1.0
    assert decode_record(checks.received[1].body_bytes, 0).body_length == len(b"slow")


async def test_no_live_producer_means_no_check_and_a_later_one(
    start_broker: BrokerFactory, start_client: ClientFactory, client: RemotingClient
) -> None:
    broker = await start_broker(**FAST_CHECKS)
    await send_half(client, broker, b"orphan")  # no heartbeat: no producer of the group
    await asyncio.sleep(0.5)
    assert broker.transactions.checks_sent == 0
    producer_client, checks = await producer(start_client, broker)
    await wait_until(lambda: len(checks.received) == 1, "the check", timeout_s=5)
    half = half_from_check(checks.received[0])
    await end(producer_client, broker, half, COMMIT, from_check=True)
    assert await delivered(producer_client, broker) == [b"orphan"]


async def test_check_back_resumes_after_a_restart(
    start_broker: BrokerFactory, start_client: ClientFactory, tmp_path: Path
) -> None:
    root = tmp_path / "tx-restart"
    # No checks before the restart (a minute between rounds)…
    broker = await start_broker(root=root, transaction_check_interval_ms=60_000)
    client = await start_client()
    committed = await send_half(client, broker, b"decided")
    assert (await end(client, broker, committed, COMMIT)).code == ResponseCode.SUCCESS
    await send_half(client, broker, b"pending")
    await wait_dispatched(broker)
    await broker.shutdown()
    # …then the restarted broker asks about the pending one only, once, and delivers it.
    broker = await start_broker(root=root, **FAST_CHECKS)
    producer_client, checks = await producer(start_client, broker)
    await wait_until(lambda: len(checks.received) == 1, "the check", timeout_s=5)
    info = decode_record(checks.received[0].body_bytes, 0)
    assert info.body_length == len(b"pending")
    half = half_from_check(checks.received[0])
    await end(producer_client, broker, half, COMMIT, from_check=True)
    await asyncio.sleep(0.6)
    assert len(checks.received) == 1
    assert sorted(await delivered(producer_client, broker)) == [b"decided", b"pending"]
