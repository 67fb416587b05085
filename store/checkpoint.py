"""The ``checkpoint`` file: how far the commit log, consume queues and index are durable.

RocketMQ counterpart: ``StoreCheckpoint``. A 4,096-byte file (one page)::

    0   physicMsgTimestamp  long  store time of the last flushed commit-log record
    8   logicsMsgTimestamp  long  store time of the last record whose consume-queue entry
                                  is flushed
    16  indexMsgTimestamp   long  end timestamp of the last index file that filled up

Abnormal recovery restarts dispatch from the newest segment written before
min(physic, logics) - 3 s. Values are written with ``pwrite`` and made durable with
``fdatasync`` (RocketMQ maps the page; the bytes on disk are the same). The page gets its disk
block when the file is opened, so that a checkpoint first written once the disk is full
(the first thorough flush comes a minute after the start) still finds its room.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import structlog

from store.errors import DiskFullError
from store.mapped_file import allocate_range

log = structlog.get_logger(__name__)

CHECKPOINT_BYTES = 4096
_FIELDS = struct.Struct(
    ">"
    "q"  # 0  physicMsgTimestamp
    "q"  # 8  logicsMsgTimestamp
    "q"  # 16 indexMsgTimestamp
)
assert _FIELDS.size == 24

SAFE_MARGIN_MS = 3000  # recovery starts this far before the checkpoint


class Checkpoint:
    """The checkpoint file of one store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.fd = fd
        size = os.fstat(fd).st_size
        if size < CHECKPOINT_BYTES:
            os.ftruncate(fd, CHECKPOINT_BYTES)
        try:
            allocate_range(fd, path, 0, CHECKPOINT_BYTES)
        except DiskFullError as exc:
            # A new store on a full disk: flushes fail (logged) until there is room.
            log.warning("checkpoint_not_allocated", path=str(path), error=str(exc))
        physic, logics, index = _FIELDS.unpack(os.pread(fd, _FIELDS.size, 0))
        self.physic_msg_timestamp: int = physic
        self.logics_msg_timestamp: int = logics
        self.index_msg_timestamp: int = index

    def min_timestamp(self, *, include_index: bool = False) -> int:
        """Where abnormal recovery may start: min(physic, logics[, index]) - 3 s."""
        low = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if include_index:
            low = min(low, self.index_msg_timestamp)
        return max(0, low - SAFE_MARGIN_MS)

    def flush(self) -> None:
        """Write the three timestamps and make them durable (blocking: the I/O thread)."""
        os.pwrite(
            self.fd,
            _FIELDS.pack(
                self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
            ),
            0,
        )
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
