"""The orderly consume service: one message at a time per queue, under a broker queue lock.

RocketMQ counterpart: ``ConsumeMessageOrderlyService`` (a queue is consumed only while this
client holds its broker lock; a failed message is retried in place after
``suspendCurrentQueueTimeMillis``, nothing behind it moving) together with the lock calls of
``RebalanceImpl`` it relies on: ``lockAll`` (LOCK_BATCH_MQ, renewed at every rebalance and
whenever a lock has lapsed) and ``unlock`` (UNLOCK_BATCH_MQ, when a queue is released or the
consumer stops, once the listener holding its messages has finished).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from client.consume_service import ConsumeMessageService, Subscription
from client.instance import ClientInstance
from client.message import ConsumeResult, MessageView
from client.process_queue import ProcessQueue
from remoting.bodies import LockBatchBody, decode_lock_ok
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.route import MessageQueue

log = logging.getLogger(__name__)

ORDERLY_SUSPEND_S = 1.0  # suspendCurrentQueueTimeMillis
ORDERLY_HANDOVER_S = 60.0  # how long a released queue waits for its listener to finish
LOCK_TIMEOUT_S = 5.0
UNLOCK_TIMEOUT_S = 3.0


class OrderlySettings(Protocol):
    """The setting of the push consumer this service reads, when it uses it."""

    suspend_current_queue_s: float | None  # None: ORDERLY_SUSPEND_S


class ConsumeMessageOrderlyService(ConsumeMessageService):
    """A consume task per queue with messages, one listener call at a time in it.

    Args:
        process_queues: the consumer's queues (read, never changed here): the ones to lock.
        settings: the push consumer itself (``OrderlySettings``).
    """

    ORDERLY = True

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, Subscription],
        all_subscriptions: Mapping[str, Subscription],
        consumed: Callable[[ProcessQueue, MessageView], None],
        *,
        instance: ClientInstance,
        process_queues: Mapping[MessageQueue, ProcessQueue],
        settings: OrderlySettings,
    ) -> None:
        super().__init__(group, subscriptions, all_subscriptions, consumed)
        self._instance = instance
        self._process_queues = process_queues
        self.settings = settings
        self._consuming: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Nothing runs until a batch arrives: the rebalance renews the locks."""

    def submit(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        # The batch is in ``pq`` already; the task takes its messages from there in order.
        task = asyncio.create_task(self._consume(pq), name="consume-orderly")
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)

    async def drain(self, grace_s: float) -> None:
        if self._consuming:
            await asyncio.wait(list(self._consuming), timeout=grace_s)

    async def stop(self) -> None:
        await self._cancel(list(self._consuming))

    async def _consume(self, pq: ProcessQueue) -> None:
        async with pq.consuming:
            while pq.messages and not pq.dropped and not self._stopping:
                if not pq.lock_live():
                    # Renew at once (Java's tryLockLaterAndReconsume); if the broker says no,
                    # the next owner has it, or the pull loop and rebalance try again.
                    await self.lock_all()
                    if not pq.lock_live():
                        return
                offset = pq.first()
                if offset is None:
                    return
                msg = pq.messages[offset]
                listener, view = self._listener_for(msg)
                tracer = self.tracer
                traced = tracer.before((view,)) if tracer is not None else None
                began = time.monotonic()
                result, code = await self._call(listener, view)
                if traced is not None and tracer is not None:
                    tracer.after(traced, code)
                self.stats.consumed(pq.mq.topic, began, result is ConsumeResult.SUCCESS)
                if result is ConsumeResult.SUCCESS:
                    self._consumed(pq, msg)
                    continue
                # Orderly: the same message again after a pause; nothing behind it moves.
                pq.messages[offset] = dataclasses.replace(
                    msg, reconsume_times=msg.reconsume_times + 1
                )
                suspend = self.settings.suspend_current_queue_s
                await asyncio.sleep(ORDERLY_SUSPEND_S if suspend is None else suspend)

    async def lock_all(self) -> None:
        """LOCK_BATCH_MQ for every queue held, per broker; a queue the broker locked for us
        and that still holds messages is consumed at once."""
        instance = self._instance
        for broker_name, addr, mqs, request in self._per_broker(
            RequestCode.LOCK_BATCH_MQ, self._process_queues
        ):
            try:
                response = await instance.invoke_broker(addr, request, LOCK_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("lock_batch_failed broker=%s error=%s", broker_name, exc)
                continue
            locked = (
                set(decode_lock_ok(response.body_bytes))
                if response.code == ResponseCode.SUCCESS
                else set()
            )
            self._locked(mqs, locked)

    def _locked(self, mqs: list[MessageQueue], locked: set[MessageQueue]) -> None:
        now = time.monotonic()
        for mq in mqs:
            pq = self._process_queues.get(mq)
            if pq is None:
                continue
            pq.locked = mq in locked
            if pq.locked:
                pq.last_lock_at = now
                pq.wake.set()
                if pq.messages and not pq.consuming.locked():
                    # Messages left when an earlier lock lapsed: consume them now, not only
                    # when the next pull brings more.
                    self.submit(pq, [])

    async def unlock(self, mqs: list[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ, per broker; a broker that does not answer lets the lock lapse."""
        instance = self._instance
        for _, addr, _, request in self._per_broker(RequestCode.UNLOCK_BATCH_MQ, mqs):
            with contextlib.suppress(RemotingError):
                await instance.invoke_broker(addr, request, UNLOCK_TIMEOUT_S)

    def _per_broker(
        self, code: RequestCode, mqs: Iterable[MessageQueue]
    ) -> Iterator[tuple[str, str, list[MessageQueue], RemotingCommand]]:
        """For each broker of ``mqs``: its name, its master's address (looked up when its
        turn comes; a broker without one is skipped), its queues and the lock or unlock
        request (``LockBatchBody``) for them."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        instance = self._instance
        for broker_name, group_mqs in by_broker.items():
            addr = instance.master_addr(broker_name)
            if addr is None:
                continue
            body = LockBatchBody(self.group, instance.client_id, group_mqs).encode()
            yield broker_name, addr, group_mqs, RemotingCommand.request(code, {}, body)

    async def handed_over(self, pq: ProcessQueue) -> None:
        """Wait (at most ORDERLY_HANDOVER_S) until the listener of a released queue is done.

        The next owner may lock the queue only once the message in our listener is done;
        otherwise two consumers would hold one key's messages at once."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ORDERLY_HANDOVER_S):
                await pq.consuming.acquire()
                pq.consuming.release()
