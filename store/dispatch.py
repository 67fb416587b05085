"""Dispatch: tails the commit log and builds consume queues and the index from it.

RocketMQ counterpart: ``DefaultMessageStore.ReputMessageService``, ``CommitLogDispatcher``
(``BuildConsumeQueue``, ``BuildIndex``) and the message-arrival listener used by long
polling. docs/store-format.md §7.

Every record from ``reput_from_offset`` to the commit log's end is parsed once: types NOT
and COMMIT get a consume-queue entry (tags code = hashCode of TAGS, or the deliver time in
SCHEDULE_TOPIC_XXXX), every record but ROLLBACK is indexed by ``topic#UNIQ_KEY`` and
``topic#key``, and arrival listeners are told. Re-dispatching a record is harmless (queues and
index skip what they have), which is what lets recovery start from any safe point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

import structlog

from store.commit_log import CommitLog
from store.consume_queue import ConsumeQueueTable
from store.errors import CorruptRecordError
from store.index_file import IndexService
from store.message_codec import (
    BLANK_MAGIC_CODE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    RecordError,
    RecordInfo,
    decode_properties,
    decode_record,
    read_int,
    tags_code,
)

log = structlog.get_logger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_BATCH = 1024  # records per loop turn before yielding to other work


class Arrival(NamedTuple):
    """A message now visible in its consume queue (long polling wakes on it)."""

    topic: str
    queue_id: int
    max_offset: int  # the queue's new max: the message's queue offset + 1, as RocketMQ passes
    tags_code: int
    store_timestamp: int
    properties: dict[str, str]


ArrivalListener = Callable[[Arrival], None]


class DispatchService:
    """Builds consume queues and index entries from the commit log."""

    def __init__(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        delay_levels_ms: tuple[int, ...],
    ) -> None:
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.reput_from_offset = 0
        self.logics_msg_timestamp = 0  # store time of the last record entered in a queue
        self.listeners: list[ArrivalListener] = []
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @property
    def behind_bytes(self) -> int:
        """Commit-log bytes not dispatched yet."""
        return max(0, self.commit_log.max_offset - self.reput_from_offset)

    def wake(self) -> None:
        self._wakeup.set()

    # -------------------------------------------------------------------------- work

    def dispatch_record(self, info: RecordInfo, *, notify: bool = False) -> None:
        """Enter one record into its consume queue and the index."""
        props = decode_properties(info.properties)
        tran = info.sys_flag & TRANSACTION_TYPE_MASK
        topic = info.topic
        if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            code = self._tags_code(topic, props, info.store_timestamp)
            cq = self.queues.find_or_create(topic, info.queue_id)
            entered = cq.put(info.commit_log_offset, info.total_size, code, info.queue_offset)
            self.logics_msg_timestamp = info.store_timestamp
            if entered and notify and self.listeners:
                arrival = Arrival(
                    topic,
                    info.queue_id,
                    info.queue_offset + 1,
                    code,
                    info.store_timestamp,
                    props,
                )
                for listener in self.listeners:
                    listener(arrival)
        if self.index is not None:
            self.index.build_index(
                topic,
                props.get("KEYS"),
                props.get("UNIQ_KEY"),
                info.commit_log_offset,
                info.store_timestamp,
                tran,
            )

    def _tags_code(self, topic: str, props: dict[str, str], store_timestamp: int) -> int:
        if topic == SCHEDULE_TOPIC:
            level_text = props.get("DELAY")
            if level_text and level_text.isdigit() and int(level_text) > 0:
                level = min(int(level_text), len(self.delay_levels_ms))
                return store_timestamp + self.delay_levels_ms[level - 1]
        return tags_code(props.get("TAGS"))

    def dispatch_available(self, budget: int = _BATCH) -> int:
        """Dispatch up to ``budget`` records; returns how many were dispatched."""
        cl = self.commit_log
        done = 0
        while done < budget and self.reput_from_offset < cl.max_offset:
            # segments below the commit log's minimum were deleted: skip past them
            self.reput_from_offset = max(self.reput_from_offset, cl.min_offset)
            got = cl.data_from(self.reput_from_offset)
            if got is None:
                break
            view, mf = got
            try:
                pos = 0
                while done < budget and pos + 8 <= len(view):
                    if read_int(view, pos + 4) == BLANK_MAGIC_CODE:
                        pos = mf.file_bytes - (self.reput_from_offset - mf.start_offset)
                        break
                    try:
                        info = decode_record(view, pos)
                    except RecordError as exc:
                        raise CorruptRecordError(self.reput_from_offset + pos, str(exc)) from None
                    self.dispatch_record(info, notify=True)
                    pos += info.total_size
                    done += 1
                if pos == 0 and len(view) < 8:
                    # Fewer bytes than a record header up to the write position: nothing to
                    # dispatch here yet (or ever, in a segment that is full): move on or stop.
                    if mf.wrote_position < mf.file_bytes:
                        break
                    pos = len(view)
                self.reput_from_offset += pos
            finally:
                view.release()
                mf.release()
        return done

    # ---------------------------------------------------------------------- service

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="store-dispatch")

    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            done = self.dispatch_available()
            if done >= _BATCH:
                await asyncio.sleep(0)  # more is waiting: let other work in, then go on
                continue
            if self._stopping:
                return
            # RocketMQ polls every 1 ms; appends wake us instead, the timeout is a safety net
            # for bytes that arrive without an append (replication).
            try:
                async with asyncio.timeout(1.0):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    async def shutdown(self) -> None:
        """Dispatch what is left, then stop."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None
        while self.dispatch_available():
            pass
