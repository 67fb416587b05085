"""Store files are sparse: full size on paper, disk blocks only for what is written.

RocketMQ creates its segments sparse (``warmMapedFileEnable=false``); ``warmMapedFileEnable``
preallocates commit-log segments whole. The disk-full cases run a standalone broker process
on a small tmpfs that the test mounts (root only; skipped elsewhere), because a store into an
unallocated page of a mapping on a full disk is a SIGBUS that kills the process: the test
must see the broker survive, refuse writes with a clear remark, and lose nothing it
acknowledged (the store is reopened and read back afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig, load_config
from broker.namesrv.server import NameServer
from codec import decode_record
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from store.config import StoreConfig
from store.message_store import MessageStore
from tests.processes import StandaloneBroker, start_standalone
from tests.store.conftest import drain, message
from tests.support import CLIENT_CONFIG, pull, record_body, records, send

MiB = 1 << 20
INDEX_FILE_BYTES = 40 + 5_000_000 * 4 + 20_000_000 * 20  # RocketMQ's defaults, as the store's


def disk_bytes(root: Path) -> int:
    """Blocks the files under ``root`` occupy (not their sizes)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def only_file(directory: Path) -> Path:
    files = [p for p in directory.iterdir() if p.is_file()]
    assert len(files) == 1, files
    return files[0]


# ------------------------------------------------------------------------ sparse files


async def test_a_default_store_with_twenty_messages_takes_little_disk(tmp_path: Path) -> None:
    ns_cfg = NamesrvConfig(bind_address="127.0.0.1", listen_port=0, metrics_port=0)
    async with NameServer(ns_cfg) as namesrv:
        store = StoreConfig(root_dir=tmp_path / "store")  # RocketMQ's default sizes
        cfg = BrokerConfig(
            bind_address="127.0.0.1",
            listen_port=0,
            metrics_port=0,
            namesrv_addr=namesrv.address,
            store=store,
        )
        async with Broker(cfg) as broker, RemotingClient(CLIENT_CONFIG) as client:
            for i in range(19):
                response = await send(
                    client, broker.address, "SparseTopic", b"m%d" % i, keys=f"k{i}"
                )
                assert response.code == ResponseCode.SUCCESS, response
            timer = await send(
                client, broker.address, "SparseTopic", b"later", extra={"TIMER_DELAY_SEC": "3600"}
            )
            assert timer.code == ResponseCode.SUCCESS, timer
            root = store.root_dir
            for _ in range(500):  # the timer service enqueues it within a round or two
                if (root / "timerlog").is_dir() and any((root / "timerlog").iterdir()):
                    break
                await asyncio.sleep(0.02)
            # Every file keeps its full logical size: the format and the load checks rely on it.
            assert only_file(root / "commitlog").stat().st_size == 1 << 30
            queue_dir = root / "consumequeue" / "SparseTopic"
            queue_files = [p for p in queue_dir.rglob("*") if p.is_file()]
            assert queue_files
            assert {p.stat().st_size for p in queue_files} == {300_000 * 20}
            assert only_file(root / "index").stat().st_size == INDEX_FILE_BYTES
            assert only_file(root / "timerlog").stat().st_size == 100 * MiB
            used = disk_bytes(root)
        assert used < 64 * MiB, f"{used / MiB:.1f} MiB on disk for 20 messages"
        # and after a clean shutdown (final flushes) no file grew into its holes
        assert disk_bytes(root) < 64 * MiB


async def test_warm_mapped_file_enable_preallocates_commit_log_segments(tmp_path: Path) -> None:
    cfg = load_config(
        BrokerConfig,
        None,
        {
            "warmMapedFileEnable": "true",
            "storePathRootDir": str(tmp_path / "warm"),
            "mappedFileSizeCommitLog": str(64 * MiB),
        },
    )
    assert cfg.store.warm_mapped_file_enable
    assert not load_config(BrokerConfig, None, {}).store.warm_mapped_file_enable
    cold = StoreConfig(root_dir=tmp_path / "cold", commit_log_file_bytes=64 * MiB)
    for config in (cfg.store, cold):
        async with MessageStore(config) as store:
            assert (await store.put_message(message(body=b"x" * 100))).status.stored
            segment = only_file(config.root_dir / "commitlog")
            allocated = segment.stat().st_blocks * 512
            assert segment.stat().st_size == 64 * MiB
            if config.warm_mapped_file_enable:
                assert allocated >= 64 * MiB
            else:
                assert allocated <= 8 * MiB


# ----------------------------------------------------------------------------- disk full


@contextlib.contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` for the test's duration."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill up needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount command here")
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            subprocess.run(
                ["umount", "-l", str(path)], capture_output=True, timeout=60, check=False
            )


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def write_filler(path: Path, size_bytes: int | None) -> None:
    """A file of ``size_bytes`` (None: until the file system is full)."""
    chunk = b"\xa5" * 65536
    with path.open("wb", buffering=0) as f:
        written = 0
        while size_bytes is None or written < size_bytes:
            n = len(chunk) if size_bytes is None else min(len(chunk), size_bytes - written)
            try:
                written += f.write(chunk[:n]) or 0
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                assert size_bytes is None, "the file system filled up too soon"
                break
        if size_bytes is None:
            # page by page into whatever is left
            for _ in range(1 << 16):
                try:
                    f.write(chunk[:4096])
                except OSError:
                    break


BODY_BYTES = 32 * 1024


def body_for(seq: int, size: int = BODY_BYTES) -> bytes:
    """Message ``seq``: its number over and over, so a torn body shows."""
    return (b"%08d" % seq) * (size // 8)


def seq_of(body: bytes) -> int:
    seq = int(body[:8])
    assert body == body_for(seq, len(body)), f"message {seq} is torn"
    return seq


@contextlib.asynccontextmanager
async def standalone(root: Path, settings: dict[str, str]) -> AsyncIterator[StandaloneBroker]:
    broker = await asyncio.to_thread(start_standalone, root, settings)
    try:
        yield broker
    finally:
        await asyncio.to_thread(broker.stop)


Acked = dict[tuple[str, int], list[int]]


@contextlib.asynccontextmanager
async def broker_with_client(
    run: Path, settings: dict[str, str]
) -> AsyncIterator[tuple[StandaloneBroker, RemotingClient]]:
    """A standalone broker under ``run`` and a client; when the block ends normally the
    broker is stopped (SIGTERM) and must have exited 0, full disk or not."""
    async with standalone(run, settings) as broker, RemotingClient(CLIENT_CONFIG) as client:
        yield broker, client
        await asyncio.to_thread(broker.stop)
        assert broker.proc.returncode == 0, broker_log(broker)


async def send_next(
    client: RemotingClient,
    broker: StandaloneBroker,
    topic: str,
    acked: list[int],
    *,
    queue_id: int = 0,
    size: int = BODY_BYTES,
) -> RemotingCommand:
    """Send the message numbered one past ``acked``; its number joins ``acked`` if stored."""
    seq = max(acked, default=0) + 1
    response = await send_to(client, broker, topic, body_for(seq, size), queue_id)
    if response.code == ResponseCode.SUCCESS:
        acked.append(seq)
    return response


async def send_until_refused(
    client: RemotingClient, broker: StandaloneBroker, topic: str, acked: list[int], limit: int
) -> RemotingCommand:
    """Send numbered messages to queue 0 until one is refused; the acknowledged numbers go
    to ``acked``."""
    for _ in range(limit):
        response = await send_next(client, broker, topic, acked)
        if response.code != ResponseCode.SUCCESS:
            assert_alive(broker)
            return response
    pytest.fail(f"{limit} sends to {topic} and none refused")


async def send_to(
    client: RemotingClient, broker: StandaloneBroker, topic: str, body: bytes, queue_id: int = 0
) -> RemotingCommand:
    """``send`` to the standalone broker; a lost connection reports how the broker died."""
    try:
        return await send(client, broker.broker, topic, body, queue_id=queue_id)
    except RemotingError:
        await asyncio.sleep(0.5)  # let a dying process finish dying
        assert_alive(broker)
        raise


def broker_log(broker: StandaloneBroker) -> str:
    return (broker.store.parent / "broker.log").read_text()


def assert_alive(broker: StandaloneBroker) -> None:
    code = broker.proc.poll()
    assert code is None, f"the broker died (exit {code}): {broker_log(broker)[-3000:]}"


async def pulled(
    client: RemotingClient, broker: StandaloneBroker, topic: str, queue_id: int = 0
) -> list[int]:
    """Sequence numbers in a queue, as a consumer pulls them."""
    out: list[int] = []
    offset = 0
    for _ in range(1000):
        response = await pull(client, broker.broker, topic, queue_id=queue_id, offset=offset)
        if response.code != ResponseCode.SUCCESS:
            return out
        body = response.body_bytes
        infos = records(body)
        out += [seq_of(record_body(body, infos, n)) for n in range(len(infos))]
        offset = infos[-1].queue_offset + 1
    pytest.fail("the queue did not end")


async def read_back(store_dir: Path, copy_dir: Path, settings: dict[str, str]) -> Acked:
    """Copy the store off the small file system, recover it there (with the broker's store
    settings) and read every queue of the test's topics back; the recovery must find a
    clean end."""
    shutil.copytree(store_dir, copy_dir, ignore=shutil.ignore_patterns("fill*"))
    out: Acked = {}
    config = dataclasses.replace(load_config(BrokerConfig, None, settings).store, root_dir=copy_dir)
    async with MessageStore(config) as store:
        assert store.last_exit_ok
        for cq in store.queues:
            if cq.topic.startswith(("Full", "Dispatch")):
                stored = drain(store, cq.topic, cq.queue_id)
                out[cq.topic, cq.queue_id] = [seq_of(body_of(r)) for r in stored]
    torn = copy_dir / "torn"
    assert not torn.exists() or not any(torn.iterdir()), "recovery cut a torn tail"
    return out


def body_of(record: bytes) -> bytes:
    info = decode_record(record, 0, check_crc=True)
    return record[info.body_offset : info.body_offset + info.body_length]


async def wait_for(what: str, timeout_s: float, check: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(int(timeout_s / 0.1) + 1):
        if await check():
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


# The commit log's segments are 8 MiB, allocated 4 MiB at a time: on this file system the
# second window of the first segment, and later the second segment, find no room.
FULL_SETTINGS = {
    "mappedFileSizeCommitLog": str(8 * MiB),
    "maxHashSlotNum": "64",
    "maxIndexNum": "1024",
    "cleanResourceInterval": "300",  # the usage check (refuse above 90 %) runs often
    "flushIntervalCommitLog": "50",
}


async def test_a_full_disk_refuses_writes_and_loses_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with small_tmpfs(run / "store", 20 * MiB) as fs:
        async with broker_with_client(run, FULL_SETTINGS) as (broker, client):
            acked: list[int] = []
            response = await send_to(client, broker, "Full", body_for(1))
            assert response.code == ResponseCode.SUCCESS, response
            acked.append(1)
            # Leave 3 MiB (85 % used: below the 90 % at which the store refuses by usage),
            # 4 MiB of it in a file deleted later.
            write_filler(fs / "fill-base", free_bytes(fs) - 7 * MiB)
            write_filler(fs / "fill-extra", 4 * MiB)

            # The rest of the first 4 MiB window fills; the next window finds no room.
            refused = await send_until_refused(client, broker, "Full", acked, 400)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused
            assert "disk full: cannot allocate" in (refused.remark or "")
            assert 100 < len(acked) < 130
            assert await pulled(client, broker, "Full") == acked  # readable while full

            # Room again: the window is allocated, the segment fills, the next segment
            # cannot be created.
            (fs / "fill-extra").unlink()
            refused = await send_until_refused(client, broker, "Full", acked, 400)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused
            assert "disk full" in (refused.remark or "")
            assert 220 < len(acked) < 260

            # Full to the last page: refused, and the usage check says so too.
            write_filler(fs / "fill-last", None)

            async def refused_by_usage() -> bool:
                response = await send_to(client, broker, "Full", body_for(0))
                assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE, response
                return "usage above" in (response.remark or "")

            await wait_for("the usage check to refuse writes", 15, refused_by_usage)
            assert_alive(broker)
            assert await pulled(client, broker, "Full") == acked

            # Space freed: writes are taken again.
            for filler in fs.glob("fill-*"):
                filler.unlink()

            async def taken() -> bool:
                response = await send_next(client, broker, "Full", acked)
                return response.code == ResponseCode.SUCCESS

            await wait_for("writes to be taken again", 15, taken)
            assert await pulled(client, broker, "Full") == acked
        got = await read_back(fs, tmp_path / "copy", FULL_SETTINGS)
    assert got == {("Full", 0): acked}


DISPATCH_SETTINGS = {
    "warmMapedFileEnable": "true",  # the commit log has its room; queues and index do not
    "mappedFileSizeCommitLog": str(4 * MiB),
    "maxHashSlotNum": "16",
    "maxIndexNum": "8",  # a new index file every 7 keys
    "cleanResourceInterval": "3600000",  # no usage check: dispatch meets the full disk
}


async def test_a_disk_full_during_dispatch_is_retried_without_a_crash(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with small_tmpfs(run / "store", 12 * MiB) as fs:
        async with broker_with_client(run, DISPATCH_SETTINGS) as (broker, client):
            acked: Acked = {("DispatchA", 0): [], ("DispatchB", 0): [], ("DispatchB", 1): []}

            async def send_some(topic: str, queue_id: int, count: int) -> None:
                for _ in range(count):
                    response = await send_next(
                        client, broker, topic, acked[topic, queue_id], queue_id=queue_id, size=512
                    )
                    # stored, or refused while dispatch is stuck: never a dropped connection
                    assert response.code in (
                        ResponseCode.SUCCESS,
                        ResponseCode.SERVICE_NOT_AVAILABLE,
                    ), response
                    assert_alive(broker)

            # Topics exist before the disk fills (their config is written then).
            await send_some("DispatchA", 0, 3)
            await send_some("DispatchB", 0, 1)
            assert len(acked["DispatchA", 0]) == 3 and len(acked["DispatchB", 0]) == 1
            # The index file holds 7 keys and has 4: three more fill it, and the next index
            # file cannot be created. Then a new queue's first window cannot be allocated.
            for topic, queue_id, where in (
                ("DispatchA", 0, "/index/"),
                ("DispatchB", 1, "/consumequeue/DispatchB/1/"),
            ):
                write_filler(fs / "fill", None)
                before = broker_log(broker).count("DiskFullError")
                await send_some(topic, queue_id, 12)
                assert acked[topic, queue_id], "the commit log had room: some were stored"

                async def failed(before: int = before) -> bool:
                    return broker_log(broker).count("DiskFullError") > before

                await wait_for("dispatch to report the full disk", 15, failed)
                assert where in broker_log(broker).rsplit("DiskFullError: disk full", 1)[1]
                assert_alive(broker)
                (fs / "fill").unlink()

                async def caught_up(topic: str = topic, queue_id: int = queue_id) -> bool:
                    # Writes are refused until dispatch got past the failure; then every
                    # acknowledged message is readable.
                    done = acked[topic, queue_id]
                    response = await send_next(
                        client, broker, topic, done, queue_id=queue_id, size=512
                    )
                    if response.code != ResponseCode.SUCCESS:
                        return False
                    return await pulled(client, broker, topic, queue_id) == done

                await wait_for("dispatch to catch up once there is room", 30, caught_up)
            await send_some("DispatchB", 1, 2)
            assert await pulled(client, broker, "DispatchB", 1) == acked["DispatchB", 1]
        got = await read_back(fs, tmp_path / "copy", DISPATCH_SETTINGS)
    assert got == acked


TIMER_SETTINGS = {
    "warmMapedFileEnable": "true",
    "mappedFileSizeCommitLog": str(4 * MiB),
    "messageIndexEnable": "false",
    "mappedFileSizeTimerLog": "160",  # 4 entries a segment: a new one every 4 timers
    "timerPrecisionMs": "100",
    "cleanResourceInterval": "3600000",
}


async def test_a_full_disk_holds_timers_back_and_loses_none(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with small_tmpfs(run / "store", 8 * MiB) as fs:
        async with broker_with_client(run, TIMER_SETTINGS) as (broker, client):
            sent: list[int] = []

            async def send_timer(seq: int) -> None:
                response = await send(
                    client,
                    broker.broker,
                    "TimerT",
                    body_for(seq, 64),
                    extra={"TIMER_DELAY_MS": "300"},
                )
                assert response.code == ResponseCode.SUCCESS, response
                sent.append(seq)

            async def delivered() -> bool:
                return await pulled(client, broker, "TimerT") == sent

            await send_timer(1)  # the timer queue, the timer log and the topic exist
            await wait_for("the first timer", 15, delivered)
            write_filler(fs / "fill", None)
            # The commit log has its room (warm): all are stored. Three fit the timer log's
            # first segment; the fourth needs a new segment, which finds no room.
            for seq in range(2, 8):
                await send_timer(seq)

            async def first_four() -> bool:
                return await pulled(client, broker, "TimerT") == sent[:4]

            await wait_for("the timers the log took", 15, first_four)
            await asyncio.sleep(1.0)  # the others would be due by now
            assert await first_four(), "a timer was delivered without its log entry"
            assert_alive(broker)
            (fs / "fill").unlink()
            await wait_for("every timer once there is room", 30, delivered)
            log_text = broker_log(broker)
            assert "timer_log_disk_full" in log_text and "timer_log_writable_again" in log_text
