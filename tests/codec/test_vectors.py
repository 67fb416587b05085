"""The codec over the golden wire vectors: what real RocketMQ clients sent and accepted.

The frames of tests/remoting/vectors (its README.md) were recorded from the official C++-core
Python client (PyPI ``rocketmq`` 0.4.4) and the JavaScript client ali-ons 3.12, and are parsed
with the helpers of tests/remoting/test_vectors.py. From them:

- every SEND_MESSAGE / SEND_MESSAGE_V2 request's properties string (header field
  ``properties``, ``i`` in V2) decodes and re-encodes to an equal dict, its names the codec's;
- every reply to a PULL_MESSAGE with a body holds stored records: each decodes, verifies at its
  own commit-log offset with its body CRC, reads the same through ``decode_records``, and
  encodes back from its decoded fields to the very bytes;
- the one batch in the captures (the C++ client's SEND_MESSAGE with ``batch`` "1"; no client
  sent SEND_BATCH_MESSAGE) splits into entries that encode back to its body, and makes the
  records the pull replies hold.

Each function runs in every implementation there is (tests/codec/conftest.py).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from codec import (
    BORNHOST_V6_FLAG,
    POS_BORN_HOST,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    STOREHOSTADDRESS_V6_FLAG,
    EncodedBatch,
    Host,
    RecordInfo,
    host_bytes,
    host_text,
    store_timestamp_pos,
)
from remoting.codes import RequestCode
from tests.codec.conftest import over, over_record_views, pure, view_fields
from tests.remoting.test_vectors import VECTORS, Vector, decode_whole

Decode = Callable[..., RecordInfo]
Verify = Callable[..., int]

# References for building what the implementations under test are compared with.
decode_record: Decode = pure("record", "decode_record")
decode_properties: Callable[[str], dict[str, str]] = pure("properties", "decode_properties")
split_batch = pure("batch", "split_batch")

SENDS = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
# Names the captured clients set that the codec has a constant for.
CODEC_NAMES = {
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    PROPERTY_DELAY,
    PROPERTY_REAL_TOPIC,
    PROPERTY_REAL_QUEUE_ID,
}
USER_NAMES = {"color", "seq"}  # what the capture scripts set as user properties


def _ids(vector: Vector) -> str:
    return vector.id


def _body(vector: Vector) -> bytes:
    return decode_whole(vector.data).body_bytes


def _send_properties(vector: Vector) -> str:
    ext = decode_whole(vector.data).ext_fields
    return ext["i" if vector.code == RequestCode.SEND_MESSAGE_V2 else "properties"]


def _pull_replies() -> list[Vector]:
    """The replies to PULL_MESSAGE requests (same connection and opaque) that have a body."""
    pulls = {
        (v.source, v.raw["conn"], v.header["opaque"])
        for v in VECTORS
        if v.to_server and v.code == RequestCode.PULL_MESSAGE
    }
    return [
        v
        for v in VECTORS
        if not v.to_server
        and (v.source, v.raw["conn"], v.header["opaque"]) in pulls
        and v.raw["body_length"] > 0
    ]


SEND_VECTORS = [v for v in VECTORS if v.to_server and v.code in SENDS]
PULL_REPLIES = _pull_replies()
BATCH_SENDS = [
    v
    for v in VECTORS
    if v.to_server
    and (
        v.code == RequestCode.SEND_BATCH_MESSAGE
        or (v.code == RequestCode.SEND_MESSAGE and v.ext.get("batch") in ("1", "true"))
    )
]


def _records(body: bytes) -> list[RecordInfo]:
    infos = []
    pos = 0
    while pos < len(body):
        infos.append(decode_record(body, pos))
        pos += infos[-1].total_size
    return infos


def _hosts(record: bytes, info: RecordInfo) -> tuple[Host, Host]:
    """BORNHOST and STOREHOST of a record, each 4 or 16 address bytes + a port."""
    born_len = host_bytes(info.sys_flag, BORNHOST_V6_FLAG)
    born = record[POS_BORN_HOST : POS_BORN_HOST + born_len]
    at = store_timestamp_pos(info.sys_flag) + 8
    store = record[at : at + host_bytes(info.sys_flag, STOREHOSTADDRESS_V6_FLAG)]
    return (born[:-4], int.from_bytes(born[-4:], "big")), (
        store[:-4],
        int.from_bytes(store[-4:], "big"),
    )


def test_the_vectors_have_what_these_tests_read() -> None:
    assert {v.raw["client"] for v in SEND_VECTORS} == {"cpp_client", "ali_ons"}
    assert {v.code for v in SEND_VECTORS} == set(SENDS)
    assert {v.raw["client"] for v in PULL_REPLIES} == {"cpp_client", "ali_ons"}
    assert sum(len(_records(_body(v))) for v in PULL_REPLIES) >= 10
    assert [v.raw["client"] for v in BATCH_SENDS] == ["cpp_client"]
    # no client in the captures sent SEND_BATCH_MESSAGE (code 320)
    assert not [v for v in VECTORS if v.to_server and v.code == RequestCode.SEND_BATCH_MESSAGE]


# ------------------------------------------------------------------------- (a) properties


@over("properties", "decode_properties", "decode")
@over("properties", "encode_properties", "encode")
@pytest.mark.parametrize("vector", SEND_VECTORS, ids=_ids)
def test_send_properties_round_trip(
    decode: Callable[[str], dict[str, str]],
    encode: Callable[[dict[str, str]], str],
    vector: Vector,
) -> None:
    text = _send_properties(vector)
    props = decode(text)
    assert props
    assert decode(encode(props)) == props
    # Both clients end the string with a \x02 (Java 4.9.1+ does not): the pairs are the same.
    assert text.endswith("\x02")
    assert encode(props) + "\x02" == text
    # Each pair is there once; its name is the codec's where the codec names it.
    assert len(props) == text.count("\x01")
    assert set(props) <= CODEC_NAMES | USER_NAMES
    if vector.raw["client"] == "cpp_client":
        assert props[PROPERTY_WAIT] == "true"
    if vector in BATCH_SENDS:  # the messages' own properties are in the body
        assert props == {PROPERTY_WAIT: "true"}
        return
    assert props[PROPERTY_TAGS] in ("TagA", "TagB")
    assert props[PROPERTY_KEYS] == "k1 k2"
    if vector.raw["client"] == "cpp_client":
        assert len(props[PROPERTY_UNIQ_KEY]) == 32


@over("properties", "property_value")
@pytest.mark.parametrize("vector", SEND_VECTORS, ids=_ids)
def test_send_property_values(impl: Callable[[bytes, bytes], bytes | None], vector: Vector) -> None:
    text = _send_properties(vector)
    props = decode_properties(text)
    for name in (*CODEC_NAMES, *USER_NAMES, "absent"):
        got = impl(text.encode(), name.encode())
        assert (None if got is None else got.decode()) == props.get(name), name


# ------------------------------------------------------------------- (b) pulled records


@over("record", "decode_record")
@over("record", "verify_record", "verify")
@pytest.mark.parametrize("vector", PULL_REPLIES, ids=_ids)
def test_pulled_records_decode_and_verify(impl: Decode, verify: Verify, vector: Vector) -> None:
    body = _body(vector)
    pos = 0
    count = 0
    while pos < len(body):
        info = impl(body, pos, check_crc=True)
        assert verify(body, pos, info.commit_log_offset, check_crc=True) == info.total_size
        start = pos + info.body_offset
        assert zlib.crc32(body[start : start + info.body_length]) & 0x7FFFFFFF == info.body_crc
        assert info.topic == "vec_topic"
        props = decode_properties(info.properties)
        assert props[PROPERTY_KEYS] == "k1 k2"
        assert info.store_timestamp >= info.born_timestamp
        pos += info.total_size
        count += 1
    assert pos == len(body)
    # consecutive queue offsets, up to the one the reply says to pull next
    offsets = [info.queue_offset for info in _records(body)]
    assert offsets == list(range(offsets[0], offsets[0] + count))
    assert int(vector.ext["nextBeginOffset"]) == offsets[-1] + 1


@over("record", "encode_record")
@over("record", "patch_append_fields", "patch")
@pytest.mark.parametrize("vector", PULL_REPLIES, ids=_ids)
def test_pulled_records_encode_back_to_the_bytes(
    impl: Callable[..., bytes], patch: Callable[..., None], vector: Vector
) -> None:
    body = _body(vector)
    pos = 0
    for info in _records(body):
        record = body[pos : pos + info.total_size]
        born_host, store_host = _hosts(record, info)
        again = bytearray(
            impl(
                topic=info.topic.encode(),
                queue_id=info.queue_id,
                body=record[info.body_offset : info.body_offset + info.body_length],
                flag=info.flag,
                properties=info.properties.encode(),
                sys_flag=info.sys_flag,
                born_timestamp=info.born_timestamp,
                born_host=born_host,
                store_host=store_host,
                reconsume_times=info.reconsume_times,
                prepared_transaction_offset=info.prepared_transaction_offset,
            )
        )
        patch(
            again,
            0,
            queue_offset=info.queue_offset,
            commit_log_offset=info.commit_log_offset,
            store_timestamp=info.store_timestamp,
            sys_flag=info.sys_flag,
        )
        assert bytes(again) == record
        pos += info.total_size


@over_record_views()
@pytest.mark.parametrize("vector", PULL_REPLIES, ids=_ids)
def test_pulled_records_read_by_a_client(
    decode_records: Callable[..., list[Any]], view_class: type[Any], vector: Vector
) -> None:
    body = _body(vector)
    views = decode_records(body, "broker-a", view_class)
    infos = _records(body)
    assert len(views) == len(infos)
    pos = 0
    for got, info in zip(views, infos, strict=True):
        record = body[pos : pos + info.total_size]
        born_host, store_host = _hosts(record, info)
        props = decode_properties(info.properties)
        offset_id = (store_host[0] + store_host[1].to_bytes(4, "big")).hex().upper()
        offset_id += f"{info.commit_log_offset:016X}"
        assert view_fields(got) == {
            "topic": info.topic,
            "body": record[info.body_offset : info.body_offset + info.body_length],
            "tags": props.get(PROPERTY_TAGS),
            "keys": props[PROPERTY_KEYS].split(" "),
            "properties": props,
            "msg_id": props.get(PROPERTY_UNIQ_KEY, offset_id),
            "offset_msg_id": offset_id,
            "queue_id": info.queue_id,
            "queue_offset": info.queue_offset,
            "commit_log_offset": info.commit_log_offset,
            "born_timestamp": info.born_timestamp,
            "store_timestamp": info.store_timestamp,
            "born_host": host_text(born_host),
            "store_host": host_text(store_host),
            "reconsume_times": info.reconsume_times,
            "sys_flag": info.sys_flag,
            "flag": info.flag,
            "broker_name": "broker-a",
            "body_crc": info.body_crc,
        }
        pos += info.total_size


# ------------------------------------------------------------------------------ (c) batch


@over("batch", "split_batch")
@over("batch", "encode_batch_entry", "encode")
@pytest.mark.parametrize("vector", BATCH_SENDS, ids=_ids)
def test_batch_body_splits_and_encodes_back(
    impl: Callable[..., list[tuple[int, memoryview, bytes]]],
    encode: Callable[[int, bytes, bytes], bytes],
    vector: Vector,
) -> None:
    body = _body(vector)
    entries = impl(body)
    assert len(entries) == 2
    assert [bytes(b) for _f, b, _p in entries] == [b"batch 0", b"batch 1"]
    assert b"".join(encode(flag, bytes(b), props) for flag, b, props in entries) == body
    for _flag, _b, props in entries:
        parsed = decode_properties(props.decode())
        assert set(parsed) <= CODEC_NAMES | USER_NAMES
        assert len(parsed[PROPERTY_UNIQ_KEY]) == 32


@over("batch", "encode_batch_records")
@pytest.mark.parametrize("vector", BATCH_SENDS, ids=_ids)
def test_batch_makes_the_pulled_records(impl: Callable[..., EncodedBatch], vector: Vector) -> None:
    """The records a pull reply holds for the batch's messages (found by UNIQ_KEY) are
    what ``encode_batch_records`` makes of the body. The recording stand-in stored the
    entries' own properties only: the batch-level ``WAIT`` (which Java would append) is not
    in them, so the batch properties given here are empty."""
    body = _body(vector)
    uniq = [decode_properties(p.decode())[PROPERTY_UNIQ_KEY] for _f, _b, p in split_batch(body)]
    found: dict[str, bytes] = {}
    for reply in PULL_REPLIES:
        data = _body(reply)
        pos = 0
        for info in _records(data):
            key = decode_properties(info.properties).get(PROPERTY_UNIQ_KEY)
            if key in uniq:
                found[key] = data[pos : pos + info.total_size]
            pos += info.total_size
    assert set(found) == set(uniq)
    stored = b"".join(found[key] for key in uniq)
    first = decode_record(stored, 0)
    born_host, store_host = _hosts(stored, first)
    assert first.born_timestamp == int(vector.ext["bornTimestamp"])
    assert first.queue_id == int(vector.ext["queueId"])
    assert first.topic == vector.ext["topic"]
    encoded = impl(
        bytearray(16), body, b"", first.topic.encode(), first.queue_id, first.sys_flag,
        first.born_timestamp, born_host, store_host, first.queue_offset,
        first.commit_log_offset, first.store_timestamp,
    )  # fmt: skip
    assert bytes(encoded.buf[: encoded.total_bytes]) == stored
    assert encoded.sizes == [len(found[key]) for key in uniq]
