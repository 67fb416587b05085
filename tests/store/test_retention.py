"""Retention: which files go, when, and what readers see afterwards.

The clock and the disk usage are faked (we don't own them); files are aged with os.utime.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from codec import MessageInner, encode_properties, host_of
from store.config import StoreConfig
from store.message_store import MessageStore
from store.results import GetMessageStatus, PutMessageStatus

SEGMENT = 8192
HOST = host_of("127.0.0.1", 10911)


def _config(root: Path) -> StoreConfig:
    return StoreConfig(
        root_dir=root,
        commit_log_file_bytes=SEGMENT,
        consume_queue_file_bytes=20 * 8,
        max_message_bytes=2048,
        max_hash_slot_num=17,
        max_index_num=16,
        file_reserved_hours=72,
        delete_when="04",
    )


def _at_local_hour(hour: int) -> float:
    t = time.localtime()
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1))


class FakeDisk:
    def __init__(self) -> None:
        self.ratio = 0.10

    def __call__(self) -> float:
        return self.ratio


async def _fill(store: MessageStore, count: int) -> None:
    for i in range(count):
        result = await store.put_message(
            MessageInner(
                "T",
                0,
                b"m" * 900,
                encode_properties({"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:04d}"}),
                store_host=HOST,
                born_host=HOST,
            )
        )
        assert result.status is PutMessageStatus.PUT_OK


def _age(store: MessageStore, segments: int, hours: float) -> list[str]:
    old = time.time() - hours * 3600
    names = []
    for mf in store.commit_log.files.files[:segments]:
        os.utime(mf.path, (old, old))
        names.append(mf.path.name)
    return names


async def test_expired_segments_go_at_the_delete_hour_and_readers_see_the_new_minimum(
    tmp_path: Path,
) -> None:
    now = [_at_local_hour(12)]
    disk = FakeDisk()
    async with MessageStore(_config(tmp_path), clock=lambda: now[0], disk_used_ratio=disk) as store:
        await _fill(store, 60)
        store.dispatch_all()
        segments = len(store.commit_log.files.files)
        assert segments >= 6
        expired = _age(store, 3, 100)

        # 12:30 is not the delete hour and nothing forces it: nothing goes.
        assert store.retention.run_once().commit_log_segments == []
        # 04:30 is: exactly the three expired segments go.
        now[0] = _at_local_hour(4)
        report = store.retention.run_once()
        assert report.commit_log_segments == expired
        assert [p.name for p in (tmp_path / "commitlog").iterdir() if p.name in expired] == []
        new_min = store.commit_log.min_offset
        assert new_min == 3 * SEGMENT
        assert report.consume_queue_segments > 0

        min_offset = store.get_min_offset("T", 0)
        assert min_offset > 0
        cq = store.queues.get("T", 0)
        assert cq is not None
        entry = cq.entry(min_offset)
        assert entry is not None and entry[0] >= new_min
        result = store.get_messages("T", 0, 0, 8)
        assert result.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert result.next_begin_offset == min_offset
        found = store.get_messages("T", 0, min_offset, 4)
        assert found.status is GetMessageStatus.FOUND
        assert found.queue_offsets[0] == min_offset
        found.release()
        # keys of deleted messages are no longer found
        assert store.query_message("T", "k0", 10, 0, 1 << 62).records == []
        assert len(store.query_message("T", "k59", 10, 0, 1 << 62).records) == 1


async def test_young_segments_stay_unless_the_disk_forces_them(tmp_path: Path) -> None:
    disk = FakeDisk()
    async with MessageStore(
        _config(tmp_path), clock=lambda: _at_local_hour(12), disk_used_ratio=disk
    ) as store:
        await _fill(store, 40)
        segments = len(store.commit_log.files.files)
        disk.ratio = 0.80  # above diskMaxUsedSpaceRatio (75 %): only expired segments go
        assert store.retention.run_once().commit_log_segments == []
        disk.ratio = 0.86  # above the forcible ratio: age no longer matters
        report = store.retention.run_once()
        assert len(report.commit_log_segments) == min(10, segments - 1)
        assert store.commit_log.files.files  # never the newest
        assert not store.retention.disk_full


async def test_a_full_disk_refuses_writes_until_usage_drops(tmp_path: Path) -> None:
    disk = FakeDisk()
    async with MessageStore(
        _config(tmp_path), clock=lambda: _at_local_hour(12), disk_used_ratio=disk
    ) as store:
        await _fill(store, 3)
        disk.ratio = 0.95
        store.retention.run_once()
        refused = await store.put_message(MessageInner("T", 0, b"x", store_host=HOST))
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "disk full" in refused.remark
        max_before = store.commit_log.queue_offsets["T-0"]  # next queue offset to assign
        disk.ratio = 0.50
        store.retention.run_once()
        accepted = await store.put_message(MessageInner("T", 0, b"x", store_host=HOST))
        assert accepted.status is PutMessageStatus.PUT_OK
        assert accepted.append is not None
        assert accepted.append.queue_offset == max_before  # nothing was half-written


async def test_manual_delete_ignores_the_hour_but_not_the_age(tmp_path: Path) -> None:
    async with MessageStore(
        _config(tmp_path), clock=lambda: _at_local_hour(12), disk_used_ratio=FakeDisk()
    ) as store:
        await _fill(store, 40)
        assert store.delete_expired_files().commit_log_segments == []  # nothing is old yet
        expired = _age(store, 2, 100)
        assert store.delete_expired_files().commit_log_segments == expired


async def test_at_most_ten_segments_per_pass(tmp_path: Path) -> None:
    async with MessageStore(
        _config(tmp_path), clock=lambda: _at_local_hour(4), disk_used_ratio=FakeDisk()
    ) as store:
        await _fill(store, 130)
        segments = len(store.commit_log.files.files)
        assert segments > 12
        _age(store, segments - 1, 100)
        assert len(store.retention.run_once().commit_log_segments) == 10
        assert len(store.retention.run_once().commit_log_segments) == segments - 11


async def test_a_held_segment_stays_readable_until_released(tmp_path: Path) -> None:
    async with MessageStore(
        _config(tmp_path), clock=lambda: _at_local_hour(4), disk_used_ratio=FakeDisk()
    ) as store:
        await _fill(store, 40)
        store.dispatch_all()
        held = store.get_messages("T", 0, 0, 2)
        assert held.status is GetMessageStatus.FOUND
        before = held.to_bytes()
        _age(store, 2, 100)
        assert len(store.retention.run_once().commit_log_segments) == 2
        assert held.to_bytes() == before  # the mapping outlives the file while held
        held.release()
