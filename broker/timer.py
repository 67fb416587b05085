"""Timer messages: delivery at an arbitrary time, on a persistent timing wheel.

RocketMQ counterpart: RocketMQ 5's ``TimerMessageStore`` with its ``TimerLog``, ``TimerWheel``
and ``TimerCheckpoint`` (4.x has only delay levels); the trigger properties are 5.x's
TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS and Aliyun's ``__STARTDELIVERTIME`` (which
ali-ons sets).

A timer message is stored in the commit log under ``rmq_sys_wheel_timer`` (queue 0), its
target in REAL_TOPIC / REAL_QID and its deliver time in TIMER_OUT_MS. This service then:

* enqueues: reads that topic's consume queue from a checkpointed offset and appends, per
  message, one fixed 40-byte entry to the *timer log* (``timerlog/``, mmap'd segments):
  visit time, deliver time, commit-log offset and size, and the position of the previous
  entry of the same wheel slot;
* keeps the *wheel*: ``timerRollWindowSlots`` slots of ``timerPrecisionMs`` each, holding the
  newest log position of the slot's chain and a count. The wheel is three fixed arrays; what a
  pending timer costs in memory does not grow with the number of timers (the entries live in
  the log);
* dequeues: a slot is processed once all of it is due (now ≥ slot start + precision, so never
  early and at most one precision late); each entry's message is stored again for its real
  topic and queue, with the trigger properties and REAL_TOPIC / REAL_QID removed. An entry
  further ahead than the wheel's window is *rolled*: appended again for a later slot;
* checkpoints ``config/timercheck`` (enqueue offset, the next slot to process) after every
  slot it delivered and every ``timerFlushIntervalMs``, after flushing the log.

An entry delivered, or rolled (after its copy is flushed), is marked done in place; so is
one whose message the store refuses for good (an illegal real topic, a body over
maxMessageSize): it is *set aside* (broker/parked.py: logged as ``timer_message_set_aside``,
counted in ``set_aside``, left readable under ``rmq_sys_wheel_timer``), and the slot and the
wheel move on instead of waiting on it.

Every start (after a crash too) finds where the log really ends, rebuilds the wheel from the
entries not done, and enqueues again from the checkpointed consume-queue offset, skipping
messages the log already holds: no timer is lost, and at most the slot being delivered when
the process died is delivered again (in practice the one message between its store and its
mark). Old log segments are deleted once every entry in them is behind the wheel.
"""

from __future__ import annotations

import asyncio
import struct
import time
from array import array
from pathlib import Path
from typing import Any, Final

import structlog

from broker.facets import DelayBroker
from broker.parked import Delivery, put_back
from broker.persist import read_json, try_write_json
from broker.topics import TIMER_TOPIC
from codec import (
    PROPERTY_START_DELIVER_TIME,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    RecordError,
    decode_properties,
    inner_from_record,
)
from remoting.lifecycle import Periodic
from store.errors import DiskFullError
from store.mapped_file import MappedFileQueue

log = structlog.get_logger(__name__)

TRIGGERS: Final = (
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_START_DELIVER_TIME,
)

_ENTRY = struct.Struct(">qqqqii")  # visit ms, deliver ms, commit-log offset, prev, size, magic
ENTRY_BYTES: Final = _ENTRY.size
_VISIT = struct.Struct(">q")  # at 0
_PREV = struct.Struct(">q")
_PREV_AT: Final = 24
_DONE: Final = -1  # the visit time of an entry delivered or rolled
_MAGIC: Final = 0x54494D52  # "TIMR"
_NO_POS: Final = -1
ENQUEUE_PER_ROUND: Final = 4096
YIELD_EVERY: Final = 512


class TimerPropertyError(ValueError):
    """A trigger property that is not a usable time."""


