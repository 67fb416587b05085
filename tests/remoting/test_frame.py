"""FrameDecoder, split_frame and the header codecs at their edges.

Reference: docs/protocol.md §1 (framing), §3 (JSON header), §4 (ROCKETMQ binary header).
"""

from __future__ import annotations

import struct

import msgpack
import pytest

from remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, decode_command, response_to
from remoting.errors import FrameError
from remoting.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, split_frame
from remoting.header_codec import (
    HeaderFields,
    decode_binary,
    decode_header,
    decode_json,
    decode_msgpack,
    encode_binary,
    encode_msgpack,
)


def frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """A whole frame, length prefix included, built by hand from §1."""
    length = 4 + len(header) + len(body)
    return struct.pack(">iI", length, (serialize_type << 24) | len(header)) + header + body


def decode_one(data: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    assert len(frames) == 1
    assert decoder.buffered_bytes == 0
    return decode_command(frames[0])


JSON_REQUEST = frame(
    SerializeType.JSON,
    b'{"code":105,"extFields":{"topic":"t"},"flag":0,"language":"JAVA","opaque":1,"version":121}',
)
SMALL_FRAMES = [
    JSON_REQUEST,
    frame(SerializeType.JSON, b'{"code":0,"flag":1,"opaque":1}', b"body bytes"),
    RemotingCommand(code=34, opaque=9, body=b"\x00" * 50, serialize_type=1).to_bytes(),
]


# ============================================================================ FrameDecoder


@pytest.mark.parametrize("length", [-1, -(1 << 31), 0, 3])
def test_length_below_four_is_rejected(length: int) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match=rf"frame length {length} outside \[4, "):
        decoder.feed(struct.pack(">i", length) + b"\x00" * 8)
    assert decoder.buffered_bytes == 0


def test_length_over_max_is_rejected_as_soon_as_the_prefix_arrives() -> None:
    # Java's 16 MiB cap covers the whole frame, the 4-byte length field included.
    decoder = FrameDecoder()
    assert decoder.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES == 16 * 1024 * 1024
    prefix = struct.pack(">i", DEFAULT_MAX_FRAME_BYTES - 3)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameError, match=r"frame length 16777213 outside \[4, 16777212\]"):
        decoder.feed(prefix[3:])
    assert decoder.buffered_bytes == 0


def test_length_exactly_max_is_accepted() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES - 4)) == []
    assert decoder.buffered_bytes == 4

    small = FrameDecoder(max_frame_bytes=68)
    data = frame(SerializeType.JSON, b"{}", b"x" * 58)
    assert struct.unpack_from(">i", data)[0] == 64
    assert len(data) == 68
    (got,) = small.feed(data)
    assert bytes(got) == data[4:]
    with pytest.raises(FrameError, match=r"frame length 65 outside \[4, 64\]"):
        small.feed(frame(SerializeType.JSON, b"{}", b"x" * 59))


def test_several_frames_in_one_feed_and_a_partial_tail() -> None:
    decoder = FrameDecoder()
    stream = b"".join(SMALL_FRAMES)
    tail = SMALL_FRAMES[0][:10]
    frames = decoder.feed(stream + tail)
    assert [bytes(f) for f in frames] == [f[4:] for f in SMALL_FRAMES]
    assert decoder.buffered_bytes == 10
    (last,) = decoder.feed(SMALL_FRAMES[0][10:])
    assert bytes(last) == SMALL_FRAMES[0][4:]
    assert decoder.buffered_bytes == 0


def test_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    stream = b"".join(SMALL_FRAMES)
    got: list[bytes] = []
    held = 0
    for i in range(len(stream)):
        out = decoder.feed(stream[i : i + 1])
        got += [bytes(f) for f in out]
        held = 0 if out else held + 1
        assert decoder.buffered_bytes == held
    assert got == [f[4:] for f in SMALL_FRAMES]
    assert decoder.buffered_bytes == 0


