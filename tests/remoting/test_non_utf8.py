"""Header strings that are not UTF-8 decode as Java decodes them (issue 19, item 6).

Java reads each header string with ``new String(bytes, UTF_8)`` (fastjson's input, and
``RocketMQSerializable`` for the binary header): every malformed sequence becomes U+FFFD and
the request goes on. A lone surrogate spelled as a JSON escape becomes ``?``, the byte Java's
``String.getBytes(UTF_8)`` writes for it. Each decoded header encodes again in every codec.
"""

from __future__ import annotations

import struct

import msgpack
import pytest

from remoting.codes import SerializeType
from remoting.header_codec import (
    HeaderFields,
    decode_binary,
    decode_header,
    decode_json,
    decode_msgpack,
    encode_header,
)

GBK = "订单".encode("gbk")  # b"\xb6\xa9\xb5\xa5": four stray continuation bytes
INVALID = [
    (GBK, "\ufffd" * 4),
    (b"caf\xe9", "caf\ufffd"),  # Latin-1
    (b"\xc3", "\ufffd"),  # cut short
    (b"a\xed\xa0\x80b", "a\ufffd\ufffd\ufffdb"),  # an encoded surrogate
    (b"\xf8\x88\x80\x80\x80", "\ufffd" * 5),  # a five-byte form
]


def binary(remark: bytes, ext: list[tuple[bytes, bytes]]) -> bytes:
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext
    )
    fixed = struct.pack(">hBhiii", 310, 1, 317, 7, 0, len(remark))
    return fixed + remark + struct.pack(">i", len(entries)) + entries


def reencodes(h: HeaderFields) -> None:
    for serialize_type in SerializeType:
        assert decode_header(serialize_type, encode_header(serialize_type, h)) == h


@pytest.mark.parametrize(("raw", "text"), INVALID)
def test_binary_header_strings_that_are_not_utf8_get_replacement_characters(
    raw: bytes, text: str
) -> None:
    h = decode_binary(binary(raw, [(b"k" + raw, raw), (b"topic", b"T")]))
    assert h.remark == text
    assert h.ext_fields == {"k" + text: text, "topic": "T"}
    reencodes(h)


@pytest.mark.parametrize(("raw", "text"), INVALID)
def test_json_header_strings_that_are_not_utf8_get_replacement_characters(
    raw: bytes, text: str
) -> None:
    header = b'{"code":310,"remark":"' + raw + b'","extFields":{"k' + raw + b'":"' + raw + b'"}}'
    h = decode_json(header)
    assert (h.code, h.remark, h.ext_fields) == (310, text, {"k" + text: text})
    reencodes(h)


@pytest.mark.parametrize(("raw", "text"), INVALID)
def test_msgpack_header_strings_that_are_not_utf8_get_replacement_characters(
    raw: bytes, text: str
) -> None:
    def s(data: bytes) -> bytes:  # a msgpack str (fixstr or str8) holding ``data`` as is
        return bytes([0xA0 | len(data)]) + data if len(data) < 32 else b"\xd9" + data

    header = b"\x97\x01\x00\x00\x07\x00" + s(raw) + b"\x81" + s(b"k" + raw) + s(raw)
    assert msgpack.unpackb(header, raw=True)[5] == raw
    h = decode_msgpack(header)
    assert (h.remark, h.ext_fields) == (text, {"k" + text: text})
    reencodes(h)


@pytest.mark.parametrize(
    ("escaped", "text"),
    [
        (rb"a\ud800b", "a?b"),
        (rb"a\uDC80", "a?"),
        (rb"\udc80\ud83d", "??"),  # a low before a high is no pair
        (rb"\ud83d\ude00\ud800", "\U0001f600?"),  # a pair is one character, kept
    ],
)
def test_json_escapes_of_lone_surrogates_become_question_marks(escaped: bytes, text: str) -> None:
    h = decode_json(
        b'{"code":310,"remark":"'
        + escaped
        + b'","extFields":{"'
        + escaped
        + b'":"v'
        + escaped
        + b'"}}'
    )
    assert (h.remark, h.ext_fields) == (text, {text: "v" + text})
    reencodes(h)
