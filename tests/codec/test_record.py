"""The commit-log record (docs/store-format.md §2.2): encoded field by field as documented,
read back by ``decode_record``, checked by ``verify_record`` and read by a client's
``decode_records``, and refused, with RecordError and nothing else, when it is cut short, lies
about its size or lengths. Topics and properties that are not UTF-8 are still records (decoded
with U+FFFD), IPv6 hosts move the fields after them, properties may take 32,767 bytes. Each
function runs in every implementation there is (tests/codec/conftest.py).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from codec import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_BYTES,
    Host,
    RecordError,
    RecordInfo,
    host_text,
    record_sys_flag,
)
from tests.codec.conftest import (
    HOST_PAIR_IDS,
    HOST_PAIRS,
    over,
    over_record_views,
    pure,
    view_fields,
)
from tests.support import BORN_HOST, BORN_HOST_V6, BORN_TIMESTAMP, STORE_HOST, STORE_HOST_V6

Decode = Callable[..., RecordInfo]
Verify = Callable[..., int]
DecodeRecords = Callable[..., list[Any]]

# The references that build the records under test.
encode_record = pure("record", "encode_record")
patch_append_fields = pure("record", "patch_append_fields")

STORE_TIMESTAMP = 1_700_000_000_999
QUEUE_OFFSET = 41


def stored(
    *,
    topic: bytes = b"TopicTest",
    body: bytes = b"golden body \xc3\xa9",
    properties: bytes = b"TAGS\x01TagA\x02KEYS\x01k1 k2",
    hosts: tuple[Host, Host] = HOST_PAIRS[0],
    sys_flag: int = 0,
    commit_log_offset: int = 0,
) -> bytes:
    """A record as the store leaves it: encoded, then the append fields patched in."""
    born_host, store_host = hosts
    record = bytearray(
        encode_record(
            topic=topic,
            queue_id=3,
            body=body,
            flag=0x5A5A,
            properties=properties,
            sys_flag=sys_flag,
            born_timestamp=BORN_TIMESTAMP,
            born_host=born_host,
            store_host=store_host,
            reconsume_times=2,
            prepared_transaction_offset=4242,
        )
    )
    patch_append_fields(
        record,
        0,
        queue_offset=QUEUE_OFFSET,
        commit_log_offset=commit_log_offset,
        store_timestamp=STORE_TIMESTAMP,
        sys_flag=record_sys_flag(sys_flag, born_host, store_host),
    )
    return bytes(record)


def _host(host: Host) -> bytes:
    return host[0] + struct.pack(">i", host[1])


# ------------------------------------------------------------------------------- layout


@over("record", "encode_record")
@pytest.mark.parametrize("hosts", HOST_PAIRS, ids=HOST_PAIR_IDS)
def test_encode_record_packs_every_documented_field(
    impl: Callable[..., bytes], hosts: tuple[Host, Host]
) -> None:
    """Each field packed on its own, in the order of store-format.md §2.2; the append
    fields (QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP) are left 0."""
    born_host, store_host = hosts
    topic, body, props = b"TopicTest", "golden body é".encode(), b"TAGS\x01TagA"
    v6_bits = (0x10 if len(born_host[0]) == 16 else 0) | (0x20 if len(store_host[0]) == 16 else 0)
    sys_flag = 0x8 | 0x2  # COMMIT transaction type, MULTI_TAGS
    total = 91 + len(body) + len(topic) + len(props) + (12 if v6_bits & 0x10 else 0)
    total += 12 if v6_bits & 0x20 else 0
    expected = b"".join(
        (
            struct.pack(">i", total),
            struct.pack(">i", -626843481),  # 0xDAA320A7
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
            struct.pack(">i", 3),
            struct.pack(">i", 0x5A5A),
            struct.pack(">q", 0),
            struct.pack(">q", 0),
            struct.pack(">i", sys_flag | v6_bits),
            struct.pack(">q", BORN_TIMESTAMP),
            _host(born_host),
            struct.pack(">q", 0),
            _host(store_host),
            struct.pack(">i", 2),
            struct.pack(">q", 4242),
            struct.pack(">i", len(body)),
            body,
            struct.pack(">b", len(topic)),
            topic,
            struct.pack(">h", len(props)),
            props,
        )
    )
    # The V6 bits come from the host lengths, whatever sys_flag said.
    for given in (sys_flag, sys_flag | 0x30):
        got = impl(
            topic=topic,
            queue_id=3,
            body=body,
            flag=0x5A5A,
            properties=props,
            sys_flag=given,
            born_timestamp=BORN_TIMESTAMP,
            born_host=born_host,
            store_host=store_host,
            reconsume_times=2,
            prepared_transaction_offset=4242,
        )
        assert got == expected


@over("record", "body_crc")
def test_body_crc_is_java_crc32_with_sign_bit_cleared(
    impl: Callable[[bytes | memoryview], int],
) -> None:
    assert zlib.crc32(b"a") == 0xE8B7BE43  # top bit set: the mask matters
    assert impl(b"a") == 0x68B7BE43
    assert impl(b"") == 0
    assert impl(memoryview(b"xa")[1:]) == 0x68B7BE43


@over("record", "record_length")
def test_record_length_is_cal_msg_length(impl: Callable[..., int]) -> None:
    assert impl(0, 0, 0) == 91
    assert impl(5, 9, 7) == 112
    assert impl(5, 9, 7, 0x10) == impl(5, 9, 7, 0x20) == 124
    assert impl(5, 9, 7, 0x30) == 136
    assert impl(0, 1, MAX_PROPERTIES_BYTES) == 91 + 1 + 32_767


# ---------------------------------------------------------------------------- round trip


@over("record", "decode_record")
@pytest.mark.parametrize("hosts", HOST_PAIRS, ids=HOST_PAIR_IDS)
def test_decode_record_reads_every_field(impl: Decode, hosts: tuple[Host, Host]) -> None:
    """IPv6 hosts take 16 address bytes: STORETIMESTAMP and everything after move."""
    body = "golden body é".encode()
    prefix = b"\x00" * 13  # records are read where they are in a larger buffer
    record = stored(body=body, hosts=hosts, sys_flag=0x2, commit_log_offset=13)
    info = impl(prefix + record + b"\xff" * 9, 13, check_crc=True)
    v6_bits = (0x10 if len(hosts[0][0]) == 16 else 0) | (0x20 if len(hosts[1][0]) == 16 else 0)
    body_offset = 88 + (12 if v6_bits & 0x10 else 0) + (12 if v6_bits & 0x20 else 0)
    assert info == RecordInfo(
        total_size=len(record),
        body_crc=zlib.crc32(body) & 0x7FFFFFFF,
        queue_id=3,
        flag=0x5A5A,
        queue_offset=QUEUE_OFFSET,
        commit_log_offset=13,
        sys_flag=0x2 | v6_bits,
        born_timestamp=BORN_TIMESTAMP,
        store_timestamp=STORE_TIMESTAMP,
        reconsume_times=2,
        prepared_transaction_offset=4242,
        body_offset=body_offset,
        body_length=len(body),
        topic="TopicTest",
        properties="TAGS\x01TagA\x02KEYS\x01k1 k2",
    )
    assert record[body_offset : body_offset + len(body)] == body
    store_at = 56 + (12 if v6_bits & 0x10 else 0)
    assert record[store_at : store_at + 8] == struct.pack(">q", STORE_TIMESTAMP)
    assert record[store_at + 8 : store_at + 8 + len(hosts[1][0]) + 4] == _host(hosts[1])


@over("record", "verify_record")
@pytest.mark.parametrize("hosts", HOST_PAIRS, ids=HOST_PAIR_IDS)
def test_verify_record_at_its_offset(impl: Verify, hosts: tuple[Host, Host]) -> None:
    record = stored(hosts=hosts, commit_log_offset=4096)
    buf = b"\x00" * 5 + record + b"\x00" * 3
    assert impl(buf, 5, 4096, check_crc=True) == len(record)
    with pytest.raises(RecordError, match="found at 4097"):
        impl(buf, 5, 4097, check_crc=False)
    wrong_crc = bytearray(buf)
    wrong_crc[5 + 8] ^= 0x01
    assert impl(wrong_crc, 5, 4096, check_crc=False) == len(record)
    with pytest.raises(RecordError, match="CRC"):
        impl(wrong_crc, 5, 4096, check_crc=True)


@over("record", "decode_record")
def test_decode_record_checks_the_crc_when_asked(impl: Decode) -> None:
    record = bytearray(stored())
    info = impl(record, 0)
    record[info.body_offset] ^= 0x01
    assert impl(record, 0).body_crc == info.body_crc  # not checked by default
    with pytest.raises(RecordError, match="CRC"):
        impl(record, 0, check_crc=True)


@over_record_views()
@pytest.mark.parametrize("hosts", HOST_PAIRS, ids=HOST_PAIR_IDS)
def test_decode_records_reads_every_field(
    decode_records: DecodeRecords, view_class: type[Any], hosts: tuple[Host, Host]
) -> None:
    first = stored(hosts=hosts, properties=b"TAGS\x01TagA\x02KEYS\x01k1  k2\x02UNIQ_KEY\x01U1")
    second = stored(hosts=hosts, body=b"", properties=b"", commit_log_offset=len(first))
    got = decode_records(first + second, "broker-a", view_class)
    assert [type(v) for v in got] == [view_class, view_class]
    one, two = (view_fields(v) for v in got)
    store_hex = _host(hosts[1]).hex().upper()
    assert one == {
        "topic": "TopicTest",
        "body": "golden body é".encode(),
        "tags": "TagA",
        "keys": ["k1", "k2"],
        "properties": {"TAGS": "TagA", "KEYS": "k1  k2", "UNIQ_KEY": "U1"},
        "msg_id": "U1",
        "offset_msg_id": store_hex + f"{0:016X}",
        "queue_id": 3,
        "queue_offset": QUEUE_OFFSET,
        "commit_log_offset": 0,
        "born_timestamp": BORN_TIMESTAMP,
        "store_timestamp": STORE_TIMESTAMP,
        "born_host": host_text(hosts[0]),
        "store_host": host_text(hosts[1]),
        "reconsume_times": 2,
        "sys_flag": int.from_bytes(first[36:40], "big"),
        "flag": 0x5A5A,
        "broker_name": "broker-a",
        "body_crc": zlib.crc32("golden body é".encode()) & 0x7FFFFFFF,
    }
    assert two["body"] == b""
    assert two["properties"] == {}
    assert two["tags"] is None
    assert two["keys"] == []
    assert two["msg_id"] == two["offset_msg_id"] == store_hex + f"{len(first):016X}"
    assert decode_records(b"", "broker-a", view_class) == []


def test_ipv6_hosts_read_as_text() -> None:
    assert host_text(BORN_HOST_V6) == "[2001:db8::7]:54321"
    assert host_text(STORE_HOST_V6) == "[::1]:10911"
    assert host_text(BORN_HOST) == "10.0.0.7:54321"
    assert host_text(STORE_HOST) == "127.0.0.1:10911"


# ---------------------------------------------------------------------------- adversarial

RECORDS = [
    pytest.param(stored(), id="ipv4"),
    pytest.param(stored(hosts=HOST_PAIRS[3], commit_log_offset=0), id="ipv6"),
    pytest.param(stored(hosts=HOST_PAIRS[1], body=b"", properties=b""), id="born-v6-empty"),
    pytest.param(stored(hosts=HOST_PAIRS[2], topic=b"t" * 127), id="store-v6-long-topic"),
]


@over("record", "decode_record")
@pytest.mark.parametrize("record", RECORDS)
def test_decode_record_cut_at_every_byte(impl: Decode, record: bytes) -> None:
    for pos in (0, 3):
        buf = b"\x00" * pos + record
        for cut in range(pos, len(buf)):
            with pytest.raises(RecordError):
                impl(buf[:cut], pos)
            with pytest.raises(RecordError):
                impl(memoryview(buf)[:cut], pos, check_crc=True)
        assert impl(buf, pos).total_size == len(record)


@over("record", "verify_record")
@pytest.mark.parametrize("record", RECORDS)
def test_verify_record_cut_at_every_byte(impl: Verify, record: bytes) -> None:
    for pos in (0, 3):
        buf = b"\x00" * pos + record
        for cut in range(pos, len(buf)):
            with pytest.raises(RecordError):
                impl(buf[:cut], pos, 0, check_crc=False)
            with pytest.raises(RecordError):
                impl(memoryview(buf)[:cut], pos, 0, check_crc=True)
        assert impl(buf, pos, 0, check_crc=True) == len(record)


@over_record_views()
@pytest.mark.parametrize("record", RECORDS)
def test_decode_records_cut_at_every_byte(
    decode_records: DecodeRecords, view_class: type[Any], record: bytes
) -> None:
    two = record + record
    for cut in range(1, len(two)):
        if cut == len(record):
            assert len(decode_records(two[:cut], "b", view_class)) == 1
            continue
        with pytest.raises(RecordError):
            decode_records(two[:cut], "b", view_class)


def _with_int(record: bytes, at: int, value: int) -> bytes:
    out = bytearray(record)
    struct.pack_into(">i", out, at, value)
    return bytes(out)


def _lies(n: int) -> list[int]:
    return sorted({-(2**31), -1, 0, 1, 8, 47, 48, 87, 88, n - 1, n + 1, n + 8, 2 * n, 2**31 - 1})


@over("record", "decode_record")
@pytest.mark.parametrize("record", RECORDS)
def test_decode_record_total_size_that_lies(impl: Decode, record: bytes) -> None:
    """Smaller or larger than the fields make it, with or without bytes past it."""
    for total in _lies(len(record)):
        liar = _with_int(record, 0, total)
        for buf in (liar, liar + record, liar + bytes(len(record) + 9)):
            with pytest.raises(RecordError):
                impl(buf, 0)


@over("record", "verify_record")
@pytest.mark.parametrize("record", RECORDS)
def test_verify_record_total_size_that_lies(impl: Verify, record: bytes) -> None:
    for total in _lies(len(record)):
        liar = _with_int(record, 0, total)
        for buf in (liar, liar + record, liar + bytes(len(record) + 9)):
            with pytest.raises(RecordError):
                impl(buf, 0, 0, check_crc=False)


@over_record_views()
@pytest.mark.parametrize("record", RECORDS)
def test_decode_records_total_size_past_the_data_or_short_of_the_fields(
    decode_records: DecodeRecords, view_class: type[Any], record: bytes
) -> None:
    n = len(record)
    for total in [t for t in _lies(n) if t < n] + [n + 1, 2 * n + 1, 2**31 - 1]:
        with pytest.raises(RecordError):
            decode_records(_with_int(record, 0, total) + record, "b", view_class)


def _body_length_at(record: bytes) -> int:
    sys_flag = int.from_bytes(record[36:40], "big")
    return 84 + (12 if sys_flag & 0x10 else 0) + (12 if sys_flag & 0x20 else 0)


NEGATIVE_LENGTHS = [-1, -5, -88, -(2**31)]


@over("record", "decode_record")
@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("length", NEGATIVE_LENGTHS)
def test_decode_record_negative_body_length(impl: Decode, record: bytes, length: int) -> None:
    liar = _with_int(record, _body_length_at(record), length)
    with pytest.raises(RecordError):
        impl(liar + bytes(200), 0)


@over("record", "verify_record")
@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("length", NEGATIVE_LENGTHS)
def test_verify_record_negative_body_length(impl: Verify, record: bytes, length: int) -> None:
    liar = _with_int(record, _body_length_at(record), length)
    with pytest.raises(RecordError):
        impl(liar + bytes(200), 0, 0, check_crc=False)


@over_record_views()
@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("length", NEGATIVE_LENGTHS)
def test_decode_records_negative_body_length(
    decode_records: DecodeRecords, view_class: type[Any], record: bytes, length: int
) -> None:
    with pytest.raises(RecordError):
        decode_records(_with_int(record, _body_length_at(record), length), "b", view_class)


@over("record", "decode_record")
@over("record", "verify_record", "verify")
@pytest.mark.parametrize("record", RECORDS)
def test_body_length_past_the_record(impl: Decode, verify: Verify, record: bytes) -> None:
    at = _body_length_at(record)
    body_length = int.from_bytes(record[at : at + 4], "big")
    for length in (body_length + 1, len(record), 2**31 - 1):
        liar = _with_int(record, at, length) + bytes(300)
        with pytest.raises(RecordError):
            impl(liar, 0)
        with pytest.raises(RecordError):
            verify(liar, 0, 0, check_crc=False)


@over("record", "decode_record")
@over("record", "verify_record", "verify")
def test_not_a_message(impl: Decode, verify: Verify) -> None:
    record = stored()
    for magic in (BLANK_MAGIC_CODE, 0, -626843480):
        with pytest.raises(RecordError, match="not a message"):
            impl(_with_int(record, 4, magic), 0)
        with pytest.raises(RecordError, match="not a message"):
            verify(_with_int(record, 4, magic), 0, 0, check_crc=False)


# ------------------------------------------------------------------ non-UTF-8 and limits

NOT_UTF8_TOPIC = b"Topic\xff\xfe"
NOT_UTF8_PROPS = b"TAGS\x01Tag\xc3\x02K\xe9\x01v\x02UNIQ_KEY\x01U\xed\xa0\x80"


@over("record", "decode_record")
@over("record", "verify_record", "verify")
def test_non_utf8_topic_and_properties_are_a_record(impl: Decode, verify: Verify) -> None:
    """Java accepts any bytes there and the CRC does not cover them: they decode with
    U+FFFD, they are no reason to stop reading the log."""
    record = stored(topic=NOT_UTF8_TOPIC, properties=NOT_UTF8_PROPS)
    assert verify(record, 0, 0, check_crc=True) == len(record)
    info = impl(record, 0, check_crc=True)
    assert info.topic == "Topic\ufffd\ufffd"
    assert info.properties == NOT_UTF8_PROPS.decode(errors="replace")
    assert "\ufffd" in info.properties
    assert info.total_size == len(record)


@over_record_views()
def test_decode_records_of_non_utf8_topic_and_properties(
    decode_records: DecodeRecords, view_class: type[Any]
) -> None:
    record = stored(topic=NOT_UTF8_TOPIC, properties=NOT_UTF8_PROPS)
    (view,) = decode_records(record, "b", view_class)
    got = view_fields(view)
    assert got["topic"] == "Topic\ufffd\ufffd"
    assert got["tags"] == "Tag\ufffd"
    assert got["properties"]["K\ufffd"] == "v"
    assert got["msg_id"] == NOT_UTF8_PROPS.rsplit(b"\x01", 1)[1].decode(errors="replace")


@over("record", "decode_record")
@over("record", "verify_record", "verify")
@pytest.mark.parametrize("hosts", [HOST_PAIRS[0], HOST_PAIRS[3]], ids=["ipv4", "ipv6"])
def test_properties_of_32767_bytes(impl: Decode, verify: Verify, hosts: tuple[Host, Host]) -> None:
    props = b"X\x01" + b"v" * (MAX_PROPERTIES_BYTES - 2)
    record = stored(properties=props, hosts=hosts)
    assert record[-MAX_PROPERTIES_BYTES - 2 : -MAX_PROPERTIES_BYTES] == b"\x7f\xff"
    assert verify(record, 0, 0, check_crc=True) == len(record)
    info = impl(record, 0, check_crc=True)
    assert len(info.properties) == MAX_PROPERTIES_BYTES
    assert info.properties == props.decode()
    # PROPERTIESLENGTH is a signed short: 0x8000 reads as negative, never as 32,768
    at = len(record) - MAX_PROPERTIES_BYTES - 2
    liar = record[:at] + b"\x80\x00" + record[at + 2 :] + b"v"
    liar = _with_int(liar, 0, len(liar))
    with pytest.raises(RecordError):
        impl(liar, 0)
    with pytest.raises(RecordError):
        verify(liar, 0, 0, check_crc=False)


@over_record_views()
def test_decode_records_of_32767_byte_properties(
    decode_records: DecodeRecords, view_class: type[Any]
) -> None:
    props = b"X\x01" + b"v" * (MAX_PROPERTIES_BYTES - 2)
    record = stored(properties=props, hosts=HOST_PAIRS[3])
    (view,) = decode_records(record, "b", view_class)
    assert view_fields(view)["properties"] == {"X": "v" * (MAX_PROPERTIES_BYTES - 2)}
    at = len(record) - MAX_PROPERTIES_BYTES - 2
    liar = record[:at] + b"\x80\x00" + record[at + 2 :] + b"v"
    with pytest.raises(RecordError):
        decode_records(_with_int(liar, 0, len(liar)), "b", view_class)
