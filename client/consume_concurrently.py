"""The concurrent consume service: a fixed set of workers running listeners in parallel.

RocketMQ counterpart: ``ConsumeMessageConcurrentlyService`` — its consume thread pool (here
``consume_concurrency`` tasks taking messages from one backlog), ``processConsumeResult``
(commit a success; send a failure back with CONSUMER_SEND_MSG_BACK, or retry it locally
when the broker refuses, keeping the committed offset below it) and ``cleanExpireMsg``
(a listener running past ``consumeTimeout`` is cancelled and its message retried).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, cast

from client.consume_service import ConsumeMessageService, Subscription
from client.instance import ClientInstance
from client.message import ConsumeResult, MessageView
from client.process_queue import ProcessQueue
from client.trace import ConsumeReturnType
from codec import PROPERTY_RETRY_TOPIC
from remoting.bodies import MessageModel
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import ConsumerSendMsgBackRequestHeader
from remoting.lifecycle import Periodic

log = logging.getLogger(__name__)

CONSUME_TIMEOUT_S = 15 * 60.0  # consumeTimeout (15 minutes)
SEND_BACK_TIMEOUT_S = 5.0


@dataclass(slots=True, eq=False)
class _Worker:
    """One of the ``consume_concurrency`` tasks running listeners (Java's consume thread)."""

    task: asyncio.Task[None] | None = None
    msg: MessageView | None = None  # in the listener now
    started: float = 0.0
    timed_out: bool = False


class ConcurrentSettings(Protocol):
    """The settings of the push consumer this service reads, when it uses them (see
    ``PushConsumer``'s Args); the consumer itself is passed."""

    message_model: MessageModel
    consume_concurrency: int
    max_reconsume_times: int
    local_retry_delay_s: float
    consume_timeout_s: float | None  # None: CONSUME_TIMEOUT_S


class ConsumeMessageConcurrentlyService(ConsumeMessageService):
    """Pulled messages wait in one backlog for a fixed set of workers (a task per message
    costs more than most listeners do)."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, Subscription],
        all_subscriptions: Mapping[str, Subscription],
        consumed: Callable[[ProcessQueue, MessageView], None],
        *,
        instance: ClientInstance,
        settings: ConcurrentSettings,
    ) -> None:
        super().__init__(group, subscriptions, all_subscriptions, consumed)
        self._instance = instance
        self.settings = settings
        self._backlog: deque[tuple[ProcessQueue, MessageView]] = deque()
        self._workers: list[_Worker] = []
        self._idle: deque[asyncio.Future[None]] = deque()
        self._watchdog: Periodic | None = None

    def start(self) -> None:
        self._workers = [_Worker() for _ in range(self.settings.consume_concurrency)]
        for i, worker in enumerate(self._workers):
            worker.task = asyncio.create_task(self._work(worker), name=f"consume-{i}")
        # Java checks every 15 min for messages consumed longer than consumeTimeout; here
        # every half timeout, at most a minute, so a listener overruns by at most that.
        period_s = min(self._consume_timeout() / 2, 60.0)
        self._watchdog = Periodic("consume-timeout", self._cancel_overdue, period_s)
        self._watchdog.start()

    def submit(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        backlog = self._backlog
        for msg in msgs:
            backlog.append((pq, msg))
        self._wake_workers(len(msgs))

    async def drain(self, grace_s: float) -> None:
        self._backlog.clear()
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
        running = [w.task for w in self._workers if w.task is not None]
        if running:
            await asyncio.wait(running, timeout=grace_s)

    async def stop(self) -> None:
        if self._watchdog is not None:
            await self._watchdog.stop()
            self._watchdog = None
        await self._cancel([w.task for w in self._workers if w.task is not None])
        self._workers = []

    def _wake_workers(self, n: int) -> None:
        idle = self._idle
        while n > 0 and idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    async def _work(self, worker: _Worker) -> None:
        """The consume thread: take a message, run the listener, settle the result; park
        when the backlog is empty."""
        loop = asyncio.get_running_loop()
        backlog = self._backlog
        while not self._stopping:
            if not backlog:
                waiter = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            pq, msg = backlog.popleft()
            if pq.dropped:
                continue
            listener, view = self._listener_for(msg)
            tracer = self.tracer
            traced = tracer.before((view,)) if tracer is not None else None
            code = ConsumeReturnType.SUCCESS
            worker.msg = msg
            worker.started = time.monotonic()
            try:
                try:
                    if self._is_async.get(listener):
                        # The usual case, inlined: an async listener.
                        outcome = await cast("Awaitable[object]", listener(view))
                    else:
                        outcome = await self._invoke(listener, view)
                except Exception:
                    self._failed(msg)
                    outcome, code = ConsumeResult.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
                if outcome is None or outcome is ConsumeResult.SUCCESS:
                    result = ConsumeResult.SUCCESS
                else:
                    result = self._result_of(outcome)
                    if code is ConsumeReturnType.SUCCESS:
                        code = ConsumeReturnType.FAILED
            except asyncio.CancelledError:
                if not worker.timed_out:
                    raise
                result = ConsumeResult.RECONSUME_LATER
            finally:
                worker.msg = None
            if worker.timed_out:
                result, code = self._timed_out(worker, pq, msg), ConsumeReturnType.TIME_OUT
            if traced is not None and tracer is not None:
                tracer.after(traced, code)
            ok = result is ConsumeResult.SUCCESS
            self.stats.consumed(pq.mq.topic, worker.started, ok)
            if ok:
                self._consumed(pq, msg)
            else:
                await self._settle_failure(pq, msg)

    def _timed_out(self, worker: _Worker, pq: ProcessQueue, msg: MessageView) -> ConsumeResult:
        """The watchdog cancelled this worker's listener (or the listener swallowed the
        cancellation): clear the cancellation and have the message retried."""
        worker.timed_out = False
        task = asyncio.current_task()
        if task is not None:
            while task.cancelling():
                task.uncancel()
        log.warning(
            "consume_timeout group=%s msg_id=%s queue=%s timeout_s=%s",
            self.group,
            msg.msg_id,
            pq.mq,
            self._consume_timeout(),
        )
        return ConsumeResult.RECONSUME_LATER

    async def _settle_failure(self, pq: ProcessQueue, msg: MessageView) -> None:
        if pq.dropped:
            return
        if self.settings.message_model is MessageModel.BROADCASTING:
            # As in RocketMQ: a broadcast message is not retried; it is logged and dropped.
            log.warning(
                "broadcast_consume_failed_dropped group=%s msg_id=%s topic=%s queue_offset=%s",
                self.group,
                msg.msg_id,
                msg.topic,
                msg.queue_offset,
            )
            self._consumed(pq, msg)
            return
        if await self._send_back(msg):
            self._consumed(pq, msg)
            return
        # The broker would not take it back: retry here, later, keeping the offset below it
        # so nothing is skipped meanwhile.
        asyncio.get_running_loop().call_later(
            self.settings.local_retry_delay_s, self._retry_locally, pq, msg
        )

    def _retry_locally(self, pq: ProcessQueue, msg: MessageView) -> None:
        if pq.dropped or self._stopping:
            return
        retried = dataclasses.replace(msg, reconsume_times=msg.reconsume_times + 1)
        pq.messages[msg.queue_offset] = retried
        self._backlog.append((pq, retried))
        self._wake_workers(1)

    async def _send_back(self, msg: MessageView) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker redelivers it later via the retry topic."""
        instance = self._instance
        addr = instance.master_addr(msg.broker_name)
        if addr is None:
            return False
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=self.group,
            delay_level=0,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.properties.get(PROPERTY_RETRY_TOPIC, msg.topic),
            max_reconsume_times=self.settings.max_reconsume_times,
        )
        request = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
        )
        try:
            response = await instance.invoke_broker(addr, request, SEND_BACK_TIMEOUT_S)
        except RemotingError:
            return False
        return response.code == ResponseCode.SUCCESS

    def _consume_timeout(self) -> float:
        timeout = self.settings.consume_timeout_s
        return CONSUME_TIMEOUT_S if timeout is None else timeout

    def _cancel_overdue(self) -> None:
        """The watchdog's round: cancel the listeners running past ``consume_timeout_s``
        (``cleanExpireMsg``); each worker retries its message (``_timed_out``)."""
        timeout = self._consume_timeout()
        now = time.monotonic()
        for worker in self._workers:
            if (
                worker.msg is not None
                and not worker.timed_out
                and now - worker.started > timeout
                and worker.task is not None
            ):
                worker.timed_out = True
                worker.task.cancel()
