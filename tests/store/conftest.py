"""Shared fixtures and helpers for the store tests.

Stores live in ``tmp_path`` with tiny files (4 KiB commit-log segments, 8-entry consume-queue
segments, a few index entries per file), so rollover happens in every test. The helpers build
messages and batch bodies by hand from docs/protocol.md §9-§10, parse records straight from
the table of docs/store-format.md §2.2 (independently of ``codec``) and read the
bytes the store left on disk. Test modules import them: ``from tests.store.conftest import …``;
the hosts, the batch bodies and ``wait_dispatched`` are tests/support.py's.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from codec import Host, MessageBatch, MessageInner
from store.config import StoreConfig
from store.message_store import MessageStore
from store.results import GetMessageStatus
from tests.support import (
    BORN_HOST,
    BORN_TIMESTAMP,
    STORE_HOST,
    batch_body,
    properties_text,
    store_config,
)

# Tiny sizes: every test rolls segments. Flush intervals are short so shutdown is quick.
TINY: dict[str, Any] = {
    "commit_log_file_bytes": 4096,
    "consume_queue_file_bytes": 20 * 8,
    "max_message_bytes": 2048,
    "max_hash_slot_num": 16,
    "max_index_num": 8,
    "flush_interval_ms": 10,
    "flush_interval_consume_queue_ms": 10,
}

MESSAGE_MAGIC = -626843481  # 0xDAA320A7
BLANK_MAGIC = -875286124  # 0xCBD43194


def tiny_config(root: Path, **overrides: Any) -> StoreConfig:
    """``store_config`` under ``root`` with the tiny sizes above, ``overrides`` on top."""
    return store_config(root, defaults=TINY, **overrides)


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., StoreConfig]:
    """``make_config(**overrides)``: a tiny StoreConfig rooted at ``tmp_path / "store"``."""

    def make(**overrides: Any) -> StoreConfig:
        return tiny_config(tmp_path / "store", **overrides)

    return make


@pytest.fixture
async def store(make_config: Callable[..., StoreConfig]) -> AsyncIterator[MessageStore]:
    """A running store with the tiny config."""
    async with MessageStore(make_config()) as s:
        yield s


# ------------------------------------------------------------------------------ messages


def message(
    topic: str = "TopicTest",
    queue_id: int = 0,
    body: bytes = b"body",
    *,
    tags: str | None = None,
    keys: str | None = None,
    uniq_key: str | None = None,
    props: Mapping[str, str] | None = None,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = BORN_TIMESTAMP,
    born_host: Host = BORN_HOST,
    store_host: Host = STORE_HOST,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    wait: bool = True,
) -> MessageInner:
    """A message as the broker hands it to the store; TAGS, KEYS, UNIQ_KEY come first."""
    pairs: list[tuple[str, str]] = []
    if tags is not None:
        pairs.append(("TAGS", tags))
    if keys is not None:
        pairs.append(("KEYS", keys))
    if uniq_key is not None:
        pairs.append(("UNIQ_KEY", uniq_key))
    pairs.extend((props or {}).items())
    return MessageInner(
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=properties_text(pairs),
        flag=flag,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        wait_store_msg_ok=wait,
    )


def batch(
    topic: str,
    queue_id: int,
    entries: Iterable[tuple[int, bytes, bytes]],
    *,
    properties: str = "",
    sys_flag: int = 0,
    born_host: Host = BORN_HOST,
    store_host: Host = STORE_HOST,
) -> MessageBatch:
    return MessageBatch(
        topic=topic,
        queue_id=queue_id,
        body=batch_body(entries),
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp=BORN_TIMESTAMP,
        born_host=born_host,
        store_host=store_host,
    )


# ------------------------------------------------------------------------------- records


class Record(NamedTuple):
    """A commit-log record parsed from the store-format.md §2.2 table."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: Host
    store_timestamp: int
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: str


