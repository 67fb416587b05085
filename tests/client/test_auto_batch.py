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
from client.message import FLAG_COMPRESSED
from tests.client.conftest import BrokerFactory, create_topic, max_offsets, stored, wait_until

TOPIC = "AutoBatch"


async def _send_all(producer: Producer, msgs: list[Message]) -> list[SendResult]:
    return await asyncio.gather(*(producer.send(m) for m in msgs))


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
    assert big_stored.body == big and big_stored.sys_flag & FLAG_COMPRESSED
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
