"""Pop consumption: messages handed out invisible for a while, acked one by one, and revived
into the group's retry topic when they are not.

RocketMQ counterpart (5.x): ``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``, ``PopReviveService`` with ``PopCheckPoint`` / ``AckMsg``
records in ``rmq_sys_REVIVE_LOG_<cluster>``.

A pop reads from a queue at the group's offset, which moves past what was handed out at once
(as in 5.x: pop offsets are consumer offsets). What was handed out is a *checkpoint*: group,
topic, queue, the offset the batch began at, pop time, invisible time and the messages'
offsets, with a bit per message for "acked". Checkpoints and acks are written as messages to a
revive queue (``reviveQueueNum`` of them) of the revive topic, in 5.x's JSON field names, so
they are in the commit log like everything else. The revive service re-puts every message of
a checkpoint still un-acked at pop time + invisible time into ``%RETRY%<group>_<topic>`` with
one more reconsume time (the delivery attempt grows), or into ``%DLQ%<group>`` past the
group's ``retryMaxTimes``, and records that as acks. A pop reads the retry topic as well.

A message that can never be revived (its retry topic is no legal topic, as a checkpoint
written before group names were checked can ask for; its properties grown over 32 KiB) is
*set aside*: logged as ``pop_revive_message_set_aside``, counted in ``set_aside``, acked so
that its checkpoint closes, and left readable where it was popped from. Only a refusal that
may pass (a full disk) stops the round, to be tried again.

On start the revive queues are replayed from the offsets of ``CID_RMQ_SYS_REVIVE_GROUP``
(which only move past records whose checkpoint is closed), so open checkpoints, with what was
acked, survive a restart. Only checkpoints still open are in memory: the cost is per message
in flight, not per message stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.facets import DelayBroker, HasOffsets, Tables
from broker.parked import refused_for_good
from broker.pop_order import ORDER_REVIVE_QID, OrderedPops
from broker.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, check_topic_name
from codec import (
    MessageInner,
    RecordError,
    RecordInfo,
    decode_properties,
    encode_properties,
    inner_from_record,
    offset_msg_id,
)
from remoting.bodies import PERM_READ, PERM_WRITE
from remoting.lifecycle import Periodic
from remoting.receipt import pop_retry_topic
from store.dispatch import Arrival
from store.results import PutResult

if TYPE_CHECKING:
    from broker.long_polling import TagFilter
    from store.message_store import RecordFilter

log = structlog.get_logger(__name__)

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
INIT_MODE_MIN = 0  # ConsumeInitMode.MIN: a new group starts at the earliest message
REVIVE_PERIOD_S = 0.1

CheckpointKey = tuple[str, str, int, int, int]  # group, topic, queue, start offset, pop time


@dataclass(slots=True)
class Checkpoint:
    """``PopCheckPoint``: one popped batch of one queue."""

    group: str
    topic: str  # where the messages are stored: the topic or the group's pop retry topic
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    offsets: list[int]
    revive_qid: int
    acked: int = 0  # bit i: offsets[i] is acked (or revived)
    record_offset: int = -1  # of its record in the revive queue
    broker_name: str = ""

    @property
    def key(self) -> CheckpointKey:
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def closed(self) -> bool:
        return self.acked == (1 << len(self.offsets)) - 1

    def to_json(self) -> dict[str, Any]:
        return {
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "bm": 0,
            "n": len(self.offsets),
            "q": self.queue_id,
            "t": self.topic,
            "c": self.group,
            "ro": -1,
            "d": [o - self.start_offset for o in self.offsets],
            "bn": self.broker_name,
            "rp": 0,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any], revive_qid: int, record_offset: int) -> Checkpoint:
        start = int(doc["so"])
        return cls(
            group=str(doc["c"]),
            topic=str(doc["t"]),
            queue_id=int(doc["q"]),
            start_offset=start,
            pop_time=int(doc["pt"]),
            invisible_time=int(doc["it"]),
            offsets=[start + int(d) for d in doc.get("d") or [0] * int(doc.get("n", 1))],
            revive_qid=revive_qid,
            record_offset=record_offset,
            broker_name=str(doc.get("bn", "")),
        )


@dataclass(slots=True)
class PopResult:
    records: list[bytes] = field(default_factory=list)
    start_offsets: list[tuple[str, int, str]] = field(default_factory=list)
    msg_offsets: list[tuple[str, int, str]] = field(default_factory=list)
    rest_num: int = 0
    pop_time: int = 0
    revive_qid: int = 0


class PopError(Exception):
    """A refusal to answer with: RocketMQ response code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PopServiceBroker(DelayBroker, Tables, HasOffsets, Protocol):
    """What pop consumption and its revive service touch: the groups' offsets and their
    retryMaxTimes."""


