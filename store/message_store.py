"""``MessageStore``: the store facade the broker uses.

RocketMQ counterpart: ``DefaultMessageStore`` (``load``, ``start``, ``shutdown``,
``putMessage``, ``putMessages``, ``getMessage``, ``getMaxOffsetInQueue``,
``getOffsetInQueueByTime``, ``lookMessageByOffset``, ``queryMessage``) with its recovery.

Layout under ``root_dir``: ``commitlog/``, ``consumequeue/<topic>/<queueId>/``, ``index/``,
``checkpoint``, ``abort`` (present while running: at load it means the last exit was a
crash), ``lock`` (held by the running store) and ``torn/`` (tails cut by recovery).

Load order (store-format.md §8): lock; segments, consume queues, checkpoint, index; recover
consume queues; recover the commit log (normally, or from the checkpoint after a crash,
re-dispatching); cut consume queues and index past the recovered end; rebuild the queue
offset table; dispatch resumes from the furthest point queues and index both reached, so
deleted consume queues or index files are rebuilt from the commit log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

import structlog

from codec import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageBatch,
    MessageInner,
    RecordInfo,
    decode_properties,
    encode_properties,
)
from store.checkpoint import Checkpoint
from store.commit_log import CommitLog
from store.config import FlushDiskType, StoreConfig
from store.consume_queue import ConsumeQueue, ConsumeQueueTable
from store.dispatch import ArrivalListener, DispatchService
from store.errors import StoreLockedError
from store.flush import CommitLogFlusher, QueueFlusher
from store.index_file import IndexService
from store.results import (
    GetMessageStatus,
    GetResult,
    PutMessageStatus,
    PutResult,
    QueryResult,
)
from store.retention import RetentionReport, RetentionService


class SyncReplication(Protocol):
    """What a SYNC_MASTER's put waits on (``HAService``; the store does not import it, the
    broker hands it over): whether a slave can take writes, and a slave's confirmation."""

    def slave_ok(self) -> bool: ...

    async def wait_for_slave(self, offset: int, timeout_s: float) -> bool: ...


log = structlog.get_logger(__name__)

# How many records past the dispatch position ``record_at`` steps through at most (a few ms).
MAX_UNDISPATCHED_WALK = 10_000

# Transfer caps per pull (maxTransferCountOnMessageInMemory / ...BytesOnMessageInMemory and
# the on-disk pair) and the share of RAM that counts as "in memory".
MAX_TRANSFER_COUNT_IN_MEMORY = 32
MAX_TRANSFER_BYTES_IN_MEMORY = 256 * 1024
MAX_TRANSFER_COUNT_ON_DISK = 8
MAX_TRANSFER_BYTES_ON_DISK = 64 * 1024
MAX_QUERY_NUM = 64  # maxMsgsNumBatch
RECOVERY_PROGRESS_S = 2.0  # how often a long load says how far it got
_FILLER_SIZE = 0x7FFFFFFF

TagFilter = Callable[[int], bool]
# Decides on the stored record itself (SQL92 on its properties): ``isMatchedByCommitLog``.
RecordFilter = Callable[[memoryview], bool]

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

# Store directories this process has locked (see _take_lock).
_LOCKED_ROOTS: set[str] = set()


