"""Delayed messages on the wire: a SEND with a DELAY level waits in SCHEDULE_TOPIC_XXXX and
the schedule service brings it to its real topic and queue when the level's time has come
(protocol.md §13.6, store-format.md §12 and §6 for delayOffset.json).

Brokers here have their own ``messageDelayLevel`` (``ms`` is Aerolite's unit for tests): by
default 100 ms, 200 ms … 1800 ms, so each level has a delay of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from broker.broker import Broker
from codec import (
    TRANSACTION_PREPARED_TYPE,
    MessageInner,
    RecordInfo,
    decode_record,
    java_hash,
)
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from tests.support import (
    BORN_TIMESTAMP,
    BrokerFactory,
    pull,
    record_body,
    record_props,
    records,
    send,
    wait_dispatched,
)

LEVELS_MS = [100 * (n + 1) for n in range(18)]
FAST_LEVELS = {"message_delay_level": " ".join(f"{ms}ms" for ms in LEVELS_MS)}
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TOPIC = "TopicDelayed"
# The schedule service's first round runs 1 s after start, then one every 100 ms.
FIRST_ROUND_S = 1.0
ARRIVAL_SLACK_S = 3.0


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    return await start_broker(store=FAST_LEVELS)


# ------------------------------------------------------------------------------ helpers


async def send_delayed(
    client: RemotingClient,
    broker: Broker,
    delay: str,
    body: bytes = b"later",
    *,
    topic: str = TOPIC,
    queue_id: int = 2,
    tags: str = "TagD",
    **kw: Any,
) -> RemotingCommand:
    response = await send(
        client,
        broker.address,
        topic,
        body,
        queue_id=queue_id,
        tags=tags,
        keys="dk",
        extra={"DELAY": delay, "color": "blue"},
        **kw,
    )
    assert response.code == ResponseCode.SUCCESS, response
    return response


async def stored(
    client: RemotingClient, broker: Broker, topic: str, queue_id: int = 0, expression: str = "*"
) -> list[tuple[RecordInfo, bytes]]:
    """Every record of one queue with its body, by PULL_MESSAGE."""
    await wait_dispatched(broker)
    out: list[tuple[RecordInfo, bytes]] = []
    offset = 0
    for _ in range(20):
        response = await pull(
            client,
            broker.address,
            topic,
            queue_id=queue_id,
            offset=offset,
            subscription=expression,
        )
        if response.code != ResponseCode.SUCCESS:
            return out
        body = response.body_bytes
        infos = records(body)
        out += [(info, record_body(body, infos, n)) for n, info in enumerate(infos)]
        offset = int(response.ext_fields["nextBeginOffset"])
    raise AssertionError(f"{topic}:{queue_id} does not end")


def count(broker: Broker, topic: str, queue_id: int) -> int:
    return broker.store.get_max_offset(topic, queue_id)


async def wait_count(broker: Broker, topic: str, queue_id: int, n: int, timeout_s: float) -> float:
    """Poll until the queue holds ``n`` messages; the wall-clock time that was seen."""
    deadline = time.monotonic() + timeout_s
    while count(broker, topic, queue_id) < n:
        if time.monotonic() > deadline:
            pytest.fail(
                f"{topic}:{queue_id} has {count(broker, topic, queue_id)} of {n} "
                f"after {timeout_s} s"
            )
        await asyncio.sleep(0.005)
    return time.time()


def schedule_entry(broker: Broker, level: int, offset: int = 0) -> tuple[int, int, int]:
    """(commit-log offset, size, tags code) of one consume-queue entry of a level's queue."""
    cq = broker.store.queues.get(SCHEDULE_TOPIC, level - 1)
    assert cq is not None
    [(queue_offset, entry)] = list(cq.entries(offset, 1))
    assert queue_offset == offset
    return entry


def delay_offsets(root: Path) -> dict[str, Any]:
    doc = json.loads((root / "config" / "delayOffset.json").read_text())
    assert set(doc) == {"offsetTable"}
    table = doc["offsetTable"]
    assert isinstance(table, dict)
    return table


# ------------------------------------------------------------------------------ parking


