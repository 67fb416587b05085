"""The commit log: every message of every topic, appended in arrival order.

RocketMQ counterpart: ``CommitLog`` (``putMessage``, ``putMessages``, ``doAppend``,
``recoverNormally``, ``recoverAbnormally``, ``getData``) and ``MessageExtBatchEncoder``.
docs/store-format.md §2 and §8.

The put path takes no lock. The record is encoded before the append; the append itself
reserves the position, copies the bytes and patches QUEUEOFFSET, PHYSICALOFFSET and
STORETIMESTAMP with no ``await`` in between, so the event loop serialises appends the way
RocketMQ's put lock does. A record never spans segments: when one does not fit (with 8 bytes
to spare), the rest of the segment becomes an END-OF-FILE blank record and the record goes to
the start of the next segment.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from store.mapped_file import MappedFile, MappedFileQueue
from store.message_codec import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageBatch,
    MessageInner,
    RecordError,
    RecordInfo,
    decode_properties,
    decode_record,
    encode_blank,
    encode_record,
    join_batch_properties,
    offset_msg_id,
    patch_append_fields,
    read_int,
    read_long,
    split_batch,
    store_timestamp_pos,
    verify_record,
)
from store.results import AppendResult, PutMessageStatus, PutResult

log = structlog.get_logger(__name__)

END_FILE_MIN_BLANK_BYTES = 8  # a blank record is TOTALSIZE + magic
_SIZE_MAGIC = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE: how every record starts
_TORN_WINDOW_BYTES = 16 << 20  # how much of a cut tail is saved aside, per segment


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
    """

    def __init__(
        self, directory: Path, file_bytes: int, max_message_bytes: int, torn_dir: Path
    ) -> None:
        self.files = MappedFileQueue(directory, file_bytes, set_aside_dir=torn_dir)
        self.file_bytes = file_bytes
        self.max_message_bytes = max_message_bytes
        self.torn_dir = torn_dir
        # "topic-queueId" -> next logical offset; rebuilt from the consume queues at load.
        self.queue_offsets: dict[str, int] = {}
        self.last_store_timestamp = 0
        self.on_append: Callable[[], None] | None = None  # wakes dispatch

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
        return self._append(
            record, [(0, len(record))], f"{msg.topic}-{msg.queue_id}", msg.sys_flag, msg
        )

    def put_batch(self, batch: MessageBatch) -> PutResult:
        """Append the messages of a batch to one queue with consecutive queue offsets."""
        topic = batch.topic.encode()
        bad = self._check(topic, len(batch.body), 0)
        if bad is not None:
            return bad
        if batch.sys_flag & TRANSACTION_TYPE_MASK:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch cannot be transactional"
            )
        delay = decode_properties(batch.properties).get("DELAY", "0")
        if delay.isdigit() and int(delay) > 0:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark="a batch cannot have a delay level"
            )
        try:
            entries = split_batch(batch.body)
        except RecordError as exc:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=f"bad batch: {exc}")
        batch_props = batch.properties.encode()
        records: list[bytes] = []
        spans: list[tuple[int, int]] = []
        pos = 0
        for flag, body, own_props in entries:
            props = join_batch_properties(own_props, batch_props)
            if len(props) > MAX_PROPERTIES_BYTES:
                return PutResult(
                    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    remark=f"properties of {len(props)} bytes exceed the 32 KB limit",
                )
            record = encode_record(
                topic=topic,
                queue_id=batch.queue_id,
                body=body,
                flag=flag,
                properties=props,
                sys_flag=batch.sys_flag,
                born_timestamp=batch.born_timestamp,
                born_host=batch.born_host,
                store_host=batch.store_host,
            )
            records.append(record)
            spans.append((pos, len(record)))
            pos += len(record)
        return self._append(
            b"".join(records), spans, f"{batch.topic}-{batch.queue_id}", batch.sys_flag, batch
        )

    def _append(
        self,
        data: bytes,
        spans: list[tuple[int, int]],
        queue_key: str,
        sys_flag: int,
        msg: MessageInner | MessageBatch,
    ) -> PutResult:
        # From here to the return there is no await: the loop is the put lock.
        size = len(data)
        if size + END_FILE_MIN_BLANK_BYTES > self.file_bytes:
            return PutResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"message of {size} bytes does not fit a {self.file_bytes}-byte segment",
            )
        try:
            mf = self.files.last_writable()
            if size + END_FILE_MIN_BLANK_BYTES > mf.free_bytes:
                remaining = mf.free_bytes
                # every append leaves at least 8 bytes free, so the blank always fits
                mf.append(encode_blank(remaining))
                mf.wrote_position = mf.file_bytes
                mf = self.files.last_writable()
        except OSError as exc:
            log.exception("segment_create_failed")
            return PutResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, remark=str(exc))
        base = mf.wrote_position
        start = mf.start_offset + base
        # Copy, patch, and only then advance the write position: a concurrent flush (or a
        # reader) never sees a record whose offsets and store time are not written yet.
        mf.mm[base : base + size] = data
        now = _now_ms()
        takes_offset = _takes_queue_offset(sys_flag)
        queue_offset = self.queue_offsets.get(queue_key, 0)
        first_queue_offset = queue_offset if takes_offset else 0
        ids: list[str] = []
        store_host = msg.store_host
        view = mf.view
        # the V6 bits were settled by encode_record; read them back from the record
        record_sys_flag = read_int(data, 36)
        for rel, _length in spans:
            patch_append_fields(
                view,
                base + rel,
                queue_offset=queue_offset if takes_offset else 0,
                commit_log_offset=start + rel,
                store_timestamp=now,
                sys_flag=record_sys_flag,
            )
            ids.append(offset_msg_id(store_host, start + rel))
            if takes_offset:
                queue_offset += 1
        mf.wrote_position = base + size
        if takes_offset:
            self.queue_offsets[queue_key] = queue_offset
        self.last_store_timestamp = now
        if self.on_append is not None:
            self.on_append()
        return PutResult(
            PutMessageStatus.PUT_OK,
            AppendResult(
                commit_log_offset=start,
                wrote_bytes=size,
                msg_ids=ids,
                store_timestamp=now,
                queue_offset=first_queue_offset,
                msg_num=len(spans),
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
        for mf in files[start_index:]:
            view = mf.view
            pos = 0
            last_pos = -1
            ended = False
            while pos + 8 <= mf.file_bytes:
                total, magic = _SIZE_MAGIC.unpack_from(view, pos)
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
            window = mf.view[pos : min(mf.file_bytes, pos + _TORN_WINDOW_BYTES)]
            tail = bytes(window).rstrip(b"\x00")
            window.release()
            if tail:
                self.torn_dir.mkdir(parents=True, exist_ok=True)
                name = f"commitlog-{mf.start_offset + pos:020d}-{_now_ms()}.torn"
                (self.torn_dir / name).write_bytes(tail)
                saved.append(name)
        if saved:
            log.warning("commit_log_tail_truncated", commit_log_offset=valid_end, saved_as=saved)
        self.files.truncate_dirty(valid_end)
        self.files.flushed_where = valid_end
        for mf in self.files.files:
            mf.flushed_position = mf.wrote_position

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