class RecoveryProgress:
    """How far a load has got: the phase (``verify_commit_log``, then ``dispatch``), the
    commit-log offset reached, records re-dispatched, time spent and an estimate of the time
    left. It logs ``store_recovery_progress`` at most every ``RECOVERY_PROGRESS_S``; the
    broker reads it (from its event loop, while the load runs on a thread) for ``aerolite
    ping`` and its metrics. Plain attributes, each written by one thread: a reader may see a
    figure a moment old, never a torn one."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.started = time.monotonic()
        self.phase = "verify_commit_log"
        self.phase_started = self.started
        self.phase_from = 0
        self.offset = 0
        self.records = 0  # records re-dispatched to the consume queues and index
        self.last = self.started

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def percent(self) -> float:
        return round(100 * self.offset / self.end, 1) if self.end else 100.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left in this phase at the pace it has gone so far (None: no pace yet)."""
        done = self.offset - self.phase_from
        spent = time.monotonic() - self.phase_started
        if done <= 0 or spent <= 0:
            return None
        return round((self.end - self.offset) * spent / done, 1)

    def describe(self) -> str:
        """One line for a person: ``dispatch 42.0% of 1,073,741,824 bytes, 120,000 records
        re-dispatched, 8.1 s so far, about 11.0 s left``."""
        eta = self.eta_s
        left = f", about {eta} s left" if eta is not None else ""
        return (
            f"{self.phase} {self.percent}% of {self.end:,} bytes, {self.records:,} records "
            f"re-dispatched, {self.elapsed_s:.1f} s so far{left}"
        )

    def _report(self, phase: str, commit_log_offset: int) -> None:
        if phase != self.phase:
            self.phase, self.phase_started, self.phase_from = (
                phase,
                time.monotonic(),
                commit_log_offset,
            )
        self.offset = commit_log_offset
        now = time.monotonic()
        if now - self.last >= RECOVERY_PROGRESS_S:
            self.last = now
            log.info(
                "store_recovery_progress",
                phase=phase,
                commit_log_offset=commit_log_offset,
                commit_log_max_offset=self.end,
                percent=self.percent,
                records_redispatched=self.records,
                elapsed_s=round(now - self.started, 1),
                eta_s=self.eta_s,
            )

    def verifying(self, commit_log_offset: int) -> None:
        self._report("verify_commit_log", commit_log_offset)

    def dispatching(self, commit_log_offset: int, records: int) -> None:
        self.records += records
        self._report("dispatch", commit_log_offset)


def _total_ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - non-POSIX
        return 8 << 30


def _outside_queue(queue_offset: int, min_offset: int, max_offset: int) -> GetResult | None:
    """The answer to a read at ``queue_offset`` that the queue's bounds refuse (RocketMQ
    ``getMessage``'s statuses and next offsets), or None for an offset in the queue."""
    if max_offset == 0:
        return GetResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if queue_offset < min_offset:
        return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if queue_offset == max_offset:
        return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, queue_offset, min_offset, max_offset)
    if queue_offset > max_offset:
        next_offset = min_offset if min_offset == 0 else max_offset
        return GetResult(
            GetMessageStatus.OFFSET_OVERFLOW_BADLY, next_offset, min_offset, max_offset
        )
    return None


