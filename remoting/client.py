"""``RemotingClient``: one reusable connection per address, request/response with timeouts.

RocketMQ counterpart: ``NettyRemotingClient`` (``invokeSync``, ``invokeAsync``,
``invokeOneway``, ``semaphoreAsync``/``semaphoreOneway`` permits, ``channelTables``).

A connection is opened on first use and kept; when it fails it is dropped from the table and
the next call dials again. Concurrent first calls to one address share one dial. Requests a
server sends to us over the same connection (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED, …) go to the client's own processor table.
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

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import DEFAULT_WRITE_BUFFER_HIGH_BYTES, Connection, run_sweeper
from remoting.dispatch import ProcessorTable, RPCHook
from remoting.errors import ConnectError, RemotingTimeoutError, TooManyRequestsError
from remoting.frame import DEFAULT_MAX_FRAME_BYTES

log = logging.getLogger(__name__)

ResponseCallback = Callable[[RemotingCommand | None, BaseException | None], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Client settings (RocketMQ ``NettyClientConfig``)."""

    connect_timeout_s: float = 3.0  # connectTimeoutMillis
    request_timeout_s: float = 3.0
    max_inflight_requests: int = 65535  # clientAsyncSemaphoreValue
    max_inflight_oneway: int = 65535  # clientOnewaySemaphoreValue
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float = 120.0  # clientChannelMaxIdleTimeSeconds
    frame_read_timeout_s: float = 60.0
    write_buffer_high_bytes: int = DEFAULT_WRITE_BUFFER_HIGH_BYTES
    ssl_context: ssl.SSLContext | None = None  # dial with TLS (tls.enable)


