"""The compiled consume-queue and index-entry packing (codec/_cunits.pyx) against its
pure reference (codec/units.py).

Both must leave the same bytes in the buffer, return the same values and raise the same
exception type with the same message: for valid units and entries, and for values that do
not fit their fields, positions past the buffer, lists of different lengths, garbage slot
heads (a crash between writes), negative hashes, and the buffer types the store uses.
"""

from __future__ import annotations

import mmap
import random
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codec.units

compiled = pytest.importorskip("codec._cunits", reason="compiled speedups not built")

pure_pack_cq_units = codec.units.pack_cq_units_py
pure_put_index_entries = codec.units.put_index_entries_py

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TOO_BIG_FOR_INT32 = st.sampled_from([2**31, -(2**31) - 1, 2**40])
TOO_BIG_FOR_INT64 = st.sampled_from([2**63, -(2**63) - 1, 2**80])
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """("ok", result) or ("raised", exception type, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # the point is to compare whatever either raises
        return ("raised", type(exc), str(exc))


def run_both(initial: bytes, kind: str, fn_name: str, *args: Any) -> None:
    """Both implementations on copies of ``initial`` (as ``kind``): same outcome, same bytes."""
    results = []
    for fn in (getattr(compiled, fn_name), getattr(codec.units, f"{fn_name}_py")):
        if kind == "mmap":
            with mmap.mmap(-1, max(len(initial), 1)) as mm:
                mm[: len(initial)] = initial
                buf: Any = mm if initial else memoryview(mm)[:0]
                got = outcome(fn, buf, *args)
                if isinstance(buf, memoryview):
                    buf.release()
                results.append((got, mm[: len(initial)]))
            continue
        backing = bytearray(initial)
        if kind == "bytes":
            got = outcome(fn, bytes(backing), *args)
        elif kind == "memoryview":
            with memoryview(backing) as view:
                got = outcome(fn, view, *args)
        else:
            got = outcome(fn, backing, *args)
        results.append((got, bytes(backing)))
    assert results[0] == results[1]


KINDS = st.sampled_from(["bytearray", "bytearray", "memoryview", "mmap", "bytes"])


# --------------------------------------------------------------------------- consume queue


@st.composite
def spoiled(draw: st.DrawFn, values: list[int], too_big: st.SearchStrategy[int]) -> list[int]:
    """``values``, or now and then with one of them replaced by one too big for its field."""
    if values and draw(st.integers(0, 7)) == 0:
        values[draw(st.integers(0, len(values) - 1))] = draw(too_big)
    return values


@st.composite
def cq_lists(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    n = draw(st.integers(0, 40))
    offsets = draw(spoiled(draw(st.lists(INT64, min_size=n, max_size=n)), TOO_BIG_FOR_INT64))
    sizes = draw(spoiled(draw(st.lists(INT32, min_size=n, max_size=n)), TOO_BIG_FOR_INT32))
    codes = draw(spoiled(draw(st.lists(INT64, min_size=n, max_size=n)), TOO_BIG_FOR_INT64))
    if draw(st.integers(0, 9)) == 0:  # now and then, lists of different lengths
        which = draw(st.sampled_from([offsets, sizes, codes]))
        shorter = draw(st.booleans())
        if which and shorter:
            which.pop()
        else:
            which.append(1)
    return offsets, sizes, codes


@SETTINGS
@given(
    lists=cq_lists(),
    pos=st.one_of(st.integers(0, 100), st.integers(-30, 1000)),
    slack=st.one_of(st.integers(0, 40), st.integers(-45, 0)),
    kind=KINDS,
)
def test_pack_cq_units_matches(
    lists: tuple[list[int], list[int], list[int]], pos: int, slack: int, kind: str
) -> None:
    """Units into a buffer that has room for them (slack >= 0) or not quite."""
    offsets, sizes, codes = lists
    size = max(max(pos, 0) + 20 * len(offsets) + slack, 0)
    run_both(
        bytes(range(256)) * (size // 256) + bytes(size % 256),
        kind,
        "pack_cq_units",
        pos,
        offsets,
        sizes,
        codes,
    )


def test_pack_cq_units_known_bytes() -> None:
    buf = bytearray(60)
    assert compiled.pack_cq_units(buf, 20, [1 << 40, 5], [300, 2**31 - 1], [-1, 0]) == 60
    assert buf[20:] == struct.pack(">qiqqiq", 1 << 40, 300, -1, 5, 2**31 - 1, 0)
    assert buf[:20] == bytes(20)


@pytest.mark.parametrize(
    "args",
    [
        (0, [1], [2**31], [0]),  # a size that does not fit: struct's error after nothing
        (0, [1, 2], [1, 2**31], [0, 0]),  # ... after the first unit
        (0, [1, 2], [1], [0, 0]),  # lists of different lengths
        (0, [1], [1, 2], [0]),
        (0, [1, 2], [1, 2], [0]),
        (0, (1, 2), (1, 2), (0, 0)),  # tuples: the reference takes any iterable
        (0, [1.5], [1], [0]),
        (0, ["1"], [1], [0]),
        (True, [1], [1], [0]),
        (2.0, [1], [1], [0]),
        (-20, [1], [1], [0]),  # negative: struct counts from the end
        (-100, [1], [1], [0]),
        (90, [1], [1], [0]),  # past the end
        (2**70, [1], [1], [0]),
        (100, [], [], []),  # nothing to write, wherever
    ],
    ids=repr,
)
@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "mmap", "bytes"])
def test_pack_cq_units_edges(args: tuple[Any, ...], kind: str) -> None:
    run_both(bytes(100), kind, "pack_cq_units", *args)


# ------------------------------------------------------------------------------- index


def index_file(slots: int, entries: int, rng: random.Random, garbage: bool) -> bytes:
    """An index file's bytes: header, slots (some holding garbage heads), entries."""
    data = bytearray(40 + slots * 4 + entries * 20)
    for s in range(slots):
        if garbage or rng.random() < 0.3:
            value = rng.choice([0, 1, 2, 3, -1, 2**31 - 1, -(2**31), rng.randrange(0, entries + 2)])
            struct.pack_into(">i", data, 40 + s * 4, value)
    return bytes(data)