async def test_delayed_send_is_parked_in_the_level_queue(
    broker: Broker, client: RemotingClient
) -> None:
    before = time.time()
    response = await send_delayed(client, broker, "2", queue_id=2)
    # The response names the queue asked for, with the schedule queue's offset.
    assert response.ext_fields["queueId"] == "2"
    assert response.ext_fields["queueOffset"] == "0"
    second = await send_delayed(client, broker, "2", queue_id=3)
    assert second.ext_fields["queueId"] == "3"
    assert second.ext_fields["queueOffset"] == "1"

    parked = await stored(client, broker, SCHEDULE_TOPIC, 1)
    assert len(parked) == 2
    info, body = parked[0]
    props = record_props(info)
    assert info.topic == SCHEDULE_TOPIC
    assert info.queue_id == 1
    assert props["REAL_TOPIC"] == TOPIC
    assert props["REAL_QID"] == "2"
    assert props["DELAY"] == "2"
    assert props["TAGS"] == "TagD"
    assert body == b"later"
    assert record_props(parked[1][0])["REAL_QID"] == "3"
    assert int(response.ext_fields["msgId"][16:], 16) == info.commit_log_offset
    # The deliver time is the tags code: store time + the level's delay.
    _, _, deliver_at = schedule_entry(broker, 2)
    assert deliver_at == info.store_timestamp + LEVELS_MS[1]
    assert deliver_at >= int(before * 1000) + LEVELS_MS[1] - 1
    # Nothing in the real queues yet, nor in any other level.
    assert count(broker, TOPIC, 2) == 0
    assert count(broker, TOPIC, 3) == 0
    assert [count(broker, SCHEDULE_TOPIC, q) for q in range(18)] == [0, 2] + [0] * 16


@pytest.mark.parametrize("delay", ["0", "-1"])
async def test_delay_zero_or_negative_is_not_delayed(
    broker: Broker, client: RemotingClient, delay: str
) -> None:
    await send_delayed(client, broker, delay, queue_id=0)
    await wait_dispatched(broker)
    assert count(broker, TOPIC, 0) == 1
    assert sum(count(broker, SCHEDULE_TOPIC, q) for q in range(18)) == 0


# ----------------------------------------------------------------------------- delivery


@pytest.mark.parametrize("level", [2, 6])
async def test_delivered_after_the_level_delay_and_not_before(
    broker: Broker, client: RemotingClient, level: int
) -> None:
    await asyncio.sleep(FIRST_ROUND_S)  # the service's rounds have begun
    delay_s = LEVELS_MS[level - 1] / 1000
    t0 = time.time()
    await send_delayed(client, broker, str(level), queue_id=2)
    seen = await wait_count(broker, TOPIC, 2, 1, delay_s + ARRIVAL_SLACK_S)
    assert seen - t0 >= delay_s - 0.002, f"arrived {seen - t0:.3f} s after, delay {delay_s}"
    assert seen - t0 <= delay_s + 1.0, f"arrived {seen - t0:.3f} s after, delay {delay_s}"
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, level - 1)
    [(delivered, _)] = await stored(client, broker, TOPIC, 2)
    assert delivered.store_timestamp - parked.store_timestamp >= LEVELS_MS[level - 1]
    await asyncio.sleep(0.3)
    assert count(broker, TOPIC, 2) == 1  # once


async def test_redelivered_record_keeps_the_schedule_property_string(
    broker: Broker, client: RemotingClient
) -> None:
    """store-format.md §12: the property bytes are the schedule record's, unchanged."""
    await send_delayed(client, broker, "1", b"same", queue_id=1, flag=9)
    await wait_count(broker, TOPIC, 1, 1, LEVELS_MS[0] / 1000 + ARRIVAL_SLACK_S)
    [(parked, parked_body)] = await stored(client, broker, SCHEDULE_TOPIC, 0)
    [(delivered, body)] = await stored(client, broker, TOPIC, 1)
    assert delivered.properties == parked.properties  # byte for byte
    props = record_props(delivered)
    assert props["DELAY"] == "1"
    assert props["REAL_TOPIC"] == TOPIC
    assert props["REAL_QID"] == "1"
    assert props["TAGS"] == "TagD"
    assert props["KEYS"] == "dk"
    assert props["color"] == "blue"
    assert delivered.topic == TOPIC
    assert delivered.queue_id == 1
    assert delivered.queue_offset == 0
    assert body == parked_body == b"same"
    assert delivered.flag == 9
    assert delivered.born_timestamp == BORN_TIMESTAMP
    assert delivered.reconsume_times == 0
    assert delivered.commit_log_offset > parked.commit_log_offset
    # The real queue's tags code comes from TAGS, not from the deliver time.
    assert [i.topic for i, _ in await stored(client, broker, TOPIC, 1, "TagD")] == [TOPIC]
    assert await stored(client, broker, TOPIC, 1, "TagX") == []
    cq = broker.store.queues.get(TOPIC, 1)
    assert cq is not None
    [(_, (_, _, tags_code))] = list(cq.entries(0, 1))
    assert tags_code == java_hash("TagD")


