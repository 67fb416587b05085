"""PushConsumer's concurrent consume service against a real name server and broker: the
consume timeout (a hung listener is cancelled and its message retried, async or sync), a
failed broadcast message dropped rather than retried, constructor validation of the new
intervals, ``ProcessQueue`` bookkeeping of the lowest in-flight offset, the bound on listener
calls in flight (``consume_concurrency``), and a shutdown that a hung listener cannot block.

Intervals are shortened through constructor arguments (``consume_timeout_s``,
``local_retry_delay_s``); nothing is mocked. The timeout tests make the broker refuse
CONSUMER_SEND_MSG_BACK (a read-only retry topic), so a timed-out message is retried locally by
the consumer, whose bookkeeping is what they check; test_send_back covers the broker's retry.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ConsumeResult,
    InvalidArgumentError,
    MessageModel,
    MessageView,
    Producer,
    PushConsumer,
)
from client.push_consumer import Listener, ProcessQueue
from remoting.route import MessageQueue
from tests.client.conftest import create_topic, max_offsets, refuse_send_back
from tests.client.test_push_consumer import committed, make_consumer, send_n
from tests.support import wait_until

TOPIC = "TopicConsumeService"
MQ0 = MessageQueue(TOPIC, "broker-a", 0)


def bodies(n: int, prefix: str = "m") -> set[bytes]:
    return {f"{prefix}-{i}".encode() for i in range(n)}


def local_offsets(directory: Path) -> list[tuple[str, int, int]]:
    """(topic, queue id, offset) of the one broadcasting offsets file under ``directory``."""
    (path,) = directory.rglob("offsets.json")
    table = json.loads(path.read_text())["offsetTable"]
    return [(str(e["topic"]), int(e["queueId"]), int(e["offset"])) for e in table]


# -------------------------------------------------------------------- consume timeout


async def test_hung_async_listener_is_cancelled_and_its_message_retried(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """A listener stuck past consume_timeout_s must not hold its message (and the committed
    offset) forever: it is cancelled, the message comes back with reconsume_times 1, the other
    workers keep consuming meanwhile, and the offset only moves past it once it succeeds."""
    await create_topic(broker, TOPIC, queues=1)
    await refuse_send_back(broker, "cg-timeout-async")
    await send_n(producer, TOPIC, 8)
    never = asyncio.Event()  # never set: the first delivery of m-3 hangs
    events: list[tuple[str, bytes, int]] = []  # (what, body, reconsume_times)
    hung_for: list[float] = []
    held_at_redelivery: list[int] = []

    async def handle(msg: MessageView) -> ConsumeResult:
        if msg.body == b"m-3" and msg.reconsume_times == 0:
            events.append(("hang", msg.body, 0))
            started = time.monotonic()
            try:
                await never.wait()
            except asyncio.CancelledError:
                hung_for.append(time.monotonic() - started)
                events.append(("cancelled", msg.body, 0))
                raise
        if msg.body == b"m-3":
            offsets = consumer.offsets
            assert offsets is not None
            held_at_redelivery.append(offsets.read(MQ0))
        events.append(("ok", msg.body, msg.reconsume_times))
        return ConsumeResult.SUCCESS

    consumer = make_consumer(
        namesrv,
        "cg-timeout-async",
        handle,
        topic=TOPIC,
        consume_timeout_s=0.3,
        local_retry_delay_s=0.05,
    )
    async with consumer:
        await wait_until(lambda: ("ok", b"m-3", 1) in events, "m-3 to be redelivered", 3.0)
        offsets = consumer.offsets
        assert offsets is not None
        await wait_until(lambda: offsets.read(MQ0) == 8, "the offset to pass m-3", 3.0)

    assert [e for e in events if e[0] == "cancelled"] == [("cancelled", b"m-3", 0)]
    assert [t for what, b, t in events if b == b"m-3" and what != "cancelled"] == [0, 1]
    assert len(hung_for) == 1
    assert 0.3 <= hung_for[0] < 1.0  # not before the timeout; soon after it
    # Every other message was consumed exactly once, while m-3 was still hanging.
    cancelled_at = events.index(("cancelled", b"m-3", 0))
    others = [b for what, b, _ in events[:cancelled_at] if what == "ok"]
    assert sorted(others) == sorted(bodies(8) - {b"m-3"})
    assert not [e for e in events[cancelled_at:] if e[0] == "ok" and e[1] != b"m-3"]
    # The retry came back while the offset was still held at m-3 (nothing skipped).
    assert held_at_redelivery == [3]
    assert committed(broker, "cg-timeout-async", TOPIC) == max_offsets(broker, TOPIC, [0])
    assert committed(broker, "cg-timeout-async", TOPIC) == {0: 8}


async def test_timed_out_worker_keeps_working(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """With one worker, the cancellation lands on the only consume task: it must survive it
    (treat it as a timeout, not die), or nothing after the hung message is ever consumed."""
    await create_topic(broker, TOPIC, queues=1)
    await refuse_send_back(broker, "cg-timeout-one")
    await send_n(producer, TOPIC, 5)
    never = asyncio.Event()
    calls: list[tuple[bytes, int]] = []

    async def handle(msg: MessageView) -> None:
        calls.append((msg.body, msg.reconsume_times))
        if msg.body == b"m-0" and msg.reconsume_times == 0:
            await never.wait()

    consumer = make_consumer(
        namesrv,
        "cg-timeout-one",
        handle,
        topic=TOPIC,
        consume_concurrency=1,
        consume_timeout_s=0.2,
        local_retry_delay_s=0.05,
    )
    async with consumer:
        await wait_until(lambda: len(calls) >= 6, "all five and the retry", 3.0)
        offsets = consumer.offsets
        assert offsets is not None
        await wait_until(lambda: offsets.read(MQ0) == 5, "the offset to pass m-0", 1.0)
        await asyncio.sleep(0.1)  # nothing more comes
    assert calls[0] == (b"m-0", 0)
    assert sorted(calls[1:]) == sorted([(b"m-0", 1)] + [(b, 0) for b in bodies(5) - {b"m-0"}])
    assert committed(broker, "cg-timeout-one", TOPIC) == {0: 5}


async def test_blocked_sync_listener_times_out_and_message_is_retried(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """A plain-function listener runs in a thread that cannot be cancelled, but its message
    must still be retried after consume_timeout_s, not only once the thread returns."""
    await create_topic(broker, TOPIC, queues=1)
    await refuse_send_back(broker, "cg-timeout-sync")
    await send_n(producer, TOPIC, 4)
    lock = threading.Lock()
    calls: list[tuple[bytes, int]] = []
    first_returned = threading.Event()
    retry_saw_first_returned: list[bool] = []

    def handle(msg: MessageView) -> ConsumeResult:
        with lock:
            calls.append((msg.body, msg.reconsume_times))
        if msg.body == b"m-1" and msg.reconsume_times == 0:
            time.sleep(0.6)  # three times the timeout
            first_returned.set()
        elif msg.body == b"m-1":
            retry_saw_first_returned.append(first_returned.is_set())
        return ConsumeResult.SUCCESS

    def count(entry: tuple[bytes, int]) -> int:
        with lock:
            return calls.count(entry)

    consumer = make_consumer(
        namesrv,
        "cg-timeout-sync",
        handle,
        topic=TOPIC,
        consume_timeout_s=0.2,
        local_retry_delay_s=0.05,
    )
    async with consumer:
        await wait_until(lambda: count((b"m-1", 1)) == 1, "m-1 to be retried", 3.0)
        offsets = consumer.offsets
        assert offsets is not None
        await wait_until(lambda: offsets.read(MQ0) == 4, "the offset to pass m-1", 3.0)
        # Let the abandoned thread finish inside the test rather than in loop teardown.
        await wait_until(first_returned.is_set, "the blocked call to return", 3.0)
        await asyncio.sleep(0.1)  # its late SUCCESS must not cause anything more
    assert retry_saw_first_returned == [False]  # retried while the first call still blocked
    with lock:
        assert Counter(calls) == {
            (b"m-0", 0): 1,
            (b"m-1", 0): 1,
            (b"m-1", 1): 1,
            (b"m-2", 0): 1,
            (b"m-3", 0): 1,
        }
    assert committed(broker, "cg-timeout-sync", TOPIC) == {0: 4}


# ----------------------------------------------------------------------- broadcasting


async def test_broadcast_failure_is_dropped_not_retried(
    namesrv: NameServer, broker: Broker, producer: Producer, tmp_path: Path
) -> None:
    """As in RocketMQ, a broadcast message whose listener fails is logged and dropped: no
    local retry, and the local offset moves past it (it would otherwise pin the offset)."""
    await create_topic(broker, TOPIC, queues=1)
    calls: list[tuple[bytes, int]] = []

    async def handle(msg: MessageView) -> ConsumeResult:
        calls.append((msg.body, msg.reconsume_times))
        return ConsumeResult.RECONSUME_LATER if msg.body == b"m-2" else ConsumeResult.SUCCESS

    consumer = make_consumer(
        namesrv,
        "cg-bcast-fail",
        handle,
        topic=TOPIC,
        message_model=MessageModel.BROADCASTING,
        offset_store_dir=tmp_path,
        local_retry_delay_s=0.05,
    )
    async with consumer:
        await send_n(producer, TOPIC, 6)  # after start: a new broadcast client starts at max
        offsets = consumer.offsets
        assert offsets is not None
        await wait_until(lambda: len(calls) >= 6, "six deliveries", 3.0)
        await wait_until(lambda: offsets.read(MQ0) == 6, "the local offset to pass m-2", 3.0)
        await asyncio.sleep(0.3)  # six local retry delays: a retry would have come by now
        assert offsets.read(MQ0) == 6
    assert Counter(b for b, _ in calls) == dict.fromkeys(bodies(6), 1)
    assert all(t == 0 for _, t in calls)
    # Kept in the local file (persisted at shutdown), never on the broker.
    assert local_offsets(tmp_path) == [(TOPIC, 0, 6)]
    assert committed(broker, "cg-bcast-fail", TOPIC) == {}


# ------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "name", ["consume_timeout_s", "suspend_current_queue_s", "pull_error_delay_s"]
)
@pytest.mark.parametrize("value", [0, 0.0, -1.0, math.nan])
def test_intervals_must_be_positive(name: str, value: float) -> None:
    """Zero would spin (the watchdog sleeps timeout / 2) and negative makes no sense; say
    which argument is wrong at construction, not as a busy loop after start()."""
    with pytest.raises(InvalidArgumentError, match=name):
        PushConsumer("cg-valid", "127.0.0.1:9876", **{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -3])
def test_consume_concurrency_must_be_at_least_one(value: int) -> None:
    """No worker at all would accept messages and never consume them."""
    with pytest.raises(InvalidArgumentError, match="consume_concurrency"):
        PushConsumer("cg-valid", "127.0.0.1:9876", consume_concurrency=value)


def test_small_positive_values_accepted() -> None:
    """The checks reject only what is wrong: tiny positive intervals and one worker are fine."""
    c = PushConsumer(
        "cg-valid",
        "127.0.0.1:9876",
        consume_concurrency=1,
        consume_timeout_s=0.001,
        suspend_current_queue_s=0.001,
        pull_error_delay_s=0.001,
    )
    assert (c.consume_concurrency, c.consume_timeout_s) == (1, 0.001)
    assert (c.suspend_current_queue_s, c.pull_error_delay_s) == (0.001, 0.001)


# ----------------------------------------------------------------------- ProcessQueue


def view(offset: int, body: bytes = b"xyz", mq: MessageQueue = MQ0) -> MessageView:
    return MessageView(
        topic=mq.topic,
        body=body,
        tags=None,
        keys=[],
        properties={},
        msg_id=f"ID{offset:08d}",
        offset_msg_id=f"OFF{offset:08d}",
        queue_id=mq.queue_id,
        queue_offset=offset,
        commit_log_offset=offset * 100,
        born_timestamp=0,
        store_timestamp=0,
        born_host="127.0.0.1:1",
        store_host="127.0.0.1:2",
        reconsume_times=0,
        sys_flag=0,
        flag=0,
        broker_name=mq.broker_name,
        body_crc=0,
    )


def test_process_queue_safe_offset_is_lowest_in_flight() -> None:
    """Committing only the lowest offset still in flight is what keeps a crash from
    skipping a message that finished after its successors."""
    pq = ProcessQueue(MQ0, next_offset=8)
    assert pq.first() is None
    pq.put([view(5), view(6), view(7)])
    assert pq.first() == 5
    assert pq.size_bytes == 9
    assert pq.remove(view(6)) == 5  # 5 still in flight
    assert pq.first() == 5
    assert pq.remove(view(5)) == 7
    assert pq.first() == 7
    assert pq.remove(view(7)) == 8  # empty: everything pulled so far is done
    assert pq.first() is None
    assert pq.size_bytes == 0
    assert pq.remove(view(7)) == 8  # removing twice changes nothing
    assert pq.size_bytes == 0


def test_process_queue_duplicate_put_counted_once() -> None:
    """A message pulled again (e.g. the same batch twice) must not be counted twice in the
    flow-control size, or the queue would throttle itself forever."""
    pq = ProcessQueue(MQ0, next_offset=3)
    pq.put([view(1, b"aa"), view(2, b"bbb")])
    pq.put([view(2, b"bbb")])
    assert len(pq.messages) == 2
    assert pq.size_bytes == 5
    assert pq.remove(view(1, b"aa")) == 2
    assert pq.remove(view(2, b"bbb")) == 3
    assert pq.size_bytes == 0


def test_process_queue_offset_moved_back() -> None:
    """When the pull position moves back (offset moved, seek) lower offsets arrive after
    higher ones; first() must still be the lowest, including past removed entries."""
    pq = ProcessQueue(MQ0, next_offset=20)
    pq.put([view(10), view(11), view(12)])
    assert pq.remove(view(11)) == 10  # 11 removed but not yet at the front
    pq.put([view(3), view(4)])
    assert pq.first() == 3
    assert pq.remove(view(3)) == 4
    assert pq.remove(view(4)) == 10
    pq.put([view(11)])  # the removed one comes back: it is in flight again
    assert pq.remove(view(10)) == 11
    pq.put([view(13), view(2)])  # mixed in one batch
    assert pq.first() == 2
    assert pq.remove(view(2)) == 11
    assert pq.remove(view(11)) == 12
    assert pq.remove(view(12)) == 13
    assert pq.remove(view(13)) == 20
    assert pq.first() is None


def test_process_queue_clear() -> None:
    pq = ProcessQueue(MQ0, next_offset=9)
    pq.put([view(5), view(6), view(7)])
    pq.remove(view(6))
    pq.clear()
    assert pq.messages == {}
    assert pq.size_bytes == 0
    assert pq.first() is None
    assert pq.remove(view(5)) == 9
    # Usable again afterwards, from a lower position too.
    pq.put([view(2)])
    assert pq.first() == 2
    assert pq.size_bytes == 3


# ------------------------------------------------------------------ concurrency bound


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_consume_concurrency_bounds_calls_in_flight(
    namesrv: NameServer, broker: Broker, producer: Producer, kind: str
) -> None:
    """consume_concurrency is the number of listener calls running at once: with 30
    messages waiting, exactly that many run together, never more."""
    await create_topic(broker, TOPIC, queues=1)
    await send_n(producer, TOPIC, 30)  # all waiting before the consumer starts
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    seen: list[bytes] = []

    def enter(msg: MessageView) -> None:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            seen.append(msg.body)

    def leave() -> None:
        with lock:
            state["now"] -= 1

    async def handle_async(msg: MessageView) -> None:
        enter(msg)
        try:
            await asyncio.sleep(0.02)
        finally:
            leave()

    def handle_sync(msg: MessageView) -> None:
        enter(msg)
        try:
            time.sleep(0.02)
        finally:
            leave()

    listener: Listener = handle_async if kind == "async" else handle_sync
    consumer = make_consumer(namesrv, f"cg-bound-{kind}", listener, TOPIC, consume_concurrency=3)
    async with consumer:
        await wait_until(lambda: len(seen) >= 30, "thirty deliveries", 3.0)
        offsets = consumer.offsets
        assert offsets is not None
        # The listener returning is not the end: wait for the results to be settled.
        await wait_until(lambda: offsets.read(MQ0) == 30, "the offset to reach 30", 1.0)
    assert sorted(seen) == sorted(bodies(30))
    assert state["peak"] == 3
    assert state["now"] == 0
    assert committed(broker, f"cg-bound-{kind}", TOPIC) == {0: 30}


# ------------------------------------------------------------------------- shutdown


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_shutdown_not_blocked_by_hung_listener(
    namesrv: NameServer, broker: Broker, producer: Producer, kind: str
) -> None:
    """shutdown(grace_s) waits that long for running listeners, then cancels them and goes
    on; the hung message stays uncommitted so the next consumer gets it again."""
    await create_topic(broker, TOPIC, queues=1)
    await send_n(producer, TOPIC, 3)
    never = asyncio.Event()  # set only in the clean-up
    release = threading.Event()  # frees the sync listener's thread at the end
    hanging = threading.Event()
    cancelled: list[bytes] = []
    done: list[bytes] = []

    async def handle_async(msg: MessageView) -> None:
        if msg.body == b"m-1":
            hanging.set()
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(msg.body)
                raise
        done.append(msg.body)

    def handle_sync(msg: MessageView) -> None:
        if msg.body == b"m-1":
            hanging.set()
            release.wait(5.0)
            return
        done.append(msg.body)

    listener: Listener = handle_async if kind == "async" else handle_sync
    consumer = make_consumer(namesrv, f"cg-stop-{kind}", listener, TOPIC)
    await consumer.start()
    try:
        await wait_until(lambda: hanging.is_set() and len(done) == 2, "m-1 to hang", 3.0)
        started = time.monotonic()
        try:
            async with asyncio.timeout(3.0):
                await consumer.shutdown(grace_s=0.2)
        except TimeoutError:
            pytest.fail("shutdown(grace_s=0.2) still running after 3 s")
        took = time.monotonic() - started
    finally:
        never.set()  # a listener still running finishes, so this clean-up cannot hang
        release.set()
        await consumer.shutdown()
    assert 0.15 <= took < 3.0  # waited the grace period, not for the listener
    assert sorted(done) == [b"m-0", b"m-2"]
    assert cancelled == ([b"m-1"] if kind == "async" else [])
    assert committed(broker, f"cg-stop-{kind}", TOPIC) == {0: 1}  # held at the hung one


async def test_messages_finished_within_the_shutdown_grace_are_committed(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """A listener still running at shutdown that finishes inside ``grace_s`` counts: its
    offset is committed, so the next consumer does not get it again."""
    await create_topic(broker, TOPIC, queues=1)
    await send_n(producer, TOPIC, 3)
    slow_started = asyncio.Event()

    async def handle(msg: MessageView) -> None:
        if msg.body == b"m-1":
            slow_started.set()
            await asyncio.sleep(0.3)

    consumer = make_consumer(namesrv, "cg-grace", handle, TOPIC)
    await consumer.start()
    async with asyncio.timeout(5):
        await slow_started.wait()
    await asyncio.sleep(0.05)
    await consumer.shutdown(grace_s=2.0)
    assert committed(broker, "cg-grace", TOPIC) == {0: 3}
