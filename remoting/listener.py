"""``Listener``: a listening socket that obeys a TLS mode, shared by every server we run.

RocketMQ counterpart: the TLS half of ``NettyRemotingServer`` (``TlsModeHandler``), which
RocketMQ applies to its remoting port alone. Here the remoting ports (main and VIP), the HA
port and the Prometheus endpoint all open their sockets through this class, so none of them
can be built without the TLS settings (remoting.tls describes the three modes):

- ``disabled``: plain TCP;
- ``enforcing``: every connection is TLS; a plain client fails the handshake and is closed;
- ``permissive``: the listener accepts by itself and peeks at each new socket's first byte
  (0x16 opens a TLS handshake record) before handing it to a plain or a TLS transport. That
  needs a client that speaks first, which the remoting protocol, the HA stream (the slave
  reports its offset at once) and HTTP all do.

``stream_listener`` gives asyncio's stream pair (``asyncio.start_server``'s interface) over
the same listener, for the servers written with streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable

from remoting.lifecycle import TaskGroup
from remoting.tls import TLS_HANDSHAKE_RECORD, TlsMode

log = logging.getLogger(__name__)

StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

DEFAULT_BACKLOG = 1024
DEFAULT_SNIFF_TIMEOUT_S = 10.0  # permissive: how long a silent new client may wait
# A TLS handshake not done by then closes the connection (Netty's SslHandler default; asyncio's
# 60 s let a stranger hold thousands of sockets that no limit counts, mid-handshake).
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
_STREAM_LIMIT_BYTES = 1 << 16  # asyncio's default StreamReader limit


class Listener:
    """One listening socket under a TLS mode; ``start()`` returns once it is bound.

    Args:
        protocol_factory: makes the protocol of each accepted connection.
        tls_mode: ``ssl_context`` is required unless it is disabled.
        sniff_timeout_s: permissive mode: a new connection silent this long is closed.
        handshake_timeout_s: a TLS handshake not complete by then closes the connection.
        name: for log lines.

    Raises:
        ValueError: a TLS mode without a context.
    """

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str,
        port: int,
        *,
        tls_mode: TlsMode = TlsMode.DISABLED,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = DEFAULT_BACKLOG,
        sniff_timeout_s: float = DEFAULT_SNIFF_TIMEOUT_S,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        name: str = "listener",
    ) -> None:
        if tls_mode is not TlsMode.DISABLED and ssl_context is None:
            raise ValueError(f"{name}: TLS mode {tls_mode} needs a certificate and key")
        self.protocol_factory = protocol_factory
        self.host = host
        self.port = port
        self.tls_mode = tls_mode
        self.ssl_context = ssl_context
        self.backlog = backlog
        self.sniff_timeout_s = sniff_timeout_s
        self.handshake_timeout_s = handshake_timeout_s
        self.name = name
        self._server: asyncio.Server | None = None
        # permissive mode accepts by itself
        self._sock: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._sniffers = TaskGroup(f"{name}-sniff")  # permissive mode: one per new socket

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        """The bound sockets (as ``asyncio.Server.sockets``); empty once closed."""
        if self._server is not None:
            return tuple(self._server.sockets)
        return (self._sock,) if self._sock is not None else ()

    async def start(self, *, serve: bool = True) -> int:
        """Bind and (unless ``serve`` is false) accept; returns the port (the one chosen
        when ``port`` is 0).

        Bound but not serving, the port is the listener's and known, and connections are
        not taken yet: a broker binds before its services start (their messages carry the
        store host, which names the port) and serves once they have.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        if self.tls_mode is TlsMode.PERMISSIVE:
            self._sock = self._bind()
            self.port = int(self._sock.getsockname()[1])
        else:
            tls = self.tls_mode is TlsMode.ENFORCING
            self._server = await loop.create_server(
                self.protocol_factory,
                self.host,
                self.port,
                backlog=self.backlog,
                reuse_address=True,
                ssl=self.ssl_context if tls else None,
                ssl_handshake_timeout=self.handshake_timeout_s if tls else None,
                start_serving=False,
            )
            self.port = int(self._server.sockets[0].getsockname()[1])
        if serve:
            await self.serve()
        return self.port

    async def serve(self) -> None:
        """Accept connections on the bound port (after ``start(serve=False)``). Idempotent."""
        if self._server is not None:
            await self._server.start_serving()
        elif self._sock is not None and self._acceptor is None:
            self._acceptor = asyncio.create_task(
                self._accept_loop(asyncio.get_running_loop(), self._sock),
                name=f"{self.name}-accept",
            )

    def close(self) -> None:
        """Stop accepting; connections already open go on. Idempotent."""
        if self._server is not None:
            self._server.close()
        if self._acceptor is not None:
            self._acceptor.cancel()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def wait_closed(self) -> None:
        """After ``close()``: wait until nothing accepts or sniffs any more."""
        if self._server is not None:
            await self._server.wait_closed()
        if self._acceptor is not None:
            self._acceptor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acceptor
        self._acceptor = None
        await self._sniffers.close()

    # ------------------------------------------------------------------ permissive

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(self.backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    async def _accept_loop(self, loop: asyncio.AbstractEventLoop, lsock: socket.socket) -> None:
        while True:
            try:
                client, _addr = await loop.sock_accept(lsock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if self._sock is None:
                    return  # closed by close()
                log.warning("accept_failed server=%s error=%s", self.name, exc)
                await asyncio.sleep(0.1)
                continue
            self._sniffers.spawn(self._sniff(loop, client))

    async def _sniff(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        """Peek at the first byte (the client speaks first in every protocol served here)
        and hand the socket to a plain or a TLS transport."""
        try:
            sock.setblocking(False)
            async with asyncio.timeout(self.sniff_timeout_s):
                first = await _peek_first_byte(loop, sock)
            tls = first == TLS_HANDSHAKE_RECORD
            await loop.connect_accepted_socket(
                self.protocol_factory,
                sock,
                ssl=self.ssl_context if tls else None,
                ssl_handshake_timeout=self.handshake_timeout_s if tls else None,
            )
        except (OSError, ssl.SSLError) as exc:  # TimeoutError included
            log.info(
                "tls_sniff_failed server=%s error=%s", self.name, str(exc) or type(exc).__name__
            )
            sock.close()
        except BaseException:
            # Cancelled by shutdown (or a bug): the socket is ours until a transport has
            # taken it, and one that failed has let go of it (both loops close it then), so
            # close it here; a second close is harmless.
            sock.close()
            raise


async def _peek_first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> int:
    """The socket's first byte, left in it for the transport.

    Waits for the socket to become readable (``add_reader``, which uvloop and the stdlib loop
    both offer for a socket no transport holds) instead of polling it.

    Raises:
        ConnectionError: the peer closed before it sent a byte.
    """
    while True:
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        else:
            if not first:
                raise ConnectionError("closed before it spoke")
            return first[0]
        readable: asyncio.Future[None] = loop.create_future()
        fd = sock.fileno()
        loop.add_reader(fd, _wake, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def stream_listener(
    handler: StreamHandler,
    host: str,
    port: int,
    *,
    limit: int = _STREAM_LIMIT_BYTES,
    tls_mode: TlsMode = TlsMode.DISABLED,
    ssl_context: ssl.SSLContext | None = None,
    name: str = "listener",
) -> Listener:
    """A ``Listener`` that runs ``handler(reader, writer)`` per connection, as
    ``asyncio.start_server`` does (``limit`` bounds what ``readuntil`` buffers)."""

    def factory() -> asyncio.BaseProtocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=limit), handler)

    return Listener(factory, host, port, tls_mode=tls_mode, ssl_context=ssl_context, name=name)
