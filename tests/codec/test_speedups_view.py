"""The compiled record decoder (codec/_cview.pyx) builds the views the pure one
(codec/view.py, ``decode_records_py`` and ``attach_lazy_fields_py``) builds, and raises what
it raises, on any reply body; and both decode lazily what the eager decoder decoded.

Streams are random and adversarial: IPv4 and IPv6 hosts in every combination, compressed
bodies (zlib, bytes zlib cannot read, LZ4 / ZSTD type bits), topics and properties that are
not UTF-8, pairs with empty values, duplicate names, bytes past the fields inside TOTALSIZE,
and the same streams cut short or garbled (lengths rewritten, bytes flipped): the same
error type and text, or the same views, whose every field then reads without error.
Views from either decoder read through either set of lazy fields. The lazy fields are also
checked against a model of the eager decoder they replace (built from the record's parts,
properties parsed as Java does), read in any order, after any assignment.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import pickle
import socket
import sys
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codec import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB,
    RecordError,
    _ext,
    host_text,
    offset_msg_id,
    record_sys_flag,
    view,
)
from codec.view import LAZY_FIELDS, MessageExt
from tests.codec.conftest import HOST_PAIRS, over_record_views, pure, view_fields
from tests.support import java_string2message_properties

encode_record = pure("record", "encode_record")
patch_append_fields = pure("record", "patch_append_fields")

FIELDS = tuple(f.name for f in dataclasses.fields(MessageExt))


def _compiled() -> ModuleType:
    module: ModuleType = pytest.importorskip("codec._cview", reason="compiled speedups not built")
    return module


def _view_class(name: str, attach: Callable[[type[Any]], None]) -> type[MessageExt]:
    cls = type(name, (MessageExt,), {})
    attach(cls)
    return cls


PureView = _view_class("PureView", view.attach_lazy_fields_py)


@functools.cache
def _compiled_view() -> type[MessageExt]:
    return _view_class("CompiledView", _compiled().attach_lazy_fields)


# ---------------------------------------------------------------------------- streams

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
HOST_V6 = st.binary(min_size=16, max_size=16)
HOST_V4 = st.binary(min_size=4, max_size=4)
PORT = st.integers(0, 2**31 - 1)
HOST = st.tuples(HOST_V4 | HOST_V6, PORT) | st.sampled_from(
    [h for pair in HOST_PAIRS for h in pair]
)
TOPIC = (
    st.sampled_from([b"TopicTest", b"T", b"", b"Topic\xff\xfe", b"t\xc3\xa9", b"%RETRY%g"])
    | st.binary(max_size=127)
    | st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")[:255])
)
NAME = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT", b"X", b"", b"TAG", b"\xff"])
VALUE = st.sampled_from(
    [b"", b" ", b"  k1  k2 ", b"TagA", b"k1 k2", b"\x01", b"Tag\xc3", b"U\xed\xa0\x80", b"\xe6\x97"]
) | st.binary(max_size=20)
SEGMENT = st.tuples(NAME, VALUE).map(lambda p: p[0] + b"\x01" + p[1]) | VALUE
PROPS = st.tuples(st.lists(SEGMENT, max_size=8), st.booleans()).map(
    lambda t: b"\x02".join(t[0]) + (b"\x02" if t[1] else b"")
) | st.binary(max_size=60)
# How a body is stored: as is, zlib with and without the type bits, bytes zlib cannot read
# with COMPRESSED set, zlib under LZ4 / ZSTD type bits (handed over as stored).
BODY_KIND = st.sampled_from(["plain", "zlib", "zlib-typed", "not-zlib", "lz4", "zstd"])
# Bits of SYSFLAG that are not the V6 ones (those follow the hosts) or COMPRESSED.
OTHER_FLAGS = st.sampled_from([0, 0x2, 0x4, 0x8, 0xC, 0x40, 0x80, 0x7FFF0000])


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "topic": draw(TOPIC),
        "body": draw(st.binary(max_size=300)),
        "body_kind": draw(BODY_KIND),
        "properties": draw(PROPS),
        "other_flags": draw(OTHER_FLAGS),
        "born_host": draw(HOST),
        "store_host": draw(HOST),
        "queue_id": draw(I32),
        "flag": draw(I32),
        "born_timestamp": draw(I64),
        "store_timestamp": draw(I64),
        "queue_offset": draw(I64),
        "commit_log_offset": draw(st.integers(0, 2**63 - 1)),
        "reconsume_times": draw(I32),
        "prepared": draw(I64),
        # bytes past the fields make the stream an error; mostly none, so most streams decode
        "pad": draw(st.sampled_from([b""] * 12 + [b"\x00", b"\x02TAGS\x01x", b"\xff" * 7])),
    }


def stored_body(r: dict[str, Any]) -> tuple[bytes, int]:
    """(the body as stored, the COMPRESSED and type bits) for ``r``'s body kind."""
    body, kind = r["body"], r["body_kind"]
    if kind == "plain":
        return body, 0
    if kind == "not-zlib":
        return b"\x00not zlib" + body, COMPRESSED_FLAG
    packed = zlib.compress(body)
    bits = {"zlib": 0, "zlib-typed": COMPRESSION_ZLIB, "lz4": 0x100, "zstd": 0x200}[kind]
    return packed, COMPRESSED_FLAG | bits


