"""``RemotingServer``: accepts connections and feeds their requests to a processor table.

RocketMQ counterpart: ``NettyRemotingServer`` (``start``, ``registerProcessor``,
``invokeSync``/``invokeOneway`` towards a client channel, ``ChannelEventListener``).

``start()`` returns once the port is bound, with ``port`` the real one even when configured
as 0. ``shutdown()`` stops accepting, drains the lanes for ``shutdown_grace_s``, then closes
every connection; it is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from remoting.command import RemotingCommand
from remoting.connection import DEFAULT_WRITE_BUFFER_HIGH_BYTES, Connection, run_sweeper
from remoting.dispatch import ProcessorTable
from remoting.frame import DEFAULT_MAX_FRAME_BYTES
from remoting.tls import TLS_HANDSHAKE_RECORD, TlsMode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Listener settings (RocketMQ ``NettyServerConfig``)."""

    host: str = "127.0.0.1"
    port: int = 0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float = 120.0  # serverChannelMaxIdleTimeSeconds
    frame_read_timeout_s: float = 60.0
    write_buffer_high_bytes: int = DEFAULT_WRITE_BUFFER_HIGH_BYTES
    backlog: int = 1024  # serverSocketBacklog
    shutdown_grace_s: float = 5.0
    tls_mode: TlsMode = TlsMode.DISABLED  # tls.server.mode
    ssl_context: ssl.SSLContext | None = None  # required unless tls_mode is disabled
    tls_sniff_timeout_s: float = 10.0  # permissive: how long a silent new client may wait

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not in 0..65535")
        if self.max_frame_bytes < 16:
            raise ValueError(f"max_frame_bytes {self.max_frame_bytes} is too small")
        if self.tls_mode is not TlsMode.DISABLED and self.ssl_context is None:
            raise ValueError(f"TLS mode {self.tls_mode} needs a certificate and key")


class RemotingServer:
    """A listening socket, its connections and their processor table."""

    def __init__(
        self, config: ServerConfig, processors: ProcessorTable, *, name: str = "remoting"
    ) -> None:
        self.config = config
        self.processors = processors
        self.name = name
        self.connections: set[Connection] = set()
        self._close_listeners: list[Callable[[Connection], None]] = []
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping: asyncio.Future[None] | None = None
        self.port = config.port
        # TLS permissive mode accepts by itself (see _start_sniffing).
        self._listen_sock: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._sniffers: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        """``host:port`` as clients should dial it."""
        return f"{self.config.host}:{self.port}"

    def add_close_listener(self, listener: Callable[[Connection], None]) -> None:
        """Call ``listener(conn)`` whenever a connection closes (client channel cleanup)."""
        self._close_listeners.append(listener)

    def _make_connection(self) -> Connection:
        return Connection(
            self.processors.dispatch,
            self._connection_closed,
            max_frame_bytes=self.config.max_frame_bytes,
            write_buffer_high_bytes=self.config.write_buffer_high_bytes,
        )

    def _connection_made(self) -> Connection:
        conn = self._make_connection()
        self.connections.add(conn)
        return conn

    def _connection_closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        for listener in self._close_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("close_listener_failed server=%s peer=%s", self.name, conn.peer)

    async def start(self) -> None:
        """Start the lanes and bind; returns once connections are accepted."""
        loop = asyncio.get_running_loop()
        self.processors.start()
        cfg = self.config
        if cfg.tls_mode is TlsMode.PERMISSIVE:
            self.port = await self._start_sniffing(loop)
        else:
            self._server = await loop.create_server(
                self._connection_made,
                cfg.host,
                cfg.port,
                backlog=cfg.backlog,
                reuse_address=True,
                ssl=cfg.ssl_context if cfg.tls_mode is TlsMode.ENFORCING else None,
            )
            self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(
            run_sweeper(
                lambda: self.connections,
                self.config.idle_timeout_s,
                self.config.frame_read_timeout_s,
            ),
            name=f"{self.name}-sweeper",
        )
        log.info("server_started server=%s address=%s", self.name, self.address)

    async def invoke(
        self, conn: Connection, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """A request to a client over its own connection (e.g. GET_CONSUMER_RUNNING_INFO)."""
        return await conn.invoke(request, timeout_s)

    def invoke_oneway(self, conn: Connection, request: RemotingCommand) -> None:
        """A oneway request to a client (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        conn.invoke_oneway(request)

    async def shutdown(self) -> None:
        """Stop accepting, drain lanes, close connections. Idempotent: a second call waits
        for the first to finish."""
        if self._stopping is not None:
            await asyncio.shield(self._stopping)
            return
        self._stopping = asyncio.get_running_loop().create_future()
        try:
            await self._shutdown()
        finally:
            self._stopping.set_result(None)

    def stop_accepting(self) -> None:
        """Close the listening socket; connections already open keep being served."""
        if self._server is not None:
            self._server.close()
        if self._acceptor is not None:
            self._acceptor.cancel()
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None

    # ------------------------------------------------------------------ TLS permissive

    async def _start_sniffing(self, loop: asyncio.AbstractEventLoop) -> int:
        """Accept ourselves, so each new socket can be looked at before a protocol (with
        or without TLS) takes it over."""
        cfg = self.config
        family = socket.AF_INET6 if ":" in cfg.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((cfg.host, cfg.port))
            sock.listen(cfg.backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._listen_sock = sock
        self._acceptor = asyncio.create_task(
            self._accept_loop(loop, sock), name=f"{self.name}-accept"
        )
        return int(sock.getsockname()[1])

    async def _accept_loop(self, loop: asyncio.AbstractEventLoop, lsock: socket.socket) -> None:
        while True:
            try:
                client, _addr = await loop.sock_accept(lsock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if self._listen_sock is None:
                    return  # closed by stop_accepting
                log.warning("accept_failed server=%s error=%s", self.name, exc)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(self._sniff(loop, client))
            self._sniffers.add(task)
            task.add_done_callback(self._sniffers.discard)

    async def _sniff(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        """Peek at the first byte (the client speaks first in this protocol) and hand the
        socket to a plain or a TLS connection."""
        sock.setblocking(False)
        deadline = loop.time() + self.config.tls_sniff_timeout_s
        first = b""
        try:
            while True:
                try:
                    first = sock.recv(1, socket.MSG_PEEK)
                    break
                except (BlockingIOError, InterruptedError):
                    if loop.time() > deadline:
                        raise TimeoutError from None
                    await asyncio.sleep(0.005)
            if not first:
                raise ConnectionError("closed before it spoke")
            tls = first[0] == TLS_HANDSHAKE_RECORD
            await loop.connect_accepted_socket(
                self._connection_made,
                sock,
                ssl=self.config.ssl_context if tls else None,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            log.info(
                "tls_sniff_failed server=%s error=%s", self.name, str(exc) or type(exc).__name__
            )
            sock.close()

    async def _shutdown(self) -> None:
        self.stop_accepting()
        await self.processors.shutdown(self.config.shutdown_grace_s)
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for conn in list(self.connections):
            conn.close()
        if self.connections:
            await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in list(self.connections)],
                timeout=self.config.shutdown_grace_s,
            )
        for conn in list(self.connections):
            conn.abort("server shutdown")
        if self._server is not None:
            await self._server.wait_closed()
        for task in [self._acceptor, *self._sniffers]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        log.info("server_stopped server=%s address=%s", self.name, self.address)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
