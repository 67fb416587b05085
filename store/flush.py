"""Flush services: when written bytes become durable.

RocketMQ counterpart: ``CommitLog.FlushRealTimeService`` (ASYNC_FLUSH),
``CommitLog.GroupCommitService`` (SYNC_FLUSH) and ``FlushConsumeQueueService``.
docs/store-format.md §9.

- ASYNC_FLUSH: every ``flushIntervalCommitLog`` ms, flush if at least
  ``flushCommitLogLeastPages`` pages are dirty, everything every
  ``flushCommitLogThoroughInterval``. Puts never wait.
- SYNC_FLUSH (group commit): a put waits until the commit log is durable past its record.
  Waiters that arrive while a flush runs share the next one, so many concurrent puts pay for
  one ``fdatasync``. A waiter not served within ``syncFlushTimeout`` gets
  FLUSH_DISK_TIMEOUT (its message is stored all the same).
- Consume queues every ``flushIntervalConsumeQueue`` ms (least pages 2, all every 60 s),
  then the checkpoint.

The blocking calls run on threads (``fdatasync`` releases the GIL): the commit log has its
own thread, because a group commit must not queue behind hundreds of consume-queue files;
consume queues, index and checkpoint share a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import structlog

from store.checkpoint import Checkpoint
from store.commit_log import CommitLog
from store.config import FlushDiskType, StoreConfig
from store.consume_queue import ConsumeQueueTable
from store.index_file import IndexService

log = structlog.get_logger(__name__)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class CommitLogFlusher:
    """Flushes the commit log: periodically (ASYNC_FLUSH) or for waiting puts (SYNC_FLUSH)."""

    def __init__(self, commit_log: CommitLog, config: StoreConfig, checkpoint: Checkpoint) -> None:
        self.commit_log = commit_log
        self.config = config
        self.checkpoint = checkpoint
        self.sync = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="store-flush-commitlog")
        self._round: asyncio.Future[None] | None = None
        self._round_timer: asyncio.TimerHandle | None = None
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self.flushes = 0  # fdatasync rounds, for metrics and the group-commit benchmark
        self.flush_seconds = 0.0  # their total time (with flushes, a mean for metrics)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="store-flush-commitlog")

    async def wait_durable(self, end_offset: int) -> bool:
        """Wait until the commit log is durable up to ``end_offset`` (SYNC_FLUSH puts).

        Returns False when ``syncFlushTimeout`` passed first. Waiters share one future per
        flush round, resolved when the round ends (or when its timer runs out): a per-waiter
        future, timeout and shield cost a quarter of the throughput at 256 writers.
        """
        cl = self.commit_log
        if cl.flushed_offset >= end_offset:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.sync_flush_timeout_ms / 1000
        while True:
            if loop.time() >= deadline:
                return False
            round_done = self._round
            if round_done is None or round_done.done():
                round_done = self._round = loop.create_future()
                # one timer per round, so a flush that hangs still releases its waiters
                self._round_timer = loop.call_at(deadline, _resolve, round_done)
            self._wakeup.set()
            try:
                await round_done
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # another waiter was cancelled and took the shared future with it: go on
            if cl.flushed_offset >= end_offset:
                return True

    def wake(self) -> None:
        """A put that does not wait (WAIT=false) still prompts a flush soon."""
        if self.sync:
            self._wakeup.set()

    async def _flush_once(self, least_pages: int) -> None:
        loop = asyncio.get_running_loop()
        # the store time of what is about to be durable, for the checkpoint
        timestamp = self.commit_log.last_store_timestamp
        target = self.commit_log.max_offset
        started = time.perf_counter()
        flushed = await loop.run_in_executor(self._pool, self.commit_log.flush, least_pages)
        self.flush_seconds += time.perf_counter() - started
        self.flushes += 1
        if flushed >= target and timestamp:
            self.checkpoint.physic_msg_timestamp = timestamp

    def _complete_waiters(self) -> None:
        """End the current round: its waiters check whether the flush covered them."""
        round_done, self._round = self._round, None
        if round_done is not None:
            _resolve(round_done)
        if self._round_timer is not None:
            self._round_timer.cancel()
            self._round_timer = None

    async def _run(self) -> None:
        cfg = self.config
        last_thorough = time.monotonic()
        while not self._stopping:
            try:
                if self.sync:
                    # GroupCommitService: wait up to 10 ms, woken at once by a new waiter.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.01):
                            await self._wakeup.wait()
                    self._wakeup.clear()
                    if self.commit_log.max_offset > self.commit_log.flushed_offset:
                        await self._flush_once(0)
                    self._complete_waiters()
                else:
                    with contextlib.suppress(TimeoutError):  # a shutdown cuts the wait short
                        async with asyncio.timeout(cfg.flush_interval_ms / 1000):
                            await self._wakeup.wait()
                    self._wakeup.clear()
                    least = cfg.flush_commit_log_least_pages
                    now = time.monotonic()
                    if now - last_thorough >= cfg.flush_commit_log_thorough_interval_ms / 1000:
                        least = 0
                        last_thorough = now
                    if self.commit_log.max_offset > self.commit_log.flushed_offset:
                        await self._flush_once(least)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("commit_log_flush_failed")
                await asyncio.sleep(0.1)

    async def shutdown(self) -> bool:
        """Stop the loop, then flush everything (retried as RocketMQ does); returns False
        when a flush failed (logged, never raised: the store must still shut down)."""
        self._stopping = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None
        try:
            for _ in range(10):
                await self._flush_once(0)
                if self.commit_log.flushed_offset >= self.commit_log.max_offset:
                    break
        except OSError:
            log.exception("commit_log_flush_failed")
            return False
        finally:
            self._complete_waiters()
            self._pool.shutdown(wait=True)
        return True


class QueueFlusher:
    """Flushes consume queues and the index, then writes the checkpoint."""

    def __init__(
        self,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        checkpoint: Checkpoint,
        config: StoreConfig,
        logics_timestamp: Callable[[], int],
    ) -> None:
        self.queues = queues
        self.index = index
        self.checkpoint = checkpoint
        self.config = config
        self.logics_timestamp = logics_timestamp
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="store-io")
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="store-flush-queues")

    def _flush_all(self, least_pages: int, with_checkpoint: bool, logics_ts: int) -> None:
        for cq in self.queues:
            cq.flush(least_pages)
        if with_checkpoint:
            if self.index is not None:
                self.index.flush()
                self.checkpoint.index_msg_timestamp = max(
                    self.checkpoint.index_msg_timestamp, self.index.last_full_end_timestamp
                )
            if logics_ts:
                self.checkpoint.logics_msg_timestamp = logics_ts
            self.checkpoint.flush()

    async def _run(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        last_thorough = time.monotonic()
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(cfg.flush_interval_consume_queue_ms / 1000):
                    await self._stopping.wait()
            now = time.monotonic()
            thorough = now - last_thorough >= cfg.flush_consume_queue_thorough_interval_ms / 1000
            if thorough:
                last_thorough = now
            least = 0 if thorough else cfg.flush_consume_queue_least_pages
            # captured before the flush: only what is durable may be claimed in the checkpoint
            logics_ts = self.logics_timestamp()
            try:
                await loop.run_in_executor(self.pool, self._flush_all, least, thorough, logics_ts)
            except Exception:
                log.exception("consume_queue_flush_failed")

    async def shutdown(self) -> bool:
        """Stop the loop, then flush queues, index and checkpoint; returns whether that
        succeeded (a failure, a full disk for the checkpoint say, is logged, not raised)."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.pool, self._flush_all, 0, True, self.logics_timestamp())
        except OSError:
            log.exception("consume_queue_flush_failed")
            return False
        finally:
            self.pool.shutdown(wait=True)
        return True
