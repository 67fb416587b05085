"""Property tests: any command survives every serialization, however the stream is cut.

A command goes ``to_bytes`` -> ``FrameDecoder.feed`` -> ``decode_command`` and comes back
equal, with the two normalisations the codecs document: an empty remark and an empty body
both decode as None.
"""

from __future__ import annotations

import itertools
import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codes import LanguageCode, SerializeType
from remoting.command import RemotingCommand, decode_command
from remoting.frame import FrameDecoder, split_frame

INT16 = st.integers(min_value=-(1 << 15), max_value=(1 << 15) - 1)
INT32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)

# Any Unicode scalar value (surrogates cannot be UTF-8), plus a small alphabet that makes
# control characters, JSON metacharacters and non-BMP characters frequent.
TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.text(
    st.sampled_from('\x00\x01\x02\x1f\x7f\n\r\t"\\/é€😀\U0010ffff\u2028 a'), max_size=20
)
EXT_FIELDS = st.dictionaries(TEXT, TEXT, max_size=8)
BODY = st.none() | st.binary(max_size=300)

PROPERTY = settings(max_examples=200, deadline=None)


@st.composite
def commands(draw: st.DrawFn, serialize_type: int) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    if serialize_type == SerializeType.JSON:
        # JSON carries the language by name, so only the named ones survive.
        language: int = draw(st.sampled_from(LanguageCode))
    else:
        language = draw(st.integers(min_value=0, max_value=255))
    return RemotingCommand(
        code=draw(INT16 if binary else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | TEXT),
        ext_fields=draw(EXT_FIELDS),
        body=draw(BODY),
        language=language,
        version=draw(INT16 if binary else INT32),
        serialize_type=serialize_type,
    )


ANY_COMMAND = st.sampled_from(SerializeType).flatmap(commands)


def expected(command: RemotingCommand) -> dict[str, object]:
    return {
        "code": command.code,
        "opaque": command.opaque,
        "flag": command.flag,
        "remark": command.remark or None,
        # A zero-length binary string is null to Java: empty keys/values are absent.
        "ext_fields": (
            {k: v for k, v in command.ext_fields.items() if k and v}
            if command.serialize_type == SerializeType.ROCKETMQ
            else command.ext_fields
        ),
        "body": command.body_bytes or None,
        "language": command.language,
        "version": command.version,
        "serialize_type": command.serialize_type,
    }


def observed(command: RemotingCommand) -> dict[str, object]:
    fields = expected(command)
    assert fields["remark"] == command.remark  # decoding never yields ""
    assert command.body is None or len(command.body) > 0  # nor an empty body
    return fields


def round_trip(command: RemotingCommand) -> RemotingCommand:
    data = command.to_bytes()
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    assert len(frames) == 1
    assert decoder.buffered_bytes == 0
    return decode_command(frames[0])


@PROPERTY
@given(commands(SerializeType.JSON))
def test_json_round_trip(command: RemotingCommand) -> None:
    assert observed(round_trip(command)) == expected(command)


@PROPERTY
@given(commands(SerializeType.ROCKETMQ))
def test_rocketmq_round_trip(command: RemotingCommand) -> None:
    assert observed(round_trip(command)) == expected(command)


@PROPERTY
@given(commands(SerializeType.MSGPACK))
def test_msgpack_round_trip(command: RemotingCommand) -> None:
    assert observed(round_trip(command)) == expected(command)


@PROPERTY
@given(commands(SerializeType.JSON))
def test_json_header_is_plain_json_with_string_ext_values(command: RemotingCommand) -> None:
    _, header, body = split_frame(memoryview(command.to_bytes())[4:])
    doc = json.loads(bytes(header))
    assert list(doc) == sorted(doc)  # fastjson's key order
    assert doc["code"] == command.code
    assert doc["opaque"] == command.opaque
    assert doc["flag"] == command.flag
    assert doc["version"] == command.version
    assert doc["language"] == LanguageCode(command.language).name
    assert doc.get("remark") == (command.remark or None)
    assert doc.get("extFields", {}) == command.ext_fields
    assert all(type(v) is str for v in doc.get("extFields", {}).values())
    assert bytes(body) == command.body_bytes


@PROPERTY
@given(commands(SerializeType.ROCKETMQ))
def test_rocketmq_header_size_and_prefix(command: RemotingCommand) -> None:
    data = command.to_bytes()
    remark = (command.remark or "").encode()
    ext = sum(2 + len(k.encode()) + 4 + len(v.encode()) for k, v in command.ext_fields.items())
    header_len = 21 + len(remark) + ext
    length, word = struct.unpack_from(">iI", data)
    assert word == (1 << 24) | header_len
    assert length == 4 + header_len + len(command.body_bytes) == len(data) - 4


@settings(max_examples=200, deadline=None)
@given(data=st.data(), batch=st.lists(ANY_COMMAND, min_size=1, max_size=6))
def test_frames_are_the_same_however_the_stream_is_chunked(
    data: st.DataObject, batch: list[RemotingCommand]
) -> None:
    encoded = [c.to_bytes() for c in batch]
    stream = b"".join(encoded)
    frame_ends = list(itertools.accumulate(len(e) for e in encoded))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=25))))
    bounds = [0, *cuts, len(stream)]
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for start, end in itertools.pairwise(bounds):
        chunk = stream[start:end]
        kind = data.draw(st.sampled_from(["bytes", "bytearray", "memoryview"]))
        fed: bytes | bytearray | memoryview = (
            chunk
            if kind == "bytes"
            else bytearray(chunk)
            if kind == "bytearray"
            else memoryview(bytearray(chunk))
        )
        out = decoder.feed(fed)
        assert all(type(f.obj) is bytes for f in out)
        frames += [bytes(f) for f in out]
        # Every frame that ends by `end` is out; the rest of the bytes so far are held.
        assert len(frames) == sum(1 for frame_end in frame_ends if frame_end <= end)
        assert decoder.buffered_bytes == end - sum(len(e) for e in encoded[: len(frames)])
    assert frames == [e[4:] for e in encoded]
    assert decoder.buffered_bytes == 0
    decoded = [decode_command(memoryview(f)) for f in frames]
    assert [observed(c) for c in decoded] == [expected(c) for c in batch]
