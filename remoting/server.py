"""``RemotingServer``: accepts connections and feeds their requests to a processor table.

RocketMQ counterpart: ``NettyRemotingServer`` (``start``, ``registerProcessor``,
``invokeSync``/``invokeOneway`` towards a client channel, ``ChannelEventListener``).

``start()`` returns once the port is bound, with ``port`` the real one even when configured
as 0. ``shutdown()`` stops accepting, drains the lanes for ``shutdown_grace_s``, then closes
every connection; it is idempotent.

Beyond ``max_connections`` (ours; Netty accepts without limit) a new connection is served
nothing: its first request is answered SYSTEM_BUSY with a remark saying why, and it is
closed. Java producers retry another broker on SYSTEM_BUSY.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from remoting.command import RemotingCommand
from remoting.connection import (
    DEFAULT_WRITE_BUFFER_HIGH_BYTES,
    Connection,
    Refusal,
    ServerBudget,
    run_sweeper,
)
from remoting.dispatch import ProcessorTable
from remoting.frame import DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_HEADER_BYTES, MAX_HEADER_BYTES
from remoting.listener import Listener
from remoting.tls import TlsMode

log = logging.getLogger(__name__)

# A refused connection gets this long to send its first request's header.
REFUSAL_WAIT_S = 2.0
# Refused connections kept open at once to be answered; past that they are dropped at once,
# without an answer, so a connection flood costs no more than this many small buffers.
MAX_REFUSING = 64
# At most one connection_refused line per this many seconds (the counter has them all).
REFUSAL_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Listener settings (RocketMQ ``NettyServerConfig``)."""

    host: str = "127.0.0.1"
    port: int = 0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    idle_timeout_s: float = 120.0  # serverChannelMaxIdleTimeSeconds
    # A frame begun must be complete within this time. A Java client gives up on a send
    # after 3 s (sendMsgTimeout), so a frame still incomplete after 10 s is one no client
    # waits for, and its bytes are held for nothing.
    frame_read_timeout_s: float = 10.0
    max_connections: int = 10_000
    partial_frame_budget_bytes: int = 256 * 1024 * 1024  # 16 frames of the 16 MiB maximum
    # Four times the deepest window our benchmarks keep (256). Parked long polls are not
    # counted here but apart, up to PARKED_PER_IN_FLIGHT times this per connection.
    max_in_flight_per_connection: int = 1024
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
        if not 1024 <= self.max_header_bytes <= MAX_HEADER_BYTES:
            raise ValueError(f"max_header_bytes {self.max_header_bytes} is not in 1 KiB..16 MiB")
        for name in (
            "max_connections",
            "partial_frame_budget_bytes",
            "max_in_flight_per_connection",
            "write_buffer_high_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.tls_mode is not TlsMode.DISABLED and self.ssl_context is None:
            raise ValueError(f"TLS mode {self.tls_mode} needs a certificate and key")


class RemotingServer:
    """A listening socket, its connections and their processor table.

    Args:
        budget: connection and incomplete-frame limits shared with other listeners (the
            broker's VIP port shares its main port's); None makes one from ``config``.
    """

    def __init__(
        self,
        config: ServerConfig,
        processors: ProcessorTable,
        *,
        name: str = "remoting",
        budget: ServerBudget | None = None,
    ) -> None:
        self.config = config
        self.processors = processors
        self.name = name
        self.budget = budget or ServerBudget(
            max_connections=config.max_connections,
            partial_frame_budget_bytes=config.partial_frame_budget_bytes,
        )
        self.connections: set[Connection] = set()
        self._refusing: set[Connection] = set()
        self._refusal_logged_at: float | None = None
        self._refusals_unlogged = 0
        self._close_listeners: list[Callable[[Connection], None]] = []
        self.listener: Listener | None = None
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
        cfg = self.config
        return Connection(
            self.processors.dispatch,
            self._connection_closed,
            on_open=self._connection_opened,
            max_frame_bytes=cfg.max_frame_bytes,
            max_header_bytes=cfg.max_header_bytes,
            max_in_flight=cfg.max_in_flight_per_connection,
            budget=self.budget,
            write_buffer_high_bytes=cfg.write_buffer_high_bytes,
        )

    def _connection_made(self) -> Connection:
        return self._make_connection()

    def _connection_opened(self, conn: Connection) -> None:
        budget = self.budget
        if budget.connections >= budget.max_connections:
            self._refuse(conn)
            return
        budget.connections += 1
        self.connections.add(conn)

    def _refuse(self, conn: Connection) -> None:
        budget = self.budget
        budget.refusals[Refusal.MAX_CONNECTIONS] += 1
        now = asyncio.get_running_loop().time()
        last = self._refusal_logged_at
        if last is None or now - last >= REFUSAL_LOG_INTERVAL_S:
            log.warning(
                "connection_refused server=%s peer=%s reason=%s max_connections=%s "
                "refused_total=%s not_logged=%s",
                self.name,
                conn.peer,
                Refusal.MAX_CONNECTIONS.value,
                budget.max_connections,
                budget.refusals[Refusal.MAX_CONNECTIONS],
                self._refusals_unlogged,
            )
            self._refusal_logged_at = now
            self._refusals_unlogged = 0
        else:
            self._refusals_unlogged += 1
        if len(self._refusing) >= MAX_REFUSING or self._stopping is not None:
            conn.drop()  # unanswered
            return
        self._refusing.add(conn)
        conn.refuse(
            f"[CONNECTION_LIMIT]{self.name} serves {budget.max_connections} connections "
            "at most (maxConnections); try again later or another broker",
            REFUSAL_WAIT_S,
        )

    def _connection_closed(self, conn: Connection) -> None:
        if conn not in self.connections:
            self._refusing.discard(conn)  # refused: never served, nobody to tell
            return
        self.connections.discard(conn)
        self.budget.connections -= 1
        for listener in self._close_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("close_listener_failed server=%s peer=%s", self.name, conn.peer)

    async def start(self) -> None:
        """Start the lanes and bind; returns once connections are accepted."""
        await self.bind()
        await self.serve()

    async def bind(self) -> None:
        """Start the lanes and bind the port without taking connections yet (``serve()``
        does): ``port`` is known from here on.

        Raises:
            OSError: the address cannot be bound.
        """
        self.processors.start()
        cfg = self.config
        self.listener = Listener(
            self._connection_made,
            cfg.host,
            cfg.port,
            tls_mode=cfg.tls_mode,
            ssl_context=cfg.ssl_context,
            backlog=cfg.backlog,
            sniff_timeout_s=cfg.tls_sniff_timeout_s,
            name=self.name,
        )
        self.port = await self.listener.start(serve=False)
        self._sweeper = asyncio.create_task(
            run_sweeper(
                lambda: self.connections,
                self.config.idle_timeout_s,
                self.config.frame_read_timeout_s,
            ),
            name=f"{self.name}-sweeper",
        )

    async def serve(self) -> None:
        """Accept connections on the port ``bind()`` took."""
        if self.listener is not None:
            await self.listener.serve()
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
        if self.listener is not None:
            self.listener.close()

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
        for conn in list(self._refusing):
            conn.drop()
        if self.listener is not None:
            await self.listener.wait_closed()
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
