"""The MessageStore facade: pull statuses, transfer caps, lookups, reopen, locking, flushing.

Statuses and nextBeginOffset follow docs/protocol.md §12 and RocketMQ 4.9.8
``DefaultMessageStore.getMessage``; the time lookup follows ``ConsumeQueue
.getOffsetInQueueByTime``. Stores are real, in ``tmp_path``, with 4 KiB segments.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from codec import java_hash
from store.config import FlushDiskType, StoreConfig
from store.dispatch import Arrival
from store.errors import StoreLockedError
from store.message_store import MessageStore
from store.results import (
    AppendResult,
    GetMessageStatus,
    GetResult,
    PutMessageStatus,
    PutResult,
)
from tests.store.conftest import (
    batch,
    drain,
    message,
    parse_record,
    read_commit_log,
    walk_commit_log,
)
from tests.support import java_string2message_properties, wait_dispatched

HOURS_S = 3600.0


def _ok(result: PutResult) -> PutResult:
    assert result.status is PutMessageStatus.PUT_OK, result
    assert result.append is not None
    return result


async def _fill(
    store: MessageStore, topic: str, queue_id: int, count: int, size: int = 100
) -> list[PutResult]:
    """Put ``count`` messages of ``size`` body bytes and wait until they are dispatched."""
    puts = [
        _ok(await store.put_message(message(topic, queue_id, f"{i:04d}".encode() * (size // 4))))
        for i in range(count)
    ]
    await wait_dispatched(store)
    return puts


def _get(
    store: MessageStore,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    max_count: int = 32,
    tag_filter: Callable[[int], bool] | None = None,
) -> tuple[GetMessageStatus, int, int, int, list[bytes]]:
    got: GetResult = store.get_messages(topic, queue_id, offset, max_count, tag_filter)
    try:
        records = [bytes(r) for r in got.records]
        assert got.queue_offsets == [parse_record(r).queue_offset for r in records]
        return got.status, got.next_begin_offset, got.min_offset, got.max_offset, records
    finally:
        got.release()


# ------------------------------------------------------------------------------- statuses


async def test_unknown_queue_is_no_matched_logic_queue(store: MessageStore) -> None:
    await _fill(store, "T", 0, 3)
    for topic, queue_id, offset in [("Nope", 0, 0), ("Nope", 0, 7), ("T", 1, 0), ("T", 1, 5)]:
        status, next_offset, _min, _max, records = _get(store, topic, queue_id, offset)
        assert status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert next_offset == 0
        assert records == []


async def test_empty_queue_is_no_message_in_queue(make_config: Callable[..., StoreConfig]) -> None:
    """A queue known to the store with no entries: its commit log is gone, so recovery
    empties it (store-format.md §8)."""
    config = make_config()
    async with MessageStore(config) as store:
        await _fill(store, "T", 0, 5)
    for segment in (config.root_dir / "commitlog").iterdir():
        segment.unlink()
    async with MessageStore(config) as store:
        for offset in (0, 3, 10):
            status, next_offset, low, high, records = _get(store, "T", 0, offset)
            assert status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
            assert (next_offset, low, high, records) == (0, 0, 0, [])
        # and the queue starts again from 0
        put = _ok(await store.put_message(message("T", 0, b"again")))
        assert put.append is not None and put.append.queue_offset == 0


async def test_offset_overflow_one_and_badly(store: MessageStore) -> None:
    await _fill(store, "T", 0, 5)
    status, next_offset, low, high, records = _get(store, "T", 0, 5)
    assert status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert (next_offset, low, high, records) == (5, 0, 5, [])
    status, next_offset, low, high, _r = _get(store, "T", 0, 6)
    assert status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert next_offset == 0  # min == 0: back to min
    status, next_offset, _l, _h, _r = _get(store, "T", 0, 1000)
    assert (status, next_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0)


async def test_offset_too_small_after_the_head_was_deleted(
    make_config: Callable[..., StoreConfig],
) -> None:
    """Retention deletes the oldest commit-log segments; the queue's minimum moves to its
    first entry still in the log (store-format.md §3), also after a reopen. The clock is
    faked forward so the segments count as older than fileReservedTime."""
    config = make_config()

    def check(store: MessageStore, low: int, first_kept: AppendResult) -> None:
        assert store.get_min_offset("T", 0) == low
        assert store.get_max_offset("T", 0) == 40
        for offset in (0, low - 1):
            status, next_offset, got_min, got_max, records = _get(store, "T", 0, offset)
            assert status is GetMessageStatus.OFFSET_TOO_SMALL
            assert (next_offset, got_min, got_max, records) == (low, low, 40, [])
        status, next_offset, _l, _h, _r = _get(store, "T", 0, 41)
        assert status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert next_offset == 40  # min != 0: to max
        status, next_offset, _l, _h, records = _get(store, "T", 0, low)
        assert status is GetMessageStatus.FOUND
        assert parse_record(records[0]).queue_offset == low
        assert parse_record(records[0]).physical_offset == first_kept.commit_log_offset
        assert store.get_earliest_message_time("T", 0) == first_kept.store_timestamp
        assert store.get_offset_by_time("T", 0, 0) == low
        assert len(drain(store, "T", 0, low)) == 40 - low

    async with MessageStore(config, clock=lambda: time.time() + 100 * HOURS_S) as store:
        puts = await _fill(store, "T", 0, 40, size=400)  # ~500-byte records: 5 segments
        report = store.delete_expired_files()
        assert report.commit_log_segments
        assert report.consume_queue_segments
        cl_min = store.commit_log.min_offset
        assert cl_min > 0
        first_kept = next(
            p.append for p in puts if p.append and p.append.commit_log_offset >= cl_min
        )
        low = first_kept.queue_offset
        assert low > 0
        check(store, low, first_kept)
    async with MessageStore(config) as store:
        check(store, low, first_kept)
        put = _ok(await store.put_message(message("T", 0, b"next")))
        assert put.append is not None and put.append.queue_offset == 40


async def test_found_next_is_offset_plus_entries(store: MessageStore) -> None:
    puts = await _fill(store, "T", 0, 10)
    status, next_offset, low, high, records = _get(store, "T", 0, 3, max_count=4)
    assert status is GetMessageStatus.FOUND
    assert (next_offset, low, high) == (7, 0, 10)
    assert [parse_record(r).queue_offset for r in records] == [3, 4, 5, 6]
    status, next_offset, _l, _h, records = _get(store, "T", 0, 7, max_count=32)
    assert (status, next_offset, len(records)) == (GetMessageStatus.FOUND, 10, 3)
    # the exact stored bytes, real QUEUEOFFSET and PHYSICALOFFSET included
    for k, raw in zip(range(7, 10), records, strict=True):
        append = puts[k].append
        assert append is not None
        assert raw == read_commit_log(store.config, append.commit_log_offset, append.wrote_bytes)
        rec = parse_record(raw)
        assert (rec.queue_offset, rec.physical_offset) == (k, append.commit_log_offset)


async def test_tag_filter(store: MessageStore) -> None:
    tags = ["TagA", "TagB", "TagA", "TagC", "TagB", "TagA"]
    for i, tag in enumerate(tags):
        _ok(await store.put_message(message("T", 0, f"m{i}".encode(), tags=tag)))
    await wait_dispatched(store)
    code_b = java_hash("TagB")
    status, next_offset, _l, _h, records = _get(
        store, "T", 0, 0, tag_filter=lambda code: code == code_b
    )
    assert status is GetMessageStatus.FOUND
    assert next_offset == 6  # filtered entries count as scanned
    assert [parse_record(r).body for r in records] == [b"m1", b"m4"]
    status, next_offset, _l, _h, records = _get(
        store, "T", 0, 2, tag_filter=lambda code: code == java_hash("TagZ")
    )
    assert status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert (next_offset, records) == (6, [])
    # max_count stops at the matching entries, not the scanned ones
    status, next_offset, _l, _h, records = _get(
        store, "T", 0, 0, max_count=2, tag_filter=lambda code: code == java_hash("TagA")
    )
    assert [parse_record(r).body for r in records] == [b"m0", b"m2"]
    assert next_offset == 3


async def test_no_matched_message_scans_at_most_800_entries(
    make_config: Callable[..., StoreConfig],
) -> None:
    """max(16000, maxMsgNums * 20) bytes of consume queue are scanned per pull."""
    async with MessageStore(make_config(commit_log_file_bytes=1 << 16)) as store:
        await _fill(store, "T", 0, 900, size=4)
        status, next_offset, _l, _h, records = _get(
            store, "T", 0, 10, tag_filter=lambda code: False
        )
        assert status is GetMessageStatus.NO_MATCHED_MESSAGE
        assert (next_offset, records) == (810, [])
        status, next_offset, _l, _h, _r = _get(store, "T", 0, 810, tag_filter=lambda code: False)
        assert (status, next_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 900)


async def test_transfer_count_cap_and_max_count(store: MessageStore) -> None:
    await _fill(store, "T", 0, 40, size=8)
    status, next_offset, _l, _h, records = _get(store, "T", 0, 0, max_count=100)
    assert (status, next_offset, len(records)) == (GetMessageStatus.FOUND, 32, 32)
    status, next_offset, _l, _h, records = _get(store, "T", 0, 32, max_count=100)
    assert (next_offset, len(records)) == (40, 8)
    status, next_offset, _l, _h, records = _get(store, "T", 0, 5, max_count=5)
    assert (next_offset, len(records)) == (10, 5)
    status, next_offset, _l, _h, records = _get(store, "T", 0, 39, max_count=1)
    assert (next_offset, len(records)) == (40, 1)


async def test_transfer_bytes_cap(make_config: Callable[..., StoreConfig]) -> None:
    config = make_config(commit_log_file_bytes=1 << 19, max_message_bytes=300_000)
    async with MessageStore(config) as store:
        puts = await _fill(store, "T", 0, 20, size=20_000)
        size = puts[0].append.wrote_bytes if puts[0].append else 0
        expected = (256 * 1024) // size
        status, next_offset, _l, _h, records = _get(store, "T", 0, 0)
        assert status is GetMessageStatus.FOUND
        assert len(records) == expected
        assert next_offset == expected
        assert sum(len(r) for r in records) <= 256 * 1024
        # one message larger than the cap still goes out, alone
        _ok(await store.put_message(message("Big", 0, b"x" * 270_000)))
        _ok(await store.put_message(message("Big", 0, b"y")))
        await wait_dispatched(store)
        status, next_offset, _l, _h, records = _get(store, "Big", 0, 0)
        assert (status, next_offset, len(records)) == (GetMessageStatus.FOUND, 1, 1)


# ----------------------------------------------------------------------------- offsets


async def test_min_max_offsets(store: MessageStore) -> None:
    assert (store.get_min_offset("T", 0), store.get_max_offset("T", 0)) == (0, 0)
    await _fill(store, "T", 0, 12)
    await _fill(store, "T", 3, 2)
    assert (store.get_min_offset("T", 0), store.get_max_offset("T", 0)) == (0, 12)
    assert (store.get_min_offset("T", 3), store.get_max_offset("T", 3)) == (0, 2)
    assert store.get_max_offset("T", 1) == 0


async def _distinct_times(
    store: MessageStore, count: int, times: list[int] | None = None
) -> list[int]:
    """Put ``count`` messages to T/0, each stored at least 2 ms after the one before;
    returns every store time so far (``times`` extended)."""
    times = [] if times is None else times
    for _ in range(count):
        for _wait in range(100):
            if not times or time.time_ns() // 1_000_000 > times[-1] + 1:
                break
            await asyncio.sleep(0.001)
        put = _ok(await store.put_message(message("T", 0, f"t{len(times)}".encode())))
        assert put.append is not None
        times.append(put.append.store_timestamp)
    assert times == sorted(set(times))
    await wait_dispatched(store)
    return times


async def test_offset_by_time(store: MessageStore) -> None:
    assert store.get_offset_by_time("T", 0, time.time_ns() // 1_000_000) == 0  # no queue
    times = await _distinct_times(store, 12)  # spans two consume-queue segments
    for k, t in enumerate(times):
        assert store.get_offset_by_time("T", 0, t) == k  # exact hit
    assert store.get_offset_by_time("T", 0, times[0] - 10_000) == 0  # before all
    assert store.get_offset_by_time("T", 0, 0) == 0
    assert store.get_offset_by_time("T", 0, times[-1] + 10_000) == 11  # after all: the last
    for k in range(11):
        left, right = times[k], times[k + 1]
        if right - left >= 3:
            assert store.get_offset_by_time("T", 0, left + 1) == k  # nearer the left
            assert store.get_offset_by_time("T", 0, right - 1) == k + 1  # nearer the right


async def test_offset_by_time_tie_takes_the_earlier(store: MessageStore) -> None:
    """Halfway between two store times RocketMQ picks the earlier message
    (``abs(ts - left) > abs(ts - right) ? right : left``)."""
    times = await _distinct_times(store, 2)
    for _ in range(40):
        if (times[-1] - times[-2]) % 2 == 0:
            break
        await _distinct_times(store, 1, times)
    k = len(times) - 2
    assert (times[k + 1] - times[k]) % 2 == 0, "no two store times an even number of ms apart"
    middle = (times[k] + times[k + 1]) // 2
    assert store.get_offset_by_time("T", 0, middle) == k


async def test_offset_by_time_empty_queue(make_config: Callable[..., StoreConfig]) -> None:
    config = make_config()
    async with MessageStore(config) as store:
        await _fill(store, "T", 0, 3)
    for segment in (config.root_dir / "commitlog").iterdir():
        segment.unlink()
    async with MessageStore(config) as store:
        assert store.get_offset_by_time("T", 0, time.time_ns() // 1_000_000) == 0
        assert store.get_earliest_message_time("T", 0) == -1


async def test_earliest_message_time(store: MessageStore) -> None:
    assert store.get_earliest_message_time("T", 0) == -1
    puts = await _fill(store, "T", 0, 3)
    assert puts[0].append is not None
    assert store.get_earliest_message_time("T", 0) == puts[0].append.store_timestamp


# ----------------------------------------------------------------------------- lookups


async def test_look_message_by_offset(store: MessageStore) -> None:
    puts = await _fill(store, "T", 0, 30)  # several segments
    for put in puts:
        append = put.append
        assert append is not None
        raw = store.look_message_by_offset(append.commit_log_offset)
        assert raw == read_commit_log(store.config, append.commit_log_offset, append.wrote_bytes)
    first = puts[0].append
    assert first is not None
    assert store.look_message_by_offset(first.commit_log_offset + 1) is None  # mid-record
    blanks = [offset for offset, rec, _size in walk_commit_log(store.config) if rec is None]
    assert blanks
    assert store.look_message_by_offset(blanks[0]) is None  # END-OF-FILE blank
    assert store.look_message_by_offset(store.commit_log.max_offset) is None
    assert store.look_message_by_offset(store.commit_log.max_offset + 4096) is None


async def test_query_message_by_keys_and_uniq_key(store: MessageStore) -> None:
    """Each space-separated KEYS entry and the UNIQ_KEY are indexed (topic#key); a query
    returns the records, newest first, within the time range. The tiny index (8 entries a
    file) rolls over several times here."""
    begin = time.time_ns() // 1_000_000
    for i in range(12):
        keys = f"order-{i} shared" if i % 3 == 0 else f"order-{i}"
        _ok(
            await store.put_message(
                message("T", i % 2, f"q{i}".encode(), keys=keys, uniq_key=f"U{i:03d}")
            )
        )
        _ok(await store.put_message(message("Other", 0, f"o{i}".encode(), keys="shared")))
    await wait_dispatched(store)
    end = time.time_ns() // 1_000_000 + 1000

    def bodies(topic: str, key: str, begin_ms: int, end_ms: int, max_num: int = 32) -> list[bytes]:
        found = store.query_message(topic, key, max_num, begin_ms, end_ms)
        out = []
        for raw in found.records:
            rec = parse_record(raw)
            props = java_string2message_properties(rec.properties)
            assert rec.topic == topic
            assert key in props.get("KEYS", "").split(" ") or props.get("UNIQ_KEY") == key
            out.append(rec.body)
        return out

    assert bodies("T", "order-4", begin, end) == [b"q4"]
    assert bodies("T", "shared", begin, end) == [b"q9", b"q6", b"q3", b"q0"]
    assert bodies("T", "shared", begin, end, max_num=2) == [b"q9", b"q6"]
    assert bodies("T", "U007", begin, end) == [b"q7"]
    assert bodies("Other", "shared", begin, end) == [f"o{i}".encode() for i in range(11, -1, -1)]
    assert bodies("T", "U999", begin, end) == []
    assert bodies("T", "order-4", end + 60_000, end + 120_000) == []  # after the range
    assert bodies("T", "order-4", 0, begin - 60_000) == []  # before the range


# ------------------------------------------------------------------------------ reopen


async def test_reopen_gives_identical_results_and_continues(
    make_config: Callable[..., StoreConfig],
) -> None:
    config = make_config()
    queues = [("A", 0), ("A", 1), ("B", 0)]
    async with MessageStore(config) as store:
        for i in range(45):
            topic, queue_id = queues[i % 3]
            _ok(
                await store.put_message(
                    message(topic, queue_id, f"m{i}".encode() * 20, tags=f"t{i % 4}", keys=f"k{i}")
                )
            )
        _ok(await store.put_messages(batch("A", 1, [(0, b"b1", b""), (0, b"b2", b"")])))
        await wait_dispatched(store)
        before = {q: drain(store, *q) for q in queues}
        offsets = {q: (store.get_min_offset(*q), store.get_max_offset(*q)) for q in queues}
        max_offset = store.commit_log.max_offset
        query = store.query_message("A", "k3", 32, 0, 2**62).records
    async with MessageStore(config) as store:
        assert {q: drain(store, *q) for q in queues} == before
        assert {q: (store.get_min_offset(*q), store.get_max_offset(*q)) for q in queues} == offsets
        assert store.commit_log.max_offset == max_offset
        assert store.query_message("A", "k3", 32, 0, 2**62).records == query
        put = _ok(await store.put_message(message("A", 1, b"after")))
        assert put.append is not None
        assert put.append.queue_offset == offsets[("A", 1)][1]
        assert put.append.commit_log_offset == max_offset
        await wait_dispatched(store)
        assert parse_record(drain(store, "A", 1)[-1]).body == b"after"
    assert before[("A", 1)] and len(before[("A", 1)]) == 17


async def test_second_store_on_a_locked_dir(make_config: Callable[..., StoreConfig]) -> None:
    config = make_config()
    async with MessageStore(config) as store:
        _ok(await store.put_message(message()))
        with pytest.raises(StoreLockedError):
            async with MessageStore(config):
                pass
        # the running store is unharmed
        _ok(await store.put_message(message()))
    async with MessageStore(config) as store:  # the lock went with the first store
        assert store.get_max_offset("TopicTest", 0) == 2


# ------------------------------------------------------------------------ flush and life


async def test_sync_flush_group_commit(make_config: Callable[..., StoreConfig]) -> None:
    config = make_config(flush_disk_type=FlushDiskType.SYNC_FLUSH, commit_log_file_bytes=1 << 16)
    puts = 200
    async with MessageStore(config) as store:
        assert store.commit_log_flusher is not None
        flushes_before = store.commit_log_flusher.flushes
        results = await asyncio.gather(
            *(store.put_message(message("T", i % 4, f"sync-{i}".encode())) for i in range(puts))
        )
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * puts
        flushes = store.commit_log_flusher.flushes - flushes_before
        assert 1 <= flushes < puts / 4
        assert store.commit_log.flushed_offset >= max(
            r.append.commit_log_offset + r.append.wrote_bytes for r in results if r.append
        )
        # WAIT=false: stored and answered without waiting for the flush
        no_wait = await store.put_message(message("T", 0, b"no-wait", wait=False))
        assert no_wait.status is PutMessageStatus.PUT_OK


async def test_put_after_shutdown_is_service_not_available(store: MessageStore) -> None:
    _ok(await store.put_message(message()))
    await store.shutdown()
    single = await store.put_message(message())
    assert single.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert single.append is None
    many = await store.put_messages(batch("T", 0, [(0, b"x", b"")]))
    assert many.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    await store.shutdown()  # idempotent


async def test_arrival_listener_tells_every_message(store: MessageStore) -> None:
    """RocketMQ's ReputMessageService calls ``arriving(topic, queueId, queueOffset + 1, …)``:
    ``Arrival.max_offset`` is the queue's max offset once the message is in, which is
    what a parked pull at that offset compares against."""
    arrivals: list[Arrival] = []
    store.add_arrival_listener(arrivals.append)
    expected: list[tuple[str, int, int, int]] = []
    for i in range(7):
        topic, queue_id = ("T", i % 2) if i < 6 else ("U", 5)
        put = _ok(await store.put_message(message(topic, queue_id, b"x" * 300, tags=f"tag{i}")))
        assert put.append is not None
        expected.append((topic, queue_id, put.append.queue_offset + 1, java_hash(f"tag{i}")))
    _ok(await store.put_message(message("T", 0, b"half", sys_flag=0x4)))  # prepared: none
    put = _ok(await store.put_messages(batch("T", 1, [(0, b"a", b""), (0, b"b", b"")])))
    assert put.append is not None
    expected += [("T", 1, put.append.queue_offset + 1, 0), ("T", 1, put.append.queue_offset + 2, 0)]
    await wait_dispatched(store)
    told = [
        (a.topic, a.queue_id, a.first_offset + i + 1, code)
        for a in arrivals
        for i, code in enumerate(a.tags_codes)
    ]
    assert sorted(told) == sorted(expected)
    assert sorted(o for t, q, o, _c in told if (t, q) == ("T", 1)) == [1, 2, 3, 4, 5]


async def test_arrivals_of_a_dispatch_round_are_told_once_per_queue(store: MessageStore) -> None:
    """Messages dispatched in one round reach a listener as one Arrival per queue, in queue
    order with consecutive offsets: a pull woken by it answers with all of them."""
    await wait_dispatched(store)
    arrivals: list[Arrival] = []
    store.add_arrival_listener(arrivals.append)
    # Puts that do not wait for a flush do not yield: dispatch sees them in one round.
    for i in range(5):
        _ok(await store.put_message(message("T", 0, b"x", tags=f"t{i}")))
    _ok(await store.put_messages(batch("T", 0, [(0, b"a", b""), (0, b"b", b"")])))
    _ok(await store.put_message(message("T", 1, b"y", tags="other")))
    await wait_dispatched(store)
    by_queue = {(a.topic, a.queue_id): a for a in arrivals}
    assert len(arrivals) == len(by_queue) == 2
    q0 = by_queue["T", 0]
    assert (q0.first_offset, q0.max_offset) == (0, 7)
    assert q0.tags_codes == [java_hash(f"t{i}") for i in range(5)] + [0, 0]
    assert [q0.properties(i).get("TAGS") for i in range(7)] == [f"t{i}" for i in range(5)] + [
        None,
        None,
    ]
    assert by_queue["T", 1].tags_codes == [java_hash("other")]
