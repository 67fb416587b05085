"""Orderly pops: a FIFO group's queue is handed out one batch at a time, in order.

RocketMQ counterpart (5.x): ``PopMessageProcessor`` with ``order=true`` and
``ConsumerOrderInfoManager``; the receipt of an orderly pop names revive queue 999
(``KeyBuilder.POP_ORDER_REVIVE_QUEUE``), which is how an ack or a change of invisible time
knows it is one.

While a batch popped from a queue is neither wholly acked nor past its invisible time, the
queue is *blocked* for its group: no other pop gets anything from it, so the next message
of a message group is not handed out before the one ahead of it is done. The group's offset
moves only over acked messages (the first un-acked one is where it stands), so a batch not
acked in time is handed out again, in the same order, from there: nothing goes to a retry
topic, and the number of times each message was handed out is its delivery attempt (the
5.x PushConsumer forwards a message to the dead-letter queue past its max attempts). What
is tracked is in memory only: after a restart a queue is unblocked and its un-acked messages
come again from the committed offset, which keeps at-least-once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

ORDER_REVIVE_QID = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: marks an orderly pop's receipt

OrderKey = tuple[str, str, int]  # group, topic, queue


@dataclass(slots=True)
class OrderBatch:
    """The batch last popped from one queue for one group."""

    start: int
    offsets: list[int]
    visible_at: int  # when it is handed out again unless acked
    # The pop times of its receipts: the pop's, and one per change of invisible time.
    receipts: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)
    # How many times each offset (still in play) was handed out.
    attempts: dict[int, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return all(o in self.acked for o in self.offsets)

    def blocks(self, now_ms: int) -> bool:
        return not self.done and now_ms < self.visible_at

    def holds(self, offset: int, pop_time: int) -> bool:
        """A receipt (``offset`` popped at ``pop_time``) of this batch, not acked yet."""
        return pop_time in self.receipts and offset in self.offsets and offset not in self.acked


class OrderedPops:
    """The batches in flight of every FIFO group's queues."""

    def __init__(self) -> None:
        self.batches: dict[OrderKey, OrderBatch] = {}

    def blocked(self, key: OrderKey, now_ms: int) -> bool:
        batch = self.batches.get(key)
        return batch is not None and batch.blocks(now_ms)

    def skip_acked(self, key: OrderKey, offsets: list[int]) -> list[int]:
        """Of ``offsets`` read again after a batch expired, those not acked already."""
        batch = self.batches.get(key)
        if batch is None:
            return offsets
        return [o for o in offsets if o not in batch.acked]

    def handed_out(
        self, key: OrderKey, start: int, offsets: list[int], pop_time: int, invisible_time: int
    ) -> None:
        """Record a batch handed out (``offsets`` from ``start``), counting each attempt."""
        old = self.batches.get(key)
        attempts = {o: n for o, n in (old.attempts.items() if old else ()) if o >= start}
        acked = {o for o in (old.acked if old else ()) if o >= start}
        for o in offsets:
            attempts[o] = attempts.get(o, 0) + 1
        self.batches[key] = OrderBatch(
            start, offsets, pop_time + invisible_time, {pop_time}, acked, attempts
        )

    def attempts(self, key: OrderKey, offset: int) -> int:
        """How many times ``offset`` was handed out (1 for its first delivery)."""
        batch = self.batches.get(key)
        return batch.attempts.get(offset, 1) if batch is not None else 1

    def ack(self, key: OrderKey, offset: int, pop_time: int) -> int | None:
        """Mark ``offset`` (of a receipt popped at ``pop_time``) acked; the offset the group
        may commit now (the first one of the batch not acked; past the batch once all are),
        or None when the receipt is not one of the queue's current batch (acked already, or
        the batch was handed out again since)."""
        batch = self.batches.get(key)
        if batch is None or not batch.holds(offset, pop_time):
            return None
        batch.acked.add(offset)
        pending = [o for o in batch.offsets if o not in batch.acked]
        if pending:
            return min(pending)
        del self.batches[key]
        # Past the batch and past what an earlier batch had acked beyond it (skipped when
        # this one was read).
        return max(*batch.offsets, *batch.acked) + 1

    def change(self, key: OrderKey, offset: int, pop_time: int, invisible_time: int) -> int | None:
        """Keep the queue's batch invisible for ``invisible_time`` from now (the one message
        asked for holds the whole queue, as in 5.x); the pop time of the new receipt, or
        None when the receipt is not one of the current batch's."""
        batch = self.batches.get(key)
        if batch is None or not batch.holds(offset, pop_time):
            return None
        now = int(time.time() * 1000)
        while now in batch.receipts:
            now += 1  # a new receipt of its own, even within the same millisecond
        batch.receipts.add(now)
        batch.visible_at = now + invisible_time
        return now

    def forget_group(self, group: str) -> None:
        for key in [k for k in self.batches if k[0] == group]:
            del self.batches[key]
