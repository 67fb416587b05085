"""Processor table and executor lanes: where a decoded request goes to be handled.

RocketMQ counterpart: ``NettyRemotingAbstract.processRequestCommand`` with its
``processorTable`` (request code → (processor, ExecutorService)), the default processor, the
``rejectRequest()`` check, ``RPCHook`` and the bounded thread-pool queues whose rejection
answers SYSTEM_BUSY.

A ``Lane`` is our executor: a bounded queue and N workers. A full queue answers SYSTEM_BUSY at
once instead of letting latency grow without limit, as Java's bounded
``LinkedBlockingQueue`` + ``RejectedExecutionException`` path does. Unlike Java's queue, a
lane takes its connections in turn (one request of each connection that has some waiting,
round and round), and a full lane still admits a connection that has nothing waiting in it:
a client pipelining thousands of requests delays another client's request by one of its
own, not by all of them. A lane runs its handlers
either on the event loop (``async def`` handlers; the right choice for anything that mostly
touches memory) or on a thread pool of its own (plain ``def`` handlers; for work that blocks
in the kernel, such as fsync or a read from a cold page, where the GIL is released).

Handler errors become responses: a ``BrokerError`` gives its code and message, a
``HeaderError`` (bad client input) gives SYSTEM_ERROR with the message, and anything else
gives SYSTEM_ERROR with the exception text and a logged traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.errors import BrokerError, FrameError, HeaderError

log = logging.getLogger(__name__)

# A lane's workers run handlers that do not suspend (most of them) back to back, without
# giving the event loop back: 10,000 queued sends would keep every connection unread for
# half a second. After this long the worker lets the loop read and write once.
LANE_SLICE_S = 0.002

AsyncHandler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]
SyncHandler = Callable[[Connection, RemotingCommand], RemotingCommand | None]
Handler = AsyncHandler | SyncHandler

# Java's remarks, kept so operators and clients see the familiar text.
REMARK_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
REMARK_REJECT = "[REJECTREQUEST]system busy, start flow control for a while"
REMARK_TIMEOUT = (
    "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
    "period in queue: {waited}ms, size of queue: {depth}"
)


class RPCHook(Protocol):
    """Called around every request a server handles or a client sends (RocketMQ ``RPCHook``).

    ``before_request`` may raise ``BrokerError`` to refuse a request (ACL does); on a
    client it may add ext_fields (a signature) before the request is written.
    """

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None: ...


class _Entry:
    __slots__ = ("handler", "lane", "reject", "threaded")

    def __init__(self, handler: Handler, lane: Lane, reject: Callable[[], bool] | None) -> None:
        self.handler = handler
        self.lane = lane
        self.reject = reject
        self.threaded = lane.threads > 0


_Queued = tuple["ProcessorTable", Connection, RemotingCommand, _Entry, float]


class Lane:
    """A bounded queue of requests and the workers that run them.

    Args:
        name: shows in logs and metrics (RocketMQ names its pools the same way:
            "send", "pull", "query", "admin", …).
        workers: concurrent handlers.
        capacity: queued requests beyond which new ones get SYSTEM_BUSY.
        threads: 0 runs ``async`` handlers on the event loop; N > 0 runs plain functions on
            a private pool of N threads (``workers`` is then N as well).
        max_wait_ms: a request that waited longer than this for a worker is answered
            SYSTEM_BUSY instead of run (RocketMQ's ``waitTimeMillsInSendQueue``, 200 ms for
            sends): its client has likely given up, and running it only delays the others.
    """

    def __init__(
        self,
        name: str,
        *,
        workers: int = 1,
        capacity: int = 10_000,
        threads: int = 0,
        max_wait_ms: int | None = None,
    ):
        if workers < 1 or capacity < 1 or threads < 0:
            raise ValueError(f"lane {name}: workers and capacity must be >= 1, threads >= 0")
        self.name = name
        self.threads = threads
        self.workers = threads or workers
        self.capacity = capacity
        self.rejected = 0  # SYSTEM_BUSY answers given, for metrics
        self.max_wait_s = max_wait_ms / 1000 if max_wait_ms is not None else None
        self.expired = 0  # requests answered SYSTEM_BUSY for waiting too long
        self._now = time.monotonic
        # Waiting requests by connection, and the connections with some, in turn order.
        self._queues: dict[Connection, deque[_Queued]] = {}
        self._turns: deque[Connection] = deque()
        self._depth = 0
        self._slice_end = 0.0  # when the running workers give the loop back
        self._slice_pending = False  # a new slice opens at the next loop turn
        self._idle: deque[asyncio.Future[None]] = deque()
        # Workers awake and not inside a handler (those woken but not yet running count).
        # Only when none is does a new request wake another: a worker whose handler does not
        # suspend takes request after request, and 64 woken workers would each spend a task
        # step per loop turn on finding the slice over.
        self._free = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._closing = False

    @property
    def depth(self) -> int:
        """Requests waiting for a worker."""
        return self._depth

    def start(self) -> None:
        if self._tasks:
            return
        self._closing = False
        if self.threads:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"lane-{self.name}")
        self._free = self.workers  # each goes idle (and uncounts itself) when it finds none
        self._tasks = [
            asyncio.create_task(self._work(), name=f"lane-{self.name}-{i}")
            for i in range(self.workers)
        ]

    def head_wait_s(self) -> float:
        """How long the oldest queued request has waited (RocketMQ's
        ``*ThreadPoolQueueHeadWaitTimeMills``); 0 when the lane is empty."""
        if not self._depth:
            return 0.0
        oldest = min((q[0][4] for q in self._queues.values() if q), default=None)
        return 0.0 if oldest is None else max(0.0, self._now() - oldest)

    def submit(
        self, table: ProcessorTable, conn: Connection, request: RemotingCommand, entry: _Entry
    ) -> bool:
        """Queue a request; False (and nothing queued) when the lane is closing, or full and
        ``conn`` has requests waiting in it already (so the lane overshoots its capacity by
        at most one request per connection)."""
        waiting = self._queues.get(conn)
        if self._closing or (self._depth >= self.capacity and waiting is not None):
            self.rejected += 1
            return False
        if waiting is None:
            waiting = self._queues[conn] = deque()
            self._turns.append(conn)
        waiting.append((table, conn, request, entry, self._now()))
        self._depth += 1
        if not self._free:
            self._wake_one()
        return True

    def _wake_one(self) -> None:
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._free += 1
                return

    def _open_slice(self) -> None:
        # Scheduled before the waiting workers' wake-ups, so they share this one slice: the
        # lane as a whole runs LANE_SLICE_S per loop turn, however many workers it has.
        self._slice_pending = False
        self._slice_end = self._now() + LANE_SLICE_S

    def _next(self) -> _Queued:
        """The oldest request of the connection whose turn it is (the lane is not empty)."""
        conn = self._turns.popleft()
        waiting = self._queues[conn]
        item = waiting.popleft()
        if waiting:
            self._turns.append(conn)
        else:
            del self._queues[conn]
        self._depth -= 1
        return item

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        answered: list[Connection] = []
        while True:
            if not self._depth:
                # Nothing else to batch with: write the corked answers now rather than a
                # loop turn later (saves that turn on every unpipelined round trip).
                for conn in answered:
                    conn.flush()
                answered.clear()
                if self._closing:
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle.append(waiter)
                self._free -= 1
                await waiter  # _wake_one counts us free again
                if not self._slice_pending and self._now() >= self._slice_end:
                    self._slice_end = self._now() + LANE_SLICE_S  # idle until now
                continue
            if self._now() >= self._slice_end:
                # Other connections' reads and our writes, then on. Every worker that finds
                # the slice over this turn waits; the next turn opens one slice for them all.
                if not self._slice_pending:
                    self._slice_pending = True
                    loop.call_soon(self._open_slice)
                await asyncio.sleep(0)
                continue
            table, conn, request, entry, queued_at = self._next()
            if self.max_wait_s is not None:
                waited = self._now() - queued_at
                if waited > self.max_wait_s:
                    self._expire(table, conn, request, waited)
                    continue
            if conn.write_paused:
                conn.hold(request)  # dispatched again once the peer drains our writes
                continue
            self._free -= 1
            if self._depth and not self._free:
                # Should this handler suspend (a send waiting for its flush), another worker
                # takes the next request meanwhile.
                self._wake_one()
            await table.run(conn, request, entry, self._pool)
            self._free += 1
            if not answered or answered[-1] is not conn:
                answered.append(conn)

    def _expire(
        self, table: ProcessorTable, conn: Connection, request: RemotingCommand, waited: float
    ) -> None:
        self.expired += 1
        if self.expired % 1000 == 1:
            log.warning(
                "lane_wait_expired lane=%s waited_ms=%s depth=%s expired=%s",
                self.name,
                int(waited * 1000),
                self._depth,
                self.expired,
            )
        remark = REMARK_TIMEOUT.format(waited=int(waited * 1000), depth=self._depth)
        send_response(conn, request, response_to(request, ResponseCode.SYSTEM_BUSY, remark))

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking requests, let queued ones finish for up to ``grace_s``, then cancel."""
        self._closing = True
        for waiter in self._idle:
            if not waiter.done():
                waiter.set_result(None)
        self._idle.clear()
        if self._tasks:
            _done, still = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in still:
                task.cancel()
            for task in still:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tasks = []
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class ProcessorTable:
    """Request code → (handler, lane); plus an optional default for unlisted codes.

    Args:
        hooks: RPC hooks run around every handled request.
    """

    def __init__(self, hooks: list[RPCHook] | None = None) -> None:
        self._entries: dict[int, _Entry] = {}
        self._default: _Entry | None = None
        self._lanes: dict[str, Lane] = {}
        self.hooks: list[RPCHook] = hooks if hooks is not None else []
        # A handler that takes longer than this is logged as ``slow_request`` (None: never).
        self.slow_request_s: float | None = None
        # While set (a broker recovering its store), every request is answered SYSTEM_BUSY
        # with the remark it returns, before any lookup: the port answers, nothing runs.
        self.holding: Callable[[], str] | None = None

    @property
    def lanes(self) -> list[Lane]:
        return list(self._lanes.values())

    @property
    def codes(self) -> frozenset[int]:
        """The request codes with a processor of their own (the broker's ACL table covers
        each of them; the default processor, if any, is not counted)."""
        return frozenset(self._entries)

    def register(
        self,
        code: int,
        handler: Handler,
        lane: Lane,
        *,
        reject: Callable[[], bool] | None = None,
    ) -> None:
        """Route ``code`` to ``handler`` on ``lane``.

        ``reject`` is the processor's ``rejectRequest()``: when it returns True the request is
        answered SYSTEM_BUSY before it is queued (the store uses it when its page cache is
        busy).
        """
        self._entries[code] = self._entry(handler, lane, reject)

    def async_handler(self, code: int) -> AsyncHandler:
        """The handler registered for ``code`` (an in-process caller awaits it directly, as
        RocketMQ's proxy in local mode calls a broker processor).

        Raises:
            KeyError: no processor serves ``code``.
            TypeError: its handler runs on a thread lane, not on the loop.
        """
        handler = self._entries[code].handler
        if not inspect.iscoroutinefunction(handler):
            raise TypeError(f"the handler of request code {code} is not async")
        return handler

    def register_default(self, handler: Handler, lane: Lane) -> None:
        """Handle every code without its own entry (RocketMQ's default processor)."""
        self._default = self._entry(handler, lane, None)

    def _entry(self, handler: Handler, lane: Lane, reject: Callable[[], bool] | None) -> _Entry:
        is_async = inspect.iscoroutinefunction(handler)
        if lane.threads and is_async:
            raise TypeError(f"lane {lane.name} runs threads: its handlers must be plain functions")
        if not lane.threads and not is_async:
            raise TypeError(f"lane {lane.name} runs on the loop: its handlers must be async")
        known = self._lanes.setdefault(lane.name, lane)
        if known is not lane:
            raise ValueError(f"two different lanes are named {lane.name}")
        return _Entry(handler, lane, reject)

    def start(self) -> None:
        for lane in self._lanes.values():
            lane.start()

    async def shutdown(self, grace_s: float) -> None:
        await asyncio.gather(*(lane.shutdown(grace_s) for lane in self._lanes.values()))

    # ------------------------------------------------------------------------ dispatch

    def dispatch(self, conn: Connection, request: RemotingCommand) -> None:
        """Route one request; called from ``Connection.data_received`` (must not block)."""
        if self.holding is not None:
            self._reply(
                conn, request, response_to(request, ResponseCode.SYSTEM_BUSY, self.holding())
            )
            return
        entry = self._entries.get(request.code) or self._default
        if entry is None:
            log.warning("request_code_not_supported code=%s peer=%s", request.code, conn.peer)
            self._reply(
                conn,
                request,
                response_to(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                ),
            )
            return
        if entry.reject is not None and entry.reject():
            busy = response_to(request, ResponseCode.SYSTEM_BUSY, REMARK_REJECT)
            self._reply(conn, request, busy)
            return
        if not entry.lane.submit(self, conn, request, entry):
            if entry.lane.rejected % 1000 == 1:  # one line per 1000 rejections, not a flood
                log.warning(
                    "lane_full lane=%s code=%s peer=%s rejected=%s",
                    entry.lane.name,
                    request.code,
                    conn.peer,
                    entry.lane.rejected,
                )
            self._reply(
                conn, request, response_to(request, ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)
            )

    async def run(
        self,
        conn: Connection,
        request: RemotingCommand,
        entry: _Entry,
        pool: ThreadPoolExecutor | None,
    ) -> None:
        """Run one handler and send its response (Lane workers call this)."""
        response: RemotingCommand | None
        started = time.perf_counter()
        try:
            for hook in self.hooks:
                hook.before_request(conn.peer, request)
            if pool is not None:
                loop = asyncio.get_running_loop()
                response = await loop.run_in_executor(
                    pool,
                    entry.handler,  # type: ignore[arg-type]  # threaded lanes hold SyncHandlers
                    conn,
                    request,
                )
            else:
                response = await entry.handler(conn, request)  # type: ignore[misc]  # async lane
            for hook in self.hooks:
                hook.after_response(conn.peer, request, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = _failure_response(conn, request, exc)
        if response is not None:
            self._reply(conn, request, response)
        elif request.flag & 2:
            # Oneway: over when its handler returns, even if the handler arranged an answer
            # for later (a send to a topic being routed); that answer does not count it again.
            conn.request_done(request)
        # else the handler answers later, through send_response (a parked pull)
        slow = self.slow_request_s
        if slow is not None:
            took = time.perf_counter() - started
            if took > slow:
                _log_slow(conn, request, entry, took, response)

    @staticmethod
    def _reply(conn: Connection, request: RemotingCommand, response: RemotingCommand) -> None:
        send_response(conn, request, response)


def _failure_response(
    conn: Connection, request: RemotingCommand, exc: Exception
) -> RemotingCommand:
    """The answer to a request whose handler raised ``exc`` (called in its except block):
    a BrokerError's code, SYSTEM_ERROR for a bad header or anything else (logged)."""
    if isinstance(exc, BrokerError):
        return response_to(request, exc.response_code, str(exc))
    if isinstance(exc, HeaderError):
        log.info("bad_request_header code=%s peer=%s error=%s", request.code, conn.peer, exc)
        return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
    # The failing request is identified in this one line (code, opaque, peer), so the hot
    # path carries no per-request logging context.
    log.exception(
        "processor_failed code=%s opaque=%s peer=%s", request.code, request.opaque, conn.peer
    )
    return response_to(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def _log_slow(
    conn: Connection,
    request: RemotingCommand,
    entry: _Entry,
    took: float,
    response: RemotingCommand | None,
) -> None:
    """The line for a handler that took longer than ``slow_request_s``."""
    log.warning(
        "slow_request code=%s peer=%s lane=%s took_ms=%s result=%s",
        request.code,
        conn.peer,
        entry.lane.name,
        round(took * 1000, 1),
        response.code if response is not None else None,
    )


def send_response(conn: Connection, request: RemotingCommand, response: RemotingCommand) -> None:
    """Answer ``request`` on ``conn`` (nothing for oneway requests).

    Handlers that answer later (a parked pull, a send waiting for its flush) use this too.
    Every request ends here or, oneway, in ``ProcessorTable.run``: the connection counts it
    out of its requests in flight (or parked), once.
    """
    conn.request_done(request)
    if request.flag & 2:  # oneway: the peer expects nothing back
        return
    response.opaque = request.opaque
    response.flag |= 1
    response.serialize_type = request.serialize_type
    try:
        conn.send(response)
    except FrameError as exc:
        # e.g. a code above 32767 that a ROCKETMQ binary header cannot hold: answer with
        # an error the peer can decode rather than leave it waiting for a timeout.
        log.warning("response_not_encodable code=%s error=%s", response.code, exc)
        conn.send(response_to(request, ResponseCode.SYSTEM_ERROR, f"response not encodable: {exc}"))
