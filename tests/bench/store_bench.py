"""Store benchmark: commit-log appends against a pure-Python floor, group commit, recovery.

What is measured, in this process (but for the pure-Python codec's append rows, see
**Codec**), on the file system of ``bench-results/`` (a temporary directory there, deleted
at the end), with 1 KiB bodies and segments of ``segment_bytes`` (64 MiB; RocketMQ's
default is 1 GiB):

- **Floor.** For each message: ``zlib.crc32`` of the body, ``pack_into`` of the 84-byte
  fixed part of a RocketMQ record (TOTALSIZE .. PREPARED TRANSACTION OFFSET, one
  precompiled ``struct.Struct``) into a preallocated, memory-mapped segment, and the body
  copied after it; a new segment (``posix_fallocate`` + ``mmap``) when one is full. Nothing
  else: no topic or properties, no result objects. The store does at least this much.
- **Append, ASYNC_FLUSH.** Single messages (topic, queue 0, properties TAGS, KEYS and a
  distinct UNIQ_KEY) through ``CommitLog.put`` directly and through
  ``await MessageStore.put_message``; batches of ``batch_size`` through
  ``CommitLog.put_batch`` and ``MessageStore.put_messages``. In the "append" rows the writer
  never yields, so the dispatch service and the flusher wait until the timed run is over (a
  burst). In the "+ dispatch" rows the writer yields to the loop every ``yield_every``
  messages, as a broker's loop does between requests, so consume queues and the index are
  built and the flusher runs inside the timed run, which ends once dispatch has caught up.
  Each kind of run takes turns in ``rounds`` rounds (alternating order), every run on fresh
  segments; a rate is the best of its rounds (timeit's convention: the least disturbed run),
  because the floor, which spends much of its time in page faults on fresh pages, swings
  with the kernel's memory state far more than the store does.
- **Codec.** The store binds the codec's functions at import, so a process runs one
  implementation (``codec.SPEEDUPS``). The append rows above (floor included) are taken
  twice: in this process, with whatever codec it runs (compiled, when the extensions are
  built), and in a child process (``python -m tests.bench.store_bench --append-only``, the
  same interpreter, ``AEROLITE_NO_EXTENSIONS=1``, killed after ``pure_child_max_s``) with
  the pure-Python codec, whose ratios are to the floor it measured itself. The child runs
  after this process's append rows and before the rest, while this process waits. When this
  process already runs the pure-Python codec there is one set, and a note says so; when the
  child fails, a note says why and the table has this process's rows only. The goals are
  judged on this process's rows (``append`` in the JSON; the child's are
  ``append_pure_python``).
- **SYNC_FLUSH.** 1, 16 and 256 writer tasks, each putting one message at a time and
  waiting for it to be durable, for ``sync_max_s``: messages/s, p50/p99 put latency, and
  ``fdatasync`` rounds (``CommitLogFlusher.flushes``) per message. For scale, the latency
  of a bare record copy into a mapped segment followed by ``os.fdatasync``.
- **Recovery.** A store written with ``recovery_bytes`` of commit log (less when the disk is
  short, see ``notes``) in ``recovery_queues`` queues, shut down cleanly; then
  ``MessageStore.load()`` (normal recovery: the last three segments, CRC checked, and the
  consume queues), ``CommitLog.walk`` over every segment with and without CRC checks (warm,
  and once with the page cache dropped for those files), and ``load()`` after a simulated
  crash with the checkpoint removed, which walks every segment and re-dispatches every
  record (the index is rebuilt, the consume queues skip what they have).

Goals (from the issue), on this process's codec (compiled, when built): single appends
≥ 50 % of the floor's rate, batches ≥ 80 %; SYNC_FLUSH with 256 writers ≥ 20x the rate of
one writer; recovery ≥ 1 GiB/s of verified commit log (the full ``CommitLog.walk`` with CRC
checks, warm page cache).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import mmap
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from codec import (
    MESSAGE_MAGIC_CODE,
    SPEEDUPS,
    MessageBatch,
    MessageInner,
    encode_properties,
    host_of,
    record_length,
)
from store.commit_log import CommitLog
from store.config import FlushDiskType, StoreConfig
from store.consume_queue import ConsumeQueueTable
from store.index_file import index_file_bytes
from store.message_store import MessageStore
from store.results import PutMessageStatus, PutResult
from tests.bench.common import bench_work_dir
from tests.bench.report import (
    REPO_ROOT,
    Report,
    machine_info,
    machine_line,
    markdown_table,
    median,
    percentile,
    text_table,
)

NAME = "store"
SINGLE_GOAL = 0.50  # store.put_message / floor, messages per second
BATCH_GOAL = 0.80  # store.put_messages / floor
GROUP_COMMIT_GOAL = 20.0  # SYNC_FLUSH, 256 writers / 1 writer
RECOVERY_GOAL_GIB_S = 1.0  # CommitLog.walk with CRC checks, every segment
GIB = 1 << 30
MIB = 1 << 20

TOPIC = "BenchTopic"
TAGS = "TagA"
UNIQ_PREFIX = "7F0000011B3E18B4AAC2"  # ip + pid + class-loader hash, as a Java producer's
BORN_HOST = host_of("127.0.0.1", 52_000)
STORE_HOST = host_of("127.0.0.1", 10_911)
BORN_TIMESTAMP = 1_718_000_000_000
_CHUNK = 256  # messages between two looks at the clock
_OK = PutMessageStatus.PUT_OK


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreBenchConfig:
    """Counts, sizes and time budgets; every loop stops at whichever limit comes first."""

    body_bytes: int = 1024
    segment_bytes: int = 64 * MIB  # mappedFileSizeCommitLog for every store here
    distinct_messages: int = 16_384  # pool of prebuilt messages (distinct keys), reused
    distinct_bodies: int = 64
    batch_size: int = 32
    rounds: int = 5
    append_messages: int = 300_000  # per run
    append_max_s: float = 0.5  # per run
    yield_every: int = 32  # "+ dispatch" runs: messages between yields to the loop
    sync_writers: tuple[int, ...] = (1, 16, 256)
    sync_rounds: int = 2
    sync_messages: int = 200_000  # per level and round, shared by the writers
    sync_max_s: float = 1.5  # per level and round
    fdatasync_samples: int = 2_000  # the bare write + fdatasync baseline
    fdatasync_max_s: float = 0.5
    recovery_bytes: int = GIB  # commit log written for the recovery figures
    recovery_min_bytes: int = 256 * MIB  # below this (disk short) recovery is skipped
    recovery_queues: int = 8
    recovery_write_max_s: float = 60.0
    recovery_repeats: int = 3
    max_disk_used_ratio: float = 0.70  # stay clear of the store's own 75 % retention line
    disk_margin_bytes: int = GIB
    # Index sizes (maxHashSlotNum / maxIndexNum): RocketMQ's defaults, a 420 MB file.
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    # The pure-Python codec's append rows (a child process): killed after this long.
    pure_child_max_s: float = 600.0


FULL = StoreBenchConfig()
QUICK = replace(
    FULL,
    segment_bytes=1 * MIB,
    distinct_messages=512,
    distinct_bodies=8,
    batch_size=8,
    rounds=1,
    append_messages=2_000,
    append_max_s=2.0,
    yield_every=8,
    sync_rounds=1,
    sync_messages=300,
    sync_max_s=0.5,
    fdatasync_samples=50,
    recovery_bytes=8 * MIB,
    recovery_min_bytes=4 * MIB,
    recovery_queues=2,
    recovery_write_max_s=20.0,
    recovery_repeats=1,
    disk_margin_bytes=64 * MIB,
    max_hash_slot_num=5_000,
    max_index_num=20_000,
    pure_child_max_s=120.0,
)


# ------------------------------------------------------------------------------ workload


def _properties(i: int) -> str:
    """A producer's usual properties: a tag, a business key and the unique message id."""
    return encode_properties(
        {"TAGS": TAGS, "KEYS": f"order-{i:010d}", "UNIQ_KEY": f"{UNIQ_PREFIX}{i:012X}"}
    )


