"""A slave's dispatch over commit-log bytes that arrive in arbitrary ranges.

Replication (store/ha.py) appends whatever range of the commit log the master sent: 32 KiB at
most, cut wherever that falls, so a record, its 8-byte header or a segment's END-OF-FILE
blank may arrive in pieces. Dispatch must consume whole records only and build the same
consume queues and index as the master's, whatever the cuts; a record that cannot be one is
a failure that is logged, counted, refuses writes and is retried, never a silent stop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from codec import SCHEDULE_TOPIC
from store.dispatch import RETRY_FIRST_S
from store.message_store import MessageStore
from store.results import PutMessageStatus
from tests.store.conftest import (
    batch,
    commit_log_bytes,
    drain,
    message,
    tiny_config,
    walk_commit_log,
)
from tests.support import wait_dispatched

TOPICS = ("TopicRA", "TopicRB")


@pytest.fixture(scope="module")
def master_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[bytes, Path]]:
    """A master's commit log over several 4 KiB segments: single messages of many sizes
    with tags and keys on two topics and queues, batches, delayed messages (their own
    topic), so records of every kind, blank records and segment ends all occur."""
    root = tmp_path_factory.mktemp("master")

    async def build() -> bytes:
        async with MessageStore(tiny_config(root)) as master:
            rng = random.Random(7)
            for n in range(60):
                topic = TOPICS[n % 2]
                body = bytes(rng.randrange(256) for _ in range(rng.choice((1, 17, 200, 900))))
                result = await master.put_message(
                    message(topic, n % 3, body, tags=f"Tag{n % 4}", keys=f"k{n} order-{n}")
                )
                assert result.status.stored
                if n % 9 == 0:
                    entries = [(0, f"b{n}-{i}".encode() * 20, b"KEYS\x01bk") for i in range(4)]
                    got = await master.put_messages(batch(TOPICS[0], 1, entries))
                    assert got.status.stored
                if n % 13 == 0:
                    delayed = message(TOPICS[1], 0, b"later", props={"DELAY": "3"})
                    assert (await master.put_message(delayed)).status.stored
            await wait_dispatched(master)
            return commit_log_bytes(master, master.commit_log.max_offset)

    yield asyncio.run(build()), root


def slave_store(tmp_path: Path) -> MessageStore:
    store = MessageStore(tiny_config(tmp_path / "slave"))
    store.load()
    return store


def feed(store: MessageStore, data: bytes, cuts: list[int]) -> None:
    """Append ``data`` cut at ``cuts``, dispatching after every piece (as the live service
    would whenever the loop turns)."""
    pos = 0
    for cut in [*cuts, len(data)]:
        if cut <= pos:
            continue
        store.append_replicated(pos, data[pos:cut])
        store.dispatch.dispatch_available()
        pos = cut


async def assert_same_as_master(slave: MessageStore, master_root: Path) -> None:
    assert slave.dispatch.behind_bytes == 0
    master = MessageStore(tiny_config(master_root))
    master.load()
    try:
        for topic in (*TOPICS, SCHEDULE_TOPIC):
            for queue_id in range(3):
                assert drain(slave, topic, queue_id) == drain(master, topic, queue_id), (
                    topic,
                    queue_id,
                )
        for key in ("k5", "order-42", "bk"):
            for topic in TOPICS:
                mine = slave.query_message(topic, key, 64, 0, 2**62)
                theirs = master.query_message(topic, key, 64, 0, 2**62)
                assert [bytes(r) for r in mine.records] == [bytes(r) for r in theirs.records]
    finally:
        await master.shutdown()


async def test_one_byte_at_a_time(master_log: tuple[bytes, Path], tmp_path: Path) -> None:
    """Every cut there can be: inside each record's size word, magic, header and body,
    inside each blank record and at every segment end."""
    data, master_root = master_log
    slave = slave_store(tmp_path)
    try:
        feed(slave, data, list(range(1, len(data))))
        await assert_same_as_master(slave, master_root)
    finally:
        await slave.shutdown()


@pytest.mark.parametrize("shift", [-9, -8, -5, -4, -1, 1, 3, 4, 7, 8, 9])
async def test_cuts_next_to_every_record_start(
    master_log: tuple[bytes, Path], tmp_path: Path, shift: int
) -> None:
    """Whole records but for a few bytes, or a few bytes of the next one."""
    data, master_root = master_log
    slave = slave_store(tmp_path)
    starts = [offset for offset, _record, _size in walk_commit_log(tiny_config(master_root))]
    cuts = sorted({s + shift for s in starts if 0 < s + shift < len(data)})
    try:
        feed(slave, data, cuts)
        await assert_same_as_master(slave, master_root)
    finally:
        await slave.shutdown()


@pytest.mark.parametrize("seed", range(4))
async def test_random_ranges_with_the_service_running(
    master_log: tuple[bytes, Path], tmp_path: Path, seed: int
) -> None:
    """The dispatch service itself (woken by each append) over random ranges."""
    data, master_root = master_log
    rng = random.Random(seed)
    async with MessageStore(tiny_config(tmp_path / "slave")) as slave:
        pos = 0
        while pos < len(data):
            n = rng.choice((1, 2, 7, 8, 9, 100, 1000, 5000))
            slave.append_replicated(pos, data[pos : pos + n])
            pos = min(len(data), pos + n)
            await asyncio.sleep(0)
        await wait_dispatched(slave)
        assert slave.dispatch.healthy and slave.dispatch.failures == 0
        await assert_same_as_master(slave, master_root)


async def test_a_corrupt_record_is_reported_and_refuses_writes(
    master_log: tuple[bytes, Path], tmp_path: Path
) -> None:
    """A record that cannot be one (here: its magic destroyed in a segment that is
    complete) stops dispatch at that offset: logged once with the offset, counted, retried,
    writes refused with a remark naming it; when the bytes are cut away (as a master does to
    a slave that is ahead of it) dispatch recovers and says so."""
    data, master_root = master_log
    seg = 4096
    records = walk_commit_log(tiny_config(master_root))
    bad_at = next(offset for offset, record, _ in records if offset >= seg and record)
    broken = bytearray(data)
    broken[bad_at + 4 : bad_at + 8] = b"\x00\x00\x00\x01"
    with capture_logs() as logs:
        async with MessageStore(tiny_config(tmp_path / "slave")) as slave:
            slave.append_replicated(0, bytes(broken[: 3 * seg]))
            deadline = asyncio.get_running_loop().time() + 10
            while slave.dispatch.failures < 3:
                assert asyncio.get_running_loop().time() < deadline, "no retries"
                await asyncio.sleep(RETRY_FIRST_S)
            assert not slave.dispatch.healthy
            assert slave.dispatch.error_offset == bad_at
            assert slave.dispatch.reput_from_offset == bad_at
            refused = await slave.put_message(message(TOPICS[0], 0, b"x"))
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert f"offset {bad_at}" in refused.remark
            await slave.truncate_replica(bad_at)
            slave.append_replicated(bad_at, data[bad_at : 3 * seg])
            await wait_dispatched(slave)
            deadline = asyncio.get_running_loop().time() + 15
            while not slave.dispatch.healthy:
                assert asyncio.get_running_loop().time() < deadline, "never recovered"
                await asyncio.sleep(0.05)
    events = [e["event"] for e in logs]
    assert events.count("dispatch_failed") == 1
    assert "dispatch_retry_failed" in events
    assert "dispatch_recovered" in events
    failed = next(e for e in logs if e["event"] == "dispatch_failed")
    assert failed["commit_log_offset"] == bad_at