@st.composite
def index_keys(draw: st.DrawFn) -> tuple[list[int], list[int], int, int]:
    """Key hashes (any int32, mostly non-negative as index_key_hash makes them), their
    records' offsets, and the [start, stop) to put: mostly inside the lists."""
    n = draw(st.integers(0, 40))
    hashes = draw(st.lists(st.one_of(st.integers(0, 2**31 - 1), INT32), min_size=n, max_size=n))
    hashes = draw(spoiled(hashes, TOO_BIG_FOR_INT32))
    offsets = draw(
        spoiled(draw(st.lists(st.integers(0, 2**50), min_size=n, max_size=n)), TOO_BIG_FOR_INT64)
    )
    if draw(st.integers(0, 9)) == 0:
        offsets = offsets[: draw(st.integers(0, n))]  # fewer offsets than keys
    if draw(st.integers(0, 5)) == 0:
        start, stop = draw(st.integers(-2, n + 2)), draw(st.integers(-2, n + 2))
    else:
        start = draw(st.integers(0, n))
        stop = draw(st.integers(start, n))
    return hashes, offsets, start, stop


@SETTINGS
@given(
    slots=st.integers(1, 9),
    room=st.integers(0, 45),
    cut=st.one_of(st.just(0), st.just(0), st.integers(0, 60)),
    seed=st.integers(0, 2**32),
    garbage=st.booleans(),
    index_count=st.one_of(st.integers(1, 3), st.integers(-3, 12)),
    hash_slot_count=st.integers(-2, 10),
    keys=index_keys(),
    time_diff_s=st.one_of(st.integers(0, 2**31 - 1), INT32, TOO_BIG_FOR_INT32),
    kind=KINDS,
)
def test_put_index_entries_matches(
    *,
    slots: int,
    room: int,
    cut: int,
    seed: int,
    garbage: bool,
    index_count: int,
    hash_slot_count: int,
    keys: tuple[list[int], list[int], int, int],
    time_diff_s: int,
    kind: str,
) -> None:
    """Entries into a file with room for them, or cut short; slots empty, holding older
    heads, or garbage."""
    hashes, offsets, start, stop = keys
    data = index_file(slots, max(index_count, 0) + len(hashes) + room, random.Random(seed), garbage)
    data = data[: len(data) - min(cut, len(data))]
    run_both(
        data,
        kind,
        "put_index_entries",
        slots,
        index_count,
        hash_slot_count,
        hashes,
        offsets,
        start,
        stop,
        time_diff_s,
    )