async def test_delayed_record_keeps_the_wait_property(
    broker: Broker, client: RemotingClient
) -> None:
    """protocol.md §9.2: 4.9.8 drops WAIT from the stored bytes of plain sends only; a
    delayed record keeps it (its property string is rebuilt from a map that still holds
    it), and so does the record the schedule service delivers (§13.6)."""
    await send_delayed(client, broker, "1", queue_id=0)  # WAIT=true, as Java sends
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 0)
    assert record_props(parked).get("WAIT") == "true"
    await wait_count(broker, TOPIC, 0, 1, LEVELS_MS[0] / 1000 + ARRIVAL_SLACK_S)
    [(delivered, _)] = await stored(client, broker, TOPIC, 0)
    assert record_props(delivered).get("WAIT") == "true"


async def test_level_above_the_configured_count_is_clamped(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(store={"message_delay_level": "100ms 200ms 300ms"})
    await send_delayed(client, broker, "7", queue_id=0)
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 2)  # level 3, the last
    assert record_props(parked)["DELAY"] == "3"
    _, _, deliver_at = schedule_entry(broker, 3)
    assert deliver_at == parked.store_timestamp + 300
    await wait_count(broker, TOPIC, 0, 1, 0.3 + ARRIVAL_SLACK_S)


async def test_level_above_18_is_clamped_to_18(broker: Broker, client: RemotingClient) -> None:
    await send_delayed(client, broker, "99", queue_id=0)
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 17)
    assert record_props(parked)["DELAY"] == "18"
    _, _, deliver_at = schedule_entry(broker, 18)
    assert deliver_at == parked.store_timestamp + LEVELS_MS[17]


async def test_levels_are_independent(broker: Broker, client: RemotingClient) -> None:
    """A level-1 message sent after a level-8 one is delivered first: each level has its
    own queue and its own walk."""
    await asyncio.sleep(FIRST_ROUND_S)
    await send_delayed(client, broker, "8", b"slow", queue_id=0)
    await send_delayed(client, broker, "1", b"fast", queue_id=0)
    await wait_count(broker, TOPIC, 0, 1, LEVELS_MS[0] / 1000 + ARRIVAL_SLACK_S)
    assert [b for _, b in await stored(client, broker, TOPIC, 0)] == [b"fast"]
    await wait_count(broker, TOPIC, 0, 2, LEVELS_MS[7] / 1000 + ARRIVAL_SLACK_S)
    assert [b for _, b in await stored(client, broker, TOPIC, 0)] == [b"fast", b"slow"]


async def test_many_messages_of_one_level_arrive_in_order(
    broker: Broker, client: RemotingClient
) -> None:
    bodies = [f"m{i}".encode() for i in range(30)]
    for body in bodies:
        await send_delayed(client, broker, "1", body, queue_id=0)
    await wait_count(broker, TOPIC, 0, 30, LEVELS_MS[0] / 1000 + ARRIVAL_SLACK_S)
    await asyncio.sleep(0.3)
    got = await stored(client, broker, TOPIC, 0)
    assert [b for _, b in got] == bodies
    assert [i.queue_offset for i, _ in got] == list(range(30))


# -------------------------------------------------------------------------- persistence


