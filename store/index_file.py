"""The message-key index: hash slots plus backward-linked entry chains, one mmap'd file each.

RocketMQ counterpart: ``IndexFile``, ``IndexHeader`` and ``IndexService`` (4.9.8).
docs/store-format.md §4 is the reference; the byte layout is RocketMQ's, so files written by
either broker read the same in the other.

File (all integers big-endian)::

    0                       header, 40 bytes (_HEADER)
    40                      hash_slot_num slots of 4 bytes: newest entry number in the
                            bucket, 0 = empty
    40 + slots*4            index_num entries of 20 bytes (_ENTRY); entry 0 is never used,
                            so a file holds index_num - 1 keys

    entry   0  keyHash       int   abs(Java String.hashCode(key)), 0 for Integer.MIN_VALUE
            4  commit-log    long  offset of the record the key belongs to
           12  timeDiff      int   (storeTimestamp - header.beginTimestamp) / 1000, seconds
           16  prev          int   previous entry number in the same slot, 0 = end of chain

A key is ``topic#KEY`` (or ``topic#UNIQ_KEY``). Only its hash is stored, so a lookup returns
every offset whose key *hashes* alike: callers read the records back and compare keys.

Disk space: files are sparse, like every store file (see mapped_file.py). The header and the
hash slots are allocated when a file is created: keys hash uniformly, so the slot table's
4,883 pages (20 MB with the default 5,000,000 slots, 5 % of the 420 MB file) are all written
within some 40,000 keys, after which a page-by-page allocation would have saved nothing, at
the price of a check per key. Entries are appended, so they are allocated a window
(``ALLOCATE_AHEAD_BYTES``) ahead, before any is written there, or only the pages they need
when the window finds no room; a put that finds no room raises ``DiskFullError`` before it
writes anything.

Where the slot table is not known to be allocated, the file keeps a map of its slot pages
(``_slot_pages``) instead: a file created when the disk had no room for the whole table (a
broker rebuilding its index on a nearly full disk starts and serves all the same), and every
loaded file (which pages a previous run allocated is not known; allocating a whole table
again at each load could take more disk than the broker itself). A put first allocates the
pages of the slots it will touch, one ``posix_fallocate`` per page not yet known (a no-op
for a page already allocated); a read of a slot in a page not known to be allocated goes
through ``pread``, since a fault in a hole of a tmpfs mapping allocates, and on a full disk
that is a SIGBUS. Once every page is known the file drops the map and goes the fast way.

Durability: written pages reach disk by ``os.fdatasync`` on the file (never ``mmap.flush``,
which holds the GIL through the msync; see mapped_file.py). RocketMQ forces a file when it
fills up, then records its endTimestamp as the checkpoint's indexMsgTimestamp; a load after an
abnormal exit deletes every file that ends later than that (docs/store-format.md §5, §8).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import structlog

from codec import (
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    index_key_hash,
)
from codec.units import put_index_entries
from store.mapped_file import (
    MADV_DONTNEED,
    OS_PAGE_BYTES,
    RELEASE_CHUNK_BYTES,
    RELEASE_KEEP_BYTES,
    advance_allocation,
    allocate_range,
    allocation_end,
    map_file,
    writable_until,
)

log = structlog.get_logger(__name__)

_HEADER = struct.Struct(
    ">"
    "q"  # 0  beginTimestamp: store time (ms) of the first entry
    "q"  # 8  endTimestamp: store time (ms) of the last entry
    "q"  # 16 beginPhyOffset: commit-log offset of the first entry
    "q"  # 24 endPhyOffset: commit-log offset of the last entry
    "i"  # 32 hashSlotCount: slots ever filled
    "i"  # 36 indexCount: next free entry number, starts at 1
)
assert _HEADER.size == 40

_SLOT = struct.Struct(">i")  # newest entry number in the bucket, 0 = empty
assert _SLOT.size == 4

_ENTRY = struct.Struct(
    ">"
    "i"  # 0  keyHash
    "q"  # 4  commit-log offset
    "i"  # 12 timeDiff, seconds since header.beginTimestamp
    "i"  # 16 previous entry number in this slot, 0 = end of chain
)
assert _ENTRY.size == 20

HEADER_BYTES = _HEADER.size
SLOT_BYTES = _SLOT.size
ENTRY_BYTES = _ENTRY.size
MAX_TIME_DIFF_S = 2**31 - 1
MAX_MSGS_NUM_BATCH = 64  # maxMsgsNumBatch: the cap on one query's results
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
ALLOCATE_AHEAD_BYTES = 1 << 20  # entries allocated ahead of the newest: 52,428 of them

_NAME = re.compile(r"\d{17}")
CREATING_SUFFIX = ".creating"
_NAME_TIME_FORMAT = "%Y%m%d%H%M%S"


def index_file_bytes(hash_slot_num: int, index_num: int) -> int:
    """Size of one index file: 420,000,040 bytes with RocketMQ's defaults."""
    return HEADER_BYTES + hash_slot_num * SLOT_BYTES + index_num * ENTRY_BYTES


def index_key(topic: str, key: str) -> str:
    """The indexed form of a key (RocketMQ ``IndexService.buildKey``)."""
    return f"{topic}#{key}"


def index_file_name(when: datetime) -> str:
    """Local time as ``yyyyMMddHHmmssSSS`` (RocketMQ ``UtilAll.timeMillisToHumanString``)."""
    return when.strftime(_NAME_TIME_FORMAT) + f"{when.microsecond // 1000:03d}"


def _name_time(name: str) -> datetime:
    return datetime.strptime(name[:14], _NAME_TIME_FORMAT) + timedelta(milliseconds=int(name[14:]))


class IndexFile:
    """One index file (RocketMQ ``IndexFile`` with its ``IndexHeader``).

    The header lives in attributes and is packed into the mapping on every put, so the bytes
    on disk always match them. Nothing keeps a memoryview of the mapping, so ``close`` never
    meets a ``BufferError``.

    Args:
        path: the file; its name is the creation time (see ``IndexFile.create_in``).
        hash_slot_num: slots (maxHashSlotNum); must match the file when opening one.
        index_num: entries including the unused entry 0 (maxIndexNum).
        create: make a new file (it must not exist) instead of opening one: sparse, with its
            header, hash slots and first window of entries allocated (only its header page
            when there is no room for that: see the module docstring).
        prev_end_timestamp: for a new file, the previous file's endTimestamp; it becomes
            this file's begin and end timestamp until the first put (ignored when 0).
        prev_end_phy_offset: likewise for the begin and end commit-log offset.

    Raises:
        StoreLoadError: an existing file whose size does not match the slot and entry counts.
        FileExistsError: ``create`` for a path that exists.
        DiskFullError: ``create`` found no room for the header page (nothing is left).
    """

    __slots__ = (
        "_allocated",
        "_allocated_until",
        "_begin_phy_offset",
        "_begin_timestamp",
        "_closed",
        "_end_phy_offset",
        "_end_timestamp",
        "_entries_pos",
        "_fd",
        "_hash_slot_count",
        "_index_count",
        "_mm",
        "_released",
        "_slot_pages",
        "_slot_pages_unknown",
        "file_bytes",
        "hash_slot_num",
        "index_num",
        "path",
    )

    def __init__(
        self,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        create: bool = False,
        prev_end_timestamp: int = 0,
        prev_end_phy_offset: int = 0,
    ) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError("hash_slot_num must be positive and index_num above 1")
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_bytes = index_file_bytes(hash_slot_num, index_num)
        self._entries_pos = HEADER_BYTES + hash_slot_num * SLOT_BYTES
        # Entry pages below this were dropped from the page tables (see flush).
        self._released = -(-self._entries_pos // OS_PAGE_BYTES) * OS_PAGE_BYTES
        # Built under a temporary name and renamed once whole (below), so a crash
        # mid-creation leaves no short index file to stop the next load.
        open_path = path.with_name(path.name + CREATING_SUFFIX) if create else path
        if create and path.exists():
            raise FileExistsError(f"index file {path} exists already")
        self._map(open_path, create=create)
        self._closed = False
        if create:
            self._start_header(prev_end_timestamp, prev_end_phy_offset)
            os.rename(open_path, path)
        else:
            self._read_header()

    def _map(self, open_path: Path, *, create: bool) -> None:
        """Open and map the file (allocating its first window when created), and note what
        is known to be allocated; a file being created is removed if that fails."""
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(open_path, flags, 0o644)
        try:
            self._mm, allocated = map_file(
                fd,
                self.path,
                self.file_bytes,
                create=create,
                allocate_bytes=allocation_end(
                    self._entries_pos + ENTRY_BYTES, ALLOCATE_AHEAD_BYTES, self.file_bytes
                ),
                least_bytes=OS_PAGE_BYTES,
                size_hint=" (maxHashSlotNum or maxIndexNum changed?)",
            )
        except BaseException:
            os.close(fd)
            if create:
                with contextlib.suppress(OSError):
                    open_path.unlink()
            raise
        self._fd = fd
        # Bytes from the start known to be allocated, and how far entries may be written
        # before the next window (0 in a loaded file: not known until the first put).
        self._allocated = allocated
        self._allocated_until = writable_until(allocated, self.file_bytes)
        # Slot pages known to be allocated (1) when not all are: None is the fast way.
        self._slot_pages: bytearray | None = None
        self._slot_pages_unknown = 0
        if allocated < self._entries_pos:
            pages = (self._entries_pos - 1) // OS_PAGE_BYTES + 1
            self._slot_pages = bytearray(pages)
            self._slot_pages_unknown = pages
            if allocated:
                self._slot_pages[0] = 1  # the header's page, allocated at creation
                self._slot_pages_unknown -= 1

    def _start_header(self, prev_end_timestamp: int, prev_end_phy_offset: int) -> None:
        """A new file's header: begin and end where the previous file ended, no entry."""
        # RocketMQ carries only positive values over. It leaves indexCount 0 on disk until
        # the first put or flush; writing the whole header now gives the same bytes.
        begin_ts = max(prev_end_timestamp, 0)
        begin_phy = max(prev_end_phy_offset, 0)
        self._begin_timestamp = self._end_timestamp = begin_ts
        self._begin_phy_offset = self._end_phy_offset = begin_phy
        self._hash_slot_count = 0
        self._index_count = 1
        self._pack_header()

    def _read_header(self) -> None:
        (
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._hash_slot_count,
            count,
        ) = _HEADER.unpack(os.pread(self._fd, HEADER_BYTES, 0))  # the page may be a hole
        # A file that never took a put has 0 here (IndexHeader.load does the same).
        self._index_count = count if count > 0 else 1

    @classmethod
    def create_in(
        cls,
        directory: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        prev_end_timestamp: int = 0,
        prev_end_phy_offset: int = 0,
        after_name: str | None = None,
    ) -> IndexFile:
        """A new file in ``directory`` named by the local time now, as ``yyyyMMddHHmmssSSS``.

        If that name is taken (two files in one millisecond) the next millisecond is used, and
        so on. ``after_name`` (the newest existing file) keeps names ascending even if the
        clock stepped back: the name is then that file's time plus 1 ms, because files are
        loaded in name order.
        """
        when = datetime.now()
        if after_name is not None and _NAME.fullmatch(after_name):
            when = max(when, _name_time(after_name) + timedelta(milliseconds=1))
        while True:
            path = directory / index_file_name(when)
            try:
                return cls(
                    path,
                    hash_slot_num,
                    index_num,
                    create=True,
                    prev_end_timestamp=prev_end_timestamp,
                    prev_end_phy_offset=prev_end_phy_offset,
                )
            except FileExistsError:
                when += timedelta(milliseconds=1)

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.path.name}, count={self._index_count}, "
            f"phy={self._begin_phy_offset}..{self._end_phy_offset}, "
            f"time={self._begin_timestamp}..{self._end_timestamp})"
        )

    # ------------------------------------------------------------------------ header

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        """Store time (ms) of the first entry (the previous file's end until then)."""
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        """Store time (ms) of the last entry."""
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        """Commit-log offset of the first entry."""
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        """Commit-log offset of the last entry (the record, not its end)."""
        return self._end_phy_offset

    @property
    def hash_slot_count(self) -> int:
        """Slots that were empty when a key was put into them."""
        return self._hash_slot_count

    @property
    def index_count(self) -> int:
        """Next free entry number: 1 in an empty file, ``index_num`` in a full one."""
        return self._index_count

    @property
    def is_full(self) -> bool:
        return self._index_count >= self.index_num

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_ms, end_ms] overlaps the file's [beginTimestamp, endTimestamp]."""
        begin, end = self._begin_timestamp, self._end_timestamp
        return (
            (begin_ms < begin and end_ms > end)
            or begin <= begin_ms <= end
            or begin <= end_ms <= end
        )

    def holds(self, key: str, commit_log_offset: int) -> bool:
        """Whether ``key`` is indexed here for the record at ``commit_log_offset``."""
        return self.holds_hash(index_key_hash(key), commit_log_offset)

    def holds_hash(self, key_hash: int, commit_log_offset: int) -> bool:
        """Whether a key with index hash ``key_hash`` is indexed here for the record at
        ``commit_log_offset`` (entries hold only hashes, so this is what ``holds`` checks)."""
        mm = self._mm
        number = self._slot(HEADER_BYTES + (key_hash % self.hash_slot_num) * SLOT_BYTES)
        steps = 0
        while 0 < number < self._index_count and steps < self._index_count:
            entry_hash, offset, _diff, prev = _ENTRY.unpack_from(
                mm, self._entries_pos + number * ENTRY_BYTES
            )
            if offset < commit_log_offset:
                return False  # chains run newest first: it would have been met already
            if entry_hash == key_hash and offset == commit_log_offset:
                return True
            if prev >= number:
                return False
            number = prev
            steps += 1
        return False

    def truncate_entries(self, commit_log_offset: int) -> int:
        """Remove the entries for records at or past ``commit_log_offset`` (recovery cut
        the commit log there); returns how many were removed.

        Entries are appended in commit-log order, so those are a suffix. Each is unlinked
        from its slot (slot heads move back along their chains), zeroed, and the header's
        indexCount, hashSlotCount and end values go back to the last entry kept, so the
        file is exactly as if those records had never been indexed.
        """
        mm = self._mm
        keep = self._index_count
        while keep > 1:
            _hash, offset, _diff, _prev = _ENTRY.unpack_from(
                mm, self._entries_pos + (keep - 1) * ENTRY_BYTES
            )
            if offset < commit_log_offset:
                break
            keep -= 1
        removed = self._index_count - keep
        if not removed:
            return 0
        for number in range(self._index_count - 1, keep - 1, -1):
            pos = self._entries_pos + number * ENTRY_BYTES
            key_hash, _offset, _diff, prev = _ENTRY.unpack_from(mm, pos)
            slot_pos = HEADER_BYTES + (key_hash % self.hash_slot_num) * SLOT_BYTES
            # A head equal to the entry was written with it: its page is allocated.
            head = self._slot(slot_pos)
            if head == number:
                new_head = prev if 0 < prev < number else 0
                _SLOT.pack_into(mm, slot_pos, new_head)
                if new_head == 0:
                    self._hash_slot_count -= 1
            mm[pos : pos + ENTRY_BYTES] = bytes(ENTRY_BYTES)
        self._index_count = keep
        if keep > 1:
            _hash, offset, diff, _prev = _ENTRY.unpack_from(
                mm, self._entries_pos + (keep - 1) * ENTRY_BYTES
            )
            self._end_phy_offset = offset
            self._end_timestamp = self._begin_timestamp + diff * 1000
        else:
            self._end_phy_offset = self._begin_phy_offset
            self._end_timestamp = self._begin_timestamp
        self._pack_header()
        return removed

    def _pack_header(self) -> None:
        _HEADER.pack_into(
            self._mm,
            0,
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._hash_slot_count,
            self._index_count,
        )

    # ------------------------------------------------------------------------ keys

    def put_key(self, key: str, commit_log_offset: int, store_timestamp: int) -> bool:
        """Add ``key`` → ``commit_log_offset`` (RocketMQ ``putKey``); False if the file is full.

        Raises ``DiskFullError`` (having written nothing) when the entry finds no disk blocks.

        The entry's timeDiff is measured from the beginTimestamp *before* this put, as in
        RocketMQ: the first entry of a file that took over a previous file's end timestamp
        gets its distance from that, although the put then resets beginTimestamp to its own
        store time.
        """
        count = self._index_count
        if count >= self.index_num:
            return False
        key_hash = index_key_hash(key)
        end = self._entries_pos + (count + 1) * ENTRY_BYTES
        if end > self._allocated_until:
            self._allocate(end)
        if self._slot_pages is not None:
            self._allocate_slot_pages([key_hash])
        mm = self._mm
        slot_pos = HEADER_BYTES + (key_hash % self.hash_slot_num) * SLOT_BYTES
        (prev,) = _SLOT.unpack_from(mm, slot_pos)
        if prev <= 0 or prev > count:
            prev = 0
        begin = self._begin_timestamp
        if begin <= 0:
            time_diff_s = 0
        else:
            # Java's long division truncates toward zero, floor division rounds down; they
            # differ only for negative values, which are clamped to 0 either way.
            time_diff_s = min(max((store_timestamp - begin) // 1000, 0), MAX_TIME_DIFF_S)
        _ENTRY.pack_into(
            mm,
            self._entries_pos + count * ENTRY_BYTES,
            key_hash,
            commit_log_offset,
            time_diff_s,
            prev,
        )
        _SLOT.pack_into(mm, slot_pos, count)
        if count <= 1:
            self._begin_phy_offset = commit_log_offset
            self._begin_timestamp = store_timestamp
        if prev == 0:
            self._hash_slot_count += 1
        self._index_count = count + 1
        self._end_phy_offset = commit_log_offset
        self._end_timestamp = store_timestamp
        self._pack_header()
        return True

    def put_hashes(
        self,
        key_hashes: list[int],
        offsets: list[int],
        start: int,
        stop: int,
        store_timestamp: int,
    ) -> int:
        """``put_key`` for keys ``start`` to ``stop`` (exclusive) given by their index hash,
        key i belonging to the record at ``offsets[i]``, all stored at ``store_timestamp``.

        Returns where it stopped: ``stop``, or the first key that did not fit a full file.
        The entries, slots and header are those the same ``put_key`` calls write; the header
        is packed once, at the end.

        Raises:
            DiskFullError: no disk blocks for the entries; nothing was written.
        """
        count = self._index_count
        room = self.index_num - count
        if stop - start > room:
            stop = start + max(room, 0)
        if start >= stop:
            return start
        end = self._entries_pos + (count + stop - start) * ENTRY_BYTES
        if end > self._allocated_until:
            self._allocate(end)
        if self._slot_pages is not None:
            self._allocate_slot_pages(key_hashes[start:stop])
        first = start
        if count <= 1:
            # The first entry: its timeDiff is 0 (or measured from a begin time taken over
            # from the previous file), and it sets the file's begin values.
            self._put_entries(key_hashes, offsets, first, first + 1, store_timestamp)
            self._begin_phy_offset = offsets[first]
            self._begin_timestamp = store_timestamp
            first += 1
        # Every later entry is measured from the same begin time: one timeDiff for all.
        self._put_entries(key_hashes, offsets, first, stop, store_timestamp)
        self._end_phy_offset = offsets[stop - 1]
        self._end_timestamp = store_timestamp
        self._pack_header()
        return stop

    def _put_entries(
        self, key_hashes: list[int], offsets: list[int], start: int, stop: int, store_timestamp: int
    ) -> None:
        """Write entries and slots for keys ``start`` to ``stop`` (room and pages checked),
        all with one timeDiff, and count them (the header is not packed)."""
        self._index_count, self._hash_slot_count = put_index_entries(
            self._mm,
            self.hash_slot_num,
            self._index_count,
            self._hash_slot_count,
            key_hashes,
            offsets,
            start,
            stop,
            self._time_diff_s(store_timestamp),
        )

    def _allocate(self, end: int) -> None:
        """Allocate the window of entries that lets bytes up to ``end`` be written.

        Raises:
            DiskFullError: no room; nothing changed.
        """
        self._allocated = advance_allocation(
            self._fd,
            self.path,
            self._allocated,
            self._entries_pos + self._index_count * ENTRY_BYTES,
            end,
            ALLOCATE_AHEAD_BYTES,
            self.file_bytes,
            shrink=True,
        )
        self._allocated_until = writable_until(self._allocated, self.file_bytes)

    def _slot(self, slot_pos: int) -> int:
        """The slot at ``slot_pos``; read from the file, not the mapping, where its page is
        not known to be allocated (a fault in a hole of a tmpfs mapping allocates)."""
        pages = self._slot_pages
        if pages is not None and not pages[slot_pos // OS_PAGE_BYTES]:
            return int(_SLOT.unpack(os.pread(self._fd, SLOT_BYTES, slot_pos))[0])
        return int(_SLOT.unpack_from(self._mm, slot_pos)[0])

    def _allocate_slot_pages(self, key_hashes: list[int]) -> None:
        """Allocate the pages of the slots these keys go to, and the header's, before a put
        writes any of them (only while not every slot page is known to be allocated).

        Raises:
            DiskFullError: no room for one of them; nothing was written (pages allocated
                before it stay allocated, and known).
        """
        pages = self._slot_pages
        assert pages is not None
        slot_num = self.hash_slot_num
        wanted = {(HEADER_BYTES + (h % slot_num) * SLOT_BYTES) // OS_PAGE_BYTES for h in key_hashes}
        wanted.add(0)  # the header, written by every put
        for page in sorted(wanted):
            if pages[page]:
                continue
            at = page * OS_PAGE_BYTES
            # never past the file's end: posix_fallocate would make the file longer
            if not allocate_range(
                self._fd, self.path, at, min(OS_PAGE_BYTES, self.file_bytes - at)
            ):
                self._slot_pages = None  # no preallocation here at all: nothing to track
                return
            pages[page] = 1
            self._slot_pages_unknown -= 1
        if not self._slot_pages_unknown:
            self._slot_pages = None  # every slot page allocated: the fast way from now on

    def _time_diff_s(self, store_timestamp: int) -> int:
        """An entry's timeDiff: seconds from beginTimestamp, 0 while that is unset."""
        begin = self._begin_timestamp
        if begin <= 0:
            return 0
        # Java's long division truncates toward zero, floor division rounds down; they
        # differ only for negative values, which are clamped to 0 either way.
        return min(max((store_timestamp - begin) // 1000, 0), MAX_TIME_DIFF_S)

    def select_offsets(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries whose key hash matches ``key``'s and whose time lies within
        [begin_ms, end_ms], newest first, at most ``max_num`` (RocketMQ ``selectPhyOffset``).

        An entry's time is beginTimestamp + timeDiff * 1000, so it is known to the second.
        The chain walk stops at its end, at a link that is out of range or does not point
        back, at an entry older than ``begin_ms`` (entries only get newer along a file), or at
        ``max_num`` results.
        """
        out: list[int] = []
        count = self._index_count
        if max_num <= 0 or count <= 1:
            return out
        mm = self._mm
        key_hash = index_key_hash(key)
        entry_no = self._slot(HEADER_BYTES + (key_hash % self.hash_slot_num) * SLOT_BYTES)
        if entry_no <= 0 or entry_no > count:
            return out
        begin = self._begin_timestamp
        entries_pos = self._entries_pos
        while len(out) < max_num:
            hash_read, offset, time_diff_s, prev = _ENTRY.unpack_from(
                mm, entries_pos + entry_no * ENTRY_BYTES
            )
            if time_diff_s < 0:
                break
            time_ms = begin + time_diff_s * 1000
            if hash_read == key_hash and begin_ms <= time_ms <= end_ms:
                out.append(offset)
            # RocketMQ stops on prev == current; ``>=`` also stops the cycles only a corrupt
            # file can hold (a valid chain always points to an older, smaller entry number).
            if prev <= 0 or prev > count or prev >= entry_no or time_ms < begin_ms:
                break
            entry_no = prev
        return out

    # ------------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Make the file durable (``fdatasync``; blocking, so call it off the event loop).

        Entries are appended in order, so once durable, all but the newest
        ``RELEASE_KEEP_BYTES`` of them leave the process's page tables (``MADV_DONTNEED``,
        as the commit log's segments do): a query that walks back to them faults them in
        from the page cache. The hash slots, written all over, stay mapped."""
        if self._closed:
            return
        durable_end = self._entries_pos + self._index_count * ENTRY_BYTES
        os.fdatasync(self._fd)
        keep_from = durable_end - RELEASE_KEEP_BYTES
        upto = keep_from - keep_from % RELEASE_CHUNK_BYTES
        if MADV_DONTNEED is None or upto - self._released < RELEASE_CHUNK_BYTES:
            return
        try:
            self._mm.madvise(MADV_DONTNEED, self._released, upto - self._released)
        except (ValueError, OSError):  # closed meanwhile
            return
        self._released = upto

    def close(self) -> None:
        """Unmap and close without deleting (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._mm.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class QueryResult(NamedTuple):
    """What ``IndexService.query`` found (RocketMQ ``QueryOffsetResult``).

    ``offsets`` are commit-log offsets newest first, of records whose key *hashes* like the
    one asked for. The two ``index_last_update_*`` values are the newest file's end timestamp
    and end offset, which the query-message response reports.
    """

    offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


class IndexService:
    """The index files of one store, oldest first (RocketMQ ``IndexService``).

    ``build_index`` is called by the dispatcher for every record; ``query`` serves
    QUERY_MESSAGE. One lock (RocketMQ's read-write lock) guards the file list, so a delete on
    the store's I/O thread cannot unmap a file a query is reading.

    Args:
        directory: ``<root>/index``; created if missing.
        hash_slot_num: maxHashSlotNum.
        index_num: maxIndexNum.
        on_file_full: called with a full file's endTimestamp once that file is durable; the
            store sets it as the checkpoint's indexMsgTimestamp and flushes the checkpoint.
            The same value is kept in ``last_full_end_timestamp``.
    """

    def __init__(
        self,
        directory: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        on_file_full: Callable[[int], None] | None = None,
    ) -> None:
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError("hash_slot_num must be positive and index_num above 1")
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.on_file_full = on_file_full
        self.last_full_end_timestamp = 0
        self.files: list[IndexFile] = []
        self._lock = threading.RLock()

    # ------------------------------------------------------------------------ load

    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> None:
        """Map the files on disk in name (= creation) order.

        After an abnormal exit (``last_exit_ok`` False), files whose endTimestamp is later
        than the checkpoint's ``index_msg_timestamp`` are deleted: only a file that filled up
        was surely flushed, and recovery re-dispatches the records they held.

        Raises:
            StoreLoadError: a file whose size does not match the slot and entry counts.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob("*" + CREATING_SUFFIX):
            log.warning("index_file_creation_interrupted", path=str(stray))
            stray.unlink()
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        with self._lock:
            for name in names:
                if not _NAME.fullmatch(name):
                    log.warning("index_file_ignored", file=name, directory=str(self.directory))
                    continue
                path = self.directory / name
                expected = index_file_bytes(self.hash_slot_num, self.index_num)
                if path.stat().st_size < expected and name == names[-1]:
                    # The newest file, short: a crash while it was being created (before
                    # files were built under a temporary name). It is rebuilt by dispatch.
                    path.unlink()
                    log.warning("index_file_deleted", file=name, reason="short")
                    continue
                f = IndexFile(path, self.hash_slot_num, self.index_num)
                if not last_exit_ok and f.end_timestamp > index_msg_timestamp:
                    log.info(
                        "index_file_deleted",
                        file=name,
                        reason="abnormal_exit",
                        end_timestamp=f.end_timestamp,
                        index_msg_timestamp=index_msg_timestamp,
                    )
                    f.destroy()
                    continue
                self.files.append(f)
                log.debug("index_file_loaded", file=name, index_count=f.index_count)

    # ------------------------------------------------------------------------ writing

    def build_index(  # noqa: PLR0917 - DispatchRequest's fields, in RocketMQ's order
        self,
        topic: str,
        keys: str | None,
        uniq_key: str | None,
        commit_log_offset: int,
        store_timestamp: int,
        tran_type: int,
    ) -> None:
        """Index one dispatched record (RocketMQ ``buildIndex``).

        Puts ``topic#uniq_key`` (when not None) and ``topic#k`` for every non-empty ``k`` of
        ``keys`` split on single spaces. Skips ROLLBACK records (``tran_type`` is the sysFlag
        or its transaction bits) and records below the current file's endPhyOffset, which
        are indexed already: that makes re-dispatch after recovery idempotent. (The record
        *at* endPhyOffset is indexed again if re-dispatched, as in RocketMQ.)

        When the current file is full it is flushed, its endTimestamp is reported (see
        ``on_file_full``), and a new file takes over. That flush blocks for an
        ``fdatasync`` of the whole file, once per ``index_num - 1`` keys.

        Raises:
            DiskFullError: no disk blocks for an entry or a new file. The keys put before
                stay; indexing the record again (dispatch retries) puts only the others.
        """
        if tran_type & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        hashes: list[int] = []
        if uniq_key is not None:
            hashes.append(index_key_hash(index_key(topic, uniq_key)))
        if keys:
            hashes.extend(
                index_key_hash(index_key(topic, k)) for k in keys.split(KEY_SEPARATOR) if k
            )
        if hashes:
            self.put_hashes(hashes, [commit_log_offset] * len(hashes), store_timestamp)

    def put_hashes(self, key_hashes: list[int], offsets: list[int], store_timestamp: int) -> None:
        """Index keys given by their ``index_key_hash``: key i belongs to the record at
        ``offsets[i]``; records ascend and a record's keys are adjacent; all were stored at
        ``store_timestamp``. What ``build_index`` does for each record in turn.

        A record below the current file's endPhyOffset is skipped (indexed already); the
        record *at* it, dispatched again, gets only the keys neither of the last two files
        holds (see ``build_index``). Every later record is put as it comes.
        """
        n = len(key_hashes)
        if not n:
            return  # nothing to put: no need to create a file for it
        with self._lock:
            f = self._writable_file()
            i = 0
            while i < n:
                offset = offsets[i]
                end = f.end_phy_offset
                if offset > end or (
                    offset == end and f.index_count <= 1 and f.begin_timestamp <= 0
                ):
                    break  # this record and all later ones are new
                j = i + 1
                while j < n and offsets[j] == offset:
                    j += 1
                if offset == end:
                    # The last record indexed, dispatched again. Its keys may straddle two
                    # files and the newer one may be gone (dropped after a crash): put only
                    # the keys neither of the last two files holds. RocketMQ skips only
                    # offsets below the end, so it indexes this record again on every restart.
                    recent = self.files[-2:]
                    todo = [
                        h
                        for h in key_hashes[i:j]
                        if not any(x.holds_hash(h, offset) for x in recent)
                    ]
                    at = 0
                    while at < len(todo):
                        at = f.put_hashes(
                            todo, [offset] * len(todo), at, len(todo), store_timestamp
                        )
                        if at < len(todo):
                            f = self._roll()
                # else: below the end, indexed already (re-dispatch after recovery)
                i = j
            while i < n:
                i = f.put_hashes(key_hashes, offsets, i, n, store_timestamp)
                if i < n:
                    f = self._roll()

    def _writable_file(self) -> IndexFile:
        if not self.files:
            f = IndexFile.create_in(self.directory, self.hash_slot_num, self.index_num)
            self.files.append(f)
            log.info("index_file_created", file=f.name)
            return f
        last = self.files[-1]
        return self._roll() if last.is_full else last

    def _roll(self) -> IndexFile:
        """Flush the full newest file, report its end, and start the next one after it."""
        full = self.files[-1]
        full.flush()
        end_timestamp = full.end_timestamp
        f = IndexFile.create_in(
            self.directory,
            self.hash_slot_num,
            self.index_num,
            prev_end_timestamp=end_timestamp,
            prev_end_phy_offset=full.end_phy_offset,
            after_name=full.name,
        )
        self.files.append(f)
        log.info(
            "index_file_rolled",
            full_file=full.name,
            file=f.name,
            end_timestamp=end_timestamp,
            end_phy_offset=full.end_phy_offset,
        )
        if end_timestamp > 0:
            self.last_full_end_timestamp = end_timestamp
            if self.on_file_full is not None:
                self.on_file_full(end_timestamp)
        return f

    # ------------------------------------------------------------------------ reading

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryResult:
        """Offsets of records indexed under ``topic#key`` stored within [begin_ms, end_ms],
        newest first (RocketMQ ``queryOffset``).

        ``max_num`` is capped at 64 (maxMsgsNumBatch). Files are read newest to oldest,
        skipping those whose time span does not overlap the range, and the walk stops after
        the first file that began before ``begin_ms``. Only hashes are compared: the caller
        must check each record's keys, and offsets past the commit log (see ``truncate``).
        """
        max_num = min(max_num, MAX_MSGS_NUM_BATCH)
        offsets: list[int] = []
        full_key = index_key(topic, key)
        with self._lock:
            if not self.files:
                return QueryResult(offsets, 0, 0)
            newest = self.files[-1]
            result = QueryResult(offsets, newest.end_timestamp, newest.end_phy_offset)
            for f in reversed(self.files):
                if f.is_time_matched(begin_ms, end_ms):
                    offsets.extend(
                        f.select_offsets(full_key, max_num - len(offsets), begin_ms, end_ms)
                    )
                if f.begin_timestamp < begin_ms or len(offsets) >= max_num:
                    break
        return result

    @property
    def max_phy_offset(self) -> int:
        """The newest file's endPhyOffset (0 without files): how far indexing got."""
        with self._lock:
            return self.files[-1].end_phy_offset if self.files else 0

    # ------------------------------------------------------------------------ deleting

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete the oldest files whose endPhyOffset < ``min_commit_log_offset``, stopping
        at the first that is not, and never the newest (RocketMQ ``deleteExpiredFile``).
        Returns how many were deleted."""
        with self._lock:
            gone = 0
            for f in self.files[:-1]:
                if f.end_phy_offset >= min_commit_log_offset:
                    break
                f.destroy()
                gone += 1
                log.info(
                    "index_file_deleted",
                    file=f.name,
                    reason="expired",
                    end_phy_offset=f.end_phy_offset,
                    min_commit_log_offset=min_commit_log_offset,
                )
            del self.files[:gone]
            return gone

    def truncate(self, max_commit_log_offset: int) -> int:
        """Drop what lies past a recovered commit log that ends at ``max_commit_log_offset``.

        Files whose beginPhyOffset is at or past it are deleted; in the others the entries
        for records at or past it are removed (``IndexFile.truncate_entries``), so the index
        holds exactly the records of the recovered log and its endPhyOffset is again the
        offset of a real record. Returns how many files were deleted.
        """
        with self._lock:
            gone = 0
            while self.files and self.files[-1].begin_phy_offset >= max_commit_log_offset:
                f = self.files.pop()
                f.destroy()
                gone += 1
                log.info(
                    "index_file_deleted",
                    file=f.name,
                    reason="truncated",
                    begin_phy_offset=f.begin_phy_offset,
                    max_commit_log_offset=max_commit_log_offset,
                )
            for f in self.files:
                if f.end_phy_offset >= max_commit_log_offset:
                    removed = f.truncate_entries(max_commit_log_offset)
                    log.info(
                        "index_entries_truncated",
                        file=f.name,
                        removed=removed,
                        max_commit_log_offset=max_commit_log_offset,
                    )
            return gone

    # ------------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """Make every file durable (blocking: the store's I/O thread)."""
        with self._lock:
            for f in self.files:
                f.flush()

    def shutdown(self) -> None:
        """Flush and unmap every file (idempotent)."""
        with self._lock:
            for f in self.files:
                f.flush()
                f.close()
            self.files = []
