"""CONSUMER_SEND_MSG_BACK (36) on the wire, and a client's own re-send to a retry topic
(protocol.md §7.5, §13.3; delays through SCHEDULE_TOPIC_XXXX as in §13.6).

A stored message handed back comes back as a copy in ``%RETRY%<group>`` after its delay level
(3 + reconsumeTimes unless the consumer names one), with reconsume times + 1, RETRY_TOPIC and
ORIGIN_MESSAGE_ID; past maxReconsumeTimes (the header's, else the group's retryMaxTimes) or
with a negative level it goes to ``%DLQ%<group>`` at once. Every refusal is checked too.

The brokers here have delay levels of 100 ms, 200 ms … 1800 ms, so a retry takes a blink
and each level has its own delay.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from broker.broker import Broker
from codec import RecordInfo
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, next_opaque
from remoting.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from tests.support import (
    BORN_TIMESTAMP,
    BrokerFactory,
    call,
    properties,
    pull,
    record_body,
    record_props,
    records,
    wait_dispatched,
)

LEVELS_MS = [100 * (n + 1) for n in range(18)]  # level n waits n * 100 ms
FAST_LEVELS = {"message_delay_level": " ".join(f"{ms}ms" for ms in LEVELS_MS)}
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TOPIC = "TopicSendBack"
GROUP = "cg-back"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"
# How late a due message may arrive: the schedule service's first round runs 1 s after the
# broker starts, then every 100 ms.
ARRIVAL_SLACK_S = 3.0


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    return await start_broker(store=FAST_LEVELS)


# ------------------------------------------------------------------------------ helpers


async def store_message(
    client: RemotingClient,
    broker: Broker,
    topic: str = TOPIC,
    body: bytes = b"payload",
    *,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    flag: int = 0,
    props: dict[str, str] | None = None,
    queue_id: int = 0,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 of one message, reconsumeTimes (``j``) and maxReconsumeTimes (``l``)
    in the header as a consumer's own re-send carries them; must succeed."""
    pairs = {"TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": f"AC110001{next_opaque():024X}"}
    pairs.update(props or {})
    header = SendMessageRequestHeader(
        producer_group="pg",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=BORN_TIMESTAMP,
        flag=flag,
        properties=properties(**pairs),
        reconsume_times=reconsume_times,
        unit_mode=False,
        max_reconsume_times=max_reconsume_times,
    )
    response = await call(client, broker.address, RequestCode.SEND_MESSAGE_V2, header.to_v2(), body)
    assert response.code == ResponseCode.SUCCESS, response
    return response


def commit_offset_of(response: RemotingCommand) -> int:
    """The commit-log offset inside a send response's offset msgId (§11)."""
    return int(response.ext_fields["msgId"][16:], 16)


async def send_back(
    client: RemotingClient,
    broker: Broker,
    offset: int,
    *,
    group: str = GROUP,
    delay_level: int = 0,
    max_reconsume_times: int | None = 16,
    origin_msg_id: str | None = None,
) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(
        offset=offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=origin_msg_id,
        origin_topic=TOPIC,
        max_reconsume_times=max_reconsume_times,
    )
    return await call(
        client, broker.address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
    )


async def send_back_ok(
    client: RemotingClient, broker: Broker, offset: int, **kw: Any
) -> RemotingCommand:
    response = await send_back(client, broker, offset, **kw)
    assert response.code == ResponseCode.SUCCESS, response
    assert not response.ext_fields.get("queueId")  # an empty response header
    return response


async def stored(
    client: RemotingClient, broker: Broker, topic: str, queue_id: int = 0
) -> list[tuple[RecordInfo, bytes]]:
    """Every record of one queue with its body, by PULL_MESSAGE; [] for an empty queue."""
    await wait_dispatched(broker)
    out: list[tuple[RecordInfo, bytes]] = []
    offset = 0
    for _ in range(20):
        response = await pull(client, broker.address, topic, queue_id=queue_id, offset=offset)
        if response.code != ResponseCode.SUCCESS:
            return out
        body = response.body_bytes
        infos = records(body)
        out += [(info, record_body(body, infos, n)) for n, info in enumerate(infos)]
        offset = int(response.ext_fields["nextBeginOffset"])
    raise AssertionError(f"{topic}:{queue_id} does not end")


