"""The connector's blocking link to the brokers, one per Python process.

RocketMQ counterpart: what rocketmq-spark's ``CachedMQConsumer`` / ``RocketMQOffsetReader``
do with a ``DefaultMQPullConsumer`` and ``MQAdmin``: list a topic's queues and their min/max
offsets, search an offset by time, pull a queue range, store a group's offsets, send.

Spark calls a data source from plain (non-async) Python: the planner on the driver, and
``read()`` / ``write()`` in executor workers that Spark reuses across tasks. So every call
here is submitted to the SDK's one event loop thread of the process (``client.blocking``) and
waited for, and the ``Admin`` client behind it is kept per name server for the life of the
process: its route cache and connections serve every later task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from client.admin import Admin
from client.blocking import _LoopThread
from client.errors import ClientError, ClientTimeoutError, RocketMQError, SystemBusyError
from client.message import Message, MessageView, SendResult
from client.producer import Producer
from client.spark.offsets import (
    Bounds,
    DataLossError,
    QueueKey,
    QueueRange,
    SourceOptions,
    describe_queue,
)
from remoting.acl import SessionCredentials
from remoting.route import MessageQueue

log = logging.getLogger(__name__)


def quiet_worker_logs() -> None:
    """Warnings on stderr, in a Spark Python worker that has no logging set up.

    The SDK shows nothing until logging is configured, and Spark's workers start bare; an
    operator wants the warnings (data loss, failed commits) in the executor logs.
    ``AEROLITE_SPARK_LOG_LEVEL=info`` shows more. Called only on the paths Spark runs in
    its own workers, never on import; where logging is set up already (an application's
    own configuration), it is left alone."""
    if logging.getLogger().handlers:
        return
    name = os.environ.get("AEROLITE_SPARK_LOG_LEVEL", "warning").upper()
    level = logging.getLevelNamesMapping().get(name, logging.WARNING)
    for package in ("client", "remoting"):
        logger = logging.getLogger(package)
        if any(h.get_name() == _WORKER_HANDLER for h in logger.handlers):
            continue  # once per worker process, however many tasks it runs
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(_WORKER_HANDLER)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level)


_WORKER_HANDLER = "aerolite-spark-worker"


T = TypeVar("T")
CALL_TIMEOUT_S = 120.0
_STALL_RETRIES = 50  # pulls that make no progress (a segment being swapped) before giving up
_WINDOWS_IN_FLIGHT = 8  # concurrent pulls per partition being read
_SEND_WINDOW = 512  # sends in flight per task: enough to fill the producer's auto-batches
# A send refused with SYSTEM_BUSY (the broker's send queue waited out
# waitTimeMillsInSendQueue) is sent again, backing off, for this long after the first send.
_BUSY_RETRY_S = 60.0
_BUSY_FIRST_WAIT_S = 0.05
_BUSY_MAX_WAIT_S = 1.0


def _run(coro: Awaitable[T], timeout_s: float = CALL_TIMEOUT_S) -> T:
    loop = _LoopThread.loop()

    async def wrapped() -> T:
        return await coro

    future: Future[T] = asyncio.run_coroutine_threadsafe(wrapped(), loop)
    return _wait(future, getattr(coro, "__qualname__", "call"), "any broker", timeout_s)


def _wait(future: Future[T], what: str, where: str, timeout_s: float) -> T:
    """``future.result(timeout_s)``; when the wait runs out, the call is cancelled and the
    timeout is the SDK's (``ClientTimeoutError`` naming the call, where and the wait)."""
    try:
        return future.result(timeout_s)
    except TimeoutError as exc:
        if future.done():
            raise  # the call's own failure, not our wait
        future.cancel()
        raise ClientTimeoutError(what, where, timeout_s) from exc


