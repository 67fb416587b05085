"""Wire compatibility of ``remoting`` with Apache RocketMQ's rocketmq-remoting 4.9.8 (Java).

Both directions over real sockets on 127.0.0.1, plus frame-level cross checks:

* our ``RemotingClient`` against Java's ``NettyRemotingServer`` (echo, pipelining, oneway,
  a failing processor, an unknown code, and a request the server sends back to the client);
* Java's ``NettyRemotingClient`` against our ``RemotingServer`` (sync, async, oneway, unknown
  code, a failing handler, server-to-client requests), JSON and ROCKETMQ headers;
* frames ``RemotingCommand`` encodes, decoded by us and re-encoded byte for byte; frames we
  encode, decoded by ``RemotingCommand.decode``.

The Java side is tests/interop/java (see its RemotingInterop.java for the request codes).
Run with ``make interop``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from remoting import (
    PROTOCOL_VERSION,
    ClientConfig,
    ConnectError,
    FrameDecoder,
    FrameError,
    Lane,
    LanguageCode,
    ProcessorTable,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    ResponseCode,
    SerializeType,
    ServerConfig,
    decode_command,
    response_to,
)
from remoting.connection import Connection
from tests.interop.conftest import JavaProgram

pytestmark = pytest.mark.interop

# Request codes the Java program and our test server share (RemotingInterop.java).
ECHO = 1000
CALLBACK = 1001
THROW = 1002
ONEWAY_LOG = 1003
INSPECT = 1004
CLIENT_CALLBACK = 2001
CLIENT_NOTIFY = 2002
UNKNOWN = 9999

JSON_ = SerializeType.JSON
RMQ = SerializeType.ROCKETMQ
SERIALIZATIONS = [pytest.param(JSON_, id="JSON"), pytest.param(RMQ, id="ROCKETMQ")]

TRICKY = 'ü✓🚀 tab\t nl\n quote" backslash\\ ctl\x01\x1f'
JAVA_CLIENT_REQUESTS = 200


def frame_of(data: bytes) -> memoryview:
    """The single frame in ``data`` (length prefix included), as the connection sees it."""
    frames = FrameDecoder().feed(data)
    assert len(frames) == 1, f"{len(frames)} frames in {data.hex()}"
    return frames[0]


def header_text(frame: bytes) -> str:
    word = int.from_bytes(frame[4:8], "big")
    return frame[8 : 8 + (word & 0xFFFFFF)].decode()


# ==================================================== our RemotingClient -> Java's server


@pytest.fixture(scope="module")
def java_server(java_program: JavaProgram) -> Iterator[str]:
    """Java's NettyRemotingServer on an ephemeral port; its address.

    4.9.8's server has no bind-address setting (it binds the wildcard address); the tests only
    ever connect to 127.0.0.1.
    """
    with java_program.start("server") as server:
        line = server.wait_for_line("ready port=")
        yield f"127.0.0.1:{int(line.removeprefix('ready port='))}"


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_echo_through_java_server(java_server: str, serialize: SerializeType) -> None:
    ext = {"seq": "1", "tricky": TRICKY, "ключ": "значение 🚀", "n": "42"}
    body = bytes(range(256)) * 3
    async with RemotingClient() as client:
        request = RemotingCommand.request(ECHO, dict(ext), body=body, serialize_type=serialize)
        request.remark = f"remark {TRICKY}"
        response = await client.invoke(java_server, request, 10.0)
        bare = RemotingCommand.request(ECHO, serialize_type=serialize)
        bare_response = await client.invoke(java_server, bare, 10.0)

    assert response.is_response
    assert not response.is_oneway
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert response.opaque == request.opaque
    assert response.ext_fields == ext
    assert response.remark == request.remark
    assert response.body_bytes == body
    assert response.serialize_type == serialize  # Java answers in the request's serialization
    assert response.language == LanguageCode.JAVA

    assert bare_response.code == ResponseCode.SUCCESS
    assert bare_response.opaque == bare.opaque
    assert bare_response.ext_fields == {}
    assert bare_response.body is None
    assert bare_response.remark is None


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_java_server_reads_our_header_fields(
    java_server: str, serialize: SerializeType
) -> None:
    ext = {"a": "pg", "tricky": TRICKY, "ключ": "значение"}
    async with RemotingClient() as client:
        request = RemotingCommand.request(
            INSPECT, dict(ext), body=b"\x00\xff", serialize_type=serialize
        )
        request.remark = "Ünïcødé ✓"
        response = await client.invoke(java_server, request, 10.0)
    assert response.code == ResponseCode.SUCCESS, response.remark
    seen = json.loads(response.body_bytes)
    assert seen == {
        "code": INSPECT,
        "language": "PYTHON",
        "language_code": int(LanguageCode.PYTHON),
        "version": PROTOCOL_VERSION,
        "opaque": request.opaque,
        "flag": 0,
        "remark": "Ünïcødé ✓",
        "ext": seen["ext"],  # pairs in HashMap order: compared as a dict below
        "body_hex": "00ff",
        "serialize": serialize.name,
    }
    assert dict(seen["ext"]) == ext


async def test_one_thousand_pipelined_requests(java_server: str) -> None:
    """1,000 requests in flight at once on one connection, JSON and ROCKETMQ interleaved."""
    requests = [
        RemotingCommand.request(
            ECHO,
            # No empty values: a zero-length ROCKETMQ string reads as null (absent) in Java.
            {"seq": str(i), "pad": "x" * (i % 50 + 1)},
            body=f"body-{i}".encode() * (i % 7),
            serialize_type=JSON_ if i % 2 else RMQ,
        )
        for i in range(1000)
    ]
    async with RemotingClient() as client:
        await client.connection(java_server)
        responses = await asyncio.gather(*(client.invoke(java_server, r, 30.0) for r in requests))
    assert len({r.opaque for r in requests}) == 1000
    for request, response in zip(requests, responses, strict=True):
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert response.opaque == request.opaque
        assert response.ext_fields == request.ext_fields
        assert response.body_bytes == request.body_bytes
        assert response.serialize_type == request.serialize_type


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_oneway_reaches_java_server(java_server: str, serialize: SerializeType) -> None:
    prefix = f"py-oneway-{serialize.name}-{uuid.uuid4().hex}-"
    ids = {f"{prefix}{i}" for i in range(25)}
    seen: set[str] = set()
    async with RemotingClient() as client:
        for oneway_id in sorted(ids):
            request = RemotingCommand.request(
                ECHO, {"id": oneway_id}, body=b"ow", serialize_type=serialize
            )
            await client.invoke_oneway(java_server, request)
            assert request.flag == 2
        # The Java processor records a 1000 only when it sees the oneway bit (it answers
        # anything else), so the ids it lists prove the flag was read as oneway.
        for _ in range(50):
            log_request = RemotingCommand.request(
                ONEWAY_LOG, {"prefix": prefix}, serialize_type=serialize
            )
            response = await client.invoke(java_server, log_request, 10.0)
            assert response.code == ResponseCode.SUCCESS, response.remark
            seen = set(json.loads(response.body_bytes))
            if seen >= ids:
                break
            await asyncio.sleep(0.1)
        conn = await client.connection(java_server)
        assert not conn.pending
    assert seen == ids


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_java_processor_exception_is_system_error(
    java_server: str, serialize: SerializeType
) -> None:
    async with RemotingClient() as client:
        request = RemotingCommand.request(THROW, {"x": "1"}, serialize_type=serialize)
        response = await client.invoke(java_server, request, 10.0)
    assert response.is_response
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.opaque == request.opaque
    assert response.remark is not None
    assert response.remark.startswith("java.lang.IllegalStateException: interop boom ü, ")
    # Java builds this answer with createResponseCommand, which takes the process default
    # (JSON), not the request's serialization: a ROCKETMQ request can get a JSON answer.
    assert response.serialize_type == JSON_


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_unknown_code_on_java_server(java_server: str, serialize: SerializeType) -> None:
    async with RemotingClient() as client:
        request = RemotingCommand.request(UNKNOWN, serialize_type=serialize)
        response = await client.invoke(java_server, request, 10.0)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == f" request type {UNKNOWN} not supported"
    assert response.opaque == request.opaque
    assert response.serialize_type == JSON_  # createResponseCommand: the process default


# NettyDecoder is LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4): the limit applies to the
# whole frame, length field included, so the largest length *value* Java accepts is 2**24 - 4.
JAVA_MAX_LENGTH_FIELD = 16 * 1024 * 1024 - 4


def _request_with_length_field(length: int) -> RemotingCommand:
    request = RemotingCommand.request(THROW, serialize_type=RMQ)
    header_len = len(request.to_bytes()) - 8
    request.body = bytes(length - 4 - header_len)
    assert int.from_bytes(request.to_bytes()[:4], "big") == length
    return request


async def test_java_frame_size_limit(java_server: str) -> None:
    """Java reads a frame whose length field is 2**24 - 4 and drops the connection above it."""
    async with RemotingClient() as client:
        largest = _request_with_length_field(JAVA_MAX_LENGTH_FIELD)
        response = await client.invoke(java_server, largest, 30.0)
        assert response.code == ResponseCode.SYSTEM_ERROR  # THROW: decoded and processed
        # Our client refuses to send a frame Java would drop the connection for ...
        with pytest.raises(FrameError, match="exceeds 16777216 bytes"):
            await client.invoke(
                java_server, _request_with_length_field(JAVA_MAX_LENGTH_FIELD + 1), 30.0
            )
    # ... and Java does drop it, as a client configured past the limit shows.
    async with RemotingClient(ClientConfig(max_frame_bytes=1 << 25)) as unlimited:
        with pytest.raises(ConnectError):
            await unlimited.invoke(
                java_server, _request_with_length_field(JAVA_MAX_LENGTH_FIELD + 1), 30.0
            )


def test_our_frame_limit_matches_java() -> None:
    """Our default limit should be Java's: a length field above 2**24 - 4 is refused.

    Otherwise we accept frames a Java peer would drop the connection for, and (as nothing
    checks the size we send) can send them.
    """
    FrameDecoder().feed(JAVA_MAX_LENGTH_FIELD.to_bytes(4, "big"))  # accepted (incomplete)
    with pytest.raises(FrameError):
        FrameDecoder().feed((JAVA_MAX_LENGTH_FIELD + 1).to_bytes(4, "big"))


@pytest.mark.parametrize(
    ("serialize", "callback_serialize"),
    [(JSON_, JSON_), (RMQ, RMQ), (JSON_, RMQ), (RMQ, JSON_)],
    ids=["JSON-JSON", "ROCKETMQ-ROCKETMQ", "JSON-ROCKETMQ", "ROCKETMQ-JSON"],
)
async def test_java_server_calls_our_client_back(
    java_server: str, serialize: SerializeType, callback_serialize: SerializeType
) -> None:
    """Java's server sends requests over our client's connection: a oneway and an invokeSync."""
    callbacks: list[RemotingCommand] = []
    notifies: list[RemotingCommand] = []

    async def on_callback(_conn: Connection, request: RemotingCommand) -> RemotingCommand:
        callbacks.append(request)
        return response_to(
            request,
            ResponseCode.SUCCESS,
            remark="pong ✓",
            ext_fields={"pong": request.ext_fields.get("ping", "<none>")},
            body=request.body_bytes[::-1],
        )

    async def on_notify(_conn: Connection, request: RemotingCommand) -> None:
        notifies.append(request)

    table = ProcessorTable()
    lane = Lane("callbacks", workers=2)
    table.register(CLIENT_CALLBACK, on_callback, lane)
    table.register(CLIENT_NOTIFY, on_notify, lane)
    ping = f"py-ping-✓-{uuid.uuid4().hex}"
    async with RemotingClient(processors=table) as client:
        request = RemotingCommand.request(
            CALLBACK,
            {
                "ping": ping,
                "notify": f"notify-{ping}",
                "callbackSerialize": callback_serialize.name,
            },
            body=b"abc\x00\xff",
            serialize_type=serialize,
        )
        response = await client.invoke(java_server, request, 15.0)
        for _ in range(50):
            if notifies:
                break
            await asyncio.sleep(0.1)

    assert response.code == ResponseCode.SUCCESS, response.remark
    assert response.opaque == request.opaque
    # What Java's invokeSync got back from our ProcessorTable:
    assert response.ext_fields == {
        "callbackCode": "0",
        "callbackOpaqueMatch": "true",
        "callbackFlag": "1",
        "callbackSerialize": callback_serialize.name,
        "callbackLanguage": "JAVA",
        "callbackRemark": "pong ✓",
        "pong": ping,
    }
    assert response.body_bytes == b"\xff\x00cba"

    assert len(callbacks) == 1
    seen = callbacks[0]
    assert seen.code == CLIENT_CALLBACK
    assert seen.flag == 0
    assert seen.language == LanguageCode.JAVA
    assert seen.serialize_type == callback_serialize
    assert seen.ext_fields == {"ping": ping}
    assert seen.body_bytes == b"abc\x00\xff"

    assert len(notifies) == 1
    assert notifies[0].code == CLIENT_NOTIFY
    assert notifies[0].is_oneway
    assert notifies[0].ext_fields == {"id": f"notify-{ping}"}
    assert notifies[0].serialize_type == callback_serialize


# ==================================================== Java's client -> our RemotingServer


class _TestServer:
    """Our RemotingServer with the handlers RemotingInterop's client mode expects."""

    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self.oneway_ids: set[str] = set()
        self.callbacks: list[tuple[RemotingCommand, RemotingCommand]] = []
        self.table = ProcessorTable()
        echo_lane = Lane("echo", workers=4)
        callback_lane = Lane("callback", workers=2)
        self.table.register(ECHO, self.echo, echo_lane)
        self.table.register(THROW, self.boom, echo_lane)
        self.table.register(CALLBACK, self.callback, callback_lane)
        self.server = RemotingServer(ServerConfig(host="127.0.0.1", port=0), self.table)

    async def echo(self, _conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(request)
        if request.is_oneway:
            self.oneway_ids.add(request.ext_fields.get("id", ""))
            return None
        return response_to(
            request,
            ResponseCode.SUCCESS,
            remark=request.remark,
            ext_fields=dict(request.ext_fields),
            body=request.body,
        )

    async def boom(self, _conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        raise RuntimeError("python boom ✓")

    async def callback(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        serialize = SerializeType[request.ext_fields["callbackSerialize"]]
        notify = RemotingCommand.request(
            CLIENT_NOTIFY, {"id": request.ext_fields["notify"]}, serialize_type=serialize
        )
        self.server.invoke_oneway(conn, notify)
        call = RemotingCommand.request(
            CLIENT_CALLBACK,
            {"ping": request.ext_fields["ping"]},
            body=request.body_bytes,
            serialize_type=serialize,
        )
        answer = await self.server.invoke(conn, call, 10.0)
        self.callbacks.append((call, answer))
        return response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={
                "callbackCode": str(answer.code),
                "pong": answer.ext_fields.get("pong", "<none>"),
            },
            body=answer.body,
        )


@pytest.mark.parametrize("serialize", SERIALIZATIONS)
async def test_java_client_against_our_server(
    java_program: JavaProgram, serialize: SerializeType
) -> None:
    ours = _TestServer()
    n = JAVA_CLIENT_REQUESTS
    async with ours.server:
        with java_program.start(
            "client", ours.server.address, str(n), serialize.name, stdin=False
        ) as java:
            line = await asyncio.to_thread(java.wait_for_line, "{", 180.0)
            stderr = java.stderr()
        for _ in range(50):
            if ours.oneway_ids >= set(json.loads(line).get("oneway_ids", [])):
                break
            await asyncio.sleep(0.1)
    summary: dict[str, Any] = json.loads(line)
    context = f"java summary: {summary}\njava stderr:\n{stderr}"

    assert summary["configured_serialize"] == serialize.name, context
    assert summary["failures"] == 0, context
    assert summary["sync_ok"] == n, context
    assert summary["async_ok"] == n, context
    assert summary["unmatched_responses"] == 0, context  # nothing answered a oneway

    # Everything Java sent us was in the serialization it was configured with.
    assert {r.serialize_type for r in ours.requests} == {serialize}
    assert {r.language for r in ours.requests} == {LanguageCode.JAVA}
    oneways = [r for r in ours.requests if r.is_oneway]
    assert len(oneways) == len(summary["oneway_ids"]) == 50
    assert ours.oneway_ids == set(summary["oneway_ids"])
    assert all(r.flag == 2 for r in oneways)

    unknown = summary["unknown"]
    assert unknown["code"] == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, context
    assert unknown["remark"] == f" request type {UNKNOWN} not supported"
    assert unknown["opaque_match"] is True
    assert unknown["flag"] == 1
    assert unknown["serialize"] == serialize.name

    failure = summary["exception"]
    assert failure["code"] == ResponseCode.SYSTEM_ERROR, context
    assert failure["remark"] == "RuntimeError: python boom ✓"
    assert failure["opaque_match"] is True
    assert failure["serialize"] == serialize.name

    callback = summary["callback"]
    assert callback["code"] == ResponseCode.SUCCESS, context
    assert callback["opaque_match"] is True
    assert dict(callback["ext"]) == {
        "callbackCode": "0",
        "pong": f"java-ping-{serialize.name}-✓",
    }
    assert bytes.fromhex(callback["body_hex"]) == "callback body ✓".encode()[::-1]
    (seen,) = summary["callback_requests_seen"]
    assert seen["code"] == CLIENT_CALLBACK
    assert seen["language"] == "PYTHON"
    assert seen["version"] == PROTOCOL_VERSION
    assert seen["flag"] == 0
    assert seen["serialize"] == serialize.name
    assert dict(seen["ext"]) == {"ping": f"java-ping-{serialize.name}-✓"}
    assert bytes.fromhex(seen["body_hex"]) == "callback body ✓".encode()
    (notified,) = summary["notify_requests_seen"]
    assert notified["code"] == CLIENT_NOTIFY
    assert notified["flag"] == 2
    assert dict(notified["ext"]) == {"id": f"java-notify-{serialize.name}"}
    assert notified["serialize"] == serialize.name
    # ... and what our server got back from Java's client processor.
    ((call, answer),) = ours.callbacks
    assert answer.is_response
    assert answer.opaque == call.opaque
    assert answer.code == ResponseCode.SUCCESS
    assert answer.remark == "pong ✓"
    assert answer.ext_fields == {"pong": f"java-ping-{serialize.name}-✓"}
    assert answer.serialize_type == serialize
    assert answer.language == LanguageCode.JAVA


# =========================================================== frame-level cross checks


@pytest.fixture(scope="module")
def java_frames(java_program: JavaProgram) -> list[dict[str, Any]]:
    """Frames Java's RemotingCommand encodes (``encode`` mode), with their fields."""
    frames = java_program.run("encode")
    assert len(frames) >= 30
    return frames


def _ext(pairs: list[list[str | None]] | None) -> dict[str, str | None]:
    return {str(k): v for k, v in pairs or []}


def _fields_of(cmd: RemotingCommand) -> dict[str, Any]:
    return {
        "code": cmd.code,
        "language_code": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "remark": cmd.remark,
        "ext": cmd.ext_fields,
        "body_hex": cmd.body_bytes.hex() if cmd.body is not None else None,
        "serialize": SerializeType(cmd.serialize_type).name,
    }


def _java_fields(d: dict[str, Any], *, null_means_absent: bool) -> dict[str, Any]:
    ext = _ext(d["ext"])
    if null_means_absent:
        # RocketMQSerializable reads a zero-length string as null; ext.get(key) is then null,
        # which is what "absent" means to every Java header decoder.
        ext = {k: v for k, v in ext.items() if v is not None}
    return {
        "code": d["code"],
        "language_code": d["language_code"],
        "version": d["version"],
        "opaque": d["opaque"],
        "flag": d["flag"],
        "remark": d["remark"] or None,  # "" and null are both "no remark"
        "ext": ext,
        "body_hex": d["body_hex"] or None,  # a zero-length body decodes as no body
        "serialize": d["serialize"],
    }


def test_java_encodes_the_same_frame_both_ways(java_frames: list[dict[str, Any]]) -> None:
    """RemotingCommand.encode() and NettyEncoder's fastEncodeHeader agree (sanity)."""
    for d in java_frames:
        if d["fast_header"] and d["serialize"] == "ROCKETMQ":
            # Only NettyEncoder takes the fast path; encode() copies the header into the map.
            assert d["encode_hex"] != d["wire_hex"], d["name"]
            continue
        assert d["encode_hex"] == d["wire_hex"], d["name"]


def test_we_decode_java_frames_as_java_does(java_frames: list[dict[str, Any]]) -> None:
    mismatches = []
    for d in java_frames:
        if d["name"] == "ext_empty_value" and d["serialize"] == "ROCKETMQ":
            continue  # covered by test_rocketmq_zero_length_ext_value_is_absent_as_in_java
        ours = _fields_of(decode_command(frame_of(bytes.fromhex(d["wire_hex"]))))
        javas = _java_fields(d["java_decoded"], null_means_absent=True)
        if ours != javas:
            mismatches.append(f"{d['name']} {d['serialize']}:\n  ours {ours}\n  java {javas}")
    assert not mismatches, "\n".join(mismatches)


def test_we_decode_java_frames_to_the_fields_java_encoded(
    java_frames: list[dict[str, Any]],
) -> None:
    """Against the command Java built: differs only where Java's own decoder would."""
    for d in java_frames:
        if d["name"] == "ext_empty_value" and d["serialize"] == "ROCKETMQ":
            continue  # covered by test_rocketmq_zero_length_ext_value_is_absent_as_in_java
        if d["fast_header"] and d["serialize"] == "ROCKETMQ":
            continue  # fields outside extFields: see test_rocketmq_repeated_ext_key_last_wins
        ours = _fields_of(decode_command(frame_of(bytes.fromhex(d["wire_hex"]))))
        built = _java_fields(d, null_means_absent=False)
        assert ours == built, d["name"]


def test_rocketmq_repeated_ext_key_last_wins(java_frames: list[dict[str, Any]]) -> None:
    """NettyEncoder writes a FastCodesHeader's fields, then the extFields map: a key can repeat."""
    (d,) = (
        f for f in java_frames if f["name"] == "fast_codes_header" and f["serialize"] == "ROCKETMQ"
    )
    frame = bytes.fromhex(d["wire_hex"])
    assert frame.count(b"\x00\x01b\x00\x00\x00") == 2  # "b" is on the wire twice
    assert _ext(d["java_decoded"]["ext"]) == {"a": "pg", "b": "from-map", "z": "extra"}
    ours = decode_command(frame_of(frame))
    assert ours.ext_fields == {"a": "pg", "b": "from-map", "z": "extra"}


def test_rocketmq_zero_length_ext_value_is_absent_as_in_java(
    java_frames: list[dict[str, Any]],
) -> None:
    """A zero-length ROCKETMQ string decodes as null in Java (protocol.md section 4).

    Java's ``mapDeserialize`` puts ``k -> null``: the field reads as absent to every header
    decoder and disappears when the command is encoded again.
    """
    (d,) = (
        f for f in java_frames if f["name"] == "ext_empty_value" and f["serialize"] == "ROCKETMQ"
    )
    assert _ext(d["java_decoded"]["ext"]) == {"k": None}
    ours = decode_command(frame_of(bytes.fromhex(d["wire_hex"])))
    assert ours.ext_fields == {}, "Java reads this field as null (absent)"


# fastjson escapes U+007F, U+2028 and U+2029 and writes \u001B with upper-case hex digits;
# json.dumps leaves DEL, U+2028 and U+2029 raw and writes \u001b. Both texts parse to the same
# values in every JSON reader, so these cases are compared as parsed JSON, not bytes.
_JSON_TEXT_DIFFERS = {"response_control_remark"}


def _python_frame_like(d: dict[str, Any]) -> bytes:
    cmd = RemotingCommand(
        code=d["code"],
        opaque=d["opaque"],
        flag=d["flag"],
        remark=d["remark"],
        ext_fields=_ext(d["ext"]),  # type: ignore[arg-type]  # Java's source values: no nulls
        body=bytes.fromhex(d["body_hex"]) if d["body_hex"] is not None else None,
        language=d["language_code"],
        version=d["version"],
        serialize_type=SerializeType[d["serialize"]],
    )
    return cmd.to_bytes()


def test_we_encode_java_frames_byte_for_byte(java_frames: list[dict[str, Any]]) -> None:
    """Same fields (extFields in Java's HashMap order) give the same bytes as NettyEncoder."""
    mismatches = []
    for d in java_frames:
        ours = _python_frame_like(d)
        java = bytes.fromhex(d["wire_hex"])
        if ours == java:
            continue
        if d["serialize"] == "JSON" and d["name"] in _JSON_TEXT_DIFFERS:
            assert json.loads(header_text(ours)) == json.loads(header_text(java)), d["name"]
            assert (
                ours[8 + len(header_text(ours).encode()) :]
                == java[8 + len(header_text(java).encode()) :]
            )
            continue
        if d["serialize"] == "ROCKETMQ" and d["fast_header"]:
            continue  # a repeated key cannot come from a dict; decoding it is tested above
        if d["serialize"] == "JSON" and d["name"] == "ext_empty_map":
            # Java writes "extFields":{} for an empty map; we omit it (both read as no fields).
            assert json.loads(header_text(java)) == {
                **json.loads(header_text(ours)),
                "extFields": {},
            }
            continue
        if d["serialize"] == "JSON" and d["name"] == "response_empty_remark":
            # Java writes "remark":"" for an empty remark; we omit it (both read as no remark).
            assert json.loads(header_text(java)) == {**json.loads(header_text(ours)), "remark": ""}
            continue
        mismatches.append(
            f"{d['name']} {d['serialize']}:\n  ours {ours.hex()}\n  java {java.hex()}"
        )
    assert not mismatches, "\n".join(mismatches)


def test_decoder_splits_a_stream_of_java_frames(java_frames: list[dict[str, Any]]) -> None:
    stream = b"".join(bytes.fromhex(d["wire_hex"]) for d in java_frames)
    decoder = FrameDecoder()
    frames: list[memoryview] = []
    for start in range(0, len(stream), 777):
        frames += decoder.feed(stream[start : start + 777])
    assert decoder.buffered_bytes == 0
    assert [decode_command(f).opaque for f in frames] == [d["opaque"] for d in java_frames]


def _our_commands() -> list[tuple[str, RemotingCommand]]:
    many = {f"field{i}": f"value-{i}-é" for i in range(20)}
    send_v2 = {
        "a": "producer-group",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "1",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "KEYS\x01k1\x02UNIQ_KEY\x01AC110001000018B4AAC2\x02TAGS\x01tagA\x02",
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    out: list[tuple[str, RemotingCommand]] = []
    for st in (JSON_, RMQ):
        request = RemotingCommand.request(
            310, dict(send_v2), body=bytes(range(256)), serialize_type=st
        )
        out.append(("request_send_v2", request))
        out.append(("request_bare", RemotingCommand.request(34, serialize_type=st)))
        out.append(
            ("request_one_ext", RemotingCommand.request(105, {"topic": "T"}, serialize_type=st))
        )
        out.append(
            (
                "request_oneway",
                RemotingCommand.request(15, {"queueId": "3"}, oneway=True, serialize_type=st),
            )
        )
        out.append(
            (
                "response_unicode_remark",
                response_to(request, 1, remark="错误 ünïcødé ✓ 🚀", ext_fields={"msgId": "7F00"}),
            )
        )
        out.append(
            (
                "response_control_remark",
                response_to(
                    request,
                    17,
                    remark='tab\t nl\n cr\r nul\x00 bell\x07 esc\x1b del\x7f quote" back\\ /'
                    " ls\u2028 ps\u2029 nel\x85 bom\ufeff",
                    ext_fields={"ctl": "\x01\x02\t\n"},
                    body=b"",
                ),
            )
        )
        out.append(("response_many_ext", response_to(request, 0, ext_fields=dict(many))))
        out.append(
            (
                "response_non_ascii_key",
                response_to(request, 0, ext_fields={"ключ": "значение 🚀"}, body=b"\x00" * 70000),
            )
        )
        out.append(("ext_empty_value", RemotingCommand.request(34, {"k": ""}, serialize_type=st)))
        extremes = RemotingCommand(
            code=32767,
            opaque=-(2**31),
            flag=0x7FFFFFFF,
            remark="r",
            ext_fields={"x": "y"},
            body=b"\x01",
            language=LanguageCode.RUST,
            version=-2,
            serialize_type=st,
        )
        out.append(("extremes", extremes))
    out.append(("json_big_code", RemotingCommand.request(200050, {"g": "1"}, serialize_type=JSON_)))
    return out


def test_java_decodes_our_frames(java_program: JavaProgram) -> None:
    commands = _our_commands()
    frames = [cmd.to_bytes() for _name, cmd in commands]
    decoded = java_program.run("decode", input_text="".join(f.hex() + "\n" for f in frames))
    assert len(decoded) == len(commands)
    mismatches = []
    for (name, cmd), frame, d in zip(commands, frames, decoded, strict=True):
        if "error" in d:
            mismatches.append(f"{name} {cmd.serialize_type}: Java failed: {d['error']}")
            continue
        javas = _java_fields(d, null_means_absent=False)
        expected = _fields_of(cmd)
        if cmd.serialize_type == RMQ:
            # Java's own rule for a zero-length ROCKETMQ string, whoever wrote it.
            expected["ext"] = {k: (v or None) for k, v in cmd.ext_fields.items()}
        if expected["body_hex"] == "":
            expected["body_hex"] = None
        if javas != expected:
            mismatches.append(f"{name} {cmd.serialize_type}:\n  java {javas}\n  ours {expected}")
            continue
        # Where the bytes are deterministic (at most one extField, so no HashMap order, and no
        # character the two JSON writers escape differently) Java re-encodes our exact bytes.
        deterministic = (
            len(cmd.ext_fields) <= 1
            and not (cmd.serialize_type == JSON_ and name in _JSON_TEXT_DIFFERS)
            and not (cmd.serialize_type == RMQ and "" in cmd.ext_fields.values())
        )
        if deterministic and d["wire_hex"] != frame.hex():
            mismatches.append(
                f"{name} {cmd.serialize_type} re-encoded:\n"
                f"  java {d['wire_hex']}\n  ours {frame.hex()}"
            )
    assert not mismatches, "\n".join(mismatches)
