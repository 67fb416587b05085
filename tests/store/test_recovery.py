"""Crash and recovery: kill -9 mid-write, torn and garbled tails, lost consume queues.

docs/store-format.md §2.4 (what a valid record is), §5 (checkpoint, abort), §7 (dispatch), §8
(recovery) and §9 (flush). The store is checked against the files it leaves on disk, parsed
here independently of ``codec``: every record up to the recovered end verifies,
every consume-queue entry points at a record of its queue with the right queue offset and
every record has its entry, the index finds what is in the log, and cut bytes are kept under
``<root>/torn/``.

The kill tests run ``tests/store/crash_writer.py`` as a child process and SIGKILL it (by its
own PID) at a random moment. SIGKILL keeps the page cache, so under SYNC_FLUSH every message
acknowledged before the kill must be back; under ASYNC_FLUSH only a consistent prefix is
asserted. Randomness is seeded: a failure names its seed and round.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import struct
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore
from store.results import GetMessageStatus, PutMessageStatus
from tests.store.conftest import BLANK_MAGIC, MESSAGE_MAGIC
from tests.store.crash_writer import (
    BATCH_SIZE,
    make_batch,
    make_message,
    message_key,
    parse_body,
    route,
    store_config,
    uniq_key,
)
from tests.support import wait_dispatched

REPO_ROOT = Path(__file__).resolve().parents[2]
CQ_UNIT = struct.Struct(">qiq")  # commit-log offset, size, tags code
FAR_FUTURE_MS = 1 << 62
MILLION = 1_000_000


# =============================================================================== the log
# An independent reading of the files on disk, by the §2.2 table and the §2.4 rules.


@dataclass(frozen=True, slots=True)
class Rec:
    """A record that verifies by §2.4, as found on disk."""

    offset: int  # global commit-log offset
    size: int
    queue_id: int
    queue_offset: int
    store_timestamp: int
    topic: str
    properties: str
    body: bytes
    body_start: int  # global offset of the first BODY byte
    props_start: int  # global offset of the first PROPERTIES byte

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def props(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in self.properties.split("\x02"):
            name, sep, value = item.partition("\x01")
            if sep and name and value:
                out[name] = value
        return out


def _parse(data: bytes, pos: int, at: int | None) -> Rec | None:
    """The record at ``data[pos:]`` if it verifies (magic, lengths, body CRC, and its
    PHYSICALOFFSET equal to ``at`` when given), else None."""
    if pos + 8 > len(data):
        return None
    total, magic = struct.unpack_from(">ii", data, pos)
    if magic != MESSAGE_MAGIC or total < 91 or pos + total > len(data):
        return None
    rec = data[pos : pos + total]
    crc, queue_id, _flag, queue_offset, phys, sys_flag, _born = struct.unpack_from(
        ">iiiqqiq", rec, 8
    )
    p = 48 + (20 if sys_flag & 0x10 else 8)
    (store_ts,) = struct.unpack_from(">q", rec, p)
    p += 8 + (20 if sys_flag & 0x20 else 8)
    if p + 16 > total:
        return None
    _reconsume, _prepared, body_len = struct.unpack_from(">iqi", rec, p)
    p += 16
    if body_len < 0 or p + body_len + 1 > total:
        return None
    body_pos = p
    body = rec[p : p + body_len]
    p += body_len
    topic_len = rec[p]
    p += 1
    if p + topic_len + 2 > total:
        return None
    topic_raw = rec[p : p + topic_len]
    p += topic_len
    (props_len,) = struct.unpack_from(">h", rec, p)
    p += 2
    if props_len < 0 or p + props_len != total:
        return None
    if zlib.crc32(body) & 0x7FFFFFFF != crc:
        return None
    offset = phys if at is None else at
    if phys != offset:
        return None
    # §2.4 does not ask for UTF-8 (Java decodes with replacement): any bytes verify.
    topic = topic_raw.decode(errors="surrogateescape")
    properties = rec[p:].decode(errors="surrogateescape")
    return Rec(
        offset,
        total,
        queue_id,
        queue_offset,
        store_ts,
        topic,
        properties,
        body,
        offset + body_pos,
        offset + p,
    )


def segment_files(root: Path) -> list[Path]:
    directory = root / "commitlog"
    if not directory.exists():
        return []
    return sorted(p for p in directory.iterdir() if p.name.isdigit() and len(p.name) == 20)


def walk_log(root: Path, file_bytes: int, start_index: int = 0) -> tuple[list[Rec], int]:
    """Records from segment ``start_index`` up to the first that does not verify, and the
    end of valid data (recovery's walk, §8)."""
    files = segment_files(root)
    recs: list[Rec] = []
    if not files:
        return recs, 0
    end = int(files[start_index].name)
    for path in files[start_index:]:
        data = path.read_bytes()
        start = int(path.name)
        assert len(data) == file_bytes, f"{path} has {len(data)} bytes"
        pos = 0
        while pos + 8 <= file_bytes:
            total, magic = struct.unpack_from(">ii", data, pos)
            if magic == BLANK_MAGIC and total == file_bytes - pos:
                pos = file_bytes
                break
            rec = _parse(data, pos, start + pos)
            if rec is None:
                return recs, start + pos
            recs.append(rec)
            pos += rec.size
        end = start + pos
        if pos < file_bytes:
            break
    return recs, end


def log_bytes(root: Path) -> dict[int, bytes]:
    return {int(p.name): p.read_bytes() for p in segment_files(root)}


def java_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code(rec: Rec) -> int:
    tags = rec.props.get("TAGS")
    return java_hash(tags) if tags else 0


def read_checkpoint(root: Path) -> tuple[int, int, int]:
    physic, logics, index = struct.unpack(">qqq", (root / "checkpoint").read_bytes()[:24])
    return physic, logics, index


def abnormal_start_index(root: Path) -> int:
    """The segment abnormal recovery starts from (§8): the newest whose first record has a
    non-zero store time at or before min(physic, logics) - 3 s; else the first."""
    physic, logics, _index = read_checkpoint(root)
    safe = min(physic, logics) - 3000
    files = segment_files(root)
    for index in range(len(files) - 1, -1, -1):
        first = _parse(files[index].read_bytes(), 0, None)
        if first is not None and 0 < first.store_timestamp <= safe:
            return index
    return 0


# ======================================================================= the consistency


def queue_records(recs: Iterable[Rec]) -> dict[tuple[str, int], list[Rec]]:
    out: dict[tuple[str, int], list[Rec]] = defaultdict(list)
    for rec in recs:
        out[rec.topic, rec.queue_id].append(rec)
    return out


def consume_queue_bytes(root: Path) -> dict[tuple[str, int], bytes]:
    """Every consume queue on disk: its segment files concatenated in name order."""
    out: dict[tuple[str, int], bytes] = {}
    cq_root = root / "consumequeue"
    if not cq_root.exists():
        return out
    for topic_dir in sorted(cq_root.iterdir()):
        for queue_dir in sorted(topic_dir.iterdir()):
            names = sorted(p.name for p in queue_dir.iterdir())
            out[topic_dir.name, int(queue_dir.name)] = b"".join(
                (queue_dir / n).read_bytes() for n in names
            )
    return out


def query_records(store: MessageStore, topic: str, key: str) -> list[Rec]:
    """What QUERY_MESSAGE returns for ``key``, parsed, keeping only records that carry the
    key (the index stores hashes; a client compares keys as well)."""
    found = store.query_message(topic, key, 64, 0, FAR_FUTURE_MS)
    out = []
    for raw in found.records:
        rec = _parse(raw, 0, None)
        assert rec is not None, "the index led to bytes that are not a valid record"
        if key in (rec.props.get("KEYS"), rec.props.get("UNIQ_KEY")):
            out.append(rec)
    return out


def check_consistent(
    store: MessageStore,
    *,
    index_sample: int | None = None,
    rng: random.Random | None = None,
    check_index_of: Iterable[Rec] | None = None,
    garbled: Iterable[int] = (),
) -> list[Rec]:
    """Check the open store against its files; returns the records of the commit log.

    The commit log verifies up to the store's max offset and holds nothing after it; per
    queue, queue offsets run 0..n-1 in log order; the consume queues (in memory and on disk)
    hold exactly one entry per record, pointing at it, with its tags code, and nothing more;
    the queue-offset table continues each queue; the index finds records by key (all of
    them, ``index_sample`` of them, or those in ``check_index_of``) and has not indexed past
    the end. Records at the offsets in ``garbled`` had their properties changed on disk
    after they were dispatched: their entries' tags codes and their keys are not checked.
    """
    loose = set(garbled)

    def entry_of(rec: Rec, code: int) -> tuple[int, int, int]:
        return rec.offset, rec.size, code if rec.offset in loose else tags_code(rec)

    cfg = store.config
    root = cfg.root_dir
    fb = cfg.commit_log_file_bytes
    recs, end = walk_log(root, fb)
    assert store.commit_log.max_offset == end, (
        f"store ends at {store.commit_log.max_offset}, valid data at {end}"
    )
    # nothing but zeros after the end
    for start, data in log_bytes(root).items():
        if start + fb > end:
            tail = data[max(0, end - start) :]
            assert tail.count(0) == len(tail), f"bytes past the end {end} in segment {start}"
    per_queue = queue_records(recs)
    for (topic, queue_id), rs in per_queue.items():
        assert [r.queue_offset for r in rs] == list(range(len(rs))), (
            f"{topic}-{queue_id}: queue offsets in the log are not 0..{len(rs) - 1}"
        )
    # in memory
    seen = set()
    for cq in store.queues:
        key = (cq.topic, cq.queue_id)
        seen.add(key)
        rs = per_queue.get(key, [])
        assert cq.min_offset == 0
        assert cq.max_offset == len(rs), f"{key}: max offset {cq.max_offset}, {len(rs)} records"
        assert store.get_max_offset(*key) == len(rs)
        entries = list(cq.entries(0, len(rs) + 1))
        assert [k for k, _e in entries] == list(range(len(rs)))
        for (k, (offset, size, code)), rec in zip(entries, rs, strict=True):
            assert (offset, size, code) == entry_of(rec, code), (
                f"{key} entry {k} = {(offset, size, code)} does not point at its record "
                f"{entry_of(rec, code)}"
            )
    assert set(per_queue) <= seen, f"queues without a consume queue: {set(per_queue) - seen}"
    assert store.commit_log.queue_offsets == {
        f"{t}-{q}": len(rs) for (t, q), rs in per_queue.items()
    }
    # on disk
    for key, data in consume_queue_bytes(root).items():
        rs = per_queue.get(key, [])
        for k, rec in enumerate(rs):
            got = CQ_UNIT.unpack_from(data, k * CQ_UNIT.size)
            assert got == entry_of(rec, got[2]), f"{key}: entry {k} on disk is {got}"
        rest = data[len(rs) * CQ_UNIT.size :]
        assert rest.count(0) == len(rest), f"{key}: entries past the last record on disk"
    # index
    assert store.index is not None
    assert store.index.max_phy_offset <= end
    if check_index_of is not None:
        sample = list(check_index_of)
    elif index_sample is None or len(recs) <= index_sample:
        sample = recs
    else:
        sample = (rng or random.Random(0)).sample(recs, index_sample)
    for rec in sample:
        if rec.offset in loose:
            continue  # its keys may be garbled
        for text in (rec.props["KEYS"], rec.props["UNIQ_KEY"]):
            found = query_records(store, rec.topic, text)
            assert rec in found, (
                f"query {rec.topic}#{text} does not find the record at {rec.offset}"
            )
    return recs


def check_bodies(recs: Iterable[Rec]) -> dict[int, Rec]:
    """Every record holds an intact crash_writer body that names its own topic and queue,
    each sequence number once, in increasing order through the log; seq -> record."""
    by_seq: dict[int, Rec] = {}
    last = -1
    for rec in recs:
        body = parse_body(rec.body)
        assert body is not None, f"torn or foreign body at commit-log offset {rec.offset}"
        assert (body.topic, body.queue_id) == (rec.topic, rec.queue_id)
        assert body.seq not in by_seq, f"message {body.seq} is stored twice"
        assert body.seq > last, f"message {body.seq} after {last}: not in sequence order"
        assert rec.props["KEYS"] == message_key(body.seq)
        by_seq[body.seq] = rec
        last = body.seq
    return by_seq


async def put_and_read_back(store: MessageStore, seqs: Iterable[int], recs: list[Rec]) -> list[int]:
    """Put messages ``seqs`` into a store whose log holds ``recs``: each gets the next queue
    offset of its queue, the first lands right after the end, and they read back by pull and
    by key. Returns the seqs."""
    counts = Counter((r.topic, r.queue_id) for r in recs)
    fb = store.config.commit_log_file_bytes
    end = store.commit_log.max_offset
    placed: dict[int, int] = {}  # seq -> queue offset
    for seq in seqs:
        msg = make_message(seq)
        result = await store.put_message(msg)
        assert result.status is PutMessageStatus.PUT_OK
        assert result.append is not None
        key = (msg.topic, msg.queue_id)
        assert result.append.queue_offset == counts[key], f"new message {seq} in {key}"
        if not placed:  # right after the end, or at the next segment if it does not fit
            fits = end % fb + result.append.wrote_bytes + 8 <= fb
            assert result.append.commit_log_offset == (end if fits else end - end % fb + fb)
        placed[seq] = counts[key]
        counts[key] += 1
    await wait_dispatched(store, timeout_s=10.0)
    for seq, queue_offset in placed.items():
        topic, queue_id = route(seq)
        got = store.get_messages(topic, queue_id, queue_offset, 1)
        try:
            assert got.status is GetMessageStatus.FOUND, f"{seq}: {got.status}"
            rec = _parse(got.to_bytes(), 0, None)
        finally:
            got.release()
        assert rec is not None
        body = parse_body(rec.body)
        assert body is not None and body.seq == seq
        assert [r.body for r in query_records(store, topic, message_key(seq))] == [rec.body]
    return list(placed)


# ================================================================================ kill -9


@dataclass(slots=True)
class Child:
    proc: asyncio.subprocess.Process
    out: Path
    err: Path

    def lines(self) -> list[str]:
        text = self.out.read_bytes().decode()
        return text.split("\n")[:-1]  # a line without its newline was not written yet

    def acked(self) -> set[int]:
        return {int(line) for line in self.lines() if line.isdigit()}

    def ready(self) -> bool:
        return "ready" in self.lines()

    def stderr(self) -> str:
        return self.err.read_bytes().decode(errors="replace")[-4000:]


def _open_outputs(out: Path, err: Path) -> tuple[int, int]:
    return (
        os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    )


async def start_writer(
    root: Path, mode: FlushDiskType, first: int, logs: Path, *, seconds: float = 20.0
) -> Child:
    out, err = logs / f"writer-{first}.out", logs / f"writer-{first}.err"
    out_fd, err_fd = _open_outputs(out, err)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.crash_writer",
            str(root),
            mode.value,
            "--first",
            str(first),
            "--count",
            str(MILLION // 2),
            "--seconds",
            str(seconds),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_fd,
            stderr=err_fd,
            cwd=REPO_ROOT,
        )
    finally:
        os.close(out_fd)
        os.close(err_fd)
    return Child(proc, out, err)


async def kill_at_random(child: Child, rng: random.Random, *, early: bool) -> bool:
    """SIGKILL the child (its own PID only) at a random moment: ``early`` counts from the
    spawn (the kill may land during startup or recovery), otherwise from "ready", 50-600 ms
    into the writing. Returns whether it was killed (False: it had exited by itself)."""
    if early:
        await asyncio.sleep(rng.uniform(0.0, 0.3))
    else:
        async with asyncio.timeout(30):
            while not child.ready():
                assert child.proc.returncode is None, f"writer died: {child.stderr()}"
                await asyncio.sleep(0.005)
        await asyncio.sleep(rng.uniform(0.05, 0.6))
    killed = False
    if child.proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.proc.pid, signal.SIGKILL)
            killed = True
    async with asyncio.timeout(30):
        code = await child.proc.wait()
    if killed and code != -signal.SIGKILL:
        killed = False  # it exited just before the signal
    assert killed or code == 0, f"writer exited with {code}: {child.stderr()}"
    return killed