def encode(r: dict[str, Any]) -> bytes:
    """One record as the store leaves it, with ``r["pad"]`` inside TOTALSIZE past the fields
    (which the decoders refuse)."""
    body, bits = stored_body(r)
    sys_flag = record_sys_flag(r["other_flags"] | bits, r["born_host"], r["store_host"])
    record = bytearray(
        encode_record(
            topic=r["topic"],
            queue_id=r["queue_id"],
            body=body,
            flag=r["flag"],
            properties=r["properties"],
            sys_flag=sys_flag,
            born_timestamp=r["born_timestamp"],
            born_host=r["born_host"],
            store_host=r["store_host"],
            reconsume_times=r["reconsume_times"],
            prepared_transaction_offset=r["prepared"],
        )
    )
    patch_append_fields(
        record,
        0,
        queue_offset=r["queue_offset"],
        commit_log_offset=r["commit_log_offset"],
        store_timestamp=r["store_timestamp"],
        sys_flag=sys_flag,
    )
    record += r["pad"]
    record[0:4] = len(record).to_bytes(4, "big")
    return bytes(record)


STREAMS = st.lists(records(), max_size=5)


def expected_fields(r: dict[str, Any], broker_name: str) -> dict[str, Any]:
    """What the eager decoder (RocketMQ ``MessageDecoder.decode``) made of record ``r``:
    built from its parts, not from the bytes."""
    stored, bits = stored_body(r)
    body = r["body"] if r["body_kind"] in ("zlib", "zlib-typed") else stored
    props = java_string2message_properties(r["properties"].decode("utf-8", "replace"))
    keys = props.get("KEYS")
    offset_id = offset_msg_id(r["store_host"], r["commit_log_offset"])
    return {
        "topic": r["topic"].decode("utf-8", "replace"),
        "body": body,
        "tags": props.get("TAGS"),
        "keys": [k for k in keys.split(" ") if k] if keys else [],
        "properties": props,
        "msg_id": props.get("UNIQ_KEY") or offset_id,
        "offset_msg_id": offset_id,
        "queue_id": r["queue_id"],
        "queue_offset": r["queue_offset"],
        "commit_log_offset": r["commit_log_offset"],
        "born_timestamp": r["born_timestamp"],
        "store_timestamp": r["store_timestamp"],
        "born_host": host_text(r["born_host"]),
        "store_host": host_text(r["store_host"]),
        "reconsume_times": r["reconsume_times"],
        "sys_flag": record_sys_flag(r["other_flags"] | bits, r["born_host"], r["store_host"]),
        "flag": r["flag"],
        "broker_name": broker_name,
        "body_crc": zlib.crc32(stored) & 0x7FFFFFFF,
    }