async def test_delay_offsets_persist_at_shutdown_and_reload(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    """Level 1 delivered before shutdown is not delivered again; level 2, pending at
    shutdown, is delivered by the restarted broker."""
    root = tmp_path / "restart"
    levels = {"message_delay_level": "100ms 4s " + " ".join(["100ms"] * 16)}
    broker = await start_broker(root=root, store=levels)
    await send_delayed(client, broker, "1", b"one-a", queue_id=0)
    await send_delayed(client, broker, "1", b"one-b", queue_id=0)
    await send_delayed(client, broker, "2", b"two", queue_id=0)
    await wait_count(broker, TOPIC, 0, 2, FIRST_ROUND_S + ARRIVAL_SLACK_S)
    await broker.shutdown()
    table = delay_offsets(root)
    assert table["1"] == 2
    assert table.get("2", 0) == 0
    assert all(table.get(str(level), 0) == 0 for level in range(3, 19))

    again = await start_broker(root=root, store=levels)
    await wait_count(again, TOPIC, 0, 3, 4.0 + FIRST_ROUND_S + ARRIVAL_SLACK_S)
    await asyncio.sleep(0.5)  # more rounds: a redelivery of level 1 would show now
    assert [b for _, b in await stored(client, again, TOPIC, 0)] == [b"one-a", b"one-b", b"two"]
    await again.shutdown()
    table = delay_offsets(root)
    assert (table["1"], table["2"]) == (2, 1)


async def test_deliver_time_beyond_the_level_delay_counts_as_due(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    """A tags code further ahead than now + the level's delay (the clock went back, or the
    level was shortened) is due now: parked under a 60 s level 2, the message is delivered
    as soon as a broker whose level 2 is 100 ms starts on the same store."""
    root = tmp_path / "shortened"
    slow = {"message_delay_level": "100ms 60s " + " ".join(["100ms"] * 16)}
    broker = await start_broker(root=root, store=slow)
    await send_delayed(client, broker, "2", b"overdue", queue_id=0)
    await wait_dispatched(broker)
    await asyncio.sleep(FIRST_ROUND_S + 0.3)
    assert count(broker, TOPIC, 0) == 0  # 60 s to go
    await broker.shutdown()

    again = await start_broker(root=root, store=FAST_LEVELS)
    await wait_count(again, TOPIC, 0, 1, FIRST_ROUND_S + ARRIVAL_SLACK_S)
    assert [b for _, b in await stored(client, again, TOPIC, 0)] == [b"overdue"]


async def test_delay_offsets_in_fastjson_form_are_read(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    """store-format.md §6: fastjson writes integer map keys unquoted ({1:20}); a loader must
    accept them, or a broker moved from RocketMQ redelivers every delayed message."""
    root = tmp_path / "fastjson"
    broker = await start_broker(root=root, store=FAST_LEVELS)
    await send_delayed(client, broker, "1", b"once", queue_id=0)
    await wait_count(broker, TOPIC, 0, 1, FIRST_ROUND_S + ARRIVAL_SLACK_S)
    await broker.shutdown()
    path = root / "config" / "delayOffset.json"
    path.write_text('{\n\t"offsetTable":{1:1,2:0}\n}')
    path.with_name(path.name + ".bak").unlink(missing_ok=True)

    again = await start_broker(root=root, store=FAST_LEVELS)
    await asyncio.sleep(FIRST_ROUND_S + 0.5)
    assert count(again, TOPIC, 0) == 1
    assert again.schedule.offsets.get(1) == 1


async def test_delay_offsets_flush_periodically(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    root = tmp_path / "periodic"
    broker = await start_broker(root=root, store=FAST_LEVELS, flush_delay_offset_interval_ms=200)
    await send_delayed(client, broker, "3", b"x", queue_id=0)
    await wait_count(broker, TOPIC, 0, 1, FIRST_ROUND_S + ARRIVAL_SLACK_S)
    path = root / "config" / "delayOffset.json"
    deadline = time.monotonic() + 3.0
    while not (path.exists() and delay_offsets(root).get("3") == 1):
        if time.monotonic() > deadline:
            pytest.fail(f"delayOffset.json not written while running: {path.exists()}")
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------------- transactions


async def test_half_message_with_delay_is_not_scheduled(
    broker: Broker, client: RemotingClient
) -> None:
    response = await send(
        client,
        broker.address,
        TOPIC,
        b"half",
        queue_id=0,
        sys_flag=TRANSACTION_PREPARED_TYPE,
        extra={"TRAN_MSG": "true", "PGROUP": "pg", "DELAY": "2"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    await wait_dispatched(broker)
    assert count(broker, SCHEDULE_TOPIC, 1) == 0
    assert count(broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1


async def test_store_does_not_schedule_a_prepared_message(broker: Broker) -> None:
    """The store rule under the test above: only non-transactional and committed
    messages with a DELAY level go to SCHEDULE_TOPIC_XXXX."""
    result = await broker.store.put_message(
        MessageInner(
            topic="RMQ_SYS_TRANS_HALF_TOPIC",
            queue_id=0,
            body=b"half",
            properties="DELAY\x012",
            sys_flag=TRANSACTION_PREPARED_TYPE,
            delay_level=2,
        )
    )
    assert result.status.stored
    assert result.append is not None
    await wait_dispatched(broker)
    assert count(broker, SCHEDULE_TOPIC, 1) == 0
    record = broker.store.look_message_by_offset(result.append.commit_log_offset)
    assert record is not None
    info = decode_record(record, 0, check_crc=True)
    assert info.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert "REAL_TOPIC" not in record_props(info)