@dataclass(slots=True)
class KillStats:
    kills: int = 0
    early_kills: int = 0
    acked: int = 0
    lost_acked: int = 0  # ASYNC_FLUSH only; SYNC_FLUSH asserts it stays 0
    verified: int = 0
    recovered_abnormally: int = 0
    rounds: list[str] = field(default_factory=list)


async def verify_after_kill(
    root: Path,
    mode: FlushDiskType,
    acked: set[int],
    runs: list[int],
    *,
    strict: bool,
    rng: random.Random,
    stats: KillStats,
    new_first: int,
) -> None:
    """Open the store in-process after kills and check it (see the kill tests)."""
    async with MessageStore(store_config(root, mode)) as store:
        stats.recovered_abnormally += not store.last_exit_ok
        recs = check_consistent(store, index_sample=100, rng=rng)
        by_seq = check_bodies(recs)
        if strict:
            missing = sorted(acked - by_seq.keys())
            assert not missing, f"{len(missing)} acknowledged messages lost: {missing[:10]}"
            for seq in rng.sample(sorted(acked), min(100, len(acked))):
                rec = by_seq[seq]
                assert rec in query_records(store, rec.topic, uniq_key(seq))
        else:
            stats.lost_acked += len(acked - by_seq.keys())
        # Each writer run's messages are a prefix of what it sent: first..first+m-1 (the
        # messages put in-process after a check are numbered from first + MILLION // 2).
        for first in runs:
            mine = sorted(s for s in by_seq if first <= s < first + MILLION // 2)
            assert mine == list(range(first, first + len(mine))), (
                f"run {first}: messages missing in the middle"
            )
        new = await put_and_read_back(store, range(new_first, new_first + 5), recs)
        acked.update(new)
    stats.verified += 1


async def kill_rounds(
    tmp_path: Path,
    mode: FlushDiskType,
    *,
    seed: int,
    rounds: int,
    chain: int,
    budget_s: float,
    strict: bool,
) -> KillStats:
    """``rounds`` writer runs, each killed at a random point. Every ``chain`` runs share a
    store directory: the first starts fresh; after the second-to-last run of a chain the
    store is not opened in between, so the next writer recovers a crashed store itself;
    after every other run the store is opened in-process, checked and shut down cleanly."""
    rng = random.Random(seed)  # the schedule: which kills are early, when they land
    sample_rng = random.Random(seed + 1)  # what to spot-check (draws vary with the acks)
    stats = KillStats()
    logs = tmp_path / "logs"
    logs.mkdir()
    deadline = time.monotonic() + budget_s
    root = tmp_path
    acked: set[int] = set()
    runs: list[int] = []
    for i in range(rounds):
        if time.monotonic() > deadline:
            break
        if i % chain == 0:
            root = tmp_path / f"store-{i}"
            acked, runs = set(), []
        first = i * MILLION
        runs.append(first)
        early = rng.random() < 0.2
        child = await start_writer(root, mode, first, logs)
        try:
            killed = await kill_at_random(child, rng, early=early)
        finally:
            if child.proc.returncode is None:  # the test failed before the kill
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.proc.pid, signal.SIGKILL)
                await child.proc.wait()
        got = child.acked()
        assert got <= set(range(first, first + MILLION))
        acked |= got
        stats.kills += killed
        stats.early_kills += killed and early
        stats.acked += len(got)
        stats.rounds.append(f"{i}:{'early' if early else 'late'}:{len(got)}")
        if i % chain == chain - 2 and i + 1 < rounds:
            continue
        try:
            await verify_after_kill(
                root,
                mode,
                acked,
                runs,
                strict=strict,
                rng=sample_rng,
                stats=stats,
                new_first=first + MILLION // 2,
            )
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, round {i} ({root.name}): {exc}") from exc
    return stats


