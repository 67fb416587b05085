"""Auto-batching: sends that overlap are coalesced into SEND_BATCH_MESSAGE requests, and
every caller still gets the result of its own message.

Against a real name server and broker; what the broker stored is read back with raw pulls,
so a message that landed somewhere other than its result says fails the test.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Message, Producer, SendResult, SendStatus
from client.producer import select_by_hash
from codec import COMPRESSED_FLAG
from tests.client.conftest import create_topic, max_offsets, stored
from tests.support import BrokerFactory, wait_until

TOPIC = "AutoBatch"
# A loaded machine can keep a send waiting in the broker's send lane longer than the default
# 200 ms, which answers SYSTEM_BUSY and moves the retried request to another queue: the
# spread tests give the lane 30 s so what they measure is the producer's choice of queues.
PATIENT_SEND_QUEUE_MS = 30_000


async def _send_all(producer: Producer, msgs: list[Message]) -> list[SendResult]:
    return await asyncio.gather(*(producer.send(m) for m in msgs))


def _send_requests(broker: Broker) -> int:
    """Send requests the broker stored (one put-latency sample per request, whatever the
    number of messages it carried)."""
    return sum(broker.stats.put_latency_counts)


def _per_queue(results: list[SendResult]) -> Counter[int]:
    return Counter(r.message_queue.queue_id for r in results)


def _assert_round_robin(counts: Counter[int], total: int, queues: int) -> None:
    """What one-by-one sends give: round robin hands each of ``queues`` queues the floor or
    the ceiling of ``total / queues`` messages, wherever it starts."""
    assert sum(counts.values()) == total
    assert set(counts) == set(range(queues)), counts
    low, high = total // queues, -(-total // queues)
    assert all(low <= n <= high for n in counts.values()), counts


async def test_overlapping_sends_are_coalesced_and_each_result_is_its_own(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=4)
    msgs = [
        Message(
            TOPIC,
            f"body-{i}".encode(),
            tags=f"T{i % 3}",
            keys=[f"k{i}"],
            properties={"n": str(i)} if i % 5 == 0 else {},
            flag=i,
        )
        for i in range(300)
    ]
    async with Producer("pg-auto", namesrv.address) as producer:
        results = await _send_all(producer, msgs)
        assert producer.coalesced_requests >= 1
        assert producer.coalesced_messages > producer.coalesced_requests
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 300
    assert len({r.offset_msg_id for r in results}) == 300
    placed = Counter((r.message_queue.queue_id, r.queue_offset) for r in results)
    assert max(placed.values()) == 1, "two results claim one queue slot"

    by_slot = {(m.queue_id, m.queue_offset): m for m in await stored(broker, TOPIC)}
    assert len(by_slot) == 300
    for i, (msg, result) in enumerate(zip(msgs, results, strict=True)):
        got = by_slot[(result.message_queue.queue_id, result.queue_offset)]
        assert got.body == msg.body
        assert got.msg_id == result.msg_id
        assert got.offset_msg_id == result.offset_msg_id
        assert got.tags == f"T{i % 3}" and got.keys == [f"k{i}"] and got.flag == i
        assert got.properties.get("n") == (str(i) if i % 5 == 0 else None)


async def test_awaited_one_by_one_sends_are_never_coalesced(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=4)
    async with Producer("pg-serial", namesrv.address) as producer:
        results = [await producer.send(Message(TOPIC, b"x")) for _ in range(20)]
        assert producer.coalesced_requests == 0
    # Round robin over the queues, as without auto-batching.
    assert Counter(r.message_queue.queue_id for r in results) == {0: 5, 1: 5, 2: 5, 3: 5}


async def test_auto_batch_off_sends_each_message_alone(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=4)
    async with Producer("pg-off", namesrv.address, auto_batch=False) as producer:
        results = await _send_all(producer, [Message(TOPIC, b"x") for _ in range(64)])
        assert producer.coalesced_requests == 0
    assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}  # spread, not one batch


async def test_delayed_and_compressed_messages_go_alone_among_coalesced_ones(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=4)
    big = os.urandom(2048) * 4  # over the 4 KiB compression threshold
    msgs = [Message(TOPIC, f"small-{i}".encode()) for i in range(100)]
    msgs[10] = Message(TOPIC, big)
    msgs[20] = Message(TOPIC, b"later", delay_level=1)
    async with Producer("pg-mixed", namesrv.address) as producer:
        results = await _send_all(producer, msgs)
        assert producer.coalesced_requests >= 1
    assert all(r.status is SendStatus.SEND_OK for r in results)
    by_slot = {(m.queue_id, m.queue_offset): m for m in await stored(broker, TOPIC)}
    big_stored = by_slot[(results[10].message_queue.queue_id, results[10].queue_offset)]
    assert big_stored.body == big and big_stored.sys_flag & COMPRESSED_FLAG
    # The delayed one waits in SCHEDULE_TOPIC_XXXX first, then arrives in the topic.
    await wait_until(
        lambda: sum(max_offsets(broker, TOPIC, range(4)).values()) == 100, "the delayed message"
    )
    delayed = [m for m in await stored(broker, TOPIC) if m.body == b"later"]
    assert delayed[0].properties.get("DELAY") == "1"
    assert delayed[0].properties.get("REAL_TOPIC") == TOPIC


async def test_a_batch_the_broker_refuses_falls_back_to_single_sends(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """A broker whose maxMessageSize (8 KiB here) is below the coalesced request: every
    message, fine on its own, still succeeds."""
    broker = await start_broker(store={"max_message_bytes": 8192})
    await create_topic(broker, TOPIC, queues=2)
    msgs = [Message(TOPIC, os.urandom(1000)) for _ in range(60)]
    async with Producer("pg-fallback", namesrv.address) as producer:
        results = await _send_all(producer, msgs)
        assert producer.coalesced_refused >= 1
    assert all(r.status is SendStatus.SEND_OK for r in results)
    by_slot = {(m.queue_id, m.queue_offset): m for m in await stored(broker, TOPIC, range(2))}
    assert len(by_slot) == 60
    for msg, result in zip(msgs, results, strict=True):
        assert by_slot[(result.message_queue.queue_id, result.queue_offset)].body == msg.body


async def test_a_caller_cancelled_while_waiting_does_not_disturb_the_others(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=4)
    async with Producer("pg-cancel", namesrv.address, max_in_flight_per_topic=1) as producer:
        tasks = [asyncio.create_task(producer.send(Message(TOPIC, b"x"))) for _ in range(50)]
        await asyncio.sleep(0)
        tasks[30].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[30], asyncio.CancelledError)
    others = [r for i, r in enumerate(done) if i != 30]
    assert all(isinstance(r, SendResult) and r.status is SendStatus.SEND_OK for r in others)


async def test_shutdown_waits_for_coalesced_sends_it_accepted(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=4)
    producer = Producer("pg-drain", namesrv.address)
    await producer.start()
    tasks = [asyncio.create_task(producer.send(Message(TOPIC, b"x"))) for _ in range(100)]
    await asyncio.sleep(0)  # every send is queued or on the wire
    await producer.shutdown()
    results = await asyncio.gather(*tasks)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(await stored(broker, TOPIC)) == 100


async def test_a_burst_of_coalesced_sends_spreads_over_the_queues_like_one_by_one_sends(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """256 concurrent sends to a 4-queue topic, with and without auto-batching: 64 a queue
    both ways (what the results say and what the broker's max offsets say), and the batched
    burst still takes a handful of requests."""
    broker = await start_broker(wait_time_mills_in_send_queue=PATIENT_SEND_QUEUE_MS)
    on, off = "AutoBatchSpreadOn", "AutoBatchSpreadOff"
    for topic in (on, off):
        await create_topic(broker, topic, queues=4)
    async with (
        Producer("pg-spread-on", namesrv.address, send_timeout_s=30.0) as batched,
        Producer("pg-spread-off", namesrv.address, send_timeout_s=30.0, auto_batch=False) as single,
    ):
        # The route first, so the burst is not spread by route lookups finishing in any order.
        for producer, topic in ((batched, on), (single, off)):
            await producer.send(Message(topic, b"warm"))
        counts: dict[str, Counter[int]] = {}
        for producer, topic in ((batched, on), (single, off)):
            before = max_offsets(broker, topic, range(4))
            requests_before = _send_requests(broker)
            results = await _send_all(producer, [Message(topic, b"x") for _ in range(256)])
            requests = _send_requests(broker) - requests_before
            assert all(r.status is SendStatus.SEND_OK for r in results)
            after = max_offsets(broker, topic, range(4))
            counts[topic] = _per_queue(results)
            assert counts[topic] == Counter({q: after[q] - before[q] for q in range(4)})
            if producer is batched:
                assert requests <= 16, f"{requests} requests for a burst of 256"
                assert batched.coalesced_messages >= 240
            else:
                assert requests == 256
    _assert_round_robin(counts[off], 256, 4)
    _assert_round_robin(counts[on], 256, 4)


async def test_a_long_coalesced_fill_stays_even_and_keyed_sends_keep_their_queue(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """20,000 sends from 256 tasks that each send again as soon as their last one is
    answered (the shape that left one queue with 50 % of a fill and another with 0.5 %),
    with an orderly send by sharding key now and then: the round-robin sends stay even
    queue by queue, the keyed ones land on their key's queue, and the fill is batched."""
    broker = await start_broker(wait_time_mills_in_send_queue=PATIENT_SEND_QUEUE_MS)
    topic = "AutoBatchFill"
    await create_topic(broker, topic, queues=4)
    tasks, per_task = 256, 80
    plain: list[SendResult] = []
    keyed: list[tuple[str, SendResult]] = []

    async def worker(w: int, producer: Producer) -> None:
        for i in range(per_task):
            if i % 16 == 5:
                key = f"user-{(w * per_task + i) % 7}"
                keyed.append((key, await producer.send_orderly(Message(topic, b"k"), key)))
            else:
                plain.append(await producer.send(Message(topic, f"{w}-{i}".encode())))

    async with Producer("pg-fill", namesrv.address, send_timeout_s=30.0) as producer:
        await producer.send(Message(topic, b"warm"))
        before = max_offsets(broker, topic, range(4))
        requests_before = _send_requests(broker)
        async with asyncio.timeout(240):
            await asyncio.gather(*(worker(w, producer) for w in range(tasks)))
        requests = _send_requests(broker) - requests_before
        queues = list(producer.publish_info[topic].queues)
    total = tasks * per_task
    assert len(plain) + len(keyed) == total
    assert all(r.status is SendStatus.SEND_OK for r in plain)
    _assert_round_robin(_per_queue(plain), len(plain), 4)
    for key, result in keyed:
        assert result.message_queue == select_by_hash(queues, Message(topic, b"k"), key)
    after = max_offsets(broker, topic, range(4))
    landed = _per_queue(plain) + _per_queue([r for _key, r in keyed])
    assert landed == Counter({q: after[q] - before[q] for q in range(4)})
    # Batched: the keyed sends go one by one, the rest mostly in batch requests.
    assert requests - len(keyed) <= len(plain) // 8, f"{requests} requests for {total} sends"


async def test_coalesced_sends_retry_past_a_dead_broker_and_spread_over_the_live_one(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """Two brokers of 2 queues each; broker-b dies while the producer's route still lists
    it. A burst still succeeds whole (the requests sent to broker-b are retried on
    broker-a, and each caller's result names the slot its message got); once broker-b is
    known to be down, the next burst spreads over broker-a's two queues evenly."""
    broker_a = await start_broker("broker-a", wait_time_mills_in_send_queue=PATIENT_SEND_QUEUE_MS)
    broker_b = await start_broker("broker-b", wait_time_mills_in_send_queue=PATIENT_SEND_QUEUE_MS)
    topic = "AutoBatchFailover"
    for b in (broker_a, broker_b):
        await create_topic(b, topic, queues=2)
    async with Producer("pg-failover", namesrv.address, send_timeout_s=30.0) as producer:
        warm = [await producer.send(Message(topic, b"warm")) for _ in range(4)]
        assert {r.message_queue.broker_name for r in warm} == {"broker-a", "broker-b"}
        await broker_b.shutdown()

        first = [Message(topic, f"first-{i}".encode()) for i in range(256)]
        first_results = await _send_all(producer, first)
        assert {r.message_queue.broker_name for r in first_results} == {"broker-a"}
        assert not producer.fault.tolerance.is_available("broker-b")

        before = max_offsets(broker_a, topic, range(2))
        second = await _send_all(producer, [Message(topic, b"second") for _ in range(256)])
        after = max_offsets(broker_a, topic, range(2))
        assert producer.coalesced_messages >= 400
    assert {r.message_queue.broker_name for r in second} == {"broker-a"}
    counts = _per_queue(second)
    assert counts == Counter({q: after[q] - before[q] for q in range(2)})
    _assert_round_robin(counts, 256, 2)
    by_slot = {(m.queue_id, m.queue_offset): m for m in await stored(broker_a, topic, range(2))}
    for msg, result in zip(first, first_results, strict=True):
        assert by_slot[(result.message_queue.queue_id, result.queue_offset)].body == msg.body
