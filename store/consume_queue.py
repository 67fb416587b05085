"""Consume queues: one per (topic, queue id), 20-byte entries pointing into the commit log.

RocketMQ counterpart: ``ConsumeQueue`` and the consume-queue table of
``DefaultMessageStore``. docs/store-format.md §3 and §8.

Entry (logical offset k lives at byte k * 20 of the queue)::

    0   commit-log offset   long
    8   record size         int
    12  tags code           long  hashCode of TAGS sign-extended; the deliver time for
                                  SCHEDULE_TOPIC_XXXX

Segment files are named by their first byte offset within the queue. Entries are appended
by dispatch only, so writing one is idempotent: an entry whose record ends at or before the
queue's max physical offset was already written and is skipped.

Segment files are sparse (see mapped_file.py): disk blocks are allocated a window
(``ALLOCATE_AHEAD_BYTES``) ahead of the entries, before any entry is written into them, or
only the pages the entries need when there is no room for a window. When the disk is full,
``put``/``put_many`` raise ``DiskFullError`` having written nothing of the entries they could
not place; dispatch retries them, and a retry skips what is there.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

from codec.units import pack_cq_units
from store.mapped_file import MappedFileQueue

log = structlog.get_logger(__name__)

UNIT_BYTES = 20
_UNIT = struct.Struct(
    ">"
    "q"  # 0  commit-log offset
    "i"  # 8  record size
    "q"  # 12 tags code
)
assert _UNIT.size == UNIT_BYTES
_FILLER = _UNIT.pack(0, 0x7FFFFFFF, 0)  # pads a queue whose first entry is not offset 0

Entry = tuple[int, int, int]  # (commit-log offset, size, tags code)
# 3,276 entries per posix_fallocate; an idle queue takes 64 KiB of disk, not its 6 MB file
# (a broker with 1,000 queues: 64 MiB).
ALLOCATE_AHEAD_BYTES = 64 << 10


class ConsumeQueue:
    """The entries of one message queue."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_bytes: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_bytes = file_bytes
        self.files = MappedFileQueue(
            root / topic / str(queue_id),
            file_bytes,
            allocate_ahead_bytes=ALLOCATE_AHEAD_BYTES,
            # Entries make stored messages readable: on a nearly full disk they take the
            # pages they need rather than stop at a window (the commit log stops first).
            shrink_when_full=True,
        )
        self.max_physic_offset = 0  # end (offset + size) of the last record entered
        self.min_logic_offset = 0  # byte offset of the first valid entry

    # --------------------------------------------------------------------------- load

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the end of valid entries (from the third-to-last segment) and cut after it."""
        files = self.files.files
        if not files:
            return
        index = max(0, len(files) - 3)
        valid_end = files[index].start_offset
        max_physic = 0
        for mf in files[index:]:
            view = mf.view
            pos = 0
            while pos + UNIT_BYTES <= mf.file_bytes:
                offset, size, _tags = _UNIT.unpack_from(view, pos)
                if offset < 0 or size <= 0:
                    break
                if size != 0x7FFFFFFF:  # a filler entry has no record behind it
                    max_physic = offset + size
                pos += UNIT_BYTES
            valid_end = mf.start_offset + pos
            if pos < mf.file_bytes:
                break
        self.max_physic_offset = max_physic
        self.files.truncate_dirty(valid_end)
        self.files.flushed_where = valid_end
        self._correct_min_from_files()

    def _correct_min_from_files(self) -> None:
        files = self.files.files
        if not files:
            return
        first = files[0]
        pos = 0
        while pos + UNIT_BYTES <= first.wrote_position:
            _offset, size, _tags = _UNIT.unpack_from(first.view, pos)
            if size != 0x7FFFFFFF:
                break
            pos += UNIT_BYTES
        self.min_logic_offset = first.start_offset + pos

    # ------------------------------------------------------------------------ offsets

    @property
    def max_offset(self) -> int:
        """The next logical offset to be written (entries ever written)."""
        return self.files.max_offset // UNIT_BYTES

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // UNIT_BYTES

    # -------------------------------------------------------------------------- write

    def put(self, commit_log_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry for logical ``queue_offset``; False if it was already there.

        Raises:
            DiskFullError: no disk blocks for the entry (or its segment); nothing written.
        """
        if commit_log_offset + size <= self.max_physic_offset:
            return False  # re-dispatch of a record this queue already has
        expected = queue_offset * UNIT_BYTES
        mf = self.files.last_writable(expected)
        current = mf.start_offset + mf.wrote_position
        if mf.wrote_position == 0 and not self.files.files[:-1] and expected > current:
            # The queue's first segment starts past offset 0 (its head was deleted, or it
            # was rebuilt from a later point): fill the gap so positions stay k * 20. The
            # fillers and the entry are allocated at once: a gap filled half way before the
            # disk filled up would not be recognised as one by the retry.
            mf.reserve(expected - mf.start_offset + UNIT_BYTES)
            while mf.start_offset + mf.wrote_position < expected:
                mf.append(_FILLER)
            self.min_logic_offset = expected
            current = expected
        if expected < current:
            return False  # built already (a repeated dispatch)
        if expected != current:
            log.warning(
                "consume_queue_order_gap",
                topic=self.topic,
                queue_id=self.queue_id,
                expected_offset=expected,
                current_offset=current,
            )
        mf.append(_UNIT.pack(commit_log_offset, size, tags_code))
        self.max_physic_offset = commit_log_offset + size
        return True

    def put_many(
        self, offsets: list[int], sizes: list[int], tags_codes: list[int], queue_offset: int
    ) -> list[bool]:
        """``put`` for consecutive records at logical offsets ``queue_offset``, +1, …;
        element i tells whether entry i was written. Records ascend in the commit log.

        When the entries follow the queue's end in one segment (every append does) they are
        packed straight into it, once their disk blocks are allocated; otherwise each goes
        through ``put``.

        Raises:
            DiskFullError: no disk blocks for the entries; those before it were written.
        """
        n = len(offsets)
        if n and offsets[0] + sizes[0] > self.max_physic_offset:
            expected = queue_offset * UNIT_BYTES
            mf = self.files.last_writable(expected)
            pos = mf.wrote_position
            end = pos + n * UNIT_BYTES
            if mf.start_offset + pos == expected and end <= mf.file_bytes:
                mf.reserve(end)  # before a byte goes into the mapping
                mf.wrote_position = pack_cq_units(mf.mm, pos, offsets, sizes, tags_codes)
                self.max_physic_offset = offsets[-1] + sizes[-1]
                return [True] * n
        return [
            self.put(offset, size, code, queue_offset + i)
            for i, (offset, size, code) in enumerate(zip(offsets, sizes, tags_codes, strict=True))
        ]

    # --------------------------------------------------------------------------- read

    def entry(self, queue_offset: int) -> Entry | None:
        """The entry at a logical offset, or None outside [min, max)."""
        byte = queue_offset * UNIT_BYTES
        if byte < self.min_logic_offset:
            return None
        mf = self.files.find(byte)
        if mf is None or byte - mf.start_offset + UNIT_BYTES > mf.wrote_position:
            return None
        offset, size, tags = _UNIT.unpack_from(mf.view, byte - mf.start_offset)
        return int(offset), int(size), int(tags)

    def entries(self, queue_offset: int, max_count: int) -> Iterator[tuple[int, Entry]]:
        """Entries from ``queue_offset`` on, at most ``max_count``, across segments."""
        byte = max(queue_offset * UNIT_BYTES, self.min_logic_offset)
        end = self.files.max_offset
        produced = 0
        while byte < end and produced < max_count:
            mf = self.files.find(byte)
            if mf is None:
                return
            view = mf.view
            pos = byte - mf.start_offset
            stop = min(mf.wrote_position, pos + (max_count - produced) * UNIT_BYTES)
            while pos + UNIT_BYTES <= stop:
                offset, size, tags = _UNIT.unpack_from(view, pos)
                yield (mf.start_offset + pos) // UNIT_BYTES, (offset, size, tags)
                pos += UNIT_BYTES
                produced += 1
            byte = mf.start_offset + pos
            if pos < mf.file_bytes and pos >= mf.wrote_position:
                return

    def offset_by_time(
        self, timestamp_ms: int, store_time: Callable[[int, int], int], *, nearest: bool = True
    ) -> int:
        """The logical offset of the message stored at ``timestamp_ms``, by binary search.

        An exact hit gives the first such message; otherwise the neighbour closer in time
        (RocketMQ 4.9's ``getOffsetInQueueByTime``, 0 for an empty queue). With ``nearest``
        False, the first message stored at or after the time, or the queue's end where none
        is (RocketMQ 5's ``BoundaryType.LOWER``). ``store_time(offset, size)`` reads a
        record's store timestamp from the commit log (-1 if the record is gone).
        """
        low, high = self.min_offset, self.max_offset - 1
        if high < low:
            return 0 if nearest else self.max_offset

        def time_at(k: int) -> int:
            e = self.entry(k)
            return -1 if e is None else store_time(e[0], e[1])

        left, right = low, high
        while left < right:  # first offset whose time >= timestamp
            mid = (left + right) // 2
            t = time_at(mid)
            if 0 <= t < timestamp_ms:
                left = mid + 1
            else:
                right = mid
        t = time_at(left)
        if not nearest:
            return left if t >= timestamp_ms else self.max_offset
        if t == timestamp_ms or left == low:
            return left
        if t < timestamp_ms:
            return left  # everything is older: the last one
        before = time_at(left - 1)
        # a tie goes to the earlier message, as Java's abs(...) > abs(...) comparison does
        return left if t - timestamp_ms < timestamp_ms - before else left - 1

    # ------------------------------------------------------------------- truncation

    def truncate_dirty(self, commit_log_end: int) -> None:
        """Drop entries pointing at or past ``commit_log_end`` (recovered commit-log end)."""
        files = self.files.files
        cut: int | None = None
        for mf in reversed(files):
            pos = 0
            while pos + UNIT_BYTES <= mf.wrote_position:
                offset, size, _tags = _UNIT.unpack_from(mf.view, pos)
                if size != 0x7FFFFFFF and offset >= commit_log_end:
                    cut = mf.start_offset + pos
                    break
                pos += UNIT_BYTES
            if cut is None or cut > mf.start_offset:
                break
        if cut is None:
            return
        self.files.truncate_dirty(cut)
        self.max_physic_offset = 0
        for _k, (offset, size, _t) in self.entries(max(0, cut // UNIT_BYTES - 1), 1):
            if size != 0x7FFFFFFF:
                self.max_physic_offset = offset + size

    def delete_expired(self, commit_log_min: int) -> int:
        """Delete leading segments whose last entry points below ``commit_log_min``; then
        move the min offset to the first entry at or past it. Returns segments deleted."""
        files = self.files.files
        count = 0
        for mf in files[:-1]:
            last = mf.wrote_position - UNIT_BYTES
            if last < 0:
                break
            offset, _size, _tags = _UNIT.unpack_from(mf.view, last)
            if offset >= commit_log_min:
                break
            count += 1
        if count:
            self.files.delete_first(count)
        self.correct_min_offset(commit_log_min)
        return count

    def correct_min_offset(self, commit_log_min: int) -> None:
        files = self.files.files
        if not files:
            return
        first = files[0]
        self.min_logic_offset = max(self.min_logic_offset, first.start_offset)
        pos = self.min_logic_offset - first.start_offset
        while pos + UNIT_BYTES <= first.wrote_position:
            offset, size, _tags = _UNIT.unpack_from(first.view, pos)
            if size != 0x7FFFFFFF and offset >= commit_log_min:
                break
            pos += UNIT_BYTES
        self.min_logic_offset = first.start_offset + pos

    def flush(self, least_pages: int = 0) -> None:
        while True:
            before = self.files.flushed_where
            self.files.flush(least_pages)
            if self.files.flushed_where <= before or (
                self.files.flushed_where >= self.files.max_offset
            ):
                return

    def destroy(self) -> None:
        for mf in self.files.files:
            mf.destroy()
        self.files.files = []
        self.max_physic_offset = 0
        self.min_logic_offset = 0

    def close(self) -> None:
        self.files.close()


class ConsumeQueueTable:
    """All consume queues of a store, created on first use."""

    def __init__(self, root: Path, file_bytes: int) -> None:
        self.root = root
        self.file_bytes = file_bytes - file_bytes % UNIT_BYTES
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    cq = ConsumeQueue(
                        self.root, topic_dir.name, int(queue_dir.name), self.file_bytes
                    )
                    cq.load()
                    self.queues[(topic_dir.name, int(queue_dir.name))] = cq

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.root, topic, queue_id, self.file_bytes)
            cq.files.directory.mkdir(parents=True, exist_ok=True)
            self.queues[(topic, queue_id)] = cq
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.queues.values()))

    def remove_topic(self, topic: str) -> int:
        """Delete every queue of ``topic`` with its files; returns how many there were."""
        gone = [key for key in self.queues if key[0] == topic]
        for key in gone:
            cq = self.queues.pop(key)
            cq.destroy()
            cq.close()
        topic_dir = self.root / topic
        if topic_dir.is_dir():
            for queue_dir in topic_dir.iterdir():
                if queue_dir.is_dir() and not any(queue_dir.iterdir()):
                    queue_dir.rmdir()
            if not any(topic_dir.iterdir()):
                topic_dir.rmdir()
        return len(gone)

    @property
    def max_physic_offset(self) -> int:
        """The furthest commit-log end any queue has an entry for."""
        return max((cq.max_physic_offset for cq in self.queues.values()), default=0)

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