def count(broker: Broker, topic: str, queue_id: int = 0) -> int:
    return broker.store.get_max_offset(topic, queue_id)


def schedule_total(broker: Broker) -> int:
    return sum(count(broker, SCHEDULE_TOPIC, q) for q in range(len(LEVELS_MS)))


async def wait_arrival(broker: Broker, topic: str, n: int, timeout_s: float) -> float:
    """Poll until ``topic`` queue 0 holds ``n`` messages; the wall-clock time it was seen."""
    deadline = time.monotonic() + timeout_s
    while count(broker, topic) < n:
        if time.monotonic() > deadline:
            pytest.fail(f"{topic} has {count(broker, topic)} of {n} after {timeout_s} s")
        await asyncio.sleep(0.005)
    return time.time()


async def update_group(client: RemotingClient, broker: Broker, **fields: Any) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with RocketMQ's JSON field names."""
    body = json.dumps({"groupName": GROUP, **fields}).encode()
    response = await call(
        client, broker.address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body
    )
    assert response.code == ResponseCode.SUCCESS, response


# ------------------------------------------------------------------------------ retries


async def test_send_back_stores_a_retry_copy_through_the_schedule_topic(
    broker: Broker, client: RemotingClient
) -> None:
    sent = await store_message(client, broker, flag=7, props={"color": "red"})
    original_id = sent.ext_fields["msgId"]
    [(original, _)] = await stored(client, broker, TOPIC)
    assert original.commit_log_offset == commit_offset_of(sent)
    # The header's originMsgId is not what the broker records: it takes the stored id.
    await send_back_ok(client, broker, original.commit_log_offset, origin_msg_id="0A" * 16)

    # Parked first in SCHEDULE_TOPIC_XXXX, queue level - 1 = 2 (level 3 + 0 reconsumes).
    [(parked, parked_body)] = await stored(client, broker, SCHEDULE_TOPIC, 2)
    assert schedule_total(broker) == 1
    props = record_props(parked)
    assert parked.topic == SCHEDULE_TOPIC
    assert props["DELAY"] == "3"
    assert props["REAL_TOPIC"] == RETRY
    assert props["REAL_QID"] == "0"
    assert props["WAIT"] == "false"
    assert parked.reconsume_times == 1
    assert count(broker, RETRY) == 0  # not yet
    tc = broker.topics.get(RETRY)
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, 6)

    await wait_arrival(broker, RETRY, 1, LEVELS_MS[2] / 1000 + ARRIVAL_SLACK_S)
    [(retried, body)] = await stored(client, broker, RETRY)
    props = record_props(retried)
    assert retried.topic == RETRY
    assert retried.queue_id == 0
    assert retried.reconsume_times == 1
    assert props["RETRY_TOPIC"] == TOPIC
    assert props["ORIGIN_MESSAGE_ID"] == original_id
    assert props["TAGS"] == "TagA"
    assert props["KEYS"] == "k1"
    assert props["color"] == "red"
    assert props["UNIQ_KEY"] == record_props(original)["UNIQ_KEY"]
    assert body == parked_body == b"payload"
    assert retried.flag == 7
    assert retried.born_timestamp == BORN_TIMESTAMP
    assert retried.commit_log_offset != original.commit_log_offset
    # The original stays where it was.
    assert count(broker, TOPIC) == 1
    assert broker.topics.get(DLQ) is None


async def test_second_send_back_keeps_origin_id_and_retry_topic(
    broker: Broker, client: RemotingClient
) -> None:
    sent = await store_message(client, broker)
    original_id = sent.ext_fields["msgId"]
    await send_back_ok(client, broker, commit_offset_of(sent))
    await wait_arrival(broker, RETRY, 1, LEVELS_MS[2] / 1000 + ARRIVAL_SLACK_S)
    [(first, _)] = await stored(client, broker, RETRY)

    # The retried copy fails as well: the consumer hands back the record of the retry topic.
    await send_back_ok(client, broker, first.commit_log_offset, origin_msg_id=original_id)
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 3)  # level 3 + 1
    assert record_props(parked)["DELAY"] == "4"
    await wait_arrival(broker, RETRY, 2, LEVELS_MS[3] / 1000 + ARRIVAL_SLACK_S)
    second = (await stored(client, broker, RETRY))[1][0]
    props = record_props(second)
    assert second.reconsume_times == 2
    assert props["ORIGIN_MESSAGE_ID"] == original_id  # not the first copy's id
    assert props["RETRY_TOPIC"] == TOPIC  # not %RETRY%…
    assert second.born_timestamp == BORN_TIMESTAMP


