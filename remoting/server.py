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
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import structlog

from remoting.command import RemotingCommand
from remoting.connection import DEFAULT_WRITE_BUFFER_HIGH_BYTES, Connection, run_sweeper
from remoting.dispatch import ProcessorTable
from remoting.frame import DEFAULT_MAX_FRAME_BYTES

log = structlog.get_logger(__name__)


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

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not in 0..65535")
        if self.max_frame_bytes < 16:
            raise ValueError(f"max_frame_bytes {self.max_frame_bytes} is too small")


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
                log.exception("close_listener_failed", server=self.name, peer=conn.peer)

    async def start(self) -> None:
        """Start the lanes and bind; returns once connections are accepted."""
        loop = asyncio.get_running_loop()
        self.processors.start()
        self._server = await loop.create_server(
            self._connection_made,
            self.config.host,
            self.config.port,
            backlog=self.config.backlog,
            reuse_address=True,
        )
        sockets = self._server.sockets
        self.port = sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(
            run_sweeper(
                lambda: self.connections,
                self.config.idle_timeout_s,
                self.config.frame_read_timeout_s,
            ),
            name=f"{self.name}-sweeper",
        )
        log.info("server_started", server=self.name, address=self.address)

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
        log.info("server_stopped", server=self.name, address=self.address)

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