@pytest.mark.slow
async def test_sync_flush_kill9_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """SYNC_FLUSH, SIGKILL at 24 random points (fresh stores and recovered ones): every
    message acknowledged before the kill is back, intact, once; queues and index agree with
    the log; the store takes new writes."""
    stats = await kill_rounds(
        tmp_path,
        FlushDiskType.SYNC_FLUSH,
        seed=0x5EED_0001,
        rounds=24,
        chain=3,
        budget_s=75,
        strict=True,
    )
    print(f"\nSYNC_FLUSH kill -9: {stats}")
    assert stats.kills >= 20, f"only {stats.kills} kills within the time budget"
    assert stats.acked > 1000
    assert stats.recovered_abnormally >= stats.verified // 2


async def test_async_flush_kill9_recovers_a_consistent_prefix(tmp_path: Path) -> None:
    """ASYNC_FLUSH, a few SIGKILLs: what comes back is a gap-free prefix of each run with
    consistent consume queues and index (nothing acknowledged is promised)."""
    stats = await kill_rounds(
        tmp_path,
        FlushDiskType.ASYNC_FLUSH,
        seed=0x5EED_0002,
        rounds=5,
        chain=3,
        budget_s=20,
        strict=False,
    )
    print(f"\nASYNC_FLUSH kill -9: {stats}")
    assert stats.kills >= 4
    assert stats.verified >= 2


