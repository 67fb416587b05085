"""Each store write on a full disk fails cleanly, or takes only what it can get.

One test per write path: the disk guard before the commit log takes more disk, a new store
(lock, checkpoint, abort file, final flush), recovery's cut of a torn tail, the load's
dispatch, the index's slot table, consume-queue windows and the checkpoint. Those that need
a really full disk mount a small tmpfs (root only, as CI runs; skipped elsewhere, see
tests/store/test_sparse.py) and fill it with a file; what they check would otherwise be an
OSError out of ``load``, a refusal that never came, or a file that could not be created.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from store.checkpoint import Checkpoint
from store.consume_queue import ConsumeQueue
from store.errors import DiskFullError
from store.index_file import IndexService
from store.message_store import MessageStore
from store.results import PutMessageStatus
from store.retention import RECHECK_S
from tests.store.conftest import drain, message, tiny_config
from tests.store.test_sparse import free_bytes, small_tmpfs, write_filler

KiB = 1 << 10
MiB = 1 << 20


def fill(fs: Path, leave_bytes: int = 0) -> Path:
    """A file that takes the file system's free space but about ``leave_bytes``."""
    path = fs / "fill"
    write_filler(path, free_bytes(fs) - leave_bytes if leave_bytes else None)
    return path


def events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


class FakeDisk:
    """The used share of a disk, as the test sets it."""

    def __init__(self) -> None:
        self.ratio = 0.5

    def __call__(self) -> float:
        return self.ratio


