"""Retention: deleting expired commit-log segments, then what pointed only into them.

RocketMQ counterpart: ``DefaultMessageStore.CleanCommitLogService`` and
``CleanConsumeQueueService``. docs/store-format.md §10.

A pass deletes the oldest commit-log segments (never the newest) whose last modification is
older than ``fileReservedTime`` hours — when the local hour is one of ``deleteWhen``, when
disk usage is above ``diskMaxUsedSpaceRatio``, or when an operator asked for it. Above
``disk_space_clean_forcibly_ratio`` (85 %) segments go regardless of age. Above
``disk_space_warning_level_ratio`` (90 %) the store also refuses writes (SERVICE_NOT_AVAILABLE)
until usage drops, rather than fill the disk and corrupt a segment. That check (``check_disk``)
runs on every pass, before the commit log takes more disk (a new segment or allocation window:
with a pass every 10 s alone, a fast writer filled a small disk well past the warning level
first; tests/store/test_full_disk_paths.py), and, while writes are
refused, again on a refused put at most every ``RECHECK_S``, so writes resume as soon as space
is freed whatever the pass interval. After the commit log's
minimum moves, consume-queue segments whose last entry points below it, and index files that
end below it, are deleted, and each queue's minimum offset moves up.

A segment deleted only for space (younger than ``fileReservedTime``, above the forcible
ratio) may hold messages no group has consumed yet. RocketMQ deletes it without a word; here
each such deletion is a ``commit_log_forced_deletion`` warning naming the topics and groups
whose unconsumed messages went, and is counted (``forced_deletions``, ``unconsumed_deleted``)
for the broker's metrics. The groups' committed offsets come from ``consumer_offsets``, a
callable the broker sets (the store knows no groups); the count per group and queue is the
messages of the segment's range at or past its committed offset, found by two binary searches
of the queue, so a deletion costs O(committed offsets x log queue length).

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import structlog

from store.commit_log import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue, ConsumeQueueTable
from store.index_file import IndexService

log = structlog.get_logger(__name__)

MAX_DELETES_PER_PASS = 10  # RocketMQ deletes at most 10 segments per pass
RECHECK_S = 1.0  # while writes are refused for usage, a put checks again at most this often
MAX_LOSSES_LOGGED = 20  # (topic, group) pairs named in one forced-deletion line, largest first

# Every committed consumer offset: (topic, group, {queue id: next queue offset to consume}).
ConsumerOffsets = Callable[[], Iterable[tuple[str, str, Mapping[int, int]]]]


@dataclass(slots=True)
class RetentionReport:
    commit_log_segments: list[str] = field(default_factory=list)
    forced_commit_log_segments: list[str] = field(default_factory=list)  # deleted for space
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
        self.last_disk_used_ratio = 0.0
        self.consumer_offsets: ConsumerOffsets | None = None  # set by the broker
        self.forced_deletions = 0  # segments deleted only for space
        self.unconsumed_deleted: dict[tuple[str, str], int] = {}  # (topic, group) -> messages
        self._checked_at = -RECHECK_S  # time.monotonic() of the last check_disk
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

    def check_disk(self) -> float:
        """Measure the disk's usage and update ``disk_full`` (logged when it changes);
        returns the used share."""
        ratio = self.disk_used_ratio()
        self.last_disk_used_ratio = ratio
        self._checked_at = time.monotonic()
        was_full = self.disk_full
        self.disk_full = ratio > self.config.disk_space_warning_level_ratio
        if self.disk_full != was_full:
            root = str(self.config.root_dir)
            if self.disk_full:
                log.error("disk_full_writes_refused", path=root, disk_used_ratio=round(ratio, 3))
            else:
                log.info("disk_writable_again", path=root, disk_used_ratio=round(ratio, 3))
        return ratio

    def still_full(self) -> bool:
        """``disk_full``, measured again if the last check is ``RECHECK_S`` old (a refused
        put asks: writes resume once space is freed, not only at the next pass)."""
        if self.disk_full and time.monotonic() - self._checked_at >= RECHECK_S:
            self.check_disk()
        return self.disk_full

    def space_refusal(self) -> str | None:
        """Why writes are refused for want of disk (checking now), or None: what the commit
        log asks before it takes more disk."""
        self.check_disk()
        return self.refusal_remark() if self.disk_full else None

    def refusal_remark(self) -> str:
        """The remark of a put refused by the usage check: the disk, its usage, the limit."""
        return (
            f"disk full: usage above {self.config.disk_space_warning_level_ratio:.0%} on "
            f"{self.config.root_dir} ({self.last_disk_used_ratio:.1%} used), writes refused"
        )

    def run_once(self) -> RetentionReport:
        """One pass: decide, delete, and update ``disk_full``."""
        cfg = self.config
        ratio = self.check_disk()
        report = RetentionReport(disk_used_ratio=ratio)
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
        losses: list[dict[tuple[str, str], int]] = []  # per forced segment, before it goes
        for mf in files[:-1]:  # never the newest
            if count >= MAX_DELETES_PER_PASS:
                break
            try:
                mtime = os.stat(mf.path).st_mtime
            except FileNotFoundError:
                mtime = 0.0
            if now - mtime < reserved_s:
                if not forcibly:
                    break  # segments are in age order: the rest are younger
                report.forced_commit_log_segments.append(mf.path.name)
                losses.append(self._unconsumed(mf.start_offset, mf.start_offset + mf.file_bytes))
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
        for segment, lost in zip(report.forced_commit_log_segments, losses, strict=True):
            self._forced(segment, ratio, lost)
        self._clean_queues(report)
        return report

    def _unconsumed(self, start: int, end: int) -> dict[tuple[str, str], int]:
        """(topic, group) -> messages stored in commit-log bytes [start, end) at or past the
        group's committed offset of their queue."""
        if self.consumer_offsets is None:
            return {}
        spans: dict[tuple[str, int], tuple[int, int]] = {}
        out: dict[tuple[str, str], int] = {}
        for topic, group, per_queue in self.consumer_offsets():
            for queue_id, committed in per_queue.items():
                span = spans.get((topic, queue_id))
                if span is None:
                    cq = self.queues.get(topic, queue_id)
                    span = (0, 0) if cq is None else (_first_at(cq, start), _first_at(cq, end))
                    spans[(topic, queue_id)] = span
                lost = span[1] - max(span[0], committed)
                if lost > 0:
                    out[(topic, group)] = out.get((topic, group), 0) + lost
        return out

    def _forced(self, segment: str, ratio: float, lost: dict[tuple[str, str], int]) -> None:
        self.forced_deletions += 1
        for key, n in lost.items():
            self.unconsumed_deleted[key] = self.unconsumed_deleted.get(key, 0) + n
        largest = sorted(lost.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_LOSSES_LOGGED]
        log.warning(
            "commit_log_forced_deletion",
            segment=segment,
            disk_used_ratio=round(ratio, 3),
            forcibly_ratio=self.config.disk_space_clean_forcibly_ratio,
            unconsumed_messages=sum(lost.values()),
            topics=sorted({topic for topic, _group in lost}),
            consumer_groups=sorted({group for _topic, group in lost}),
            losses=[{"topic": t, "consumer_group": g, "messages": n} for (t, g), n in largest],
            losses_not_listed=max(0, len(lost) - MAX_LOSSES_LOGGED),
        )

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


def _first_at(cq: ConsumeQueue, commit_log_offset: int) -> int:
    """The first queue offset whose message starts at or past ``commit_log_offset`` (the
    queue's max offset when none does): entries are in commit-log order."""
    low, high = cq.min_offset, cq.max_offset
    while low < high:
        mid = (low + high) // 2
        entry = cq.entry(mid)
        if entry is not None and entry[0] >= commit_log_offset:
            high = mid
        else:
            low = mid + 1
    return low