# ============================================================================ torn tails

PRISTINE_COUNT = 240


def segment_4k_config(root: Path) -> StoreConfig:
    """ASYNC_FLUSH with 4 KiB commit-log segments (the pristine store's; not conftest's
    tiny_config, whose sizes differ)."""
    return store_config(root, FlushDiskType.ASYNC_FLUSH, commit_log_file_bytes=4096)


async def write_store(cfg: StoreConfig, seqs: Iterable[int], *, batch_every: int = 0) -> None:
    """Put messages into the store and shut it down cleanly."""
    seq_list = list(seqs)
    async with MessageStore(cfg) as store:
        i = 0
        n = 0
        while i < len(seq_list):
            n += 1
            if batch_every and n % batch_every == 0 and i + BATCH_SIZE <= len(seq_list):
                result = await store.put_messages(make_batch(seq_list[i], BATCH_SIZE))
                i += BATCH_SIZE
            else:
                result = await store.put_message(make_message(seq_list[i]))
                i += 1
            assert result.status is PutMessageStatus.PUT_OK


@pytest.fixture
async def pristine(tmp_path: Path) -> tuple[Path, list[Rec]]:
    """A cleanly shut-down store of PRISTINE_COUNT messages (some in batches) over about
    twenty 4 KiB segments, and its records."""
    root = tmp_path / "pristine"
    await write_store(segment_4k_config(root), range(PRISTINE_COUNT), batch_every=5)
    recs, _end = walk_log(root, 4096)
    assert len(recs) == PRISTINE_COUNT
    assert len(segment_files(root)) >= 10
    assert not (root / "abort").exists()
    return root, recs


