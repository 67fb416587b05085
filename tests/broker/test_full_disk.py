"""A full disk never crashes the broker: end to end, on a small file system.

A standalone broker process (a SIGBUS would kill the test runner in-process) keeps its store
on a small tmpfs the test mounts (root only, as CI runs; skipped elsewhere). Sends fill it
until the disk guard refuses them; a filler file then takes the last page; the broker keeps
serving reads, stops cleanly, starts again on the full disk (after a clean stop and after a
kill -9) and serves every acknowledged message; once the filler is gone writes resume, and
nothing acknowledged is lost. The table files (consumer offsets, topics, …) that cannot be
written on the full disk keep their previous contents.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.namesrv.kv_config import KVConfig
from broker.offsets import OffsetTable
from broker.persist import JsonFile, read_json, try_write_json, write_json
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from tests.broker.test_metrics import scrape, value
from tests.processes import StandaloneBroker, start_standalone
from tests.store.test_sparse import (
    assert_alive,
    body_for,
    broker_log,
    free_bytes,
    pulled,
    read_back,
    send_next,
    send_to,
    small_tmpfs,
    wait_for,
    write_filler,
)
from tests.support import CLIENT_CONFIG, call

MiB = 1 << 20
FS_BYTES = 32 * MiB
BODY_BYTES = 16 * 1024
TOPIC = "FullDisk"
GROUP = "cg-full-disk"

SETTINGS = {
    "mappedFileSizeCommitLog": str(1 * MiB),  # a segment is 1/32 of the disk
    "maxMessageSize": str(256 * 1024),
    "maxHashSlotNum": "4096",
    "maxIndexNum": "2048",  # a new index file every 2,047 keys
    # The periodic disk check is as good as off: what refuses sends here is the check a
    # new commit-log segment runs, and what takes them again is the refusal's own recheck.
    "cleanResourceInterval": "3600000",
    "flushIntervalCommitLog": "50",
    "flushConsumerOffsetInterval": "200",
}


async def commit_offset(client: RemotingClient, broker: StandaloneBroker, offset: int) -> None:
    response = await call(
        client,
        broker.broker,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": str(offset)},
    )
    assert response.code == ResponseCode.SUCCESS, response


async def disk_full_gauge(broker: StandaloneBroker) -> float:
    assert broker.metrics is not None
    return value(await scrape(int(broker.metrics.rpartition(":")[2])), "rocketmq_storage_disk_full")


async def query_offset(client: RemotingClient, broker: StandaloneBroker) -> int:
    response = await call(
        client,
        broker.broker,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    return int(response.ext_fields["offset"])


def start(run: Path, name: str) -> StandaloneBroker:
    """A standalone broker on the store under ``run``; the log of the previous one is kept
    as ``<name>.log``."""
    if (run / "broker.log").exists():
        (run / "broker.log").rename(run / f"{name}.log")
    return start_standalone(run, SETTINGS)


async def stop(broker: StandaloneBroker) -> None:
    """SIGTERM; the broker must exit 0 and leave no ``abort`` file (a clean shutdown),
    full disk or not."""
    await asyncio.to_thread(broker.stop)
    assert broker.proc.returncode == 0, broker_log(broker)[-4000:]
    assert not (broker.store / "abort").exists(), "the shutdown was not clean"


async def test_a_broker_on_a_full_disk_refuses_sends_serves_reads_and_restarts(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    with small_tmpfs(run / "store", FS_BYTES) as fs:
        acked: list[int] = []
        broker = await asyncio.to_thread(start, run, "first")
        try:
            async with RemotingClient(CLIENT_CONFIG) as client:
                # Fill the disk with sends: the check a new segment runs refuses them once
                # the disk is 90 % used, before it is full. A fifth of it is a file deleted
                # at the end, to bring the usage back under 90 %.
                write_filler(fs / "fill-reserve", FS_BYTES // 5)
                await commit_offset(client, broker, 1)
                for _ in range(FS_BYTES // BODY_BYTES):
                    refused = await send_next(client, broker, TOPIC, acked, size=BODY_BYTES)
                    if refused.code != ResponseCode.SUCCESS:
                        break
                assert_alive(broker)
                assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused
                remark = refused.remark or ""
                assert "usage above 90%" in remark and str(fs) in remark, remark
                assert free_bytes(fs) > FS_BYTES // 20, "refused only once the disk was full"
                assert await disk_full_gauge(broker) == 1
                assert len(acked) > (FS_BYTES * 6 // 10) // BODY_BYTES
                assert await pulled(client, broker, TOPIC) == acked
                consumer_offsets = fs / "config" / "consumerOffset.json"

                async def offsets_written() -> bool:
                    return await asyncio.to_thread(consumer_offsets.exists)

                await wait_for("the offsets file", 10, offsets_written)
                kept_offsets = consumer_offsets.read_bytes()

                # Full to the last page: refused, alive, and every acknowledged message read.
                write_filler(fs / "fill", None)
                for _ in range(3):
                    response = await send_to(client, broker, TOPIC, body_for(0, BODY_BYTES))
                    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE, response
                    assert str(fs) in (response.remark or ""), response
                await commit_offset(client, broker, 7)  # cannot be written out now
                await asyncio.sleep(0.6)  # a few offset flushes fail meanwhile
                assert_alive(broker)
                assert await pulled(client, broker, TOPIC) == acked
            await stop(broker)
            # The offsets file could not be rewritten: the previous one is whole, no
            # temporary file is left behind.
            assert consumer_offsets.read_bytes() == kept_offsets
            assert json.loads(kept_offsets)["offsetTable"] == {f"{TOPIC}@{GROUP}": {"0": 1}}
            assert not list((fs / "config").glob("*.tmp"))

            # It starts on the full disk, after a clean stop and after a kill -9, and
            # serves every acknowledged message.
            for name in ("stopped", "killed"):
                broker = await asyncio.to_thread(start, run, name)
                async with RemotingClient(CLIENT_CONFIG) as client:
                    assert await pulled(client, broker, TOPIC) == acked
                    assert await query_offset(client, broker) == 1
                    response = await send_to(client, broker, TOPIC, body_for(0, BODY_BYTES))
                    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE, response
                    assert str(fs) in (response.remark or ""), response
                if name == "stopped":
                    broker.proc.send_signal(signal.SIGKILL)
                    await asyncio.to_thread(broker.proc.wait, 10)
                    assert broker.proc.returncode == -signal.SIGKILL
                    broker.stop()
                    assert (fs / "abort").exists()

            # Room again: sends are taken once the refusal's recheck sees it.
            for filler in fs.glob("fill*"):
                filler.unlink()
            async with RemotingClient(CLIENT_CONFIG) as client:

                async def taken() -> bool:
                    response = await send_next(client, broker, TOPIC, acked, size=BODY_BYTES)
                    return response.code == ResponseCode.SUCCESS

                await wait_for("sends to be taken again", 15, taken)
                assert await disk_full_gauge(broker) == 0
                for _ in range(3):
                    await send_next(client, broker, TOPIC, acked, size=BODY_BYTES)
                assert await pulled(client, broker, TOPIC) == acked
                await commit_offset(client, broker, 9)
            await stop(broker)
            assert read_json(consumer_offsets) == {"offsetTable": {f"{TOPIC}@{GROUP}": {"0": 9}}}
        finally:
            broker.stop()
            shutil.copy(run / "broker.log", tmp_path / "last.log")
        got = await read_back(fs, tmp_path / "copy", SETTINGS)
    assert got == {(TOPIC, 0): acked}


def test_a_table_file_that_cannot_be_written_keeps_the_previous_one(tmp_path: Path) -> None:
    """The broker's JSON tables and the name server's kvConfig.json on a full disk."""
    with small_tmpfs(tmp_path / "fs", 1 * MiB) as fs:
        path = fs / "config" / "topics.json"
        write_json(path, {"version": 1})
        write_filler(fs / "fill", None)
        big = {"version": 2, "padding": "x" * 20_000}
        with pytest.raises(OSError, match="No space left on device"):
            write_json(path, big)
        # The previous file is whole, and no temporary file holds on to space.
        assert read_json(path) == {"version": 1}
        assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json"]
        # The name server's kvConfig.json likewise (the put that could not be saved fails).
        kv = KVConfig(fs / "config" / "kvConfig.json")
        with pytest.raises(OSError, match="No space left on device"):
            kv.put("ns", "key", "x" * 20_000)
        assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json"]
        with capture_logs() as logs:
            assert not try_write_json(path, big)
            assert not JsonFile(path).save_now(big)
        assert [e["event"] for e in logs] == ["config_file_write_failed"] * 2
        assert logs[0]["path"] == str(path)
        assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json"]

        # Consumer offsets that could not be written are written at the next turn.
        offsets = OffsetTable(fs / "config" / "consumerOffset.json")
        offsets.commit("cg", "T", 0, 5)
        offsets.persist()
        (fs / "fill").unlink()
        offsets.persist()
        assert read_json(offsets.path) == {"offsetTable": {"T@cg": {"0": 5}}}
        assert try_write_json(path, big)
        assert read_json(path) == big