def has_trigger(props: dict[str, str]) -> bool:
    """Whether a message waits in the timer wheel: it names a time, and has not been
    through the wheel already (TIMER_OUT_MS, which a delivered timer message keeps, as
    5.x's ``HookUtils.checkIfTimerMessage`` double-checks: a consumer's send-back of one
    is not timed again)."""
    # The trigger first: every send asks, and almost none has one.
    return any(key in props for key in TRIGGERS) and PROPERTY_TIMER_OUT_MS not in props


def deliver_time_ms(props: dict[str, str], now_ms: int, max_delay_ms: int) -> int | None:
    """When a message with these properties is due (epoch ms); None without a trigger.

    TIMER_DELIVER_MS and ``__STARTDELIVERTIME`` are absolute, TIMER_DELAY_SEC and
    TIMER_DELAY_MS relative to ``now_ms``; the first present in that order wins, as in 5.x.

    Raises:
        TimerPropertyError: not a non-negative integer, or further ahead than the maximum.
    """
    for key in TRIGGERS:
        text = props.get(key)
        if text is None:
            continue
        if not text.strip().isdigit():
            raise TimerPropertyError(f"{key}={text!r} is not a non-negative integer")
        value = int(text)
        if key == PROPERTY_TIMER_DELAY_SEC:
            deliver = now_ms + value * 1000
        elif key == PROPERTY_TIMER_DELAY_MS:
            deliver = now_ms + value
        else:
            deliver = value
        if deliver - now_ms > max_delay_ms:
            raise TimerPropertyError(
                f"{key}={text} is more than timerMaxDelaySec ({max_delay_ms // 1000} s) ahead"
            )
        return deliver
    return None


