"""Fixtures and helpers for the remoting tests: real echo servers on 127.0.0.1:0.

Every server is entered with ``async with`` on an ``AsyncExitStack`` owned by a fixture, so it
shuts down even when the test fails; the clients are tests/conftest.py's ``start_client`` and
``client``. Raw connections (``asyncio.open_connection``) are closed by the ``raw`` fixture.
Nothing of ours is mocked.

The helpers below are imported by the test modules (``from tests.remoting.conftest import …``):
a raw frame builder, a frame reader, and bounded reads (every loop here has a count and a
deadline, so a broken server fails a test instead of hanging it); ``wait_until`` is
tests/support.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import pytest

from broker.logs import event_fields
from remoting import (
    Connection,
    Lane,
    ProcessorTable,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    ResponseCode,
    RPCHook,
    SerializeType,
    ServerConfig,
    decode_command,
    response_to,
)
from tests.support import LOOPBACK

MAX_FRAME_BYTES = 64 * 1024

# Request codes of the test processors: unused by RocketMQ and below 32768, so they fit the
# ROCKETMQ binary header too.
ECHO = 30001
UNKNOWN_CODE = 29999

_PREFIX = struct.Struct(">iI")  # frame length, (serialize type << 24) | header length
assert _PREFIX.size == 8


class LogEntries:
    """The ``remoting.*`` log records of a test as dicts, ``{"event": …, key: value, …,
    "log_level": …}``, read again on every iteration (the list grows while the test runs).

    Remoting logs through the standard library (it is shared with the SDK, a library); the
    records are taken apart by the broker's own ``event_fields``, as its log lines are.
    """

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def entries(self) -> list[dict[str, Any]]:
        out = []
        for record in self._caplog.records:
            if not record.name.startswith("remoting"):
                continue
            fields = event_fields(record) or {"event": record.getMessage()}
            fields["log_level"] = record.levelname.lower()
            if record.exc_info:
                fields["exc_info"] = record.exc_info
            out.append(fields)
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries())

    def __repr__(self) -> str:
        return repr(self.entries())


# ------------------------------------------------------------------------------ handlers


async def echo(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """SUCCESS with the request's ext_fields and body.

    ``hops`` (ext field) makes the handler yield to the loop that many times first, so
    responses on one connection come back out of request order.
    """
    for _ in range(int(request.ext_fields.get("hops", "0"))):
        await asyncio.sleep(0)
    return response_to(
        request,
        ResponseCode.SUCCESS,
        ext_fields=dict(request.ext_fields),
        body=request.body_bytes or None,
    )


def echo_table(hooks: list[RPCHook] | None = None) -> ProcessorTable:
    """A table with ``echo`` on ECHO, on a lane roomy enough for 10,000 queued requests."""
    table = ProcessorTable(hooks=hooks)
    table.register(ECHO, echo, Lane("echo", workers=8, capacity=50_000))
    return table


# ------------------------------------------------------------------------------ fixtures


class ServerFactory(Protocol):
    async def __call__(
        self, table: ProcessorTable | None = None, **config: Any
    ) -> RemotingServer: ...


SERVER_DEFAULTS: dict[str, Any] = {
    "host": LOOPBACK,
    "port": 0,
    "max_frame_bytes": MAX_FRAME_BYTES,
    "shutdown_grace_s": 1.0,
}


@pytest.fixture
async def start_server() -> AsyncIterator[ServerFactory]:
    """Start a RemotingServer (echo table unless given) with ServerConfig overrides."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(table: ProcessorTable | None = None, **config: Any) -> RemotingServer:
            cfg = ServerConfig(**{**SERVER_DEFAULTS, **config})
            server = RemotingServer(cfg, table if table is not None else echo_table())
            return await stack.enter_async_context(server)

        yield start


@pytest.fixture
async def server(start_server: ServerFactory) -> RemotingServer:
    """An echo server with a 64 KiB frame limit."""
    return await start_server()


class RawFactory(Protocol):
    async def __call__(
        self, server: RemotingServer
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...


@pytest.fixture
async def raw() -> AsyncIterator[RawFactory]:
    """Open plain asyncio streams to a server; every one is closed at teardown."""
    writers: list[asyncio.StreamWriter] = []

    async def connect(server: RemotingServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(LOOPBACK, server.port), timeout=2.0
        )
        writers.append(writer)
        return reader, writer

    yield connect
    for writer in writers:
        writer.close()
    for writer in writers:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await asyncio.wait_for(writer.wait_closed(), timeout=2.0)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> LogEntries:
    """Every remoting log event of the test, debug and info included (some events checked
    here are below the default WARNING: ``connection_truncated_frame`` is info,
    ``response_without_request`` debug)."""
    caplog.set_level(logging.DEBUG, logger="remoting")
    return LogEntries(caplog)


# ------------------------------------------------------------------------------- helpers


def frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """A frame with an arbitrary header, for writing malformed ones."""
    return (
        _PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header))
        + header
        + body
    )


async def read_frame(
    reader: asyncio.StreamReader, timeout_s: float = 3.0
) -> tuple[int, RemotingCommand]:
    """One frame from a raw connection: (serialize type byte, decoded command)."""
    async with asyncio.timeout(timeout_s):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        data = await reader.readexactly(length)
    return data[0], decode_command(memoryview(data))


async def read_until_closed(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """Everything the server sends until it closes the connection (EOF or reset).

    Fails the test if the connection is still open after ``timeout_s``.
    """
    received = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            for _ in range(100_000):
                chunk = await reader.read(65536)
                if not chunk:
                    break
                received += chunk
    except TimeoutError:
        pytest.fail(f"server did not close the connection within {timeout_s} s")
    except ConnectionResetError:
        pass  # an abort with unread input makes the kernel answer RST: closed as well
    return bytes(received)


async def assert_silent(reader: asyncio.StreamReader, wait_s: float) -> None:
    """No byte arrives (and the connection stays open) for ``wait_s``."""
    try:
        data = await asyncio.wait_for(reader.read(1), timeout=wait_s)
    except TimeoutError:
        return
    pytest.fail(f"expected silence, got {data!r}" if data else "connection closed")


def local_peer(writer: asyncio.StreamWriter) -> str:
    """How the server names this raw connection in its logs (``host:port``)."""
    host, port = writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


def close_reasons(logs: LogEntries, peer: str) -> list[str]:
    """Reasons of ``connection_closed`` events logged for ``peer``."""
    return [
        str(e.get("reason"))
        for e in logs
        if e.get("event") == "connection_closed" and e.get("peer") == peer
    ]


def echo_request(
    i: int, *, hops: int = 0, serialize_type: int = SerializeType.JSON
) -> RemotingCommand:
    """An ECHO request with a unique ext field and body derived from ``i``."""
    return RemotingCommand.request(
        ECHO,
        {"i": str(i), "tag": f"t{i * 7919 % 10007}", "hops": str(hops)},
        f"body-{i}".encode(),
        serialize_type=serialize_type,
    )


def assert_echoed(request: RemotingCommand, response: RemotingCommand) -> None:
    """``response`` is the echo of ``request`` and nothing else."""
    assert response.code == ResponseCode.SUCCESS, response
    assert response.is_response
    assert response.opaque == request.opaque
    assert response.ext_fields == request.ext_fields
    assert response.body_bytes == request.body_bytes


async def check_echo(client: RemotingClient, addr: str, i: int) -> None:
    """One ECHO round trip through ``client`` gives back exactly what was sent."""
    request = echo_request(i)
    response = await client.invoke(addr, request, timeout_s=3.0)
    assert_echoed(request, response)
