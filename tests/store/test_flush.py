"""Flush: FLUSH_DISK_TIMEOUT under SYNC_FLUSH, the async flusher and the checkpoint, and flushed
pages leaving the resident set."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codec import MessageInner, host_of
from store.checkpoint import Checkpoint
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore
from store.results import GetMessageStatus, PutMessageStatus

HOST = host_of("127.0.0.1", 10911)


def _config(root: Path, **changes: object) -> StoreConfig:
    base: dict[str, object] = {
        "root_dir": root,
        "commit_log_file_bytes": 16384,
        "consume_queue_file_bytes": 20 * 16,
        "max_message_bytes": 4096,
        "max_hash_slot_num": 17,
        "max_index_num": 64,
    }
    base.update(changes)
    return StoreConfig(**base)  # type: ignore[arg-type]  # test-only keyword bag


async def test_a_put_not_durable_in_time_is_stored_and_says_flush_disk_timeout(
    tmp_path: Path,
) -> None:
    # A zero timeout cannot be met by any fdatasync: the put must still be stored.
    cfg = _config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=0)
    async with MessageStore(cfg) as store:
        result = await store.put_message(MessageInner("T", 0, b"late", store_host=HOST))
        assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert result.status.stored
        store.dispatch_all()
        got = store.get_messages("T", 0, 0, 1)
        assert got.status is GetMessageStatus.FOUND
        got.release()
        # WAIT=false does not wait for the disk at all
        quick = await store.put_message(
            MessageInner("T", 0, b"nowait", store_host=HOST, wait_store_msg_ok=False)
        )
        assert quick.status is PutMessageStatus.PUT_OK


async def test_sync_flush_put_is_durable_when_acknowledged(tmp_path: Path) -> None:
    cfg = _config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    async with MessageStore(cfg) as store:
        results = await asyncio.gather(
            *(
                store.put_message(MessageInner("T", i % 2, b"x" * 300, store_host=HOST))
                for i in range(100)
            )
        )
        assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
        last = max(r.append.commit_log_offset + r.append.wrote_bytes for r in results if r.append)
        assert store.commit_log.flushed_offset >= last


async def test_async_flush_catches_up_and_the_checkpoint_follows(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        flush_interval_ms=20,
        flush_commit_log_thorough_interval_ms=20,
        flush_interval_consume_queue_ms=20,
        flush_consume_queue_thorough_interval_ms=20,
    )
    async with MessageStore(cfg) as store:
        last_time = 0
        for _i in range(30):
            result = await store.put_message(MessageInner("T", 0, b"y" * 200, store_host=HOST))
            assert result.status is PutMessageStatus.PUT_OK
            assert result.append is not None
            last_time = result.append.store_timestamp
        for _ in range(100):  # bounded: 100 x 20 ms
            if store.commit_log.flushed_offset >= store.commit_log.max_offset:
                break
            await asyncio.sleep(0.02)
        assert store.commit_log.flushed_offset == store.commit_log.max_offset
        checkpoint = store.checkpoint
        assert checkpoint is not None
        for _ in range(100):
            if checkpoint.logics_msg_timestamp >= last_time:
                break
            await asyncio.sleep(0.02)
        assert checkpoint.physic_msg_timestamp == last_time
        assert checkpoint.logics_msg_timestamp == last_time
    # the values are on disk in RocketMQ's layout: three longs at 0, 8 and 16
    on_disk = Checkpoint(tmp_path / "checkpoint")
    assert on_disk.physic_msg_timestamp == last_time
    assert on_disk.logics_msg_timestamp == last_time
    assert (tmp_path / "checkpoint").stat().st_size == 4096
    on_disk.close()


async def test_a_cancelled_waiter_does_not_fail_the_others_in_its_round(tmp_path: Path) -> None:
    cfg = _config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    async with MessageStore(cfg) as store:
        puts = [
            asyncio.ensure_future(
                store.put_message(MessageInner("T", 0, b"z" * 100, store_host=HOST))
            )
            for _ in range(20)
        ]
        await asyncio.sleep(0)  # every put appended and now waiting on the same round
        puts[3].cancel()
        results = await asyncio.gather(*puts, return_exceptions=True)
        assert isinstance(results[3], asyncio.CancelledError)
        others = [r for i, r in enumerate(results) if i != 3]
        assert all(
            not isinstance(r, BaseException) and r.status is PutMessageStatus.PUT_OK for r in others
        )
        store.dispatch_all()
        assert store.get_max_offset("T", 0) == 20  # the cancelled put was stored all the same


def _mapped_rss_kib(path: Path) -> int:
    """This process's resident KiB of the mapping of ``path`` (/proc/self/smaps)."""
    rss = 0
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line and line[0] in "0123456789abcdef" and "-" in line.split()[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            rss += int(line.split()[1])
    return rss


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_flushed_pages_leave_the_resident_set_but_not_the_file(tmp_path: Path) -> None:
    from store.mapped_file import RELEASE_KEEP_BYTES, MappedFile

    size = 16 << 20
    mf = MappedFile(tmp_path / "00000000000000000000", size, create=True)
    try:
        chunk = bytes(range(256)) * 4096  # 1 MiB of a known pattern
        for _ in range(12):
            assert mf.append(chunk)
        before = _mapped_rss_kib(mf.path)
        assert before >= 12 * 1024  # every written page is resident
        mf.flush()
        # All but the newest RELEASE_KEEP_BYTES of the durable bytes left the page tables.
        assert mf.released_position == 12 * (1 << 20) - RELEASE_KEEP_BYTES
        assert _mapped_rss_kib(mf.path) <= before - 7 * 1024
        # Reading them faults them back in from the page cache: nothing was lost.
        assert bytes(mf.view[: 12 << 20]) == chunk * 12
        for _ in range(4):
            assert mf.append(chunk)
        assert mf.is_full
        mf.flush()
        assert mf.released_position == size
        assert bytes(mf.view[(12 << 20) :]) == chunk * 4
    finally:
        mf.close()
    # and the file on disk holds every byte
    assert (tmp_path / "00000000000000000000").read_bytes() == chunk * 16
