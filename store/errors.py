"""Store errors.

RocketMQ counterpart: the store's ``PutMessageStatus``/``AppendMessageStatus`` failure values
and the exceptions ``MappedFileQueue``/``CommitLog`` throw on load. Expected outcomes (a full
segment, a missing message) are result values, not exceptions; these are for what stops the
store from working correctly.

::

    StoreError
    ├── StoreLoadError          a segment or file on disk is not what the store expects
    ├── CorruptRecordError      a record does not verify (carries its commit_log_offset)
    └── StoreLockedError        another process holds the store directory
"""

from __future__ import annotations


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