def typed(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields with their types, dicts as their items in order: what must be equal."""
    return {
        name: (type(v), list(v.items()) if isinstance(v, dict) else v) for name, v in fields.items()
    }


def read(views: list[Any], order: tuple[str, ...] = FIELDS) -> list[dict[str, Any]]:
    """Every field of each view, read (so decoded) in ``order``."""
    return [typed({name: getattr(v, name) for name in order}) for v in views]


def outcome(decode: Callable[..., list[Any]], body: Any, cls: type[Any]) -> tuple[Any, ...]:
    """What decoding gives: the error's type and text, or every field of every view (all
    of which must read without error: a malformed record fails the decode, not a read)."""
    try:
        views = decode(body, "broker-a", cls)
    except Exception as exc:  # compared, not handled: any error must be the same one
        return ("raised", type(exc), str(exc))
    assert all(type(v) is cls for v in views)
    return ("decoded", read(views))


def same(body: Any) -> tuple[Any, ...]:
    """Decode ``body`` with both implementations, assert they agree, return the outcome."""
    compiled = _compiled()
    got = outcome(compiled.decode_records, body, _compiled_view())
    assert got == outcome(view.decode_records_py, body, PureView)
    # The state a decoder leaves is the same: either set of lazy fields reads either's views.
    assert got == outcome(compiled.decode_records, body, PureView)
    assert got == outcome(view.decode_records_py, body, _compiled_view())
    return got


# ------------------------------------------------------------------------------- tests


def test_the_module_binds_the_compiled_functions() -> None:
    compiled = _compiled()
    for name in ("decode_records", "attach_lazy_fields"):
        expected = getattr(view, f"{name}_py") if _ext.DISABLED else getattr(compiled, name)
        assert getattr(view, name) is expected, name
    descriptor = type(MessageExt.__dict__["topic"])
    assert (descriptor.__module__ == "codec._cview") is not _ext.DISABLED


@settings(max_examples=300, deadline=None)
@given(stream=STREAMS)
def test_random_streams(stream: list[dict[str, Any]]) -> None:
    body = b"".join(encode(r) for r in stream)
    got = same(body)
    padded = next((i for i, r in enumerate(stream) if r["pad"]), None)
    if padded is None:
        assert got == ("decoded", [typed(expected_fields(r, "broker-a")) for r in stream])
    else:
        at = sum(len(encode(r)) for r in stream[:padded])
        assert got[:2] == ("raised", RecordError)
        assert got[2].startswith(f"record at byte {at}: its fields end at byte ")
    assert same(memoryview(body)) == same(bytearray(body)) == got


@settings(max_examples=300, deadline=None)
@given(stream=st.lists(records(), min_size=1, max_size=3), data=st.data())
def test_fields_read_in_any_order(stream: list[dict[str, Any]], data: st.DataObject) -> None:
    """A lazy field does not depend on which were read before it."""
    stream = [{**r, "pad": b""} for r in stream]
    body = b"".join(encode(r) for r in stream)
    order = tuple(data.draw(st.permutations(FIELDS)))
    expected = [typed(expected_fields(r, "b")) for r in stream]
    for decode, cls in _implementations():
        got = read(decode(body, "b", cls), order)
        assert [dict(sorted(v.items())) for v in got] == [dict(sorted(v.items())) for v in expected]


def _implementations() -> list[tuple[Callable[..., list[Any]], type[MessageExt]]]:
    found: list[tuple[Callable[..., list[Any]], type[MessageExt]]] = [
        (view.decode_records_py, PureView)
    ]
    if not _ext.DISABLED:
        try:
            import codec._cview as compiled
        except ImportError:
            return found
        found.append((compiled.decode_records, _compiled_view()))
    return found


# cut the stream, flip a bit, write an int / a short / a byte over a length field (or any
# 4 bytes), append a few bytes
MUTATION = st.sampled_from(["cut", "flip", "int", "short", "byte", "tail"])


@settings(max_examples=500, deadline=None)
@given(
    stream=st.lists(records(), min_size=1, max_size=3),
    mutations=st.lists(st.tuples(MUTATION, st.integers(0, 2**16), I32), min_size=1, max_size=3),
)
@example(
    stream=[
        {
            **{k: 0 for k in ("queue_id", "flag", "born_timestamp", "store_timestamp")},
            **{k: 0 for k in ("queue_offset", "commit_log_offset", "reconsume_times", "prepared")},
            "topic": b"T",
            "body": b"x",
            "body_kind": "plain",
            "properties": b"TAGS\x01a",
            "other_flags": 0,
            "born_host": HOST_PAIRS[3][0],
            "store_host": HOST_PAIRS[3][1],
            "pad": b"",
        }
    ],
    mutations=[("int", 84, 10_000)],
)
def test_cut_or_garbled_streams(
    stream: list[dict[str, Any]], mutations: list[tuple[str, int, int]]
) -> None:
    buf = bytearray(b"".join(encode(r) for r in stream))
    # the length fields of the records: where a flip does the most harm
    lengths, pos = [], 0
    for r in stream:
        n = int.from_bytes(buf[pos : pos + 4], "big")
        flags = buf[pos + 39]
        at = 84 + (12 if flags & 0x10 else 0) + (12 if flags & 0x20 else 0)
        topic_at = pos + at + 4 + int.from_bytes(buf[pos + at : pos + at + 4], "big")
        lengths += [pos, pos + 36, pos + at, topic_at, topic_at + 1 + len(r["topic"])]
        pos += n
    for kind, where, value in mutations:
        if not buf:
            break
        i = where % len(buf)
        if kind == "cut":
            del buf[i:]
        elif kind == "flip":
            buf[i] ^= 1 << (value % 8)
        elif kind == "int":
            at = lengths[where % len(lengths)] if where % 2 else i
            buf[at : at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
        elif kind == "short":
            at = lengths[where % len(lengths)]
            buf[at : at + 2] = (value & 0xFFFF).to_bytes(2, "big")
        elif kind == "byte":
            at = lengths[where % len(lengths)]
            if at < len(buf):
                buf[at] = value & 0xFF
        else:
            buf += (value & 0xFFFFFFFF).to_bytes(4, "big")[: where % 5]
    same(bytes(buf))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"\x00" * 47, "truncated record header at byte 0"),
        (b"\x00\x00\x00\x58" + b"\x00" * 40, "truncated record header at byte 0"),
        (b"\x00\x00\x00\x10" + b"\x00" * 100, "record at byte 0 claims 16 bytes"),
        (b"\xff\xff\xff\xff" + b"\x00" * 100, "record at byte 0 claims -1 bytes"),
    ],
)
def test_errors_name_the_record(body: bytes, error: str) -> None:
    assert same(body) == ("raised", RecordError, error)


def small_record(hosts: tuple[Any, Any]) -> dict[str, Any]:
    """A short plain record (topic T, body "body", TAGS=a, every number 1) between ``hosts``."""
    return {
        "topic": b"T",
        "body": b"body",
        "body_kind": "plain",
        "properties": b"TAGS\x01a",
        "other_flags": 0,
        "born_host": hosts[0],
        "store_host": hosts[1],
        "pad": b"",
        **dict.fromkeys(("queue_id", "flag", "born_timestamp", "store_timestamp"), 1),
        **dict.fromkeys(("queue_offset", "commit_log_offset", "reconsume_times", "prepared"), 1),
    }


def test_errors_after_good_records_name_their_byte() -> None:
    one = encode(small_record(HOST_PAIRS[1]))
    at = 84 + 12 + len(one)  # BODYLENGTH of the second record (born host IPv6)
    liar = bytearray(one + one)
    liar[at : at + 4] = (10_000).to_bytes(4, "big")
    assert same(bytes(liar)) == (
        "raised",
        RecordError,
        f"record at byte {len(one)}: body length 10000 overruns it",
    )
    liar = bytearray(one + one)
    topic_at = at + 4 + 4
    liar[topic_at] = 200
    assert same(bytes(liar))[2] == f"record at byte {len(one)}: topic length overruns it"
    liar = bytearray(one + one)
    liar[topic_at + 2 : topic_at + 4] = b"\x80\x00"
    assert same(bytes(liar))[2] == f"record at byte {len(one)}: properties length overruns it"


def test_a_record_claiming_the_next_one_is_refused() -> None:
    """TOTALSIZE leads to the next record: a first record whose TOTALSIZE covers the second
    would hand back one message of two (and one padded with bytes past its fields, its
    tail unread), so the fields must end where TOTALSIZE does."""
    r = small_record(HOST_PAIRS[0])
    one = encode(r)
    assert same(one + one)[0] == "decoded"
    swallower = bytearray(one + one)
    swallower[0:4] = (2 * len(one)).to_bytes(4, "big")
    assert same(bytes(swallower)) == (
        "raised",
        RecordError,
        f"record at byte 0: its fields end at byte {len(one)}, TOTALSIZE says {2 * len(one)}",
    )
    padded = encode({**r, "pad": b"\x00"})
    assert same(one + padded)[2] == (
        f"record at byte {len(one)}: its fields end at byte {2 * len(one)}, "
        f"TOTALSIZE says {2 * len(one) + 1}"
    )


@pytest.mark.parametrize("make", [dict, lambda *a: a, int, object], ids=repr)
def test_a_view_class_that_is_no_message_ext_is_the_pure_decoders(make: Any) -> None:
    compiled = _compiled()
    body = encode(
        {
            **{k: 0 for k in ("queue_id", "flag", "born_timestamp", "store_timestamp")},
            **{k: 0 for k in ("queue_offset", "commit_log_offset", "reconsume_times", "prepared")},
            "topic": b"T",
            "body": b"x",
            "body_kind": "plain",
            "properties": b"",
            "other_flags": 0,
            "born_host": HOST_PAIRS[0][0],
            "store_host": HOST_PAIRS[0][1],
            "pad": b"",
        }
    )

    def result(decode: Callable[..., Any]) -> tuple[Any, ...]:
        try:
            got = decode(body, "b", make)
        except Exception as exc:  # compared, not handled
            return ("raised", type(exc), str(exc))
        return ("decoded", [type(v) for v in got])

    assert result(compiled.decode_records) == result(view.decode_records_py)
    assert compiled.decode_records(b"", "b", make) == view.decode_records_py(b"", "b", make) == []


# ------------------------------------------------------------------------ lazy fields

ONE = {
    "topic": b"TopicLazy",
    "body": b"lazy body " * 50,
    "body_kind": "zlib",
    "properties": b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02color\x01red",
    "other_flags": 0,
    "born_host": (socket.inet_pton(socket.AF_INET6, "2001:db8::7"), 5),
    "store_host": (socket.inet_aton("10.0.0.1"), 10911),
    "queue_id": 1,
    "flag": 2,
    "born_timestamp": 3,
    "store_timestamp": 4,
    "queue_offset": 5,
    "commit_log_offset": 6,
    "reconsume_times": 7,
    "prepared": 8,
    "pad": b"",
}


def _one(decode: Callable[..., list[Any]], cls: type[Any]) -> Any:
    (got,) = decode(encode(ONE), "broker-a", cls)
    return got


@over_record_views()
def test_assigning_a_field_changes_only_that_field(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    expected = expected_fields(ONE, "broker-a")
    for name in FIELDS:
        msg = _one(decode_records, view_class)
        setattr(msg, name, "changed")
        assert getattr(msg, name) == "changed"
        assert view_fields(msg) == {**expected, name: "changed"}, name


@over_record_views()
def test_fields_come_from_the_record_not_from_changed_header_fields(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    """The lazy fields read the record's SYSFLAG and offset, as the eager decoder did."""
    msg = _one(decode_records, view_class)
    msg.sys_flag = 0
    msg.commit_log_offset = 99
    msg.broker_name = "other"
    assert msg.body == ONE["body"]
    assert msg.offset_msg_id == offset_msg_id(cast("tuple[bytes, int]", ONE["store_host"]), 6)


