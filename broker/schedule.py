"""``ScheduleService``: delivers delayed messages when their time comes.

RocketMQ counterpart: ``ScheduleMessageService`` (4.9). A message sent with a DELAY level is
stored in queue level-1 of ``SCHEDULE_TOPIC_XXXX`` with its deliver time as the consume-queue
tags code (the store does that). Here, every 100 ms, each level's queue is walked from its
saved offset: a due entry's record is read and stored again under its REAL_TOPIC / REAL_QID
with the property string unchanged (DELAY, REAL_TOPIC, REAL_QID stay, as in RocketMQ, whose
removal of DELAY touches only its in-memory copy), not waiting for a flush. The first entry
not yet due stops the walk of that level: later entries of a level are never due earlier.
A deliver time further ahead than now + the level's delay (the clock went back) counts as due.
A message the store refuses for good (an illegal real topic, a body over maxMessageSize) is
set aside (broker/parked.py: logged as ``scheduled_message_set_aside``, counted in
``set_aside``, left readable in its SCHEDULE_TOPIC_XXXX queue) and the level moves on; its
progress is written out at once, so a restart does not meet it again.

Progress per level persists to ``config/delayOffset.json`` (``{"offsetTable": {level:
offset}}``) every ``flushDelayOffsetInterval`` (10 s) and at shutdown; a crash redelivers at
most what was delivered since the last write, never loses a message. Runs on masters only.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import structlog

from broker.facets import DelayBroker
from broker.parked import Delivery, put_back
from broker.persist import read_json, try_write_json
from codec import (
    SCHEDULE_TOPIC,
)
from remoting.lifecycle import Periodic

log = structlog.get_logger(__name__)

FIRST_RUN_DELAY_S = 1.0  # DELAY_FOR_A_WHILE
PERIOD_S = 0.1  # DELAY_FOR_A_PERIOD
MAX_PER_ROUND = 1024  # entries of one level handled before the loop yields


class ScheduleService:
    def __init__(self, broker: DelayBroker, path: Path, flush_interval_s: float = 10.0) -> None:
        self.broker = broker
        self.path = path
        self.flush_interval_s = flush_interval_s
        self.levels_ms = broker.config.store.delay_levels_ms
        self.offsets: dict[int, int] = {}  # level -> next queue offset to look at
        self._dirty = False
        self._last_flush = 0.0
        self._loop = Periodic(
            "schedule",
            self._round,
            PERIOD_S,
            first_delay_s=FIRST_RUN_DELAY_S,
            failure_event="schedule_round_failed",
        )
        self.delivered = 0
        self.set_aside = 0
        self._flush_now = False  # something was set aside: persist progress past it now

    # -------------------------------------------------------------------- persistence

    def load(self) -> None:
        self.load_json(read_json(self.path))

    def load_json(self, doc: object) -> None:
        """Take the progress in a delayOffset.json document (read at start, or a master's
        copy on a slave); entries that make no sense are logged and skipped."""
        table: Any = doc.get("offsetTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            return
        for key, value in table.items():
            try:
                level, offset = int(key), int(value)
            except (TypeError, ValueError):
                log.warning("delay_offset_ignored", level=key, offset=value)
                continue
            if 1 <= level <= len(self.levels_ms) and offset >= 0:
                self.offsets[level] = offset

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}}

    def persist(self) -> None:
        if try_write_json(self.path, self.to_json()):
            self._dirty = False

    # ------------------------------------------------------------------------- loop

    def start(self) -> None:
        self._last_flush = time.monotonic()
        self._loop.start()

    async def shutdown(self) -> None:
        await self._loop.stop()
        self.persist()

    async def _round(self) -> None:
        try:
            await self.deliver_due()
        finally:
            now = time.monotonic()
            if self._dirty and (self._flush_now or now - self._last_flush >= self.flush_interval_s):
                self._last_flush = now
                self._flush_now = False
                doc = self.to_json()
                self._dirty = False
                if not await asyncio.to_thread(try_write_json, self.path, doc):
                    self._dirty = True  # a full disk, say: written again next time

    async def deliver_due(self) -> int:
        """One round over every level; how many messages were delivered."""
        delivered = 0
        for level in range(1, len(self.levels_ms) + 1):
            delivered += await self._deliver_level(level)
        return delivered

    async def _deliver_level(self, level: int) -> int:
        store = self.broker.store
        cq = store.queues.get(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return 0
        offset = max(self.offsets.get(level, 0), cq.min_offset)
        if offset >= cq.max_offset:
            return 0
        delay_ms = self.levels_ms[level - 1]
        now_ms = int(time.time() * 1000)
        delivered = 0
        for queue_offset, (commit_log_offset, _size, deliver_at) in list(
            cq.entries(offset, MAX_PER_ROUND)
        ):
            # A deliver time further ahead than the level's delay: the clock moved back.
            if now_ms < deliver_at <= now_ms + delay_ms:
                break
            delivery = await self._deliver(level, queue_offset, commit_log_offset)
            if not delivery.done:
                break  # the store refused for now: try this one again next round
            if delivery is Delivery.SET_ASIDE:
                self.set_aside += 1
                self._flush_now = True
            else:
                delivered += 1
            self.offsets[level] = queue_offset + 1
            self._dirty = True
        self.delivered += delivered
        return delivered

    async def _deliver(self, level: int, queue_offset: int, commit_log_offset: int) -> Delivery:
        delivery, _topic = await put_back(
            self.broker,
            commit_log_offset,
            what="scheduled",
            where={"level": level, "queue_id": level - 1, "queue_offset": queue_offset},
        )
        return delivery