_BATCH_ENTRY = struct.Struct(
    ">"
    "i"  # TOTALSIZE of this entry
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # FLAG
    "i"  # BODYLEN, then BODY, then PROPERTIESLENGTH (short) and PROPERTIES
)
assert _BATCH_ENTRY.size == 20


def encode_batch_body(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A batch body as a producer sends it (RocketMQ ``MessageDecoder.encodeMessages``)."""
    parts: list[bytes] = []
    for body, props in entries:
        total = _BATCH_ENTRY.size + len(body) + 2 + len(props)
        parts += [
            _BATCH_ENTRY.pack(total, 0, zlib.crc32(body) & 0x7FFFFFFF, 0, len(body)),
            body,
            struct.pack(">h", len(props)),
            props,
        ]
    return b"".join(parts)


@dataclass(slots=True)
class Workload:
    """Messages built before any clock starts; every run cycles through the same ones."""

    bodies: list[bytes]
    messages: list[MessageInner]  # queue 0
    batches: list[MessageBatch]  # queue 0, batch_size messages each
    record_bytes: int  # a stored record, on average
    floor_record_bytes: int  # what the floor writes per message


def build_workload(cfg: StoreBenchConfig) -> Workload:
    bodies = [os.urandom(cfg.body_bytes) for _ in range(cfg.distinct_bodies)]
    props = [_properties(i) for i in range(cfg.distinct_messages)]
    messages = [
        MessageInner(
            topic=TOPIC,
            queue_id=0,
            body=bodies[i % len(bodies)],
            properties=p,
            born_timestamp=BORN_TIMESTAMP + i,
            born_host=BORN_HOST,
            store_host=STORE_HOST,
        )
        for i, p in enumerate(props)
    ]
    batches = []
    for first in range(0, cfg.distinct_messages - cfg.batch_size + 1, cfg.batch_size):
        entries = [
            (bodies[i % len(bodies)], props[i].encode())
            for i in range(first, first + cfg.batch_size)
        ]
        batches.append(
            MessageBatch(
                topic=TOPIC,
                queue_id=0,
                body=encode_batch_body(entries),
                born_timestamp=BORN_TIMESTAMP + first,
                born_host=BORN_HOST,
                store_host=STORE_HOST,
            )
        )
    record_bytes = round(
        statistics.fmean(record_length(cfg.body_bytes, len(TOPIC), len(p.encode())) for p in props)
    )
    return Workload(bodies, messages, batches, record_bytes, _FLOOR_HEADER.size + cfg.body_bytes)


def _store_config(root: Path, cfg: StoreBenchConfig, flush: FlushDiskType) -> StoreConfig:
    return StoreConfig(
        root_dir=root,
        commit_log_file_bytes=cfg.segment_bytes,
        flush_disk_type=flush,
        max_message_bytes=min(4 * MIB, cfg.segment_bytes // 2),
        max_hash_slot_num=cfg.max_hash_slot_num,
        max_index_num=cfg.max_index_num,
    )


class PutFailedError(RuntimeError):
    """A put came back without PUT_OK: the figures would flatter the store."""

    def __init__(self, result: PutResult) -> None:
        super().__init__(f"put failed: {result.status.name} {result.remark}")


# --------------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class Run:
    """One timed run: messages put, seconds, commit-log bytes written."""

    messages: int
    seconds: float
    bytes: int

    @property
    def per_s(self) -> float:
        return self.messages / self.seconds


_FLOOR_HEADER = struct.Struct(
    ">"
    "i"  # 0  TOTALSIZE
    "i"  # 4  MAGICCODE
    "i"  # 8  BODYCRC
    "i"  # 12 QUEUEID
    "i"  # 16 FLAG
    "q"  # 20 QUEUEOFFSET
    "q"  # 28 PHYSICALOFFSET
    "i"  # 36 SYSFLAG
    "q"  # 40 BORNTIMESTAMP
    "8s"  # 48 BORNHOST
    "q"  # 56 STORETIMESTAMP
    "8s"  # 64 STOREHOST
    "i"  # 72 RECONSUMETIMES
    "q"  # 76 PREPARED TRANSACTION OFFSET
)
assert _FLOOR_HEADER.size == 84


class _FloorSegments:
    """Preallocated, mapped segment files, created as the store creates its own."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        directory.mkdir(parents=True)
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.maps: list[tuple[int, mmap.mmap]] = []

    def new(self, start: int) -> mmap.mmap:
        fd = os.open(self.directory / f"{start:020d}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, self.segment_bytes)
        except OSError:  # file systems without fallocate, as in store/mapped_file.py
            os.ftruncate(fd, self.segment_bytes)
        mm = mmap.mmap(fd, self.segment_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.maps.append((fd, mm))
        return mm

    def close(self) -> None:
        for fd, mm in self.maps:
            mm.close()
            os.close(fd)
        self.maps = []


def floor_run(directory: Path, work: Workload, cfg: StoreBenchConfig) -> Run:
    """The pure-Python floor: crc32, one ``pack_into``, one body copy per message."""
    segments = _FloorSegments(directory, cfg.segment_bytes)
    pack_into = _FLOOR_HEADER.pack_into
    crc32 = zlib.crc32
    bodies = work.bodies
    n_bodies = len(bodies)
    record = work.floor_record_bytes
    born_host = BORN_HOST[0] + BORN_HOST[1].to_bytes(4, "big")
    store_host = STORE_HOST[0] + STORE_HOST[1].to_bytes(4, "big")
    seg_bytes = cfg.segment_bytes
    done = 0
    try:
        t0 = time.perf_counter()
        deadline = t0 + cfg.append_max_s
        seg_start = pos = 0
        mm = segments.new(seg_start)
        while done < cfg.append_messages and time.perf_counter() < deadline:
            stop = min(done + _CHUNK, cfg.append_messages)
            for i in range(done, stop):
                if pos + record > seg_bytes:
                    seg_start += seg_bytes
                    mm = segments.new(seg_start)
                    pos = 0
                body = bodies[i % n_bodies]
                pack_into(
                    mm,
                    pos,
                    record,
                    MESSAGE_MAGIC_CODE,
                    crc32(body) & 0x7FFFFFFF,
                    0,
                    0,
                    i,
                    seg_start + pos,
                    0,
                    BORN_TIMESTAMP,
                    born_host,
                    BORN_TIMESTAMP,
                    store_host,
                    0,
                    0,
                )
                mm[pos + 84 : pos + record] = body
                pos += record
            done = stop
        elapsed = time.perf_counter() - t0
    finally:
        segments.close()
    return Run(done, elapsed, done * record)


def _new_commit_log(directory: Path, cfg: StoreBenchConfig) -> CommitLog:
    cl = CommitLog(
        directory / "commitlog", cfg.segment_bytes, min(4 * MIB, cfg.segment_bytes // 2), directory
    )
    cl.files.load()  # creates the directory; there is nothing in it yet
    return cl


def commit_log_put_run(directory: Path, work: Workload, cfg: StoreBenchConfig) -> Run:
    """``CommitLog.put`` in a loop: the append alone, synchronous."""
    cl = _new_commit_log(directory, cfg)
    put = cl.put
    msgs = work.messages
    n = len(msgs)
    done = 0
    try:
        t0 = time.perf_counter()
        deadline = t0 + cfg.append_max_s
        while done < cfg.append_messages and time.perf_counter() < deadline:
            stop = min(done + _CHUNK, cfg.append_messages)
            for i in range(done, stop):
                result = put(msgs[i % n])
                if result.status is not _OK:
                    raise PutFailedError(result)
            done = stop
        elapsed = time.perf_counter() - t0
        wrote = cl.max_offset
    finally:
        cl.close()
    return Run(done, elapsed, wrote)


def commit_log_batch_run(directory: Path, work: Workload, cfg: StoreBenchConfig) -> Run:
    """``CommitLog.put_batch`` in a loop."""
    cl = _new_commit_log(directory, cfg)
    put_batch = cl.put_batch
    batches = work.batches
    n = len(batches)
    size = cfg.batch_size
    max_batches = max(1, cfg.append_messages // size)
    chunk = max(1, _CHUNK // size)
    done = 0
    try:
        t0 = time.perf_counter()
        deadline = t0 + cfg.append_max_s
        while done < max_batches and time.perf_counter() < deadline:
            stop = min(done + chunk, max_batches)
            for i in range(done, stop):
                result = put_batch(batches[i % n])
                if result.status is not _OK:
                    raise PutFailedError(result)
            done = stop
        elapsed = time.perf_counter() - t0
        wrote = cl.max_offset
    finally:
        cl.close()
    return Run(done * size, elapsed, wrote)


async def store_put_run(
    directory: Path, work: Workload, cfg: StoreBenchConfig, *, dispatch: bool
) -> Run:
    """``await store.put_message`` in a loop, ASYNC_FLUSH, with the store's services running.

    Without ``dispatch`` the writer never yields (a burst: dispatch and flush wait until
    the run is over); with it, the writer yields every ``yield_every`` messages and the run
    ends once dispatch has caught up.
    """
    async with MessageStore(_store_config(directory, cfg, FlushDiskType.ASYNC_FLUSH)) as store:
        put = store.put_message
        msgs = work.messages
        n = len(msgs)
        every = cfg.yield_every if dispatch else 0
        done = 0
        t0 = time.perf_counter()
        deadline = t0 + cfg.append_max_s
        while done < cfg.append_messages and time.perf_counter() < deadline:
            stop = min(done + _CHUNK, cfg.append_messages)
            for i in range(done, stop):
                result = await put(msgs[i % n])
                if result.status is not _OK:
                    raise PutFailedError(result)
                if every and i % every == every - 1:
                    await asyncio.sleep(0)
            done = stop
        if dispatch:
            store.dispatch_all()
        elapsed = time.perf_counter() - t0
        wrote = store.commit_log.max_offset
        if dispatch and store.get_max_offset(TOPIC, 0) != done:
            raise RuntimeError("dispatch did not catch up with the puts")
    return Run(done, elapsed, wrote)


async def store_batch_run(
    directory: Path, work: Workload, cfg: StoreBenchConfig, *, dispatch: bool
) -> Run:
    """``await store.put_messages`` in a loop; ``dispatch`` as in ``store_put_run`` (the
    writer yields after every batch)."""
    async with MessageStore(_store_config(directory, cfg, FlushDiskType.ASYNC_FLUSH)) as store:
        put_messages = store.put_messages
        batches = work.batches
        n = len(batches)
        size = cfg.batch_size
        max_batches = max(1, cfg.append_messages // size)
        chunk = max(1, _CHUNK // size)
        done = 0
        t0 = time.perf_counter()
        deadline = t0 + cfg.append_max_s
        while done < max_batches and time.perf_counter() < deadline:
            stop = min(done + chunk, max_batches)
            for i in range(done, stop):
                result = await put_messages(batches[i % n])
                if result.status is not _OK:
                    raise PutFailedError(result)
                if dispatch:
                    await asyncio.sleep(0)
            done = stop
        if dispatch:
            store.dispatch_all()
        elapsed = time.perf_counter() - t0
        wrote = store.commit_log.max_offset
        if dispatch and store.get_max_offset(TOPIC, 0) != done * size:
            raise RuntimeError("dispatch did not catch up with the puts")
    return Run(done * size, elapsed, wrote)


@dataclass(frozen=True, slots=True)
class AppendKind:
    key: str
    label: str
    batch: bool


APPEND_KINDS = (
    AppendKind("floor", "floor: crc32 + pack_into 84 B + body copy (baseline)", batch=False),
    AppendKind("commit_log_put", "CommitLog.put", batch=False),
    AppendKind("store_put", "store.put_message, append", batch=False),
    AppendKind("store_put_dispatch", "store.put_message + dispatch", batch=False),
    AppendKind("commit_log_batch", "CommitLog.put_batch", batch=True),
    AppendKind("store_batch", "store.put_messages, append", batch=True),
    AppendKind("store_batch_dispatch", "store.put_messages + dispatch", batch=True),
)


async def _append_run(kind: str, directory: Path, work: Workload, cfg: StoreBenchConfig) -> Run:
    if kind == "floor":
        return floor_run(directory, work, cfg)
    if kind == "commit_log_put":
        return commit_log_put_run(directory, work, cfg)
    if kind == "commit_log_batch":
        return commit_log_batch_run(directory, work, cfg)
    if kind.startswith("store_put"):
        return await store_put_run(directory, work, cfg, dispatch=kind.endswith("dispatch"))
    return await store_batch_run(directory, work, cfg, dispatch=kind.endswith("dispatch"))


async def append_bench(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    runs: dict[str, list[Run]] = {k.key: [] for k in APPEND_KINDS}
    order = list(APPEND_KINDS)
    # Not counted: the first pages this VM hands out are slow to fault in (they may not be
    # backed by the host yet), which would hit whichever run comes first.
    warmup = work_dir / "append-warmup"
    try:
        floor_run(warmup, work, cfg)
    finally:
        shutil.rmtree(warmup, ignore_errors=True)
    for r in range(cfg.rounds):
        for kind in order if r % 2 == 0 else reversed(order):
            directory = work_dir / f"append-{kind.key}-{r}"
            try:
                runs[kind.key].append(await _append_run(kind.key, directory, work, cfg))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    out: dict[str, Any] = {}
    floor_rate = max(x.per_s for x in runs["floor"])
    for kind in APPEND_KINDS:
        rates = [x.per_s for x in runs[kind.key]]
        rate = max(rates)
        messages = sum(x.messages for x in runs[kind.key])
        written = sum(x.bytes for x in runs[kind.key])
        out[kind.key] = {
            "label": kind.label,
            "messages_per_s": round(rate),
            "rounds": [round(x) for x in rates],
            "us_per_message": round(1e6 / rate, 2),
            "mb_per_s": round(rate * written / messages / 1e6, 1),
            "messages": messages,
            "vs_floor": round(rate / floor_rate, 3),
        }
    return out


# ------------------------------------------------------------------------------- codec


def is_pure(speedups: str) -> bool:
    """Whether ``codec.SPEEDUPS`` (of some process) says it runs the pure-Python codec."""
    return speedups.startswith("pure-python")


def codec_label(speedups: str) -> str:
    """The table's name for a set of append rows, from ``codec.SPEEDUPS`` of its process."""
    if speedups == "compiled":
        return "compiled codec"
    return "pure-Python codec" if is_pure(speedups) else "partly compiled codec"


PURE_ENV = {"AEROLITE_NO_EXTENSIONS": "1"}


def _config_from_json(path: Path) -> StoreBenchConfig:
    data: dict[str, Any] = json.loads(path.read_text())
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return StoreBenchConfig(**fields)


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "no output"


def pure_codec_append(work_dir: Path, cfg: StoreBenchConfig) -> tuple[dict[str, Any] | None, str]:
    """The append rows (floor included) with the pure-Python codec, in a child process.

    Returns (the child's result, a note) on success, (None, why) when the child failed or
    timed out; its files go under ``work_dir`` and are removed here either way.
    """
    config, out = work_dir / "pure-codec-config.json", work_dir / "pure-codec.json"
    directory = work_dir / "pure-codec"
    config.write_text(json.dumps(asdict(cfg)))
    argv = [
        sys.executable,
        "-m",
        "tests.bench.store_bench",
        "--append-only",
        "--config",
        str(config),
        "--work-dir",
        str(directory),
        "--json",
        str(out),
    ]
    what = "the pure-Python codec's append rows (a child process with AEROLITE_NO_EXTENSIONS=1)"
    try:
        proc = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env={**os.environ, **PURE_ENV},
            capture_output=True,
            text=True,
            timeout=cfg.pure_child_max_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"{what} did not finish in {cfg.pure_child_max_s:g} s: not shown"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if proc.returncode != 0:
        return None, f"{what} failed, exit code {proc.returncode}: {_tail(proc.stderr)}"
    child: dict[str, Any] = json.loads(out.read_text())
    if not is_pure(child["speedups"]):
        return None, f"{what} ran the codec {child['speedups']!r}: not shown"
    return child, (
        f"{what} took {child['seconds']:g} s; its ratios are to the floor it measured itself"
    )


def append_only(work_dir: Path, cfg: StoreBenchConfig) -> dict[str, Any]:
    """The child's side: the append rows with this process's codec, nothing else."""
    import uvloop

    started = time.perf_counter()
    work = build_workload(cfg)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        append = runner.run(append_bench(work_dir, work, cfg))
    return {
        "speedups": SPEEDUPS,
        "append": append,
        "seconds": round(time.perf_counter() - started, 1),
    }


# ---------------------------------------------------------------------------- SYNC_FLUSH


@dataclass(slots=True)
class SyncSamples:
    rates: list[float] = field(default_factory=list)
    latencies_ns: list[int] = field(default_factory=list)
    messages: int = 0
    flushes: int = 0


async def sync_level(
    directory: Path, writers: int, work: Workload, cfg: StoreBenchConfig, samples: SyncSamples
) -> None:
    """``writers`` tasks putting one message at a time under SYNC_FLUSH for ``sync_max_s``."""
    async with MessageStore(_store_config(directory, cfg, FlushDiskType.SYNC_FLUSH)) as store:
        flusher = store.commit_log_flusher
        assert flusher is not None
        msgs = work.messages
        n = len(msgs)
        per_writer = max(1, cfg.sync_messages // writers)
        put = store.put_message
        deadline = time.perf_counter() + cfg.sync_max_s

        async def writer(k: int) -> list[int]:
            latencies: list[int] = []
            i = k
            while len(latencies) < per_writer and time.perf_counter() < deadline:
                msg = msgs[i % n]
                i += writers
                t = time.perf_counter_ns()
                result = await put(msg)
                latencies.append(time.perf_counter_ns() - t)
                if result.status is not _OK:
                    raise PutFailedError(result)
            return latencies

        flushes = flusher.flushes
        t0 = time.perf_counter()
        per_task = await asyncio.gather(*(writer(k) for k in range(writers)))
        elapsed = time.perf_counter() - t0
        flushes = flusher.flushes - flushes
    done = sum(len(x) for x in per_task)
    samples.rates.append(done / elapsed)
    samples.messages += done
    samples.flushes += flushes
    for lat in per_task:
        samples.latencies_ns += lat


def fdatasync_baseline(directory: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    """One record copied into a mapped segment, then ``os.fdatasync``, on the loop's thread:
    what a SYNC_FLUSH put costs the disk, without the store's hand-offs."""
    segments = _FloorSegments(directory, cfg.segment_bytes)
    record = bytes(work.record_bytes)
    latencies: list[int] = []
    try:
        mm = segments.new(0)
        fd = segments.maps[0][0]
        pos = 0
        deadline = time.perf_counter() + cfg.fdatasync_max_s
        while len(latencies) < cfg.fdatasync_samples and time.perf_counter() < deadline:
            t = time.perf_counter_ns()
            mm[pos : pos + len(record)] = record
            os.fdatasync(fd)
            latencies.append(time.perf_counter_ns() - t)
            pos += len(record)
    finally:
        segments.close()
    ordered = sorted(latencies)
    return {
        "samples": len(ordered),
        "p50_us": round(percentile(ordered, 50) / 1e3, 1),
        "p99_us": round(percentile(ordered, 99) / 1e3, 1),
    }


async def sync_bench(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    samples = {w: SyncSamples() for w in cfg.sync_writers}
    for r in range(cfg.sync_rounds):
        levels = cfg.sync_writers if r % 2 == 0 else tuple(reversed(cfg.sync_writers))
        for writers in levels:
            directory = work_dir / f"sync-{writers}-{r}"
            try:
                await sync_level(directory, writers, work, cfg, samples[writers])
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    out: dict[str, Any] = {}
    for writers, s in samples.items():
        ordered = sorted(s.latencies_ns)
        out[str(writers)] = {
            "writers": writers,
            "messages_per_s": round(median(s.rates)),
            "rounds": [round(x) for x in s.rates],
            "messages": s.messages,
            "p50_us": round(percentile(ordered, 50) / 1e3, 1),
            "p99_us": round(percentile(ordered, 99) / 1e3, 1),
            "fdatasyncs": s.flushes,
            "fdatasyncs_per_message": round(s.flushes / s.messages, 4),
            "messages_per_fdatasync": round(s.messages / s.flushes, 1) if s.flushes else None,
        }
    one = out[str(min(cfg.sync_writers))]["messages_per_s"]
    for row in out.values():
        row["vs_one_writer"] = round(row["messages_per_s"] / one, 2)
    return out


async def sync_section(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    directory = work_dir / "fdatasync"
    try:
        baseline = fdatasync_baseline(directory, work, cfg)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {"fdatasync": baseline, "writers": await sync_bench(work_dir, work, cfg)}


# ------------------------------------------------------------------------------ recovery


def recovery_size(work_dir: Path, cfg: StoreBenchConfig) -> tuple[int, str | None]:
    """How much commit log the disk allows (halving from ``recovery_bytes``), and a note
    when that is less than asked; 0 when not even ``recovery_min_bytes`` fits."""
    usage = shutil.disk_usage(work_dir)
    extra = (
        index_file_bytes(cfg.max_hash_slot_num, cfg.max_index_num)
        + cfg.recovery_queues * 300_000 * 20
        + cfg.disk_margin_bytes
    )

    def fits(size: int) -> bool:
        need = size + extra
        return need <= usage.free and (usage.used + need) / usage.total <= cfg.max_disk_used_ratio

    size = cfg.recovery_bytes
    while size > cfg.recovery_min_bytes and not fits(size):
        size //= 2
    free = f"{usage.free / GIB:.1f} GiB free of {usage.total / GIB:.1f} GiB"
    if not fits(size):
        return 0, f"recovery skipped: {free}, not enough for {size / MIB:.0f} MiB of log"
    if size < cfg.recovery_bytes:
        return size, (
            f"recovery log scaled down from {cfg.recovery_bytes / MIB:.0f} MiB to "
            f"{size / MIB:.0f} MiB: {free}"
        )
    return size, None


async def write_recovery_log(
    root: Path, size: int, work: Workload, cfg: StoreBenchConfig
) -> dict[str, Any]:
    """Fill a store with about ``size`` bytes of commit log (batches spread over
    ``recovery_queues`` queues, dispatched as they go) and shut it down cleanly."""
    batches = [
        MessageBatch(
            topic=b.topic,
            queue_id=i % cfg.recovery_queues,
            body=b.body,
            born_timestamp=b.born_timestamp,
            born_host=b.born_host,
            store_host=b.store_host,
        )
        for i, b in enumerate(work.batches)
    ]
    n = len(batches)
    batch_bytes = work.record_bytes * cfg.batch_size
    store = MessageStore(_store_config(root, cfg, FlushDiskType.ASYNC_FLUSH))
    async with store:
        cl = store.commit_log
        done = 0
        t0 = time.perf_counter()
        deadline = t0 + cfg.recovery_write_max_s
        # stop short of ``size``, so that no segment is started for a last few records
        while cl.max_offset + 2 * batch_bytes <= size and time.perf_counter() < deadline:
            result = await store.put_messages(batches[done % n])
            if result.status is not _OK:
                raise PutFailedError(result)
            done += 1
            await asyncio.sleep(0)
        store.dispatch_all()
        write_s = time.perf_counter() - t0
        end = cl.max_offset
        segments = len(cl.files.files)
        t1 = time.perf_counter()
    shutdown_s = time.perf_counter() - t1
    return {
        "messages": done * cfg.batch_size,
        "commit_log_bytes": end,
        "segments": segments,
        "write_s": round(write_s, 2),
        "write_messages_per_s": round(done * cfg.batch_size / write_s),
        "shutdown_s": round(shutdown_s, 2),
        "timed_out": end + 2 * batch_bytes <= size,
    }


def _check_loaded(store: MessageStore, written: dict[str, Any]) -> None:
    if store.commit_log.max_offset != written["commit_log_bytes"]:
        raise RuntimeError(
            f"recovered commit log ends at {store.commit_log.max_offset}, "
            f"written up to {written['commit_log_bytes']}"
        )
    entries = sum(cq.max_offset for cq in store.queues)
    if entries != written["messages"]:
        raise RuntimeError(f"consume queues hold {entries} entries, {written['messages']} written")


def _drop_page_cache(cl: CommitLog) -> None:
    """Evict the (clean, unmapped) pages of the log's segments: a cold walk reads the disk."""
    for mf in cl.files.files:
        os.posix_fadvise(mf.fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _walk_s(cl: CommitLog, *, check_crc: bool, end: int) -> float:
    t0 = time.perf_counter()
    valid_end = cl.walk(0, check_crc=check_crc)
    elapsed = time.perf_counter() - t0
    if valid_end != end:
        raise RuntimeError(f"walk stopped at {valid_end}, the log ends at {end}")
    return elapsed


def _rate(seconds: float, walked: int) -> dict[str, Any]:
    return {
        "seconds": round(seconds, 3),
        "walked_bytes": walked,
        "gib_per_s": round(walked / GIB / seconds, 3),
        "s_per_gib": round(seconds / (walked / GIB), 3),
    }


async def recovery_bench(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    size, note = recovery_size(work_dir, cfg)
    out: dict[str, Any] = {"notes": [note] if note else []}
    if not size:
        return out
    root = work_dir / "recovery"
    store_cfg = _store_config(root, cfg, FlushDiskType.ASYNC_FLUSH)
    written = await write_recovery_log(root, size, work, cfg)
    if written["timed_out"]:
        out["notes"].append(
            f"the write stopped at its {cfg.recovery_write_max_s:g} s budget, short of "
            f"{size / MIB:.0f} MiB"
        )
    out["written"] = written
    end = written["commit_log_bytes"]
    segments = written["segments"]
    last3 = end - max(0, segments - 3) * cfg.segment_bytes

    # Normal recovery, as after a clean shutdown (abort absent).
    loads = []
    for _ in range(cfg.recovery_repeats):
        store = MessageStore(store_cfg)
        t0 = time.perf_counter()
        store.load()
        loads.append(time.perf_counter() - t0)
        try:
            if not store.last_exit_ok:
                raise RuntimeError("the clean shutdown left an abort file")
            _check_loaded(store, written)
        finally:
            await store.shutdown()
    out["normal_load"] = {**_rate(median(loads), last3), "runs_s": [round(x, 3) for x in loads]}
    out["normal_load"]["s_per_gib_of_log"] = round(median(loads) / (end / GIB), 3)

    # Consume-queue recovery alone (part of load above).
    cq_runs = []
    for _ in range(cfg.recovery_repeats):
        table = ConsumeQueueTable(root / "consumequeue", store_cfg.consume_queue_file_bytes)
        t0 = time.perf_counter()
        table.load()
        for cq in table:
            cq.recover()
        cq_runs.append(time.perf_counter() - t0)
        cq_bytes = sum(cq.files.max_offset for cq in table)
        table.close()
    out["consume_queue_recover"] = {"seconds": round(median(cq_runs), 3), "bytes": cq_bytes}

    # The full walk, every segment: cold once, then warm.
    cl = CommitLog(root / "commitlog", cfg.segment_bytes, store_cfg.max_message_bytes, root)
    cl.files.load()
    try:
        _drop_page_cache(cl)
        cold = _walk_s(cl, check_crc=True, end=end)
        warm_crc = [_walk_s(cl, check_crc=True, end=end) for _ in range(cfg.recovery_repeats)]
        warm_plain = [_walk_s(cl, check_crc=False, end=end) for _ in range(cfg.recovery_repeats)]
    finally:
        cl.close()
    out["walk_crc"] = {**_rate(median(warm_crc), end), "runs_s": [round(x, 3) for x in warm_crc]}
    out["walk_no_crc"] = {
        **_rate(median(warm_plain), end),
        "runs_s": [round(x, 3) for x in warm_plain],
    }
    out["walk_crc_cold"] = _rate(cold, end)

    # Abnormal recovery: abort present, checkpoint gone, so every segment is re-dispatched.
    (root / "checkpoint").unlink()
    (root / "abort").touch()
    store = MessageStore(store_cfg)
    t0 = time.perf_counter()
    store.load()
    abnormal = time.perf_counter() - t0
    try:
        if store.last_exit_ok:
            raise RuntimeError("abort file not seen")
        _check_loaded(store, written)
        assert store.index is not None
        keys = sum(f.index_count - 1 for f in store.index.files)
        # UNIQ_KEY and KEYS of every message (and the last record once more: dispatch
        # resumes at the index's endPhyOffset, the start of the last record it indexed)
        if keys < 2 * written["messages"]:
            raise RuntimeError(f"re-dispatch indexed {keys} keys for {written['messages']}")
    finally:
        await store.shutdown()
    out["abnormal_load"] = {**_rate(abnormal, end), "index_keys": keys}
    return out


# -------------------------------------------------------------------------------- run


def _filesystem(path: Path) -> str:
    """``<type> on <device>`` of the mount holding ``path`` (from /proc/mounts)."""
    best, found = "", "unknown"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return found
    resolved = str(path.resolve())
    for line in lines:
        device, mount, fstype, *_ = line.split()
        if (resolved == mount or resolved.startswith(mount.rstrip("/") + "/")) and len(mount) > len(
            best
        ):
            best, found = mount, f"{fstype} on {device}, mounted at {mount}"
    return found


@contextlib.contextmanager
def _work_dir() -> Iterator[Path]:
    """A temporary directory under ``bench-results/``, removed with all it holds."""
    path = bench_work_dir("store-bench-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _measure_rest(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    return {
        "sync_flush": await sync_section(work_dir, work, cfg),
        "recovery": await recovery_bench(work_dir, work, cfg),
    }


def _measure(work_dir: Path, work: Workload, cfg: StoreBenchConfig) -> dict[str, Any]:
    """This process's append rows, then the pure-Python codec's (a child process, unless
    this one is pure already), then SYNC_FLUSH and recovery here."""
    import uvloop

    notes: list[str] = []
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        append = runner.run(append_bench(work_dir, work, cfg))
        child: dict[str, Any] | None = None
        if is_pure(SPEEDUPS):
            notes.append(
                f"this process runs the pure-Python codec (`codec.SPEEDUPS`: {SPEEDUPS}), so "
                "the append rows are one set, with no compiled rows beside them"
            )
        else:
            child, note = pure_codec_append(work_dir, cfg)
            notes.append(note)
        rest = runner.run(_measure_rest(work_dir, work, cfg))
    pure = None if child is None else child["append"]
    return {
        "codec": {
            "speedups": SPEEDUPS,
            "label": codec_label(SPEEDUPS),
            "pure_python_child": None
            if child is None
            else {"speedups": child["speedups"], "seconds": child["seconds"]},
        },
        "append": append,
        "append_pure_python": pure,
        **rest,
        "notes": notes + rest["recovery"].pop("notes"),
    }


def _goals(results: dict[str, Any]) -> dict[str, Any]:
    a, s, r = results["append"], results["sync_flush"]["writers"], results["recovery"]
    single = a["store_put"]["vs_floor"]
    batch = a["store_batch"]["vs_floor"]
    group = s["256"]["vs_one_writer"] if "256" in s else None
    walk = r["walk_crc"]["gib_per_s"] if "walk_crc" in r else None
    return {
        "codec": results["codec"]["speedups"],  # the figures judged: this process's
        "single_vs_floor_min": SINGLE_GOAL,
        "batch_vs_floor_min": BATCH_GOAL,
        "group_commit_ratio_min": GROUP_COMMIT_GOAL,
        "recovery_gib_per_s_min": RECOVERY_GOAL_GIB_S,
        "single": single,
        "batch": batch,
        "group_commit": group,
        "recovery_gib_per_s": walk,
        "single_met": single >= SINGLE_GOAL,
        "batch_met": batch >= BATCH_GOAL,
        "group_commit_met": group is not None and group >= GROUP_COMMIT_GOAL,
        "recovery_met": walk is not None and walk >= RECOVERY_GOAL_GIB_S,
    }


def run(quick: bool = False, config: StoreBenchConfig | None = None) -> Report:
    """Run the whole store benchmark and return its report."""
    cfg = config or (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_info()
    work = build_workload(cfg)
    with _work_dir() as work_dir:
        filesystem = _filesystem(work_dir)
        measured = _measure(work_dir, work, cfg)
        where = str(work_dir.relative_to(REPO_ROOT))
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine,
        "config": {
            **asdict(cfg),
            "work_dir": where,
            "filesystem": filesystem,
            "record_bytes": work.record_bytes,
            "floor_record_bytes": work.floor_record_bytes,
            "properties": work.messages[0].properties.replace("\x01", "=").replace("\x02", ";"),
        },
        **measured,
        "seconds": 0.0,
    }
    results["goals"] = _goals(results)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results))


# ----------------------------------------------------------------------------- render


def _verdict(met: bool) -> str:
    return "met" if met else "**not met**"


_APPEND_HEADERS = ("path", "run", "msgs/s", "MB/s", "µs/msg", "vs floor")


def _append_sets(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, rows) of each set of append rows: this process's, then the pure-Python
    codec's from the child when there is one."""
    sets = [(results["codec"]["label"], results["append"])]
    if results.get("append_pure_python") is not None:
        sets.append((codec_label("pure-python"), results["append_pure_python"]))
    return sets


def _append_rows(results: dict[str, Any]) -> list[list[str]]:
    """Each path's row in every set, side by side; a set's ratios are to its own floor."""
    batch = f" (x{results['config']['batch_size']})"
    return [
        [
            row["label"] + (batch if kind.batch else ""),
            label,
            f"{row['messages_per_s']:,}",
            f"{row['mb_per_s']:.0f}",
            f"{row['us_per_message']:.2f}",
            f"{row['vs_floor']:.2f}",
        ]
        for kind in APPEND_KINDS
        for label, rows in _append_sets(results)
        for row in [rows[kind.key]]
    ]


_SYNC_HEADERS = (
    "writers",
    "msgs/s",
    "vs 1 writer",
    "p50 µs",
    "p99 µs",
    "fdatasyncs/msg",
    "msgs/fdatasync",
)


def _sync_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(row["writers"]),
            f"{row['messages_per_s']:,}",
            f"{row['vs_one_writer']:.1f}",
            f"{row['p50_us']:,.0f}",
            f"{row['p99_us']:,.0f}",
            f"{row['fdatasyncs_per_message']:.3f}",
            "—"
            if row["messages_per_fdatasync"] is None
            else f"{row['messages_per_fdatasync']:.1f}",
        ]
        for row in results["sync_flush"]["writers"].values()
    ]


_RECOVERY_HEADERS = ("recovery", "commit log walked", "seconds", "GiB/s", "s per GiB walked")

_RECOVERY_ROWS = (
    ("normal_load", "MessageStore.load() after a clean shutdown (last 3 segments)"),
    ("walk_crc", "CommitLog.walk, every segment, CRC checked"),
    ("walk_no_crc", "CommitLog.walk, every segment, no CRC"),
    ("walk_crc_cold", "CommitLog.walk, every segment, CRC checked, page cache dropped"),
    ("abnormal_load", "MessageStore.load() after a crash, no checkpoint (re-dispatch)"),
)


def _mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB" if n >= MIB else f"{n / 1024:,.0f} KiB"


def _recovery_rows(results: dict[str, Any]) -> list[list[str]]:
    r = results["recovery"]
    return [
        [
            label,
            _mib(r[key]["walked_bytes"]),
            f"{r[key]['seconds']:.3f}",
            f"{r[key]['gib_per_s']:.2f}",
            f"{r[key]['s_per_gib']:.2f}",
        ]
        for key, label in _RECOVERY_ROWS
        if key in r
    ]


def _goal_text(results: dict[str, Any]) -> str:
    g = results["goals"]
    parts = [
        f"Goals: single appends (`store.put_message`, ASYNC_FLUSH, {results['codec']['label']})"
        " ≥ "
        f"{g['single_vs_floor_min']:.2f}x the floor "
        f"({g['single']:.2f}: {_verdict(g['single_met'])}); batches of "
        f"{results['config']['batch_size']} (`store.put_messages`) ≥ "
        f"{g['batch_vs_floor_min']:.2f}x ({g['batch']:.2f}: {_verdict(g['batch_met'])})",
    ]
    if g["group_commit"] is not None:
        parts.append(
            f"SYNC_FLUSH with 256 writers ≥ {g['group_commit_ratio_min']:.0f}x one writer "
            f"({g['group_commit']:.1f}x: {_verdict(g['group_commit_met'])})"
        )
    if g["recovery_gib_per_s"] is not None:
        parts.append(
            f"recovery ≥ {g['recovery_gib_per_s_min']:.1f} GiB/s of verified commit log "
            f"(full CRC-checked walk, {g['recovery_gib_per_s']:.2f} GiB/s: "
            f"{_verdict(g['recovery_met'])})"
        )
    return "; ".join(parts) + "."


def _reading_text(results: dict[str, Any]) -> str:
    """What the figures say about where the time goes, from the figures themselves."""
    a, s = results["append"], results["sync_flush"]["writers"]
    bare = results["sync_flush"]["fdatasync"]
    floor_us = a["floor"]["us_per_message"]
    single_us, batch_us = a["store_put"]["us_per_message"], a["store_batch"]["us_per_message"]
    dispatch_us = a["store_put_dispatch"]["us_per_message"] - single_us
    text = (
        f"Reading: a single put costs {single_us:.2f} µs against the floor's {floor_us:.2f} "
        f"µs, a message of a batch {batch_us:.2f} µs. Running dispatch (consume queue and "
        f"index) adds about {dispatch_us:.1f} µs per message on the same loop, so with it "
        f"single puts reach {a['store_put_dispatch']['vs_floor']:.2f}x and batches "
        f"{a['store_batch_dispatch']['vs_floor']:.2f}x the floor."
    )
    pure = results.get("append_pure_python")
    if pure is not None:
        p_single, p_batch = pure["store_put"], pure["store_batch"]
        text += (
            f" With the pure-Python codec (against its own floor, "
            f"{pure['floor']['us_per_message']:.2f} µs) a single put costs "
            f"{p_single['us_per_message']:.2f} µs ({p_single['vs_floor']:.2f}x the floor), a "
            f"message of a batch {p_batch['us_per_message']:.2f} µs "
            f"({p_batch['vs_floor']:.2f}x): the {results['codec']['label']} makes them "
            f"{p_single['us_per_message'] / single_us:.2f}x and "
            f"{p_batch['us_per_message'] / batch_us:.2f}x as fast."
        )
    widest = s[str(max(int(k) for k in s))]
    one = s[str(min(int(k) for k in s))]
    if widest["messages_per_fdatasync"] is not None:
        text += (
            f" Under SYNC_FLUSH one writer waits {one['p50_us']:,.0f} µs (p50) per put, where "
            f"a bare record copy + fdatasync on the loop's thread takes {bare['p50_us']:,.0f} "
            "µs: the rest is the hand-off to the flush thread and back; "
            f"{widest['writers']} writers share one fdatasync per "
            f"{widest['messages_per_fdatasync']:.0f} messages, so their rate is bound by "
            f"CPU per message on the loop ({1e6 / widest['messages_per_s']:.0f} µs: put, "
            "waiter bookkeeping and dispatch), not by the disk."
        )
    return text


def render_console(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = [
        f"store: {cfg['body_bytes']} B bodies ({cfg['record_bytes']} B records), "
        f"{cfg['segment_bytes'] // MIB} MiB segments, {cfg['rounds']} round(s)"
        f"{', quick' if results['quick'] else ''}; {cfg['work_dir']} on {cfg['filesystem']}; "
        f"codec {results['codec']['speedups']}; {machine_line(results['machine'])}",
        "",
        text_table(_APPEND_HEADERS, _append_rows(results)),
        "",
        text_table(_SYNC_HEADERS, _sync_rows(results)),
        "bare record copy + fdatasync: p50 {p50_us:,.0f} µs, p99 {p99_us:,.0f} µs".format(
            **results["sync_flush"]["fdatasync"]
        ),
    ]
    rec = _recovery_rows(results)
    if rec:
        lines += ["", text_table(_RECOVERY_HEADERS, rec)]
    lines += ["", _goal_text(results), "", _reading_text(results)]
    lines += [f"note: {n}" for n in results["notes"]]
    lines += ["", f"({results['seconds']} s)"]
    return "\n".join(lines)


def _spread_text(append: dict[str, Any], label: str) -> str:
    def spread(key: str) -> tuple[float, float]:
        rounds = append[key]["rounds"]
        return min(rounds), max(rounds)

    lo, hi = spread("floor")
    spreads = sorted(
        (top - low) / top for low, top in (spread(k.key) for k in APPEND_KINDS if k.key != "floor")
    )
    return (
        f"here, in the {label} run, the floor's rounds ranged from {lo:,.0f} to {hi:,.0f} "
        "msgs/s, while a store "
        f"row's worst round was typically {100 * median(spreads):.0f} % below its best "
        f"(at most {100 * spreads[-1]:.0f} %)"
    )


def _codec_text(results: dict[str, Any]) -> str:
    """How the two codecs' rows were taken (the store binds the codec at import)."""
    label = results["codec"]["label"]
    if results.get("append_pure_python") is None:
        return (
            f"The store ran the {label} (`codec.SPEEDUPS`: {results['codec']['speedups']}); "
            "there is no second set of rows (see the notes)."
        )
    return (
        f'Two runs: "{label}" is this process (`codec.SPEEDUPS`: '
        f'{results["codec"]["speedups"]}); "pure-Python codec" is a child process (the '
        "same interpreter, `AEROLITE_NO_EXTENSIONS=1`) run right after this process's append "
        "rows; it measures its own floor, so each run's ratios are to a floor taken in the "
        "same process. The floor itself uses no codec."
    )


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    a = results["append"]
    parts = [
        "## Store: appends, group commit, recovery",
        "",
        f"Measured {machine_line(results['machine'])}; the run took {results['seconds']} s. "
        f"Files in a temporary directory under `bench-results/` ({cfg['filesystem']}), "
        f"segments of {cfg['segment_bytes'] // MIB} MiB (RocketMQ's default is 1 GiB), "
        "everything on uvloop, in one process but for the pure-Python codec's append rows.",
        "",
        f"**Appends.** {cfg['body_bytes']} B bodies; topic `{TOPIC}`, queue 0, properties "
        f"`{cfg['properties']}` with a distinct key per message ({cfg['record_bytes']} B "
        f"records). The floor does, per message, `zlib.crc32` of the body, one precompiled "
        f"`struct.Struct.pack_into` of the record's 84-byte fixed part into a "
        f"`posix_fallocate`d, `mmap`ped segment and a copy of the body after it "
        f"({cfg['floor_record_bytes']} B), opening segments as the store does. "
        '"append": the writer awaits one put after the other and never yields, so '
        'dispatch and the flusher wait until the run is over. "+ dispatch": the writer '
        f"yields to the loop every {cfg['yield_every']} messages, so consume queues and the "
        "index are built and the ASYNC flusher runs within the run, which ends once "
        f"dispatch has caught up. Up to {cfg['append_messages']:,} messages or "
        f"{cfg['append_max_s']:g} s per run, fresh segments every run, best of "
        f"{cfg['rounds']} rounds (alternating order; timeit's convention, because the floor, "
        "much of whose time goes to page faults on fresh pages, swings with the kernel's "
        f"memory state far more than the store does: "
        f"{_spread_text(a, results['codec']['label'])}). MB/s counts commit-log bytes. "
        f"{_codec_text(results)}",
        "",
        markdown_table(_APPEND_HEADERS, _append_rows(results)),
        "",
        f"**Group commit (SYNC_FLUSH).** N writer tasks, each awaiting `put_message` and "
        f"with it the `fdatasync` that covers its record, for {cfg['sync_max_s']:g} s per "
        f"level and round ({cfg['sync_rounds']} rounds): rate is the median over rounds, "
        "latency percentiles pool every put, and fdatasyncs are the flusher's rounds. "
        "For scale, a bare copy of one record into a mapped segment followed by "
        "`os.fdatasync`, on the loop's thread: p50 "
        f"{results['sync_flush']['fdatasync']['p50_us']:,.0f} µs, p99 "
        f"{results['sync_flush']['fdatasync']['p99_us']:,.0f} µs.",
        "",
        markdown_table(_SYNC_HEADERS, _sync_rows(results)),
    ]
    r = results["recovery"]
    if "written" in r:
        w = r["written"]
        parts += [
            "",
            f"**Recovery.** A store filled with {_mib(w['commit_log_bytes'])} of commit log "
            f"({w['segments']} segments, {w['messages']:,} messages in "
            f"{cfg['recovery_queues']} queues, index of {cfg['max_hash_slot_num']:,} slots and "
            f"{cfg['max_index_num']:,} entries; written through "
            f"`put_messages` with dispatch in {w['write_s']:.1f} s, "
            f"{w['write_messages_per_s']:,} msgs/s, then a clean shutdown in "
            f"{w['shutdown_s']:.2f} s). `load()` after a clean shutdown verifies only the "
            "last three segments (plus consume-queue recovery, "
            f"{r['consume_queue_recover']['seconds']:.3f} s of it for "
            f"{_mib(r['consume_queue_recover']['bytes'])} of queues); the full walk is the "
            "figure per GiB of verified log. Warm rows read the page cache (median of "
            f"{cfg['recovery_repeats']}); the cold row first drops the segments' pages with "
            "`posix_fadvise(DONTNEED)`. The crash case removes `checkpoint` and creates "
            "`abort`, so recovery starts at the first segment and re-dispatches every record: "
            f"the index is rebuilt ({r['abnormal_load']['index_keys']:,} keys), consume "
            f"queues skip entries they have. Normal `load()` per GiB of log: "
            f"{r['normal_load']['s_per_gib_of_log']:.2f} s.",
            "",
            markdown_table(_RECOVERY_HEADERS, _recovery_rows(results)),
        ]
    parts += ["", _goal_text(results), "", _reading_text(results)]
    if results["notes"]:
        parts += ["", *(f"Note: {n}." for n in results["notes"])]
    return "\n".join(parts)


# -------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """The pure-Python codec's child (``--append-only``); the whole benchmark runs with
    ``python -m tests.bench --only store``."""
    import structlog

    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.store_bench",
        description="The store benchmark's append rows alone, with this process's codec "
        "(set AEROLITE_NO_EXTENSIONS=1 for the pure-Python one); the whole benchmark runs "
        "with python -m tests.bench --only store.",
    )
    parser.add_argument("--append-only", action="store_true", help="required: the append rows")
    parser.add_argument("--quick", action="store_true", help="tiny counts (without --config)")
    parser.add_argument("--config", type=Path, help="a StoreBenchConfig as JSON")
    parser.add_argument(
        "--work-dir", type=Path, help="for the runs' files (default: one under bench-results/)"
    )
    parser.add_argument("--json", type=Path, help="write the result here, else to stdout")
    args = parser.parse_args(argv)
    if not args.append_only:
        parser.error("only --append-only runs here; use python -m tests.bench --only store")
    # Warnings only: nothing may log per message while figures are taken.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    cfg = _config_from_json(args.config) if args.config else (QUICK if args.quick else FULL)
    if args.work_dir is None:
        with _work_dir() as work_dir:
            result = append_only(work_dir, cfg)
    else:  # every run removes its own files; the caller removes the directory
        args.work_dir.mkdir(parents=True, exist_ok=True)
        result = append_only(args.work_dir, cfg)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.json is None:
        print(text)
    else:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