class PopService:
    def __init__(self, broker: PopServiceBroker) -> None:
        self.broker = broker
        self.revive_topic = REVIVE_TOPIC_PREFIX + broker.config.broker_cluster_name
        self.revive_queues = broker.config.revive_queue_num
        self.checkpoints: dict[CheckpointKey, Checkpoint] = {}
        self._waiters: dict[str, asyncio.Event] = {}
        self._rotation = 0
        self._loop = Periodic(
            "pop-revive",
            self._round,
            REVIVE_PERIOD_S,
            first_delay_s=0.0,
            failure_event="pop_revive_failed",
        )
        self.revived = 0
        self.dead_lettered = 0
        self.set_aside = 0
        self.ordered = OrderedPops()  # FIFO groups' batches in flight

    # ------------------------------------------------------------------ revive log

    async def _write(self, tag: str, doc: dict[str, Any], revive_qid: int) -> int:
        """One CK or ACK record in the revive queue; its queue offset (-1 if refused)."""
        broker = self.broker
        broker.topics.create_internal(self.revive_topic, self.revive_queues, PERM_READ | PERM_WRITE)
        record = MessageInner(
            topic=self.revive_topic,
            queue_id=revive_qid,
            body=json.dumps(doc, separators=(",", ":")).encode(),
            properties=encode_properties({"TAGS": tag}),
            born_timestamp=int(time.time() * 1000),
            born_host=broker.store_host,
            store_host=broker.store_host,
        )
        result = await broker.store.put_message(record)
        if not result.status.stored or result.append is None:
            log.warning("pop_revive_record_refused", tag=tag, status=result.status.name)
            return -1
        return result.append.queue_offset

    def load(self) -> None:
        """Replay the revive queues: open checkpoints and their acks come back."""
        store = self.broker.store
        for qid in range(self.revive_queues):
            cq = store.queues.get(self.revive_topic, qid)
            if cq is None:
                continue
            start = max(self.broker.offsets.query(REVIVE_GROUP, self.revive_topic, qid), 0)
            start = max(start, cq.min_offset)
            for queue_offset, (commit_log_offset, _size, _tags) in list(
                cq.entries(start, cq.max_offset - start)
            ):
                record = store.look_message_by_offset(commit_log_offset)
                if record is None:
                    continue
                try:
                    info, inner = inner_from_record(record)
                    tag = decode_properties(info.properties).get("TAGS")
                    doc = json.loads(bytes(inner.body))
                    if tag == CK_TAG:
                        ck = Checkpoint.from_json(doc, qid, queue_offset)
                        self.checkpoints[ck.key] = ck
                    elif tag == ACK_TAG:
                        self._apply_ack(doc)
                except (RecordError, ValueError, KeyError, TypeError):
                    log.warning("pop_revive_record_unreadable", revive_qid=qid, offset=queue_offset)
        for key in [k for k, ck in self.checkpoints.items() if ck.closed]:
            del self.checkpoints[key]
        if self.checkpoints:
            log.info("pop_checkpoints_loaded", open=len(self.checkpoints))

    def _apply_ack(self, doc: dict[str, Any]) -> None:
        key = (str(doc["c"]), str(doc["t"]), int(doc["q"]), int(doc["so"]), int(doc["pt"]))
        ck = self.checkpoints.get(key)
        if ck is not None and int(doc["ao"]) in ck.offsets:
            ck.acked |= 1 << ck.offsets.index(int(doc["ao"]))

    def _commit_revive_offsets(self) -> None:
        """Each revive queue's offset moves up to its oldest checkpoint still open."""
        store = self.broker.store
        oldest: dict[int, int] = {}
        for ck in self.checkpoints.values():
            if ck.record_offset >= 0:
                q = ck.revive_qid
                oldest[q] = min(oldest.get(q, ck.record_offset), ck.record_offset)
        for qid in range(self.revive_queues):
            end = store.get_max_offset(self.revive_topic, qid)
            offset = oldest.get(qid, end)
            if offset > max(self.broker.offsets.query(REVIVE_GROUP, self.revive_topic, qid), 0):
                self.broker.offsets.commit(REVIVE_GROUP, self.revive_topic, qid, offset)

    # ---------------------------------------------------------------------- pop

    def _start_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        store = self.broker.store
        offset = self.broker.offsets.query(group, topic, queue_id)
        low = store.get_min_offset(topic, queue_id)
        if offset >= 0:
            return max(offset, low)
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return low
        # 5.x's getInitOffset: a queue that still starts at 0 with that message in memory
        # is read from 0 (initPopOffsetByCheckMsgInMem); otherwise from the last message.
        if (
            self.broker.config.init_pop_offset_by_check_msg_in_mem
            and low <= 0
            and store.get_max_offset(topic, queue_id) > 0
            and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)
        ):
            return 0
        return max(store.get_max_offset(topic, queue_id) - 1, 0)

    async def pop(
        self,
        *,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_time: int,
        init_mode: int,
        tag_filter: TagFilter | None,
        read_queue_nums: int,
        record_filter: RecordFilter | None = None,
    ) -> PopResult:
        """Hand out up to ``max_nums`` messages of ``topic`` (one queue, or every queue in
        turn) and of the group's pop retry topic, each batch under a checkpoint. A FIFO
        group's pop is ``pop_in_order``. ``tag_filter`` runs on the consume queue's tag codes,
        ``record_filter`` (SQL92) on each record; both on the retry topic too, whose records
        keep the original's tags and properties."""
        broker = self.broker
        store = broker.store
        result = PopResult(pop_time=int(time.time() * 1000))
        result.revive_qid = random.randrange(self.revive_queues)  # noqa: S311 - spreading load
        remaining = max_nums
        for t, q in self._queues_to_pop(group, topic, queue_id, read_queue_nums):
            start = self._start_offset(group, t, q, init_mode)
            if remaining <= 0:
                if t == topic:
                    result.rest_num += max(store.get_max_offset(t, q) - start, 0)
                continue
            got = store.get_messages(
                t, q, start, remaining, tag_filter, record_filter=record_filter
            )
            try:
                records = [bytes(view) for view in got.records]
                offsets = list(got.queue_offsets)
                next_offset = got.next_begin_offset
            finally:
                got.release()
            if records:
                await self._check_out(
                    result,
                    group=group,
                    topic=t,
                    queue_id=q,
                    start=start,
                    offsets=offsets,
                    invisible_time=invisible_time,
                )
                result.records += records
                remaining -= len(records)
            if next_offset > start:
                broker.offsets.commit(group, t, q, next_offset)
            if t == topic:
                result.rest_num += max(store.get_max_offset(t, q) - next_offset, 0)
        return result

    def pop_in_order(
        self,
        *,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_time: int,
        init_mode: int,
        tag_filter: TagFilter | None,
        read_queue_nums: int,
        record_filter: RecordFilter | None = None,
    ) -> PopResult:
        """An orderly pop: from each queue not blocked by a batch in flight, the messages
        from the group's offset on; the offset moves when they are acked."""
        store = self.broker.store
        result = PopResult(pop_time=int(time.time() * 1000), revive_qid=ORDER_REVIVE_QID)
        remaining = max_nums
        for q in self._queue_ids(queue_id, read_queue_nums):
            key = (group, topic, q)
            start = self._start_offset(group, topic, q, init_mode)
            if remaining <= 0 or self.ordered.blocked(key, result.pop_time):
                result.rest_num += max(store.get_max_offset(topic, q) - start, 0)
                continue
            got = store.get_messages(
                topic, q, start, remaining, tag_filter, record_filter=record_filter
            )
            try:
                pairs = [(bytes(v), o) for v, o in zip(got.records, got.queue_offsets, strict=True)]
                next_offset = got.next_begin_offset
            finally:
                got.release()
            keep = set(self.ordered.skip_acked(key, [o for _, o in pairs]))
            pairs = [(r, o) for r, o in pairs if o in keep]
            if not pairs:
                if next_offset > start:  # nothing there matches: move past it
                    self.broker.offsets.commit(group, topic, q, next_offset)
                continue
            offsets = [o for _, o in pairs]
            self.ordered.handed_out(key, start, offsets, result.pop_time, invisible_time)
            result.records += [r for r, _ in pairs]
            result.start_offsets.append((topic, q, str(start)))
            result.msg_offsets.append((topic, q, ",".join(str(o) for o in offsets)))
            remaining -= len(pairs)
            result.rest_num += max(store.get_max_offset(topic, q) - next_offset, 0)
        return result

    def ack_in_order(
        self, group: str, topic: str, queue_id: int, offset: int, pop_time: int
    ) -> bool:
        """Ack one message of an orderly pop; the group's offset moves over what is acked.
        False when the receipt is not the queue's current batch's."""
        commit = self.ordered.ack((group, topic, queue_id), offset, pop_time)
        if commit is None:
            return False
        if commit > self.broker.offsets.query(group, topic, queue_id):
            self.broker.offsets.commit(group, topic, queue_id, commit)
        return True

    def _queue_ids(self, queue_id: int, read_queue_nums: int) -> list[int]:
        """The queue asked for, or every read queue from the next in rotation (so that
        pops spread over the queues)."""
        if queue_id >= 0:
            return [queue_id]
        self._rotation += 1
        first = self._rotation % max(read_queue_nums, 1)
        return [(first + i) % read_queue_nums for i in range(read_queue_nums)]

    def _queues_to_pop(
        self, group: str, topic: str, queue_id: int, read_queue_nums: int
    ) -> list[tuple[str, int]]:
        """The queue asked for, or every read queue from the next in rotation; and the
        group's pop retry topic, first now and then (as 5.x does), else last."""
        queues = [(topic, q) for q in self._queue_ids(queue_id, read_queue_nums)]
        retry = pop_retry_topic(group, topic)
        if self.broker.store.queues.get(retry, 0) is not None:
            if random.random() < 0.2:  # noqa: S311
                queues.insert(0, (retry, 0))
            else:
                queues.append((retry, 0))
        return queues

    async def _check_out(
        self,
        result: PopResult,
        *,
        group: str,
        topic: str,
        queue_id: int,
        start: int,
        offsets: list[int],
        invisible_time: int,
    ) -> None:
        """Record the checkpoint of a batch popped from one queue before it is handed out.

        Raises:
            PopError: the store refused the checkpoint's record.
        """
        ck = Checkpoint(
            group=group,
            topic=topic,
            queue_id=queue_id,
            start_offset=start,
            pop_time=result.pop_time,
            invisible_time=invisible_time,
            offsets=offsets,
            revive_qid=result.revive_qid,
            broker_name=self.broker.config.broker_name,
        )
        ck.record_offset = await self._write(CK_TAG, ck.to_json(), ck.revive_qid)
        if ck.record_offset < 0:
            raise PopError(1, "the broker could not record the pop checkpoint")
        self.checkpoints[ck.key] = ck
        result.start_offsets.append((topic, queue_id, str(start)))
        result.msg_offsets.append((topic, queue_id, ",".join(str(o) for o in offsets)))

    # ------------------------------------------------------------- ack and change

    def find(
        self, group: str, topic: str, queue_id: int, *, ck_offset: int, pop_time: int
    ) -> Checkpoint | None:
        return self.checkpoints.get((group, topic, queue_id, ck_offset, pop_time))

    async def ack(self, ck: Checkpoint, offset: int) -> bool:
        """Mark one message of an open checkpoint done; False if it is not in it or is done."""
        if offset not in ck.offsets:
            return False
        bit = 1 << ck.offsets.index(offset)
        if ck.acked & bit:
            return False
        ck.acked |= bit
        doc = {
            "ao": offset,
            "so": ck.start_offset,
            "c": ck.group,
            "t": ck.topic,
            "q": ck.queue_id,
            "pt": ck.pop_time,
            "bn": ck.broker_name,
        }
        await self._write(ACK_TAG, doc, ck.revive_qid)
        if ck.closed:
            self.checkpoints.pop(ck.key, None)
        return True

    async def change_invisible_time(
        self, ck: Checkpoint, offset: int, invisible_time: int
    ) -> Checkpoint:
        """``ChangeInvisibleTimeProcessor``: a new checkpoint for the one message (from now),
        then the old one acked."""
        new = Checkpoint(
            group=ck.group,
            topic=ck.topic,
            queue_id=ck.queue_id,
            start_offset=offset,
            pop_time=int(time.time() * 1000),
            invisible_time=invisible_time,
            offsets=[offset],
            revive_qid=ck.revive_qid,
            broker_name=ck.broker_name,
        )
        if new.key == ck.key:
            new.pop_time += 1  # the same millisecond: keep the two checkpoints apart
        new.record_offset = await self._write(CK_TAG, new.to_json(), new.revive_qid)
        if new.record_offset < 0:
            raise PopError(1, "the broker could not record the new checkpoint")
        self.checkpoints[new.key] = new
        await self.ack(ck, offset)
        return new

    # ------------------------------------------------------------------- revive

    def start(self) -> None:
        self._loop.start()

    async def shutdown(self) -> None:
        await self._loop.stop()
        self._commit_revive_offsets()
        for event in self._waiters.values():
            event.set()

    async def _round(self) -> None:
        await self.revive_due(int(time.time() * 1000))
        self._commit_revive_offsets()

    async def revive_due(self, now_ms: int) -> int:
        """Re-put the un-acked messages of every checkpoint past its invisible time."""
        revived = 0
        for ck in sorted(
            (c for c in self.checkpoints.values() if c.deadline <= now_ms), key=lambda c: c.deadline
        ):
            for i, offset in enumerate(ck.offsets):
                if ck.acked & (1 << i):
                    continue
                if not await self._revive_one(ck, offset):
                    return revived  # the store refused: the rest next round
                await self.ack(ck, offset)
                revived += 1
        return revived

    async def _revive_one(self, ck: Checkpoint, offset: int) -> bool:
        """Store one un-acked message again in the group's pop retry topic (in
        ``%DLQ%<group>`` past its retryMaxTimes); False when the store refused it for now."""
        popped = self._read_popped(ck, offset)
        if popped is None:
            return True  # nothing left to revive
        info, inner = popped
        props = decode_properties(info.properties)
        original = props.get("RETRY_TOPIC") or ck.topic
        props.setdefault("RETRY_TOPIC", original)
        props.setdefault("ORIGIN_MESSAGE_ID", props.get("UNIQ_KEY", ""))
        times = info.reconsume_times + 1
        sgc = self.broker.subscription_groups.find(ck.group)
        dead = times > (sgc.retry_max_times if sgc is not None else 16)
        target = DLQ_GROUP_TOPIC_PREFIX + ck.group if dead else pop_retry_topic(ck.group, original)
        reason = check_topic_name(target)
        if reason is not None:
            status = "MESSAGE_ILLEGAL"  # and no topic is made for it either
        else:
            if dead:
                self.dead_lettered += 1
            result = await self._put_revived(inner, target, times, props)
            if result.status.stored:
                self.revived += 1
                log.info(
                    "pop_message_revived",
                    group=ck.group,
                    topic=original,
                    to=target,
                    reconsume_times=times,
                )
                return True
            if not refused_for_good(result.status):
                log.warning("pop_revive_refused", topic=target, status=result.status.name)
                return False
            status, reason = result.status.name, result.remark
        self.set_aside += 1
        log.error(
            "pop_revive_message_set_aside",
            group=ck.group,
            topic=ck.topic,
            queue_id=ck.queue_id,
            queue_offset=offset,
            msg_id=offset_msg_id(self.broker.store_host, info.commit_log_offset),
            uniq_key=props.get("UNIQ_KEY"),
            to=target,
            status=status,
            reason=reason,
        )
        return True  # acked by the caller: the checkpoint closes

    def _read_popped(self, ck: Checkpoint, offset: int) -> tuple[RecordInfo, MessageInner] | None:
        """The message at ``offset`` of the checkpoint's queue; None (logged) when it is
        gone or unreadable."""
        store = self.broker.store
        cq = store.queues.get(ck.topic, ck.queue_id)
        entry = None if cq is None else next(iter(cq.entries(offset, 1)), None)
        record = None if entry is None else store.look_message_by_offset(entry[1][0])
        if record is None:
            log.warning("pop_revive_message_missing", topic=ck.topic, offset=offset)
            return None
        try:
            return inner_from_record(record)
        except RecordError:
            log.warning("pop_revive_message_unreadable", topic=ck.topic, offset=offset)
            return None

    async def _put_revived(
        self, inner: MessageInner, target: str, times: int, props: dict[str, str]
    ) -> PutResult:
        """The popped message stored again in ``target``'s one queue, one delivery older."""
        broker = self.broker
        broker.topics.create_internal(target, 1, PERM_READ | PERM_WRITE)
        inner.topic = target
        inner.queue_id = 0
        inner.reconsume_times = times
        inner.properties = encode_properties({k: v for k, v in props.items() if v})
        inner.store_host = broker.store_host
        inner.wait_store_msg_ok = False
        inner.delay_level = 0
        return await broker.store.put_message(inner)

    # -------------------------------------------------------------- long polling

    def on_arrival(self, arrival: Arrival) -> None:
        topic = arrival.topic
        event = self._waiters.pop(topic, None)
        if event is not None:
            event.set()
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "_" in topic:
            # %RETRY%<group>_<topic>: wake the pops of the topic too (a group may hold '_'
            # itself, so every suffix after an '_' is tried).
            rest = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            for i, ch in enumerate(rest):
                if ch == "_":
                    waiter = self._waiters.pop(rest[i + 1 :], None)
                    if waiter is not None:
                        waiter.set()

    async def wait_for_messages(self, topic: str, timeout_s: float) -> None:
        event = self._waiters.get(topic)
        if event is None:
            event = self._waiters[topic] = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)