def split_address(addr: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` → (host, port).

    Raises:
        ValueError: not an address with a port in 1..65535.
    """
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {addr!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {addr!r} has no numeric port") from None
    if not 0 < port <= 65535:
        raise ValueError(f"address {addr!r}: port out of range")
    return host, port


class RemotingClient:
    """Connections to many servers, with request/response matching by opaque.

    Args:
        config: timeouts and permits.
        processors: handles requests servers send to us; without one they are answered
            REQUEST_CODE_NOT_SUPPORTED.
        hooks: RPC hooks applied to every request we send (``before_request``) and every
            response we receive (``after_response``).
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        processors: ProcessorTable | None = None,
        hooks: list[RPCHook] | None = None,
    ) -> None:
        self.config = config or ClientConfig()
        self.processors = processors
        self.hooks: list[RPCHook] = hooks if hooks is not None else []
        self._connections: dict[str, Connection] = {}
        self._dialing: dict[str, asyncio.Future[Connection]] = {}
        self._permits = asyncio.Semaphore(self.config.max_inflight_requests)
        self._oneway_permits = asyncio.Semaphore(self.config.max_inflight_oneway)
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    # -------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self.processors is not None:
            self.processors.start()
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(
                run_sweeper(
                    self._connections.values,
                    self.config.idle_timeout_s,
                    self.config.frame_read_timeout_s,
                ),
                name="remoting-client-sweeper",
            )

    async def shutdown(self) -> None:
        """Close every connection; pending requests fail with ConnectError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for fut in self._dialing.values():
            fut.cancel()
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(self.config.connect_timeout_s):
                    await conn.wait_closed()
            if not conn.closed:
                conn.abort("client shutdown")
        if self.processors is not None:
            await self.processors.shutdown(1.0)

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

    # ------------------------------------------------------------------ connections

    def _on_request(self, conn: Connection, request: RemotingCommand) -> None:
        if self.processors is not None:
            self.processors.dispatch(conn, request)
        elif not request.is_oneway:
            conn.send(
                response_to(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                )
            )

    def _on_close(self, addr: str, conn: Connection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]

    async def connection(self, addr: str) -> Connection:
        """The live connection to ``addr``, dialling it if needed.

        Raises:
            ConnectError: the dial failed or timed out.
        """
        conn = self._connections.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise ConnectError(addr, "client is shut down")
        dialing = self._dialing.get(addr)
        if dialing is None:
            dialing = asyncio.ensure_future(self._dial(addr))
            self._dialing[addr] = dialing
            dialing.add_done_callback(lambda f: self._dial_done(addr, f))
        return await asyncio.shield(dialing)

    def _dial_done(self, addr: str, fut: asyncio.Future[Connection]) -> None:
        self._dialing.pop(addr, None)
        # Every caller may have been cancelled; mark a failure as seen so it is not
        # reported again as "exception was never retrieved" (callers still get it).
        if not fut.cancelled():
            fut.exception()

    async def _dial(self, addr: str) -> Connection:
        try:
            host, port = split_address(addr)
        except ValueError as exc:
            raise ConnectError(addr, str(exc)) from None
        loop = asyncio.get_running_loop()
        cfg = self.config
        try:
            async with asyncio.timeout(cfg.connect_timeout_s):
                _transport, conn = await loop.create_connection(
                    lambda: Connection(
                        self._on_request,
                        lambda c: self._on_close(addr, c),
                        max_frame_bytes=cfg.max_frame_bytes,
                        write_buffer_high_bytes=cfg.write_buffer_high_bytes,
                    ),
                    host,
                    port,
                    ssl=cfg.ssl_context,
                    server_hostname=host if cfg.ssl_context is not None else None,
                )
        except TimeoutError:
            raise ConnectError(addr, f"timed out after {cfg.connect_timeout_s:g} s") from None
        except OSError as exc:  # ssl.SSLError included: a failed handshake
            raise ConnectError(addr, exc.strerror or str(exc)) from None
        if self._closed:
            conn.close()
            raise ConnectError(addr, "client is shut down")
        self._connections[addr] = conn
        log.debug("connected addr=%s", addr)
        return conn

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` (the next call dials again)."""
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close()

    # --------------------------------------------------------------------- requests

    async def _acquire(self, sem: asyncio.Semaphore, timeout_s: float, what: str) -> None:
        if not sem.locked():
            await sem.acquire()  # returns without suspending while permits are free
            return
        try:
            async with asyncio.timeout(timeout_s):
                await sem.acquire()
        except TimeoutError:
            raise TooManyRequestsError(
                f"no {what} permit within {timeout_s:g} s: too many requests in flight"
            ) from None

    def _before(self, addr: str, request: RemotingCommand) -> None:
        for hook in self.hooks:
            hook.before_request(addr, request)

    def _after(self, addr: str, request: RemotingCommand, response: RemotingCommand) -> None:
        for hook in self.hooks:
            hook.after_response(addr, request, response)

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its response.

        Raises:
            ConnectError: could not connect, or the connection closed before the answer.
            RemotingTimeoutError: no response within ``timeout_s`` (default: the config's).
            TooManyRequestsError: no in-flight permit within the timeout.
        """
        timeout = self.config.request_timeout_s if timeout_s is None else timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout  # one budget for permit, dial and answer
        await self._acquire(self._permits, timeout, "request")
        try:
            conn = await self.connection(addr)
            self._before(addr, request)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RemotingTimeoutError(addr, request.code, request.opaque, timeout)
            try:
                response = await conn.invoke(request, remaining)
            except ConnectError:
                self._on_close(addr, conn)
                raise
            except RemotingTimeoutError:
                # report the caller's budget, not what was left of it for the answer
                raise RemotingTimeoutError(addr, request.code, request.opaque, timeout) from None
            self._after(addr, request, response)
            return response
        finally:
            self._permits.release()

    async def invoke_with_callback(
        self,
        addr: str,
        request: RemotingCommand,
        callback: ResponseCallback,
        timeout_s: float | None = None,
    ) -> None:
        """Send ``request`` and return once it is written; ``callback(response, error)``
        runs later on the loop with exactly one of the two set (RocketMQ ``invokeAsync``).
        """
        timeout = self.config.request_timeout_s if timeout_s is None else timeout_s
        await self._acquire(self._permits, timeout, "request")
        try:
            conn = await self.connection(addr)
            self._before(addr, request)
            fut = conn.invoke_nowait(request, timeout)
        except BaseException:
            self._permits.release()
            raise

        def done(f: asyncio.Future[RemotingCommand]) -> None:
            self._permits.release()
            if f.cancelled():
                callback(None, asyncio.CancelledError())
                return
            exc = f.exception()
            if exc is not None:
                callback(None, exc)
                return
            response = f.result()
            try:
                self._after(addr, request, response)
            except Exception as hook_exc:
                callback(None, hook_exc)
                return
            callback(response, None)

        fut.add_done_callback(done)

    async def invoke_oneway(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> None:
        """Send ``request`` with the oneway flag; nothing comes back.

        Waits for the write buffer to drain below its high-water mark before returning, so
        a caller sending in a loop is paced by the socket.
        """
        timeout = self.config.request_timeout_s if timeout_s is None else timeout_s
        await self._acquire(self._oneway_permits, timeout, "oneway")
        try:
            conn = await self.connection(addr)
            self._before(addr, request)
            conn.invoke_oneway(request)
            await conn.drain()
        finally:
            self._oneway_permits.release()
