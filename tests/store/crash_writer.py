"""A store writer to be killed: the child process of the crash tests (test_recovery.py).

``python -m tests.store.crash_writer ROOT MODE [--first SEQ] [--count N] [--seconds T]
[--tasks K] [--batch-every B]`` opens a ``MessageStore`` on ROOT with tiny segments and flush
mode MODE (``SYNC_FLUSH`` or ``ASYNC_FLUSH``) and puts messages from K concurrent tasks as fast
as it can, every B-th put a batch of three. Message ``seq`` (from SEQ on) has a body that is a
pure function of ``seq`` ending in a checksum (``make_body``), so a reader tells an intact body
from a torn one without knowing what was sent.

Output, one line each, written with a single ``write`` and flushed at once:

- ``ready`` once the store is open (recovery done, ``abort`` created);
- the sequence number of every message whose put returned PUT_OK, after it returned (under
  SYNC_FLUSH: after the commit log was durable past it);
- ``done N`` when the writer stops by itself, after N acknowledged messages (``--count``
  reached or ``--seconds`` passed), having shut the store down cleanly.

The parent kills it with SIGKILL at a random moment and then checks, in its own process,
that every acknowledged number survived recovery. The helpers here (``store_config``,
``make_message``, ``parse_body`` …) are shared with the tests so both sides agree on what a
message looks like.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import struct
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from codec import (
    MESSAGE_MAGIC_CODE,
    MessageBatch,
    MessageInner,
    body_crc,
    encode_properties,
    host_of,
)
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore
from store.results import PutMessageStatus, PutResult

TOPICS = ("CrashA", "CrashB")
QUEUES_PER_TOPIC = 4
BATCH_SIZE = 3
BORN_HOST = host_of("127.0.0.1", 40123)
STORE_HOST = host_of("127.0.0.1", 10911)

# Tiny files so that every run rolls commit-log segments, consume-queue files and index files
# many times over; the checkpoint is written every 200 ms so abnormal recovery starts from a
# real one.
COMMIT_LOG_FILE_BYTES = 16 * 1024
CONSUME_QUEUE_FILE_BYTES = 20 * 16
MAX_HASH_SLOT_NUM = 64
MAX_INDEX_NUM = 256


def store_config(
    root: Path,
    mode: FlushDiskType = FlushDiskType.SYNC_FLUSH,
    *,
    commit_log_file_bytes: int = COMMIT_LOG_FILE_BYTES,
) -> StoreConfig:
    """The configuration both the writer and the tests open a crash-test store with."""
    return StoreConfig(
        root_dir=root,
        flush_disk_type=mode,
        commit_log_file_bytes=commit_log_file_bytes,
        consume_queue_file_bytes=CONSUME_QUEUE_FILE_BYTES,
        max_message_bytes=min(4096, commit_log_file_bytes),
        max_hash_slot_num=MAX_HASH_SLOT_NUM,
        max_index_num=MAX_INDEX_NUM,
        flush_interval_ms=20,
        flush_interval_consume_queue_ms=50,
        flush_commit_log_thorough_interval_ms=200,
        flush_consume_queue_thorough_interval_ms=200,
        sync_flush_timeout_ms=10_000,
    )


# ------------------------------------------------------------------------- messages


def route(seq: int) -> tuple[str, int]:
    """(topic, queue id) of message ``seq`` when it is sent on its own."""
    return TOPICS[seq % len(TOPICS)], (seq // len(TOPICS)) % QUEUES_PER_TOPIC


def message_key(seq: int) -> str:
    """The KEYS property of message ``seq`` (the index is queried by it)."""
    return f"key-{seq}"


def uniq_key(seq: int) -> str:
    return f"UNIQ{seq:028X}"


def tag_of(seq: int) -> str:
    return f"Tag{seq % 5}"


def _filler(seq: int) -> bytes:
    return random.Random(seq).randbytes(16 + (seq * 7919) % 300)


_BODY = re.compile(rb"^seq=(\d+) topic=(\w+) q=(\d+)\|(.*)\|crc=([0-9a-f]{8})$", re.DOTALL)


def make_body(seq: int, topic: str, queue_id: int) -> bytes:
    """The body of message ``seq`` sent to (``topic``, ``queue_id``)."""
    head = f"seq={seq} topic={topic} q={queue_id}|".encode() + _filler(seq)
    return head + f"|crc={zlib.crc32(head):08x}".encode()


@dataclass(frozen=True, slots=True)
class Body:
    seq: int
    topic: str
    queue_id: int


def parse_body(body: bytes) -> Body | None:
    """What an intact body says about itself; None if it is not exactly ``make_body``'s."""
    m = _BODY.match(body)
    if m is None:
        return None
    seq, topic, queue_id = int(m.group(1)), m.group(2).decode(), int(m.group(3))
    if make_body(seq, topic, queue_id) != body:
        return None
    return Body(seq, topic, queue_id)