@pytest.mark.parametrize(
    ("reconsume_times", "header_level", "expected_level"),
    [(0, 0, 3), (2, 0, 5), (0, 1, 1), (2, 7, 7), (5, 0, 8)],
    ids=["first", "third", "header-1", "header-7", "sixth"],
)
async def test_delay_level_is_3_plus_reconsume_times_unless_the_header_names_one(
    broker: Broker,
    client: RemotingClient,
    reconsume_times: int,
    header_level: int,
    expected_level: int,
) -> None:
    sent = await store_message(client, broker, reconsume_times=reconsume_times)
    await send_back_ok(client, broker, commit_offset_of(sent), delay_level=header_level)
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, expected_level - 1)
    assert schedule_total(broker) == 1
    assert record_props(parked)["DELAY"] == str(expected_level)
    assert parked.reconsume_times == reconsume_times + 1


async def test_delay_level_beyond_the_last_is_clamped(
    broker: Broker, client: RemotingClient
) -> None:
    """3 + 16 reconsumes is level 19; the store parks it at the last level, 18."""
    sent = await store_message(client, broker, reconsume_times=16)
    await send_back_ok(client, broker, commit_offset_of(sent), max_reconsume_times=20)
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 17)
    assert record_props(parked)["DELAY"] == "18"
    assert parked.reconsume_times == 17


async def test_retries_spread_over_the_group_retry_queues(
    broker: Broker, client: RemotingClient
) -> None:
    await update_group(client, broker, retryQueueNums=3)
    sent = await store_message(client, broker)
    for _ in range(30):
        await send_back_ok(client, broker, commit_offset_of(sent), delay_level=1)
    tc = broker.topics.get(RETRY)
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums) == (3, 3)
    parked = await stored(client, broker, SCHEDULE_TOPIC, 0)
    assert len(parked) == 30
    qids = {record_props(info)["REAL_QID"] for info, _ in parked}
    assert qids <= {"0", "1", "2"}
    assert len(qids) >= 2  # 30 random picks of 3 all alike: 3 in 3**29
    await asyncio.sleep(1.0)
    deadline = time.monotonic() + ARRIVAL_SLACK_S
    while sum(count(broker, RETRY, q) for q in range(3)) < 30:
        assert time.monotonic() < deadline, "retries did not all arrive"
        await asyncio.sleep(0.01)


