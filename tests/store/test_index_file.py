"""Index files: RocketMQ's byte layout, chain lookups, rollover and the service around them.

Files are real and tiny (7 slots, 10 entries, so 9 keys a file): slot collisions, chains and
rollover happen in every test. The golden vectors were written by Apache RocketMQ 4.9.8's own
``org.apache.rocketmq.store.index.IndexFile`` (rocketmq-store-4.9.8.jar) from the same puts,
and are also rebuilt here by hand from the tables of docs/store-format.md §4.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import (
    MULTI_TAGS_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    index_key_hash,
    java_hash,
)
from store.errors import StoreLoadError
from store.index_file import (
    MAX_MSGS_NUM_BATCH,
    IndexFile,
    IndexService,
    index_file_bytes,
    index_file_name,
    index_key,
)

SLOTS = 7
ENTRIES = 10  # entry 0 is never used: 9 keys a file
KEYS_PER_FILE = ENTRIES - 1
T0 = 1_700_000_000_000
ALL_TIME = (0, 2**63 - 1)


# --------------------------------------------------------------------------- golden


def _file_bytes(
    header: tuple[int, int, int, int, int, int],
    slots: list[int],
    entries: dict[int, tuple[int, int, int, int]],
) -> bytes:
    """An index file from the §4 tables: header, slot ints, 20-byte entries."""
    out = bytearray(struct.pack(">qqqqii", *header))
    out += b"".join(struct.pack(">i", v) for v in slots)
    for n in range(ENTRIES):
        out += struct.pack(">iqii", *entries.get(n, (0, 0, 0, 0)))
    return bytes(out)


# (key, commit-log offset, store timestamp); the tenth does not fit.
GOLDEN_PUTS = [
    ("TopicTest#KEY1", 0, T0),
    ("TopicTest#KEY2", 100, T0 + 1500),
    ("T#Aa", 200, T0 + 999),
    ("T#BB", 300, T0 + 2000),
    ("polygenelubricants", 400, T0 - 5000),
    ("TopicTest#KEY1", 500, T0 + 10_000),
    ("TopicTest#K4", 600, T0 + 2**31 * 1000 + 5000),
    ("TopicTest#KEY2", 700, T0 + 3000),
    ("TopicTest#KEY3", 800, T0 + 3000),
    ("TopicTest#KEY3", 900, T0 + 4000),
]

# Java: "TopicTest#KEY1".hashCode() == -1656969516, "…KEY2" -1656969515, "…KEY3" -1656969514,
# "T#Aa" and "T#BB" 2538191 ("Aa" and "BB" collide), "TopicTest#K4" 2745035,
# "polygenelubricants" Integer.MIN_VALUE (abs stays negative, so the index uses 0).
GOLDEN_A = _file_bytes(
    # begin ts, end ts, begin phy, end phy, hashSlotCount (slots 0, 4, 5, 6), indexCount
    (T0, T0 + 3000, 0, 800, 4, 10),
    # slot = keyHash % 7: newest entry number per slot
    [5, 0, 0, 0, 9, 8, 7],
    {
        # n: (keyHash, commit-log offset, timeDiff s, prev)
        1: (1656969516, 0, 0, 0),  # KEY1 → slot 6; first entry: timeDiff 0
        2: (1656969515, 100, 1, 0),  # KEY2 → slot 5; 1.5 s → 1
        3: (2538191, 200, 0, 2),  # T#Aa → slot 5, chained to 2; 0.999 s → 0
        4: (2538191, 300, 2, 3),  # T#BB: the same hash as T#Aa
        5: (0, 400, 0, 0),  # MIN_VALUE hash → 0 → slot 0; before begin → 0
        6: (1656969516, 500, 10, 1),  # KEY1 again
        7: (2745035, 600, 2**31 - 1, 6),  # K4 → slot 6; 2^31 s later → clamped
        8: (1656969515, 700, 3, 4),  # KEY2
        9: (1656969514, 800, 3, 0),  # KEY3 → slot 4
    },
)

# The file RocketMQ starts after GOLDEN_A is full: begin/end carried over, then two puts. The
# first put's timeDiff is measured from the carried-over begin (T0+3000) before the put resets
# begin to its own time, so it reads back 4 s late.
GOLDEN_B_EMPTY = _file_bytes((T0 + 3000, T0 + 3000, 800, 800, 0, 1), [0] * SLOTS, {})
GOLDEN_B = _file_bytes(
    (T0 + 7000, T0 + 8500, 900, 1000, 1, 3),
    [0, 0, 0, 0, 0, 0, 2],
    {1: (1656969516, 900, 4, 0), 2: (1656969516, 1000, 1, 1)},
)

# Hex of the files rocketmq-store-4.9.8's IndexFile wrote for the same puts (flushed).
JAVA_A = (
    "0000018bcfe568000000018bcfe573b800000000000000000000000000000320000000040000000a"
    "00000005000000000000000000000000000000090000000800000007"
    "0000000000000000000000000000000000000000"
    "62c3592c0000000000000000000000000000000062c3592b00000000000000640000000100000000"
    "0026bacf00000000000000c800000000000000020026bacf000000000000012c0000000200000003"
    "0000000000000000000001900000000000000000"
    "62c3592c00000000000001f40000000a00000001"
    "0029e2cb00000000000002587fffffff00000006"
    "62c3592b00000000000002bc0000000300000004"
    "62c3592a00000000000003200000000300000000"
)
JAVA_B = (
    "0000018bcfe583580000018bcfe58934000000000000038400000000000003e80000000100000003"
    "00000000000000000000000000000000000000000000000000000002"
    + "00" * 20
    + "62c3592c0000000000000384000000040000000062c3592c00000000000003e80000000100000001"
    + "00" * 20 * 7
)


def test_java_string_hash_codes_and_the_index_hash() -> None:
    assert java_hash("TagA") == 2598919
    assert java_hash("TopicTest#KEY1") == -1656969516
    assert index_key_hash("TopicTest#KEY1") == 1656969516  # negative → abs
    assert java_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0  # abs(MIN_VALUE) is still negative
    assert index_key_hash("T#Aa") == index_key_hash("T#BB") == 2538191
    assert index_key_hash("T#kéy") == 78728620 and index_key_hash("T#😀") == 4308978
    assert index_key("TopicTest", "order-1") == "TopicTest#order-1"


def test_hand_built_vectors_match_what_rocketmq_wrote() -> None:
    assert bytes.fromhex(JAVA_A) == GOLDEN_A
    assert bytes.fromhex(JAVA_B) == GOLDEN_B
    assert len(GOLDEN_A) == index_file_bytes(SLOTS, ENTRIES) == 40 + 7 * 4 + 10 * 20


def test_golden_layout_of_a_full_file(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000001", SLOTS, ENTRIES, create=True)
    accepted = [f.put_key(key, off, ts) for key, off, ts in GOLDEN_PUTS]
    assert accepted == [True] * 9 + [False]
    f.flush()
    assert (tmp_path / "20240101000000001").read_bytes() == GOLDEN_A
    assert (f.begin_timestamp, f.end_timestamp) == (T0, T0 + 3000)
    assert (f.begin_phy_offset, f.end_phy_offset) == (0, 800)
    assert (f.hash_slot_count, f.index_count, f.is_full) == (4, 10, True)
    f.close()


def test_golden_layout_of_the_file_after_it(tmp_path: Path) -> None:
    f = IndexFile(
        tmp_path / "20240101000000002",
        SLOTS,
        ENTRIES,
        create=True,
        prev_end_timestamp=T0 + 3000,
        prev_end_phy_offset=800,
    )
    assert (tmp_path / "20240101000000002").read_bytes() == GOLDEN_B_EMPTY
    assert (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset) == (
        T0 + 3000,
        T0 + 3000,
        800,
        800,
    )
    assert f.put_key("TopicTest#KEY1", 900, T0 + 7000)
    assert f.put_key("TopicTest#KEY1", 1000, T0 + 8500)
    assert (tmp_path / "20240101000000002").read_bytes() == GOLDEN_B
    # The first entry (stored at T0+7000) reads back as T0+11000, as in RocketMQ.
    assert f.select_offsets("TopicTest#KEY1", 64, T0 + 8000, T0 + 10_999) == [1000]
    assert f.select_offsets("TopicTest#KEY1", 64, T0 + 8000, T0 + 11_000) == [1000, 900]
    f.close()


def test_lookups_on_the_golden_file_match_rocketmq(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000001"
    path.write_bytes(GOLDEN_A)
    f = IndexFile(path, SLOTS, ENTRIES)  # open what RocketMQ wrote
    assert (f.index_count, f.hash_slot_count, f.end_phy_offset) == (10, 4, 800)
    # Results RocketMQ's selectPhyOffset gave on its own file:
    assert f.select_offsets("T#Aa", 64, *ALL_TIME) == [300, 200]  # hash twin included
    assert f.select_offsets("TopicTest#KEY2", 64, T0 + 2000, 2**63 - 1) == [700]
    assert f.select_offsets("TopicTest#KEY1", 64, *ALL_TIME) == [500, 0]
    # Caller time ranges (entry times are begin + whole seconds), max_num, misses:
    assert f.select_offsets("TopicTest#KEY1", 64, 0, T0 + 9999) == [0]
    assert f.select_offsets("TopicTest#KEY1", 64, T0 + 10_000, T0 + 10_000) == [500]
    assert f.select_offsets("TopicTest#KEY1", 1, *ALL_TIME) == [500]
    assert f.select_offsets("TopicTest#KEY1", 0, *ALL_TIME) == []
    assert f.select_offsets("TopicTest#KEY2", 64, *ALL_TIME) == [700, 100]
    assert f.select_offsets("polygenelubricants", 64, *ALL_TIME) == [400]
    assert f.select_offsets("TopicTest#K4", 64, *ALL_TIME) == [600]
    assert f.select_offsets("TopicTest#K3", 64, *ALL_TIME) == []  # slot 5, no such hash
    assert f.select_offsets("TopicTest#K5", 64, *ALL_TIME) == []  # slot 0's chain: hash 0
    f.put_key("T#x", 1, T0)  # full: refused, nothing changes
    assert path.read_bytes() == GOLDEN_A
    f.close()


def test_slot_values_out_of_range_count_as_empty(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000001", SLOTS, ENTRIES, create=True)
    raw = bytearray(f.file_bytes)
    slot6 = 40 + 6 * 4
    f.close()
    raw[slot6 : slot6 + 4] = struct.pack(">i", 7)  # points past indexCount (1)
    (tmp_path / "20240101000000001").write_bytes(raw)
    f = IndexFile(tmp_path / "20240101000000001", SLOTS, ENTRIES)
    assert f.index_count == 1  # 0 on disk reads as 1, as IndexHeader.load does
    assert f.select_offsets("TopicTest#KEY1", 64, *ALL_TIME) == []
    assert f.put_key("TopicTest#KEY1", 0, T0)  # prev 0, and the slot counts as newly filled
    assert f.hash_slot_count == 1
    assert f.select_offsets("TopicTest#KEY1", 64, *ALL_TIME) == [0]
    f.close()


def test_a_corrupt_chain_that_loops_ends(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000001"
    f = IndexFile(path, SLOTS, ENTRIES, create=True)
    for off in range(3):
        f.put_key("TopicTest#KEY1", off, T0)
    f.close()
    raw = bytearray(path.read_bytes())
    entry1 = 40 + SLOTS * 4 + 1 * 20
    raw[entry1 + 16 : entry1 + 20] = struct.pack(">i", 3)  # 1 → 3 → 2 → 1 …
    path.write_bytes(raw)
    f = IndexFile(path, SLOTS, ENTRIES)
    assert f.select_offsets("TopicTest#KEY1", 64, *ALL_TIME) == [2, 1, 0]
    f.close()


def test_opening_a_file_of_another_size_names_it(tmp_path: Path) -> None:
    path = tmp_path / "20240101000000001"
    path.write_bytes(GOLDEN_A)
    with pytest.raises(StoreLoadError, match="20240101000000001"):
        IndexFile(path, SLOTS + 1, ENTRIES)
    with pytest.raises(FileExistsError):
        IndexFile(path, SLOTS, ENTRIES, create=True)
    assert path.read_bytes() == GOLDEN_A


# --------------------------------------------------------------------------- names


def test_file_names_are_local_creation_times(tmp_path: Path) -> None:
    assert index_file_name(datetime(2024, 1, 2, 3, 4, 5, 678_999)) == "20240102030405678"
    before = index_file_name(datetime.now())
    files = [IndexFile.create_in(tmp_path, SLOTS, ENTRIES) for _ in range(5)]
    names = [f.name for f in files]
    assert all(len(n) == 17 and n.isdigit() for n in names)
    assert names == sorted(set(names))  # same millisecond → the next one
    assert names[0] >= before
    # A clock that stepped back still names the next file after the newest.
    later = IndexFile.create_in(tmp_path, SLOTS, ENTRIES, after_name="29991231235959999")
    assert later.name == "30000101000000000"
    for f in [*files, later]:
        f.close()


# --------------------------------------------------------------------------- service


def _service(directory: Path, on_file_full: Callable[[int], None] | None = None) -> IndexService:
    svc = IndexService(directory, SLOTS, ENTRIES, on_file_full=on_file_full)
    svc.load(last_exit_ok=True, index_msg_timestamp=0)
    return svc


def _put_records(
    svc: IndexService, count: int, *, first: int = 0, key: str | None = "k", ts_step_ms: int = 1000
) -> None:
    """Records ``first..first+count-1`` at offset 100*i, time T0 + i*step, uniq key u<i>."""
    for i in range(first, first + count):
        svc.build_index("T", key, f"u{i}", 100 * i, T0 + i * ts_step_ms, TRANSACTION_NOT_TYPE)


def test_rollover_carries_begin_and_end_over_and_reports_the_full_file(tmp_path: Path) -> None:
    reported: list[int] = []
    svc = _service(tmp_path, on_file_full=reported.append)
    # One key per record: records 0..8 fill file 0, 9..17 file 1, 18.. file 2.
    _put_records(svc, 20, key=None)
    assert [f.index_count for f in svc.files] == [10, 10, 3]
    first, second, third = svc.files
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name, second.name, third.name]
    assert first.name < second.name < third.name
    assert (first.begin_phy_offset, first.end_phy_offset) == (0, 800)
    assert (second.begin_phy_offset, second.end_phy_offset) == (900, 1700)
    assert (second.begin_timestamp, second.end_timestamp) == (T0 + 9000, T0 + 17_000)
    assert reported == [T0 + 8000, T0 + 17_000]
    assert svc.last_full_end_timestamp == T0 + 17_000
    assert svc.max_phy_offset == 1900
    # After a reopen the service carries on in the newest file and rolls from it.
    svc.shutdown()
    svc = _service(tmp_path)
    _put_records(svc, 7, first=20, key=None)  # fills file 2
    svc.build_index("T", None, "u27", 2700, T0 + 27_000, TRANSACTION_NOT_TYPE)
    assert svc.files[-1].begin_phy_offset == 2700
    assert len(svc.files) == 4
    svc.shutdown()


def test_a_record_whose_keys_straddle_two_files_is_found_in_both(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 8, key=None)  # 8 keys: one entry left in file 0
    svc.build_index("T", "a b", "u8", 800, T0 + 8000, TRANSACTION_NOT_TYPE)
    assert len(svc.files) == 2
    assert svc.files[1].begin_phy_offset == svc.files[1].end_phy_offset == 800
    for key in ("u8", "a", "b"):
        assert svc.query("T", key, 32, *ALL_TIME).offsets == [800]
    svc.shutdown()


def test_query_goes_newest_to_oldest_and_caps_max_num(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 40)  # two keys a record (u<i> and k): 80 keys, 9 files
    assert len(svc.files) == 9
    everything = [100 * i for i in reversed(range(40))]
    result = svc.query("T", "k", 32, *ALL_TIME)
    assert result.offsets == everything[:32]
    assert result.index_last_update_timestamp == T0 + 39_000
    assert result.index_last_update_phy_offset == 3900
    assert svc.query("T", "k", 5, *ALL_TIME).offsets == everything[:5]
    assert svc.query("T", "k", 1000, *ALL_TIME).offsets == everything
    assert svc.query("T", "u7", 32, *ALL_TIME).offsets == [700]
    assert svc.query("T", "missing", 32, *ALL_TIME).offsets == []
    assert svc.query("Other", "k", 32, *ALL_TIME).offsets == []  # topic is part of the key
    _put_records(svc, 40, first=40)
    assert len(svc.query("T", "k", 1000, *ALL_TIME).offsets) == MAX_MSGS_NUM_BATCH
    svc.shutdown()


def test_query_time_range_skips_and_stops_by_file(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 45, key=None, ts_step_ms=10_000)  # 5 full files, 9 records each
    for i in range(45):
        assert svc.query("T", f"u{i}", 32, *ALL_TIME).offsets == [100 * i]
    in_range = svc.query("T", "u20", 32, T0 + 120_000, T0 + 300_000)
    assert in_range.offsets == [2000]
    assert svc.query("T", "u11", 32, T0 + 120_000, T0 + 300_000).offsets == []
    assert svc.query("T", "u31", 32, T0 + 120_000, T0 + 300_000).offsets == []
    svc.shutdown()

    # Once a file began before the range, older files are not read, even if their span
    # overlaps it (here because the clock stepped back between them).
    svc = _service(tmp_path / "stepped")
    svc.build_index("T", "k", None, 0, T0 + 100_000, TRANSACTION_NOT_TYPE)
    _put_records(svc, 9, first=1, key=None)  # at T0+1000.., so file 0 fills up
    svc.build_index("T", "k", None, 1000, T0 + 50_000, TRANSACTION_NOT_TYPE)
    assert len(svc.files) == 2
    assert svc.files[0].is_time_matched(T0 + 60_000, T0 + 200_000)
    assert svc.query("T", "k", 32, T0 + 60_000, T0 + 200_000).offsets == []
    assert svc.query("T", "k", 32, *ALL_TIME).offsets == [1000, 0]
    svc.shutdown()


def test_keys_rollback_and_empty_records(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    svc.build_index("T", None, None, 0, T0, TRANSACTION_NOT_TYPE)
    svc.build_index("T", "", None, 0, T0, TRANSACTION_NOT_TYPE)
    svc.build_index("T", "a b", "u0", 0, T0, TRANSACTION_ROLLBACK_TYPE)
    svc.build_index("T", "a b", "u0", 0, T0, TRANSACTION_ROLLBACK_TYPE | MULTI_TAGS_FLAG)
    assert svc.files == []  # nothing to index yet: no file made
    assert list(tmp_path.iterdir()) == []
    svc.build_index("T", " a  b ", None, 100, T0, TRANSACTION_PREPARED_TYPE)
    svc.build_index("T", "a", "u2", 200, T0, TRANSACTION_COMMIT_TYPE | MULTI_TAGS_FLAG)
    assert svc.files[0].index_count == 1 + 4  # a, b, then u2, a
    assert svc.query("T", "a", 32, *ALL_TIME).offsets == [200, 100]
    assert svc.query("T", "b", 32, *ALL_TIME).offsets == [100]
    assert svc.query("T", "", 32, *ALL_TIME).offsets == []
    svc.shutdown()


def test_redispatch_is_idempotent(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 20)
    counts = [f.index_count for f in svc.files]
    before = svc.query("T", "k", 64, *ALL_TIME).offsets
    _put_records(svc, 19)  # everything below the newest file's endPhyOffset: skipped
    assert [f.index_count for f in svc.files] == counts
    assert svc.query("T", "k", 64, *ALL_TIME).offsets == before
    # The record *at* endPhyOffset is skipped too (RocketMQ compares with `<` and so indexed
    # the last record again on every restart).
    _put_records(svc, 1, first=19)
    assert svc.query("T", "u19", 64, *ALL_TIME).offsets == [1900]
    assert [f.index_count for f in svc.files] == counts
    svc.shutdown()


def test_reopen_after_shutdown_reads_the_same(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 21)  # 42 keys: the newest file holds 6 of 9
    names = [f.name for f in svc.files]
    before = {k: svc.query("T", k, 64, *ALL_TIME) for k in ("k", "u0", "u20", "u9")}
    svc.shutdown()
    svc.shutdown()  # idempotent
    svc = _service(tmp_path)
    assert [f.name for f in svc.files] == names
    assert {k: svc.query("T", k, 64, *ALL_TIME) for k in before} == before
    _put_records(svc, 1, first=21)  # continues in the newest file
    assert [f.name for f in svc.files] == names
    assert svc.query("T", "k", 3, *ALL_TIME).offsets == [2100, 2000, 1900]
    svc.flush()
    svc.shutdown()


def test_load_after_an_abnormal_exit_drops_files_newer_than_the_checkpoint(
    tmp_path: Path,
) -> None:
    reported: list[int] = []
    svc = _service(tmp_path, on_file_full=reported.append)
    _put_records(svc, 20, key=None)  # files end at T0+8000 (full), T0+17000 (full), T0+19000
    names = [f.name for f in svc.files]
    svc.shutdown()
    (tmp_path / "not-an-index-file").write_bytes(b"x")  # ignored

    svc = IndexService(tmp_path, SLOTS, ENTRIES)
    svc.load(last_exit_ok=False, index_msg_timestamp=reported[-1])
    assert [f.name for f in svc.files] == names[:2]
    assert sorted(p.name for p in tmp_path.iterdir()) == [*names[:2], "not-an-index-file"]
    assert svc.max_phy_offset == 1700
    assert svc.query("T", "u18", 32, *ALL_TIME).offsets == []
    assert svc.query("T", "u17", 32, *ALL_TIME).offsets == [1700]
    svc.shutdown()

    svc = IndexService(tmp_path, SLOTS, ENTRIES)
    svc.load(last_exit_ok=False, index_msg_timestamp=reported[0])
    assert [f.name for f in svc.files] == names[:1]
    svc.shutdown()
    svc = IndexService(tmp_path, SLOTS, ENTRIES)
    svc.load(last_exit_ok=True, index_msg_timestamp=0)  # a clean exit keeps everything
    assert [f.name for f in svc.files] == names[:1]
    svc.shutdown()


def test_delete_expired_goes_oldest_first_and_keeps_the_newest(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 20, key=None)  # endPhyOffsets 800, 1700, 1900
    names = [f.name for f in svc.files]
    assert svc.delete_expired(800) == 0  # endPhyOffset must be below the minimum
    assert svc.delete_expired(801) == 1
    assert [f.name for f in svc.files] == names[1:]
    assert svc.delete_expired(10**12) == 1  # not the newest
    assert [f.name for f in svc.files] == names[2:]
    assert sorted(p.name for p in tmp_path.iterdir()) == names[2:]
    assert svc.query("T", "u19", 32, *ALL_TIME).offsets == [1900]
    svc.shutdown()


def test_truncate_drops_files_past_the_recovered_log(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    _put_records(svc, 20, key=None)  # begin offsets 0, 900, 1800
    names = [f.name for f in svc.files]
    assert svc.truncate(1800) == 1
    assert [f.name for f in svc.files] == names[:2]
    assert svc.max_phy_offset == 1700
    count_before = svc.files[-1].index_count
    assert svc.truncate(1500) == 0
    # The entries of 1500, 1600 and 1700 are gone: the end is the last record kept.
    assert svc.max_phy_offset == 1400
    assert svc.files[-1].index_count == count_before - 3
    assert svc.query("T", "u16", 32, *ALL_TIME).offsets == []
    svc.shutdown()
    svc = _service(tmp_path)  # the truncated header is on disk
    assert svc.max_phy_offset == 1400
    # A record written again at 1500 is indexed; 1400 is not indexed twice.
    svc.build_index("T", None, "new", 1500, T0 + 30_000, TRANSACTION_NOT_TYPE)
    svc.build_index("T", None, "u14", 1400, T0 + 30_000, TRANSACTION_NOT_TYPE)
    assert svc.query("T", "new", 32, *ALL_TIME).offsets == [1500]
    assert svc.query("T", "u14", 32, *ALL_TIME).offsets == [1400]
    assert svc.query("T", "u16", 32, *ALL_TIME).offsets == []
    assert svc.truncate(0) == 2  # 1500 went into the room the truncation freed: no new file
    assert (svc.files, list(tmp_path.iterdir()), svc.max_phy_offset) == ([], [], 0)
    svc.shutdown()


# --------------------------------------------------------------------------- properties

# Keys from a small alphabet with hash twins, so slots collide and hashes sometimes do.
KEY = st.sampled_from(["a", "b", "c", "Aa", "BB", "AaAa", "BBBB", "AaBB", "x y", "é", "😀"])
RECORD = st.tuples(
    st.none() | KEY,  # uniq key
    st.lists(KEY, max_size=3).map(" ".join),  # KEYS ("x y" adds two keys)
    st.integers(min_value=1, max_value=500),  # offset step
    st.integers(min_value=0, max_value=3000),  # time step, ms
)
Record = tuple[str | None, str, int, int]
# (what, a new record's keys and steps, which earlier record to dispatch again)
OP = st.one_of(
    st.tuples(st.just("put"), RECORD, st.just(0)),
    st.tuples(st.just("redispatch"), st.none(), st.integers(min_value=0)),
    st.tuples(st.just("reopen"), st.none(), st.just(0)),
)


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(OP, max_size=40), queries=st.lists(st.tuples(KEY, st.integers(1, 80))))
def test_service_matches_a_dict_of_key_to_offsets(
    ops: list[tuple[str, Record | None, int]], queries: list[tuple[str, int]]
) -> None:
    model: dict[str, list[int]] = {}
    records: list[Record] = []
    offset, ts, last_indexed = 0, T0, -1
    with tempfile.TemporaryDirectory() as tmp:
        svc = _service(Path(tmp))
        for op, new, which in ops:
            if op == "reopen":
                svc.shutdown()
                svc = _service(Path(tmp))
                continue
            if op == "redispatch":
                # Only records below the last indexed one: the record at endPhyOffset would
                # be indexed again (see test_redispatch_is_idempotent).
                earlier = [r for r in records if r[2] < last_indexed]
                if earlier:
                    uniq, keys, off, when = earlier[which % len(earlier)]
                    svc.build_index("T", keys, uniq, off, when, TRANSACTION_NOT_TYPE)
                continue  # already indexed: the model does not change
            assert new is not None
            uniq, keys, offset_step, time_step = new
            record = (uniq, keys, offset, ts)
            svc.build_index("T", keys, uniq, offset, ts, TRANSACTION_NOT_TYPE)
            off = offset
            offset += offset_step
            ts += time_step
            records.append(record)
            parts = ([uniq] if uniq is not None else []) + [k for k in keys.split(" ") if k]
            for k in parts:
                model.setdefault(k, []).append(off)
            if parts:
                last_indexed = off
        for key, max_num in queries:
            # Only hashes are compared, so keys that hash alike share their offsets.
            h = index_key_hash(index_key("T", key))
            twins = [k for k in model if index_key_hash(index_key("T", k)) == h]
            expected = sorted((o for k in twins for o in model[k]), reverse=True)
            expected = expected[: min(max_num, MAX_MSGS_NUM_BATCH)]
            assert svc.query("T", key, max_num, *ALL_TIME).offsets == expected
        assert svc.max_phy_offset == max(last_indexed, 0)
        svc.shutdown()


@settings(max_examples=100, deadline=None)
@given(
    puts=st.lists(st.tuples(KEY, st.integers(0, 2500)), max_size=12),
    queries=st.lists(
        st.tuples(KEY, st.integers(1, 12), st.integers(-1000, 20_000), st.integers(0, 20_000))
    ),
)
def test_file_lookup_matches_a_list_scan_in_whole_seconds(
    puts: list[tuple[str, int]], queries: list[tuple[str, int, int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = IndexFile(Path(tmp) / "20240101000000001", SLOTS, ENTRIES, create=True)
        entries: list[tuple[int, int, int]] = []  # (hash, offset, time as stored)
        ts = T0
        for n, (key, time_step) in enumerate(puts):
            ts += time_step
            accepted = f.put_key(key, 10 * n, ts)
            assert accepted == (n < KEYS_PER_FILE)
            if accepted:
                begin = entries[0][2] if entries else ts
                entries.append((index_key_hash(key), 10 * n, begin + (ts - begin) // 1000 * 1000))
        for key, max_num, begin_rel, span in queries:
            begin_ms, end_ms = T0 + begin_rel, T0 + begin_rel + span
            expected = [
                off
                for h, off, t in reversed(entries)
                if h == index_key_hash(key) and begin_ms <= t <= end_ms
            ][:max_num]
            assert f.select_offsets(key, max_num, begin_ms, end_ms) == expected
        f.close()


def test_durable_entries_leave_the_page_tables_and_queries_still_find_them(
    tmp_path: Path,
) -> None:
    from store.mapped_file import MADV_DONTNEED, RELEASE_CHUNK_BYTES, RELEASE_KEEP_BYTES

    index = IndexFile(tmp_path / "20261122000000000", 1000, 400_000, create=True)
    try:
        count = 350_000  # 7 MB of 20-byte entries: more than the newest 4 MiB kept mapped
        for i in range(count):
            assert index.put_key(f"T#k{i}", 1000 + i, 1_795_000_000_000 + i)
        released_before = index._released
        index.flush()
        if MADV_DONTNEED is not None:
            assert index._released - released_before >= RELEASE_CHUNK_BYTES
            assert index._released <= index.file_bytes - RELEASE_KEEP_BYTES
        # Entries in the released range fault back in from the page cache.
        for i in (0, 1, 12_345, count - 1):
            assert 1000 + i in index.select_offsets(f"T#k{i}", 64, 0, 2**62)
    finally:
        index.close()
