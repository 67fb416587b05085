"""Store errors.

RocketMQ counterpart: the store's ``PutMessageStatus``/``AppendMessageStatus`` failure values
and the exceptions ``MappedFileQueue``/``CommitLog`` throw on load. Expected outcomes (a full
segment, a missing message) are result values, not exceptions; these are for what stops the
store from working correctly.

::

    StoreError
    ├── StoreLoadError          a segment or file on disk is not what the store expects
    ├── CorruptRecordError      a record does not verify (carries its commit_log_offset)
    ├── StoreLockedError        another process holds the store directory
    └── DiskFullError           no disk blocks for a file's next bytes (also an OSError)
"""

from __future__ import annotations

import errno
import os


class StoreError(Exception):
    """Base of store failures."""


class StoreLoadError(StoreError):
    """A file on disk has the wrong size or name; the message names the file."""


class CorruptRecordError(StoreError):
    """The record at ``commit_log_offset`` does not verify."""

    def __init__(self, commit_log_offset: int, reason: str) -> None:
        super().__init__(f"corrupt record at commit-log offset {commit_log_offset}: {reason}")
        self.commit_log_offset = commit_log_offset
        self.reason = reason


class StoreLockedError(StoreError):
    """Another store already runs on this directory."""


class DiskFullError(StoreError, OSError):
    """No disk space could be allocated for the next bytes of a store file (``ENOSPC`` or
    ``EDQUOT`` from ``posix_fallocate``). Nothing was written: the write can be retried
    once space is freed. It is an ``OSError`` too, so code that handles I/O errors
    handles it."""

    def __init__(self, path: str, position: int, length: int, code: int = errno.ENOSPC) -> None:
        self.message = (
            f"disk full: cannot allocate {length} bytes at byte {position} of {path} "
            f"({os.strerror(code)})"
        )
        super().__init__(code, self.message)
        self.path = path
        self.position = position
        self.length = length

    def __str__(self) -> str:
        return self.message
