"""Frames captured from real RocketMQ clients decode, re-encode and parse into typed headers.

The vectors (tests/remoting/vectors/README.md) were recorded on loopback from the official RocketMQ
Python client (a wrapper over the C++ client 1.2.x) and from ali-ons 3.12. Client->server
frames are exactly what those clients sent; server->client frames are replies the clients
accepted. The directory is ``../shared/vectors`` next to the repository, or
``$AEROLITE_SHARED/vectors``, else the copy in ``tests/remoting/vectors``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, decode_command
from remoting.frame import FrameDecoder, split_frame
from remoting.header_codec import ext_value
from remoting.headers import (
    CommandHeader,
    ConsumerGroupRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

FRAME_FILES = (
    "ali_ons_frames.json",
    "ali_ons_silent_frames.json",
    "cpp_client_frames.json",
    "cpp_client_silent_frames.json",
)


def _vectors_dir() -> Path:
    """``../shared/vectors`` (or ``$AEROLITE_SHARED/vectors``) when present, so updated
    vectors are picked up; otherwise the copy kept in this repository."""
    candidates = [Path(__file__).parents[3] / "shared" / "vectors"]
    shared = os.environ.get("AEROLITE_SHARED")
    if shared:
        candidates += [Path(shared) / "vectors", Path(shared)]
    for candidate in candidates:
        if (candidate / FRAME_FILES[0]).is_file():
            return candidate
    return Path(__file__).parent / "vectors"


VECTORS_DIR: Path = _vectors_dir()


@dataclasses.dataclass(frozen=True)
class Vector:
    """One captured frame and where it came from."""

    source: str  # file name without "_frames.json": ali_ons, cpp_client_silent, ...
    index: int
    raw: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.source}-{self.index}-{self.code_name}"

    @property
    def header(self) -> dict[str, Any]:
        return typing.cast("dict[str, Any]", self.raw["header"])

    @property
    def code(self) -> int:
        return int(self.header["code"])

    @property
    def to_server(self) -> bool:
        return bool(self.raw["direction"] == "client->server")

    @property
    def code_name(self) -> str:
        if self.to_server:
            return RequestCode(self.code).name
        return "reply-" + ResponseCode(self.code).name

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self.raw["hex"])

    @property
    def ext(self) -> dict[str, str]:
        """The extFields as Java would see them: every value a string."""
        return {k: ext_value(v) for k, v in (self.header.get("extFields") or {}).items()}


def _load(name: str) -> list[Vector]:
    raw = json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))
    source = name.removesuffix("_frames.json")
    return [Vector(source, i, entry) for i, entry in enumerate(raw)]


VECTORS: list[Vector] = [v for name in FRAME_FILES for v in _load(name)]
REPLIES = [v for v in VECTORS if not v.to_server]


def _ids(vector: Vector) -> str:
    return vector.id


def decode_whole(data: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    assert len(frames) == 1
    assert decoder.buffered_bytes == 0
    return decode_command(frames[0])


def fields(command: RemotingCommand) -> dict[str, object]:
    return {
        "code": command.code,
        "opaque": command.opaque,
        "flag": command.flag,
        "remark": command.remark,
        "ext_fields": command.ext_fields,
        "body": command.body_bytes,
        "language": command.language,
        "version": command.version,
        "serialize_type": command.serialize_type,
    }


def test_all_vector_files_are_there() -> None:
    counts = {name: len(_load(name)) for name in FRAME_FILES}
    assert all(n > 0 for n in counts.values()), counts
    assert sum(counts.values()) == len(VECTORS) >= 200
    assert {v.raw["client"] for v in VECTORS} == {"cpp_client", "ali_ons"}
    assert {v.raw["direction"] for v in VECTORS} == {"client->server", "server->client"}


# =================================================================================== decode


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_vector_decodes(vector: Vector) -> None:
    data = vector.data
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    assert len(frames) == 1
    assert decoder.buffered_bytes == 0
    (frame,) = frames
    assert len(frame) == len(data) - 4

    serialize_type, header, body = split_frame(frame)
    assert serialize_type == vector.raw["serialize_type"]
    assert len(header) == vector.raw["header_length"]
    assert len(body) == vector.raw["body_length"]

    command = decode_command(frame)
    h = vector.header
    assert command.code == h["code"]
    if vector.raw["code_name"] is not None:
        assert RequestCode(command.code).name == vector.raw["code_name"]
    assert command.opaque == h["opaque"]
    assert command.flag == h["flag"]
    assert command.is_response is (not vector.to_server)
    assert LanguageCode(command.language).name == h["language"]
    assert command.version == h["version"]
    assert command.remark == (h.get("remark") or None)
    assert command.ext_fields == vector.ext
    assert all(type(v) is str for v in command.ext_fields.values())
    assert len(command.body_bytes) == vector.raw["body_length"]
    if "body_text" in vector.raw:
        assert command.body_bytes.decode() == vector.raw["body_text"]
    assert command.serialize_type == SerializeType.JSON


@pytest.mark.parametrize("serialize_type", list(SerializeType), ids=lambda t: t.name)
@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_vector_reencodes_in_every_serialization(
    vector: Vector, serialize_type: SerializeType
) -> None:
    command = decode_whole(vector.data)
    if serialize_type == SerializeType.ROCKETMQ:
        # A binary header holds the code and version as shorts.
        assert -(1 << 15) <= command.code < 1 << 15
        assert -(1 << 15) <= command.version < 1 << 15
    command.serialize_type = serialize_type
    again = decode_whole(command.to_bytes())
    assert again.serialize_type == serialize_type
    if serialize_type == SerializeType.ROCKETMQ:
        # Java reads a zero-length binary string as null, so "" values (the C++ client's
        # empty AccessKey) are absent after a binary round trip.
        command.ext_fields = {k: v for k, v in command.ext_fields.items() if k and v}
    assert fields(again) == fields(command)


@pytest.mark.parametrize("vector", REPLIES, ids=_ids)
def test_reply_json_is_what_the_client_accepted(vector: Vector) -> None:
    """Our JSON for a captured reply says what the accepted reply said, in standard JSON."""
    command = decode_whole(vector.data)
    ours = command.to_bytes()
    _, header, body = split_frame(memoryview(ours)[4:])
    doc = json.loads(bytes(header))
    assert all(type(v) is str for v in doc.get("extFields", {}).values())

    def normalised(d: dict[str, Any]) -> dict[str, Any]:
        out = dict(d)
        out.setdefault("extFields", {})
        if not out.get("remark"):
            out.pop("remark", None)
        return out

    assert normalised(doc) == normalised(vector.header)
    assert bytes(body) == vector.data[8 + vector.raw["header_length"] :]
    assert decode_whole(ours).ext_fields == command.ext_fields


# =================================================================================== stream


def _connections() -> Iterator[tuple[str, int, list[Vector]]]:
    by_conn: dict[tuple[str, int], list[Vector]] = {}
    for v in VECTORS:
        if v.to_server:
            by_conn.setdefault((v.source, v.raw["conn"]), []).append(v)
    for (source, conn), vectors in sorted(by_conn.items()):
        yield source, conn, vectors


CONNECTIONS = list(_connections())


@pytest.mark.parametrize(
    "vectors", [c[2] for c in CONNECTIONS], ids=[f"{s}-conn{n}" for s, n, _ in CONNECTIONS]
)
def test_connection_stream_split_at_random_boundaries(vectors: list[Vector]) -> None:
    expected = [v.data[4:] for v in vectors]
    stream = b"".join(v.data for v in vectors)
    rng = random.Random(len(stream))
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(stream)), k=min(len(stream) - 1, rng.randint(1, 40))))
        decoder = FrameDecoder()
        got: list[bytes] = []
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            got += [bytes(f) for f in decoder.feed(stream[start:end])]
        assert got == expected
        assert decoder.buffered_bytes == 0
    commands = [decode_command(memoryview(f)) for f in expected]
    assert [c.opaque for c in commands] == [v.header["opaque"] for v in vectors]


# ============================================================================ typed headers


def _check_fields_like_java(header: CommandHeader, ext: dict[str, str], v2: bool) -> None:
    """Every field present on the wire parsed as Java would (parseInt, parseBoolean)."""
    hints = typing.get_type_hints(type(header))
    for f in dataclasses.fields(header):  # type: ignore[arg-type]
        wire = f.metadata["wire"]
        if v2:
            wire = SEND_V1_TO_V2.get(wire, wire)
        value = getattr(header, f.name)
        if wire not in ext:
            assert value == f.default, f.name
            continue
        raw = ext[wire]
        hint = hints[f.name]
        base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
        if base is bool:
            assert value is (raw.lower() == "true"), f.name
        elif base is int:
            assert type(value) is int, f.name
            assert value == int(raw), f.name
        else:
            assert value == raw, f.name


SEND_V1_TO_V2 = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "brokerName": "n",
    "bname": "n",
}


def _send_v1(ext: dict[str, str]) -> CommandHeader:
    h = SendMessageRequestHeader.from_ext_fields(ext)
    assert h.topic == "vec_topic"
    assert h.producer_group == "vec_producer_group"
    assert h.default_topic == "TBW102"
    assert h.default_topic_queue_nums == 4
    assert type(h.queue_id) is int
    assert 0 <= h.queue_id < 4
    assert h.born_timestamp > 1_600_000_000_000
    assert h.reconsume_times == 0
    # The C++ client streams its bools as 1/0; Java's parseBoolean reads both as false.
    assert h.unit_mode is False
    assert h.batch is False
    assert h.properties is not None
    assert "WAIT\x01true\x02" in h.properties
    return h


def _send_v2(ext: dict[str, str]) -> CommandHeader:
    h = SendMessageRequestHeader.from_v2(ext)
    assert h.topic == "vec_topic"
    assert h.producer_group == "vec_producer_group"
    assert h.default_topic_queue_nums == 4
    assert h.queue_id in (1, 2)
    assert h.born_timestamp > 1_600_000_000_000
    assert h.unit_mode is False  # ali-ons sent a JSON false
    assert h.properties is not None
    assert h.properties.startswith("TAGS\x01Tag")
    assert SendMessageRequestHeader.from_v2(h.to_v2()) == h
    return h


def _pull(ext: dict[str, str]) -> CommandHeader:
    h = PullMessageRequestHeader.from_ext_fields(ext)
    assert type(h.queue_id) is int
    assert 0 <= h.queue_id < 4
    assert type(h.queue_offset) is int
    assert h.max_msg_nums == 32
    assert h.suspend_timeout_millis in (15000, 20000)  # push: 15 s; C++ pull consumer: 20 s
    assert h.consumer_group.startswith("vec_consumer_group")
    assert h.topic.startswith(("vec_", "%RETRY%vec_"))
    assert h.sub_version == 0 or h.sub_version > 1_600_000_000_000  # 0: the pull consumer
    return h


def _query_offset(ext: dict[str, str]) -> CommandHeader:
    h = QueryConsumerOffsetRequestHeader.from_ext_fields(ext)
    assert type(h.queue_id) is int
    assert 0 <= h.queue_id < 4
    assert h.consumer_group.startswith("vec_consumer_group")
    return h


def _update_offset(ext: dict[str, str]) -> CommandHeader:
    h = UpdateConsumerOffsetRequestHeader.from_ext_fields(ext)
    assert type(h.queue_id) is int
    assert type(h.commit_offset) is int
    assert h.commit_offset >= -1
    return h


def _route(ext: dict[str, str]) -> CommandHeader:
    h = GetRouteInfoRequestHeader.from_ext_fields(ext)
    assert h.topic == "TBW102" or h.topic.startswith(("vec_", "%RETRY%vec_"))
    return h


def _unregister(ext: dict[str, str]) -> CommandHeader:
    h = UnregisterClientRequestHeader.from_ext_fields(ext)
    assert h.client_id
    assert (h.producer_group or h.consumer_group or "").startswith("vec_")
    return h


def _consumer_list(ext: dict[str, str]) -> CommandHeader:
    h = ConsumerGroupRequestHeader.from_ext_fields(ext)
    assert h.consumer_group.startswith("vec_consumer_group")
    return h


def _send_back(ext: dict[str, str]) -> CommandHeader:
    h = ConsumerSendMsgBackRequestHeader.from_ext_fields(ext)
    assert h.group == "vec_consumer_group"
    assert type(h.offset) is int
    assert h.offset >= 0
    assert h.delay_level == 0
    assert h.unit_mode is False
    return h


TYPED: dict[int, Callable[[dict[str, str]], CommandHeader]] = {
    RequestCode.SEND_MESSAGE: _send_v1,
    RequestCode.SEND_MESSAGE_V2: _send_v2,
    RequestCode.PULL_MESSAGE: _pull,
    RequestCode.QUERY_CONSUMER_OFFSET: _query_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: _update_offset,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: _route,
    RequestCode.UNREGISTER_CLIENT: _unregister,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
}
TYPED_VECTORS = [v for v in VECTORS if v.to_server and v.code in TYPED]


def test_every_typed_code_has_vectors() -> None:
    assert {v.code for v in TYPED_VECTORS} == set(TYPED)


@pytest.mark.parametrize("vector", TYPED_VECTORS, ids=_ids)
def test_typed_header_parses(vector: Vector) -> None:
    command = decode_whole(vector.data)
    header = TYPED[command.code](command.ext_fields)
    _check_fields_like_java(
        header, command.ext_fields, v2=command.code == RequestCode.SEND_MESSAGE_V2
    )


def test_cpp_batch_flag_one_is_false_as_in_java() -> None:
    # The C++ client's batch send carries "batch":"1"; a Java broker reads that as false.
    batch = [
        v
        for v in TYPED_VECTORS
        if v.code == RequestCode.SEND_MESSAGE and v.header["extFields"].get("batch") == "1"
    ]
    assert batch, "the C++ capture has a batch send"
    header = SendMessageRequestHeader.from_ext_fields(decode_whole(batch[0].data).ext_fields)
    assert header.batch is False


def test_ali_ons_numeric_ext_values_parse_as_ints() -> None:
    send = next(v for v in TYPED_VECTORS if v.code == RequestCode.SEND_MESSAGE_V2)
    assert send.header["extFields"]["e"] == 1  # a JSON number on the wire
    command = decode_whole(send.data)
    assert command.ext_fields["e"] == "1"
    assert command.ext_fields["k"] == "false"
    assert SendMessageRequestHeader.from_v2(command.ext_fields).queue_id == 1