@over_record_views()
def test_put_properties_before_and_after_they_are_read(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    record_props = expected_fields(ONE, "broker-a")["properties"]
    msg = _one(decode_records, view_class)
    extra = {"MIN_OFFSET": "0", "TAGS": "not the tag"}
    msg.put_properties(extra)
    msg.put_properties({"MAX_OFFSET": "9"})
    extra["MIN_OFFSET"] = "changed after the put"
    assert msg.tags == "TagA"  # tags stay the record's, as after properties.update
    put = {"MIN_OFFSET": "0", "TAGS": "not the tag", "MAX_OFFSET": "9"}
    assert msg.properties == {**record_props, **put}
    msg.put_properties({"MAX_OFFSET": "10"})
    assert msg.properties["MAX_OFFSET"] == "10"

    msg = _one(decode_records, view_class)
    msg.put_properties({"MIN_OFFSET": "0"})
    msg.properties = {"a": "b"}  # replaced: what was put is gone with the old ones
    assert msg.properties == {"a": "b"}
    msg.put_properties({"c": "d"})
    assert msg.properties == {"a": "b", "c": "d"}

    built = view_class(**expected_fields(ONE, "broker-a"))
    built.put_properties({"MIN_OFFSET": "0"})
    assert built.properties == {**record_props, "MIN_OFFSET": "0"}


@over_record_views()
def test_a_decoded_view_is_the_dataclass_built_from_its_fields(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    expected = expected_fields(ONE, "broker-a")
    built = view_class(**expected)
    msg = _one(decode_records, view_class)
    assert msg == built
    assert repr(_one(decode_records, view_class)) == repr(built)
    assert _one(decode_records, view_class) != view_class(**{**expected, "tags": "B"})
    assert dataclasses.replace(_one(decode_records, view_class), flag=9) == view_class(
        **{**expected, "flag": 9}
    )
    assert copy.copy(_one(decode_records, view_class)) == built
    assert copy.deepcopy(_one(decode_records, view_class)) == built
    assert dataclasses.asdict(_one(decode_records, view_class)) == dataclasses.asdict(built)
    with pytest.raises(AttributeError, match="body"):
        del built.body
        _ = built.body


@over_record_views()
def test_a_view_owns_its_bytes(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    """A reply body in a buffer that is reused after the decode: the views are unchanged."""
    buf = bytearray(encode(ONE))
    (msg,) = decode_records(memoryview(buf), "broker-a", view_class)
    buf[:] = bytes(len(buf))
    assert view_fields(msg) == expected_fields(ONE, "broker-a")


def test_only_the_lazy_fields_have_descriptors() -> None:
    """The header fields are plain instance attributes, set by the decoders."""
    assert set(LAZY_FIELDS) < set(FIELDS)
    for name in FIELDS:
        assert (name in vars(MessageExt)) == (name in LAZY_FIELDS), name


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's key-sharing dicts")
@over_record_views()
def test_lazy_fields_fit_the_instance_values(
    decode_records: Callable[..., list[Any]], view_class: type[Any]
) -> None:
    """Every lazy field read, on a view made after many others: its attributes are still the
    inline values its class's shared keys made room for, not a dict of its own (which a
    name entered late would cost each instance)."""
    for _ in range(50):
        for msg in decode_records(encode(ONE) * 4, "b", view_class):
            msg.topic  # noqa: B018 - read to decode
    msg = _one(decode_records, view_class)
    msg.put_properties({"MIN_OFFSET": "0"})
    view_fields(msg)
    # a dict of its own would hold its attributes, the header fields among them
    assert not [r for r in gc.get_referents(msg) if isinstance(r, dict) and "queue_id" in r]


@pytest.mark.parametrize(
    ("decode", "cls"),
    [(view.decode_records, MessageExt), (view.decode_records_py, PureView)],
    ids=["bound", "pure"],
)
def test_a_view_is_pickled_decoded_without_its_reply(
    decode: Callable[..., list[Any]], cls: type[Any]
) -> None:
    first, second = decode(encode(ONE) * 2, "broker-a", cls)
    built = cls(**expected_fields(ONE, "broker-a"))
    pickled = pickle.dumps(first)
    assert len(pickled) < len(pickle.dumps(built)) + 100  # not the two records' bytes
    assert pickle.loads(pickled) == built  # noqa: S301 - our own bytes
    second.put_properties({"MIN_OFFSET": "0"})
    assert pickle.loads(pickle.dumps(second)).properties["MIN_OFFSET"] == "0"  # noqa: S301