class MessageStore:
    """The message store of one broker.

    Args:
        clock: seconds since the epoch, for retention (tests pass a fake one).
        disk_used_ratio: the file system's used share, for retention (tests fake it).
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], float] = time.time,
        disk_used_ratio: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        root = config.root_dir
        self.root = root
        self.commit_log = CommitLog(
            root / "commitlog",
            config.commit_log_file_bytes,
            config.max_message_bytes,
            root / "torn",
            preallocate=config.warm_mapped_file_enable,
        )
        self.queues = ConsumeQueueTable(root / "consumequeue", config.consume_queue_file_bytes)
        self.index: IndexService | None = (
            IndexService(root / "index", config.max_hash_slot_num, config.max_index_num)
            if config.message_index_enable
            else None
        )
        self.dispatch = DispatchService(
            self.commit_log, self.queues, self.index, config.delay_levels_ms
        )
        self.retention = RetentionService(
            self.commit_log,
            self.queues,
            self.index,
            config,
            clock=clock,
            disk_used_ratio=disk_used_ratio,
        )
        # The disk guard also runs before the commit log takes more disk.
        self.commit_log.space_check = self.retention.space_refusal
        self.checkpoint: Checkpoint | None = None
        # While load() runs: how far it has got (None before and after).
        self.recovery: RecoveryProgress | None = None
        self.commit_log_flusher: CommitLogFlusher | None = None
        self.queue_flusher: QueueFlusher | None = None
        self._lock_fd: int | None = None
        self._lock_key = ""
        self._running = False
        self._memory_bytes = _total_ram_bytes() * config.access_message_in_memory_max_ratio // 100
        self.last_exit_ok = True
        # Told after every append (the HA service wakes its slaves' streams).
        self.append_listeners: list[Callable[[], None]] = []
        # SYNC_MASTER: puts that wait (WAIT=true) also wait for a slave to have the bytes.
        self.sync_replication: SyncReplication | None = None

    # ----------------------------------------------------------------------- lifecycle

    def _take_lock(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        key = str(self.root.resolve())
        # Checked before the file is opened: closing any descriptor of the lock file drops
        # this process's POSIX lock on it, so a refused second open must never touch it.
        if key in _LOCKED_ROOTS:
            raise StoreLockedError(f"another store is running on {self.root}")
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # A POSIX record lock on byte 0 is what RocketMQ's FileChannel.tryLock(0, 1)
            # takes, so a Java broker and we keep each other out.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreLockedError(f"another store is running on {self.root}") from None
        try:
            os.pwrite(fd, b"lock", 0)  # the bytes Java writes there
        except OSError as exc:  # a full disk: the lock is the POSIX lock, not these bytes
            log.warning("store_lock_file_not_written", path=str(self.root / "lock"), error=str(exc))
        _LOCKED_ROOTS.add(key)
        self._lock_fd = fd
        self._lock_key = key

    def load(self) -> None:
        """Open and recover the store (blocking; before the broker opens its port).

        Raises:
            StoreLockedError: another store holds the directory.
            StoreLoadError: a file on disk is not what the store expects.
        """
        self._take_lock()
        started = time.monotonic()
        abort = self.root / "abort"
        self.last_exit_ok = not abort.exists()
        self.commit_log.files.load()
        # A large store takes seconds to verify and dispatch: say so, then how far it got
        # every few seconds, then how long it took (store_loaded).
        log.info(
            "store_recovering",
            root=str(self.root),
            last_exit_ok=self.last_exit_ok,
            commit_log_segments=len(self.commit_log.files.files),
            commit_log_max_offset=self.commit_log.max_offset,
        )
        self.recovery = progress = RecoveryProgress(self.commit_log.max_offset)
        self.commit_log.recovery_progress = progress.verifying
        self.queues.load()
        self.checkpoint = checkpoint = Checkpoint(self.root / "checkpoint")
        index_covered = self._load_index(checkpoint)
        for cq in self.queues:
            cq.recover()
        valid_end, redispatch_from = self._recover_commit_log(checkpoint)
        self._cut_queues_and_index(valid_end, redispatch_from)
        self._rebuild_queue_offsets()
        self.dispatch.reput_from_offset = self._dispatch_start(index_covered, redispatch_from)
        self.commit_log.recovery_progress = None
        self._catch_up(progress)
        self._rebuild_queue_offsets()
        log.info(
            "store_loaded",
            root=str(self.root),
            last_exit_ok=self.last_exit_ok,
            commit_log_min_offset=self.commit_log.min_offset,
            commit_log_max_offset=self.commit_log.max_offset,
            consume_queues=len(self.queues.queues),
            records_redispatched=progress.records,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        self.recovery = None

    def _load_index(self, checkpoint: Checkpoint) -> int:
        """Map the index files; returns the commit-log offset the surviving ones cover,
        before recovery re-dispatches anything: after a crash the files newer than the
        checkpoint are gone, and dispatch must go back this far to rebuild them (re-dispatch
        is idempotent)."""
        if self.index is None:
            return 0
        self.index.load(self.last_exit_ok, checkpoint.index_msg_timestamp)
        return self.index.max_phy_offset

    def _recover_commit_log(self, checkpoint: Checkpoint) -> tuple[int, int | None]:
        """Verify the commit log as the last exit requires; returns its valid end and, after
        a crash, the offset of the checkpoint's safe segment, from which to re-dispatch."""
        check_crc = self.config.check_crc_on_recover
        if self.last_exit_ok:
            return self.commit_log.recover_normally(check_crc=check_crc), None
        safe = checkpoint.min_timestamp(include_index=self.config.message_index_safe)
        return self.commit_log.recover_abnormally(check_crc=check_crc, safe_timestamp=safe)

    def _cut_queues_and_index(self, valid_end: int, redispatch_from: int | None) -> None:
        """Drop what queues and index hold past the commit log's valid end, or below its
        minimum; after a crash, the queues' entries for the records re-dispatched from
        ``redispatch_from`` on as well."""
        if not self.commit_log.files.files:
            for cq in self.queues:
                cq.destroy()  # no commit log: nothing the queues point at exists
        # kill -9 can land inside the write of a queue entry (offset and size written, the
        # tags code not), and a scan cannot tell that entry from a whole one: after a crash
        # the entries of every record dispatch is about to replay are written again.
        queues_end = valid_end if redispatch_from is None else min(valid_end, redispatch_from)
        for cq in self.queues:
            if cq.max_physic_offset > queues_end:
                cq.truncate_dirty(queues_end)
            cq.correct_min_offset(self.commit_log.min_offset)
        if self.index is not None:
            self.index.truncate(valid_end)

    def _dispatch_start(self, index_covered: int, redispatch_from: int | None) -> int:
        """Where dispatch resumes after recovery: the earliest point anything may be
        missing, among the end of the queues, what the index covers and, after a crash, the
        checkpoint's safe segment. Records are dispatched in order and queues and index skip
        what they hold."""
        start = self.queues.max_physic_offset
        if redispatch_from is not None:
            start = min(start, redispatch_from)
        if self.index is not None:
            start = min(start, index_covered, self.index.max_phy_offset)
        return max(self.commit_log.min_offset, start)

    def _catch_up(self, progress: RecoveryProgress) -> None:
        """Dispatch everything now, so the store opens with consistent queues and index."""
        try:
            self.dispatch_all(progress.dispatching)
        except OSError as exc:
            if exc.errno not in _DISK_FULL_ERRNOS:
                raise
            # No room for a queue's or the index's next bytes (DiskFullError), or for a new
            # queue's directory. The store opens all the same and serves what its queues
            # hold: dispatch retries once it runs, and writes are refused until it gets past
            # this (a store that cannot start serves nothing).
            self.dispatch.record_failure(exc)

    def _rebuild_queue_offsets(self) -> None:
        self.commit_log.queue_offsets = {
            f"{cq.topic}-{cq.queue_id}": cq.max_offset for cq in self.queues if cq.max_offset
        }

    async def start(self) -> None:
        """Start flushing and dispatching; marks the store as running (``abort`` file)."""
        assert self.checkpoint is not None, "load() first"
        self.commit_log_flusher = CommitLogFlusher(self.commit_log, self.config, self.checkpoint)
        self.queue_flusher = QueueFlusher(
            self.queues,
            self.index,
            self.checkpoint,
            self.config,
            lambda: self.dispatch.logics_msg_timestamp,
        )
        self.commit_log.on_append = self._on_append
        try:
            (self.root / "abort").touch()
        except OSError as exc:
            # Not even an empty file fits: a crash now would be recovered as a clean exit
            # (the last segments verified, not the checkpoint's). Say so, and serve.
            log.error(  # noqa: TRY400 - the error says it all (ENOSPC): no traceback
                "store_abort_file_failed", path=str(self.root / "abort"), error=str(exc)
            )
        self.commit_log_flusher.start()
        self.queue_flusher.start()
        self.dispatch.start()
        self.retention.start()
        self._running = True

    def _on_append(self) -> None:
        self.dispatch.wake()
        if self.commit_log_flusher is not None:
            self.commit_log_flusher.wake()
        for listener in self.append_listeners:
            listener()

    async def shutdown(self) -> None:
        """Stop writes, finish dispatch, flush everything, remove ``abort``. Idempotent."""
        if not self._running:
            self._release_files()
            return
        self._running = False
        await self.retention.shutdown()
        await self.dispatch.shutdown()
        flushed = True
        if self.commit_log_flusher is not None:
            flushed = await self.commit_log_flusher.shutdown()
        if self.queue_flusher is not None:
            flushed = await self.queue_flusher.shutdown() and flushed
        if flushed:
            with contextlib.suppress(FileNotFoundError):
                (self.root / "abort").unlink()
        # else the abort file stays: the next start recovers from the checkpoint, as after
        # a crash, rather than trust files whose final flush failed.
        self._release_files()
        log.info("store_stopped", root=str(self.root), clean=flushed)

    def _release_files(self) -> None:
        if self.index is not None:
            self.index.shutdown()
        self.queues.close()
        self.commit_log.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
            self.checkpoint = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            _LOCKED_ROOTS.discard(self._lock_key)

    async def __aenter__(self) -> Self:
        self.load()
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    # ----------------------------------------------------------------------------- put

    def _refusal(self) -> PutResult | None:
        if not self._running:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store not running")
        if self.retention.disk_full and self.retention.still_full():
            return PutResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=self.retention.refusal_remark()
            )
        if self.dispatch.error is not None:
            # Consume queues no longer grow: an acknowledged message would not be readable.
            return PutResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark="store dispatch failed at commit-log offset "
                f"{self.dispatch.error_offset} ({self.dispatch.error}), writes refused",
            )
        return None

    async def put_message(self, msg: MessageInner) -> PutResult:
        """Store one message; under SYNC_FLUSH (and WAIT) return once it is durable.

        A message with a ``delay_level`` (and no transaction type other than commit) is
        parked in SCHEDULE_TOPIC_XXXX (``schedule_properties``); a caller that holds the
        properties as a dict already may park it itself and pass ``delay_level`` 0.
        """
        refused = self._refusal()
        if refused is not None:
            return refused
        if msg.delay_level > 0 and msg.sys_flag & TRANSACTION_TYPE_MASK in (
            TRANSACTION_NOT_TYPE,
            TRANSACTION_COMMIT_TYPE,
        ):
            props = decode_properties(msg.properties)
            topic, queue_id, level = self.schedule_properties(
                props, msg.topic, msg.queue_id, msg.delay_level
            )
            msg = dataclasses.replace(
                msg,
                topic=topic,
                queue_id=queue_id,
                properties=encode_properties(props),
                delay_level=level,
            )
        result = self.commit_log.put(msg)
        return await self._after_put(result, msg.wait_store_msg_ok)

    def schedule_properties(
        self, props: dict[str, str], topic: str, queue_id: int, delay_level: int
    ) -> tuple[str, int, int]:
        """``CommitLog.asyncPutMessage`` for a delayed message: it is parked in queue
        level-1 of SCHEDULE_TOPIC_XXXX (levels above the configured ones are clamped), its
        real topic and queue kept in REAL_TOPIC / REAL_QID, which this sets in ``props``
        with the clamped DELAY. Returns (topic, queue id, level) to store it under; dispatch
        gives it the deliver time as its tags code and the schedule service brings it back
        when that time comes."""
        level = min(delay_level, len(self.config.delay_levels_ms))
        props[PROPERTY_DELAY] = str(level)
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, level - 1, level

    async def put_messages(self, batch: MessageBatch) -> PutResult:
        """Store a batch in one queue with consecutive offsets."""
        refused = self._refusal()
        if refused is not None:
            return refused
        result = self.commit_log.put_batch(batch)
        return await self._after_put(result, batch.wait_store_msg_ok)

    async def _after_put(self, result: PutResult, wait: bool) -> PutResult:
        append = result.append
        if append is None or not wait:
            return result
        end = append.commit_log_offset + append.wrote_bytes
        if (
            self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
            and self.commit_log_flusher is not None
            and not await self.commit_log_flusher.wait_durable(end)
        ):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        ha = self.sync_replication
        if ha is not None:
            # SYNC_MASTER (CommitLog.handleHA): acknowledged once a slave has the bytes.
            if not ha.slave_ok():
                result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            elif not await ha.wait_for_slave(end, self.config.sync_flush_timeout_ms / 1000):
                result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return result

    # ---------------------------------------------------------------------------- read

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_commit_log_offset(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.queues.get(topic, queue_id)
        entry = cq.entry(queue_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def get_offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, *, nearest: bool = True
    ) -> int:
        """``ConsumeQueue.offset_by_time``: the nearest message (SEARCH_OFFSET_BY_TIMESTAMP,
        as RocketMQ 4.9), or with ``nearest`` False the first stored at or after the time."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp_ms, self.commit_log.store_timestamp, nearest=nearest)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the oldest message of the queue still present; -1 if none."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return -1
        for _k, (offset, size, _tags) in cq.entries(cq.min_offset, 1):
            return self.commit_log.store_timestamp(offset, size)
        return -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset; -1 if it is not there."""
        cq = self.queues.get(topic, queue_id)
        entry = cq.entry(queue_offset) if cq is not None else None
        if entry is None:
            return -1
        return self.commit_log.store_timestamp(entry[0], entry[1])

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Whether the message at ``queue_offset`` is further than 40 % of RAM behind the
        commit log's end (RocketMQ ``checkInDiskByConsumeOffset``); False if absent."""
        cq = self.queues.get(topic, queue_id)
        entry = cq.entry(queue_offset) if cq is not None else None
        if entry is None:
            return False
        return self.commit_log.max_offset - entry[0] > self._memory_bytes

    def delete_topic(self, topic: str) -> int:
        """Drop a deleted topic's consume queues (its records age out of the commit log)."""
        for key in [k for k in self.commit_log.queue_offsets if k.rpartition("-")[0] == topic]:
            del self.commit_log.queue_offsets[key]
        removed = self.queues.remove_topic(topic)
        log.info("topic_queues_deleted", topic=topic, queues=removed)
        return removed

    def record_at(self, commit_log_offset: int) -> RecordInfo | None:
        """The record at a commit-log offset a client named (VIEW_MESSAGE_BY_ID, the ACL's
        look at a stored message's topic), None unless a record really starts there.

        Any bytes decode as some record, and a message body can carry a forged one naming any
        topic, with a body CRC computed to match; so neither the decode nor the CRC proves
        much. A record does start there if the consume-queue entry its header names (topic,
        queue, queue offset) points at this offset with this size, or, for a record not
        dispatched yet, if stepping from where dispatch stands lands on it. RocketMQ decodes
        whatever lies at the offset.
        """
        if commit_log_offset < 0:
            return None
        info = self.commit_log.record_info(commit_log_offset)
        if info is None or info.commit_log_offset != commit_log_offset:
            return None
        cq = self.queues.get(info.topic, info.queue_id)
        entry = cq.entry(info.queue_offset) if cq is not None else None
        if entry is not None:
            return info if entry[:2] == (commit_log_offset, info.total_size) else None
        reput = self.dispatch.reput_from_offset
        if commit_log_offset >= reput and self.commit_log.walks_to(
            reput, commit_log_offset, MAX_UNDISPATCHED_WALK
        ):
            return info
        return None

    def look_message_by_offset(
        self, commit_log_offset: int, *, verify: bool = False
    ) -> bytes | None:
        """The whole stored record at a commit-log offset; with ``verify`` (an offset a client
        named) only if a record really starts there (``record_at``)."""
        info = (
            self.record_at(commit_log_offset)
            if verify
            else self.commit_log.record_info(commit_log_offset)
        )
        if info is None:
            return None
        got = self.commit_log.read(commit_log_offset, info.total_size)
        if got is None:
            return None
        view, mf = got
        try:
            return bytes(view)
        finally:
            view.release()
            mf.release()

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> QueryResult:
        """Records whose key (or UNIQ_KEY) hashes like ``key`` within the time range; the
        caller keeps those that are of ``topic`` and carry ``key`` (hashes collide)."""
        if self.index is None:
            return QueryResult([], 0, 0)
        found = self.index.query(topic, key, min(max_num, MAX_QUERY_NUM), begin_ms, end_ms)
        records = []
        for offset in found.offsets:
            record = self.look_message_by_offset(offset)
            if record is not None:
                records.append(record)
        return QueryResult(
            records, found.index_last_update_timestamp, found.index_last_update_phy_offset
        )

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_count: int,
        tag_filter: TagFilter | None = None,
        *,
        record_filter: RecordFilter | None = None,
    ) -> GetResult:
        """Messages of a queue from ``queue_offset`` (RocketMQ ``getMessage``).

        Views of the stored records are returned held; call ``release()`` on the result.
        """
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return GetResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        refused = _outside_queue(queue_offset, min_offset, max_offset)
        if refused is not None:
            return refused
        result = GetResult(
            GetMessageStatus.NO_MATCHED_MESSAGE, queue_offset, min_offset, max_offset
        )
        self._read_queue(cq, result, max_count, tag_filter, record_filter)
        return result

    def _read_queue(
        self,
        cq: ConsumeQueue,
        result: GetResult,
        max_count: int,
        tag_filter: TagFilter | None,
        record_filter: RecordFilter | None,
    ) -> None:
        """Fill ``result`` with the records of ``cq`` from ``result.next_begin_offset`` (in
        range), within the transfer caps, and set its status and where the next read begins."""
        cl = self.commit_log
        queue_offset = result.next_begin_offset
        max_physic = cl.max_offset
        scan = max(16000, max_count * 20) // 20
        scanned = 0
        max_pulled_physic = 0
        total_bytes = 0
        for k, (offset, size, tags) in cq.entries(queue_offset, scan):
            scanned = k - queue_offset + 1
            if size == _FILLER_SIZE:
                continue
            max_pulled_physic = offset
            if offset < cl.min_offset:
                continue  # its segment is gone; the queue's minimum is about to move
            in_memory = max_physic - offset <= self._memory_bytes
            if result.records:
                cap_count = (
                    MAX_TRANSFER_COUNT_IN_MEMORY if in_memory else MAX_TRANSFER_COUNT_ON_DISK
                )
                cap_bytes = (
                    MAX_TRANSFER_BYTES_IN_MEMORY if in_memory else MAX_TRANSFER_BYTES_ON_DISK
                )
                if (
                    len(result.records) >= max_count
                    or len(result.records) >= cap_count
                    or total_bytes + size > cap_bytes
                ):
                    scanned -= 1
                    break
            if tag_filter is not None and not tag_filter(tags):
                continue
            got = cl.read(offset, size)
            if got is None:
                if not result.records:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                continue
            view, mf = got
            if record_filter is not None and not record_filter(view):
                view.release()
                mf.release()
                continue
            result.records.append(view)
            result.queue_offsets.append(k)
            result._held.append(mf)
            total_bytes += size
            result.status = GetMessageStatus.FOUND
        if scanned == 0 and not result.records:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
        result.next_begin_offset = queue_offset + scanned
        result.suggest_pulling_from_slave = max_physic - max_pulled_physic > self._memory_bytes

    # ----------------------------------------------------------------------- retention

    def delete_expired_files(self) -> RetentionReport:
        """Delete expired files now, whatever the hour (the admin's deleteExpiredCommitLog)."""
        self.retention.request_delete(1)
        return self.retention.run_once()

    # -------------------------------------------------------------------------- events

    # ------------------------------------------------------------------- replication

    def append_replicated(self, offset: int, data: bytes | memoryview) -> None:
        """A slave's append: commit-log bytes from its master, verbatim, at ``offset`` (this
        store's end, or a segment start when it is empty). Dispatch builds queues and index
        from them as from any bytes that came without an append.

        Raises:
            ValueError: ``offset`` is not where this store's commit log ends.
            DiskFullError: no room for the bytes; what was appended stays (the stream
                resumes from the commit log's end).
        """
        cl = self.commit_log
        if cl.files.files and offset != cl.max_offset:
            raise ValueError(
                f"replicated bytes for {offset}, the commit log ends at {cl.max_offset}"
            )
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            mf = cl.files.last_writable(start_offset_if_empty=offset)
            n = min(len(view) - pos, mf.free_bytes)
            mf.append(view[pos : pos + n])
            pos += n
        self.dispatch.wake()

    async def truncate_replica(self, valid_end: int) -> None:
        """Cut a slave's store back to ``valid_end`` (its master ends there): commit log,
        consume queues and index, as recovery cuts a torn tail."""
        # What is past the cut may be what dispatch failed on: a failure here is recorded,
        # and dispatch starts again from the cut below.
        while self.dispatch.dispatch_checked() > 0:
            pass
        self.commit_log.truncate(valid_end)
        for cq in self.queues:
            if cq.max_physic_offset > valid_end:
                cq.truncate_dirty(valid_end)
        if self.index is not None:
            self.index.truncate(valid_end)
        self.dispatch.reput_from_offset = min(self.dispatch.reput_from_offset, valid_end)
        self._rebuild_queue_offsets()

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Called for each message that becomes visible in a consume queue."""
        self.dispatch.listeners.append(listener)

    def dispatch_all(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Dispatch everything appended so far, now (queries see it at once); ``progress``
        is told the offset reached and the records dispatched after each round."""
        while done := self.dispatch.dispatch_available():
            if progress is not None:
                progress(self.dispatch.reput_from_offset, done)

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.dispatch.behind_bytes