async def test_read_only_broker_is_no_permission(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    writable = await start_broker(store=FAST_LEVELS)
    sent = await store_message(client, writable)
    await writable.shutdown()
    broker = await start_broker(root=writable.config.store.root_dir, broker_permission=4)
    before = broker.store.commit_log.max_offset
    response = await send_back(client, broker, commit_offset_of(sent))
    assert response.code == ResponseCode.NO_PERMISSION, response
    assert broker.store.commit_log.max_offset == before


@pytest.mark.parametrize("level", [3, 9])
async def test_retry_arrives_after_its_level_and_not_before(
    broker: Broker, client: RemotingClient, level: int
) -> None:
    sent = await store_message(client, broker)
    delay_s = LEVELS_MS[level - 1] / 1000
    await asyncio.sleep(1.0)  # past the schedule service's first-round delay
    t0 = time.time()
    await send_back_ok(client, broker, commit_offset_of(sent), delay_level=level)
    seen = await wait_arrival(broker, RETRY, 1, delay_s + ARRIVAL_SLACK_S)
    assert seen - t0 >= delay_s - 0.002, f"arrived {seen - t0:.3f} s after, delay {delay_s}"
    assert seen - t0 <= delay_s + 1.0, f"arrived {seen - t0:.3f} s after, delay {delay_s}"
    # On the broker's own clock: stored in the retry topic a level's delay after parking.
    [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, level - 1)
    [(retried, _)] = await stored(client, broker, RETRY)
    assert retried.store_timestamp - parked.store_timestamp >= LEVELS_MS[level - 1]


# -------------------------------------------------------------------------------- DLQ


@pytest.mark.parametrize(
    ("reconsume_times", "max_times", "dead"),
    [(2, 2, True), (3, 2, True), (1, 2, False), (0, 0, True), (16, 16, True), (15, 16, False)],
)
async def test_reconsume_times_at_max_goes_to_the_dlq_at_once(
    broker: Broker, client: RemotingClient, reconsume_times: int, max_times: int, dead: bool
) -> None:
    sent = await store_message(client, broker, body=b"poison", reconsume_times=reconsume_times)
    await send_back_ok(
        client, broker, commit_offset_of(sent), max_reconsume_times=max_times, delay_level=1
    )
    await wait_dispatched(broker)
    if not dead:
        assert schedule_total(broker) == 1
        assert broker.topics.get(DLQ) is None
        return
    # Immediately in the DLQ: not parked in the schedule topic, nothing in the retry topic.
    assert schedule_total(broker) == 0
    [(info, body)] = await stored(client, broker, DLQ)
    assert body == b"poison"
    assert info.topic == DLQ
    assert info.reconsume_times == reconsume_times + 1
    props = record_props(info)
    assert "DELAY" not in props
    assert props["RETRY_TOPIC"] == TOPIC
    assert props["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
    tc = broker.topics.get(DLQ)
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    assert tc.perm & 6 == 6
    await asyncio.sleep(0.3)
    assert count(broker, RETRY) == 0
    assert count(broker, DLQ) == 1


async def test_negative_delay_level_goes_to_the_dlq(broker: Broker, client: RemotingClient) -> None:
    sent = await store_message(client, broker)
    await send_back_ok(client, broker, commit_offset_of(sent), delay_level=-1)
    [(info, _)] = await stored(client, broker, DLQ)
    assert info.reconsume_times == 1
    assert schedule_total(broker) == 0
    assert count(broker, RETRY) == 0


async def test_dead_letter_of_a_retried_copy_keeps_the_origin(
    broker: Broker, client: RemotingClient
) -> None:
    sent = await store_message(client, broker)
    await send_back_ok(client, broker, commit_offset_of(sent), delay_level=1)
    await wait_arrival(broker, RETRY, 1, LEVELS_MS[0] / 1000 + ARRIVAL_SLACK_S)
    [(retried, _)] = await stored(client, broker, RETRY)
    await send_back_ok(client, broker, retried.commit_log_offset, max_reconsume_times=1)
    [(dead, _)] = await stored(client, broker, DLQ)
    props = record_props(dead)
    assert dead.reconsume_times == 2
    assert props["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
    assert props["RETRY_TOPIC"] == TOPIC
    assert "DELAY" not in props  # the retried copy's DELAY=1 is dropped


async def test_group_retry_max_times_when_the_header_has_none(
    broker: Broker, client: RemotingClient
) -> None:
    await update_group(client, broker, retryMaxTimes=2)
    below = await store_message(client, broker, body=b"below", reconsume_times=1)
    at = await store_message(client, broker, body=b"at", reconsume_times=2)
    await send_back_ok(client, broker, commit_offset_of(below), max_reconsume_times=None)
    await send_back_ok(client, broker, commit_offset_of(at), max_reconsume_times=None)
    assert [body for _, body in await stored(client, broker, DLQ)] == [b"at"]
    assert schedule_total(broker) == 1
    # The header's value, when given, wins over the group's.
    await send_back_ok(client, broker, commit_offset_of(at), max_reconsume_times=3)
    assert schedule_total(broker) == 2
    assert count(broker, DLQ) == 1


async def test_default_group_allows_16_reconsumes(broker: Broker, client: RemotingClient) -> None:
    for times in (15, 16):
        sent = await store_message(client, broker, reconsume_times=times)
        await send_back_ok(client, broker, commit_offset_of(sent), max_reconsume_times=None)
    await wait_dispatched(broker)
    assert schedule_total(broker) == 1
    assert count(broker, DLQ) == 1


# ---------------------------------------------------------------------------- refusals


async def test_unknown_offset_is_system_error(broker: Broker, client: RemotingClient) -> None:
    await store_message(client, broker)
    before = broker.store.commit_log.max_offset
    offset = before + 4096
    response = await send_back(client, broker, offset)
    assert response.code == ResponseCode.SYSTEM_ERROR, response
    assert response.remark == f"look message by offset failed, {offset}"
    assert broker.store.commit_log.max_offset == before


async def test_unknown_group_without_auto_create_is_refused(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(store=FAST_LEVELS, auto_create_subscription_group=False)
    sent = await store_message(client, broker)
    before = broker.store.commit_log.max_offset
    response = await send_back(client, broker, commit_offset_of(sent), group="cg-unknown")
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, response
    assert int(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) == 26
    assert response.remark is not None and "cg-unknown" in response.remark
    assert broker.store.commit_log.max_offset == before
    assert broker.topics.get("%RETRY%cg-unknown") is None


async def test_retry_queue_nums_zero_drops_the_message(
    broker: Broker, client: RemotingClient
) -> None:
    await update_group(client, broker, retryQueueNums=0)
    sent = await store_message(client, broker)
    before = broker.store.commit_log.max_offset
    await send_back_ok(client, broker, commit_offset_of(sent))
    await send_back_ok(client, broker, commit_offset_of(sent), delay_level=-1)
    await asyncio.sleep(0.2)
    assert broker.store.commit_log.max_offset == before
    assert broker.topics.get(RETRY) is None
    assert broker.topics.get(DLQ) is None


async def test_read_only_retry_topic_is_no_permission(
    broker: Broker, client: RemotingClient
) -> None:
    ext = {
        "topic": RETRY,
        "defaultTopic": "TBW102",
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "4",
        "topicFilterType": "SINGLE_TAG",
    }
    response = await call(client, broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert response.code == ResponseCode.SUCCESS, response
    sent = await store_message(client, broker)
    before = broker.store.commit_log.max_offset
    response = await send_back(client, broker, commit_offset_of(sent))
    assert response.code == ResponseCode.NO_PERMISSION, response
    assert response.remark is not None and RETRY in response.remark
    assert broker.store.commit_log.max_offset == before


# -------------------------------------------------------------- a client's own re-send


@pytest.mark.parametrize(
    ("reconsume_times", "max_times", "dead"),
    [(3, 3, True), (4, 3, True), (2, 3, False)],
)
async def test_send_to_retry_topic_past_max_goes_to_the_dlq(
    broker: Broker, client: RemotingClient, reconsume_times: int, max_times: int, dead: bool
) -> None:
    """When 36 fails, Java re-sends the message itself to %RETRY%<group> with DELAY =
    3 + reconsumeTimes; the send path moves it to the DLQ once j >= l."""
    response = await store_message(
        client,
        broker,
        RETRY,
        b"resent",
        reconsume_times=reconsume_times,
        max_reconsume_times=max_times,
        props={
            "RETRY_TOPIC": TOPIC,
            "RECONSUME_TIME": str(reconsume_times),
            "MAX_RECONSUME_TIMES": str(max_times),
            "DELAY": str(3 + reconsume_times),
        },
    )
    await wait_dispatched(broker)
    if dead:
        assert count(broker, RETRY) == 0
        assert schedule_total(broker) == 0
        [(info, body)] = await stored(client, broker, DLQ)
        assert body == b"resent"
        assert info.topic == DLQ
        assert info.reconsume_times == reconsume_times
        assert record_props(info)["RETRY_TOPIC"] == TOPIC
        tc = broker.topics.get(DLQ)
        assert tc is not None
        assert (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    else:
        assert broker.topics.get(DLQ) is None
        [(parked, _)] = await stored(client, broker, SCHEDULE_TOPIC, 2 + reconsume_times)
        assert record_props(parked)["REAL_TOPIC"] == RETRY
        assert response.ext_fields["queueId"] == "0"


async def test_send_to_retry_topic_uses_the_group_max_without_header(
    broker: Broker, client: RemotingClient
) -> None:
    await update_group(client, broker, retryMaxTimes=1)
    await store_message(client, broker, RETRY, b"resent", reconsume_times=1)
    [(info, _)] = await stored(client, broker, DLQ)
    assert info.reconsume_times == 1
