"""One TCP connection speaking the remoting protocol, in either direction.

RocketMQ counterpart: the channel pipeline of ``NettyRemotingServer``/``NettyRemotingClient``
(``NettyDecoder``, ``NettyEncoder``, ``IdleStateHandler``, ``NettyConnectManageHandler``) and
the ``responseTable`` half of ``NettyRemotingAbstract``.

The protocol object does only I/O bookkeeping: it feeds the sans-IO ``FrameDecoder``, resolves
response futures by opaque, hands requests to the owner's callback (the processor table), and
applies flow control. A connection that sends a malformed frame is aborted with a logged
reason; nothing else on the server is affected.

A request can travel either way on one connection (the broker asks a producer to check a
transaction on the producer's own connection), so ``invoke`` lives here, not in the client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import typing
from collections.abc import Callable, Iterable

from remoting.command import RemotingCommand, decode_command
from remoting.errors import ConnectError, FrameError, RemotingTimeoutError
from remoting.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder

log = logging.getLogger(__name__)

RequestCallback = Callable[["Connection", RemotingCommand], None]
CloseCallback = Callable[["Connection"], None]

DEFAULT_WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024


class _Pending:
    """A request waiting for its response: the future and its timeout timer."""

    __slots__ = ("future", "timer")

    def __init__(self, future: asyncio.Future[RemotingCommand], timer: asyncio.TimerHandle):
        self.future = future
        self.timer = timer


class Connection(asyncio.Protocol):
    """Protocol for one connection.

    Args:
        on_request: called with each decoded request (must not block; it queues work).
        on_close: called once when the connection is lost.
        max_frame_bytes: frames announcing more are rejected and the connection aborted.
        write_buffer_high_bytes: above this many unsent bytes the connection stops reading
            until the peer catches up, so a client that does not read its responses cannot
            make us buffer without bound.
    """

    def __init__(
        self,
        on_request: RequestCallback,
        on_close: CloseCallback | None = None,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        write_buffer_high_bytes: int = DEFAULT_WRITE_BUFFER_HIGH_BYTES,
    ) -> None:
        self._on_request = on_request
        self._on_close = on_close
        self._decoder = FrameDecoder(max_frame_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._write_high = write_buffer_high_bytes
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.pending: dict[int, _Pending] = {}
        self.last_active = self._loop.time()
        # Set while a partial frame is buffered and no frame has completed since: the basis
        # of the slow-sender check (a peer trickling one byte a second is not idle).
        self.partial_since: float | None = None
        self.closed = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._out: list[bytes | memoryview] = []
        self._out_bytes = 0
        self._held: collections.deque[RemotingCommand] = collections.deque()
        self.closed_future: asyncio.Future[None] = self._loop.create_future()

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, so no isinstance check.
        transport = typing.cast("asyncio.Transport", transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            host = peer[0]
            self.peer = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Requests are small and latency matters more than packet count.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=self._write_high)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        now = self._loop.time()
        self.last_active = now
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            self.abort(f"bad frame: {exc}")
            return
        if frames:
            self.partial_since = now if self._decoder.buffered_bytes else None
        elif self.partial_since is None:
            self.partial_since = now
        for frame in frames:
            try:
                cmd = decode_command(frame)
            except FrameError as exc:
                self.abort(f"bad header: {exc}")
                return
            if cmd.flag & 1:
                self._on_response(cmd)
            elif self._write_paused:
                self._held.append(cmd)
            else:
                self._on_request(self, cmd)
            if self.closed:
                return

    def eof_received(self) -> bool | None:
        if self._decoder.buffered_bytes:
            log.info(
                "connection_truncated_frame peer=%s buffered_bytes=%s",
                self.peer,
                self._decoder.buffered_bytes,
            )
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        pending, self.pending = self.pending, {}
        for p in pending.values():
            p.timer.cancel()
            if not p.future.done():
                p.future.set_exception(ConnectError(self.peer, "connection closed"))
        self._wake_drainers(ConnectError(self.peer, "connection closed"))
        if not self.closed_future.done():
            self.closed_future.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.closed:
            return
        if self._decoder.buffered_bytes:
            # The half-read frame waited on us, not on the peer: restart its deadline.
            self.partial_since = self._loop.time()
        while self._held and not self._write_paused and not self.closed:
            self._on_request(self, self._held.popleft())
        if self.transport is not None and not self._write_paused and not self.closed:
            self.transport.resume_reading()
        self._wake_drainers(None)

    @property
    def write_paused(self) -> bool:
        """True while the peer does not take our writes fast enough.

        Requests of a paused connection are held, not processed, until it drains: pausing
        only the reads would still let every request already read produce a response that
        sits in memory.
        """
        return self._write_paused

    def hold(self, request: RemotingCommand) -> None:
        """Keep a request until writing resumes (lane workers call it for paused peers)."""
        if not self.closed:
            self._held.append(request)

    # ------------------------------------------------------------------------- sending

    def send(self, cmd: RemotingCommand) -> bool:
        """Write a command; False when the connection is already closed.

        Raises:
            FrameError: the command cannot be encoded in its serialization, or its frame is
                larger than ``max_frame_bytes``.
        """
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        parts = cmd.encode()
        size = len(parts[0]) + len(parts[1]) + (len(parts[2]) if len(parts) > 2 else 0)
        if size > self._max_frame_bytes:
            # The peer (Java caps frames at 16 MiB too) would drop the connection for it.
            raise FrameError(f"frame of {size} bytes exceeds {self._max_frame_bytes} bytes")
        # Cork: frames written in one loop iteration leave in one writev. A pipelined peer
        # gets a batch of responses per syscall instead of one syscall per response.
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out += parts
        self._out_bytes += size
        if self._out_bytes >= self._write_high:
            # Hand a large batch to the transport now, so its high-water mark (and with it
            # pause_writing) sees it before more responses are produced this iteration.
            self._flush()
        return True

    def flush(self) -> None:
        """Write corked frames now instead of at the end of this loop iteration."""
        if self._out:
            self._flush()

    def _flush(self) -> None:
        out, self._out = self._out, []
        self._out_bytes = 0
        transport = self.transport
        if out and not self.closed and transport is not None and not transport.is_closing():
            transport.writelines(out)
            self.last_active = self._loop.time()

    async def drain(self) -> None:
        """Wait until the write buffer is below its high-water mark."""
        if not self._write_paused:
            return
        if self.closed:
            raise ConnectError(self.peer, "connection closed")
        fut: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(fut)
        await fut

    def _wake_drainers(self, exc: Exception | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for fut in waiters:
            if fut.done():
                continue
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

    # ---------------------------------------------------------------- request/response

    def invoke_nowait(
        self, request: RemotingCommand, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """Send a request and return the future of its response.

        The future fails with ``RemotingTimeoutError`` after ``timeout_s`` and with
        ``ConnectError`` if the connection closes first. A response that arrives after the
        timeout finds no pending entry and is dropped.
        """
        if self.closed:
            raise ConnectError(self.peer, "connection closed")
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        opaque = request.opaque
        timer = self._loop.call_later(timeout_s, self._expire, opaque, request.code, timeout_s)
        self.pending[opaque] = _Pending(fut, timer)
        try:
            sent = self.send(request)
        except BaseException:
            self._forget(opaque)
            raise
        if not sent:
            self._forget(opaque)
            raise ConnectError(self.peer, "connection closed")
        return fut

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and wait for its response."""
        fut = self.invoke_nowait(request, timeout_s)
        try:
            return await fut
        except asyncio.CancelledError:
            self._forget(request.opaque)
            raise

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a request marked oneway; the peer sends nothing back."""
        request.mark_oneway()
        if not self.send(request):
            raise ConnectError(self.peer, "connection closed")

    def _forget(self, opaque: int) -> None:
        p = self.pending.pop(opaque, None)
        if p is not None:
            p.timer.cancel()

    def _expire(self, opaque: int, code: int, timeout_s: float) -> None:
        p = self.pending.pop(opaque, None)
        if p is not None and not p.future.done():
            p.future.set_exception(RemotingTimeoutError(self.peer, code, opaque, timeout_s))

    def _on_response(self, cmd: RemotingCommand) -> None:
        p = self.pending.pop(cmd.opaque, None)
        if p is None:
            # Its request timed out (or was cancelled) already: drop it, as Java does.
            log.debug("response_without_request peer=%s opaque=%s", self.peer, cmd.opaque)
            return
        p.timer.cancel()
        if not p.future.done():
            p.future.set_result(cmd)

    # -------------------------------------------------------------------------- closing

    def abort(self, reason: str) -> None:
        """Drop the connection now, logging why (protocol violation, idle, slow sender)."""
        if self.closed:
            return
        log.warning("connection_closed peer=%s reason=%s", self.peer, reason)
        self.closed = True
        self._out = []
        self._held.clear()
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close after pending writes are flushed."""
        if self.transport is not None and not self.transport.is_closing():
            self._flush()
            self.transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self.closed_future)


