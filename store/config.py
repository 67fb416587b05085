"""Store settings.

RocketMQ counterpart: ``org.apache.rocketmq.store.config.MessageStoreConfig``. The broker's
config loader maps RocketMQ's broker.conf names (``mappedFileSizeCommitLog``, …) onto these
fields; defaults are RocketMQ 4.9's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
# "ms" is ours (RocketMQ knows s, m, h, d): sub-second levels let tests retry in a blink.
_DELAY_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DELAY_LEVEL = re.compile(r"(\d+)(ms|[smhd])")


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``messageDelayLevel`` ("1s 5s … 2h") as milliseconds per level.

    Raises:
        ValueError: a level is not a number followed by ms, s, m, h or d.
    """
    levels = []
    for item in text.split():
        m = _DELAY_LEVEL.fullmatch(item)
        if m is None:
            raise ValueError(f"delay level {item!r} is not <number><ms|s|m|h|d>")
        levels.append(int(m.group(1)) * _DELAY_UNITS_MS[m.group(2)])
    if not levels:
        raise ValueError("no delay levels given")
    return tuple(levels)


def _default_root() -> Path:
    return Path.home() / "aerolite" / "store"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """Where and how messages are stored (sizes in bytes, times in ms unless named)."""

    root_dir: Path = field(default_factory=_default_root)  # storePathRootDir
    commit_log_file_bytes: int = 1 << 30  # mappedFileSizeCommitLog
    consume_queue_file_bytes: int = 300_000 * 20  # mappedFileSizeConsumeQueue
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500  # flushIntervalCommitLog
    flush_interval_consume_queue_ms: int = 1000  # flushIntervalConsumeQueue
    sync_flush_timeout_ms: int = 5000  # syncFlushTimeout
    max_message_bytes: int = 4 * 1024 * 1024  # maxMessageSize
    file_reserved_hours: int = 72  # fileReservedTime
    delete_when: str = "04"  # deleteWhen: hours of the day, "04;16"
    disk_max_used_space_ratio: int = 75  # diskMaxUsedSpaceRatio, percent
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    flush_commit_log_least_pages: int = 4  # flushCommitLogLeastPages
    flush_commit_log_thorough_interval_ms: int = 10_000  # flushCommitLogThoroughInterval
    flush_consume_queue_least_pages: int = 2  # flushConsumeQueueLeastPages
    flush_consume_queue_thorough_interval_ms: int = 60_000
    check_crc_on_recover: bool = True  # checkCRCOnRecover
    message_index_enable: bool = True  # messageIndexEnable
    message_index_safe: bool = False  # messageIndexSafe
    max_hash_slot_num: int = 5_000_000  # maxHashSlotNum
    max_index_num: int = 20_000_000  # maxIndexNum
    clean_resource_interval_ms: int = 10_000  # cleanResourceInterval
    disk_space_warning_level_ratio: float = 0.90  # rocketmq.broker.diskSpaceWarningLevelRatio
    disk_space_clean_forcibly_ratio: float = 0.85
    # accessMessageInMemoryMaxRatio: percent of RAM behind the commit-log end that still
    # counts as "in memory"; a consumer further behind is pointed at a slave.
    access_message_in_memory_max_ratio: int = 40
    # warmMapedFileEnable: allocate each new commit-log segment whole when it is created
    # (posix_fallocate) instead of a few MiB ahead of the writes. Files are sparse either way;
    # RocketMQ's warm-up touches every page (and mlocks them), which this does not.
    warm_mapped_file_enable: bool = False

    def __post_init__(self) -> None:
        if self.commit_log_file_bytes < 4096:
            raise ValueError("mappedFileSizeCommitLog must be at least 4096")
        if self.consume_queue_file_bytes < 20 or self.consume_queue_file_bytes % 20:
            raise ValueError("mappedFileSizeConsumeQueue must be a positive multiple of 20")
        if self.max_message_bytes <= 0:
            raise ValueError("maxMessageSize must be positive")
        if self.max_message_bytes > self.commit_log_file_bytes:
            raise ValueError("maxMessageSize must not exceed mappedFileSizeCommitLog")
        if not 10 <= self.disk_max_used_space_ratio <= 95:
            raise ValueError("diskMaxUsedSpaceRatio must be within 10..95")
        for name in ("flush_interval_ms", "flush_interval_consume_queue_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.file_reserved_hours <= 0:
            raise ValueError("fileReservedTime must be positive")
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise ValueError(f"deleteWhen hour {hour!r} is not within 00..23")
        parse_delay_levels(self.message_delay_level)
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ValueError("accessMessageInMemoryMaxRatio must be within 0..100")
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ValueError("maxHashSlotNum must be positive and maxIndexNum above 1")

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)
