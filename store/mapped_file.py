"""Fixed-size memory-mapped segments and the ordered queue of them.

RocketMQ counterpart: ``MappedFile``, ``MappedFileQueue`` and ``ReferenceResource``.

A segment is a file of exactly ``file_bytes`` bytes, named by the global offset of its first
byte as 20 decimal digits, and mapped read-write. Writes copy into the mapping;
``flush`` makes written pages durable with ``fdatasync`` on the file, not ``mmap.flush``:
CPython's ``mmap.flush`` holds the GIL for the whole msync (measured: another thread got
11 ticks/s during it, against 8,800 during ``fdatasync``), which would stall the event loop,
while ``fdatasync`` releases it and on Linux writes back pages dirtied through a shared
mapping just the same.

Readers ``hold()`` a segment while they use views of it and ``release()`` it after; a
destroyed segment is unmapped and deleted only when the last holder lets go (a memoryview of
an mmap pins it: ``close()`` raises ``BufferError`` while one exists).

Files are sparse, as RocketMQ's are (``warmMapedFileEnable=false``): full size from the start
(the format and the load checks rely on it) but disk blocks only for what is allocated. A
default store holding a few messages so takes a few MiB, not 1.5 GB. The catch: a store
through a mapping into a hole must allocate a block, and on a full disk that fault is a
SIGBUS, which kills the process. So no byte is written through a mapping before its range is
allocated with ``posix_fallocate``, which fails cleanly with ENOSPC (``DiskFullError``):
append-only files allocate a window ahead of their write position (``allocate_ahead_bytes``),
one integer comparison per append deciding whether the next window is due. The window also
covers ``ALLOCATE_GUARD_BYTES`` past the last byte written, because recovery reads the header
after the last record, and on tmpfs even a read fault in a hole allocates a page. Recovery
reads and zeroes what lies past the valid end with ``pread``/``pwrite`` for the same reason.
A window as large as the file (``warmMapedFileEnable=true`` for the commit log) allocates a
whole segment at creation. ``advance_allocation`` is the one rule, for segments and index
files alike. Files that make stored messages readable (consume queues, index entries) take
only the pages a write needs when a whole window finds no room (``shrink_when_full``); the
commit log does not, and its disk guard stops writes well before (store/retention.py).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import re
from pathlib import Path

import structlog

from store.errors import DiskFullError, StoreLoadError

log = structlog.get_logger(__name__)

OS_PAGE_BYTES = 4096
_ZERO_CHUNK_BYTES = 1 << 20
_ZERO_CHUNK = memoryview(bytes(_ZERO_CHUNK_BYTES))
_SEGMENT_NAME = re.compile(r"\d{20}")
CREATING_SUFFIX = ".creating"
# Flushed bytes older than this stay mapped in the process: consumers that keep up read them.
RELEASE_KEEP_BYTES = 4 << 20
RELEASE_CHUNK_BYTES = 1 << 20  # release in steps of this much (one madvise per step)
MADV_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)  # None off Linux/BSD
ORPHAN_SUFFIX = ".orphan"  # segments found after a gap, kept for forensics
# Allocation windows: big enough that allocating is rare (one posix_fallocate per window),
# small enough that an idle store takes little disk.
ALLOCATE_AHEAD_BYTES = 1 << 20
# Bytes past the last one written that are kept allocated: recovery reads the header of the
# record that would follow (8 bytes in the commit log, a 20-byte consume-queue unit, a 40-byte
# timer-log entry) and must not fault in a hole.
ALLOCATE_GUARD_BYTES = 64
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# posix_fallocate emulates itself where fallocate is missing; these mean it cannot at all.
_NO_FALLOCATE_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOSYS})


def segment_name(start_offset: int) -> str:
    return f"{start_offset:020d}"


def allocate_range(fd: int, path: Path, position: int, length: int) -> bool:
    """Give ``length`` bytes of a store file from ``position`` on their disk blocks, so that
    writes there through a mapping cannot fault on a full disk.

    Returns False where the file system cannot preallocate at all: writes there are then as
    unprotected as they always are on such a file system (logged once per file).

    Raises:
        DiskFullError: no room (ENOSPC, EDQUOT); nothing was written.
        OSError: any other failure of ``posix_fallocate``.
    """
    if length <= 0:
        return True
    try:
        os.posix_fallocate(fd, position, length)
    except OSError as exc:
        if exc.errno in _DISK_FULL_ERRNOS:
            raise DiskFullError(str(path), position, length, exc.errno) from None
        if exc.errno in _NO_FALLOCATE_ERRNOS:
            log.warning("store_file_preallocation_unsupported", path=str(path), error=str(exc))
            return False
        raise
    return True


def map_file(
    fd: int,
    path: Path,
    file_bytes: int,
    *,
    create: bool,
    allocate_bytes: int = 0,
    least_bytes: int | None = None,
    size_hint: str = "",
) -> tuple[mmap.mmap, int]:
    """Map a store file read-write; returns the mapping and how many bytes from the start are
    known to be allocated.

    A new file is made ``file_bytes`` long, sparse, with its first ``allocate_bytes``
    allocated, or only its first ``least_bytes`` when there is no room for more (all of it
    where the file system cannot preallocate: there is nothing more to ask). A loaded file
    is checked to be exactly ``file_bytes`` long (``size_hint`` adds a likely cause to the
    error); what of it is allocated is not known, so 0.

    Raises:
        DiskFullError: no room for the first ``allocate_bytes`` (or ``least_bytes``).
        StoreLoadError: a loaded file of another size.
    """
    allocated = 0
    if create:
        os.ftruncate(fd, file_bytes)
        allocated = min(allocate_bytes, file_bytes)
        try:
            done = allocate_range(fd, path, 0, allocated)
        except DiskFullError:
            if least_bytes is None or least_bytes >= allocated:
                raise
            allocated = min(least_bytes, file_bytes)
            done = allocate_range(fd, path, 0, allocated)
        if not done:
            allocated = file_bytes
    else:
        actual = os.fstat(fd).st_size
        if actual != file_bytes:
            raise StoreLoadError(f"{path} has {actual} bytes, expected {file_bytes}{size_hint}")
    mm = mmap.mmap(fd, file_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return mm, allocated


def allocation_end(end: int, ahead_bytes: int, file_bytes: int) -> int:
    """Where to allocate up to so that bytes up to ``end`` can be written: the end of the
    ``ahead_bytes`` window that holds ``end`` plus the guard (so between the guard and one
    window past ``end``), never past the file."""
    return min(file_bytes, (end + ALLOCATE_GUARD_BYTES) // ahead_bytes * ahead_bytes + ahead_bytes)


def least_allocation_end(end: int, file_bytes: int) -> int:
    """The least a file must have allocated for bytes up to ``end`` to be written: through
    the guard after them, in whole pages."""
    least = end + ALLOCATE_GUARD_BYTES
    return min(file_bytes, least + -least % OS_PAGE_BYTES)


def advance_allocation(  # noqa: PLR0917 - the state of one file's allocation
    fd: int,
    path: Path,
    allocated: int,
    written: int,
    end: int,
    ahead_bytes: int,
    file_bytes: int,
    *,
    shrink: bool = False,
) -> int:
    """Allocate the window that lets bytes up to ``end`` be written, in a file whose first
    ``allocated`` bytes are known allocated and first ``written`` bytes hold data; returns
    the new ``allocated``.

    With ``shrink``, a window that finds no room gives way to the least that lets the bytes
    be written (``least_allocation_end``): consume queues and the index, which make stored
    messages readable, take the last pages of a disk rather than stop at a window.

    Raises:
        DiskFullError: no room; nothing was allocated.
    """
    target = allocation_end(end, ahead_bytes, file_bytes)
    # What is written is allocated: a loaded file starts from its write position.
    start = max(allocated, written - written % OS_PAGE_BYTES)
    if target <= start:
        return max(allocated, target)
    try:
        done = allocate_range(fd, path, start, target - start)
    except DiskFullError:
        least = least_allocation_end(end, file_bytes)
        if not shrink or least >= target:
            raise
        done = allocate_range(fd, path, start, least - start) if least > start else True
        target = least
    if not done:
        target = file_bytes
    return max(allocated, target)


def writable_until(allocated: int, file_bytes: int) -> int:
    """How far writes may go without allocating, when ``allocated`` bytes are: the guard
    stays allocated past the last byte written (all of the file once it is allocated)."""
    return file_bytes if allocated >= file_bytes else allocated - ALLOCATE_GUARD_BYTES


class MappedFile:
    """One segment.

    Positions are relative to the segment start. ``wrote_position`` is where the next append
    goes; ``flushed_position`` how far bytes are known durable.
    """

    def __init__(
        self,
        path: Path,
        file_bytes: int,
        *,
        create: bool,
        allocate_ahead_bytes: int = ALLOCATE_AHEAD_BYTES,
        shrink_when_full: bool = False,
    ) -> None:
        self.path = path
        self.file_bytes = file_bytes
        self.start_offset = int(path.name)
        self.allocate_ahead_bytes = max(allocate_ahead_bytes, OS_PAGE_BYTES)
        # A window that finds no room gives way to the pages the write needs (see
        # advance_allocation): what consume queues do, not the commit log.
        self.shrink_when_full = shrink_when_full
        # A new segment is built under a temporary name and renamed into place once it has
        # its full size: a crash mid-creation then leaves a stray temporary file, never a
        # short segment that would stop the next load.
        open_path = path.with_name(path.name + CREATING_SUFFIX) if create else path
        if create and path.exists():
            raise FileExistsError(f"segment {path} exists already")
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(open_path, flags, 0o644)
        first = allocation_end(0, self.allocate_ahead_bytes, file_bytes)
        try:
            self.mm, allocated = map_file(
                fd,
                path,
                file_bytes,
                create=create,
                allocate_bytes=first,
                least_bytes=least_allocation_end(0, file_bytes) if shrink_when_full else None,
            )
            if create:
                os.rename(open_path, path)
        except BaseException:
            os.close(fd)
            if create:
                with contextlib.suppress(OSError):
                    open_path.unlink()
            raise
        self.fd = fd
        self.view = memoryview(self.mm)
        # Bytes from the segment start known to have their disk blocks (0 for a loaded
        # segment: not known yet), and how far appends may write before the next window.
        self.allocated_position = allocated
        self.allocated_until = writable_until(allocated, file_bytes)
        self.wrote_position = 0
        self.flushed_position = 0
        self.released_position = 0  # bytes below it were dropped from the page tables
        self._refs = 1  # the queue's own reference
        self._available = True
        self._unmapped = False

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
            f"flushed={self.flushed_position})"
        )

    @property
    def end_offset(self) -> int:
        """Global offset just past the last written byte."""
        return self.start_offset + self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_bytes

    @property
    def free_bytes(self) -> int:
        return self.file_bytes - self.wrote_position

    # ---------------------------------------------------------------------- references

    def hold(self) -> bool:
        """Take a reference for reading; False if the segment is being destroyed."""
        if not self._available:
            return False
        self._refs += 1
        return True

    def release(self) -> None:
        self._refs -= 1
        if self._refs <= 0:
            self._unmap()

    def destroy(self) -> None:
        """Drop the queue's reference and delete the file; unmapped when no reader holds it."""
        if not self._available:
            return
        self._available = False
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.release()

    def close(self) -> None:
        """Unmap without deleting (store shutdown)."""
        if self._available:
            self._available = False
            self.release()

    def _unmap(self) -> None:
        if self._unmapped:
            return
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            # A reader still has a view (it did not release it): leave the mapping to the
            # garbage collector rather than crash; the file is already closed for writers.
            log.warning("segment_unmap_deferred", segment=self.path.name)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self._unmapped = True

    # -------------------------------------------------------------------------- writing

    def append(self, data: bytes | bytearray | memoryview) -> bool:
        """Copy ``data`` at the write position; False (nothing written) if it does not fit.

        Raises:
            DiskFullError: no disk blocks for it; nothing was written.
        """
        n = len(data)
        pos = self.wrote_position
        end = pos + n
        if end > self.file_bytes:
            return False
        if end > self.allocated_until:
            self.allocate(end)
        self.mm[pos:end] = data
        self.wrote_position = end
        return True

    def reserve(self, end: int) -> None:
        """Make sure bytes up to segment position ``end`` may be written through the mapping
        (callers that write the mapping themselves call it first).

        Raises:
            DiskFullError: no disk blocks for them; nothing was changed.
        """
        if end > self.allocated_until:
            self.allocate(end)

    def allocate(self, end: int) -> None:
        """Allocate the window that lets bytes up to ``end`` be written (the slow path of
        ``append`` and ``reserve``; callers compare with ``allocated_until`` first).

        Raises:
            DiskFullError: no room; ``allocated_position`` is unchanged.
        """
        self.allocated_position = advance_allocation(
            self.fd,
            self.path,
            self.allocated_position,
            self.wrote_position,
            end,
            self.allocate_ahead_bytes,
            self.file_bytes,
            shrink=self.shrink_when_full,
        )
        self.allocated_until = writable_until(self.allocated_position, self.file_bytes)

    def dirty_pages(self) -> int:
        return self.wrote_position // OS_PAGE_BYTES - self.flushed_position // OS_PAGE_BYTES

    def flush(self, least_pages: int = 0) -> int:
        """Make written bytes durable if at least ``least_pages`` pages are dirty (or the
        segment is full); returns the new flushed position. Blocking: call it from the
        store's I/O thread."""
        target = self.wrote_position
        if target <= self.flushed_position:
            return self.flushed_position
        if least_pages > 0 and not self.is_full and self.dirty_pages() < least_pages:
            return self.flushed_position
        if self._available:
            os.fdatasync(self.fd)
        self.flushed_position = max(self.flushed_position, target)
        self._release_flushed()
        return self.flushed_position

    def _release_flushed(self) -> None:
        """Drop durable pages from the process's page tables (``MADV_DONTNEED``).

        Every page the broker ever wrote through the mapping otherwise stays in its resident
        set, so RSS grows by the whole commit log it writes (measured: 0.1 to 0.7 GiB over
        10 GB). The pages stay in the page cache and on disk: a later read faults them back
        in from there, and a shared file mapping loses nothing. Only bytes already durable
        are released, and the newest ``RELEASE_KEEP_BYTES`` stay, for readers that keep up.
        """
        if MADV_DONTNEED is None or not self._available:
            return
        if self.flushed_position >= self.file_bytes:
            upto = self.file_bytes
        else:
            keep_from = self.flushed_position - RELEASE_KEEP_BYTES
            upto = keep_from - keep_from % RELEASE_CHUNK_BYTES
        if upto - self.released_position < RELEASE_CHUNK_BYTES and upto < self.file_bytes:
            return
        if upto <= self.released_position:
            return
        try:
            self.mm.madvise(MADV_DONTNEED, self.released_position, upto - self.released_position)
        except (ValueError, OSError):  # unmapped meanwhile (retention, shutdown)
            return
        self.released_position = upto

    def truncate_from(self, position: int) -> None:
        """Zero the bytes after ``position`` and make it the write position (recovery).

        Appends are sequential, so whatever a crash left past the valid end is contiguous
        with it: zeroing stops at the first chunk that is already zero. Zeroing (and so
        dirtying) the whole rest of a 1 GiB segment on every restart would cost far more.
        This reads and writes the file, not the mapping: past the written bytes lie holes,
        and a fault there could allocate (tmpfs) or, on a full disk, raise SIGBUS.
        """
        pos = position
        while pos < self.file_bytes:
            end = min(pos + _ZERO_CHUNK_BYTES, self.file_bytes)
            used = len(os.pread(self.fd, end - pos, pos).rstrip(b"\0"))
            if not used:
                break
            zeroed = 0
            while zeroed < used:
                wrote = os.pwrite(self.fd, _ZERO_CHUNK[zeroed:used], pos + zeroed)
                if wrote <= 0:
                    raise OSError(errno.EIO, f"cannot zero {self.path} at {pos + zeroed}")
                zeroed += wrote
            pos = end
        self.wrote_position = position
        self.flushed_position = min(self.flushed_position, position)


