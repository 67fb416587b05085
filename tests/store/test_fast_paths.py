"""The append and dispatch fast paths write exactly what the plain ones do.

A batch is encoded in one pass (``encode_batch_records``) and written with ``pwrite``, dispatch
enters appends from what the append knew (``DispatchService.dispatch_appended``) instead of
reading the records back, keys are hashed from bytes with cached heads, and consume-queue and
index entries are written several at a time. Each is checked against the plain path it
replaces, which stays in use for recovery: consume queues and index files against a store
that rebuilt them from the commit log, byte for byte. The codec's own fast paths (batch
records against ``encode_record`` + ``patch_append_fields``, hashes from bytes, property
values, offset ids) are checked in tests/codec.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import store.commit_log as commit_log_module
from codec import MessageBatch, MessageInner, index_key_hash, index_key_hashes
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.index_file import IndexFile, index_key
from store.message_store import MessageStore
from store.results import PutMessageStatus
from tests.support import (
    BORN_HOST,
    BORN_HOST_V6,
    BORN_TIMESTAMP,
    STORE_HOST,
    STORE_HOST_V6,
    batch_body,
    properties_text,
    wait_dispatched,
)

# ------------------------------------------------------------------------------ hashing


def test_index_key_hashes_hash_the_store_index_key() -> None:
    """Dispatch hashes keys with ``index_key_hashes`` (tests/codec/test_hashing.py), a query
    hashes ``index_key``: the same key, the same slot."""
    keys = ["k1", "ключ", "", "0A0000071234ABCDEF0100000007002A", "x" * 300]
    got = index_key_hashes(b"TopicT", [k.encode() for k in keys])
    assert got == [index_key_hash(index_key("TopicT", k)) for k in keys]


# ------------------------------------------------------------------------- batch records


def test_batch_with_properties_too_long(make_config: Callable[..., StoreConfig]) -> None:
    """PROPERTIES_SIZE_EXCEEDED for properties over 32,767 bytes once joined with the batch
    ones, but MESSAGE_ILLEGAL when the batch does not even parse (it is checked first)."""
    store = MessageStore(make_config(commit_log_file_bytes=1 << 20, max_message_bytes=1 << 17))
    store.load()
    try:
        cl = store.commit_log
        long = b"K\x01" + b"v" * 32_700
        props = "X\x01" + "y" * 100
        too_long = MessageBatch(
            topic="T",
            queue_id=0,
            body=batch_body([(0, b"a", b""), (0, b"b", long), (0, b"c", long[:-9])]),
            properties=props,
        )
        result = cl.put_batch(too_long)
        assert result.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert result.remark == "properties of 32805 bytes exceed the 32 KB limit"
        broken = dataclasses.replace(too_long, body=bytes(too_long.body) + b"\x00\x00\x00")
        assert cl.put_batch(broken).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert cl.max_offset == 0
    finally:
        store._release_files()


# ------------------------------------------------------------------ queue and index files


def test_put_many_writes_what_put_writes(tmp_path: Path) -> None:
    """Consecutive entries, across a segment end, after a gap and with repeats."""
    fast = ConsumeQueue(tmp_path / "fast", "T", 0, 20 * 8)
    plain = ConsumeQueue(tmp_path / "plain", "T", 0, 20 * 8)
    for cq in (fast, plain):
        cq.files.directory.mkdir(parents=True)
    rng = random.Random(5)
    offset, queue_offset = 1000, 3  # the queue starts past 0: filler entries first
    last: tuple[list[int], list[int], list[int], int] | None = None
    for _ in range(40):
        if last is not None and rng.random() < 0.2:
            offsets, sizes, codes, at = last  # the same records again: all skipped
        else:
            n = rng.randrange(1, 7)
            sizes = [rng.randrange(100, 400) for _ in range(n)]
            offsets = [offset + sum(sizes[:i]) for i in range(n)]
            codes = [rng.randrange(-5, 5) for _ in range(n)]
            at = queue_offset
            offset = offsets[-1] + sizes[-1]
            queue_offset += n
        last = offsets, sizes, codes, at
        want = [
            plain.put(o, s, c, at + i)
            for i, (o, s, c) in enumerate(zip(offsets, sizes, codes, strict=True))
        ]
        assert fast.put_many(offsets, sizes, codes, at) == want
    assert [(mf.path.name, bytes(mf.view[: mf.wrote_position])) for mf in fast.files.files] == [
        (mf.path.name, bytes(mf.view[: mf.wrote_position])) for mf in plain.files.files
    ]
    assert fast.max_physic_offset == plain.max_physic_offset
    assert fast.min_logic_offset == plain.min_logic_offset
    fast.close()
    plain.close()


def test_index_put_hashes_writes_what_put_key_writes(tmp_path: Path) -> None:
    """Keys spread over slots that collide, into a file that fills up, from a file that took
    over its begin time from the previous one."""
    for prev_end in (0, 1_700_000_000_000 - 5_000):
        a = IndexFile(tmp_path / f"a{prev_end}", 7, 12, create=True, prev_end_timestamp=prev_end)
        b = IndexFile(tmp_path / f"b{prev_end}", 7, 12, create=True, prev_end_timestamp=prev_end)
        keys = [f"T#k{i}" for i in range(14)]
        hashes = [index_key_hash(k) for k in keys]
        offsets = [1000 + 10 * (i // 2) for i in range(len(keys))]  # two keys a record
        at = 0
        ts = 1_700_000_000_000
        while at < len(keys):
            stop = min(len(keys), at + 5)
            done = a.put_hashes(hashes, offsets, at, stop, ts)
            for i in range(at, done):
                assert b.put_key(keys[i], offsets[i], ts)
            if done < stop:
                assert not b.put_key(keys[done], offsets[done], ts)
                break
            at = done
            ts += 2_500
        assert done == 11  # 11 entries fit (entry 0 is never used)
        assert bytes(a._mm) == bytes(b._mm)
        a.destroy()
        b.destroy()


# ------------------------------------------------------------------------- whole stores


def _tree(root: Path, sub: str) -> list[tuple[str, bytes]]:
    """The files under ``root/sub`` in name order; index files by position (their names
    are creation times)."""
    files = sorted(p for p in (root / sub).rglob("*") if p.is_file())
    return [
        (str(p.relative_to(root)) if sub != "index" else f"index#{n}", p.read_bytes())
        for n, p in enumerate(files)
    ]


def _random_props(rng: random.Random, n: int) -> str:
    pairs = []
    if rng.random() < 0.5:
        pairs.append(("TAGS", rng.choice(["a", "b", "é", ""])))
    if rng.random() < 0.5:
        pairs.append(("KEYS", rng.choice(["k1", "k1 k2", " x  y ", "ключ", ""])))
    if rng.random() < 0.9:
        pairs.append(("UNIQ_KEY", f"0A0000071234ABCDEF01{n // 7:08X}{n:04X}"))
    if rng.random() < 0.1:
        pairs.append(("UNIQ_KEY", ""))
    return properties_text(pairs)


async def _fill(store: MessageStore, rng: random.Random, count: int) -> None:
    for n in range(count):
        topic = rng.choice(["T", "TopicB", "SCHEDULE_TOPIC_XXXX"])
        hosts = rng.choice([(BORN_HOST, STORE_HOST), (BORN_HOST_V6, STORE_HOST_V6)])
        if rng.random() < 0.4:
            await store.put_message(
                MessageInner(
                    topic=topic,
                    queue_id=rng.randrange(2),
                    body=rng.randbytes(rng.randrange(200)),
                    properties=_random_props(rng, n)
                    + rng.choice(["", "\x02DELAY\x013", "\x02TAGS\x01late"]),
                    sys_flag=rng.choice([0, 0, 0x4, 0x8, 0xC]),
                    born_timestamp=BORN_TIMESTAMP,
                    born_host=hosts[0],
                    store_host=hosts[1],
                )
            )
        else:
            entries = [
                (0, rng.randbytes(rng.randrange(150)), _random_props(rng, n * 40 + i).encode())
                for i in range(rng.randrange(1, 12))
            ]
            await store.put_messages(
                MessageBatch(
                    topic=topic,
                    queue_id=rng.randrange(2),
                    body=batch_body(entries),
                    properties=rng.choice(["", "CLUSTER\x01C", "KEYS\x01bk\x02TAGS\x01bt"]),
                    born_timestamp=BORN_TIMESTAMP,
                    born_host=hosts[0],
                    store_host=hosts[1],
                )
            )
        if rng.random() < 0.5:
            await asyncio.sleep(0)  # let dispatch run now and then, as between requests


@pytest.mark.parametrize("pending_cap", [4096, 1], ids=["appends", "mostly-read-back"])
async def test_dispatch_from_appends_writes_what_recovery_writes(
    make_config: Callable[..., StoreConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pending_cap: int,
) -> None:
    """Consume queues and index files built while appending are byte for byte those a
    store rebuilds from the commit log alone (its dispatch reads every record back)."""
    monkeypatch.setattr(commit_log_module, "MAX_PENDING_APPENDS", pending_cap)
    config = make_config(commit_log_file_bytes=16 * 1024, max_message_bytes=4096, max_index_num=40)
    rng = random.Random(11)
    entered_from_appends = 0
    async with MessageStore(config) as store:
        original = store.dispatch.dispatch_appended

        def counting(appended: commit_log_module.Appended) -> None:
            nonlocal entered_from_appends
            entered_from_appends += 1
            original(appended)

        monkeypatch.setattr(store.dispatch, "dispatch_appended", counting)
        await _fill(store, rng, 300)
        await wait_dispatched(store)
    assert entered_from_appends > (50 if pending_cap > 1 else 0)
    root = config.root_dir
    queues, index = _tree(root, "consumequeue"), _tree(root, "index")
    assert len(queues) > 8 and len(index) > 3
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(root / "commitlog", rebuilt / "commitlog")
    async with MessageStore(dataclasses.replace(config, root_dir=rebuilt)):
        pass
    assert _tree(rebuilt, "consumequeue") == queues
    assert _tree(rebuilt, "index") == index


def test_failed_batch_write_leaves_no_records(
    make_config: Callable[..., StoreConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose write fails halfway is refused, and what did land is zeroed: no record
    past the write position for a later recovery to take for part of the log."""
    config = make_config()
    store = MessageStore(config)
    store.load()
    try:
        cl = store.commit_log
        ok = cl.put_batch(_batch([b"a" * 10]))
        assert ok.append is not None
        end = cl.max_offset
        real_pwrite = os.pwrite

        def half_then_fail(fd: int, data: memoryview, offset: int) -> int:
            if len(data) > 200:
                return real_pwrite(fd, data[: len(data) // 2], offset)
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "pwrite", half_then_fail)
        failed = cl.put_batch(_batch([b"b" * 100, b"c" * 100, b"d" * 100]))
        assert failed.status is PutMessageStatus.UNKNOWN_ERROR
        assert failed.append is None
        assert cl.max_offset == end
        mf = cl.files.files[-1]
        assert bytes(mf.view[end - mf.start_offset : end - mf.start_offset + 600]) == bytes(600)
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        again = cl.put_batch(_batch([b"e"]))
        assert again.append is not None
        assert again.append.commit_log_offset == end
        assert again.append.queue_offset == 1
    finally:
        store._release_files()


def _batch(bodies: list[bytes]) -> MessageBatch:
    return MessageBatch(
        topic="T",
        queue_id=0,
        body=batch_body([(0, body, b"UNIQ_KEY\x01u") for body in bodies]),
        born_timestamp=BORN_TIMESTAMP,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )
