"""The compiled batch and record codec (codec/_cbatch.pyx) against its pure reference.

``encode_batch_entry``, ``split_batch``, ``encode_batch_records`` (codec/batch.py) and
``encode_record``, ``patch_append_fields``, ``verify_record``, ``decode_record``
(codec/record.py) exist twice: the compiled function must return what the pure one returns,
leave the same bytes in the buffers it writes, and raise the same exception type with the
same message, on valid input and on anything a peer or a damaged log can hand it: truncated
entries, negative and oversized lengths, properties of 32,767 and 32,768 bytes, non-UTF-8
topics and properties, IPv6 hosts, the empty batch, every buffer type, values out of range
for their fields, and arguments outside the C types (which the compiled one hands over).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codec.batch
import codec.record
from codec.record import Host, RecordError, record_sys_flag
from codec.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from tests.codec.conftest import HOST_PAIR_IDS, HOST_PAIRS
from tests.support import BORN_TIMESTAMP, batch_body

compiled = pytest.importorskip("codec._cbatch", reason="compiled speedups not built")

pure_encode_batch_entry = codec.batch.encode_batch_entry_py
pure_split_batch = codec.batch.split_batch_py
pure_encode_batch_records = codec.batch.encode_batch_records_py
pure_verify_record = codec.record.verify_record_py
pure_decode_record = codec.record.decode_record_py
pure_encode_record = codec.record.encode_record_py
pure_patch_append_fields = codec.record.patch_append_fields_py

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """("ok", result) or ("raised", exception type, message): what two implementations must
    agree on."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # the point is to compare whatever either raises
        return ("raised", type(exc), str(exc))


def _plain(value: Any) -> Any:
    """Memoryviews as bytes, recursively, so results compare by content."""
    if isinstance(value, memoryview):
        return ("memoryview", value.tobytes())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):  # a NamedTuple's type counts too
        return (type(value).__name__, *(_plain(v) for v in value))
    return value


# --------------------------------------------------------------------------- strategies

entries = st.lists(st.tuples(INT32, st.binary(max_size=600), st.binary(max_size=200)), max_size=12)


@st.composite
def damaged(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` as it is, or cut short, or with an int / short overwritten (negative and
    oversized lengths), or with bytes appended."""
    kind = draw(st.sampled_from(["intact", "intact", "cut", "int", "short", "append"]))
    if kind == "intact" or (not body and kind != "append"):
        return body
    if kind == "cut":
        return body[: draw(st.integers(0, len(body) - 1))]
    if kind == "append":
        return body + draw(st.binary(min_size=1, max_size=30))
    width = 4 if kind == "int" else 2
    if len(body) < width:
        return body
    at = draw(st.integers(0, len(body) - width))
    value = draw(INT32 if width == 4 else st.integers(-(2**15), 2**15 - 1))
    return body[:at] + value.to_bytes(width, "big", signed=True) + body[at + width :]


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    return draw(damaged(batch_body(draw(entries))))


def as_kind(data: bytes, kind: str) -> Any:
    """``data`` as bytes, bytearray, memoryview, or a memoryview slice of a larger buffer."""
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    return memoryview(b"xx" + data + b"yy")[2 : 2 + len(data)]


BUFFER_KINDS = st.sampled_from(["bytes", "bytearray", "memoryview", "slice"])


# ------------------------------------------------------------------------- batch entries


@SETTINGS
@given(flag=INT32, body=st.binary(max_size=2000), props=st.binary(max_size=500), kind=BUFFER_KINDS)
def test_encode_batch_entry_matches(flag: int, body: bytes, props: bytes, kind: str) -> None:
    assert outcome(compiled.encode_batch_entry, flag, as_kind(body, kind), props) == outcome(
        pure_encode_batch_entry, flag, as_kind(body, kind), props
    )


@pytest.mark.parametrize(
    ("flag", "body", "props"),
    [
        (0, b"", b""),
        (2**31 - 1, b"x", b"p" * 32767),  # the longest properties
        (0, b"x", b"p" * 32768),  # one byte too many: struct's error
        (2**31, b"x", b""),  # the flag does not fit an int
        (-(2**31) - 1, b"x", b""),
        (0, "text", b""),  # not bytes
        (0, b"x", "text"),
        (1.5, b"x", b""),
        (True, b"x", b""),
        (0, memoryview(b"abcd").cast("I"), b""),  # len() counts items, not bytes
    ],
)
def test_encode_batch_entry_edges(flag: Any, body: Any, props: Any) -> None:
    assert outcome(compiled.encode_batch_entry, flag, body, props) == outcome(
        pure_encode_batch_entry, flag, body, props
    )


@SETTINGS
@given(body=batch_bodies(), kind=BUFFER_KINDS)
def test_split_batch_matches(body: bytes, kind: str) -> None:
    fast = outcome(compiled.split_batch, as_kind(body, kind))
    slow = outcome(pure_split_batch, as_kind(body, kind))
    assert _plain(fast) == _plain(slow)
    if fast[0] == "ok":
        assert all(isinstance(b, memoryview) for _flag, b, _props in fast[1])


@pytest.mark.parametrize(
    "body",
    [
        b"",  # the empty batch
        b"\x00" * 19,  # shorter than an entry head
        batch_body([(1, b"a", b"p")])[:-1],  # properties cut short
        struct.pack(">iiiii", 20, 0, 0, 0, -1) + b"\x00\x00",  # negative body length
        struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\xff\xff",  # negative properties length
        struct.pack(">iiiii", 99, 0, 0, 0, 0) + b"\x00\x00",  # TOTALSIZE disagrees
        struct.pack(">iiiii", 22, 0, 0, 0, 2**31 - 1) + b"\x00\x00",  # body past the end
        batch_body([(7, b"\xff\xfe", b"\x80\x81")]),  # not UTF-8: bytes all the same
    ],
)
def test_split_batch_edges(body: bytes) -> None:
    assert _plain(outcome(compiled.split_batch, body)) == _plain(outcome(pure_split_batch, body))


def test_split_batch_of_other_types() -> None:
    for body in ("text", 5, [1, 2], memoryview(b"abcdefgh").cast("I")):
        assert _plain(outcome(compiled.split_batch, body)) == _plain(
            outcome(pure_split_batch, body)
        )


# ------------------------------------------------------------------------- batch records


def encode_both(**kwargs: Any) -> None:
    """Run both implementations on copies of the same buffer and compare everything: the
    result (records, sizes, properties), the exception, and the bytes left in the buffer
    passed in (records written before an error stay there in both)."""
    buf_bytes = kwargs.pop("buf_bytes")
    buf_kind = kwargs.pop("buf_kind", "bytearray")
    body_kind = kwargs.pop("body_kind", "bytes")
    body = kwargs.pop("body")
    results = []
    for fn in (compiled.encode_batch_records, pure_encode_batch_records):
        backing = bytearray(buf_bytes)
        buf = memoryview(backing) if buf_kind == "memoryview" else backing
        got = outcome(fn, buf, as_kind(body, body_kind), **kwargs)
        same_buffer = got[0] == "ok" and got[1].buf is buf
        results.append((_plain(got), bytes(backing), same_buffer))
    assert results[0] == results[1]


@st.composite
def hosts(draw: st.DrawFn) -> tuple[Host, Host]:
    return draw(st.sampled_from(HOST_PAIRS))


@SETTINGS
@given(
    body=batch_bodies(),
    batch_properties=st.one_of(
        st.just(b""), st.binary(max_size=80), st.binary(max_size=40).map(lambda b: b + b"\x02")
    ),
    topic=st.binary(min_size=1, max_size=127),
    queue_id=INT32,
    flags=st.integers(0, 0xFFFF),
    host_pair=hosts(),
    queue_offset=st.integers(0, 2**40),
    commit_log_offset=st.integers(0, 2**50),
    store_timestamp=INT64,
    buf_size=st.integers(0, 5000),
    buf_kind=st.sampled_from(["bytearray", "memoryview"]),
    body_kind=BUFFER_KINDS,
)
def test_encode_batch_records_matches(
    *,
    body: bytes,
    batch_properties: bytes,
    topic: bytes,
    queue_id: int,
    flags: int,
    host_pair: tuple[Host, Host],
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
    buf_size: int,
    buf_kind: str,
    body_kind: str,
) -> None:
    born_host, store_host = host_pair
    encode_both(
        buf_bytes=bytes(range(256)) * (buf_size // 256) + bytes(buf_size % 256),
        buf_kind=buf_kind,
        body=body,
        body_kind=body_kind,
        batch_properties=batch_properties,
        topic=topic,
        queue_id=queue_id,
        sys_flag=record_sys_flag(flags, born_host, store_host),
        born_timestamp=BORN_TIMESTAMP,
        born_host=born_host,
        store_host=store_host,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        store_timestamp=store_timestamp,
    )


def _args(**overrides: Any) -> dict[str, Any]:
    born_host, store_host = HOST_PAIRS[0]
    args: dict[str, Any] = {
        "buf_bytes": bytes(4096),
        "body": batch_body([(3, b"hello", b"KEYS\x01k1"), (4, b"", b"")]),
        "batch_properties": b"CLUSTER\x01c",
        "topic": b"TopicTest",
        "queue_id": 2,
        "sys_flag": 0,
        "born_timestamp": BORN_TIMESTAMP,
        "born_host": born_host,
        "store_host": store_host,
        "queue_offset": 7,
        "commit_log_offset": 1 << 30,
        "store_timestamp": BORN_TIMESTAMP + 5,
    }
    args.update(overrides)
    return args


@pytest.mark.parametrize(("born_host", "store_host"), HOST_PAIRS, ids=HOST_PAIR_IDS)
def test_encode_batch_records_ipv6_hosts(born_host: Host, store_host: Host) -> None:
    encode_both(
        **_args(
            born_host=born_host,
            store_host=store_host,
            sys_flag=record_sys_flag(0, born_host, store_host),
        )
    )


@pytest.mark.parametrize("batch_properties", [b"", b"CLUSTER\x01c", b"\x02"])
@pytest.mark.parametrize("own_ends_with_separator", [False, True])
@pytest.mark.parametrize("joined", [32767, 32768])
def test_encode_batch_records_properties_at_the_limit(
    batch_properties: bytes, own_ends_with_separator: bool, joined: int
) -> None:
    """Own properties sized so that, joined with the batch-level ones, they are exactly
    32,767 bytes (stored) or 32,768 (PropertiesTooLongError)."""
    separator = 1 if batch_properties and not own_ends_with_separator else 0
    own_len = joined - len(batch_properties) - separator
    if own_len > 32767:
        pytest.skip("an entry's PROPLEN (a short) cannot say 32,768")
    own = b"K\x01" + b"v" * (own_len - 3) + (b"\x02" if own_ends_with_separator else b"v")
    assert len(own) == own_len
    body = batch_body([(0, b"body", b"A\x01b"), (0, b"big", own), (0, b"after", b"")])
    encode_both(**_args(body=body, batch_properties=batch_properties))


@pytest.mark.parametrize(
    "body",
    [
        b"",  # the empty batch
        # too long (with the batch-level properties), then truncated: RecordError first
        batch_body([(0, b"x", b"p" * 32767), (0, b"y", b"")])[:-5],
        batch_body([(0, b"x", b"p" * 32767), (0, b"y", b"")]) + b"\x00" * 7,
        batch_body([(0, b"x", b"")]) + struct.pack(">iiiii", 22, 0, 0, 0, -5) + b"\x00\x00",
        batch_body([(0, b"x", b"")]) + struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\x80\x00",
        batch_body([(0, b"x", b"")]) + struct.pack(">iiiii", 1, 0, 0, 0, 0) + b"\x00\x00",
        batch_body([(0, b"\xff\xfe", b"\xc3\x28")]),  # not UTF-8: stored as it is
    ],
)
def test_encode_batch_records_bad_bodies(body: bytes) -> None:
    encode_both(**_args(body=body))


@pytest.mark.parametrize("buf_bytes", [b"", bytes(1), bytes(150), bytes(1 << 16)])
def test_encode_batch_records_grows_like_the_reference(buf_bytes: bytes) -> None:
    body = batch_body([(i, bytes([i]) * (i * 37), b"N\x01v" * i) for i in range(20)])
    encode_both(**_args(buf_bytes=buf_bytes, body=body))


@pytest.mark.parametrize(
    "overrides",
    [
        {"topic": "TopicTest"},  # str: the reference's struct error
        {"topic": b"t" * 255},
        {"topic": b"t" * 256},
        {"topic": b""},
        {"topic": bytearray(b"TopicTest")},
        {"batch_properties": "CLUSTER\x01c"},
        {"batch_properties": bytearray(b"C\x01c")},
        {"queue_id": 2**31},
        {"queue_id": -(2**31)},
        {"sys_flag": BORNHOST_V6_FLAG},  # disagrees with the IPv4 born host
        {"sys_flag": STOREHOSTADDRESS_V6_FLAG},
        {"sys_flag": 2**31},
        {"born_host": (b"\x01\x02\x03", 1)},
        {"born_host": (b"\x01\x02\x03\x04", 2**31)},
        {"born_host": [b"\x01\x02\x03\x04", 1]},
        {"store_host": (b"\x01\x02\x03\x04", -1)},
        {"store_host": ("1.2.3.4", 1)},
        {"born_timestamp": 2**63},
        {"store_timestamp": -(2**63)},
        {"queue_offset": 2**63 - 1},  # the second record's offset overflows
        {"queue_offset": -1},
        {"commit_log_offset": 2**63 - 10},
        {"commit_log_offset": 1.0},
    ],
    ids=repr,
)
def test_encode_batch_records_odd_arguments(overrides: dict[str, Any]) -> None:
    encode_both(**_args(**overrides))


@pytest.mark.parametrize(
    "buf", [bytes(4096), bytes(10), memoryview(bytes(4096))], ids=["bytes", "short", "view"]
)
def test_encode_batch_records_into_a_read_only_buffer(buf: Any) -> None:
    """Read-only: the reference's TypeError, or a new buffer when the first record does not
    fit the old one anyway."""
    args = _without(_args())
    body = _args()["body"]
    assert _plain(outcome(compiled.encode_batch_records, buf, body, **args)) == _plain(
        outcome(pure_encode_batch_records, buf, body, **args)
    )


def _without(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in ("buf_bytes", "body")}


def test_encode_batch_records_from_an_mmap_and_into_one() -> None:
    args = _args()
    body = args.pop("body")
    args.pop("buf_bytes")
    results = []
    impls: list[Callable[..., Any]] = [compiled.encode_batch_records, pure_encode_batch_records]
    for fn in impls:
        with mmap.mmap(-1, len(body)) as src, mmap.mmap(-1, 8192) as dst:
            src[:] = body
            got = fn(dst, src, **args)
            results.append((got.total_bytes, got.sizes, got.properties, dst[: got.total_bytes]))
    assert results[0] == results[1]


def test_encode_batch_records_body_inside_the_buffer() -> None:
    """A body that is a view of the buffer written into: the reference copies it first."""
    args = _without(_args())
    body = _args()["body"]
    results = []
    for fn in (compiled.encode_batch_records, pure_encode_batch_records):
        buf = bytearray(4096)
        buf[100 : 100 + len(body)] = body
        with memoryview(buf) as view:
            got = fn(buf, view[100 : 100 + len(body)], **args)
            results.append((bytes(got.buf), got.sizes, got.properties))
    assert results[0] == results[1]


def test_encode_batch_records_stores_the_crc_of_each_body() -> None:
    """The compiled CRC (zlib's C crc32) is Java's: CRC32 & 0x7FFFFFFF."""
    bodies = [b"", b"a", bytes(range(256)) * 9, b"\xff" * 1024]
    args = _without(_args())
    got = compiled.encode_batch_records(
        bytearray(1 << 16), batch_body([(0, b, b"") for b in bodies]), **args
    )
    pos = 0
    for body, size in zip(bodies, got.sizes, strict=True):
        info = pure_decode_record(got.buf, pos, check_crc=True)
        assert info.body_crc == codec.record.body_crc(body)
        pos += size


# ---------------------------------------------------------------------------- records


def _records(
    born_host: Host, store_host: Host, topic: bytes, parts: list[tuple[bytes, bytes]]
) -> tuple[bytes, list[int]]:
    got = pure_encode_batch_records(
        bytearray(64),
        batch_body([(i, body, props) for i, (body, props) in enumerate(parts)]),
        b"",
        topic,
        1,
        record_sys_flag(0, born_host, store_host),
        BORN_TIMESTAMP,
        born_host,
        store_host,
        0,
        4096,
        BORN_TIMESTAMP + 1,
    )
    return bytes(got.buf[: got.total_bytes]), got.sizes


def as_buffer(data: bytes, kind: str) -> Any:
    if kind == "mmap":
        mm = mmap.mmap(-1, max(len(data), 1))
        mm[: len(data)] = data
        return mm if data else memoryview(mm)[:0]
    return as_kind(data, kind)


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Records as the store writes them, some damaged: bytes flipped or cut short."""
    born_host, store_host = draw(st.sampled_from(HOST_PAIRS))
    topic = draw(st.binary(min_size=1, max_size=40))
    parts = draw(
        st.lists(
            st.tuples(st.binary(max_size=300), st.binary(max_size=120)), min_size=1, max_size=4
        )
    )
    raw, sizes = _records(born_host, store_host, topic, parts)
    data = bytearray(raw)
    for _ in range(draw(st.integers(0, 3))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data), sizes


@st.composite
def positions(draw: st.DrawFn, data: bytes, sizes: list[int]) -> int:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return draw(st.one_of(st.sampled_from(starts), st.integers(-4, len(data) + 4)))


@SETTINGS
@given(
    data=st.data(),
    log=logs(),
    check_crc=st.booleans(),
    kind=st.sampled_from(["bytes", "bytearray", "memoryview", "slice", "mmap"]),
)
def test_verify_and_decode_record_match(
    data: st.DataObject, log: tuple[bytes, list[int]], check_crc: bool, kind: str
) -> None:
    raw, sizes = log
    pos = data.draw(positions(raw, sizes))
    commit_log_offset = data.draw(st.sampled_from([4096 + pos, 4096, pos, -1, 2**63 - 1]))
    buf = as_buffer(raw, kind)
    assert outcome(
        compiled.verify_record, buf, pos, commit_log_offset, check_crc=check_crc
    ) == outcome(pure_verify_record, buf, pos, commit_log_offset, check_crc=check_crc)
    fast = outcome(compiled.decode_record, buf, pos, check_crc=check_crc)
    assert fast == outcome(pure_decode_record, buf, pos, check_crc=check_crc)
    if fast[0] == "ok":
        assert type(fast[1]) is codec.record.RecordInfo


@pytest.mark.parametrize(("born_host", "store_host"), HOST_PAIRS, ids=HOST_PAIR_IDS)
@pytest.mark.parametrize("check_crc", [False, True])
def test_records_with_ipv6_hosts_and_non_utf8_text(
    born_host: Host, store_host: Host, check_crc: bool
) -> None:
    raw, sizes = _records(
        born_host, store_host, b"T\xff\xfe", [(b"body", b"K\x01\xc3\x28"), (b"", b"")]
    )
    pos = 0
    for size in sizes:
        for buf in (raw, bytearray(raw), memoryview(raw)):
            assert compiled.verify_record(
                buf, pos, 4096 + pos, check_crc=check_crc
            ) == pure_verify_record(buf, pos, 4096 + pos, check_crc=check_crc)
            assert compiled.decode_record(buf, pos, check_crc=check_crc) == pure_decode_record(
                buf, pos, check_crc=check_crc
            )
        pos += size


@pytest.mark.parametrize(
    ("buf", "pos", "commit_log_offset"),
    [
        (b"", 0, 0),
        (bytes(88), 0, 0),  # magic 0
        (bytes(100), -10, 0),  # a negative position
        (bytes(100), 5.0, 0),
        (bytes(100), 2**70, 0),
        ("text", 0, 0),
        (memoryview(bytes(96)).cast("I"), 0, 0),
    ],
)
def test_records_odd_arguments(buf: Any, pos: Any, commit_log_offset: Any) -> None:
    raw, _sizes = _records(*HOST_PAIRS[0], b"T", [(b"b", b"p")])
    for b in (buf, raw):
        for check_crc in (False, True):
            assert outcome(
                compiled.verify_record, b, pos, commit_log_offset, check_crc=check_crc
            ) == outcome(pure_verify_record, b, pos, commit_log_offset, check_crc=check_crc)
            assert outcome(compiled.decode_record, b, pos, check_crc=check_crc) == outcome(
                pure_decode_record, b, pos, check_crc=check_crc
            )
    assert outcome(compiled.verify_record, raw, 0, 4096.0, check_crc=True) == outcome(
        pure_verify_record, raw, 0, 4096.0, check_crc=True
    )


# ------------------------------------------------------------------------ single records

# Ints inside and outside the int32 / int64 fields they are packed into.
WIDE = st.one_of(INT32, INT64, st.integers(-(2**70), 2**70))
V6_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
SYS_FLAGS = st.one_of(
    st.integers(0, 0xFFFF), INT32.map(lambda f: f | V6_BITS), INT32.map(lambda f: f & ~V6_BITS)
)
# Properties up to and past the 32,767 a PROPERTIESLENGTH short can say.
PROPERTIES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([0, 1, 32766, 32767, 32768, 40000]).map(lambda n: b"K\x01" * (n // 2)),
)


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``common`` four times in five, else ``rare`` (one_of would weigh each of their
    branches alike)."""
    return st.sampled_from([True, True, True, True, False]).flatmap(lambda c: common if c else rare)


MOSTLY_INT64 = mostly(INT64, WIDE)
BODIES = st.one_of(
    st.binary(max_size=2000), st.integers(0, 1 << 20).map(lambda n: bytes([n % 251]) * n)
)


def _record_args(**overrides: Any) -> dict[str, Any]:
    born_host, store_host = HOST_PAIRS[0]
    args: dict[str, Any] = {
        "topic": b"TopicTest",
        "queue_id": 3,
        "body": b"golden body \xc3\xa9",
        "flag": 0x5A5A,
        "properties": b"TAGS\x01TagA\x02KEYS\x01k1 k2",
        "sys_flag": 0x8,
        "born_timestamp": BORN_TIMESTAMP,
        "born_host": born_host,
        "store_host": store_host,
        "reconsume_times": 2,
        "prepared_transaction_offset": 4242,
    }
    args.update(overrides)
    return args


def encode_record_both(**kwargs: Any) -> tuple[Any, ...]:
    fast = outcome(compiled.encode_record, **kwargs)
    assert fast == outcome(pure_encode_record, **kwargs)
    if fast[0] == "ok":
        assert type(fast[1]) is bytes
    return fast


@SETTINGS
@given(
    topic=st.one_of(st.binary(min_size=1, max_size=127), st.binary(min_size=127, max_size=127)),
    queue_id=INT32,
    body=BODIES,
    body_kind=BUFFER_KINDS,
    flag=INT32,
    properties=PROPERTIES,
    sys_flag=SYS_FLAGS,
    host_pair=hosts(),
    born_timestamp=INT64,
    reconsume_times=INT32,
    prepared_transaction_offset=INT64,
    crc=st.one_of(st.none(), INT32),
)
def test_encode_record_matches(
    *,
    topic: bytes,
    queue_id: int,
    body: bytes,
    body_kind: str,
    flag: int,
    properties: bytes,
    sys_flag: int,
    host_pair: tuple[Host, Host],
    born_timestamp: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int | None,
) -> None:
    born_host, store_host = host_pair
    got = encode_record_both(
        topic=topic,
        queue_id=queue_id,
        body=as_kind(body, body_kind),
        flag=flag,
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        crc=crc,
    )
    if len(properties) <= 32767:
        assert got[0] == "ok"
        info = pure_decode_record(got[1], 0, check_crc=crc is None)
        assert info.sys_flag == record_sys_flag(sys_flag, born_host, store_host)


@SETTINGS
@given(
    queue_id=WIDE,
    flag=WIDE,
    sys_flag=WIDE,
    born_timestamp=WIDE,
    reconsume_times=WIDE,
    prepared_transaction_offset=WIDE,
    crc=st.one_of(st.none(), WIDE),
    born_port=WIDE,
    store_port=WIDE,
    host_pair=hosts(),
)
def test_encode_record_values_out_of_range(
    *,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int | None,
    born_port: int,
    store_port: int,
    host_pair: tuple[Host, Host],
) -> None:
    """struct's error for the first field that does not fit, from both."""
    (born_address, _), (store_address, _) = host_pair
    encode_record_both(
        **_record_args(
            queue_id=queue_id,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            crc=crc,
            born_host=(born_address, born_port),
            store_host=(store_address, store_port),
        )
    )


@pytest.mark.parametrize(("born_host", "store_host"), HOST_PAIRS, ids=HOST_PAIR_IDS)
@pytest.mark.parametrize("sys_flag", [0, V6_BITS, 0x8 | BORNHOST_V6_FLAG, 2**31 - 1, -(2**31)])
@pytest.mark.parametrize("crc", [None, 0, 2**31 - 1, -(2**31)])
def test_encode_record_ipv6_hosts_and_v6_flags(
    born_host: Host, store_host: Host, sys_flag: int, crc: int | None
) -> None:
    """The V6 bits follow the address widths, whatever sys_flag says."""
    got = encode_record_both(
        **_record_args(born_host=born_host, store_host=store_host, sys_flag=sys_flag, crc=crc)
    )
    assert got[0] == "ok"
    info = pure_decode_record(got[1], 0)
    assert info.sys_flag & V6_BITS == record_sys_flag(0, born_host, store_host)
    assert info.body_crc == (codec.record.body_crc(_record_args()["body"]) if crc is None else crc)


@pytest.mark.parametrize(
    "overrides",
    [
        {"topic": b"t" * 127},
        {"topic": b"t" * 128},
        {"topic": b"t" * 255},
        {"topic": b"t" * 256},  # bytes((256,)): ValueError
        {"topic": b""},
        {"topic": "TopicTest"},
        {"topic": bytearray(b"TopicTest")},
        {"topic": memoryview(b"TopicTest")},
        {"properties": b""},
        {"properties": b"p" * 32767},
        {"properties": b"p" * 32768},
        {"properties": "TAGS\x01a"},
        {"properties": bytearray(b"TAGS\x01a")},
        {"body": b""},
        {"body": bytearray(b"body")},
        {"body": memoryview(b"body")},
        {"body": memoryview(b"abcdefgh").cast("I")},  # len() counts items, not bytes
        {"body": memoryview(b"abcdefgh")[::2]},  # not contiguous
        {"body": "text"},
        {"body": "text", "crc": 5},
        {"body": None},
        {"crc": 2**31},
        {"crc": -(2**31) - 1},
        {"crc": 1.5},
        {"crc": True},
        {"queue_id": 2**31},
        {"queue_id": True},
        {"flag": -(2**31) - 1},
        {"flag": 1.0},
        {"sys_flag": 2**31},
        {"sys_flag": "0"},
        {"born_timestamp": 2**63},
        {"born_timestamp": -(2**63)},
        {"reconsume_times": 2**31},
        {"prepared_transaction_offset": -(2**63) - 1},
        {"born_host": (b"\x01\x02\x03", 1)},  # short: struct pads it
        {"born_host": (b"\x01\x02\x03\x04\x05", 1)},  # long: struct cuts it
        {"born_host": (b"\x00" * 16, 2**31)},
        {"born_host": [b"\x01\x02\x03\x04", 1]},
        {"born_host": (bytearray(b"\x01\x02\x03\x04"), 1)},
        {"born_host": (b"\x01\x02\x03\x04", 1, 2)},
        {"store_host": (b"\x01\x02\x03\x04", -1)},
        {"store_host": (b"\x00" * 15, 1)},
        {"store_host": ("1.2.3.4", 1)},
        {"store_host": None},
    ],
    ids=repr,
)
def test_encode_record_odd_arguments(overrides: dict[str, Any]) -> None:
    encode_record_both(**_record_args(**overrides))


def test_encode_record_from_an_mmap() -> None:
    body = bytes(range(256)) * 3
    with mmap.mmap(-1, len(body)) as mm:
        mm[:] = body
        got = encode_record_both(**_record_args(body=mm))
    assert got == ("ok", pure_encode_record(**_record_args(body=body)))


def patch_both(buf_bytes: bytes, buf_kind: str, pos: Any, **kwargs: Any) -> None:
    """Both implementations on copies of one buffer: the same outcome and the same bytes
    left in it (an offset written before struct's error on the store time included)."""
    results = []
    for fn in (compiled.patch_append_fields, pure_patch_append_fields):
        if buf_kind == "mmap":
            with mmap.mmap(-1, max(len(buf_bytes), 1)) as mm:
                mm[: len(buf_bytes)] = buf_bytes
                if buf_bytes:
                    got = outcome(fn, mm, pos, **kwargs)
                else:
                    with memoryview(mm) as whole, whole[:0] as empty:
                        got = outcome(fn, empty, pos, **kwargs)
                results.append((got, mm[: len(buf_bytes)]))
            continue
        buf: Any
        backing = bytearray(buf_bytes)
        if buf_kind == "bytearray":
            buf = backing
        elif buf_kind == "memoryview":
            buf = memoryview(backing)
        elif buf_kind == "slice":
            buf = memoryview(backing)[3:]
        else:
            buf = bytes(backing)  # read-only: struct's TypeError
        results.append((outcome(fn, buf, pos, **kwargs), bytes(backing)))
    assert results[0] == results[1]


@SETTINGS
@given(
    data=st.data(),
    size=mostly(st.integers(80, 300), st.integers(0, 100)),
    buf_kind=st.sampled_from(["bytearray", "memoryview", "slice", "mmap", "bytes"]),
    queue_offset=MOSTLY_INT64,
    commit_log_offset=MOSTLY_INT64,
    store_timestamp=MOSTLY_INT64,
    sys_flag=mostly(SYS_FLAGS, WIDE),
)
def test_patch_append_fields_matches(
    *,
    data: st.DataObject,
    size: int,
    buf_kind: str,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
    sys_flag: int,
) -> None:
    pos = data.draw(
        mostly(
            st.integers(0, max(0, size - 80)),  # the record's fields inside the buffer
            st.one_of(st.integers(-size - 10, size + 10), WIDE),
        )
    )
    patch_both(
        bytes(range(256))[:size] + bytes(max(0, size - 256)),
        buf_kind,
        pos,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        store_timestamp=store_timestamp,
        sys_flag=sys_flag,
    )


@pytest.mark.parametrize(
    ("size", "pos", "overrides"),
    [
        (88, 0, {}),
        (100, 0, {"sys_flag": BORNHOST_V6_FLAG}),
        (100, 12, {"sys_flag": BORNHOST_V6_FLAG}),  # offsets written, store time does not fit
        (88, 1, {}),
        (88, -88, {}),  # struct counts a negative offset from the end
        (88, -89, {}),
        (88, True, {}),
        (88, 0.0, {}),
        (88, 2**70, {}),
        (88, 0, {"queue_offset": 2**63}),
        (88, 0, {"commit_log_offset": -(2**63) - 1}),
        (88, 0, {"store_timestamp": 2**63}),  # offsets written, store time does not fit
        (88, 0, {"store_timestamp": 1.0}),
        (88, 0, {"sys_flag": 2**70 | BORNHOST_V6_FLAG}),
        (88, 0, {"sys_flag": -1}),
        (88, 0, {"sys_flag": None}),
    ],
    ids=repr,
)
def test_patch_append_fields_edges(size: int, pos: Any, overrides: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {
        "queue_offset": 41,
        "commit_log_offset": 1 << 40,
        "store_timestamp": BORN_TIMESTAMP + 5,
        "sys_flag": 0,
    }
    kwargs.update(overrides)
    for buf_kind in ("bytearray", "memoryview", "slice", "mmap", "bytes"):
        patch_both(b"\xee" * size, buf_kind, pos, **kwargs)


def test_patch_append_fields_of_other_buffers() -> None:
    for buf in ("text", None, memoryview(bytearray(96)).cast("I")):
        assert outcome(
            compiled.patch_append_fields,
            buf,
            0,
            queue_offset=1,
            commit_log_offset=2,
            store_timestamp=3,
            sys_flag=0,
        ) == outcome(
            pure_patch_append_fields,
            buf,
            0,
            queue_offset=1,
            commit_log_offset=2,
            store_timestamp=3,
            sys_flag=0,
        )


def test_single_records_stay_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordinary arguments: encode_record and patch_append_fields do not hand over."""
    expected = {
        (pair, kind, crc): pure_encode_record(
            **_record_args(born_host=pair[0], store_host=pair[1], body=b"body" * 9, crc=crc)
        )
        for pair in HOST_PAIRS
        for kind in ("bytes", "bytearray", "memoryview", "slice")
        for crc in (None, 77)
    }

    def handed_over(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("handed over to the pure function")

    monkeypatch.setattr(codec.record, "encode_record_py", handed_over)
    monkeypatch.setattr(codec.record, "patch_append_fields_py", handed_over)
    for (pair, kind, crc), record in expected.items():
        got = compiled.encode_record(
            **_record_args(
                born_host=pair[0], store_host=pair[1], body=as_kind(b"body" * 9, kind), crc=crc
            )
        )
        assert got == record
        patched = bytearray(b"\x00" * 5 + record)
        compiled.patch_append_fields(
            memoryview(patched),
            5,
            queue_offset=41,
            commit_log_offset=4096,
            store_timestamp=BORN_TIMESTAMP + 5,
            sys_flag=codec.record.read_int(record, 36),
        )
        info = pure_decode_record(patched, 5, check_crc=crc is None)
        assert (info.queue_offset, info.commit_log_offset, info.store_timestamp) == (
            41,
            4096,
            BORN_TIMESTAMP + 5,
        )


# ------------------------------------------------------------------ the C paths are taken


def test_valid_and_malformed_input_stays_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordinary arguments, valid or malformed data: no hand-over to the reference (which
    would make every comparison above one of the reference with itself)."""

    def handed_over(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("handed over to the pure function")

    for module, name in [
        (codec.batch, "encode_batch_entry_py"),
        (codec.batch, "split_batch_py"),
        (codec.batch, "encode_batch_records_py"),
        (codec.record, "verify_record_py"),
        (codec.record, "decode_record_py"),
    ]:
        monkeypatch.setattr(module, name, handed_over)
    args = _without(_args())
    for born_host, store_host in HOST_PAIRS:
        raw, sizes = _records(born_host, store_host, b"T", [(b"body", b"K\x01v"), (b"", b"")])
        for buf in (raw, bytearray(raw), memoryview(raw)):
            assert compiled.verify_record(buf, 0, 4096, check_crc=True) == sizes[0]
            assert compiled.decode_record(buf, sizes[0], check_crc=True).body_length == 0
            with pytest.raises(RecordError, match="record says it is at 4096, found at 1"):
                compiled.verify_record(buf, 0, 1, check_crc=True)
            with pytest.raises(RecordError, match="record header runs past the data"):
                compiled.decode_record(buf, len(raw) - 10)
        body = _args()["body"]
        for kind in ("bytes", "bytearray", "memoryview", "slice"):
            got = compiled.encode_batch_records(
                bytearray(16),
                as_kind(body, kind),
                **{
                    **args,
                    "born_host": born_host,
                    "store_host": store_host,
                    "sys_flag": record_sys_flag(0, born_host, store_host),
                },
            )
            assert len(got.sizes) == 2
            assert len(compiled.split_batch(as_kind(body, kind))) == 2
            assert compiled.encode_batch_entry(1, as_kind(b"body", kind), b"p") == (
                batch_body([(1, b"body", b"p")])
            )
        with pytest.raises(RecordError, match="empty batch"):
            compiled.encode_batch_records(bytearray(16), b"", **args)
        with pytest.raises(RecordError, match="is truncated"):
            compiled.split_batch(body + b"\x00")
        with pytest.raises(codec.record.PropertiesTooLongError):
            compiled.encode_batch_records(
                bytearray(16), batch_body([(0, b"", b"p" * 32767)]), **args
            )
