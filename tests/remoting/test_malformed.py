"""Malformed and hostile input over raw sockets: each bad connection is closed with a logged
reason, and a well-behaved client on another connection keeps getting correct answers.

RocketMQ's ``NettyDecoder`` closes the channel on any decode error; so do we, and only that
channel. The slow-sender and idle deadlines are ``sweep()``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
from dataclasses import dataclass

import msgpack
import pytest

from remoting import RemotingClient, RemotingServer, SerializeType
from tests.remoting.conftest import (
    MAX_FRAME_BYTES,
    LogEntries,
    RawFactory,
    ServerFactory,
    assert_echoed,
    check_echo,
    close_reasons,
    echo_request,
    frame,
    local_peer,
    read_frame,
    read_until_closed,
)
from tests.support import wait_until

JSON_HEADER = json.dumps({"code": 30001, "flag": 0, "opaque": 5, "version": 409}).encode()


@dataclass(frozen=True)
class Bad:
    payload: bytes
    reason: str  # a part of the logged close reason


BAD_INPUT = {
    "negative length": Bad(struct.pack(">i", -1) + bytes(16), "frame length -1 outside"),
    "length below 4": Bad(struct.pack(">i", 2) + bytes(16), "frame length 2 outside"),
    "length over max_frame_bytes": Bad(
        struct.pack(">i", MAX_FRAME_BYTES + 1) + bytes(16),
        f"frame length {MAX_FRAME_BYTES + 1} outside [4, ",
    ),
    "length 2**31-1": Bad(struct.pack(">i", 0x7FFFFFFF), "frame length 2147483647 outside"),
    "header length larger than the frame": Bad(
        struct.pack(">iI", 4 + 10, 1000) + b"x" * 10, "header length 1000 larger than the frame"
    ),
    "garbage JSON header": Bad(frame(0, b"{not json at all"), "JSON header does not parse"),
    "non-UTF-8 JSON header": Bad(frame(0, b"\xff\xfe\xfd{"), "JSON header does not parse"),
    "JSON header that is a list": Bad(frame(0, b"[1, 2, 3]"), "JSON header is not an object"),
    "JSON header that is a string": Bad(frame(0, b'"code"'), "JSON header is not an object"),
    "JSON header without code": Bad(frame(0, b'{"opaque": 1}'), "JSON header has no code"),
    "JSON code not an integer": Bad(frame(0, b'{"code": [1]}'), "code is not an integer"),
    "JSON extFields not an object": Bad(
        frame(0, b'{"code": 1, "extFields": [1]}'), "extFields is not an object"
    ),
    "serialize type 7": Bad(frame(7, JSON_HEADER), "unknown serialize type 7"),
    "serialize type 255": Bad(frame(255, JSON_HEADER), "unknown serialize type 255"),
    "ROCKETMQ header too short": Bad(frame(1, bytes(5)), "shorter than 21"),
    "ROCKETMQ remark past the header": Bad(
        frame(1, struct.pack(">hBhiii", 1, 0, 0, 1, 0, 1000) + bytes(4)), "runs past the header"
    ),
    "msgpack garbage": Bad(frame(2, b"\xc1\xc1"), "msgpack header does not parse"),
    "msgpack header not an array": Bad(frame(2, msgpack.packb({"code": 1})), "7-element array"),
    "JSON nested 50,000 deep": Bad(frame(0, b"[" * 50_000), "JSON header nests too deeply"),
    "msgpack extFields value of type bin": Bad(
        frame(2, msgpack.packb([1, 0, 0, 1, 0, None, {"k": b"\x00"}])), "has no string form"
    ),
}


@pytest.mark.parametrize("bad", list(BAD_INPUT.values()), ids=list(BAD_INPUT))
async def test_malformed_frame_closes_only_that_connection(
    bad: Bad,
    start_server: ServerFactory,
    client: RemotingClient,
    raw: RawFactory,
    logs: LogEntries,
) -> None:
    server = await start_server(frame_read_timeout_s=1.0)
    await check_echo(client, server.address, 1)
    good = await client.connection(server.address)

    reader, writer = await raw(server)
    peer = local_peer(writer)
    writer.write(bad.payload)
    await writer.drain()

    assert await read_until_closed(reader, timeout_s=2.0) == b"", "nothing may be answered"
    reasons = close_reasons(logs, peer)
    assert len(reasons) == 1, logs
    assert bad.reason in reasons[0]
    assert not good.closed
    await check_echo(client, server.address, 2)
    assert await client.connection(server.address) is good, "the good connection was dropped"


async def test_truncated_frame_then_eof_is_not_answered(
    server: RemotingServer, client: RemotingClient, raw: RawFactory, logs: LogEntries
) -> None:
    await check_echo(client, server.address, 1)
    reader, writer = await raw(server)
    peer = local_peer(writer)
    whole = echo_request(7).to_bytes()
    writer.write(whole[: len(whole) // 2])
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write_eof()  # half-close: we can still see whether the server answers or closes

    assert await read_until_closed(reader, timeout_s=2.0) == b""
    truncated = [e for e in logs if e["event"] == "connection_truncated_frame"]
    assert [(e["peer"], e["buffered_bytes"]) for e in truncated] == [(peer, len(whole) // 2)]
    await wait_until(lambda: len(server.connections) == 1, "the truncated connection to go")
    await check_echo(client, server.address, 2)


async def test_slow_loris_is_closed_after_frame_read_timeout(
    start_server: ServerFactory, client: RemotingClient, raw: RawFactory, logs: LogEntries
) -> None:
    server = await start_server(frame_read_timeout_s=1.0)
    await check_echo(client, server.address, 1)
    reader, writer = await raw(server)
    peer = local_peer(writer)
    whole = echo_request(9).to_bytes()
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent = 0
    closed_after: float | None = None
    for byte in whole[:25]:  # 25 bytes at 0.2 s: 5 s at most, far past the 1 s deadline
        writer.write(bytes([byte]))
        sent += 1
        try:
            data = await asyncio.wait_for(reader.read(1), timeout=0.2)
        except TimeoutError:
            continue
        except ConnectionResetError:
            data = b""
        assert data == b"", "a half-sent frame got an answer"
        closed_after = loop.time() - started
        break

    assert closed_after is not None, "slow sender still connected after 25 bytes"
    assert 1.0 <= closed_after < 2.5
    assert sent < len(whole)
    assert close_reasons(logs, peer) == ["frame not completed within 1 s"]
    await check_echo(client, server.address, 2)


async def test_idle_connection_is_closed_but_active_one_is_kept(
    start_server: ServerFactory, client: RemotingClient, raw: RawFactory, logs: LogEntries
) -> None:
    server = await start_server(idle_timeout_s=0.5)
    idle_reader, idle_writer = await raw(server)
    idle_peer = local_peer(idle_writer)
    busy_reader, busy_writer = await raw(server)
    busy_peer = local_peer(busy_writer)
    loop = asyncio.get_running_loop()
    started = loop.time()

    # The busy connection sends a request every 0.15 s for 1.2 s: never idle 0.5 s.
    for i in range(8):
        request = echo_request(i)
        busy_writer.write(request.to_bytes())
        _type, response = await read_frame(busy_reader)
        assert_echoed(request, response)
        await asyncio.sleep(0.15)

    assert await read_until_closed(idle_reader, timeout_s=1.0) == b""
    assert loop.time() - started >= 0.5
    assert close_reasons(logs, idle_peer) == ["idle for more than 0.5 s"]
    assert close_reasons(logs, busy_peer) == []
    await check_echo(client, server.address, 1)


async def test_random_garbage_fuzz(
    server: RemotingServer, client: RemotingClient, raw: RawFactory, logs: LogEntries
) -> None:
    """200 connections, each sending a short random payload then EOF; the server survives.

    Half the payloads are pure noise (the length check rejects them); the other half carry a
    plausible frame prefix and serialize type so the header decoders see the noise.
    """
    seed = 20240607
    rng = random.Random(seed)
    await check_echo(client, server.address, 0)

    def payload(n: int) -> bytes:
        noise = rng.randbytes(rng.randint(1, 64))
        if n % 2 == 0:
            return noise
        serialize_type = rng.choice([0, 1, 2, rng.randint(0, 255)])
        header_len = rng.randint(0, len(noise))
        # The announced length may exceed what is sent: a truncated frame then EOF.
        length = 4 + len(noise) + rng.choice([0, 0, 0, rng.randint(1, 100)])
        return struct.pack(">iI", length, (serialize_type << 24) | header_len) + noise

    async def one(n: int, data: bytes) -> None:
        reader, writer = await raw(server)
        writer.write(data)
        with contextlib.suppress(OSError):  # the server may have reset us already
            await writer.drain()
            writer.write_eof()
        try:
            await read_until_closed(reader, timeout_s=3.0)
        except BaseException as exc:
            exc.add_note(f"fuzz seed {seed}, payload {n}: {data!r}")
            raise

    payloads = [payload(n) for n in range(200)]
    for batch in range(0, 200, 20):
        await asyncio.gather(*(one(n, payloads[n]) for n in range(batch, batch + 20)))

    await wait_until(lambda: len(server.connections) == 1, "fuzz connections to be closed")
    assert any(e["event"] == "connection_closed" for e in logs)
    for i in range(1, 4):
        await check_echo(client, server.address, i)
    for serialize_type in SerializeType:
        request = echo_request(99, serialize_type=serialize_type)
        response = await client.invoke(server.address, request, timeout_s=3.0)
        assert_echoed(request, response)
