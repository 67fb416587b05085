"""``client.admin.Admin``: messages looked up by offset id, unique key and business key,
across a cluster of two brokers (real name server and brokers, nothing mocked)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import InvalidMessageError, Message, Producer, SendResult
from client.admin import Admin, decode_offset_msg_id
from client.errors import BrokerError, ClientError, NoRouteError
from remoting.route import MessageQueue
from tests.client.conftest import create_topic, stored
from tests.support import BrokerFactory, wait_dispatched

TOPIC = "TopicQuery"


async def _two_brokers_with_messages(
    namesrv: NameServer, start_broker: BrokerFactory
) -> tuple[list[SendResult], list[Message]]:
    brokers = [await start_broker("broker-a"), await start_broker("broker-b")]
    for b in brokers:
        await create_topic(b, TOPIC, queues=2)
    msgs = [
        Message(TOPIC, f"body-{i}".encode(), keys=["order-7" if i % 3 == 0 else f"k{i}", "all"])
        for i in range(24)
    ]
    async with Producer("pg-query", namesrv.address, auto_batch=False) as producer:
        results = [await producer.send(m) for m in msgs]
    assert {r.message_queue.broker_name for r in results} == {"broker-a", "broker-b"}
    await wait_dispatched(*brokers)
    return results, msgs


async def test_view_query_by_unique_key_and_by_key_across_brokers(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    results, msgs = await _two_brokers_with_messages(namesrv, start_broker)
    async with Admin(namesrv.address) as admin:
        for result, msg in zip(results[:6], msgs[:6], strict=True):
            viewed = await admin.view_message(result.offset_msg_id)
            assert viewed.body == msg.body
            assert viewed.msg_id == result.msg_id
            assert viewed.broker_name == result.message_queue.broker_name
            assert viewed.queue_offset == result.queue_offset

            unique = await admin.query_by_unique_key(TOPIC, result.msg_id)
            assert unique is not None
            assert unique.body == msg.body and unique.offset_msg_id == result.offset_msg_id

        keyed = await admin.query_by_key(TOPIC, "order-7")
        assert sorted(m.body for m in keyed) == sorted(
            m.body for m in msgs if "order-7" in m.key_list
        )
        assert {m.broker_name for m in keyed} == {"broker-a", "broker-b"}
        # max_num bounds what each broker returns.
        assert len(await admin.query_by_key(TOPIC, "all", max_num=3)) <= 6
        assert await admin.query_by_key(TOPIC, "no-such-key") == []
        assert await admin.query_by_unique_key(TOPIC, "0" * 32) is None


async def test_query_by_key_honours_the_time_range(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    results, _msgs = await _two_brokers_with_messages(namesrv, start_broker)
    async with Admin(namesrv.address) as admin:
        later = int(time.time() * 1000) + 10_000
        assert await admin.query_by_key(TOPIC, "all", begin_ms=later, end_ms=later + 1000) == []
        assert len(await admin.query_by_key(TOPIC, "all", max_num=64)) == len(results)


async def test_bad_lookups_raise_clear_errors(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    results, _msgs = await _two_brokers_with_messages(namesrv, start_broker)
    addr, offset = decode_offset_msg_id(results[0].offset_msg_id)
    assert addr.startswith("127.0.0.1:") and offset >= 0
    async with Admin(namesrv.address) as admin:
        with pytest.raises(InvalidMessageError, match=r"32 .* or 56"):
            await admin.view_message("abc")
        with pytest.raises(InvalidMessageError, match="not hex"):
            await admin.view_message("z" * 32)
        # A position past the end of the broker's commit log.
        beyond = results[0].offset_msg_id[:16] + f"{2**40:016X}"
        # The broker's refusal (SYSTEM_ERROR, as Java's), naming the request and the broker.
        with pytest.raises(BrokerError, match=r"VIEW_MESSAGE_BY_ID .* can not find message"):
            await admin.view_message(beyond)
        with pytest.raises(InvalidMessageError, match="max_num"):
            await admin.query_by_key(TOPIC, "all", max_num=0)
        with pytest.raises(InvalidMessageError, match="key"):
            await admin.query_by_key(TOPIC, "two words")
        with pytest.raises(InvalidMessageError, match="begin_ms"):
            await admin.query_by_key(TOPIC, "all", begin_ms=10, end_ms=5)
        with pytest.raises(NoRouteError):
            await admin.query_by_key("NoSuchTopicAnywhere", "all")
    with pytest.raises(ClientError, match="not started"):
        await Admin(namesrv.address).query_by_key(TOPIC, "all")


async def test_offset_for_time_is_the_first_message_stored_at_or_after(
    namesrv: NameServer, broker: Broker
) -> None:
    """Against every interesting time (each store time, one ms either side, before all and
    after all), the answer is what a scan of the queue gives: the first message stored at or
    after the time, or the queue's end. The broker's own search answers the *nearest*
    message, which is the one before whenever that is closer in time."""
    topic = "TopicByTime"
    await create_topic(broker, topic, queues=1)
    await create_topic(broker, f"{topic}Empty", queues=1)
    mq, empty = MessageQueue(topic, "broker-a", 0), MessageQueue(f"{topic}Empty", "broker-a", 0)
    async with Producer("pg-by-time", namesrv.address, auto_batch=False) as producer:
        for round_ in range(5):
            # a batch gives several messages one store time; single sends give distinct ones
            batch = [Message(topic, f"r{round_}-{i}".encode()) for i in range(3)]
            await producer.send_batch(batch)
            await asyncio.sleep(0.02)
            await producer.send(Message(topic, f"r{round_}-single".encode()))
            await asyncio.sleep(0.03 if round_ % 2 else 0.005)
    await wait_dispatched(broker)
    times = [m.store_timestamp for m in await stored(broker, topic, [0])]
    assert len(times) == 20 and times == sorted(times)

    def scan(ts: int) -> int:
        return next((k for k, t in enumerate(times) if t >= ts), len(times))

    probes = sorted({t + d for t in times for d in (-1, 0, 1)} | {0, times[-1] + 60_000})
    async with Admin(namesrv.address) as admin:
        for ts in probes:
            assert await admin.offset_for_time(mq, ts) == scan(ts), ts
            assert await admin.offset_for_time(mq, ts, side="first_after") == scan(ts + 1), ts
        now = int(time.time() * 1000)
        assert await admin.offset_for_time(mq, now) == 20  # "now": nothing left to read
        assert await admin.offset_for_time(empty, times[0]) == 0
        assert await admin.offset_for_time(empty, now) == 0
        with pytest.raises(ValueError, match="side"):
            await admin.offset_for_time(mq, now, side="nearest")  # type: ignore[arg-type]


async def test_offset_for_time_after_retention_starts_at_the_queues_minimum(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """Once retention removed a queue's head, a time before every message still stored gives
    the queue's (moved) minimum, and each remaining store time gives its own message: the
    entries below the minimum count as older, the minimum itself does not."""
    broker = await start_broker(
        "broker-r",
        store={
            "commit_log_file_bytes": 4096,
            "max_message_bytes": 2048,
            "consume_queue_file_bytes": 20 * 4,
            "file_reserved_hours": 1,
        },
    )
    topic = "TopicByTimeRetained"
    await create_topic(broker, topic, queues=1)
    async with Producer("pg-retained", namesrv.address, auto_batch=False) as producer:
        for i in range(16):
            await producer.send(Message(topic, f"old-{i}-".encode() + b"x" * 1000))
    two_hours_ago = time.time() - 7200
    for mf in broker.store.commit_log.files.files:
        os.utime(mf.path, (two_hours_ago, two_hours_ago))
    assert broker.store.delete_expired_files().commit_log_segments
    low, high = broker.store.get_min_offset(topic, 0), broker.store.get_max_offset(topic, 0)
    assert 0 < low < high
    times = {k: broker.store.get_message_store_timestamp(topic, 0, k) for k in range(low, high)}
    mq = MessageQueue(topic, "broker-r", 0)
    async with Admin(namesrv.address) as admin:
        assert await admin.offset_for_time(mq, 0) == low
        for k, ts in times.items():
            first = min(j for j, t in times.items() if t >= ts)
            assert await admin.offset_for_time(mq, ts) == first, (k, ts)