def parse_record(data: bytes | memoryview, pos: int = 0) -> Record:
    """Parse the record at ``pos``; host fields are 8 bytes, or 20 with their V6 bit."""
    raw = bytes(data[pos : pos + 8])
    total, magic = struct.unpack(">ii", raw)
    rec = bytes(data[pos : pos + total])
    assert len(rec) == total, "record runs past the data"
    crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = struct.unpack_from(
        ">iiiqqiq", rec, 8
    )
    p = 48
    born_len = 16 if sys_flag & 0x10 else 4
    born_host = (rec[p : p + born_len], struct.unpack_from(">i", rec, p + born_len)[0])
    p += born_len + 4
    (store_ts,) = struct.unpack_from(">q", rec, p)
    p += 8
    store_len = 16 if sys_flag & 0x20 else 4
    store_host = (rec[p : p + store_len], struct.unpack_from(">i", rec, p + store_len)[0])
    p += store_len + 4
    reconsume, prepared, body_len = struct.unpack_from(">iqi", rec, p)
    p += 16
    body = rec[p : p + body_len]
    p += body_len
    topic_len = rec[p]
    topic = rec[p + 1 : p + 1 + topic_len].decode()
    p += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", rec, p)
    props = rec[p + 2 : p + 2 + props_len].decode()
    assert p + 2 + props_len == total, "TOTALSIZE disagrees with the fields"
    return Record(
        total,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        phys,
        sys_flag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume,
        prepared,
        body,
        topic,
        props,
    )


# --------------------------------------------------------------------------------- disk


def segment_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.is_file())


def file_sizes(directory: Path) -> set[int]:
    """The distinct sizes of the files in ``directory``."""
    return {p.stat().st_size for p in directory.iterdir() if p.is_file()}


def read_commit_log(config: StoreConfig, commit_log_offset: int, size: int) -> bytes:
    """``size`` bytes at a global commit-log offset, read from the segment file on disk."""
    file_bytes = config.commit_log_file_bytes
    start = commit_log_offset - commit_log_offset % file_bytes
    path = config.root_dir / "commitlog" / f"{start:020d}"
    with path.open("rb") as f:
        f.seek(commit_log_offset - start)
        return f.read(size)


def read_consume_queue(config: StoreConfig, topic: str, queue_id: int) -> bytes:
    """Every consume-queue segment of a queue, concatenated in name order."""
    directory = config.root_dir / "consumequeue" / topic / str(queue_id)
    return b"".join((directory / name).read_bytes() for name in segment_names(directory))


def walk_commit_log(config: StoreConfig) -> Iterator[tuple[int, Record | None, int]]:
    """(commit-log offset, record or None for a blank, bytes taken) over the files on disk,
    up to the first zero TOTALSIZE."""
    directory = config.root_dir / "commitlog"
    for name in segment_names(directory):
        data = (directory / name).read_bytes()
        start = int(name)
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">ii", data, pos)
            if total == 0:
                return
            if magic == BLANK_MAGIC:
                yield start + pos, None, total
                break
            assert magic == MESSAGE_MAGIC, f"bad magic at {start + pos}"
            yield start + pos, parse_record(data, pos), total
            pos += total


# ---------------------------------------------------------------------------------- store


def commit_log_bytes(store: MessageStore, end: int, start: int | None = None) -> bytes:
    """The commit log from ``start`` (its minimum) to ``end``, read as a master streams it."""
    out = bytearray()
    offset = store.commit_log.min_offset if start is None else start
    while offset < end:
        got = store.commit_log.data_from(offset)
        assert got is not None, offset
        view, mf = got
        try:
            chunk = bytes(view[: end - offset])
        finally:
            view.release()
            mf.release()
        out += chunk
        offset += len(chunk)
    return bytes(out)


def drain(store: MessageStore, topic: str, queue_id: int, start: int = 0) -> list[bytes]:
    """Every record of a queue from ``start``, copied, pulled 32 at a time as a consumer
    would (following next_begin_offset)."""
    out: list[bytes] = []
    offset = start
    for _ in range(100_000):
        got = store.get_messages(topic, queue_id, offset, 32)
        try:
            if got.status is not GetMessageStatus.FOUND:
                return out
            out.extend(bytes(r) for r in got.records)
            assert got.next_begin_offset > offset
            offset = got.next_begin_offset
        finally:
            got.release()
    raise AssertionError("drain did not end")
