"""Outcomes of store operations, as values.

RocketMQ counterpart: ``PutMessageStatus``, ``AppendMessageStatus``, ``AppendMessageResult``,
``PutMessageResult``, ``GetMessageStatus``, ``GetMessageResult`` and
``QueryMessageResult``. A full queue or a missing message is an expected outcome; it is a
status here, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from store.mapped_file import MappedFile


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, but not durable within syncFlushTimeout
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # shut down, slave, or disk full
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # body over maxMessageSize, topic too long, bad batch
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """The message is in the commit log (clients treat these as sent)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(slots=True)
class AppendResult:
    """Where a message (or a batch) landed in the commit log."""

    commit_log_offset: int  # of the first record
    wrote_bytes: int
    msg_ids: list[str]  # offset msgIds, one per record
    store_timestamp: int
    queue_offset: int  # of the first record (0 for prepared/rollback transaction records)
    msg_num: int = 1

    @property
    def msg_id(self) -> str:
        """The offset msgId, comma-joined for a batch (SEND_MESSAGE's ``msgId``)."""
        return ",".join(self.msg_ids)


@dataclass(slots=True)
class PutResult:
    status: PutMessageStatus
    append: AppendResult | None = None
    remark: str = ""


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """Messages found for a pull: views of the stored records, held until ``release()``.

    The views point into the commit log's mapped segments, which stay mapped while held; a
    caller that keeps the data longer than the write that sends it copies it with
    ``to_bytes()`` and releases.
    """

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False
    _held: list[MappedFile] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.records)

    @property
    def total_bytes(self) -> int:
        return sum(len(r) for r in self.records)

    def to_bytes(self) -> bytes:
        return b"".join(self.records)

    def release(self) -> None:
        """Drop the views and let the segments go."""
        for view in self.records:
            view.release()
        self.records = []
        held, self._held = self._held, []
        for mf in held:
            mf.release()


@dataclass(slots=True)
class QueryResult:
    """Records found by key through the index (QUERY_MESSAGE)."""

    records: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int
