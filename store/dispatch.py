"""Dispatch: tails the commit log and builds consume queues and the index from it.

RocketMQ counterpart: ``DefaultMessageStore.ReputMessageService``, ``CommitLogDispatcher``
(``BuildConsumeQueue``, ``BuildIndex``) and the message-arrival listener used by long
polling. docs/store-format.md §7.

Every record from ``reput_from_offset`` to the commit log's end is parsed once: types NOT
and COMMIT get a consume-queue entry (tags code = hashCode of TAGS, or the deliver time in
SCHEDULE_TOPIC_XXXX), every record but ROLLBACK is indexed by ``topic#UNIQ_KEY`` and
``topic#key``, and arrival listeners are told. Re-dispatching a record is harmless (queues and
index skip what they have), which is what lets recovery start from any safe point.

Records are not read back when their append is at hand: the commit log leaves an
``Appended`` (offsets, sizes, stored properties) for each append, and when one starts exactly
at ``reput_from_offset`` it is entered from that (``dispatch_appended``), only TAGS, KEYS and
UNIQ_KEY looked up in the property bytes. Anything else (a restart, a backlog past what the
commit log keeps, SCHEDULE_TOPIC_XXXX, bytes that came without an append) is read back and
parsed (``dispatch_record``); both make the same entries.

Bytes that came without an append may end inside a record: a slave appends whatever range
its master sent (store/ha.py), and a chunk boundary means nothing to the record layout.
Dispatch consumes whole records only; a record whose header says it runs past the written
bytes of a segment still being written is waited for, not parsed. RocketMQ's reput checks
the same (``checkMessageAndReturnSize`` reads only up to the commit log's max offset).

A failure (a record that cannot be one, a queue or index file that cannot be written) stops
the queues growing, so it is never silent: it is logged with the offset, counted
(``failures``), kept in ``error`` for the store to refuse writes and for the broker's
metrics and runtime info, and retried with backoff; the first retry that gets past it logs
``dispatch_recovered`` and clears ``error``. RocketMQ marks the same state in its
``RunningFlags`` (``makeLogicsQueueError``) and refuses puts while it lasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import structlog

from codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    RECORD_HEAD,
    SCHEDULE_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    RecordError,
    RecordInfo,
    decode_properties,
    decode_record,
    index_hashes,
    tags_code,
    tags_codes,
)
from store.commit_log import Appended, CommitLog
from store.consume_queue import ConsumeQueueTable
from store.errors import CorruptRecordError
from store.index_file import IndexService

log = structlog.get_logger(__name__)

_BATCH = 1024  # records per loop turn before yielding to other work
RETRY_FIRST_S = 0.1  # after a failure, the first retry; doubled up to RETRY_MAX_S
RETRY_MAX_S = 10.0


class Arrival(NamedTuple):
    """Messages now visible in one consume queue, at consecutive queue offsets: what one
    dispatch round entered there, told to the listeners once (long polling wakes on it).

    RocketMQ's ``ReputMessageService`` calls ``arriving`` per message; a round here covers
    every record dispatch found, so a woken pull answers with all of them at once and a
    listener runs once per queue and round, not once per message.
    """

    topic: str
    queue_id: int
    first_offset: int  # queue offset of the first message
    tags_codes: list[int]  # one per message, in queue order
    store_timestamp: int  # of the last message
    raw_properties: list[bytes | str]  # as stored, one per message; parsed on demand

    @property
    def max_offset(self) -> int:
        """The queue's max offset once these are in (RocketMQ passes queueOffset + 1)."""
        return self.first_offset + len(self.tags_codes)

    def properties(self, i: int) -> dict[str, str]:
        """The parsed properties of message ``i`` of this arrival."""
        raw = self.raw_properties[i]
        return decode_properties(raw.decode(errors="replace") if isinstance(raw, bytes) else raw)


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
        # What this round entered, per queue, told to the listeners when the round ends.
        self._arrived: dict[tuple[str, int], Arrival] = {}
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._appended: deque[Appended] = deque()
        commit_log.appended = self._appended
        # Health: the last failure while it lasts, and how many there were in all.
        self.error: str | None = None
        self.error_offset = -1
        self.failing_since = 0.0  # time.time() of the first failure of the current run
        self.failures = 0
        self._stopped = asyncio.Event()

    @property
    def behind_bytes(self) -> int:
        """Commit-log bytes not dispatched yet."""
        return max(0, self.commit_log.max_offset - self.reput_from_offset)

    @property
    def healthy(self) -> bool:
        return self.error is None

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
                self._arrive(
                    Arrival(
                        topic,
                        info.queue_id,
                        info.queue_offset,
                        [code],
                        info.store_timestamp,
                        [info.properties],
                    )
                )
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

    def dispatch_appended(self, appended: Appended) -> None:
        """Enter the records of one append from what the append knew about them: the same
        entries ``dispatch_record`` makes from the records read back."""
        tran = appended.sys_flag & TRANSACTION_TYPE_MASK
        properties = appended.properties
        ts = appended.store_timestamp
        if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            # the tags code of each record (codec.hashing.tags_codes: what
            # dispatch_record's _tags_code gives outside SCHEDULE_TOPIC_XXXX)
            codes = tags_codes(properties)
            topic = appended.topic
            queue_id = appended.queue_id
            first = appended.queue_offset
            cq = self.queues.find_or_create(topic, queue_id)
            entered = cq.put_many(appended.offsets, appended.sizes, codes, first)
            self.logics_msg_timestamp = ts
            if self.listeners:
                if all(entered):
                    self._arrive(Arrival(topic, queue_id, first, codes, ts, list(properties)))
                else:  # some were in the queue already (a replay): only the new ones
                    for i, code in enumerate(codes):
                        if entered[i]:
                            self._arrive(
                                Arrival(topic, queue_id, first + i, [code], ts, [properties[i]])
                            )
        if self.index is None or tran == TRANSACTION_ROLLBACK_TYPE:
            return
        # topic#UNIQ_KEY and topic#key for each key of KEYS, hashed, with their records'
        # offsets: what build_index enters for each record in turn
        hashes, offsets = index_hashes(appended.topic_bytes, properties, appended.offsets)
        if hashes:
            self.index.put_hashes(hashes, offsets, ts)

    def _arrive(self, arrival: Arrival) -> None:
        """Add messages just entered to this round's arrivals in their queue."""
        key = (arrival.topic, arrival.queue_id)
        held = self._arrived.get(key)
        if held is not None and held.max_offset == arrival.first_offset:
            held.tags_codes.extend(arrival.tags_codes)
            held.raw_properties.extend(arrival.raw_properties)
            self._arrived[key] = held._replace(store_timestamp=arrival.store_timestamp)
            return
        if held is not None:  # not adjacent (a replay skipped some): tell the first apart
            self._notify(held)
        self._arrived[key] = arrival

    def _notify(self, arrival: Arrival) -> None:
        for listener in self.listeners:
            listener(arrival)

    def _notify_arrivals(self) -> None:
        """End of a round: each queue's arrivals to the listeners, once."""
        arrived = self._arrived
        if arrived:
            self._arrived = {}
            for arrival in arrived.values():
                self._notify(arrival)

    def dispatch_available(self, budget: int = _BATCH) -> int:
        """``_dispatch_available``, then the round's arrivals told to the listeners (also
        when it fails part-way: what was entered is visible)."""
        try:
            return self._dispatch_available(budget)
        finally:
            self._notify_arrivals()

    def _dispatch_available(self, budget: int = _BATCH) -> int:
        """Dispatch up to ``budget`` records (a little more to finish an append); returns how
        many were dispatched.

        Records whose append is in ``commit_log.appended`` are entered from there; the others
        (after a restart, past the backlog the commit log keeps, delayed messages) are read
        back from the log.
        """
        cl = self.commit_log
        appended = self._appended
        done = 0
        while done < budget and self.reput_from_offset < cl.max_offset:
            # segments below the commit log's minimum were deleted: skip past them
            self.reput_from_offset = max(self.reput_from_offset, cl.min_offset)
            reput = self.reput_from_offset
            while appended and appended[0].start < reput:
                appended.popleft()  # read back from the log already (or cut by recovery)
            if appended and appended[0].start == reput:
                batch = appended.popleft()
                self.dispatch_appended(batch)
                self.reput_from_offset = batch.end
                done += len(batch.offsets)
                continue
            stop = appended[0].start if appended else -1
            read, go_on = self._dispatch_from_log(reput, stop, budget - done)
            done += read
            if not go_on:
                break
        return done

    def _dispatch_from_log(self, reput: int, stop: int, budget: int) -> tuple[int, bool]:
        """Dispatch up to ``budget`` records read back from the segment holding ``reput``,
        up to the offset ``stop`` (where an append's own account takes over; -1: none).

        Returns how many were dispatched and whether to go on: False when nothing more is
        readable yet (the log ends there, or inside a record still arriving).
        """
        got = self.commit_log.data_from(reput)
        if got is None:
            return 0, False
        view, mf = got
        done = 0
        try:
            pos = 0
            while done < budget and pos + 8 <= len(view):
                if reput + pos == stop:
                    break  # the rest comes from the append's own account
                total, magic = RECORD_HEAD.unpack_from(view, pos)
                if magic == BLANK_MAGIC_CODE:
                    pos = mf.file_bytes - (reput - mf.start_offset)
                    break
                if (
                    magic == MESSAGE_MAGIC_CODE
                    and pos + total > len(view)
                    and mf.wrote_position < mf.file_bytes
                    and total <= mf.file_bytes - (reput - mf.start_offset) - pos
                ):
                    # The record has not all arrived (a slave appends byte ranges): it is
                    # dispatched once it has. In a full segment, or past its end, it never
                    # will be: that is a corrupt record, and decode says so.
                    self.reput_from_offset = reput + pos
                    return done, False
                try:
                    info = decode_record(view, pos)
                except RecordError as exc:
                    raise CorruptRecordError(reput + pos, str(exc)) from None
                self.dispatch_record(info, notify=True)
                pos += info.total_size
                done += 1
            if pos == 0 and len(view) < 8:
                # Fewer bytes than a record header up to the write position: nothing to
                # dispatch here yet (or ever, in a segment that is full): move on or stop.
                if mf.wrote_position < mf.file_bytes:
                    return done, False
                pos = len(view)
            self.reput_from_offset = reput + pos
        finally:
            view.release()
            mf.release()
        return done, True

    # ---------------------------------------------------------------------- service

    def start(self) -> None:
        self._stopping = False
        self._stopped.clear()
        self._task = asyncio.create_task(self._run(), name="store-dispatch")
        self._ticker = asyncio.create_task(self._tick(), name="store-dispatch-tick")

    def dispatch_checked(self) -> int:
        """``dispatch_available`` that records a failure (and a recovery) instead of raising:
        what the service loop and shutdown run. Returns how many records were dispatched,
        -1 on a failure."""
        try:
            done = self.dispatch_available()
        except Exception as exc:  # any failure stops the queues from growing: record it
            self.record_failure(exc)
            return -1
        if self.error is not None:
            log.warning(
                "dispatch_recovered",
                commit_log_offset=self.reput_from_offset,
                failed_for_s=round(time.time() - self.failing_since, 3),
                failures=self.failures,
            )
            self.error = None
            self.error_offset = -1
        return done

    def record_failure(self, exc: Exception) -> None:
        """Record a failure to dispatch at ``reput_from_offset`` (logged, counted, kept in
        ``error``); the next successful round clears it."""
        self.failures += 1
        reason = f"{type(exc).__name__}: {exc}"
        if self.error is None:
            self.failing_since = time.time()
            self.error_offset = self.reput_from_offset
            self.error = reason
            log.error(
                "dispatch_failed",
                commit_log_offset=self.reput_from_offset,
                behind_bytes=self.behind_bytes,
                error=reason,
                exc_info=exc,
            )
        else:
            self.error = reason
            log.warning(
                "dispatch_retry_failed",
                commit_log_offset=self.reput_from_offset,
                failures=self.failures,
                error=reason,
            )

    async def _run(self) -> None:
        retry_s = RETRY_FIRST_S
        while True:
            self._wakeup.clear()
            done = self.dispatch_checked()
            if done < 0:
                if self._stopping:
                    return
                # Appends keep waking dispatch; a retry waits its turn all the same.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), retry_s)
                retry_s = min(retry_s * 2, RETRY_MAX_S)
                continue
            retry_s = RETRY_FIRST_S
            if done >= _BATCH:
                await asyncio.sleep(0)  # more is waiting: let other work in, then go on
                continue
            if self._stopping:
                return
            await self._wakeup.wait()

    async def _tick(self) -> None:
        """RocketMQ polls every 1 ms; appends wake dispatch instead, and this wakes it every
        second for bytes that arrive without an append (replication). One timer for the
        service rather than a timeout around every wait: dispatch waits once per append."""
        while True:
            await asyncio.sleep(1.0)
            self._wakeup.set()

    async def shutdown(self) -> None:
        """Dispatch what is left, then stop. A failure is logged and left for recovery at
        the next start (which dispatches again from the queues' end), never raised."""
        self._stopping = True
        self._stopped.set()
        self._wakeup.set()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        if self._task is not None:
            await self._task
            self._task = None
        while self.dispatch_checked() > 0:
            pass
