"""The commit log: every message of every topic, appended in arrival order.

RocketMQ counterpart: ``CommitLog`` (``putMessage``, ``putMessages``, ``doAppend``,
``recoverNormally``, ``recoverAbnormally``, ``getData``) and ``MessageExtBatchEncoder``.
docs/store-format.md §2 and §8.

The put path takes no lock. A single record is encoded before the append; the append itself
reserves the position, copies the bytes and patches QUEUEOFFSET, PHYSICALOFFSET and
STORETIMESTAMP with no ``await`` in between, so the event loop serialises appends the way
RocketMQ's put lock does. A batch is parsed and sized first, then its records are written in
place, complete, in the same stretch without ``await``. Each append leaves an ``Appended``
for dispatch, which enters it into consume queue and index without reading it back.

A record never spans segments: when one does not fit (with 8 bytes to spare), the rest of
the segment becomes an END-OF-FILE blank record and the record goes to the start of the next
segment.

Segments are sparse (see mapped_file.py): an append first makes sure its bytes are allocated,
one integer comparison in the common case, a ``posix_fallocate`` of the next window
(``ALLOCATE_AHEAD_BYTES``) once every few MiB. A full disk so refuses the put
(SERVICE_NOT_AVAILABLE, "disk full: …") before a byte is written, instead of a SIGBUS on a
store into a hole. With ``preallocate`` (``warmMapedFileEnable``) a new segment is allocated
whole at creation, as before segments were sparse.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

import structlog

from codec import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    RECORD_HEAD,
    SCHEDULE_TOPIC,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageBatch,
    MessageInner,
    PropertiesTooLongError,
    RecordError,
    RecordInfo,
    decode_properties,
    decode_record,
    encode_batch_records,
    encode_blank,
    encode_record,
    offset_msg_id_prefix,
    offset_msg_ids,
    patch_append_fields,
    patch_physical_offsets,
    read_int,
    read_long,
    record_sys_flag,
    store_timestamp_pos,
    verify_record,
)
from store.errors import DiskFullError
from store.mapped_file import MappedFile, MappedFileQueue
from store.results import AppendResult, PutMessageStatus, PutResult

log = structlog.get_logger(__name__)

END_FILE_MIN_BLANK_BYTES = 8  # a blank record is TOTALSIZE + magic
_TORN_WINDOW_BYTES = 16 << 20  # how much of a cut tail is saved aside, per segment
# Appends kept for dispatch (and commit-log bytes they may span); past that it reads back.
MAX_PENDING_APPENDS = 4096
MAX_PENDING_BYTES = 16 << 20
# Disk blocks are allocated this far ahead of the write position: one posix_fallocate (tens of
# microseconds) per 4 MiB appended, and at most 4 MiB allocated past the data.
ALLOCATE_AHEAD_BYTES = 4 << 20
DISK_FULL_LOG_INTERVAL_S = 10.0  # refusals for a full disk are logged at most this often


class Appended(NamedTuple):
    """Records one append wrote, as dispatch needs them (RocketMQ's DispatchRequests), so it
    can enter them without reading them back. Record ``i`` is at ``offsets[i]``, has
    TOTALSIZE ``sizes[i]``, queue offset ``queue_offset + i`` (if its type takes one) and
    the stored properties ``properties[i]``; all share topic, queue, sysFlag and store time.
    """

    start: int  # commit-log offset of the first record
    end: int  # just past the last
    topic: str
    topic_bytes: bytes
    queue_id: int
    sys_flag: int
    queue_offset: int
    store_timestamp: int
    offsets: list[int]
    sizes: list[int]
    properties: list[bytes]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _takes_queue_offset(sys_flag: int) -> bool:
    """Prepared and rollback transaction records get no consume-queue entry."""
    return sys_flag & TRANSACTION_TYPE_MASK not in (
        TRANSACTION_PREPARED_TYPE,
        TRANSACTION_ROLLBACK_TYPE,
    )


class CommitLog:
    """The commit log of one store.

    Args:
        directory: ``<storePathRootDir>/commitlog``.
        file_bytes: segment size (``mappedFileSizeCommitLog``).
        max_message_bytes: the body limit (``maxMessageSize``); a batch's whole body.
        torn_dir: where bytes cut off by recovery are saved for forensics.
        preallocate: allocate each new segment whole (``warmMapedFileEnable``) instead of
            window by window.
    """

    def __init__(
        self,
        directory: Path,
        file_bytes: int,
        max_message_bytes: int,
        torn_dir: Path,
        *,
        preallocate: bool = False,
    ) -> None:
        self.files = MappedFileQueue(
            directory,
            file_bytes,
            set_aside_dir=torn_dir,
            # warmMapedFileEnable: one window the size of a segment, allocated at creation
            allocate_ahead_bytes=file_bytes if preallocate else ALLOCATE_AHEAD_BYTES,
        )
        self.file_bytes = file_bytes
        self.max_message_bytes = max_message_bytes
        self.torn_dir = torn_dir
        # "topic-queueId" -> next logical offset; rebuilt from the consume queues at load.
        self.queue_offsets: dict[str, int] = {}
        self.last_store_timestamp = 0
        self.on_append: Callable[[], None] | None = None  # wakes dispatch
        # Set by dispatch: what appends wrote, oldest first (not for SCHEDULE_TOPIC_XXXX,
        # whose tags code depends on the delay levels). Dispatch checks each against its
        # own position and reads the log instead when they do not line up.
        self.appended: deque[Appended] | None = None
        self._msg_id_prefixes: dict[Host, str] = {}
        self._scratch = bytearray(1 << 20)  # where batches are built (a larger one: anew)
        # Told the offset reached now and then while recovery verifies records (the store
        # logs it: verifying gigabytes takes seconds).
        self.recovery_progress: Callable[[int], None] | None = None
        self._disk_full_logged_at = -DISK_FULL_LOG_INTERVAL_S
        self._disk_full_refusals = 0
        # Asked before the log takes more disk (a new segment or allocation window); a
        # remark refuses the put. The store sets it to the disk guard (store/retention.py).
        self.space_check: Callable[[], str | None] | None = None

    # ------------------------------------------------------------------------ offsets

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_where

    # --------------------------------------------------------------------------- put

    def _check(self, topic: bytes, body_bytes: int, props_bytes: int) -> PutResult | None:
        if not 0 < len(topic) <= MAX_TOPIC_BYTES:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"topic must be 1..{MAX_TOPIC_BYTES} bytes, not {len(topic)}",
            )
        if b"/" in topic or b"\0" in topic or topic in (b".", b".."):
            # The topic names its consume queue's directory: it must stay one directory.
            # (Retry and dead-letter topics come from group names no one checked before.)
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"topic {topic!r} cannot name a directory",
            )
        if body_bytes > self.max_message_bytes:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message body of {body_bytes} bytes exceeds maxMessageSize "
                f"{self.max_message_bytes}",
            )
        if props_bytes > MAX_PROPERTIES_BYTES:
            return PutResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"properties of {props_bytes} bytes exceed the 32 KB limit",
            )
        return None

    def put(self, msg: MessageInner) -> PutResult:
        """Append one message. Synchronous: no other append can interleave."""
        topic = msg.topic.encode()
        props = msg.properties.encode()
        bad = self._check(topic, len(msg.body), len(props))
        if bad is not None:
            return bad
        record = encode_record(
            topic=topic,
            queue_id=msg.queue_id,
            body=msg.body,
            flag=msg.flag,
            properties=props,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
        )
        size = len(record)
        # From here to the return there is no await: the loop is the put lock.
        mf = self._segment_for(size)
        if isinstance(mf, PutResult):
            return mf
        base = mf.wrote_position
        start = mf.start_offset + base
        # Copy, patch, and only then advance the write position: a concurrent flush (or a
        # reader) never sees a record whose offsets and store time are not written yet.
        mf.mm[base : base + size] = record
        now = _now_ms()
        queue_key = f"{msg.topic}-{msg.queue_id}"
        takes_offset = _takes_queue_offset(msg.sys_flag)
        queue_offset = self.queue_offsets.get(queue_key, 0) if takes_offset else 0
        # the V6 bits were settled by encode_record; read them back from the record
        patch_append_fields(
            mf.view,
            base,
            queue_offset=queue_offset,
            commit_log_offset=start,
            store_timestamp=now,
            sys_flag=read_int(record, 36),
        )
        mf.wrote_position = base + size
        if takes_offset:
            self.queue_offsets[queue_key] = queue_offset + 1
        return self._appended(
            msg.topic,
            topic,
            msg.queue_id,
            msg.sys_flag,
            msg.store_host,
            queue_offset,
            now,
            [start],
            [size],
            [props],
        )

    def put_batch(self, batch: MessageBatch) -> PutResult:
        """Append the messages of a batch to one queue with consecutive queue offsets."""
        topic = batch.topic.encode()
        bad = self._check_batch(batch, topic)
        if bad is not None:
            return bad
        sys_flag = record_sys_flag(batch.sys_flag, batch.born_host, batch.store_host)
        # From here to the return there is no await: the loop is the put lock.
        queue_key = f"{batch.topic}-{batch.queue_id}"
        queue_offset = self.queue_offsets.get(queue_key, 0)  # a batch is never transactional
        start = self.files.max_offset  # unless the batch goes to a new segment: see below
        now = _now_ms()
        try:
            encoded = encode_batch_records(
                self._scratch,
                batch.body,
                batch.properties.encode(),
                topic,
                batch.queue_id,
                sys_flag,
                batch.born_timestamp,
                batch.born_host,
                batch.store_host,
                queue_offset,
                start,
                now,
            )
        except PropertiesTooLongError as exc:
            return PutResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, remark=str(exc))
        except RecordError as exc:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=f"bad batch: {exc}")
        size = encoded.total_bytes
        mf = self._segment_for(size)
        if isinstance(mf, PutResult):
            return mf
        base = mf.wrote_position
        if mf.start_offset + base != start:  # it did go to a new segment
            start = mf.start_offset + base
            patch_physical_offsets(encoded.buf, encoded.sizes, start)
        # The records are complete before they are written and the write position moves
        # past them: a concurrent flush (or a reader) never sees one without its offsets.
        with memoryview(encoded.buf) as view, view[:size] as data:
            failed = self._write_through_file(mf, base, data)
        if failed is not None:
            return failed
        mf.wrote_position = base + size
        self.queue_offsets[queue_key] = queue_offset + len(encoded.sizes)
        offsets = list(accumulate(encoded.sizes[:-1], initial=start))
        return self._appended(
            batch.topic,
            topic,
            batch.queue_id,
            sys_flag,
            batch.store_host,
            queue_offset,
            now,
            offsets,
            encoded.sizes,
            encoded.properties,
        )

    def _check_batch(self, batch: MessageBatch, topic: bytes) -> PutResult | None:
        """``_check`` for a batch (its whole body against maxMessageSize), and the refusal
        of a transactional batch or one with a delay level."""
        bad = self._check(topic, len(batch.body), 0)
        if bad is not None:
            return bad
        if batch.sys_flag & TRANSACTION_TYPE_MASK:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch cannot be transactional"
            )
        if "DELAY" in batch.properties:
            delay = decode_properties(batch.properties).get("DELAY", "0")
            if delay.isdigit() and int(delay) > 0:
                return PutResult(
                    PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch cannot have a delay level"
                )
        return None

    def _segment_for(self, size: int) -> MappedFile | PutResult:
        """The segment the next ``size`` bytes go to, after an END-OF-FILE blank record in
        the current one if they do not fit there; a PutResult if there is none."""
        if size + END_FILE_MIN_BLANK_BYTES > self.file_bytes:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message of {size} bytes does not fit a {self.file_bytes}-byte segment",
            )
        mf = self.files.last()
        if (
            mf is not None
            and size + END_FILE_MIN_BLANK_BYTES <= mf.free_bytes
            and mf.wrote_position + size <= mf.allocated_until
        ):
            return mf  # room in the current segment and its allocated window
        # The log is about to take more disk: the disk guard decides first, so writes stop
        # at its limit, not only when the disk is full or at its next periodic check.
        if self.space_check is not None:
            try:
                refusal = self.space_check()
            except OSError as exc:
                refusal = f"disk usage unknown ({exc})"
            if refusal is not None:
                return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=refusal)
        try:
            mf = self.files.last_writable()
            if size + END_FILE_MIN_BLANK_BYTES > mf.free_bytes:
                remaining = mf.free_bytes
                # every append leaves at least 8 bytes free, so the blank always fits
                mf.append(encode_blank(remaining))
                mf.wrote_position = mf.file_bytes
                mf = self.files.last_writable()
            # The record's bytes (and the guard after them) must have their disk blocks
            # before they are copied into the mapping: a store into a hole on a full disk is
            # a SIGBUS. A window is allocated every few MiB.
            end = mf.wrote_position + size
            if end > mf.allocated_until:
                mf.allocate(end)
        except DiskFullError as exc:
            return self._disk_full(exc)
        except OSError as exc:
            log.exception("segment_create_failed")
            return PutResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, remark=str(exc))
        return mf

    def _disk_full(self, exc: DiskFullError) -> PutResult:
        """Refuse a put for want of disk blocks (RocketMQ answers a full disk with
        SERVICE_NOT_AVAILABLE too); nothing of it was written. Logged at most every
        ``DISK_FULL_LOG_INTERVAL_S``, with how many puts were refused since."""
        self._disk_full_refusals += 1
        now = time.monotonic()
        if now - self._disk_full_logged_at >= DISK_FULL_LOG_INTERVAL_S:
            log.error(
                "commit_log_disk_full",
                path=exc.path,
                position=exc.position,
                length=exc.length,
                refused_puts=self._disk_full_refusals,
            )
            self._disk_full_logged_at = now
            self._disk_full_refusals = 0
        return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=str(exc))

    @staticmethod
    def _write_through_file(mf: MappedFile, pos: int, data: memoryview) -> PutResult | None:
        """Write ``data`` at ``pos`` of ``mf`` with ``pwrite``, not through the mapping;
        a PutResult if that failed.

        Readers still read through the mapping: both are the same page cache. But the first
        store to a page of a mapped segment faults it in, and the kernel zero-fills the page
        (readahead of the fallocated, unwritten extent) before the copy lands; ``pwrite``
        fills new pages straight from the buffer. Under batch load in the broker that was
        2.3 us of system time less per message (RocketMQ's transientStorePool writes through
        the file channel for the same reason).
        """
        done = 0
        error = "nothing written"
        try:
            while done < len(data):
                wrote = os.pwrite(mf.fd, data[done:], pos + done)
                if wrote <= 0:
                    break
                done += wrote
        except OSError as exc:
            error = str(exc)
        if done == len(data):
            return None
        log.error("commit_log_write_failed", commit_log_offset=mf.start_offset + pos, error=error)
        # Complete records may have landed past the write position: zero them, or a
        # recovery would take them for records of the log.
        with contextlib.suppress(OSError, ValueError):
            mf.mm[pos : pos + done] = bytes(done)
        return PutResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"write failed: {error}")

    def _appended(  # noqa: PLR0917 - what dispatch needs of the records
        self,
        topic: str,
        topic_bytes: bytes,
        queue_id: int,
        sys_flag: int,
        store_host: Host,
        queue_offset: int,
        now: int,
        offsets: list[int],
        sizes: list[int],
        properties: list[bytes],
    ) -> PutResult:
        """Finish an append of records at ``offsets``: hand them to dispatch and answer."""
        self.last_store_timestamp = now
        pending = self.appended
        end = offsets[-1] + sizes[-1]
        if (
            pending is not None
            and topic != SCHEDULE_TOPIC
            and len(pending) < MAX_PENDING_APPENDS
            and (not pending or end - pending[0].start <= MAX_PENDING_BYTES)
        ):
            pending.append(
                Appended(
                    offsets[0],
                    end,
                    topic,
                    topic_bytes,
                    queue_id,
                    sys_flag,
                    queue_offset,
                    now,
                    offsets,
                    sizes,
                    properties,
                )
            )
        if self.on_append is not None:
            self.on_append()
        prefix = self._msg_id_prefixes.get(store_host)
        if prefix is None:
            prefix = self._msg_id_prefixes[store_host] = offset_msg_id_prefix(store_host)
        return PutResult(
            PutMessageStatus.PUT_OK,
            AppendResult(
                commit_log_offset=offsets[0],
                wrote_bytes=end - offsets[0],
                msg_ids=offset_msg_ids(prefix, offsets),
                store_timestamp=now,
                queue_offset=queue_offset,
                msg_num=len(offsets),
            ),
        )

    # -------------------------------------------------------------------------- read

    def read(self, offset: int, size: int) -> tuple[memoryview, MappedFile] | None:
        """A view of ``size`` bytes at ``offset`` and the segment it pins (release it when
        done); None when that range is not (or no longer) in the log."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start_offset
        if size <= 0 or pos + size > mf.wrote_position or not mf.hold():
            return None
        return mf.view[pos : pos + size], mf

    def record_info(self, offset: int) -> RecordInfo | None:
        """The parsed record at ``offset``, or None if there is none."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start_offset
        if pos + 8 > mf.wrote_position or read_int(mf.view, pos + 4) != MESSAGE_MAGIC_CODE:
            return None
        try:
            return decode_record(mf.view[: mf.wrote_position], pos)
        except RecordError:
            return None

    def walks_to(self, from_offset: int, commit_log_offset: int, max_records: int) -> bool:
        """Whether stepping record by record (TOTALSIZE, and a BLANK to the next segment)
        from ``from_offset``, where a record starts, lands on ``commit_log_offset`` within
        ``max_records`` steps: that a record starts there, for bytes not dispatched yet."""
        pos = max(from_offset, self.min_offset)
        for _ in range(max_records):
            if pos >= commit_log_offset:
                break
            mf = self.files.find(pos)
            if mf is None:
                return False
            rel = pos - mf.start_offset
            if rel + 8 > mf.wrote_position:
                if mf.wrote_position < mf.file_bytes:
                    return False  # the end of what is written
                pos = mf.start_offset + mf.file_bytes  # a full segment's last few bytes
                continue
            total, magic = RECORD_HEAD.unpack_from(mf.view, rel)
            if magic == BLANK_MAGIC_CODE:
                pos = mf.start_offset + mf.file_bytes
            elif magic == MESSAGE_MAGIC_CODE and total > 0:
                pos += total
            else:
                return False
        return pos == commit_log_offset

    def store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``, -1 if it is gone."""
        mf = self.files.find(offset)
        if mf is None:
            return -1
        pos = offset - mf.start_offset
        if pos + size > mf.wrote_position:
            return -1
        return read_long(mf.view, pos + store_timestamp_pos(read_int(mf.view, pos + 36)))

    def data_from(self, offset: int) -> tuple[memoryview, MappedFile] | None:
        """Bytes from ``offset`` to the end of written data in its segment (replication and
        dispatch read with it); the segment is held."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start_offset
        if pos >= mf.wrote_position or not mf.hold():
            return None
        return mf.view[pos : mf.wrote_position], mf

    # ---------------------------------------------------------------------- recovery

    def walk(
        self,
        start_index: int,
        *,
        check_crc: bool,
        on_record: Callable[[RecordInfo], None] | None = None,
    ) -> int:
        """Verify records from segment ``start_index`` on; return the end of valid data.

        A blank record moves on to the next segment; a record that does not verify
        (magic, lengths, CRC when asked) ends the valid data.
        """
        files = self.files.files
        if not files:
            return 0
        valid_end = files[start_index].start_offset
        progress = self.recovery_progress
        checked = 0
        for mf in files[start_index:]:
            view = mf.view
            pos = 0
            last_pos = -1
            ended = False
            while pos + 8 <= mf.file_bytes:
                checked += 1
                if progress is not None and not checked & 0x1FFF:
                    progress(mf.start_offset + pos)
                total, magic = RECORD_HEAD.unpack_from(view, pos)
                if magic == BLANK_MAGIC_CODE and total == mf.file_bytes - pos:
                    pos = mf.file_bytes
                    break
                if magic != MESSAGE_MAGIC_CODE or total <= 0:
                    ended = True
                    break
                try:
                    size = verify_record(view, pos, mf.start_offset + pos, check_crc=check_crc)
                    if on_record is not None:
                        on_record(decode_record(view, pos))
                except RecordError as exc:
                    log.warning(
                        "commit_log_record_invalid",
                        commit_log_offset=mf.start_offset + pos,
                        reason=str(exc),
                    )
                    ended = True
                    break
                last_pos = pos
                pos += size
            valid_end = mf.start_offset + pos
            if last_pos >= 0:
                self.last_store_timestamp = read_long(
                    view, last_pos + store_timestamp_pos(read_int(view, last_pos + 36))
                )
            if ended or pos < mf.file_bytes:
                break
        return valid_end

    def recover_normally(self, *, check_crc: bool) -> int:
        """After a clean shutdown: verify the last three segments; returns the valid end."""
        files = self.files.files
        if not files:
            return 0
        valid_end = self.walk(max(0, len(files) - 3), check_crc=check_crc)
        self.truncate(valid_end)
        return valid_end

    def recover_abnormally(self, *, check_crc: bool, safe_timestamp: int) -> tuple[int, int]:
        """After a crash: verify from the newest segment whose first record is older than
        the checkpoint's safe time and cut after the last valid record.

        Returns (valid end, safe start): everything from the safe start on must be
        dispatched again (the caller does it in order, after cutting queues and index).
        """
        files = self.files.files
        if not files:
            return 0, 0
        start_index = 0
        for index in range(len(files) - 1, -1, -1):
            view = files[index].view
            if read_int(view, 4) != MESSAGE_MAGIC_CODE:
                continue
            try:
                first = decode_record(view, 0)
            except RecordError:
                continue
            if 0 < first.store_timestamp <= safe_timestamp:
                start_index = index
                break
        safe_start = files[start_index].start_offset
        valid_end = self.walk(start_index, check_crc=check_crc)
        self.truncate(valid_end)
        return valid_end, safe_start

    def truncate(self, valid_end: int) -> None:
        """Cut everything from ``valid_end`` on, saving the cut bytes aside first."""
        saved: list[str] = []
        for mf in self.files.files:
            if mf.start_offset + mf.file_bytes <= valid_end:
                continue
            pos = max(0, valid_end - mf.start_offset)
            # Read from the file, not the mapping: the window runs into holes (see
            # MappedFile.truncate_from).
            length = min(mf.file_bytes - pos, _TORN_WINDOW_BYTES)
            tail = os.pread(mf.fd, length, pos).rstrip(b"\x00")
            name = self._save_torn(mf.start_offset + pos, tail) if tail else None
            if name is not None:
                saved.append(name)
        if saved:
            log.warning("commit_log_tail_truncated", commit_log_offset=valid_end, saved_as=saved)
        if self.appended is not None:
            self.appended.clear()  # records past the cut are gone; new ones may reuse offsets
        self.files.truncate_dirty(valid_end)
        self.files.flushed_where = valid_end
        for mf in self.files.files:
            mf.flushed_position = mf.wrote_position

    def _save_torn(self, commit_log_offset: int, tail: bytes) -> str | None:
        """Save bytes recovery cuts at ``commit_log_offset`` to a side file; returns its
        name, or None (logged) when there is no room for it. The cut goes ahead all the
        same: on a full disk a store that cannot start serves nothing, and the bytes past
        the valid end were never part of the log."""
        path = self.torn_dir / f"commitlog-{commit_log_offset:020d}-{_now_ms()}.torn"
        try:
            self.torn_dir.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tail)
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.unlink()
            log.error(  # noqa: TRY400 - the error says it all (ENOSPC): no traceback
                "commit_log_tail_not_saved",
                commit_log_offset=commit_log_offset,
                bytes=len(tail),
                path=str(path),
                error=str(exc),
            )
            return None
        return path.name

    def flush(self, least_pages: int = 0) -> int:
        """Flush until everything written before the call is durable (the I/O thread)."""
        target = self.files.max_offset
        for _ in range(4):  # a segment switch needs two rounds
            if self.files.flush(least_pages) >= target:
                break
            if least_pages:
                break
        return self.files.flushed_where

    def close(self) -> None:
        self.files.close()
