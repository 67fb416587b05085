# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Typed Cython twins of codec/units.py: consume-queue units and index entries in bulk.

RocketMQ counterpart: the ConsumeQueue unit and the IndexFile entry / hash-slot layout, as
in codec/units.py (the reference: same arguments, same bytes, same results, same exceptions).

Each function runs its C loop over what fits the C types: a writable byte buffer, exact
lists of ints that fit their fields, positions inside the buffer. Anything else (another
sequence type, a value too large for its field, a unit past the end of the buffer, an index
past a list) is handed, from the first entry concerned on, to the pure function, which
writes or raises exactly what the reference does: the entries before it are written by
both alike, so the outcome is the reference's by construction.

Every index into the buffer is checked before the write (hence boundscheck=False).
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from codec._wire cimport borrow as _borrow
from codec._wire cimport get32 as _get32
from codec._wire cimport int32_of as _i32
from codec._wire cimport int64_of as _i64
from codec._wire cimport put32 as _put32
from codec._wire cimport put64 as _put64

import importlib

cdef enum:
    CQ_UNIT_BYTES = 20
    INDEX_HEADER_BYTES = 40
    INDEX_SLOT_BYTES = 4
    INDEX_ENTRY_BYTES = 20

cdef int64_t INT32_MIN = -2147483648
cdef int64_t INT32_MAX = 2147483647
# Counts and slot numbers beyond this go to the reference: far past any index file, and it
# keeps every position below computed in int64 without overflow.
cdef int64_t COUNT_LIMIT = 1 << 40

# codec.units, looked up at the first delegation: importing it here would make a direct
# `import codec._cunits` bind codec.units' names to the pure functions (a circular import).
cdef object _units_module = None


cdef object _units():
    global _units_module
    if _units_module is None:
        _units_module = importlib.import_module("codec.units")
    return _units_module


# ------------------------------------------------------------------------ C-level helpers


# ------------------------------------------------------------------------ consume queue


def pack_cq_units(buf, pos, offsets, sizes, tags_codes):
    """See codec.units.pack_cq_units (the reference)."""
    cdef Py_buffer view
    cdef unsigned char* dst
    cdef int64_t p, offset, size, code
    cdef Py_ssize_t i = 0, n
    cdef list offs, szs, codes
    if not (
        type(offsets) is list
        and type(sizes) is list
        and type(tags_codes) is list
        and _i64(pos, &p)
        and p >= 0
    ):
        return _units().pack_cq_units_py(buf, pos, offsets, sizes, tags_codes)
    offs = offsets
    szs = sizes
    codes = tags_codes
    n = len(offs)
    if len(szs) != n or len(codes) != n:
        # zip(strict=True) writes the common part, then says which list is off
        return _units().pack_cq_units_py(buf, pos, offsets, sizes, tags_codes)
    if n == 0:
        return pos
    if not _borrow(buf, &view, PyBUF_WRITABLE):
        return _units().pack_cq_units_py(buf, pos, offsets, sizes, tags_codes)
    try:
        dst = <unsigned char*>view.buf
        while i < n:
            if (
                p > view.len - CQ_UNIT_BYTES
                or not _i64(offs[i], &offset)
                or not _i32(szs[i], &size)
                or not _i64(codes[i], &code)
            ):
                break
            _put64(dst + p, <uint64_t>offset)
            _put32(dst + p + 8, <uint32_t>size)
            _put64(dst + p + 12, <uint64_t>code)
            p += CQ_UNIT_BYTES
            i += 1
    finally:
        PyBuffer_Release(&view)
    if i < n:
        # The rest as the reference does it: it raises what struct.pack_into raises.
        return _units().pack_cq_units_py(buf, p, offs[i:], szs[i:], codes[i:])
    return p


# ------------------------------------------------------------------------ index file


def put_index_entries(
    buf,
    hash_slot_num,
    index_count,
    hash_slot_count,
    key_hashes,
    offsets,
    start,
    stop,
    time_diff_s,
):
    """See codec.units.put_index_entries (the reference)."""
    cdef Py_buffer view
    cdef unsigned char* dst
    cdef int64_t slots, count, slot_count, first, last, diff
    cdef int64_t key_hash, slot, slot_pos, entry_pos, prev, i
    cdef int64_t offset = 0  # set by _i64 before use; gcc cannot see through the pointer
    cdef list hashes, offs
    cdef Py_ssize_t n_hashes, n_offsets
    if not (
        type(key_hashes) is list
        and type(offsets) is list
        and _i64(hash_slot_num, &slots)
        and 0 < slots <= COUNT_LIMIT
        and _i64(index_count, &count)
        and -COUNT_LIMIT <= count <= COUNT_LIMIT
        and _i64(hash_slot_count, &slot_count)
        and -COUNT_LIMIT <= slot_count <= COUNT_LIMIT
        and _i64(start, &first)
        and first >= 0
        and _i64(stop, &last)
        and _i32(time_diff_s, &diff)
    ):
        return _units().put_index_entries_py(
            buf,
            hash_slot_num,
            index_count,
            hash_slot_count,
            key_hashes,
            offsets,
            start,
            stop,
            time_diff_s,
        )
    if first >= last:
        return index_count, hash_slot_count
    if not _borrow(buf, &view, PyBUF_WRITABLE):
        return _units().put_index_entries_py(
            buf,
            hash_slot_num,
            index_count,
            hash_slot_count,
            key_hashes,
            offsets,
            start,
            stop,
            time_diff_s,
        )
    hashes = key_hashes
    offs = offsets
    n_hashes = len(hashes)
    n_offsets = len(offs)
    i = first
    try:
        dst = <unsigned char*>view.buf
        entry_pos = INDEX_HEADER_BYTES + slots * INDEX_SLOT_BYTES + count * INDEX_ENTRY_BYTES
        while i < last:
            if (
                i >= n_hashes
                or i >= n_offsets
                or not INT32_MIN <= count <= INT32_MAX
                or entry_pos < 0
                or entry_pos > view.len - INDEX_ENTRY_BYTES
                or not _i32(hashes[i], &key_hash)
                or not _i64(offs[i], &offset)
            ):
                break
            # Python's modulo: the slot of a negative hash counts from the top, as in the
            # reference (C's % truncates toward zero).
            slot = key_hash % slots
            if slot < 0:
                slot += slots
            slot_pos = INDEX_HEADER_BYTES + slot * INDEX_SLOT_BYTES
            if slot_pos > view.len - INDEX_SLOT_BYTES:
                break
            prev = _get32(dst + slot_pos)
            if prev <= 0 or prev > count:
                prev = 0
                slot_count += 1
            _put32(dst + entry_pos, <uint32_t>key_hash)
            _put64(dst + entry_pos + 4, <uint64_t>offset)
            _put32(dst + entry_pos + 12, <uint32_t>diff)
            _put32(dst + entry_pos + 16, <uint32_t>prev)
            _put32(dst + slot_pos, <uint32_t>count)
            count += 1
            entry_pos += INDEX_ENTRY_BYTES
            i += 1
    finally:
        PyBuffer_Release(&view)
    if i < last:
        # From this entry on as the reference does it: it raises what it raises.
        return _units().put_index_entries_py(
            buf, hash_slot_num, count, slot_count, key_hashes, offsets, i, stop, time_diff_s
        )
    return count, slot_count
