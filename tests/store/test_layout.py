"""Golden byte layouts: what the store leaves on disk, rebuilt by hand from the reference.

Every expected record is written out field by field from the table of docs/store-format.md
§2.2, each field packed on its own at its documented offset, and compared with the bytes read
back from the segment file on disk after a put. Likewise the END-OF-FILE blank (§2.1), the
consume-queue entry (§3), Java's ``String.hashCode`` tag codes (protocol.md §9.7), offset
msgIds (§11), batch bodies (§10), transaction types (§2.2, §15.3) and the put limits (§2.3).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from typing import NamedTuple

import pytest

from codec import Host, MessageBatch, java_hash, offset_msg_id
from store.config import StoreConfig
from store.message_store import MessageStore
from store.results import PutMessageStatus, PutResult
from tests.store.conftest import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    batch,
    drain,
    file_sizes,
    message,
    parse_record,
    read_commit_log,
    read_consume_queue,
    segment_names,
    walk_commit_log,
)
from tests.support import (
    BORN_HOST,
    BORN_HOST_V6,
    BORN_TIMESTAMP,
    MALFORMED_BATCHES,
    STORE_HOST,
    STORE_HOST_V6,
    batch_body,
    wait_dispatched,
)

SEGMENT = 4096
CQ_SEGMENT = 20 * 8


def _i(v: int) -> bytes:
    return struct.pack(">i", v)


def _q(v: int) -> bytes:
    return struct.pack(">q", v)


def _host(host: Host) -> bytes:
    return host[0] + struct.pack(">i", host[1])


def _ok(result: PutResult) -> PutResult:
    assert result.status is PutMessageStatus.PUT_OK, result
    assert result.append is not None
    return result


def _record_len(body: int, topic: int, props: int) -> int:
    """TOTALSIZE of an IPv4 record (store-format.md §2.2)."""
    return 91 + body + topic + props


# ------------------------------------------------------------------------ record layout


class Layout(NamedTuple):
    """Offsets of the fields that move with the V6 bits, as store-format.md §2.2 gives them."""

    born_v6: bool
    store_v6: bool
    store_timestamp: int
    store_host: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int
    body: int
    fixed_bytes: int  # TOTALSIZE = fixed_bytes + n + t + p
    v6_bits: int  # set in SYSFLAG by the store


LAYOUTS = [
    pytest.param(Layout(False, False, 56, 64, 72, 76, 84, 88, 91, 0x00), id="ipv4"),
    pytest.param(Layout(True, False, 68, 76, 84, 88, 96, 100, 103, 0x10), id="born-v6"),
    pytest.param(Layout(False, True, 56, 64, 84, 88, 96, 100, 103, 0x20), id="store-v6"),
    pytest.param(Layout(True, True, 68, 76, 96, 100, 108, 112, 115, 0x30), id="ipv6"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_record_golden_layout(
    make_config: Callable[..., StoreConfig], layout: Layout
) -> None:
    config = make_config()
    born_host = BORN_HOST_V6 if layout.born_v6 else BORN_HOST
    store_host = STORE_HOST_V6 if layout.store_v6 else STORE_HOST
    topic = "TopicTest"
    body = "golden body é".encode()
    uniq = "AC11000100002A9F0000000000000001"
    props = f"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01{uniq}"
    sys_flag = 0x8 | 0x2  # COMMIT transaction type, MULTI_TAGS
    async with MessageStore(config) as store:
        first = _ok(await store.put_message(message(topic, 3, b"first")))
        before_ms = time.time_ns() // 1_000_000
        put = _ok(
            await store.put_message(
                message(
                    topic,
                    3,
                    body,
                    tags="TagA",
                    keys="k1 k2",
                    uniq_key=uniq,
                    flag=0x5A5A,
                    sys_flag=sys_flag,
                    born_host=born_host,
                    store_host=store_host,
                    reconsume_times=3,
                    prepared_transaction_offset=4242,
                )
            )
        )
        after_ms = time.time_ns() // 1_000_000
    assert put.append is not None and first.append is not None
    phys = put.append.commit_log_offset
    assert phys == first.append.wrote_bytes
    store_ts = put.append.store_timestamp
    assert before_ms <= store_ts <= after_ms
    n, t, p = len(body), len(topic), len(props.encode())
    total = layout.fixed_bytes + n + t + p
    pos_body = layout.body
    assert put.append.wrote_bytes == total

    # (documented offset, field, bytes), one struct.pack per field
    fields: list[tuple[int, str, bytes]] = [
        (0, "TOTALSIZE", _i(total)),
        (4, "MAGICCODE", _i(-626843481)),
        (8, "BODYCRC", _i(zlib.crc32(body) & 0x7FFFFFFF)),
        (12, "QUEUEID", _i(3)),
        (16, "FLAG", _i(0x5A5A)),
        (20, "QUEUEOFFSET", _q(1)),
        (28, "PHYSICALOFFSET", _q(phys)),
        (36, "SYSFLAG", _i(sys_flag | layout.v6_bits)),
        (40, "BORNTIMESTAMP", _q(BORN_TIMESTAMP)),
        (48, "BORNHOST", _host(born_host)),
        (layout.store_timestamp, "STORETIMESTAMP", _q(store_ts)),
        (layout.store_host, "STOREHOST", _host(store_host)),
        (layout.reconsume_times, "RECONSUMETIMES", _i(3)),
        (layout.prepared_transaction_offset, "PREPARED TRANSACTION OFFSET", _q(4242)),
        (layout.body_length, "BODYLENGTH", _i(n)),
        (pos_body, "BODY", body),
        (pos_body + n, "TOPICLENGTH", struct.pack(">b", t)),
        (pos_body + n + 1, "TOPIC", topic.encode()),
        (pos_body + n + 1 + t, "PROPERTIESLENGTH", struct.pack(">h", p)),
        (pos_body + n + 3 + t, "PROPERTIES", props.encode()),
    ]
    # the documented offsets tile the record exactly
    end = 0
    for offset, name, raw in fields:
        assert offset == end, name
        end += len(raw)
    assert end == total

    stored = read_commit_log(config, phys, total)
    for offset, name, raw in fields:
        assert stored[offset : offset + len(raw)] == raw, name
    assert stored == b"".join(raw for _o, _n, raw in fields)
    # the preallocated rest of the segment is still zeros
    rest = read_commit_log(config, phys + total, SEGMENT - phys - total)
    assert rest == bytes(len(rest))


async def test_body_crc_is_java_crc32_with_sign_bit_cleared(store: MessageStore) -> None:
    assert zlib.crc32(b"a") == 0xE8B7BE43  # top bit set: the mask matters
    put = _ok(await store.put_message(message(body=b"a")))
    assert put.append is not None
    stored = read_commit_log(store.config, put.append.commit_log_offset, put.append.wrote_bytes)
    assert stored[8:12] == _i(0x68B7BE43)
    empty = _ok(await store.put_message(message(body=b"")))
    assert empty.append is not None
    stored = read_commit_log(store.config, empty.append.commit_log_offset, 12)
    assert stored[8:12] == _i(0)


# ------------------------------------------------------------------- blank END-OF-FILE


@pytest.mark.parametrize("delta", [-3, -1, 0, 1, 2, 9])
async def test_blank_record_when_a_record_does_not_fit(
    make_config: Callable[..., StoreConfig], delta: int
) -> None:
    """A record of length L fits in R remaining bytes only if L + 8 <= R; otherwise the rest
    of the segment becomes TOTALSIZE = R, BLANK magic, zeros, and the record moves on."""
    config = make_config()
    topic = "T"
    first_body = 1900
    l1 = _record_len(first_body, 1, 0)
    remaining = SEGMENT - l1
    l2 = remaining - 8 + delta
    second_body = l2 - _record_len(0, 1, 0)
    async with MessageStore(config) as store:
        _ok(await store.put_message(message(topic, 0, b"x" * first_body)))
        second = _ok(await store.put_message(message(topic, 0, b"y" * second_body)))
        third = _ok(await store.put_message(message(topic, 0, b"z" * 10)))
        await wait_dispatched(store)
        assert [len(r) for r in drain(store, topic, 0)] == [l1, l2, _record_len(10, 1, 0)]
    assert second.append is not None and third.append is not None
    seg0 = (config.root_dir / "commitlog" / f"{0:020d}").read_bytes()
    if delta <= 0:
        # fits: the second record directly follows; the third does not fit what is left
        assert second.append.commit_log_offset == l1
        blank_at, blank_size = l1 + l2, 8 - delta
    else:
        assert second.append.commit_log_offset == SEGMENT
        blank_at, blank_size = l1, remaining
    assert blank_at + blank_size == SEGMENT
    assert seg0[blank_at : blank_at + 4] == _i(blank_size)
    assert seg0[blank_at + 4 : blank_at + 8] == _i(BLANK_MAGIC)
    assert seg0[blank_at + 4 : blank_at + 8] == bytes.fromhex("CBD43194")
    assert seg0[blank_at + 8 :] == bytes(blank_size - 8)
    # the record that did not fit starts the next segment, named by its start offset
    moved = third if delta <= 0 else second
    assert moved.append is not None
    assert moved.append.commit_log_offset == SEGMENT
    assert segment_names(config.root_dir / "commitlog") == [f"{0:020d}", f"{SEGMENT:020d}"]
    seg1 = (config.root_dir / "commitlog" / f"{SEGMENT:020d}").read_bytes()
    assert len(seg1) == SEGMENT
    assert parse_record(seg1).physical_offset == SEGMENT


async def test_batch_that_does_not_fit_moves_whole_to_the_next_segment(
    store: MessageStore,
) -> None:
    config = store.config
    _ok(await store.put_message(message("T", 0, b"x" * 1900)))
    entries = [(0, b"b" * 380, b"") for _ in range(5)]  # 2.3 KiB of records: more than is left
    put = _ok(await store.put_messages(batch("T", 0, entries)))
    assert put.append is not None
    assert put.append.commit_log_offset == SEGMENT
    assert put.append.msg_num == 5
    await wait_dispatched(store)
    walked = list(walk_commit_log(config))
    assert [(off, rec is None) for off, rec, _size in walked] == [
        (0, False),
        (_record_len(1900, 1, 0), True),
        *[(SEGMENT + i * _record_len(380, 1, 0), False) for i in range(5)],
    ]


# ------------------------------------------------------------------------ segment files


async def test_segment_files_are_preallocated_and_named_by_offset(
    store: MessageStore,
) -> None:
    config = store.config
    cl_dir = config.root_dir / "commitlog"
    _ok(await store.put_message(message("T", 0, b"m")))
    # preallocated: full size (zeros past the record) as soon as it exists
    assert segment_names(cl_dir) == [f"{0:020d}"]
    assert file_sizes(cl_dir) == {SEGMENT}
    for i in range(60):  # ~1 KiB records: 15 segments
        _ok(await store.put_message(message("T", 0, b"m" * 1000, tags=f"t{i}")))
    await wait_dispatched(store)
    names = segment_names(cl_dir)
    assert len(names) > 10
    assert names == [f"{i * SEGMENT:020d}" for i in range(len(names))]
    assert all(len(n) == 20 for n in names)
    assert file_sizes(cl_dir) == {SEGMENT}
    cq_dir = config.root_dir / "consumequeue" / "T" / "0"
    cq_names = segment_names(cq_dir)
    assert cq_names == [f"{i * CQ_SEGMENT:020d}" for i in range(len(cq_names))]
    assert len(cq_names) == (61 + 7) // 8
    assert file_sizes(cq_dir) == {CQ_SEGMENT}
    assert store.get_max_offset("T", 0) == 61


# ----------------------------------------------------------------------- consume queue

TAG_CODES = [
    ("TagA", 2598919),
    ("polygenelubricants", -(2**31)),  # hashCode is Integer.MIN_VALUE
    ("Hello World", -862545276),
    (None, 0),
    ("", 0),
    ("hello", 99162322),
    ("\U0001f600", 0xD83D * 31 + 0xDE00),  # one non-BMP code point: two UTF-16 units
]


async def test_consume_queue_entries_golden(store: MessageStore) -> None:
    config = store.config
    puts: list[tuple[int, int, int]] = []
    for i in range(10):  # crosses the 8-entry consume-queue segment boundary
        tag, code = TAG_CODES[i % len(TAG_CODES)]
        put = _ok(await store.put_message(message("TopicCQ", 1, b"x" * (i * 50), tags=tag)))
        assert put.append is not None
        assert put.append.queue_offset == i
        puts.append((put.append.commit_log_offset, put.append.wrote_bytes, code))
    await wait_dispatched(store)
    cq = read_consume_queue(config, "TopicCQ", 1)
    assert len(cq) == 2 * CQ_SEGMENT
    for k, (phys, size, code) in enumerate(puts):
        unit = cq[k * 20 : k * 20 + 20]
        assert unit[0:8] == _q(phys)
        assert unit[8:12] == _i(size)
        assert unit[12:20] == _q(code)  # sign-extended to 64 bits
    assert cq[1 * 20 + 12 : 1 * 20 + 20] == bytes.fromhex("FFFFFFFF80000000")
    assert cq[2 * 20 + 12 : 2 * 20 + 20] == bytes.fromhex("FFFFFFFFCC969A84")
    assert cq[10 * 20 :] == bytes(len(cq) - 200)


@pytest.mark.parametrize(
    ("delay", "queue_id", "added_ms"),
    [("1", 0, 1000), ("3", 2, 10_000), ("18", 17, 7_200_000), ("99", 17, 7_200_000)],
)
async def test_schedule_topic_tags_code_is_deliver_time(
    store: MessageStore, delay: str, queue_id: int, added_ms: int
) -> None:
    put = _ok(
        await store.put_message(
            message(
                "SCHEDULE_TOPIC_XXXX",
                queue_id,
                b"later",
                tags="TagA",
                props={"DELAY": delay, "REAL_TOPIC": "TopicTest", "REAL_QID": "0"},
            )
        )
    )
    assert put.append is not None
    await wait_dispatched(store)
    unit = read_consume_queue(store.config, "SCHEDULE_TOPIC_XXXX", queue_id)[:20]
    assert unit[12:20] == _q(put.append.store_timestamp + added_ms)


async def test_schedule_topic_without_delay_uses_the_tag(store: MessageStore) -> None:
    _ok(await store.put_message(message("SCHEDULE_TOPIC_XXXX", 0, b"x", tags="TagA")))
    await wait_dispatched(store)
    unit = read_consume_queue(store.config, "SCHEDULE_TOPIC_XXXX", 0)[:20]
    assert unit[12:20] == _q(2598919)


# ---------------------------------------------------------------------------- msg ids


@pytest.mark.parametrize("store_host", [STORE_HOST, STORE_HOST_V6], ids=["ipv4", "ipv6"])
async def test_put_returns_offset_msg_ids(
    make_config: Callable[..., StoreConfig], store_host: Host
) -> None:
    async with MessageStore(make_config()) as store:
        _ok(await store.put_message(message(body=b"a" * 100, store_host=store_host)))
        put = _ok(await store.put_message(message(body=b"b", store_host=store_host)))
        assert put.append is not None
        offset = put.append.commit_log_offset
        raw, port = store_host
        expected = (raw + struct.pack(">i", port) + struct.pack(">q", offset)).hex().upper()
        assert put.append.msg_ids == [expected]
        assert put.append.msg_id == expected
        assert len(expected) == (32 if len(raw) == 4 else 56)


# ------------------------------------------------------------------------------ batches


@pytest.mark.parametrize(
    ("own", "batch_props", "stored"),
    [
        (b"TAGS\x01a", "CLUSTER\x01c", "TAGS\x01a\x02CLUSTER\x01c"),
        (b"TAGS\x01a\x02", "CLUSTER\x01c", "TAGS\x01a\x02CLUSTER\x01c"),
        (b"", "CLUSTER\x01c", "CLUSTER\x01c"),
        (b"TAGS\x01a", "", "TAGS\x01a"),
        (b"", "", ""),
        (b"KEYS\x01k1 k2\x02UNIQ_KEY\x01U1", "CLUSTER\x01c\x02X\x01y", None),
    ],
)
async def test_batch_properties_appended_with_separator_only_when_needed(
    store: MessageStore, own: bytes, batch_props: str, stored: str | None
) -> None:
    if stored is None:
        stored = own.decode() + "\x02" + batch_props
    put = _ok(await store.put_messages(batch("B", 0, [(0, b"x", own)], properties=batch_props)))
    assert put.append is not None
    rec = parse_record(read_commit_log(store.config, 0, put.append.wrote_bytes))
    assert rec.properties == stored


async def test_batch_stored_as_one_record_per_message(store: MessageStore) -> None:
    config = store.config
    _ok(await store.put_message(message("B", 2, b"before")))
    bodies = [b"one", b"", "trois é".encode(), b"\x00" * 300]
    entries = [
        (7 + i, body, f"TAGS\x01t{i}\x02KEYS\x01k{i}".encode()) for i, body in enumerate(bodies)
    ]
    put = _ok(
        await store.put_messages(
            batch("B", 2, entries, properties="CLUSTER\x01DefaultCluster", store_host=STORE_HOST)
        )
    )
    assert put.append is not None
    assert put.append.queue_offset == 1
    assert put.append.msg_num == 4
    first = put.append.commit_log_offset
    assert put.append.wrote_bytes == sum(
        _record_len(len(b), 1, len(p) + 1 + len("CLUSTER\x01DefaultCluster"))
        for _f, b, p in entries
    )
    pos = first
    ids: list[str] = []
    for i, (flag, body, own) in enumerate(entries):
        props = own + b"\x02CLUSTER\x01DefaultCluster"
        size = _record_len(len(body), 1, len(props))
        rec = parse_record(read_commit_log(config, pos, size))
        assert rec.magic == MESSAGE_MAGIC
        assert rec.total_size == size
        assert rec.body == body
        assert rec.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        assert rec.flag == flag
        assert rec.queue_id == 2
        assert rec.topic == "B"
        assert rec.queue_offset == 1 + i
        assert rec.physical_offset == pos
        assert rec.prepared_transaction_offset == 0
        assert rec.born_host == BORN_HOST
        assert rec.store_host == STORE_HOST
        assert rec.store_timestamp == put.append.store_timestamp
        assert rec.properties == props.decode()
        ids.append(offset_msg_id(STORE_HOST, pos))
        pos += size
    assert put.append.msg_id == ",".join(ids)
    await wait_dispatched(store)
    assert store.get_max_offset("B", 2) == 5
    cq = read_consume_queue(config, "B", 2)
    for i in range(4):
        assert struct.unpack_from(">q", cq, (1 + i) * 20 + 12)[0] == java_hash(f"t{i}")


# ----------------------------------------------------------------------- transactions


async def test_prepared_and_rollback_records_take_no_queue_offset(store: MessageStore) -> None:
    config = store.config
    kinds = [
        ("NOT", 0x0, 0),
        ("PREPARED", 0x4, 0),
        ("NOT", 0x0, 1),
        ("ROLLBACK", 0xC, 0),
        ("COMMIT", 0x8, 2),
        ("PREPARED", 0x4, 0),
        ("NOT", 0x0, 3),
    ]
    puts: list[tuple[str, int, int]] = []
    for name, sys_flag, expected_offset in kinds:
        put = _ok(await store.put_message(message("Tx", 0, name.encode(), sys_flag=sys_flag)))
        assert put.append is not None
        assert put.append.queue_offset == expected_offset, name
        puts.append((name, put.append.commit_log_offset, put.append.wrote_bytes))
    await wait_dispatched(store)
    for (name, phys, size), (_n, sys_flag, expected_offset) in zip(puts, kinds, strict=True):
        rec = parse_record(read_commit_log(config, phys, size))
        assert rec.queue_offset == expected_offset, name
        assert rec.sys_flag == sys_flag
    assert store.get_max_offset("Tx", 0) == 4
    in_queue = [(phys, size) for name, phys, size in puts if name in ("NOT", "COMMIT")]
    cq = read_consume_queue(config, "Tx", 0)
    assert [struct.unpack_from(">qi", cq, k * 20) for k in range(4)] == in_queue
    assert cq[80:] == bytes(len(cq) - 80)
    assert [parse_record(r).body for r in drain(store, "Tx", 0)] == [
        b"NOT",
        b"NOT",
        b"COMMIT",
        b"NOT",
    ]


# ------------------------------------------------------------------------------ limits


async def _assert_nothing_written(store: MessageStore, result: PutResult) -> None:
    assert result.append is None
    assert store.commit_log.max_offset == 0


async def test_body_over_max_message_size_is_illegal(store: MessageStore) -> None:
    limit = store.config.max_message_bytes
    bad = await store.put_message(message(body=b"x" * (limit + 1)))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)
    _ok(await store.put_message(message(body=b"x" * limit)))


async def test_topic_over_127_bytes_is_illegal(store: MessageStore) -> None:
    bad = await store.put_message(message("t" * 128, 0, b"x"))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)
    bad_batch = await store.put_messages(batch("t" * 128, 0, [(0, b"x", b"")]))
    assert bad_batch.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad_batch)
    put = _ok(await store.put_message(message("t" * 127, 0, b"x")))
    assert put.append is not None
    rec = parse_record(read_commit_log(store.config, 0, put.append.wrote_bytes))
    assert rec.topic == "t" * 127


async def test_properties_over_32767_bytes_exceed_the_limit(
    make_config: Callable[..., StoreConfig],
) -> None:
    config = make_config(commit_log_file_bytes=65536)
    async with MessageStore(config) as store:
        filler = 32767 - len("X\x01")
        bad = await store.put_message(message(props={"X": "v" * (filler + 1)}))
        assert bad.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        await _assert_nothing_written(store, bad)
        put = _ok(await store.put_message(message(props={"X": "v" * filler})))
        assert put.append is not None
        rec = parse_record(read_commit_log(config, 0, put.append.wrote_bytes))
        assert len(rec.properties.encode()) == 32767


async def test_batch_body_over_max_message_size_is_illegal(store: MessageStore) -> None:
    limit = store.config.max_message_bytes
    entries = [(0, b"x" * 600, b"") for _ in range(4)]  # each small, the whole body over
    assert len(batch_body(entries)) > limit
    bad = await store.put_messages(batch("B", 0, entries))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)


@pytest.mark.parametrize(("name", "body"), MALFORMED_BATCHES, ids=[n for n, _ in MALFORMED_BATCHES])
async def test_malformed_batch_is_illegal(store: MessageStore, name: str, body: bytes) -> None:
    bad = await store.put_messages(MessageBatch("B", 0, body, store_host=STORE_HOST))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL, name
    await _assert_nothing_written(store, bad)


@pytest.mark.parametrize("sys_flag", [0x4, 0x8, 0xC])
async def test_transactional_batch_is_illegal(store: MessageStore, sys_flag: int) -> None:
    bad = await store.put_messages(batch("B", 0, [(0, b"x", b"")], sys_flag=sys_flag))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)


async def test_delayed_batch_is_illegal(store: MessageStore) -> None:
    """RocketMQ 4.9.8 ``CommitLog.putMessages``: a batch whose DELAY level is above 0 is
    MESSAGE_ILLEGAL (protocol.md §10)."""
    bad = await store.put_messages(batch("B", 0, [(0, b"x", b"")], properties="DELAY\x013"))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)


async def test_a_topic_that_would_leave_its_directory_is_illegal(store: MessageStore) -> None:
    # Retry and DLQ topics are made from group names; "../x" must never become a path.
    for topic in ("%RETRY%../../evil", "a/b", "..", "."):
        bad = await store.put_message(message(topic, 0, b"x"))
        assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL, topic
        assert "cannot name a directory" in bad.remark
        bad_batch = await store.put_messages(batch(topic, 0, [(0, b"x", b"")]))
        assert bad_batch.status is PutMessageStatus.MESSAGE_ILLEGAL
    await _assert_nothing_written(store, bad)