class MappedFileQueue:
    """The segments of one directory, ordered by start offset.

    Args:
        directory: created if missing.
        file_bytes: size of every segment.
    """

    def __init__(
        self,
        directory: Path,
        file_bytes: int,
        *,
        set_aside_dir: Path | None = None,
        allocate_ahead_bytes: int = ALLOCATE_AHEAD_BYTES,
        shrink_when_full: bool = False,
    ) -> None:
        self.directory = directory
        self.file_bytes = file_bytes
        # Disk blocks: allocated this far ahead of writes (whole segments when it is
        # file_bytes), or less when the disk has no room for a window (shrink_when_full).
        self.allocate_ahead_bytes = allocate_ahead_bytes
        self.shrink_when_full = shrink_when_full
        # Where unusable segments found at load are kept for forensics; None deletes them
        # (consume queues are rebuilt from the commit log, the commit log is not).
        self.set_aside_dir = set_aside_dir
        self.files: list[MappedFile] = []
        self.flushed_where = 0  # global offset known durable

    def load(self) -> None:
        """Map every segment on disk. Write positions start at the segment end (recovery
        moves them back); a segment of the wrong size is an error naming the file.

        Raises:
            StoreLoadError: a misnamed or wrongly sized segment, or a gap between segments.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob("*" + CREATING_SUFFIX):
            log.warning("segment_creation_interrupted", path=str(stray))
            stray.unlink()
        names = sorted(
            p.name for p in self.directory.iterdir() if p.is_file() and not p.name.startswith(".")
        )
        expected = None
        segment_names = [n for n in names if _SEGMENT_NAME.fullmatch(n)]
        for name in names:
            if not _SEGMENT_NAME.fullmatch(name):
                continue  # side files (truncated tails saved for forensics)
            start = int(name)
            if start % self.file_bytes:
                raise StoreLoadError(
                    f"segment {self.directory / name} does not start at a multiple of "
                    f"{self.file_bytes}"
                )
            if expected is not None and start != expected:
                # Nothing after a gap is reachable from the data before it, so recovery would
                # cut it anyway; keep the bytes, renamed, instead of refusing to start.
                self._orphan(names[names.index(name) :], expected)
                break
            size = (self.directory / name).stat().st_size
            if size != self.file_bytes and name == segment_names[-1]:
                # The newest file, short: a crash while it was being created (before files
                # were built under a temporary name). It holds no records; set it aside.
                self._orphan([name], start)
                break
            mf = MappedFile(
                self.directory / name,
                self.file_bytes,
                create=False,
                allocate_ahead_bytes=self.allocate_ahead_bytes,
                shrink_when_full=self.shrink_when_full,
            )
            mf.wrote_position = mf.flushed_position = self.file_bytes
            self.files.append(mf)
            expected = start + self.file_bytes

    def _orphan(self, names: list[str], expected: int) -> None:
        for name in names:
            if not _SEGMENT_NAME.fullmatch(name):
                continue
            path = self.directory / name
            if self.set_aside_dir is None:
                path.unlink()
            else:
                self.set_aside_dir.mkdir(parents=True, exist_ok=True)
                path.rename(self.set_aside_dir / f"{self.directory.name}-{name}{ORPHAN_SUFFIX}")
        log.warning(
            "segments_after_gap_set_aside",
            directory=str(self.directory),
            missing_segment=segment_name(expected),
            set_aside=[n for n in names if _SEGMENT_NAME.fullmatch(n)],
        )

    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Global offset just past the last written byte."""
        return self.files[-1].end_offset if self.files else 0

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def last_writable(self, start_offset_if_empty: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full.

        Raises:
            DiskFullError: no room for a new segment's first window (nothing was created).
        """
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        if last is None:
            start = start_offset_if_empty - start_offset_if_empty % self.file_bytes
        else:
            start = last.start_offset + self.file_bytes
        mf = MappedFile(
            self.directory / segment_name(start),
            self.file_bytes,
            create=True,
            allocate_ahead_bytes=self.allocate_ahead_bytes,
            shrink_when_full=self.shrink_when_full,
        )
        self.files.append(mf)
        log.debug("segment_created", segment=mf.path.name, directory=str(self.directory))
        return mf

    def find(self, offset: int) -> MappedFile | None:
        """The segment containing global ``offset`` (None if below min or past the end)."""
        files = self.files
        if not files or offset < files[0].start_offset:
            return None
        index = (offset - files[0].start_offset) // self.file_bytes
        if index >= len(files):
            return None
        mf = files[index]
        if not mf.start_offset <= offset < mf.start_offset + self.file_bytes:
            return None  # pragma: no cover - segments are contiguous by construction
        return mf

    def flush(self, least_pages: int = 0) -> int:
        """Flush the segment holding ``flushed_where`` (and move on when it is full)."""
        mf = self.find(self.flushed_where) or self.last()
        if mf is None:
            return self.flushed_where
        position = mf.flush(least_pages)
        self.flushed_where = mf.start_offset + position
        return self.flushed_where

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything from global ``offset`` on: later segments are deleted, the one
        containing it is zeroed from there (recovery, slave truncation)."""
        keep: list[MappedFile] = []
        for mf in reversed(self.files):  # newest first: a crash midway leaves no gap
            if mf.start_offset + self.file_bytes <= offset:
                keep.append(mf)
            elif mf.start_offset <= offset:
                mf.truncate_from(offset - mf.start_offset)
                keep.append(mf)
            else:
                mf.destroy()
        keep.reverse()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_first(self, count: int) -> list[MappedFile]:
        """Destroy the ``count`` oldest segments (never the last); returns them."""
        count = min(count, len(self.files) - 1)
        gone, self.files = self.files[:count], self.files[count:]
        for mf in gone:
            mf.destroy()
        return gone

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []
