"""Consume-queue units and index-file entries, packed in bulk into a mapped file.

RocketMQ counterpart: the ConsumeQueue unit (``ConsumeQueue.putMessagePositionInfo``,
``CQ_STORE_UNIT_SIZE`` = 20) and the IndexFile entry and hash-slot layout
(``IndexFile.putKey``). The store keeps every file, allocation and header concern; these
functions only write the bytes of many units or entries at once, which is the per-message
work of dispatch.

Consume-queue unit (logical offset k at byte k * 20 of the queue)::

    0   commit-log offset   long
    8   record size         int
    12  tags code           long

Index file: a 40-byte header, ``hash_slot_num`` slots of 4 bytes (the newest entry number in
the bucket, 0 = empty), then 20-byte entries; entry 0 is never used::

    entry   0  keyHash       int   abs(Java String.hashCode(key))
            4  commit-log    long
           12  timeDiff      int   seconds since the header's beginTimestamp
           16  prev          int   previous entry number in the same slot, 0 = end of chain
"""

from __future__ import annotations

import contextlib
import mmap
import struct

from codec import _ext

CQ_UNIT_BYTES = 20
_CQ_UNIT = struct.Struct(
    ">"
    "q"  # 0  commit-log offset
    "i"  # 8  record size
    "q"  # 12 tags code
)
assert _CQ_UNIT.size == CQ_UNIT_BYTES

INDEX_HEADER_BYTES = 40
INDEX_SLOT_BYTES = 4
INDEX_ENTRY_BYTES = 20
_INDEX_SLOT = struct.Struct(">i")
_INDEX_ENTRY = struct.Struct(
    ">"
    "i"  # 0  keyHash
    "q"  # 4  commit-log offset
    "i"  # 12 timeDiff
    "i"  # 16 previous entry number in this slot
)
assert _INDEX_SLOT.size == INDEX_SLOT_BYTES and _INDEX_ENTRY.size == INDEX_ENTRY_BYTES

# What the store writes into: a mapping, or a bytearray (or a view of one) in tests.
WritableBuffer = bytearray | memoryview | mmap.mmap


def pack_cq_units(
    buf: WritableBuffer,
    pos: int,
    offsets: list[int],
    sizes: list[int],
    tags_codes: list[int],
) -> int:
    """Write consume-queue units from ``pos`` on, unit i being (``offsets[i]``,
    ``sizes[i]``, ``tags_codes[i]``); returns the position after the last one.

    Raises:
        ValueError: the three lists differ in length (the units before the shortest list's
            end are written, as ``zip(strict=True)`` goes).
        struct.error: a value does not fit its field, or a unit runs past ``buf`` (the units
            before it are written).
    """
    pack = _CQ_UNIT.pack_into
    for offset, size, code in zip(offsets, sizes, tags_codes, strict=True):
        pack(buf, pos, offset, size, code)
        pos += CQ_UNIT_BYTES
    return pos


def put_index_entries(  # noqa: PLR0917 - the file state goes in and out as plain ints
    buf: WritableBuffer,
    hash_slot_num: int,
    index_count: int,
    hash_slot_count: int,
    key_hashes: list[int],
    offsets: list[int],
    start: int,
    stop: int,
    time_diff_s: int,
) -> tuple[int, int]:
    """Append index entries for keys ``start`` to ``stop`` (exclusive) of ``key_hashes``,
    key i belonging to the record at ``offsets[i]``, all with ``time_diff_s``, to an index
    file mapped as ``buf`` whose next free entry number is ``index_count``; each becomes
    the head of its hash slot's chain. Returns the new (indexCount, hashSlotCount).

    A slot head outside 1..``index_count`` is garbage (a crash between writes) and is
    taken for an empty slot, as RocketMQ does; ``hash_slot_count`` counts the slots a key
    found empty. Room for the entries and the
    header are the caller's concern.

    Raises:
        struct.error: a value does not fit its field, or an entry runs past ``buf`` (the
            entries before it are written).
        IndexError: ``stop`` is past the end of a list (likewise).
    """
    unpack_slot = _INDEX_SLOT.unpack_from
    pack_slot = _INDEX_SLOT.pack_into
    pack_entry = _INDEX_ENTRY.pack_into
    entry_pos = (
        INDEX_HEADER_BYTES + hash_slot_num * INDEX_SLOT_BYTES + index_count * INDEX_ENTRY_BYTES
    )
    for i in range(start, stop):
        key_hash = key_hashes[i]
        slot_pos = INDEX_HEADER_BYTES + (key_hash % hash_slot_num) * INDEX_SLOT_BYTES
        (prev,) = unpack_slot(buf, slot_pos)
        if prev <= 0 or prev > index_count:
            prev = 0
            hash_slot_count += 1
        pack_entry(buf, entry_pos, key_hash, offsets[i], time_diff_s, prev)
        pack_slot(buf, slot_pos, index_count)
        index_count += 1
        entry_pos += INDEX_ENTRY_BYTES
    return index_count, hash_slot_count


# The compiled speedups (codec/_cunits.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
pack_cq_units_py = pack_cq_units
put_index_entries_py = put_index_entries

if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._cunits import pack_cq_units, put_index_entries
