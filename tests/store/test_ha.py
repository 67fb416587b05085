"""Commit-log replication (store/ha.py) between two real stores over loopback TCP: the slave's
commit log is byte-identical to the master's, its own dispatch builds the consume queues,
either side can restart and the stream resumes, SYNC_MASTER waits see the slave's
acknowledgements, and a slave ahead of its master is cut back, never mixed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from store.ha import HAClient, HAService
from store.message_store import MessageStore
from tests.store.conftest import commit_log_bytes, drain, message, tiny_config
from tests.support import wait_dispatched

TIMEOUT_S = 10.0


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Pair:
    """A master store with its HA service and a slave store with its HA client."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.master: MessageStore | None = None
        self.ha: HAService | None = None
        self.slave: MessageStore | None = None
        self.client: HAClient | None = None
        self.port = 0

    async def start_master(self) -> MessageStore:
        self.master = MessageStore(tiny_config(self.root / "master"))
        self.master.load()
        await self.master.start()
        self.ha = HAService(self.master)
        self.master.append_listeners.append(self.ha.notify_appended)
        self.port = await self.ha.start("127.0.0.1", self.port)
        return self.master

    async def stop_master(self) -> None:
        assert self.master is not None and self.ha is not None
        await self.ha.stop()
        await self.master.shutdown()
        self.master = self.ha = None

    async def start_slave(self) -> MessageStore:
        self.slave = MessageStore(tiny_config(self.root / "slave"))
        self.slave.load()
        await self.slave.start()
        self.client = HAClient(self.slave, lambda: f"127.0.0.1:{self.port}" if self.port else None)
        self.client.start()
        if self.ha is not None:
            # The stream has a start once the master has the slave's first report.
            await until(
                lambda: self.ha is not None and any(s.next_offset >= 0 for s in self.ha.slaves),
                "the slave's first report",
            )
        return self.slave

    async def stop_slave(self) -> None:
        assert self.slave is not None and self.client is not None
        await self.client.stop()
        await self.slave.shutdown()
        self.slave = self.client = None

    async def close(self) -> None:
        with contextlib.suppress(AssertionError):
            await self.stop_slave()
        with contextlib.suppress(AssertionError):
            await self.stop_master()


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    p = Pair(tmp_path)
    try:
        yield p
    finally:
        await p.close()


async def put(store: MessageStore, count: int, prefix: str = "m") -> None:
    for n in range(count):
        body = f"{prefix}-{n}".encode() * (1 + n % 7)
        result = await store.put_message(message("TopicHA", n % 2, body, tags="TagA", keys=f"k{n}"))
        assert result.status.stored


def same_log(pair: Pair) -> bool:
    assert pair.master is not None and pair.slave is not None
    return pair.slave.commit_log.max_offset == pair.master.commit_log.max_offset


async def test_the_slave_commit_log_is_byte_identical_and_dispatched(pair: Pair) -> None:
    master = await pair.start_master()
    await put(master, 10)  # within the first segment: the slave starts from 0
    slave = await pair.start_slave()
    await put(master, 400, "later")  # over several tiny segments
    await until(lambda: same_log(pair), "the slave to catch up")
    end = master.commit_log.max_offset
    assert commit_log_bytes(slave, end) == commit_log_bytes(master, end)
    await wait_dispatched(slave)
    for q in (0, 1):
        assert drain(slave, "TopicHA", q) == drain(master, "TopicHA", q)
    assert pair.ha is not None
    await until(lambda: pair.ha is not None and pair.ha.acked_offset == end, "the ack")


async def test_a_new_slave_starts_at_the_masters_newest_segment(pair: Pair) -> None:
    master = await pair.start_master()
    await put(master, 400)
    newest = master.commit_log.files.files[-1].start_offset
    assert newest > 0
    slave = await pair.start_slave()
    await until(lambda: same_log(pair), "the slave to catch up")
    assert slave.commit_log.min_offset == newest
    end = master.commit_log.max_offset
    assert commit_log_bytes(slave, end) == commit_log_bytes(master, end, newest)


async def test_either_side_restarts_and_the_stream_resumes(pair: Pair) -> None:
    master = await pair.start_master()
    await pair.start_slave()
    await put(master, 100)
    await until(lambda: same_log(pair), "the first catch-up")
    await pair.stop_slave()
    await put(master, 100, "while-slave-down")
    slave = await pair.start_slave()
    await until(lambda: same_log(pair), "catch-up after the slave restarted")
    await pair.stop_master()
    master = await pair.start_master()  # same port: the slave reconnects by itself
    await put(master, 100, "after-master-restart")
    await until(lambda: same_log(pair), "catch-up after the master restarted", 15)
    end = master.commit_log.max_offset
    assert commit_log_bytes(slave, end) == commit_log_bytes(master, end)


async def test_sync_master_waits_for_the_slave(pair: Pair) -> None:
    master = await pair.start_master()
    ha = pair.ha
    assert ha is not None
    assert not ha.slave_ok()  # no slave yet: SLAVE_NOT_AVAILABLE
    assert not await ha.wait_for_slave(1, 0.2)
    await pair.start_slave()
    await until(lambda: bool(ha.slaves), "the slave to connect")
    await put(master, 10)
    end = master.commit_log.max_offset
    assert await ha.wait_for_slave(end, TIMEOUT_S)
    assert ha.slave_ok()
    await pair.stop_slave()
    await until(lambda: not ha.slaves, "the slave to go")
    await put(master, 1)
    assert not await ha.wait_for_slave(master.commit_log.max_offset, 0.3)  # FLUSH_SLAVE_TIMEOUT


async def test_a_slave_ahead_of_its_master_is_cut_back(pair: Pair) -> None:
    """The master lost the tail of its commit log (restarted from an older disk) that its
    slave had replicated: the slave cuts back to the master's end and follows from there."""
    master = await pair.start_master()
    slave = await pair.start_slave()
    await put(master, 40)
    kept_end = master.commit_log.max_offset
    await put(master, 40, "lost")
    await until(lambda: same_log(pair), "the slave to have the tail too")
    await pair.stop_slave()
    await master.truncate_replica(kept_end)  # the master's tail is gone
    await pair.stop_master()
    master = await pair.start_master()
    assert master.commit_log.max_offset == kept_end
    slave = await pair.start_slave()
    await until(lambda: pair.client is not None and pair.client.truncations == 1, "the cut")
    await put(master, 20, "after")
    await until(lambda: same_log(pair), "the slave to follow the master")
    end = master.commit_log.max_offset
    assert commit_log_bytes(slave, end) == commit_log_bytes(master, end)
    await wait_dispatched(slave)
    for q in (0, 1):
        assert drain(slave, "TopicHA", q) == drain(master, "TopicHA", q)
