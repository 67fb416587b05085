"""Retention: deleting expired commit-log segments, then what pointed only into them.

RocketMQ counterpart: ``DefaultMessageStore.CleanCommitLogService`` and
``CleanConsumeQueueService``. docs/store-format.md §10.

A pass deletes the oldest commit-log segments (never the newest) whose last modification is
older than ``fileReservedTime`` hours — when the local hour is one of ``deleteWhen``, when
disk usage is above ``diskMaxUsedSpaceRatio``, or when an operator asked for it. Above
``disk_space_clean_forcibly_ratio`` (85 %) segments go regardless of age. Above
``disk_space_warning_level_ratio`` (90 %) the store also refuses writes (SERVICE_NOT_AVAILABLE)
until usage drops, rather than fill the disk and corrupt a segment. After the commit log's
minimum moves, consume-queue segments whose last entry points below it, and index files that
end below it, are deleted, and each queue's minimum offset moves up.

Deletion runs on the event loop: it only unlinks files and edits the segment lists, which
readers on the loop see consistently; a segment still held by a reader is unmapped when the
reader releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from store.commit_log import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueueTable
from store.index_file import IndexService

log = structlog.get_logger(__name__)

MAX_DELETES_PER_PASS = 10  # RocketMQ deletes at most 10 segments per pass


@dataclass(slots=True)
class RetentionReport:
    commit_log_segments: list[str] = field(default_factory=list)
    consume_queue_segments: int = 0
    index_files: int = 0
    disk_used_ratio: float = 0.0


class RetentionService:
    """Deletes expired files; tells the store when the disk is too full to write.

    Args:
        clock: seconds since the epoch (tests pass a fake one).
        disk_used_ratio: used/total of the store's file system (tests pass a fake one).
    """

    def __init__(
        self,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        config: StoreConfig,
        *,
        clock: Callable[[], float] = time.time,
        disk_used_ratio: Callable[[], float] | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.config = config
        self.clock = clock
        self.disk_used_ratio = disk_used_ratio or self._disk_used_ratio
        self.disk_full = False
        self._manual_passes = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def _disk_used_ratio(self) -> float:
        usage = shutil.disk_usage(self.config.root_dir)
        return usage.used / usage.total if usage.total else 0.0

    def request_delete(self, passes: int = 20) -> None:
        """An operator's request (TRIGGER_DELETE_FILES / deleteExpiredCommitLog): the next
        passes delete expired segments whatever the hour."""
        self._manual_passes = passes

    def _delete_hour_now(self) -> bool:
        hour = time.localtime(self.clock()).tm_hour
        return any(int(h) == hour for h in self.config.delete_when.split(";") if h.strip())

    def run_once(self) -> RetentionReport:
        """One pass: decide, delete, and update ``disk_full``."""
        cfg = self.config
        ratio = self.disk_used_ratio()
        report = RetentionReport(disk_used_ratio=ratio)
        was_full = self.disk_full
        self.disk_full = ratio > cfg.disk_space_warning_level_ratio
        if self.disk_full != was_full:
            if self.disk_full:
                log.error("disk_full_writes_refused", disk_used_ratio=round(ratio, 3))
            else:
                log.info("disk_writable_again", disk_used_ratio=round(ratio, 3))
        over_limit = ratio > cfg.disk_max_used_space_ratio / 100
        forcibly = ratio > cfg.disk_space_clean_forcibly_ratio
        manual = self._manual_passes > 0
        if manual:
            self._manual_passes -= 1
        if not (self._delete_hour_now() or over_limit or manual):
            return report
        reserved_s = cfg.file_reserved_hours * 3600
        now = self.clock()
        files = self.commit_log.files.files
        count = 0
        for mf in files[:-1]:  # never the newest
            if count >= MAX_DELETES_PER_PASS:
                break
            try:
                mtime = os.stat(mf.path).st_mtime
            except FileNotFoundError:
                mtime = 0.0
            if not forcibly and now - mtime < reserved_s:
                break  # segments are in age order: the rest are younger
            report.commit_log_segments.append(mf.path.name)
            count += 1
        if count:
            self.commit_log.files.delete_first(count)
            log.info(
                "commit_log_segments_deleted",
                segments=report.commit_log_segments,
                commit_log_min_offset=self.commit_log.min_offset,
                forcibly=forcibly,
            )
        self._clean_queues(report)
        return report

    def _clean_queues(self, report: RetentionReport) -> None:
        low = self.commit_log.min_offset
        for cq in self.queues:
            report.consume_queue_segments += cq.delete_expired(low)
        if self.index is not None:
            report.index_files += self.index.delete_expired(low)

    async def _run(self) -> None:
        interval = self.config.clean_resource_interval_ms / 1000
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                self.run_once()
            except Exception:
                log.exception("retention_pass_failed")

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="store-retention")

    async def shutdown(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