async def test_the_disk_guard_runs_before_the_commit_log_takes_more_disk(tmp_path: Path) -> None:
    disk = FakeDisk()
    # 4 KiB segments, each allocated whole when created; the periodic check is 10 s away.
    config = tiny_config(tmp_path / "store")
    async with MessageStore(config, disk_used_ratio=disk) as store:
        assert (await store.put_message(message(body=b"x" * 500))).status.stored
        disk.ratio = 0.95
        for _ in range(config.commit_log_file_bytes // 500 + 1):
            refused = await store.put_message(message(body=b"x" * 500))
            if not refused.status.stored:
                break
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert refused.remark == (
            f"disk full: usage above 90% on {config.root_dir} (95.0% used), writes refused"
        )
        assert len(store.commit_log.files.files) == 1, "a segment was created past the limit"
        # Room again: the next refused put measures again (at most every RECHECK_S), and
        # writes are taken without waiting for the periodic check.
        disk.ratio = 0.5
        await asyncio.sleep(RECHECK_S + 0.05)
        assert (await store.put_message(message(body=b"x" * 500))).status.stored
        assert not store.retention.disk_full


async def test_a_new_store_on_a_full_disk_opens_refuses_writes_and_shuts_down(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "fs", 1 * MiB) as fs:
        fill(fs)
        config = tiny_config(fs / "store")
        with capture_logs() as logs:
            async with MessageStore(config) as store:
                refused = await store.put_message(message())
                assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
                assert f"usage above 90% on {config.root_dir}" in refused.remark
        assert events(logs, "store_lock_file_not_written")
        assert events(logs, "checkpoint_not_allocated")
        # The checkpoint could not be written at shutdown: the next start recovers as
        # after a crash, from what the files hold.
        assert events(logs, "consume_queue_flush_failed")
        assert (config.root_dir / "abort").exists()
        (fs / "fill").unlink()
        async with MessageStore(config) as store:
            assert not store.last_exit_ok
            assert (await store.put_message(message())).status.stored


async def test_recovery_cuts_a_torn_tail_it_has_no_room_to_save(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", 4 * MiB) as fs:
        config = tiny_config(fs / "store", commit_log_file_bytes=256 * KiB)
        async with MessageStore(config) as store:
            for n in range(10):
                assert (await store.put_message(message(body=b"m%d" % n))).status.stored
            end = store.commit_log.max_offset
        (segment,) = (config.root_dir / "commitlog").iterdir()
        fd = os.open(segment, os.O_RDWR)
        try:
            os.pwrite(fd, b"\x7f" * 100, end)  # a torn record past the last one
        finally:
            os.close(fd)
        fill(fs)
        with capture_logs() as logs:
            async with MessageStore(config) as store:
                assert store.commit_log.max_offset == end
                assert len(drain(store, "TopicTest", 0)) == 10
        (lost,) = events(logs, "commit_log_tail_not_saved")
        assert lost["commit_log_offset"] == end and lost["bytes"] == 100
        assert segment.read_bytes()[end : end + 100] == bytes(100)
        assert not any((config.root_dir / "torn").glob("*.torn"))


async def test_a_store_opens_on_a_full_disk_with_its_index_to_rebuild(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", 4 * MiB) as fs:
        config = tiny_config(
            fs / "store", commit_log_file_bytes=256 * KiB, max_hash_slot_num=64, max_index_num=64
        )
        async with MessageStore(config) as store:
            for n in range(20):
                stored = await store.put_message(message(body=b"m%d" % n, keys=f"k{n}"))
                assert stored.status.stored
        shutil.rmtree(config.root_dir / "index")  # lost: rebuilt from the commit log
        filler = fill(fs)
        async with MessageStore(config) as store:
            # It serves what its queues hold, and refuses writes while the index lags.
            assert len(drain(store, "TopicTest", 0)) == 20
            assert store.dispatch.error is not None
            refused = await store.put_message(message())
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert "store dispatch failed" in refused.remark
            assert (
                f"disk full: cannot allocate 1576 bytes at byte 0 of {config.root_dir}/index/"
                in (refused.remark)
            )
            filler.unlink()
            for _ in range(100):  # dispatch retries with backoff, from 0.1 s
                if store.dispatch.error is None:
                    break
                await asyncio.sleep(0.05)
            assert store.dispatch.error is None
            assert len(store.query_message("TopicTest", "k7", 8, 0, 1 << 62).records) == 1
            assert (await store.put_message(message())).status.stored


def test_an_index_file_takes_the_slot_pages_it_needs_when_the_table_does_not_fit(
    tmp_path: Path,
) -> None:
    slots = 1_000_000  # a 4 MB slot table on a 4 MiB file system with 1 MiB free
    with small_tmpfs(tmp_path / "fs", 4 * MiB) as fs:
        filler = fill(fs, leave_bytes=1 * MiB)
        service = IndexService(fs / "index", slots, 10_000)
        service.load(True, 0)
        for n in range(50):
            service.build_index("T", f"k{n}", None, 100 * n, 1_000_000 + n, 0)
        (path,) = (fs / "index").iterdir()
        assert path.stat().st_blocks * 512 < 512 * KiB
        for n in range(50):
            assert service.query("T", f"k{n}", 8, 0, 1 << 62).offsets == [100 * n]
        service.shutdown()

        # Loaded, which of its slot pages are allocated is not known: reads of the others
        # go through the file, and puts allocate a page first.
        filler.unlink()
        filler = fill(fs, leave_bytes=256 * KiB)
        service = IndexService(fs / "index", slots, 10_000)
        service.load(True, 0)
        assert service.query("T", "k3", 8, 0, 1 << 62).offsets == [300]
        assert service.query("T", "never", 8, 0, 1 << 62).offsets == []
        service.build_index("T", "later", None, 5_000, 1_000_100, 0)
        assert service.query("T", "later", 8, 0, 1 << 62).offsets == [5_000]
        write_filler(fs / "fill-rest", None)
        with pytest.raises(DiskFullError):  # a slot page it has no room for
            for n in range(2_000):
                service.build_index("T", f"full{n}", None, 6_000 + n, 1_000_200, 0)
        assert service.query("T", "k49", 8, 0, 1 << 62).offsets == [4_900]
        service.shutdown()


def test_a_consume_queue_takes_the_pages_it_needs_when_a_window_does_not_fit(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "fs", 1 * MiB) as fs:
        fill(fs, leave_bytes=16 * KiB)  # a window is 64 KiB
        cq = ConsumeQueue(fs / "consumequeue", "T", 0, 20 * 300_000)
        cq.files.directory.mkdir(parents=True)
        for k in range(100):
            assert cq.put(100 * k, 100, 0, k)
        write_filler(fs / "fill-rest", None)
        with pytest.raises(DiskFullError):
            for k in range(100, 10_000):
                cq.put(100 * k, 100, 0, k)
        entries = [entry for _k, entry in cq.entries(0, 10_000)]
        assert len(entries) >= 100
        assert entries == [(100 * k, 100, 0) for k in range(len(entries))]
        cq.close()


def test_the_checkpoint_is_written_on_a_full_disk(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", 1 * MiB) as fs:
        checkpoint = Checkpoint(fs / "checkpoint")
        fill(fs)
        checkpoint.physic_msg_timestamp = 1_700_000_000_000
        checkpoint.flush()
        checkpoint.close()
        again = Checkpoint(fs / "checkpoint")
        assert again.physic_msg_timestamp == 1_700_000_000_000
        again.close()