def test_buffered_bytes_accounting() -> None:
    decoder = FrameDecoder()
    first, second = SMALL_FRAMES[0], SMALL_FRAMES[1]
    assert decoder.buffered_bytes == 0
    assert decoder.feed(b"") == []
    assert decoder.buffered_bytes == 0
    assert decoder.feed(first[:2]) == []  # not even a whole length field
    assert decoder.buffered_bytes == 2
    assert decoder.feed(first[2:7]) == []
    assert decoder.buffered_bytes == 7
    assert decoder.feed(b"") == []
    assert decoder.buffered_bytes == 7
    out = decoder.feed(first[7:] + second[:5])
    assert [bytes(f) for f in out] == [first[4:]]
    assert decoder.buffered_bytes == 5
    out = decoder.feed(second[5:])
    assert [bytes(f) for f in out] == [second[4:]]
    assert decoder.buffered_bytes == 0


def test_views_reference_immutable_bytes_when_fed_a_bytearray() -> None:
    decoder = FrameDecoder()
    buf = bytearray(JSON_REQUEST)
    (view,) = decoder.feed(buf)
    assert type(view.obj) is bytes
    buf[:] = b"\xff" * len(buf)
    buf.extend(b"resizing must not raise BufferError")
    assert bytes(view) == JSON_REQUEST[4:]
    assert decode_command(view).ext_fields == {"topic": "t"}


def test_views_reference_immutable_bytes_when_fed_a_memoryview() -> None:
    decoder = FrameDecoder()
    buf = bytearray(JSON_REQUEST)
    mv = memoryview(buf)
    (view,) = decoder.feed(mv)
    assert type(view.obj) is bytes
    mv.release()  # raises BufferError if the decoder kept a view derived from it
    buf.extend(b"more")
    assert bytes(view) == JSON_REQUEST[4:]


def test_partial_data_is_copied_when_fed_a_bytearray() -> None:
    decoder = FrameDecoder()
    buf = bytearray(JSON_REQUEST[:20])
    assert decoder.feed(buf) == []
    buf[:] = b"\x00" * 20
    buf.extend(b"resize")
    (view,) = decoder.feed(bytearray(JSON_REQUEST[20:]))
    assert bytes(view) == JSON_REQUEST[4:]
    assert type(view.obj) is bytes


# ============================================================================== split_frame


def test_split_frame_parts() -> None:
    data = frame(SerializeType.ROCKETMQ, b"HEADER", b"BODY")
    (view,) = FrameDecoder().feed(data)
    serialize_type, header, body = split_frame(view)
    assert serialize_type == SerializeType.ROCKETMQ
    assert bytes(header) == b"HEADER"
    assert bytes(body) == b"BODY"


def test_split_frame_type_byte_with_the_top_bit_set() -> None:
    word = struct.pack(">I", (0xFE << 24) | 2)
    serialize_type, header, body = split_frame(memoryview(word + b"hh"))
    assert serialize_type == 0xFE
    assert bytes(header) == b"hh"
    assert len(body) == 0


def test_split_frame_empty_body() -> None:
    serialize_type, header, body = split_frame(memoryview(frame(0, b"{}")[4:]))
    assert (serialize_type, bytes(header), len(body)) == (0, b"{}", 0)


def test_split_frame_header_larger_than_the_frame() -> None:
    bad = memoryview(struct.pack(">I", 100) + b"x" * 50)
    with pytest.raises(FrameError, match=r"header length 100 larger than the frame \(50\)"):
        split_frame(bad)
    # The same through the decoder: the length field is honest, the header length is not.
    data = struct.pack(">iI", 4 + 10, 11) + b"y" * 10
    (view,) = FrameDecoder().feed(data)
    with pytest.raises(FrameError, match=r"header length 11 larger than the frame \(10\)"):
        decode_command(view)


def test_split_frame_without_a_header_length_word() -> None:
    with pytest.raises(FrameError, match=r"frame of 3 bytes has no header-length word"):
        split_frame(memoryview(b"\x00\x00\x00"))


def test_empty_body_decodes_to_none() -> None:
    command = decode_one(JSON_REQUEST)
    assert command.body is None
    assert command.body_bytes == b""


