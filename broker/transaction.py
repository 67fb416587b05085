"""Transactional messages: half records, op records, and the check-back service.

RocketMQ counterpart (4.9): ``TransactionalMessageBridge`` (half and op records),
``TransactionalMessageServiceImpl.check`` with ``TransactionalMessageCheckService`` (the
periodic scan) and ``AbstractTransactionalMessageCheckListener`` (CHECK_TRANSACTION_STATE to a
producer). protocol.md §13.5 and store-format.md §13 are the reference.

A half message is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its target in
REAL_TOPIC / REAL_QID, so consumers never see it. END_TRANSACTION commits it (the message is
stored again, now for its real topic, then an op record) or rolls it back (an op record only).
An op record, in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` with tag ``d``, holds the half record's queue
offset as decimal text: the op queue is the log of decided transactions.

Every ``transactionCheckInterval`` the service walks the half queue from the consume offset of
group ``CID_RMQ_SYS_TRANS``, skipping what the op queue says is decided. A half message older
than ``transactionTimeOut`` (or its CHECK_IMMUNITY_TIME_IN_SECONDS) gets one more
TRANSACTION_CHECK_TIMES, is appended again (so the scan can move past it and still find it
next time) and CHECK_TRANSACTION_STATE goes to a live producer of its group with the new
offsets; the producer answers with END_TRANSACTION. After ``transactionCheckMax`` checks it
goes to ``TRANS_CHECK_MAX_TIME_TOPIC`` and counts as rolled back; a store that refuses that
copy for now (a full disk) holds the scan there (``transaction_discard_refused``). The half
and op offsets of ``CID_RMQ_SYS_TRANS`` live in consumerOffset.json, so a restarted broker
carries on where it stopped; the op queue makes a re-scan harmless.

A half message the store refuses to append again for good (its properties, with the check
count added, over 32 KiB; its body over a since lowered maxMessageSize) is *set aside*
instead of stopping the scan there (4.9 tries it again every scan, and nothing behind it is
ever checked): logged as ``transaction_half_set_aside``, counted in ``set_aside``, its
producer asked one last time with the record's own offsets (END_TRANSACTION still decides
it), and the scan moves past it. It stays readable in the half queue.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from broker.facets import DelayBroker, HasOffsets, HasProducers, HasTopics
from broker.parked import refused_for_good
from broker.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from codec import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageInner,
    RecordError,
    RecordInfo,
    decode_properties,
    encode_properties,
    encode_record,
    inner_from_record,
    offset_msg_id,
    patch_append_fields,
)
from remoting.bodies import PERM_READ, PERM_WRITE
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.errors import ConnectError
from remoting.headers import CheckTransactionStateRequestHeader
from remoting.lifecycle import Periodic
from store.consume_queue import ConsumeQueue
from store.results import AppendResult, PutResult

log = structlog.get_logger(__name__)

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
HALF_QUEUE_ID = 0
OP_TAG = "d"
MAX_SCAN_S = 60.0  # MAX_PROCESS_TIME_LIMIT: one scan stops after a minute
_OP_PROPERTIES = encode_properties({"TAGS": OP_TAG, "WAIT": "true"})


def is_half(sys_flag: int, props: dict[str, str]) -> bool:
    """A prepared message: the PREPARED sysFlag type, or TRAN_MSG=true as clients also set."""
    return (
        sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE
        or props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"
    )


def ensure_system_topics(broker: HasTopics) -> None:
    """The half and op topics, created on first use as ``selectTopicConfig`` does."""
    for topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
        broker.topics.create_internal(topic, 1, PERM_READ | PERM_WRITE)


@dataclass(slots=True)
class CheckRound:
    """What one scan did (for logs, tests and metrics)."""

    checked: int = 0
    discarded: int = 0
    renewed: int = 0
    skipped_done: int = 0
    no_producer: int = 0
    set_aside: int = 0


@dataclass(slots=True)
class _Scan:
    """One scan's state: the half queue, the decisions read from the op queue ahead of it
    (half offset → op offset), the op records it has passed, when it began, what it did."""

    half_cq: ConsumeQueue
    decided: dict[int, int]
    done_ops: list[int]
    started_ms: int
    done: CheckRound = field(default_factory=CheckRound)

    def skip(self, op_offset: int) -> None:
        """A half message the op record at ``op_offset`` decided: nothing to check."""
        self.done_ops.append(op_offset)
        self.done.skipped_done += 1


class TransactionBroker(DelayBroker, HasTopics, HasOffsets, HasProducers, Protocol):
    """What the transaction check touches: the half and op queues' offsets, and the
    producers it asks back."""


class TransactionService:
    def __init__(self, broker: TransactionBroker) -> None:
        self.broker = broker
        config = broker.config
        self.interval_s = config.transaction_check_interval_ms / 1000
        self.timeout_ms = config.transaction_timeout_ms
        self.check_max = config.transaction_check_max
        self._loop = Periodic(
            "transaction-check",
            self.check_once,
            self.interval_s,
            failure_event="transaction_check_failed",
        )
        self._lock = asyncio.Lock()
        self.checks_sent = 0
        self.discarded = 0
        self.set_aside = 0

    # ------------------------------------------------------------------ op records

    async def write_op(self, half: RecordInfo) -> bool:
        """Record that the half message at ``half.queue_offset`` is decided."""
        broker = self.broker
        ensure_system_topics(broker)
        op = MessageInner(
            topic=TRANS_OP_HALF_TOPIC,
            queue_id=half.queue_id,
            body=str(half.queue_offset).encode(),
            properties=_OP_PROPERTIES,
            born_timestamp=int(time.time() * 1000),
            born_host=broker.store_host,
            store_host=broker.store_host,
        )
        result = await broker.store.put_message(op)
        if not result.status.stored:
            log.warning(
                "transaction_op_refused", half_offset=half.queue_offset, status=result.status.name
            )
        return result.status.stored

    # ------------------------------------------------------------------ the check loop

    def start(self) -> None:
        self._loop.start()

    async def shutdown(self) -> None:
        await self._loop.stop()

    async def check_once(self) -> CheckRound:
        """One scan of the half queue (``TransactionalMessageServiceImpl.check``)."""
        async with self._lock:
            return await self._scan()

    def _consume_offset(self, topic: str) -> int:
        store = self.broker.store
        offset = self.broker.offsets.query(CHECK_GROUP, topic, HALF_QUEUE_ID)
        low = store.get_min_offset(topic, HALF_QUEUE_ID)
        return low if offset < low else offset

    def _decided(self, op_offset: int, half_offset: int) -> tuple[dict[int, int], list[int]]:
        """``fillOpRemoveMap``: half offset → op offset for decisions not yet behind the
        scan, and the op offsets that are (already consumed)."""
        store = self.broker.store
        decided: dict[int, int] = {}
        behind: list[int] = []
        cq = store.queues.get(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        if cq is None:
            return decided, behind
        start = max(op_offset, cq.min_offset)
        for queue_offset, (commit_log_offset, _size, _tags) in list(
            cq.entries(start, cq.max_offset - start)
        ):
            record = store.look_message_by_offset(commit_log_offset)
            if record is None:
                behind.append(queue_offset)
                continue
            try:
                _info, inner = inner_from_record(record)
                value = int(bytes(inner.body))
            except (RecordError, ValueError):
                log.warning("transaction_op_unreadable", op_offset=queue_offset)
                behind.append(queue_offset)
                continue
            if value < half_offset:
                behind.append(queue_offset)
            else:
                decided[value] = queue_offset
        return decided, behind

    async def _scan(self) -> CheckRound:
        half_cq = self.broker.store.queues.get(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if half_cq is None:
            return CheckRound()
        half_offset = self._consume_offset(TRANS_HALF_TOPIC)
        op_offset = self._consume_offset(TRANS_OP_HALF_TOPIC)
        decided, done_ops = self._decided(op_offset, half_offset)
        scan = _Scan(half_cq, decided, done_ops, started_ms=int(time.time() * 1000))
        deadline = time.monotonic() + MAX_SCAN_S
        end = half_cq.max_offset  # what is appended during the scan waits for the next one
        position = half_offset
        while position < end and time.monotonic() < deadline:
            if not await self._visit(scan, position):
                break
            position += 1
        self._finish(scan, half_offset, position, op_offset)
        return scan.done

    async def _visit(self, scan: _Scan, position: int) -> bool:
        """The half message at ``position``: skipped when decided, discarded after too many
        checks, renewed or checked when old enough. False: the scan stops here (the store
        refused for now, or it and everything after it is too young)."""
        if position in scan.decided:
            scan.skip(scan.decided.pop(position))
            return True
        half = self._read_half(scan.half_cq, position)
        if half is None:
            return True  # aged out of the store, or unreadable: nothing left to decide
        info, inner = half
        props = decode_properties(info.properties)
        renewed_from = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, "")
        if renewed_from.isdigit() and int(renewed_from) in scan.decided:
            # A copy made for its immunity time; the producer decided the original.
            scan.skip(scan.decided.pop(int(renewed_from)))
            return True
        times = _int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES), 0)
        reserved_ms = self.broker.config.store.file_reserved_hours * 3_600_000
        if times >= self.check_max or scan.started_ms - info.store_timestamp > reserved_ms:
            return await self._discard(info, inner, props, times, scan.done)
        if info.store_timestamp >= scan.started_ms:
            return False  # stored after the scan began
        immunity_ms = self.timeout_ms
        custom = _int(props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), -1)
        if custom >= 0:
            immunity_ms = custom * 1000
        if scan.started_ms - info.born_timestamp < immunity_ms:
            if custom < 0 or renewed_from:
                return False  # younger than the timeout: so is everything after it
            return await self._renew(position, info, inner, props, scan.done)
        return await self._check(info, inner, props, times, scan.done)

    def _read_half(
        self, half_cq: ConsumeQueue, position: int
    ) -> tuple[RecordInfo, MessageInner] | None:
        entry = next(iter(half_cq.entries(position, 1)), None)
        record = None if entry is None else self.broker.store.look_message_by_offset(entry[1][0])
        if record is None:
            return None
        try:
            return inner_from_record(record)
        except RecordError:
            log.warning("transaction_half_unreadable", half_offset=position)
            return None

    async def _renew(
        self,
        position: int,
        info: RecordInfo,
        inner: MessageInner,
        props: dict[str, str],
        done: CheckRound,
    ) -> bool:
        """A long immunity of its own must not hold up the queue behind it: append a copy
        that remembers this offset, and move on. False: the store refused for now."""
        props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(position)
        appended = await self._append_half(inner, props)
        if appended is None:
            return False
        if isinstance(appended, AppendResult):
            done.renewed += 1
            return True
        # No copy will come back to be checked when its immunity ends: ask now, one last
        # time, at its own offsets (END_TRANSACTION still decides it).
        self._set_aside(info, props, appended, done)
        self._ask(inner, props, _as_appended(info), done)
        return True

    async def _check(
        self,
        info: RecordInfo,
        inner: MessageInner,
        props: dict[str, str],
        times: int,
        done: CheckRound,
    ) -> bool:
        """One more check: the half message appended again with its count raised, and its
        producer asked at the copy's offsets. False: the store refused for now."""
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times + 1)
        appended = await self._append_half(inner, props)
        if appended is None:
            return False
        if isinstance(appended, PutResult):
            self._set_aside(info, props, appended, done)
            appended = _as_appended(info)  # asked one last time, at its own offsets
        self._ask(inner, props, appended, done)
        return True

    def _ask(
        self, inner: MessageInner, props: dict[str, str], at: AppendResult, done: CheckRound
    ) -> None:
        if self._send_check(inner, props, at):
            done.checked += 1
        else:
            done.no_producer += 1

    def _finish(self, scan: _Scan, half_offset: int, position: int, op_offset: int) -> None:
        """Commit how far the scan got in the half queue and in the op queue (up to the
        first op record not yet behind it), and log a round that did something."""
        broker = self.broker
        if position != half_offset:
            broker.offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, position)
        new_op_offset = op_offset
        done_set = set(scan.done_ops)
        while new_op_offset in done_set:
            new_op_offset += 1
        if new_op_offset != op_offset:
            broker.offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, new_op_offset)
        done = scan.done
        if done.checked or done.discarded or done.no_producer or done.set_aside:
            log.info(
                "transaction_check_round",
                checked=done.checked,
                discarded=done.discarded,
                renewed=done.renewed,
                no_producer=done.no_producer,
                set_aside=done.set_aside,
                half_offset=position,
                op_offset=new_op_offset,
            )

    async def _append_half(
        self, inner: MessageInner, props: dict[str, str]
    ) -> AppendResult | PutResult | None:
        """``putBackHalfMsgQueue``: the half message again, at the end of the half queue.

        Returns:
            Where it went; the refusal, if it is for good (``refused_for_good``); None for
            a refusal that may pass (try again next scan).
        """
        original = inner.properties
        inner.properties = encode_properties(props)
        result = await self._put_copy(inner, TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if result.status.stored and result.append is not None:
            return result.append
        if refused_for_good(result.status):
            inner.properties = original  # what the producer is shown, if asked
            return result
        log.warning("transaction_half_refused", status=result.status.name)
        return None

    async def _put_copy(self, inner: MessageInner, topic: str, queue_id: int) -> PutResult:
        """A half message stored again, by this broker, under ``topic``/``queue_id``, not
        waiting for a flush."""
        inner.topic = topic
        inner.queue_id = queue_id
        inner.store_host = self.broker.store_host
        inner.wait_store_msg_ok = False
        inner.delay_level = 0
        return await self.broker.store.put_message(inner)

    def _set_aside(
        self,
        info: RecordInfo,
        props: dict[str, str],
        refusal: PutResult,
        done: CheckRound,
    ) -> None:
        """A half message that cannot be appended again: the scan moves past it."""
        self.set_aside += 1
        done.set_aside += 1
        log.error(
            "transaction_half_set_aside",
            producer_group=props.get(PROPERTY_PRODUCER_GROUP),
            topic=props.get(PROPERTY_REAL_TOPIC),
            msg_id=offset_msg_id(self.broker.store_host, info.commit_log_offset),
            uniq_key=props.get(PROPERTY_UNIQ_KEY),
            half_offset=info.queue_offset,
            commit_log_offset=info.commit_log_offset,
            status=refusal.status.name,
            reason=refusal.remark,
        )

    async def _discard(
        self,
        info: RecordInfo,
        inner: MessageInner,
        props: dict[str, str],
        times: int,
        done: CheckRound,
    ) -> bool:
        """``resolveDiscardMsg``: kept for inspection in TRANS_CHECK_MAX_TIME_TOPIC.

        Returns:
            Whether the scan may move past it: False for a refusal that may pass (a full
            disk), so that the copy is not lost; a refusal for good sets it aside.
        """
        self.broker.topics.create_internal(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
        result = await self._put_copy(inner, TRANS_CHECK_MAX_TIME_TOPIC, 0)
        if not result.status.stored:
            if not refused_for_good(result.status):
                log.warning(
                    "transaction_discard_refused",
                    half_offset=info.queue_offset,
                    status=result.status.name,
                    remark=result.remark,
                )
                return False
            self._set_aside(info, props, result, done)
        self.discarded += 1
        done.discarded += 1
        log.warning(
            "transaction_discarded",
            producer_group=props.get(PROPERTY_PRODUCER_GROUP),
            topic=props.get(PROPERTY_REAL_TOPIC),
            msg_id=props.get(PROPERTY_UNIQ_KEY),
            checks=times,
            half_offset=info.queue_offset,
            kept=result.status.stored,
        )
        return True

    def _send_check(
        self, inner: MessageInner, props: dict[str, str], appended: AppendResult
    ) -> bool:
        """CHECK_TRANSACTION_STATE (oneway) to one live producer of the message's group."""
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        channels = [c for c in self.broker.producers.groups.get(group, {}) if not c.closed]
        if not channels:
            log.warning("transaction_check_no_producer", producer_group=group)
            return False
        conn = random.choice(channels)  # noqa: S311 - spreading checks, not a secret
        uniq = props.get(PROPERTY_UNIQ_KEY)
        offset_id = offset_msg_id(self.broker.store_host, appended.commit_log_offset)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=appended.queue_offset,
            commit_log_offset=appended.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=offset_id,
        )
        body = self._check_body(inner, props, appended)
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body
        )
        try:
            conn.invoke_oneway(request)
        except ConnectError as exc:
            # Closed since it was picked, or a 5.x producer without its Telemetry stream
            # open: checked again next round, as a group without producers is.
            log.warning("transaction_check_not_sent", producer_group=group, reason=str(exc))
            return False
        self.checks_sent += 1
        log.info(
            "transaction_check_sent",
            producer_group=group,
            msg_id=uniq,
            peer=conn.peer,
            checks=props.get(PROPERTY_TRANSACTION_CHECK_TIMES),
        )
        return True

    def _check_body(
        self, inner: MessageInner, props: dict[str, str], appended: AppendResult
    ) -> bytes:
        """The half message as a stored record, but for its real topic and queue, as
        ``sendCheckMessage`` encodes it for the producer."""
        record = bytearray(
            encode_record(
                topic=props.get(PROPERTY_REAL_TOPIC, TRANS_HALF_TOPIC).encode(),
                queue_id=_int(props.get(PROPERTY_REAL_QUEUE_ID), 0),
                body=inner.body,
                flag=inner.flag,
                properties=inner.properties.encode(),
                sys_flag=inner.sys_flag,
                born_timestamp=inner.born_timestamp,
                born_host=inner.born_host,
                store_host=self.broker.store_host,
                reconsume_times=inner.reconsume_times,
                prepared_transaction_offset=inner.prepared_transaction_offset,
            )
        )
        patch_append_fields(
            record,
            0,
            queue_offset=appended.queue_offset,
            commit_log_offset=appended.commit_log_offset,
            store_timestamp=appended.store_timestamp,
            sys_flag=inner.sys_flag,
        )
        return bytes(record)

    def backlog(self) -> int:
        """Half messages not yet passed by the check scan (a cheap upper bound)."""
        store = self.broker.store
        return max(
            0, store.get_max_offset(TRANS_HALF_TOPIC, 0) - self._consume_offset(TRANS_HALF_TOPIC)
        )


def _as_appended(info: RecordInfo) -> AppendResult:
    """The half record where it is, for a check that cannot point at a fresh copy."""
    return AppendResult(
        commit_log_offset=info.commit_log_offset,
        wrote_bytes=info.total_size,
        msg_ids=[],
        store_timestamp=info.store_timestamp,
        queue_offset=info.queue_offset,
    )


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