def copy_store(src: Path, dst: Path, *, abort: bool) -> StoreConfig:
    shutil.copytree(src, dst)
    if abort:
        (dst / "abort").touch()
    return segment_4k_config(dst)


def torn_contents(root: Path) -> list[bytes]:
    torn = root / "torn"
    if not torn.exists():
        return []
    return [p.read_bytes() for p in sorted(torn.iterdir())]


def expected_torn(before: dict[int, bytes], end: int, file_bytes: int) -> list[bytes]:
    """The non-zero bytes recovery must save: each segment's data from the end on, without
    trailing zeros (recovery cuts zeros it finds there anyway)."""
    out = []
    for start, data in sorted(before.items()):
        if start + file_bytes > end:
            tail = data[max(0, end - start) :].rstrip(b"\0")
            if tail:
                out.append(tail)
    return out


def expected_end(
    recs: list[Rec], before: dict[int, bytes], after: dict[int, bytes], old_end: int
) -> int:
    """Where recovery must stop once segment bytes ``before`` became ``after`` (§2.4).

    A record with a changed byte before its PROPERTIES ends the valid data: the bytes
    recovery checks (magic, lengths, PHYSICALOFFSET, body CRC) are changed with it or after it
    (the damage runs on to the end of the segment or of the garbage, or it is a body byte). A
    record changed only inside PROPERTIES verifies all the same (the CRC covers the body
    alone; Java decodes any bytes), so it is kept and the walk goes on.
    """
    fb = len(next(iter(before.values())))
    for rec in recs:
        start = rec.offset - rec.offset % fb
        old = before[start][rec.offset - start : rec.end - start]
        new = after[start][rec.offset - start : rec.end - start]
        if old == new:
            continue
        first_change = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
        if rec.offset + first_change < rec.props_start:
            return rec.offset
    return old_end


def damage(
    kind: str, recs: list[Rec], before: dict[int, bytes], rng: random.Random, first_segment: int
) -> tuple[int, bytes]:
    """A damaged copy of one segment: (its start, its new bytes).

    - ``zero``: zeros from a random byte to the segment end (a torn write into the
      preallocated last segment): mostly inside its last records, sometimes at a record
      boundary, sometimes past the last record (nothing is lost).
    - ``garbage``: 1-600 random bytes from such a position (a garbled or appended tail).
    - ``flip``: one byte of a random record's body, in segment ``first_segment`` or later.
    """
    fb = len(next(iter(before.values())))
    starts = sorted(before)
    if kind == "flip":
        rec = rng.choice([r for r in recs if r.offset >= starts[first_segment]])
        start = rec.offset - rec.offset % fb
        data = bytearray(before[start])
        pos = rec.body_start - start + rng.randrange(len(rec.body))
        data[pos] ^= rng.randrange(1, 256)
        return start, bytes(data)
    start = starts[-1]
    last = [r for r in recs if r.offset >= start]
    old_end = recs[-1].end
    roll = rng.random()
    if roll < 0.15:
        p = rng.choice(last).offset
    elif roll < 0.3:
        p = rng.randrange(old_end, start + fb)
    else:
        p = rng.randrange(last[max(0, len(last) - 4)].offset, old_end)
    rel = p - start
    old = before[start]
    if kind == "zero":
        return start, old[:rel] + bytes(fb - rel)
    assert kind == "garbage"
    junk = rng.randbytes(min(rng.randint(1, 600), fb - rel))
    return start, old[:rel] + junk + old[rel + len(junk) :]


