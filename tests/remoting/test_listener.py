"""The permissive listener's sniff (review of M11, finding 7): a new socket waits for its first
byte without polling, is closed when it stays silent past the sniff timeout, and is closed
when the listener shuts down while it is still being sniffed. And a TLS handshake that never
completes is given up after the listener's handshake timeout, in both TLS modes (asyncio's
default kept such a socket 60 s, uncounted by any connection limit).

The sniff's clients never speak, so the TLS context is never used: a bare server context will
do there; the handshake test uses a real certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from remoting.listener import Listener
from remoting.tls import TlsMode, server_context
from tests.remoting.test_tls import make_cert

SILENT_CLIENTS = 128
IDLE_S = 0.5


def permissive(sniff_timeout_s: float) -> Listener:
    return Listener(
        asyncio.Protocol,
        "127.0.0.1",
        0,
        tls_mode=TlsMode.PERMISSIVE,
        ssl_context=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER),
        sniff_timeout_s=sniff_timeout_s,
        name="test",
    )


@contextlib.asynccontextmanager
async def listening(sniff_timeout_s: float) -> AsyncIterator[Listener]:
    listener = permissive(sniff_timeout_s)
    await listener.start()
    try:
        yield listener
    finally:
        listener.close()
        await listener.wait_closed()


async def silent(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server closes the connection (EOF, or a reset) within ``within_s``."""
    try:
        async with asyncio.timeout(within_s):
            return await reader.read(1) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def test_a_silent_client_is_closed_at_the_sniff_timeout_and_at_shutdown() -> None:
    async with listening(sniff_timeout_s=0.3) as listener:
        reader, writer = await silent(listener.port)
        started = time.monotonic()
        assert await closed_by_server(reader, 5.0)
        assert 0.2 < time.monotonic() - started < 5.0
        writer.close()
    listener = permissive(sniff_timeout_s=60.0)
    await listener.start()
    reader, writer = await silent(listener.port)
    await asyncio.sleep(0.1)  # accepted: being sniffed
    listener.close()
    await listener.wait_closed()
    # The sniff was cancelled by the shutdown: its socket is closed, not left to the client.
    assert await closed_by_server(reader, 2.0)
    writer.close()


async def test_silent_clients_being_sniffed_cost_no_cpu() -> None:
    async with listening(sniff_timeout_s=60.0) as listener:
        clients = [await silent(listener.port) for _ in range(SILENT_CLIENTS)]
        await asyncio.sleep(0.1)  # all accepted and being sniffed
        cpu = time.process_time()
        await asyncio.sleep(IDLE_S)
        spent_s = time.process_time() - cpu
        # Polling every 5 ms is 12,800 wake-ups here; waiting for readability is none.
        assert spent_s < 0.03, f"{spent_s:.3f} s of CPU while {SILENT_CLIENTS} clients wait"
        for _reader, writer in clients:
            writer.write(b"x")  # a plain client speaks at last: handed to a transport
            await writer.drain()
        closed = await asyncio.gather(*(closed_by_server(r, 0.1) for r, _w in clients))
        assert not any(closed)
        for _reader, writer in clients:
            writer.close()


# The first bytes of a TLS record carrying a ClientHello, and no more: a client stalled in
# its handshake.
STALLED_HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00])


@pytest.mark.parametrize("mode", [TlsMode.ENFORCING, TlsMode.PERMISSIVE])
async def test_a_stalled_tls_handshake_is_closed_at_the_handshake_timeout(
    mode: TlsMode, tmp_path: Path
) -> None:
    cert = make_cert(tmp_path)
    listener = Listener(
        asyncio.Protocol,
        "127.0.0.1",
        0,
        tls_mode=mode,
        ssl_context=server_context(cert.cert, cert.key),
        handshake_timeout_s=0.3,
        name="test",
    )
    await listener.start()
    try:
        reader, writer = await silent(listener.port)
        writer.write(STALLED_HELLO)
        started = time.monotonic()
        assert await closed_by_server(reader, 5.0), "a stalled handshake was kept past 5 s"
        assert time.monotonic() - started > 0.2
        writer.close()
    finally:
        listener.close()
        await listener.wait_closed()
