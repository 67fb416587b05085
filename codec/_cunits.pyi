"""Typed stub of the compiled consume-queue and index-entry packing (codec/_cunits.pyx): the
signatures of the pure functions of codec/units.py they stand in for."""

from codec.units import WritableBuffer

def pack_cq_units(
    buf: WritableBuffer,
    pos: int,
    offsets: list[int],
    sizes: list[int],
    tags_codes: list[int],
) -> int: ...
def put_index_entries(
    buf: WritableBuffer,
    hash_slot_num: int,
    index_count: int,
    hash_slot_count: int,
    key_hashes: list[int],
    offsets: list[int],
    start: int,
    stop: int,
    time_diff_s: int,
) -> tuple[int, int]: ...
