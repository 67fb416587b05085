"""One TCP connection speaking the remoting protocol, in either direction.

RocketMQ counterpart: the channel pipeline of ``NettyRemotingServer``/``NettyRemotingClient``
(``NettyDecoder``, ``NettyEncoder``, ``IdleStateHandler``, ``NettyConnectManageHandler``) and
the ``responseTable`` half of ``NettyRemotingAbstract``.

The protocol object does only I/O bookkeeping: it feeds the sans-IO ``FrameDecoder``, resolves
response futures by opaque, hands requests to the owner's callback (the processor table), and
applies flow control. A connection that sends a malformed frame is aborted with a logged
reason; nothing else on the server is affected.

What one peer can make a server hold is bounded (none of it is RocketMQ's; Netty buffers
whatever a channel sends):

- a header longer than ``max_header_bytes`` is refused before it is read;
- an incomplete frame is charged, at its announced size, to a ``ServerBudget`` shared by every
  connection of the server; a large frame that does not fit is refused (see ``reserve``);
- at most ``max_in_flight`` requests per connection await their reply: at the limit the
  connection stops reading until replies go out, and so it does while its unsent replies are
  over the write buffer's high-water mark;
- a long poll the broker parks (a pull or pop waiting for a message) leaves the in-flight
  count, so parked polls never stop a connection's sends and heartbeats from being read;
  at most ``PARKED_PER_IN_FLIGHT`` times ``max_in_flight`` are parked per connection, and
  ``park`` refuses more (the broker then answers "no new message" at once);
- a server hands on about ``FRAMES_PER_LOOP_TURN`` frames per turn of the event loop, shared
  by the connections that have more than that waiting (a read of a thousand pipelined
  requests is handed on over many turns, and every other connection is read in between);
- ``sweep`` closes a connection whose frame stays incomplete for ``frame_read_timeout_s``;
  the clock stops only while the server itself holds the reading back (in-flight limit,
  turn share), not while the peer does by leaving its replies unread (it restarts each
  time the peer drains them: a slow reader is not a stalled one).

A request can travel either way on one connection (the broker asks a producer to check a
transaction on the producer's own connection), so ``invoke`` lives here, not in the client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import struct
import typing
from collections.abc import Callable, Iterable
from enum import StrEnum

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, decode_command, response_to
from remoting.errors import ConnectError, FrameError, HeaderTooLargeError, RemotingTimeoutError
from remoting.frame import DEFAULT_MAX_FRAME_BYTES, MAX_HEADER_BYTES, FrameDecoder
from remoting.header_codec import decode_header

log = logging.getLogger(__name__)

RequestCallback = Callable[["Connection", RemotingCommand], None]
CloseCallback = Callable[["Connection"], None]

DEFAULT_WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024

# A frame up to this size is never refused for the budget, only counted: every pipelining
# client leaves a small frame half read at the end of most reads, and refusing those would
# let whoever fills the budget with large frames cut off everyone else. What small frames
# hold together is bounded by the connection limit instead.
SMALL_FRAME_BYTES = 64 * 1024

# Frames a server hands on per turn of the event loop, shared by the connections that have
# frames waiting. One read brings up to 256 KiB, a thousand small requests: handled in one
# callback they keep the loop from every other connection for tens of ms, and twenty such
# clients for most of a second. 64 frames take 1..3 ms; a lone pipelining client gets all
# of them (one loop turn per 64 requests), twenty get 3 each.
FRAMES_PER_LOOP_TURN = 64
MIN_FRAMES_PER_TURN = 2

# Long polls parked per connection, as a multiple of max_in_flight (1024 → 16,384). A Java or
# C++ client shares one connection per broker among all the consumers of its process, one
# parked pull per queue it reads: far more than the requests a client keeps in flight.
PARKED_PER_IN_FLIGHT = 16

# RemotingCommand.slot: which counter of its connection a received request is in.
SLOT_NONE = 0  # answered (or never counted: a response, a command of our own)
SLOT_IN_FLIGHT = 1
SLOT_PARKED = 2

_HEAD = struct.Struct(
    ">"
    "i"  # frame length
    "I"  # (serialize type << 24) | header length
)
assert _HEAD.size == 8


class Refusal(StrEnum):
    """Why a server turned a peer away; the ``reason`` label of the refusal counter."""

    MAX_CONNECTIONS = "max_connections"
    PARTIAL_FRAME_BUDGET = "partial_frame_budget"
    HEADER_TOO_LARGE = "header_too_large"
    FRAME_TIMEOUT = "frame_timeout"


class ReadPause(StrEnum):
    """Why a connection stopped reading; the ``reason`` label of the pause counter."""

    IN_FLIGHT = "in_flight"  # max_in_flight requests awaiting their reply
    WRITE_BUFFER = "write_buffer"  # replies not taken by the peer over the high-water mark


class ServerBudget:
    """What the connections of one server may hold together, and what they hold now.

    One budget is shared by every listener of a server (the broker's main and VIP ports), so
    the limits are the broker's, not each port's. Everything here is touched on the event
    loop only.

    Args:
        max_connections: connections served at once; more are refused.
        partial_frame_budget_bytes: bytes all incomplete frames may hold together.
    """

    __slots__ = (
        "connections",
        "deferring",
        "max_connections",
        "partial_frame_budget_bytes",
        "partial_frame_bytes",
        "peak_partial_frame_bytes",
        "read_pauses",
        "refusals",
    )

    def __init__(self, *, max_connections: int, partial_frame_budget_bytes: int) -> None:
        self.max_connections = max_connections
        self.partial_frame_budget_bytes = partial_frame_budget_bytes
        self.connections = 0  # served now (refused ones are not counted)
        self.deferring = 0  # connections with frames read but not handed on yet
        self.partial_frame_bytes = 0  # charged to incomplete frames now
        self.peak_partial_frame_bytes = 0
        self.refusals: dict[Refusal, int] = dict.fromkeys(Refusal, 0)
        self.read_pauses: dict[ReadPause, int] = dict.fromkeys(ReadPause, 0)

    def reserve(self, frame_bytes: int) -> bool:
        """Charge an incomplete frame's announced size; False when a large frame would take
        the total beyond the budget (nothing is charged then)."""
        held = self.partial_frame_bytes + frame_bytes
        if frame_bytes > SMALL_FRAME_BYTES and held > self.partial_frame_budget_bytes:
            return False
        self.partial_frame_bytes = held
        self.peak_partial_frame_bytes = max(self.peak_partial_frame_bytes, held)
        return True

    def release(self, frame_bytes: int) -> None:
        self.partial_frame_bytes -= frame_bytes


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
        on_open: called once the connection is made (after the TLS handshake, if any); a
            server counts its connections here, since a failed handshake never gets this
            far and never reports its loss either.
        max_frame_bytes: frames announcing more are rejected and the connection aborted.
        max_header_bytes: frames announcing a longer header are rejected the same way.
        max_in_flight: requests that may await their reply at once; at the limit the
            connection stops reading until some are answered. None: no limit.
        budget: the server's shared budget for incomplete frames (None: not charged).
        write_buffer_high_bytes: above this many unsent bytes the connection stops reading
            until the peer catches up, so a client that does not read its responses cannot
            make us buffer without bound.
    """

    def __init__(
        self,
        on_request: RequestCallback,
        on_close: CloseCallback | None = None,
        *,
        on_open: CloseCallback | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_header_bytes: int = MAX_HEADER_BYTES,
        max_in_flight: int | None = None,
        budget: ServerBudget | None = None,
        write_buffer_high_bytes: int = DEFAULT_WRITE_BUFFER_HIGH_BYTES,
    ) -> None:
        self._on_request = on_request
        self._on_close = on_close
        self._on_open = on_open
        self._decoder = FrameDecoder(max_frame_bytes, max_header_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._max_header_bytes = max_header_bytes
        self._write_high = write_buffer_high_bytes
        self._max_in_flight = max_in_flight if max_in_flight is not None else 1 << 62
        self._max_parked = (
            PARKED_PER_IN_FLIGHT * max_in_flight if max_in_flight is not None else 1 << 62
        )
        self.budget = budget
        self._reserved = 0  # charged to the budget for the incomplete frame
        # Requests handed to on_request whose reply has not gone out (see request_done).
        self.in_flight = 0
        self.parked = 0  # long polls parked by the server (see park); not in flight
        # Frames read but not handed on yet: the connection was at max_in_flight, or its
        # writes were paused, when they arrived. Decoded only when their turn comes (so a
        # read of a thousand small requests is not decoded in one go); not in flight yet.
        self._unread: collections.deque[memoryview] = collections.deque()
        self._deferring = False  # counted in budget.deferring
        self._reading_paused = False
        self._pause_reason: ReadPause | None = None  # None: only a turn's share was done
        self._pause_logged = False
        self._release_scheduled = False
        # Set by refuse(): the remark the first request gets, with SYSTEM_BUSY, before the
        # connection is closed. The prefix and header of that request are gathered here.
        self._refusal: str | None = None
        self._refusal_answered = False
        self._refusal_head = bytearray()
        self._refusal_timer: asyncio.TimerHandle | None = None
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
        # Requests in flight that a lane gave back because writes were paused (see hold).
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
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self._refusal is not None:
            self._refusal_data(data)
            return
        now = self._loop.time()
        self.last_active = now
        try:
            frames = self._decoder.feed(data)
        except HeaderTooLargeError as exc:
            self.abort(f"bad frame: {exc}", Refusal.HEADER_TOO_LARGE)
            return
        except FrameError as exc:
            self.abort(f"bad frame: {exc}")
            return
        if not self._charge_partial_frame():
            return
        if frames:
            self.partial_since = now if self._decoder.buffered_bytes else None
        elif self.partial_since is None:
            self.partial_since = now
        unread = self._unread
        max_in_flight = self._max_in_flight
        if unread:
            unread.extend(frames)
        else:
            turn = self._turn_frames()
            for i, frame in enumerate(frames):
                if i == turn or self._write_paused or self.in_flight >= max_in_flight:
                    unread.extend(frames[i:])
                    self._count_deferring()
                    break
                if not self._handle_frame(frame):
                    return
        if self._write_paused or self.in_flight >= max_in_flight:
            self._pause_reading(
                ReadPause.WRITE_BUFFER if self._write_paused else ReadPause.IN_FLIGHT
            )
        elif unread:
            # Only this turn's share was handled: the rest in the next turn, unread meanwhile.
            self._pause_reading(None)
            self._schedule_release()

    def _turn_frames(self) -> int:
        """This connection's share of the frames handed on per loop turn."""
        budget = self.budget
        if budget is None:
            return 1 << 62  # a client's connection: its own loop, its own servers
        others = budget.deferring - self._deferring
        return max(MIN_FRAMES_PER_TURN, FRAMES_PER_LOOP_TURN // (others + 1))

    def _count_deferring(self) -> None:
        """Keep ``budget.deferring`` in step with whether frames are waiting here."""
        deferring = bool(self._unread) and not self.closed
        if deferring != self._deferring and self.budget is not None:
            self.budget.deferring += 1 if deferring else -1
            self._deferring = deferring

    def _handle_frame(self, frame: memoryview) -> bool:
        """Decode a frame and resolve (response) or hand on (request) the command; False
        when the connection is closed (a bad header, or closed by the handler)."""
        try:
            cmd = decode_command(frame)
        except FrameError as exc:
            self.abort(f"bad header: {exc}")
            return False
        if cmd.flag & 1:
            self._on_response(cmd)
        else:
            cmd.slot = SLOT_IN_FLIGHT
            self.in_flight += 1
            self._on_request(self, cmd)
        return not self.closed

    def _charge_partial_frame(self) -> bool:
        """Charge the incomplete frame, if any, to the budget; False (and the connection
        aborted) when the budget refuses it."""
        budget = self.budget
        want = self._decoder.pending_frame_bytes
        if budget is None or want == self._reserved:
            return True
        budget.release(self._reserved)
        self._reserved = 0
        if want and not budget.reserve(want):
            self.abort(
                f"frame of {want} bytes refused: incomplete frames already hold "
                f"{budget.partial_frame_bytes} of the server's "
                f"{budget.partial_frame_budget_bytes} bytes",
                Refusal.PARTIAL_FRAME_BUDGET,
            )
            return False
        self._reserved = want
        return True

    def _release_partial_frame(self) -> None:
        if self.budget is not None and self._reserved:
            self.budget.release(self._reserved)
        self._reserved = 0

    # ----------------------------------------------------------------- read flow control

    @property
    def reading_paused(self) -> bool:
        """True while we do not read this peer (requests in flight, or replies unsent)."""
        return self._reading_paused

    @property
    def frame_clock_stopped(self) -> bool:
        """True while the partial-frame deadline does not run: we hold the reading back
        (in-flight limit, turn share). A pause the peer causes, by not taking its replies,
        does not stop the clock, or a peer could hold a partial frame until the idle
        timeout; each time the peer drains our replies (``resume_writing``) the clock
        restarts instead."""
        return self._reading_paused and not self._write_paused

    def request_done(self, request: RemotingCommand) -> None:
        """``request`` (handed to ``on_request``) is over: its reply is sent, or it was a
        oneway request and its handler returned. ``dispatch.send_response`` calls this; a
        request already counted out is not counted again (a oneway send answered once its
        topic is routed passes here twice)."""
        slot = request.slot
        if slot == SLOT_NONE:
            return
        request.slot = SLOT_NONE
        if slot == SLOT_PARKED:
            self.parked -= 1
            return
        self.in_flight -= 1
        if self._unread or self._reading_paused:
            self._schedule_release()

    def park(self, request: RemotingCommand) -> bool:
        """Move ``request`` from in flight to parked (a long poll about to wait for a
        message); False, and nothing moved, when this connection has as many parked as it
        may: the caller then answers at once."""
        if request.slot != SLOT_IN_FLIGHT or self.parked >= self._max_parked:
            return False
        self.request_done(request)
        request.slot = SLOT_PARKED
        self.parked += 1
        return True

    def _schedule_release(self) -> None:
        # Never inline: a reply may be sent from inside on_request (an unknown code is
        # answered at once), and handing on the next request from there would recurse.
        if not self._release_scheduled:
            self._release_scheduled = True
            self._loop.call_soon(self._release)

    def _release(self) -> None:
        """Hand on a turn's share of the frames read while blocked; read again once none
        are left and nothing blocks."""
        self._release_scheduled = False
        try:
            self._hand_on_unread()
        finally:
            self._count_deferring()

    def _hand_on_unread(self) -> None:
        unread = self._unread
        for _ in range(self._turn_frames()):
            if not unread or self.closed or self._write_paused:
                break
            if self.in_flight >= self._max_in_flight:
                self._pause_reading(ReadPause.IN_FLIGHT)
                return
            if not self._handle_frame(unread.popleft()):
                return
        else:
            if unread and not self._write_paused and self.in_flight < self._max_in_flight:
                self._schedule_release()
                return
        if unread or self.closed or self._write_paused:
            return
        if self._reading_paused and self.in_flight < self._max_in_flight:
            self._reading_paused = False
            self._pause_reason = None
            if self._decoder.buffered_bytes and self._pause_reason is not ReadPause.WRITE_BUFFER:
                # The half-read frame waited on us, not on the peer: restart its deadline.
                self.partial_since = self._loop.time()
            if self.transport is not None:
                self.transport.resume_reading()

    def _pause_reading(self, why: ReadPause | None) -> None:
        """Stop reading (if not stopped already). A ``why`` newly in force is counted; None
        is a turn's share handed on, nothing wrong."""
        if why is not None and why is not self._pause_reason:
            self._pause_reason = why
            if self.budget is not None:
                self.budget.read_pauses[why] += 1
            if why is ReadPause.IN_FLIGHT and not self._pause_logged:
                self._pause_logged = True  # once per connection: a busy client pauses often
                log.info(
                    "connection_read_paused peer=%s reason=%s in_flight=%s",
                    self.peer,
                    why.value,
                    self.in_flight,
                )
        if not self._reading_paused:
            self._reading_paused = True
            if self.transport is not None and not self.closed:
                self.transport.pause_reading()

    # -------------------------------------------------------------------------- refusal

    def refuse(self, remark: str, wait_s: float) -> None:
        """Serve nothing: answer the first request SYSTEM_BUSY with ``remark`` and close.

        A peer that has not sent a request's header within ``wait_s`` is dropped without
        an answer. Only the prefix and header of that request are read (at most
        ``max_header_bytes``), never its body.
        """
        self._refusal = remark
        self._refusal_timer = self._loop.call_later(wait_s, self.drop)

    def _refusal_data(self, data: bytes) -> None:
        if self._refusal_answered:
            return
        head = self._refusal_head
        head += data[: 8 + self._max_header_bytes - len(head)]
        if len(head) < 8:
            return
        length, word = _HEAD.unpack_from(head, 0)
        header_len = word & 0xFFFFFF
        if header_len > self._max_header_bytes or not 4 + header_len <= length:
            self.drop()
            return
        if len(head) < 8 + header_len:
            return
        try:
            h = decode_header(word >> 24, memoryview(head)[8 : 8 + header_len])
        except FrameError:
            self.drop()
            return
        request = RemotingCommand(h.code, h.opaque, h.flag, serialize_type=word >> 24)
        self._refusal_answered = True  # whatever else arrives is ignored
        if not (request.is_oneway or request.is_response):
            with contextlib.suppress(FrameError):  # a code no reply header can hold
                self.send(response_to(request, ResponseCode.SYSTEM_BUSY, self._refusal))
        self.close()

    def drop(self) -> None:
        """Abort without a log line (a refused connection: the refusal was logged)."""
        if self.closed:
            return
        self.closed = True
        self._out = []
        if self.transport is not None:
            self.transport.abort()

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
        self._release_partial_frame()
        self._unread.clear()
        self._count_deferring()
        if self._refusal_timer is not None:
            self._refusal_timer.cancel()
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
        if not self.closed:
            self._pause_reading(ReadPause.WRITE_BUFFER)

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.closed:
            return
        if self._decoder.buffered_bytes:
            # The peer took a good share of our replies: it reads, however slowly, and its
            # half-read frame waits on our back-pressure. Restart its deadline (a peer that
            # never reads never gets here, and is closed at the deadline).
            self.partial_since = self._loop.time()
        # Requests a lane gave back are in flight already: on again, uncounted.
        while self._held and not self._write_paused and not self.closed:
            self._on_request(self, self._held.popleft())
        self._schedule_release()
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

    def abort(self, reason: str, refusal: Refusal | None = None) -> None:
        """Drop the connection now, logging why (protocol violation, idle, slow sender);
        ``refusal`` counts it in the budget's refusals."""
        if self.closed:
            return
        log.warning("connection_closed peer=%s reason=%s", self.peer, reason)
        if refusal is not None and self.budget is not None:
            self.budget.refusals[refusal] += 1
        self.closed = True
        self._out = []
        self._held.clear()
        self._unread.clear()
        self._count_deferring()
        self._release_partial_frame()
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
            and not conn.frame_clock_stopped  # we stopped reading; the peer is not the slow one
            and now - conn.partial_since > frame_read_timeout_s
        ):
            conn.abort(
                f"frame not completed within {frame_read_timeout_s:g} s", Refusal.FRAME_TIMEOUT
            )


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