TORN_ROUNDS = 16


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("kind", ["zero", "garbage", "flip"])
async def test_damaged_tail_is_cut_saved_and_rebuilt(
    pristine: tuple[Path, list[Rec]], tmp_path: Path, kind: str, abort: bool
) -> None:
    """Damage a cleanly shut-down store's commit log at random places, reopen (normally, or
    abnormally with an ``abort`` file): recovery stops at the last valid record before the
    damage, consume queues and index hold nothing past it, the cut bytes are saved under
    torn/, and new messages go right after the end with the next queue offsets."""
    src, recs = pristine
    fb = 4096
    before = log_bytes(src)
    old_end = recs[-1].end
    by_offset = {r.offset: r for r in recs}
    rng = random.Random(f"{kind}-{abort}")
    for i in range(TORN_ROUNDS):
        root = tmp_path / f"case-{i}"
        cfg = copy_store(src, root, abort=abort)
        # Normal recovery verifies the last three segments; abnormal from the checkpoint's.
        first_segment = abnormal_start_index(root) if abort else max(0, len(before) - 3)
        start, data = damage(kind, recs, before, rng, first_segment)
        (root / "commitlog" / f"{start:020d}").write_bytes(data)
        after = {**before, start: data}
        want_end = expected_end(recs, before, after, old_end)
        try:
            async with MessageStore(cfg) as store:
                assert store.last_exit_ok is not abort
                end = store.commit_log.max_offset
                assert end == want_end, f"recovered end {end}, expected {want_end}"
                garbled = [r.offset for r in recs if r.end <= end and not after_has(after, r, fb)]
                kept = check_consistent(store, garbled=garbled)
                assert [r.offset for r in kept] == [r.offset for r in recs if r.end <= end]
                for rec in kept:
                    old = by_offset[rec.offset]
                    assert (rec.topic, rec.queue_id, rec.queue_offset, rec.body) == (
                        old.topic,
                        old.queue_id,
                        old.queue_offset,
                        old.body,
                    )
                saved = torn_contents(root)
                for tail in expected_torn(after, end, fb):
                    assert tail in saved, f"cut bytes from {end} were not saved under torn/"
                if not expected_torn(after, end, fb):
                    assert saved == []
                for rec in recs:
                    if rec.offset >= end:
                        body = parse_body(rec.body)
                        assert body is not None
                        assert query_records(store, rec.topic, message_key(body.seq)) == []
                await put_and_read_back(store, range(MILLION + 10 * i, MILLION + 10 * i + 6), kept)
            # A normal restart of the recovered store changes nothing.
            async with MessageStore(cfg) as store:
                assert store.last_exit_ok
                assert len(check_consistent(store, garbled=garbled)) == len(kept) + 6
            assert torn_contents(root) == saved
        except AssertionError as exc:
            raise AssertionError(f"{kind}/{'abort' if abort else 'clean'} case {i}: {exc}") from exc
        shutil.rmtree(root)


def after_has(after: dict[int, bytes], rec: Rec, fb: int) -> bool:
    """Whether ``rec`` is byte for byte still in the damaged segments."""
    start = rec.offset - rec.offset % fb
    return _parse(after[start], rec.offset - start, rec.offset) == rec


# ==================================================================== rebuilt from the log


def consume_queue_files(root: Path) -> dict[str, bytes]:
    cq_root = root / "consumequeue"
    return {
        str(p.relative_to(cq_root)): p.read_bytes()
        for p in sorted(cq_root.rglob("*"))
        if p.is_file()
    }


def all_queries(store: MessageStore, recs: list[Rec]) -> dict[tuple[str, str], list[int]]:
    out = {}
    for rec in recs:
        for key in (rec.props["KEYS"], rec.props["UNIQ_KEY"]):
            out[rec.topic, key] = sorted(r.offset for r in query_records(store, rec.topic, key))
    return out


@pytest.mark.parametrize(
    ("lost", "abort"),
    [
        (("consumequeue", "index"), False),
        (("consumequeue", "index"), True),
        (("consumequeue",), False),
        (("index",), False),
        (("index",), True),
    ],
    ids=["both", "both-abort", "queues", "index", "index-abort"],
)
async def test_deleted_queues_and_index_are_rebuilt_identically(
    pristine: tuple[Path, list[Rec]], tmp_path: Path, lost: tuple[str, ...], abort: bool
) -> None:
    """Delete every consume-queue directory and/or the index of a closed store: reopening
    rebuilds them from the commit log, the consume-queue files byte for byte, the index so
    that every key query answers as before."""
    src, recs = pristine
    root = tmp_path / "store"
    cfg = copy_store(src, root, abort=False)
    files_before = consume_queue_files(root)
    assert len(files_before) >= 8
    async with MessageStore(cfg) as store:
        queries_before = all_queries(store, recs)
    assert all(queries_before.values())
    for name in lost:
        shutil.rmtree(root / name)
    if abort:
        (root / "abort").touch()
    async with MessageStore(cfg) as store:
        assert check_consistent(store) == recs
        assert all_queries(store, recs) == queries_before
    assert consume_queue_files(root) == files_before
    assert torn_contents(root) == []