def test_body_is_a_view_of_the_received_bytes() -> None:
    command = decode_one(SMALL_FRAMES[1])
    assert isinstance(command.body, memoryview)
    assert bytes(command.body) == b"body bytes"


def test_unknown_serialize_type_is_rejected() -> None:
    data = frame(5, b'{"code":0}')
    (view,) = FrameDecoder().feed(data)
    with pytest.raises(FrameError, match=r"unknown serialize type 5"):
        decode_command(view)


# ================================================================================= JSON in


def test_json_header_with_a_trailing_newline() -> None:
    # The C++ client's FastWriter appends "\n" and counts it in the header length.
    header = (
        b'{"code":105,"extFields":{"AccessKey":"","topic":"vec_topic"},"flag":0,'
        b'"language":"CPP","opaque":0,"remark":"","version":63}\n'
    )
    command = decode_one(frame(SerializeType.JSON, header))
    assert command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert command.language == LanguageCode.CPP
    assert command.version == 63
    assert command.opaque == 0
    assert command.remark is None
    assert command.ext_fields == {"AccessKey": "", "topic": "vec_topic"}


def test_json_ext_numbers_and_booleans_normalised_to_java_strings() -> None:
    header = (
        b'{"code":310,"extFields":{"d":4,"e":-1,"g":1795317298447,"k":false,"m":true,'
        b'"b":"t","f":0,"z":null},"flag":0,"language":"JAVA","opaque":3,"version":121}'
    )
    command = decode_one(frame(SerializeType.JSON, header))
    assert command.ext_fields == {
        "d": "4",
        "e": "-1",
        "g": "1795317298447",
        "k": "false",
        "m": "true",
        "b": "t",
        "f": "0",
    }
    assert all(type(v) is str for v in command.ext_fields.values())


def test_json_missing_optional_fields_take_defaults() -> None:
    command = decode_one(frame(SerializeType.JSON, b'{"code":34}'))
    assert (command.code, command.opaque, command.flag, command.version) == (34, 0, 0, 0)
    assert command.language == LanguageCode.JAVA
    assert command.remark is None
    assert command.ext_fields == {}


def test_json_language_names() -> None:
    go = decode_json(b'{"code":1,"language":"GO"}')
    assert go.language == LanguageCode.GO
    unknown = decode_json(b'{"code":1,"language":"COBOL"}')
    assert unknown.language == LanguageCode.OTHER


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"{",
        b"not json",
        b'{"code":1',
        b"\xff\xfe\x00",
    ],
    ids=["empty", "open-brace", "text", "unterminated", "binary"],
)
def test_garbage_json_is_a_frame_error(header: bytes) -> None:
    with pytest.raises(FrameError, match=r"JSON header does not parse"):
        decode_header(SerializeType.JSON, header)


@pytest.mark.parametrize("header", [b"[1,2]", b'"code"', b"null", b"42", b"true"])
def test_json_that_is_not_an_object_is_a_frame_error(header: bytes) -> None:
    with pytest.raises(FrameError, match=r"JSON header is not an object"):
        decode_json(header)


def test_json_without_code_is_a_frame_error() -> None:
    with pytest.raises(FrameError, match=r"JSON header has no code"):
        decode_json(b'{"opaque":1,"flag":0,"extFields":{"topic":"t"}}')


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (b'{"code":"abc"}', r"code is not an integer"),
        (b'{"code":true}', r"code is not an integer"),
        (b'{"code":1.5}', r"code is not an integer"),
        (b'{"code":2147483648}', r"code out of range"),
        (b'{"code":1,"opaque":-2147483649}', r"opaque out of range"),
        (b'{"code":1,"extFields":[1]}', r"extFields is not an object"),
        (b'{"code":1,"remark":5}', r"remark is not a string"),
        (b'{"code":1,"language":300}', r"language out of range"),
    ],
)
def test_json_bad_field_types_are_frame_errors(header: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        decode_json(header)


def test_deeply_nested_json_is_a_frame_error() -> None:
    # A 100 kB header of brackets fits easily in a frame; it must not escape as RecursionError.
    with pytest.raises(FrameError):
        decode_json(b'{"code":1,"extFields":{"k":' + b"[" * 100_000 + b"}}")


# ================================================================================ JSON out


def test_json_response_is_fastjsons_shape() -> None:
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=7)
    response = response_to(request, ResponseCode.SUCCESS, ext_fields={"msgId": "X"})
    data = response.to_bytes()
    header = (
        b'{"code":0,"extFields":{"msgId":"X"},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    assert data == struct.pack(">II", 4 + len(header), len(header)) + header


def test_json_matches_the_java_examples_of_the_protocol_doc() -> None:
    # docs/protocol.md §3, both examples, byte for byte (ext_fields keep insertion order,
    # as fastjson writes a HashMap it has filled).
    request = RemotingCommand(
        code=310,
        opaque=7,
        ext_fields={
            "a": "pg",
            "b": "TopicTest",
            "c": "TBW102",
            "d": "4",
            "e": "1",
            "f": "0",
            "g": "1700000000000",
            "h": "0",
            "i": "KEYS\x01k1\x02UNIQ_KEY\x01AC11",
            "j": "0",
            "k": "false",
            "m": "false",
            "n": "broker-a",
        },
        language=LanguageCode.JAVA,
        version=409,
    )
    assert request.to_bytes()[8:] == (
        b'{"code":310,"extFields":{"a":"pg","b":"TopicTest","c":"TBW102","d":"4","e":"1",'
        b'"f":"0","g":"1700000000000","h":"0","i":"KEYS\\u0001k1\\u0002UNIQ_KEY\\u0001AC11",'
        b'"j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,"language":"JAVA",'
        b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    response = response_to(
        request,
        ResponseCode.SUCCESS,
        ext_fields={
            "msgId": "7F00000100002A9F0000000000000000",
            "queueId": "1",
            "queueOffset": "0",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        },
    )
    assert response.to_bytes()[8:] == (
        b'{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"1",'
        b'"queueOffset":"0","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,'
        b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}'
    )


def test_json_remark_escapes_control_chars_and_keeps_utf8() -> None:
    request = RemotingCommand(code=11, opaque=7)
    response = response_to(request, ResponseCode.SYSTEM_ERROR, remark='bad\x01"x"\n é😀')
    expected = (
        '{"code":1,"flag":1,"language":"JAVA","opaque":7,'
        '"remark":"bad\\u0001\\"x\\"\\n é😀",'
        '"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    assert response.to_bytes()[8:] == expected.encode()


def test_json_omits_null_remark_and_empty_ext() -> None:
    response = response_to(RemotingCommand(code=11, opaque=-5), ResponseCode.PULL_NOT_FOUND)
    assert response.to_bytes()[8:] == (
        b'{"code":19,"flag":1,"language":"JAVA","opaque":-5,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    empty_remark = response_to(RemotingCommand(code=11, opaque=1), 1, remark="")
    assert b"remark" not in empty_remark.to_bytes()


def test_response_keeps_the_request_serialization() -> None:
    request = RemotingCommand(code=14, opaque=42, serialize_type=SerializeType.ROCKETMQ)
    response = response_to(request, ResponseCode.SUCCESS, ext_fields={"offset": "3"})
    data = response.to_bytes()
    assert data[4] == SerializeType.ROCKETMQ
    decoded = decode_one(data)
    assert (decoded.code, decoded.opaque, decoded.flag) == (0, 42, 1)
    assert decoded.is_response
    assert decoded.ext_fields == {"offset": "3"}


# ============================================================================== ROCKETMQ


def test_binary_layout_by_hand() -> None:
    command = RemotingCommand(
        code=10,
        opaque=7,
        flag=2,
        remark="hi",
        ext_fields={"a": "b", "key": "välue"},
        body=b"xyz",
        language=LanguageCode.CPP,
        version=63,
        serialize_type=SerializeType.ROCKETMQ,
    )
    ext = (
        b"\x00\x01" b"a" b"\x00\x00\x00\x01" b"b"
        b"\x00\x03" b"key" b"\x00\x00\x00\x06" b"v\xc3\xa4lue"
    )  # fmt: skip
    assert len(ext) == 23
    header = (
        b"\x00\x0a"  # code 10
        b"\x01"  # language CPP
        b"\x00\x3f"  # version 63
        b"\x00\x00\x00\x07"  # opaque
        b"\x00\x00\x00\x02"  # flag: oneway
        b"\x00\x00\x00\x02"  # remark length
        b"hi"
        b"\x00\x00\x00\x17"  # extFields length 23
    ) + ext
    assert len(header) == 21 + 2 + 23
    prefix = (
        b"\x00\x00\x00\x35"  # length: 4 + 46 + 3 = 53
        b"\x01\x00\x00\x2e"  # type 1, header length 46
    )
    expected = prefix + header + b"xyz"
    assert command.to_bytes() == expected
    decoded = decode_one(expected)
    assert decoded.code == 10
    assert decoded.language == LanguageCode.CPP
    assert decoded.version == 63
    assert (decoded.opaque, decoded.flag, decoded.remark) == (7, 2, "hi")
    assert decoded.ext_fields == {"a": "b", "key": "välue"}
    assert decoded.body_bytes == b"xyz"
    assert decoded.serialize_type == SerializeType.ROCKETMQ


def test_binary_minimal_header_is_21_bytes_with_signed_fields() -> None:
    fields = HeaderFields(-1, LanguageCode.JAVA, -2, -3, 1, None, {})
    data = encode_binary(fields)
    assert data == (
        b"\xff\xff" b"\x00" b"\xff\xfe" b"\xff\xff\xff\xfd" b"\x00\x00\x00\x01"
        b"\x00\x00\x00\x00" b"\x00\x00\x00\x00"
    )  # fmt: skip
    assert decode_binary(data) == fields


def test_binary_zero_length_remark_is_none_and_repeated_key_keeps_the_last() -> None:
    ext = b"\x00\x01k\x00\x00\x00\x011" + b"\x00\x01k\x00\x00\x00\x012"
    data = b"\x00\x01\x00\x00\x01" + b"\x00" * 8 + b"\x00\x00\x00\x00" + struct.pack(">i", len(ext))
    decoded = decode_binary(data + ext)
    assert decoded.remark is None
    assert decoded.ext_fields == {"k": "2"}
    assert (decoded.code, decoded.version) == (1, 1)


def test_binary_cannot_hold_codes_above_int16() -> None:
    command = RemotingCommand(code=RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(FrameError, match=r"code 200050 cannot be written"):
        command.to_bytes()
    command.serialize_type = SerializeType.JSON
    assert decode_one(command.to_bytes()).code == RequestCode.POP_MESSAGE


def test_binary_ext_key_over_int16_bytes_is_a_frame_error() -> None:
    # The key length is a short: a 40,000-byte key cannot be written (encode() documents
    # FrameError for a header its serialization cannot hold).
    command = RemotingCommand(
        code=1, ext_fields={"k" * 40_000: "v"}, serialize_type=SerializeType.ROCKETMQ
    )
    with pytest.raises(FrameError):
        command.to_bytes()


BINARY_HEADER = encode_binary(
    HeaderFields(310, 0, 409, 77, 0, "remark é", {"topic": "TopicTest", "queueId": "3"})
)


def test_binary_every_truncation_is_a_frame_error() -> None:
    assert decode_binary(BINARY_HEADER).ext_fields == {"topic": "TopicTest", "queueId": "3"}
    for n in range(len(BINARY_HEADER)):
        with pytest.raises(FrameError):
            decode_header(SerializeType.ROCKETMQ, BINARY_HEADER[:n])


@pytest.mark.parametrize("delta", [-1, 1, 1000, -1000])
def test_binary_ext_length_mismatch_is_a_frame_error(delta: int) -> None:
    pos = 17 + len("remark é".encode())
    (ext_len,) = struct.unpack_from(">i", BINARY_HEADER, pos)
    bad = bytearray(BINARY_HEADER)
    struct.pack_into(">i", bad, pos, ext_len + delta)
    with pytest.raises(FrameError, match=r"extFields length"):
        decode_binary(bytes(bad))


@pytest.mark.parametrize(
    ("ext", "why"),
    [
        (b"\x00", r"truncated extFields key length"),
        (b"\x00\x05ab", r"extFields key length 5 runs past"),
        (b"\xff\xffab", r"extFields key length -1 runs past"),
        (b"\x00\x01k\x00\x00", r"truncated extFields value length"),
        (b"\x00\x01k\x00\x00\x00\x09v", r"extFields value length 9 runs past"),
        (b"\x00\x01k\xff\xff\xff\xffv", r"extFields value length -1 runs past"),
    ],
)
def test_binary_bad_ext_entries_are_frame_errors(ext: bytes, why: str) -> None:
    fixed = b"\x00\x01\x00\x00\x01" + b"\x00" * 8 + b"\x00\x00\x00\x00"
    with pytest.raises(FrameError, match=why):
        decode_binary(fixed + struct.pack(">i", len(ext)) + ext)


@pytest.mark.parametrize(
    ("remark", "why"),
    [
        (struct.pack(">i", -1), r"remark length -1 runs past"),
        (struct.pack(">i", 100) + b"short", r"remark length 100 runs past"),
    ],
)
def test_binary_bad_remark_is_a_frame_error(remark: bytes, why: str) -> None:
    data = b"\x00\x01\x00\x00\x01" + b"\x00" * 8 + remark + b"\x00\x00\x00\x00"
    with pytest.raises(FrameError, match=why):
        decode_binary(data)


def test_binary_header_shorter_than_21_through_a_frame() -> None:
    (view,) = FrameDecoder().feed(frame(SerializeType.ROCKETMQ, b"\x00" * 20))
    with pytest.raises(FrameError, match=r"ROCKETMQ header of 20 bytes is shorter than 21"):
        decode_command(view)


# =============================================================================== msgpack


def test_msgpack_round_trip() -> None:
    fields = HeaderFields(200050, 3, 409, -7, 2, "r", {"k": "v"})
    assert decode_msgpack(encode_msgpack(fields)) == fields


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"\xc1",  # a byte msgpack never uses
        b"\x97\x01",  # array of 7, one element present
        msgpack.packb({"code": 1}),
        msgpack.packb([1, 2, 3]),
        msgpack.packb(["x", 0, 0, 0, 0, None, {}]),
        msgpack.packb([1.5, 0, 0, 0, 0, None, {}]),
        msgpack.packb([1 << 40, 0, 0, 0, 0, None, {}]),
        msgpack.packb([1, 256, 0, 0, 0, None, {}]),
        msgpack.packb([1, 0, 0, 0, 0, 5, {}]),
        msgpack.packb([1, 0, 0, 0, 0, b"bytes", {}]),
        msgpack.packb([1, 0, 0, 0, 0, None, [1]]),
        msgpack.packb([1, 0, 0, 0, 0, None, {1: "int key"}]),
        msgpack.packb([1, 0, 0, 0, 0, None, {}]) + b"\x00",  # trailing data
    ],
    ids=[
        "empty",
        "never-used",
        "truncated",
        "map",
        "short-array",
        "str-code",
        "float-code",
        "huge-code",
        "language-256",
        "int-remark",
        "bin-remark",
        "ext-list",
        "int-key",
        "trailing",
    ],
)
def test_msgpack_garbage_is_a_frame_error(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode_header(SerializeType.MSGPACK, header)


@pytest.mark.parametrize(
    "value", [b"bin", [b"bin"], {"nested": b"bin"}], ids=["bin", "list-of-bin", "map-of-bin"]
)
def test_msgpack_ext_value_that_has_no_string_form_is_a_frame_error(value: object) -> None:
    with pytest.raises(FrameError):
        decode_msgpack(msgpack.packb([1, 0, 0, 0, 0, None, {"k": value}]))