def test_put_index_entries_chains_like_the_store() -> None:
    """Keys landing in one slot chain newest first; counts as RocketMQ keeps them."""
    buf = bytearray(40 + 2 * 4 + 6 * 20)
    assert compiled.put_index_entries(buf, 2, 1, 0, [4, 6, 5, -3], [10, 11, 12, 13], 0, 4, 7) == (
        5,
        2,
    )
    entry = struct.Struct(">iqii")
    assert [entry.unpack_from(buf, 48 + n * 20) for n in range(1, 5)] == [
        (4, 10, 7, 0),
        (6, 11, 7, 1),
        (5, 12, 7, 0),
        (-3, 13, 7, 3),  # -3 % 2 == 1, as in Python: the slot of key 5
    ]
    assert struct.unpack_from(">ii", buf, 40) == (2, 4)


@pytest.mark.parametrize(
    "args",
    [
        (0, 1, 0, [1], [1], 0, 1, 0),  # no slots: ZeroDivisionError
        (-4, 1, 0, [1], [1], 0, 1, 0),  # negative slot count
        (4, 1, 0, [1], [1], 0, 1, 2**31),  # timeDiff does not fit
        (4, 1, 0, [1], [1], 0, 0, 2**31),  # ... but nothing to write
        (4, 1, 0, [1], [1], 3, 1, 0),  # start past stop
        (4, 1, 0, [1, 2], [1], 0, 2, 0),  # an offset missing: IndexError after one
        (4, 1, 0, [1, 2], [1, 2], 0, 3, 0),  # stop past the lists
        (4, 1, 0, [1, 2], [1, 2], -1, 2, 0),  # a negative start wraps, as list indexes do
        (4, 1, 0, [1, 2**31], [1, 2], 0, 2, 0),  # a hash that does not fit
        (4, 1, 0, [1, 2], [1, 2**63], 0, 2, 0),  # an offset that does not fit
        (4, 2**31 - 1, 0, [1, 2], [1, 2], 0, 2, 0),  # indexCount past int32
        (4, -(2**31) - 1, 0, [1], [1], 0, 1, 0),
        (4, 1, 2**70, [1, 2], [1, 2], 0, 2, 0),  # a huge slot count still counts up
        (4, 1, 0, (1, 2), (1, 2), 0, 2, 0),  # tuples
        (4, 1, 0, [1.0], [1], 0, 1, 0),
        (4, 1.0, 0, [1], [1], 0, 1, 0),
        (4, 1, 0, [1], [1], 0.0, 1, 0),
        (2**50, 1, 0, [1], [1], 0, 1, 0),  # slots past the buffer
        (4, 5, 0, [1, 2, 3], [1, 2, 3], 0, 3, 0),  # entries past the buffer
    ],
    ids=repr,
)
@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "mmap", "bytes"])
def test_put_index_entries_edges(args: tuple[Any, ...], kind: str) -> None:
    run_both(bytes(40 + 4 * 4 + 6 * 20), kind, "put_index_entries", *args)


def test_valid_input_stays_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid units and entries are written by the C loops, not handed to the reference."""

    def handed_over(*_args: Any) -> Any:
        raise AssertionError("handed over to the pure function")

    n = 256
    hashes = [(i * 2654435761) & 0x7FFFFFFF for i in range(n)]
    reference = bytearray(40 + 16 * 4 + 300 * 20)
    expected = pure_put_index_entries(reference, 16, 1, 0, hashes, list(range(n)), 0, n, 3)
    monkeypatch.setattr(codec.units, "pack_cq_units_py", handed_over)
    monkeypatch.setattr(codec.units, "put_index_entries_py", handed_over)
    with mmap.mmap(-1, 20 + n * 20) as mm:
        assert compiled.pack_cq_units(mm, 20, list(range(n)), [100] * n, [-1] * n) == 20 + n * 20
    with mmap.mmap(-1, len(reference)) as mm:
        got = compiled.put_index_entries(mm, 16, 1, 0, hashes, list(range(n)), 0, n, 3)
        assert got == expected
        assert got[0] == n + 1
        assert mm[:] == reference
