"""``PullConsumer``: the application asks for messages when it wants them.

RocketMQ counterpart: ``DefaultLitePullConsumer``. Subscribe (queues shared with the group's
other consumers by rebalance) or ``assign`` queues yourself; background long-polling pulls
fill a bounded buffer; ``poll()`` hands out what is there. With ``auto_commit`` (the default)
a polled message counts as consumed and its offset is committed every 5 s and at shutdown;
without it ``commit()`` does that. ``seek`` moves a queue's position.

Usage::

    async with PullConsumer("demo-pull", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("orders", "TagA")   # before start, or use assign([...])
        for msg in await consumer.poll(timeout_s=1.0):
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from client.errors import ClientStateError, InvalidArgumentError
from client.message import ConsumeResult, MessageView
from client.process_queue import ProcessQueue
from client.push_consumer import PushConsumer
from remoting.bodies import ConsumerData, ConsumeType
from remoting.codes import RequestCode
from remoting.headers import QueueRequestHeader
from remoting.route import MessageQueue


async def _unused_listener(msg: MessageView) -> ConsumeResult:  # pragma: no cover
    raise ClientStateError("a pull consumer never calls listeners")


class PullConsumer(PushConsumer):
    """Pull-style consumer; the arguments are ``PushConsumer``'s plus ``auto_commit``.

    Args:
        auto_commit: count polled messages as consumed (committed every 5 s); otherwise
            call ``commit()``.
    """

    _uses_workers = False

    def __init__(
        self, group: str, namesrv: str | None = None, *, auto_commit: bool = True, **kwargs: Any
    ) -> None:
        if kwargs.get("orderly"):
            raise InvalidArgumentError("a pull consumer orders by itself: orderly is not used")
        super().__init__(group, namesrv, **kwargs)
        self.auto_commit = auto_commit
        self._buffer: deque[tuple[ProcessQueue, MessageView]] = deque()
        self._ready = asyncio.Event()
        self._polled: list[tuple[ProcessQueue, MessageView]] = []
        self._assigned: list[MessageQueue] | None = None

    # ----------------------------------------------------------------- subscription

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> Any:
        """Subscribe to ``topic`` (before ``start()``) by tag ``expression`` or ``sql``
        (SQL92); the group shares its queues."""
        if self._assigned is not None:
            raise ClientStateError("subscribe and assign cannot be mixed")
        super().subscribe(topic, expression, sql=sql)(_unused_listener)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance), before ``start()``."""
        if self.subscriptions and self._assigned is None:
            raise ClientStateError("subscribe and assign cannot be mixed")
        if not queues:
            raise InvalidArgumentError("assign needs at least one queue")
        self._assigned = sorted(queues)
        for topic in {mq.topic for mq in queues}:
            if topic not in self.subscriptions:
                super().subscribe(topic, "*")(_unused_listener)

    def _all_subscriptions(self) -> Any:
        if self._assigned is not None:
            return dict(self.subscriptions)  # no retry topic: nothing is sent back
        return super()._all_subscriptions()

    def consumer_data(self) -> ConsumerData:
        data = super().consumer_data()
        data.consume_type = ConsumeType.CONSUME_ACTIVELY
        return data

    async def _allocate(self, topic: str) -> list[MessageQueue]:
        if self._assigned is not None:
            return [mq for mq in self._assigned if mq.topic == topic]
        return await super()._allocate(topic)

    # -------------------------------------------------------------------- buffering

    def _dispatch(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        for msg in msgs:
            self._buffer.append((pq, msg))
        self._ready.set()

    async def poll(
        self, timeout_s: float = 5.0, max_messages: int | None = None
    ) -> list[MessageView]:
        """Up to ``max_messages`` (default ``pull_batch_size``) messages; [] after
        ``timeout_s`` without any."""
        self._running()
        if not self._buffer:
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._ready.wait()
        limit = max_messages or self.pull_batch_size
        out: list[MessageView] = []
        while self._buffer and len(out) < limit:
            pq, msg = self._buffer.popleft()
            if pq.dropped or msg.queue_offset not in pq.messages:
                continue  # its queue was reassigned or seeked meanwhile
            out.append(msg)
            if self.auto_commit:
                self._consumed(pq, msg)
            else:
                self._polled.append((pq, msg))
        return out

    async def commit(self) -> None:
        """Count every polled message as consumed and store the offsets now."""
        polled, self._polled = self._polled, []
        for pq, msg in polled:
            if not pq.dropped:
                self._consumed(pq, msg)
        await self.persist_offsets()

    # ------------------------------------------------------------------------- seek

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from queue offset ``offset``.

        Raises:
            ClientStateError: the queue is not assigned to this consumer.
            InvalidArgumentError: the offset is outside the queue's [min, max].
        """
        pq = self.process_queues.get(mq)
        if pq is None:
            raise ClientStateError(f"{mq} is not assigned to this consumer")
        low = await self._queue_bound(mq, low=True)
        high = await self._queue_bound(mq, low=False)
        if not low <= offset <= high:
            raise InvalidArgumentError(f"offset {offset} of {mq} is outside [{low}, {high}]")
        if pq.task is not None:
            pq.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pq.task
        pq.clear()
        pq.next_offset = offset
        self._buffer = deque(item for item in self._buffer if item[0] is not pq)
        self._polled = [item for item in self._polled if item[0] is not pq]
        assert self.offsets is not None
        self.offsets.update(mq, offset)
        self._pulls().pull(pq)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self._queue_bound(mq, low=True))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self._queue_bound(mq, low=False))

    async def _queue_bound(self, mq: MessageQueue, *, low: bool) -> int:
        code = RequestCode.GET_MIN_OFFSET if low else RequestCode.GET_MAX_OFFSET
        value = await self._queue_query(
            mq, code, QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        )
        if value < 0:
            raise ClientStateError(f"could not read the offsets of {mq}")
        return value

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer pulls from now."""
        return sorted(self.process_queues)