# ============================================================ queues ahead of the log


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize(
    "cut", ["zero-last-records", "drop-last-segment", "drop-two-segments", "drop-all"]
)
async def test_consume_queues_ahead_of_a_cut_log_are_truncated(
    pristine: tuple[Path, list[Rec]], tmp_path: Path, cut: str, abort: bool
) -> None:
    """Cut the commit log of a closed store behind its consume queues and index (records
    zeroed, trailing segments or all of them gone): reopening cuts every queue back to the
    log, so no entry points at or past its end, and queue offsets are reused from there."""
    src, recs = pristine
    fb = 4096
    root = tmp_path / "store"
    cfg = copy_store(src, root, abort=abort)
    files = segment_files(root)
    if cut == "zero-last-records":
        end = recs[-9].offset
        start = end - end % fb
        seg = root / "commitlog" / f"{start:020d}"
        data = seg.read_bytes()
        seg.write_bytes(data[: end - start] + bytes(fb - (end - start)))
        for path in files:
            if int(path.name) > start:
                path.unlink()
    elif cut == "drop-all":
        shutil.rmtree(root / "commitlog")
        end = 0
    else:
        gone = files[-2:] if cut == "drop-two-segments" else files[-1:]
        end = int(gone[0].name)
        for path in gone:
            path.unlink()
    queues_before = consume_queue_bytes(root)
    old_max = {key: len(data.rstrip(b"\0")) // 20 for key, data in queues_before.items()}
    kept_count = sum(1 for r in recs if r.end <= end)
    async with MessageStore(cfg) as store:
        assert store.commit_log.max_offset == end
        kept = check_consistent(store)
        assert [r.offset for r in kept] == [r.offset for r in recs][:kept_count]
        kept_per_queue = Counter((r.topic, r.queue_id) for r in kept)
        assert any(old_max[key] > kept_per_queue[key] for key in old_max)
        for (topic, queue_id), was in old_max.items():
            now = kept_per_queue[topic, queue_id]
            assert store.get_max_offset(topic, queue_id) == now
            if was > now:
                got = store.get_messages(topic, queue_id, was - 1, 1)
                assert got.status is not GetMessageStatus.FOUND
                got.release()
        await put_and_read_back(store, range(MILLION, MILLION + 12), kept)
    assert torn_contents(root) == []
    async with MessageStore(cfg) as store:
        assert store.last_exit_ok
        assert len(check_consistent(store)) == kept_count + 12


@pytest.mark.parametrize(
    "torn",
    [(12, 20), (16, 20)],  # the codes here fit in 32 bits: their high half is zeros anyway
    ids=["no-tags-code", "low-half-of-the-tags-code"],
)
async def test_a_consume_queue_entry_torn_by_a_kill_is_written_again(
    pristine: tuple[Path, list[Rec]], tmp_path: Path, torn: tuple[int, int]
) -> None:
    """kill -9 can land inside the write of a consume-queue entry: its offset and size are
    there, some bytes of its tags code are not (zeros). Such an entry looks whole to a scan,
    so after a crash recovery writes the entries of the records it re-dispatches again
    rather than keep what it finds: every queue's last entry, torn that way, comes back
    with its record's tags code."""
    src, recs = pristine
    root = tmp_path / "store"
    cfg = copy_store(src, root, abort=True)
    last_of = {(r.topic, r.queue_id): r for r in recs}
    tore = 0
    for (topic, queue_id), rec in last_of.items():
        queue_dir = root / "consumequeue" / topic / str(queue_id)
        segments = sorted(queue_dir.iterdir())
        queue_offset = rec.queue_offset
        segment_bytes = segments[0].stat().st_size
        seg = queue_dir / f"{queue_offset * 20 - queue_offset * 20 % segment_bytes:020d}"
        data = bytearray(seg.read_bytes())
        at = queue_offset * 20 % segment_bytes
        assert CQ_UNIT.unpack_from(data, at)[:2] == (rec.offset, rec.size)
        if data[at + torn[0] : at + torn[1]] != bytes(torn[1] - torn[0]):
            data[at + torn[0] : at + torn[1]] = bytes(torn[1] - torn[0])
            seg.write_bytes(bytes(data))
            tore += 1
    assert tore > 0, "no entry had a tags code to tear"
    async with MessageStore(cfg) as store:
        assert not store.last_exit_ok
        assert len(check_consistent(store)) == len(recs)


# =========================================================================== clean restart


async def test_clean_shutdown_leaves_no_abort_and_restart_loses_nothing(tmp_path: Path) -> None:
    """ASYNC_FLUSH, clean shutdown: ``abort`` exists only while the store runs, the checkpoint
    holds the last record's store time, and restarts are normal recoveries that find every
    message and change no byte of the commit log or consume queues."""
    root = tmp_path / "store"
    cfg = segment_4k_config(root)
    async with MessageStore(cfg) as store:
        assert (root / "abort").exists()
        for seq in range(150):
            result = await store.put_message(make_message(seq))
            assert result.status is PutMessageStatus.PUT_OK
        result = await store.put_messages(make_batch(150, BATCH_SIZE))
        assert result.status is PutMessageStatus.PUT_OK
    assert not (root / "abort").exists()
    recs, _end = walk_log(root, 4096)
    assert [parse_body(r.body) is not None for r in recs] == [True] * (150 + BATCH_SIZE)
    physic, logics, _index = read_checkpoint(root)
    assert physic == logics == recs[-1].store_timestamp
    log_before, queues_before = log_bytes(root), consume_queue_files(root)
    for _ in range(2):
        async with MessageStore(cfg) as store:
            assert store.last_exit_ok
            assert (root / "abort").exists()
            assert check_consistent(store) == recs
            check_bodies(recs)
        assert not (root / "abort").exists()
    assert log_bytes(root) == log_before
    assert consume_queue_files(root) == queues_before
    assert torn_contents(root) == []


async def test_restarts_do_not_index_the_last_record_again(tmp_path: Path) -> None:
    """Every restart re-dispatches from where the index got to; the record the index ended
    with must not be entered again, or each restart adds one more copy of it to the
    answers of QUERY_MESSAGE."""
    root = tmp_path / "store"
    cfg = segment_4k_config(root)
    await write_store(cfg, range(20))
    for restart in range(3):
        async with MessageStore(cfg) as store:
            recs = check_consistent(store)
            for rec in recs[-3:]:
                for text in (rec.props["KEYS"], rec.props["UNIQ_KEY"]):
                    found = [r.offset for r in query_records(store, rec.topic, text)]
                    assert found == [rec.offset], f"restart {restart + 1}: {text} -> {found}"


def _newest_index_name(root: Path) -> str:
    names = sorted(p.name for p in (root / "index").iterdir())
    newest = names[-1]
    # the next millisecond: named as the store would name a file created after it
    return f"{int(newest) + 1:017d}"


@pytest.mark.parametrize("size", [0, 100], ids=["empty", "short"])
@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index"])
async def test_crash_while_creating_a_file_does_not_stop_the_store(
    pristine: tuple[Path, list[Rec]], tmp_path: Path, kind: str, size: int
) -> None:
    """A kill between creating a segment (or index) file and preallocating it leaves a file
    shorter than its fixed size, after every record of the store. Nothing was ever written
    into it, so the crashed store must open, lose nothing, and go on writing."""
    src, recs = pristine
    root = tmp_path / "store"
    cfg = copy_store(src, root, abort=True)
    if kind == "commitlog":
        path = root / "commitlog" / f"{int(segment_files(root)[-1].name) + 4096:020d}"
    elif kind == "consumequeue":
        queue_dir = root / "consumequeue" / "CrashA" / "1"
        last = max(int(p.name) for p in queue_dir.iterdir())
        path = queue_dir / f"{last + 320:020d}"
    else:
        path = root / "index" / _newest_index_name(root)
    path.write_bytes(bytes(size))
    async with MessageStore(cfg) as store:
        assert check_consistent(store) == recs
        await put_and_read_back(store, range(MILLION, MILLION + 40), recs)
    async with MessageStore(cfg) as store:
        assert len(check_consistent(store)) == len(recs) + 40


@pytest.mark.parametrize(
    ("which", "abort", "lost"),
    [
        ("last", False, ()),
        ("last", True, ()),
        ("middle", False, ("consumequeue", "index")),
        ("middle", True, ()),
    ],
    ids=["last-normal", "last-abnormal", "middle-rebuilt", "middle-abnormal"],
)
async def test_record_with_undecodable_properties_is_kept(
    pristine: tuple[Path, list[Rec]],
    tmp_path: Path,
    which: str,
    abort: bool,
    lost: tuple[str, ...],
) -> None:
    """PROPERTIES bytes that are not UTF-8 (a garbled tail the body CRC cannot see) leave a
    record that verifies by §2.4 (RocketMQ decodes such bytes with replacement characters).
    Recovery keeps it, dispatch enters it when it (re)builds queues and index, and the store
    opens."""
    src, recs = pristine
    fb = 4096
    root = tmp_path / "store"
    cfg = copy_store(src, root, abort=abort)
    rec = recs[-1] if which == "last" else recs[-6]
    seg = root / "commitlog" / f"{rec.offset - rec.offset % fb:020d}"
    data = bytearray(seg.read_bytes())
    rel = rec.props_start - (rec.offset - rec.offset % fb)
    data[rel + 5 : rel + 12] = b"\xff" * 7  # inside the KEYS value
    seg.write_bytes(bytes(data))
    for name in lost:
        shutil.rmtree(root / name)
    async with MessageStore(cfg) as store:
        kept = check_consistent(store, garbled=[rec.offset])
        assert [r.offset for r in kept] == [r.offset for r in recs]
        await put_and_read_back(store, range(MILLION, MILLION + 6), kept)
    assert torn_contents(root) == []


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
@pytest.mark.parametrize("kind", ["commitlog", "consumequeue"])
async def test_crash_during_truncation_does_not_stop_the_store(
    tmp_path: Path, kind: str, abort: bool
) -> None:
    """Recovery cuts at the first bad record: it zeroes the rest of that file and deletes the
    files after it. A kill part-way through the deletions must not leave a store that cannot
    open (a gap in the file names): the next recovery finishes the cut and keeps exactly the
    valid prefix."""
    root = tmp_path / "store"
    cfg = dataclasses.replace(segment_4k_config(root), consume_queue_file_bytes=20 * 4)
    await write_store(cfg, range(160))
    recs, _end = walk_log(root, 4096)
    files = segment_files(root)
    cut_index = len(files) // 3
    seg = files[cut_index]
    start = int(seg.name)
    end = next(r.offset for r in recs if r.offset > start)  # the second record of seg
    # What a recovery killed after its first deletion leaves behind:
    seg.write_bytes(seg.read_bytes()[: end - start] + bytes(4096 - (end - start)))
    if kind == "commitlog":
        files[cut_index + 1].unlink()  # ... and the later segments still there
    else:
        for path in files[cut_index + 1 :]:
            path.unlink()
        # one consume queue cut back to the log, its next file deleted, the rest left
        queue_dir = root / "consumequeue" / "CrashA" / "1"
        cq_files = sorted(queue_dir.iterdir())
        assert len(cq_files) >= 4
        data = b"".join(p.read_bytes() for p in cq_files)
        k = next(i for i in range(len(data) // 20) if CQ_UNIT.unpack_from(data, i * 20)[0] >= end)
        first = cq_files[k * 20 // 80]
        keep = data[(k * 20 // 80) * 80 : k * 20]
        first.write_bytes(keep + bytes(80 - len(keep)))
        assert len(cq_files) > k * 20 // 80 + 2
        cq_files[k * 20 // 80 + 1].unlink()
    if abort:
        (root / "abort").touch()
    async with MessageStore(cfg) as store:
        kept = check_consistent(store)
        assert [r.offset for r in kept] == [r.offset for r in recs if r.end <= end]
        await put_and_read_back(store, range(MILLION, MILLION + 12), kept)
    async with MessageStore(cfg) as store:
        assert len(check_consistent(store)) == len(kept) + 12