class TimerService:
    def __init__(self, broker: DelayBroker, root: Path) -> None:
        self.broker = broker
        config = broker.config
        self.enabled = config.timer_wheel_enable
        self.precision_ms = config.timer_precision_ms
        self.slots = config.timer_roll_window_slots
        self.max_delay_ms = config.timer_max_delay_sec * 1000
        self.flush_interval_s = config.timer_flush_interval_ms / 1000
        self.check_path = root / "config" / "timercheck"
        # Entries never straddle two segments: a segment holds a whole number of them.
        segment = max(ENTRY_BYTES, config.mapped_file_size_timer_log // ENTRY_BYTES * ENTRY_BYTES)
        self.log = MappedFileQueue(root / "timerlog", segment)
        self.head = array("q", [_NO_POS]) * self.slots  # newest entry of each slot's chain
        self.count = array("q", [0]) * self.slots
        self.slot_time = array("q", [-1]) * self.slots
        self.enqueue_offset = 0
        self.enqueued_cl = -1  # newest commit-log offset entered into the log
        self.dequeue_ms = 0  # start of the next slot to process
        self.pending = 0  # timers in the wheel
        self.delivered = 0
        self.rolled = 0
        self.set_aside = 0
        self._segment_visit: dict[int, int] = {}  # segment start -> latest visit time in it
        self._dirty = False
        self._last_checkpoint = 0.0
        self._disk_full_since = 0.0  # time.time() the timer log first found no room, or 0
        self._loop = Periodic(
            "timer-wheel",
            self._round,
            min(0.1, self.precision_ms / 4000),
            first_delay_s=0.0,
            failure_event="timer_round_failed",
        )

    # ------------------------------------------------------------------ time arithmetic

    def _slot_start(self, ms: int) -> int:
        return ms - ms % self.precision_ms

    def _visit_for(self, deliver_ms: int, floor_ms: int) -> int:
        """The slot an entry is linked into: its own, or the last of the window (it rolls
        from there), never one before ``floor_ms``. The window starts at the slot being
        processed, so a rolled entry never lands in the slot it comes from."""
        latest = self.dequeue_ms + (self.slots - 1) * self.precision_ms
        return min(max(self._slot_start(deliver_ms), floor_ms), latest)

    # ----------------------------------------------------------------------- the log

    def _link(self, visit: int, pos: int) -> int:
        """Make ``pos`` the newest entry of ``visit``'s slot; returns the previous newest."""
        index = (visit // self.precision_ms) % self.slots
        if self.slot_time[index] != visit:
            # The slot last held an earlier turn of the wheel, processed since.
            self.slot_time[index] = visit
            self.head[index] = _NO_POS
            self.count[index] = 0
        prev = self.head[index]
        self.head[index] = pos
        self.count[index] += 1
        self.pending += 1
        return prev

    def _append(self, deliver_ms: int, commit_log_offset: int, size: int, floor_ms: int) -> None:
        """Append an entry and link it into its slot.

        Raises:
            DiskFullError: no disk blocks for it (the log is sparse, see
                store/mapped_file.py); raised before the wheel or the log changed.
        """
        visit = self._visit_for(deliver_ms, floor_ms)
        mf = self.log.last_writable()
        mf.reserve(mf.wrote_position + ENTRY_BYTES)
        pos = mf.start_offset + mf.wrote_position
        prev = self._link(visit, pos)
        mf.append(_ENTRY.pack(visit, deliver_ms, commit_log_offset, prev, size, _MAGIC))
        if self._disk_full_since:
            log.info(
                "timer_log_writable_again", full_for_s=round(time.time() - self._disk_full_since, 1)
            )
            self._disk_full_since = 0.0
        start = mf.start_offset
        if self._segment_visit.get(start, -1) < visit:
            self._segment_visit[start] = visit
        self._dirty = True

    def _disk_full(self, exc: DiskFullError) -> None:
        """The timer log found no room: logged once until an append succeeds again."""
        if not self._disk_full_since:
            self._disk_full_since = time.time()
            log.error("timer_log_disk_full", error=str(exc))

    def _read(self, pos: int) -> tuple[int, int, int, int, int] | None:
        mf = self.log.find(pos)
        if mf is None or pos - mf.start_offset + ENTRY_BYTES > mf.wrote_position:
            return None
        visit, deliver, offset, prev, size, magic = _ENTRY.unpack_from(mf.mm, pos - mf.start_offset)
        if magic != _MAGIC:
            return None
        return visit, deliver, offset, prev, size

    def _set_prev(self, pos: int, prev: int) -> None:
        mf = self.log.find(pos)
        if mf is not None:
            _PREV.pack_into(mf.mm, pos - mf.start_offset + _PREV_AT, prev)

    def _mark_done(self, pos: int) -> None:
        """An entry delivered or rolled: a rebuild after a crash skips it."""
        mf = self.log.find(pos)
        if mf is not None:
            _VISIT.pack_into(mf.mm, pos - mf.start_offset, _DONE)

    def _flush_log(self) -> None:
        while self.log.flushed_where < self.log.max_offset:
            before = self.log.flushed_where
            self.log.flush()
            if self.log.flushed_where == before:
                break

    def _rebuild(self) -> None:
        """Find where the log really ends and link every entry not done into the wheel."""
        self.head = array("q", [_NO_POS]) * self.slots
        self.count = array("q", [0]) * self.slots
        self.slot_time = array("q", [-1]) * self.slots
        self.pending = 0
        self._segment_visit = {}
        for n, mf in enumerate(self.log.files):
            last = n == len(self.log.files) - 1
            top = -1
            valid = 0
            for i, (visit, deliver, offset, _prev, size, magic) in enumerate(
                _ENTRY.iter_unpack(mf.view[: mf.file_bytes - mf.file_bytes % ENTRY_BYTES])
            ):
                if magic != _MAGIC:
                    if last:
                        break  # the end of what was appended (or a torn last entry)
                    continue
                valid = (i + 1) * ENTRY_BYTES
                self.enqueued_cl = max(self.enqueued_cl, offset)
                if visit == _DONE:
                    continue
                # Entries of an already passed slot (or of another precision or window)
                # are put where the wheel is now: due at once, or at the window's end.
                due = deliver if visit >= self.dequeue_ms else 0
                slot = self._visit_for(due, self.dequeue_ms)
                pos = mf.start_offset + i * ENTRY_BYTES
                prev = self._link(slot, pos)
                _ENTRY.pack_into(mf.mm, i * ENTRY_BYTES, slot, deliver, offset, prev, size, _MAGIC)
                top = max(top, slot)
            if last:
                mf.truncate_from(valid)
            self._segment_visit[mf.start_offset] = top

    # -------------------------------------------------------------------- persistence

    def load(self) -> None:
        doc: Any = read_json(self.check_path)
        if not isinstance(doc, dict):
            doc = {}
        now = int(time.time() * 1000)
        self.enqueue_offset = _nonneg(doc.get("enqueueOffset"), 0)
        self.enqueued_cl = _nonneg(doc.get("enqueuedCommitLogOffset"), 0) - 1
        self.dequeue_ms = self._slot_start(_nonneg(doc.get("dequeueMs"), 0) or now)
        self.log.load()
        self._rebuild()
        log.info(
            "timer_loaded",
            pending=self.pending,
            enqueue_offset=self.enqueue_offset,
            dequeue_ms=self.dequeue_ms,
        )

    def checkpoint(self) -> None:
        """Flush the timer log, then record how far the enqueue and the wheel got."""
        self._flush_log()
        written = try_write_json(
            self.check_path,
            {
                "enqueueOffset": self.enqueue_offset,
                "enqueuedCommitLogOffset": self.enqueued_cl + 1,
                "dequeueMs": self.dequeue_ms,
                "precisionMs": self.precision_ms,
                "slots": self.slots,
            },
        )
        # Not written (a full disk): still dirty, tried again after the flush interval. The
        # checkpoint only ever lags: a start from an older one enqueues again and skips what
        # the log holds.
        self._dirty = not written
        self._last_checkpoint = time.monotonic()

    # -------------------------------------------------------------------------- loop

    def start(self) -> None:
        if self.enabled:
            self._loop.start()

    async def shutdown(self) -> None:
        await self._loop.stop()
        self.checkpoint()
        self.log.close()

    async def _round(self) -> None:
        await self.enqueue()
        await self.dequeue(int(time.time() * 1000))
        since = time.monotonic() - self._last_checkpoint
        if self._dirty and since >= self.flush_interval_s:
            self.checkpoint()
        self._delete_old_segments()

    async def enqueue(self) -> int:
        """New timer messages from the consume queue into the wheel."""
        store = self.broker.store
        cq = store.queues.get(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        start = max(self.enqueue_offset, cq.min_offset)
        done = 0
        for queue_offset, (commit_log_offset, size, _tags) in list(
            cq.entries(start, ENQUEUE_PER_ROUND)
        ):
            if commit_log_offset <= self.enqueued_cl:
                self.enqueue_offset = queue_offset + 1
                self._dirty = True
                continue  # in the log already (enqueued after the last checkpoint)
            deliver = self._deliver_time_of(commit_log_offset)
            if deliver is None:
                log.warning("timer_message_unreadable", queue_offset=queue_offset)
            else:
                try:
                    self._append(deliver, commit_log_offset, size, self.dequeue_ms)
                except DiskFullError as exc:
                    # Before the offset moves past this message: a later round retries it.
                    self._disk_full(exc)
                    break
            self.enqueue_offset = queue_offset + 1
            self._dirty = True
            self.enqueued_cl = commit_log_offset
            done += 1
            if done % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return done

    def _deliver_time_of(self, commit_log_offset: int) -> int | None:
        record = self.broker.store.look_message_by_offset(commit_log_offset)
        if record is None:
            return None
        try:
            info, _inner = inner_from_record(record)
            return int(decode_properties(info.properties)[PROPERTY_TIMER_OUT_MS])
        except (RecordError, KeyError, ValueError):
            return None

    async def dequeue(self, now_ms: int) -> int:
        """Process every slot wholly due by ``now_ms``; how many messages were delivered."""
        delivered = 0
        while self.dequeue_ms + self.precision_ms <= now_ms:
            slot = self.dequeue_ms
            index = (slot // self.precision_ms) % self.slots
            if self.slot_time[index] == slot and self.count[index] > 0:
                done = await self._process_slot(index, slot)
                if done is None:
                    return delivered  # the store refused: the rest of it next round
                delivered += done
                self.dequeue_ms = slot + self.precision_ms
                self.checkpoint()
            else:
                self.dequeue_ms = slot + self.precision_ms
                self._dirty = True
                if (self.dequeue_ms // self.precision_ms) % 4096 == 0:
                    await asyncio.sleep(0)  # catching up after a long stop
        return delivered

    async def _process_slot(self, index: int, slot: int) -> int | None:
        newest_first = array("q")
        pos = self.head[index]
        while pos != _NO_POS and len(newest_first) < self.count[index]:
            entry = self._read(pos)
            if entry is None:
                break
            newest_first.append(pos)
            pos = entry[3]
        order = newest_first[::-1]  # deliver in the order the timers were set
        due_before = slot + self.precision_ms
        delivered = 0
        rolled: list[int] = []
        stopped = len(order)
        for n, pos in enumerate(order):
            entry = self._read(pos)
            if entry is None or entry[0] == _DONE:
                continue
            _visit, deliver, offset, _prev, size = entry
            if deliver >= due_before:
                try:
                    self._append(deliver, offset, size, due_before)  # dequeue_ms is still slot
                except DiskFullError as exc:
                    # No room to roll it: keep it and the rest in the slot for a later round.
                    self._disk_full(exc)
                    stopped = n
                    break
                rolled.append(pos)
                self.rolled += 1
            elif (delivery := await self._deliver(offset, deliver)).done:
                self._mark_done(pos)
                if delivery is Delivery.SET_ASIDE:
                    self.set_aside += 1
                else:
                    delivered += 1
            else:
                stopped = n
                break
            if n % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        if rolled:
            # The copies must be durable before the originals are marked done.
            self._flush_log()
            for pos in rolled:
                self._mark_done(pos)
        self.delivered += delivered
        self.pending -= stopped
        if stopped < len(order):
            # Keep what is left in the slot, linked again, for the next round.
            self.head[index] = _NO_POS
            self.count[index] = 0
            for pos in order[stopped:]:
                self._set_prev(pos, self.head[index])
                self.head[index] = pos
                self.count[index] += 1
            return None
        self.head[index] = _NO_POS
        self.count[index] = 0
        self.slot_time[index] = -1
        return delivered

    async def _deliver(self, commit_log_offset: int, deliver_ms: int) -> Delivery:
        # As 5.x's convertMessage: REAL_TOPIC / REAL_QID go (put_back), the TIMER_*
        # properties stay (a 5.x client reads the delivery time from TIMER_DELIVER_MS; a
        # 4.x one ignores them) with TIMER_OUT_MS to say when it was due. Aliyun's
        # __STARTDELIVERTIME, which 5.x does not know, goes.
        delivery, topic = await put_back(
            self.broker,
            commit_log_offset,
            what="timer",
            strip=(PROPERTY_START_DELIVER_TIME,),
            where={"deliver_ms": deliver_ms},
        )
        lateness = int(time.time() * 1000) - deliver_ms
        if delivery is Delivery.DELIVERED and lateness > 2 * self.precision_ms:
            log.info("timer_delivered_late", topic=topic, late_ms=lateness)
        return delivery

    def _delete_old_segments(self) -> None:
        """Drop log segments whose every entry the wheel has passed."""
        files = self.log.files
        count = 0
        while count < len(files) - 1:
            mf = files[count]
            if not mf.is_full or self._segment_visit.get(mf.start_offset, 0) >= self.dequeue_ms:
                break
            count += 1
        if count:
            for mf in files[:count]:
                self._segment_visit.pop(mf.start_offset, None)
            self.log.delete_first(count)
            log.info("timer_log_segments_deleted", count=count)


def _nonneg(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default