def properties_of(seq: int) -> str:
    return encode_properties(
        {"KEYS": message_key(seq), "UNIQ_KEY": uniq_key(seq), "TAGS": tag_of(seq)}
    )


def make_message(seq: int) -> MessageInner:
    """Message ``seq`` as the broker would hand it to the store."""
    topic, queue_id = route(seq)
    return MessageInner(
        topic=topic,
        queue_id=queue_id,
        body=make_body(seq, topic, queue_id),
        properties=properties_of(seq),
        born_timestamp=time.time_ns() // 1_000_000,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


_BATCH_ENTRY = struct.Struct(">iiiii")  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
_SHORT = struct.Struct(">h")


def make_batch(first_seq: int, count: int) -> MessageBatch:
    """Messages ``first_seq`` .. ``first_seq + count - 1`` as one batch, all routed like the
    first (a batch goes to one queue), in the wire encoding a producer sends."""
    topic, queue_id = route(first_seq)
    parts: list[bytes] = []
    for seq in range(first_seq, first_seq + count):
        body = make_body(seq, topic, queue_id)
        props = properties_of(seq).encode()
        total = _BATCH_ENTRY.size + len(body) + _SHORT.size + len(props)
        parts.append(
            _BATCH_ENTRY.pack(total, MESSAGE_MAGIC_CODE, body_crc(body), 0, len(body))
            + body
            + _SHORT.pack(len(props))
            + props
        )
    return MessageBatch(
        topic=topic,
        queue_id=queue_id,
        body=b"".join(parts),
        born_timestamp=time.time_ns() // 1_000_000,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


# ----------------------------------------------------------------------------- writer


def _say(line: str) -> None:
    # One write per line, so a kill never leaves half a number behind a complete one.
    os.write(sys.stdout.fileno(), (line + "\n").encode())


@dataclass(slots=True)
class _Plan:
    next_seq: int
    last_seq: int  # exclusive
    deadline: float
    batch_every: int
    puts: int = 0
    acked: int = 0


async def _worker(store: MessageStore, plan: _Plan, report: Callable[[int], None]) -> None:
    while plan.next_seq < plan.last_seq and time.monotonic() < plan.deadline:
        plan.puts += 1
        first = plan.next_seq
        # Taking the numbers and appending happen with no await in between, so the commit
        # log holds the messages in sequence order.
        result: PutResult
        if plan.batch_every and plan.puts % plan.batch_every == 0:
            count = min(BATCH_SIZE, plan.last_seq - first)
            plan.next_seq += count
            result = await store.put_messages(make_batch(first, count))
        else:
            count = 1
            plan.next_seq += 1
            result = await store.put_message(make_message(first))
        if result.status is not PutMessageStatus.PUT_OK:
            raise RuntimeError(f"put of {first} returned {result.status}: {result.remark}")
        for seq in range(first, first + count):
            report(seq)
        # Under ASYNC_FLUSH a put never suspends: let the other writers, dispatch and the
        # flushers run.
        await asyncio.sleep(0)


async def run(
    root: Path,
    mode: FlushDiskType,
    *,
    first: int,
    count: int,
    seconds: float,
    tasks: int,
    batch_every: int,
) -> int:
    """Write until ``count`` messages or ``seconds`` passed; returns how many were acked."""
    plan = _Plan(first, first + count, time.monotonic() + seconds, batch_every)

    def report(seq: int) -> None:
        plan.acked += 1
        _say(str(seq))

    async with MessageStore(store_config(root, mode)) as store:
        _say("ready")
        await asyncio.gather(*(_worker(store, plan, report) for _ in range(tasks)))
    _say(f"done {plan.acked}")
    return plan.acked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.store.crash_writer")
    parser.add_argument("root", type=Path)
    parser.add_argument("mode", choices=[m.value for m in FlushDiskType])
    parser.add_argument("--first", type=int, default=0, help="first sequence number")
    parser.add_argument("--count", type=int, default=100_000, help="stop after this many")
    parser.add_argument("--seconds", type=float, default=10.0, help="stop after this long")
    parser.add_argument("--tasks", type=int, default=8, help="concurrent writers")
    parser.add_argument("--batch-every", type=int, default=7, help="0: no batches")
    args = parser.parse_args(argv)
    # structlog prints to stdout by default; keep stdout for the acknowledgements.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    coro = run(
        args.root,
        FlushDiskType(args.mode),
        first=args.first,
        count=args.count,
        seconds=args.seconds,
        tasks=args.tasks,
        batch_every=args.batch_every,
    )
    if os.environ.get("AEROLITE_LOOP", "uvloop") == "asyncio":
        asyncio.run(coro)
    else:
        import uvloop

        uvloop.run(coro)
    return 0


if __name__ == "__main__":
    sys.exit(main())