def sweep(
    connections: Iterable[Connection],
    now: float,
    *,
    idle_timeout_s: float,
    frame_read_timeout_s: float,
) -> None:
    """Close connections idle too long, or stuck on one partial frame too long.

    RocketMQ closes a channel idle for 120 s (``IdleStateHandler``, ALL_IDLE). The partial
    frame deadline is ours: it stops a peer that keeps a connection busy with a frame it
    never finishes (one byte a second resets any idle timer).
    """
    for conn in list(connections):
        if conn.closed:
            continue
        if idle_timeout_s > 0 and now - conn.last_active > idle_timeout_s:
            conn.abort(f"idle for more than {idle_timeout_s:g} s")
        elif (
            frame_read_timeout_s > 0
            and conn.partial_since is not None
            and not conn.write_paused  # we stopped reading; the peer is not the slow one
            and now - conn.partial_since > frame_read_timeout_s
        ):
            conn.abort(f"frame not completed within {frame_read_timeout_s:g} s")


async def run_sweeper(
    connections: Callable[[], Iterable[Connection]],
    idle_timeout_s: float,
    frame_read_timeout_s: float,
) -> None:
    """Run ``sweep`` forever at a period fitting the shorter timeout."""
    limits = [t for t in (idle_timeout_s, frame_read_timeout_s) if t > 0]
    if not limits:
        return
    period = min(max(min(limits) / 4, 0.05), 5.0)
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(period)
        sweep(
            connections(),
            loop.time(),
            idle_timeout_s=idle_timeout_s,
            frame_read_timeout_s=frame_read_timeout_s,
        )
