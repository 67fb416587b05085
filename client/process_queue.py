"""``ProcessQueue``: the messages pulled from one queue and not yet consumed.

RocketMQ counterpart: ``org.apache.rocketmq.client.impl.consumer.ProcessQueue`` — the
per-queue buffer between the pull service and the consume services, with the flags both
read (dropped, locked) and the bookkeeping of the lowest offset still in flight, which is
the only offset the push consumer ever commits.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from client.message import MessageView
from remoting.route import MessageQueue

# How long a broker queue lock counts as held after it was taken or renewed
# (rocketmq.client.rebalance.lockMaxLiveTime); the broker's own lease is 60 s.
LOCK_MAX_LIVE_S = 30.0


@dataclass(slots=True, eq=False)
class ProcessQueue:
    """Messages pulled from one queue and not yet consumed (RocketMQ ``ProcessQueue``)."""

    mq: MessageQueue
    next_offset: int
    messages: dict[int, MessageView] = field(default_factory=dict)  # queue offset → message
    size_bytes: int = 0
    dropped: bool = False
    locked: bool = False
    last_lock_at: float = 0.0
    task: asyncio.Task[None] | None = None  # the pull loop (client.pull_service)
    consuming: asyncio.Lock = field(default_factory=asyncio.Lock)  # orderly: one at a time
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # The broker id the last pull reply suggested (suggestWhichBrokerId): 0 is the master.
    pull_from_broker_id: int = 0
    last_pull_ms: int = 0  # for mqadmin consumerStatus
    last_consume_ms: int = 0  # the last message taken out, consumed or given up on
    # The offsets of ``messages`` in ascending order, plus ones already removed that have not
    # reached the front yet: the lowest in-flight offset without a scan (Java's TreeMap).
    order: deque[int] = field(default_factory=deque)

    def put(self, msgs: list[MessageView]) -> None:
        messages = self.messages
        order = self.order
        resort = False
        for m in msgs:
            offset = m.queue_offset
            if offset not in messages:
                if order and offset <= order[-1]:
                    resort = True  # the position moved back (offset moved, seek)
                messages[offset] = m
                order.append(offset)
                self.size_bytes += len(m.body)
        if resort:
            self.order = deque(sorted(messages))

    def first(self) -> int | None:
        """The lowest offset still in flight."""
        order = self.order
        messages = self.messages
        while order and order[0] not in messages:
            order.popleft()
        return order[0] if order else None

    def remove(self, msg: MessageView) -> int:
        """Drop a consumed message; the offset that is now safe to commit."""
        if self.messages.pop(msg.queue_offset, None) is not None:
            self.size_bytes -= len(msg.body)
            self.last_consume_ms = int(time.time() * 1000)
        first = self.first()
        return self.next_offset if first is None else first

    def clear(self) -> None:
        self.messages.clear()
        self.order.clear()
        self.size_bytes = 0

    def lock_live(self) -> bool:
        """Whether the broker lock of this queue is held and recent enough to trust
        (Java's ``locked && !isLockExpired()``)."""
        return self.locked and time.monotonic() - self.last_lock_at < LOCK_MAX_LIVE_S