class BrokerSession:
    """An admin client on the process's loop thread, for one name server and account."""

    _lock = threading.Lock()
    _sessions: dict[tuple[str, str | None, str | None], BrokerSession] = {}  # noqa: RUF012

    def __init__(self, namesrv: str, credentials: SessionCredentials | None) -> None:
        self.namesrv = namesrv
        self.credentials = credentials
        self.admin = Admin(namesrv, credentials=credentials)
        _run(self.admin.start())

    @classmethod
    def get(
        cls, namesrv: str, access_key: str | None = None, secret_key: str | None = None
    ) -> BrokerSession:
        key = (namesrv, access_key, secret_key)
        with cls._lock:
            session = cls._sessions.get(key)
            if session is None:
                credentials = (
                    SessionCredentials(access_key, secret_key)
                    if access_key and secret_key
                    else None
                )
                session = cls._sessions[key] = BrokerSession(namesrv, credentials)
            return session

    @classmethod
    def close_all(cls) -> None:
        """Shut every session's client down (a driver that is done with its brokers)."""
        with cls._lock:
            sessions, cls._sessions = list(cls._sessions.values()), {}
        for session in sessions:
            _run(session.admin.shutdown())

    @classmethod
    def for_options(cls, opts: SourceOptions) -> BrokerSession:
        """The session of a reader's options, from inside a Spark worker."""
        quiet_worker_logs()
        return cls.get(opts.namesrv, opts.access_key, opts.secret_key)

    # ------------------------------------------------------------------ planning

    def topics(self, opts: SourceOptions) -> list[str]:
        """The topics a read covers: the named ones, or those matching the pattern now."""
        if opts.topic_pattern is None:
            return list(opts.topics)
        return sorted(t for t in _run(self.admin.topic_list()) if opts.matches(t))

    def bounds(self, opts: SourceOptions) -> Bounds:
        """(min, max) offset of every queue of the read's topics, from their masters.

        Raises:
            ClientError: a named topic has no route (it does not exist).
        """
        out: Bounds = {}
        for topic in self.topics(opts):
            try:
                stats = _run(self.admin.topic_stats(topic))
            except RocketMQError as exc:
                if opts.topic_pattern is not None:
                    continue  # deleted between the listing and now
                raise ClientError(f"topic {topic} cannot be read: {exc}") from exc
            for mq, offsets in stats.items():
                out[(mq.topic, mq.broker_name, mq.queue_id)] = (
                    offsets.min_offset,
                    offsets.max_offset,
                )
        return dict(sorted(out.items()))

    def offsets_by_time(self, keys: Sequence[QueueKey], timestamp_ms: int) -> dict[QueueKey, int]:
        """Per queue, the offset of the first message stored at or after the time (the
        queue's end when none is), so a time range splits a queue exactly, as Kafka's
        offsetsForTimes does. ``Admin.offset_for_time`` corrects the broker's search, which
        answers the message *nearest* in time."""

        async def search() -> dict[QueueKey, int]:
            return {
                key: await self.admin.offset_for_time(MessageQueue(*key), timestamp_ms)
                for key in keys
            }

        return _run(search())

    def commit_offsets(self, group: str, offsets: dict[QueueKey, int]) -> None:
        """Store ``offsets`` as ``group``'s positions (advisory: lag tools read them)."""

        async def commit() -> None:
            for key, offset in sorted(offsets.items()):
                await self.admin.commit_consumer_offset(MessageQueue(*key), group, offset)

        _run(commit())

    # ------------------------------------------------------------------ reading

    def read_range(self, part: QueueRange, opts: SourceOptions) -> Iterator[list[MessageView]]:
        """The messages of ``part`` in queue order, in chunks.

        A range reads the same messages every time it is read (Spark replays a failed batch
        with the same offsets), as long as retention has not removed them. If it has, the
        read fails with DataLossError naming the queue and offsets, or, without
        ``failOnDataLoss``, logs a warning with the count it skipped and goes on from
        the queue's new minimum.

        The range is cut into windows of offsets that are pulled concurrently
        (``_WINDOWS_IN_FLIGHT`` at once) and handed out in order: a pull's answer is needed
        to know where the next one starts only *within* a window, so the round trips of
        neighbouring windows overlap instead of adding up.
        """
        mq = MessageQueue(part.topic, part.broker, part.queue_id)
        probe = _run(self.admin.pull_batch(mq, part.start, 1))
        start, end = part.start, part.end
        if start < probe.min_offset:
            resume = min(probe.min_offset, end)
            self._lost(part, start, resume, opts, why="retention deleted them")
            start = resume
        readable_end = max(start, min(end, probe.max_offset))
        filtered = opts.expression != ("*", "TAG")
        # A filtered pull scans past the messages it drops, so its windows are wider.
        width = opts.pull_batch_size * (8 if filtered else 1)
        loop = _LoopThread.loop()
        pending: deque[Future[list[MessageView]]] = deque()
        what = f"pulls of queue {describe_queue(part.key)}"
        try:
            for lo in range(start, readable_end, width):
                window = self._window(
                    mq,
                    part,
                    lo=lo,
                    hi=min(lo + width, readable_end),
                    opts=opts,
                    filtered=filtered,
                )
                pending.append(asyncio.run_coroutine_threadsafe(window, loop))
                if len(pending) >= _WINDOWS_IN_FLIGHT:
                    got = _wait(pending.popleft(), what, f"broker {part.broker}", CALL_TIMEOUT_S)
                    if got:
                        yield got
            while pending:
                got = _wait(pending.popleft(), what, f"broker {part.broker}", CALL_TIMEOUT_S)
                if got:
                    yield got
        finally:
            for future in pending:  # the reader stopped early (a LIMIT, a failed task)
                future.cancel()
        if readable_end < end:
            self._lost(part, readable_end, end, opts, why="the queue ends earlier")

    async def _window(
        self,
        mq: MessageQueue,
        part: QueueRange,
        *,
        lo: int,
        hi: int,
        opts: SourceOptions,
        filtered: bool,
    ) -> list[MessageView]:
        """Messages ``[lo, hi)`` of ``mq``, by as many pulls as that takes."""
        expression, expression_type = opts.expression
        out: list[MessageView] = []
        offset = lo
        stalls = 0
        while offset < hi:
            want = opts.pull_batch_size if filtered else min(opts.pull_batch_size, hi - offset)
            got = await self.admin.pull_batch(
                mq, offset, want, expression=expression, expression_type=expression_type
            )
            if not got.messages and got.min_offset > offset:
                resume = min(got.min_offset, hi)  # retention ran since the range was planned
                self._lost(part, offset, resume, opts, why="retention deleted them")
                offset = resume
                continue
            out.extend(m for m in got.messages if m.queue_offset < hi)
            if got.next_offset > offset:
                offset = got.next_offset
                stalls = 0
                continue
            if offset >= got.max_offset:
                self._lost(part, offset, hi, opts, why="the queue ends earlier")
                break
            stalls += 1  # a segment being swapped, or a message being removed: try again
            if stalls > _STALL_RETRIES:
                raise ClientError(
                    f"reading {describe_queue(part.key)} made no progress at offset {offset} "
                    f"(queue bounds {got.min_offset}..{got.max_offset})"
                )
            await asyncio.sleep(0.02)
        return out

    @staticmethod
    def _lost(
        part: QueueRange,
        start: int,
        end: int,
        opts: SourceOptions,
        *,
        why: str,
    ) -> None:
        count = end - start
        where = describe_queue(part.key)
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"messages {start}..{end - 1} of queue {where} are gone ({why}); "
                f"{count} messages a query needed were not read. Set failOnDataLoss=false "
                "to skip them and continue from the queue's new minimum offset"
            )
        log.warning(
            "spark_data_loss queue=%s start=%s end=%s skipped=%s why=%s",
            where,
            start,
            end,
            count,
            why,
        )

    # ------------------------------------------------------------------ writing

    def send_all(
        self,
        group: str,
        messages: Sequence[tuple[Message, int | None]],
    ) -> list[SendResult]:
        """Send every message (to its queue id when one is given) and wait for all the
        broker's answers; the first failure raises with the broker's reason, after the
        other sends have finished (so none is left in flight when a task fails). A send
        refused for flow control (SYSTEM_BUSY: nothing stored) is sent again, backing off."""

        async def run() -> list[SendResult]:
            producer = Producer(group, self.namesrv, credentials=self.credentials)
            await producer.start()
            try:
                window = asyncio.Semaphore(_SEND_WINDOW)

                loop = asyncio.get_running_loop()
                deadline = loop.time() + _BUSY_RETRY_S

                async def one(msg: Message, queue_id: int | None) -> SendResult:
                    delay = _BUSY_FIRST_WAIT_S
                    while True:
                        try:
                            async with window:
                                if queue_id is None:
                                    return await producer.send(msg)
                                return await producer.send_orderly(
                                    msg, selector=_pick_queue, arg=queue_id
                                )
                        except SystemBusyError:
                            # Flow control: the broker answered before storing anything, so
                            # sending again cannot duplicate; a whole task failing for a
                            # moment's backlog would. Jittered, so the refused do not all
                            # come back in one wave.
                            if loop.time() + delay > deadline:
                                raise
                        await asyncio.sleep(delay * random.uniform(0.5, 1.5))  # noqa: S311
                        delay = min(2 * delay, _BUSY_MAX_WAIT_S)

                results = await asyncio.gather(
                    *(one(m, q) for m, q in messages), return_exceptions=True
                )
            finally:
                await producer.shutdown()
            out: list[SendResult] = []
            for result in results:
                if isinstance(result, BaseException):
                    raise result
                out.append(result)
            return out

        return _run(run(), timeout_s=CALL_TIMEOUT_S + len(messages) * 0.01)


def _pick_queue(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    for mq in queues:
        if mq.queue_id == arg:
            return mq
    raise ClientError(
        f"topic {msg.topic} has no queue {arg} (its queues: "
        f"{', '.join(str(q.queue_id) for q in queues)})"
    )
