"""One message never freezes a delay level (issue 19, item 3), on real brokers.

Two halves. Group names are checked where they enter (heartbeat, CONSUMER_SEND_MSG_BACK,
subscription groups, pull, pop, offsets, and the SDK), so that ``%RETRY%<group>`` and
``%DLQ%<group>`` are always legal topics. And a message that a broker loop can never deliver
(the schedule service, the timer wheel, the transaction check, the pop revive) is set aside:
logged, counted, left readable, and the loop moves on to the messages behind it. Before, a
125-character group whose consumer returned RECONSUME_LATER parked a message for a retry topic
of 132 bytes, which the store refused every 100 ms, forever, and every later message of that
delay level waited behind it, restarts included.

A poisoned delay level or timer slot is written the way an older broker wrote it: straight
into the store, for a real topic that no check stops any more. The transaction check and the
pop revive are poisoned by what a client can still send: properties a few bytes under the
32 KiB limit, which the loop's own additions (TRANSACTION_CHECK_TIMES; RETRY_TOPIC and
ORIGIN_MESSAGE_ID) push over it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

import pytest
import structlog
from prometheus_client import generate_latest

from broker.broker import Broker
from broker.metrics import BrokerCollector, registry_of
from broker.topics import TIMER_TOPIC
from client.errors import InvalidArgumentError
from client.producer import Producer
from client.push_consumer import PushConsumer
from client.simple_consumer import SimpleConsumer
from codec import (
    MAX_PROPERTIES_BYTES,
    MessageInner,
    decode_offset_msg_id,
    decode_properties,
    encode_properties,
    inner_from_record,
)
from remoting.bodies import ConsumerData, HeartbeatData, SubscriptionGroupConfig
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    PopMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from remoting.route import dumps
from store.results import PutMessageStatus
from tests.broker.test_pop import pop
from tests.broker.test_transaction import producer, send_half
from tests.support import (
    BrokerFactory,
    ClientFactory,
    call,
    pull,
    records,
    send,
    send_ok,
    wait_dispatched,
    wait_until,
)

LONG_GROUP = "g" * 125  # legal characters, under Apache's client limit of 255
LONGEST = "g" * 120  # the longest group: its retry topic has 127 characters
LEVELS_MS = [100 * (n + 1) for n in range(18)]
FAST_LEVELS = {"message_delay_level": " ".join(f"{ms}ms" for ms in LEVELS_MS)}
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
WAIT_S = 5.0  # a blocked loop never gets there: the bounded wait is what fails


def set_aside_metric(broker: Broker, service: str) -> float:
    text = generate_latest(registry_of(BrokerCollector(broker))).decode()
    m = re.search(
        rf'^rocketmq_messages_set_aside_total{{[^}}]*service="{service}"[^}}]*}} (\S+)$',
        text,
        re.MULTILINE,
    )
    assert m is not None, text
    return float(m.group(1))


def saved_delay_offset(broker: Broker, *, level: int) -> int | None:
    path = broker.schedule.path
    if not path.exists():
        return None
    value = json.loads(path.read_text())["offsetTable"].get(str(level))
    return None if value is None else int(value)


def one_event(logs: list[MutableMapping[str, Any]], event: str) -> MutableMapping[str, Any]:
    found = [e for e in logs if e["event"] == event]
    assert len(found) == 1, [e["event"] for e in logs]
    return found[0]


async def view(client: RemotingClient, broker: Broker, msg_id: str) -> tuple[bytes, str]:
    """VIEW_MESSAGE_BY_ID (what ``mqadmin queryMsgById`` sends): (body, topic) of the record."""
    _host, offset = decode_offset_msg_id(msg_id)
    response = await call(
        client, broker.address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}
    )
    assert response.code == ResponseCode.SUCCESS, response
    info, inner = inner_from_record(response.body_bytes)
    return bytes(inner.body), info.topic


def padded(sent: Mapping[str, str], added: Mapping[str, str], room: int) -> str:
    """A ``pad`` value for ``sent`` such that with what the broker adds on store
    (``added``) the stored properties are ``room`` bytes short of the 32 KiB limit."""
    without = len(encode_properties({**sent, "pad": "", **added}))
    return "p" * (MAX_PROPERTIES_BYTES - room - without)


# ------------------------------------------------------------------- group names


async def test_a_heartbeat_with_a_group_too_long_for_its_retry_topic_is_refused(
    broker: Broker, client: RemotingClient
) -> None:
    data = HeartbeatData(
        "10.0.0.1@poison",
        ["pg-ok"],
        [ConsumerData(LONG_GROUP), ConsumerData(LONGEST), ConsumerData("bad/group")],
    )
    response = await call(client, broker.address, RequestCode.HEART_BEAT, body=data.encode())
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, response
    remark = response.remark or ""
    assert LONG_GROUP in remark and "120" in remark
    assert "bad/group" in remark and "illegal characters" in remark
    # Nothing was made for either: no retry topic, no group, no registration.
    for bad in (LONG_GROUP, "bad/group"):
        assert broker.topics.get("%RETRY%" + bad) is None
        assert bad not in broker.subscription_groups.table
        assert broker.consumers.get(bad) is None
    # The rest of the heartbeat counts, as RocketMQ 5 takes it; 120 characters make a
    # retry topic of 127, the longest there is.
    assert broker.consumers.get(LONGEST) is not None
    assert broker.topics.get("%RETRY%" + LONGEST) is not None
    assert "pg-ok" in broker.producers.groups


@pytest.mark.parametrize("group", [LONG_GROUP, "bad/group", "g" * 121])
async def test_a_send_back_for_a_group_that_cannot_have_a_retry_topic_is_refused(
    broker: Broker, client: RemotingClient, group: str
) -> None:
    sent = await send_ok(client, broker.address, "TopicPoison")
    _host, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delay_level=0)
    response = await call(
        client, broker.address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
    )
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, response
    assert group in (response.remark or "")
    await wait_dispatched(broker)
    assert broker.store.get_max_offset(SCHEDULE_TOPIC, 2) == 0  # nothing parked
    assert broker.topics.get("%RETRY%" + group) is None


async def test_other_requests_that_would_make_state_for_a_bad_group_are_refused(
    broker: Broker, client: RemotingClient
) -> None:
    await send_ok(client, broker.address, "TopicPop")
    addr = broker.address
    cfg = SubscriptionGroupConfig(LONG_GROUP)
    created = await call(
        client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=dumps(cfg.to_json())
    )
    assert created.code == ResponseCode.INVALID_PARAMETER, created  # as RocketMQ 5
    assert LONG_GROUP in (created.remark or "")
    pulled = await pull(client, addr, "TopicPop", group=LONG_GROUP)
    assert pulled.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, pulled
    assert LONG_GROUP in (pulled.remark or "")
    commit = UpdateConsumerOffsetRequestHeader(
        consumer_group="bad/group", topic="TopicPop", queue_id=0, commit_offset=1
    )
    committed = await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields())
    assert committed.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, committed
    popped, _ = await pop(client, broker, group=LONG_GROUP)
    assert popped.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, popped
    # A legal group and a legal topic whose pop retry topic %RETRY%<group>_<topic> is not.
    long_topic = "T" * 100
    await send_ok(client, addr, long_topic)
    header = PopMessageRequestHeader(
        consumer_group="c" * 30,
        topic=long_topic,
        queue_id=-1,
        max_msg_nums=1,
        invisible_time=60_000,
        poll_time=0,
        born_time=0,
        init_mode=0,
        exp_type="TAG",
        exp="*",
    )
    popped = await call(client, addr, RequestCode.POP_MESSAGE, header.to_ext_fields())
    assert popped.code == ResponseCode.INVALID_PARAMETER, popped
    assert "retry topic" in (popped.remark or "")
    for bad in (LONG_GROUP, "bad/group"):
        assert bad not in broker.subscription_groups.table
        assert not any(key.endswith("@" + bad) for key in broker.offsets.table)


def test_the_sdk_refuses_a_consumer_group_it_could_never_use() -> None:
    with pytest.raises(InvalidArgumentError, match="longer than 120"):
        PushConsumer("g" * 121, "127.0.0.1:9876")
    with pytest.raises(InvalidArgumentError, match="longer than 120"):
        SimpleConsumer("g" * 121, "127.0.0.1:9876")
    PushConsumer("g" * 120, "127.0.0.1:9876")
    Producer("g" * 200, "127.0.0.1:9876")  # a producer group makes no topic
    consumer = SimpleConsumer("c" * 30, "127.0.0.1:9876")
    with pytest.raises(InvalidArgumentError, match="retry topic"):
        consumer.subscribe("T" * 100)


@pytest.mark.parametrize(
    ("status", "for_good"),
    [
        (PutMessageStatus.MESSAGE_ILLEGAL, True),
        (PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, True),
        (PutMessageStatus.SERVICE_NOT_AVAILABLE, False),  # a full disk, a store stopping
        (PutMessageStatus.CREATE_MAPPED_FILE_FAILED, False),
        (PutMessageStatus.OS_PAGECACHE_BUSY, False),
        (PutMessageStatus.UNKNOWN_ERROR, False),  # a failed write
    ],
)
def test_only_refusals_about_the_message_itself_set_it_aside(
    status: PutMessageStatus, for_good: bool
) -> None:
    from broker.parked import refused_for_good  # here: the test fails, not the module

    assert refused_for_good(status) is for_good


# ---------------------------------------------------------------- schedule service


@pytest.mark.parametrize("real_topic", ["%RETRY%" + LONG_GROUP, "%RETRY%bad/group"])
async def test_a_poisoned_delay_level_sets_the_message_aside_and_moves_on(
    start_broker: BrokerFactory, client: RemotingClient, real_topic: str
) -> None:
    broker = await start_broker(store=FAST_LEVELS)
    # What a send-back for such a group stored before group names were checked.
    with structlog.testing.capture_logs() as logs:
        parked = await broker.store.put_message(
            MessageInner(
                topic=real_topic,
                queue_id=0,
                body=b"poison",
                properties=encode_properties({"UNIQ_KEY": "POISON0001", "DELAY": "1"}),
                born_timestamp=int(time.time() * 1000),
                store_host=broker.store_host,
                delay_level=1,
            )
        )
        assert parked.status is PutMessageStatus.PUT_OK
        later = await send(client, broker.address, "TopicDelayed", b"later", extra={"DELAY": "1"})
        assert later.code == ResponseCode.SUCCESS, later
        await wait_until(
            lambda: broker.store.get_max_offset("TopicDelayed", 0) == 1,
            "the later message of the same level to be delivered",
            WAIT_S,
        )
    assert broker.schedule.set_aside == 1
    assert set_aside_metric(broker, "schedule") == 1
    line = one_event(logs, "scheduled_message_set_aside")
    assert line["log_level"] == "error"
    assert (line["topic"], line["level"], line["queue_offset"]) == (real_topic, 1, 0)
    assert line["status"] == "MESSAGE_ILLEGAL" and line["uniq_key"] == "POISON0001"
    # Still readable by its msgId, where it was parked.
    assert await view(client, broker, line["msg_id"]) == (b"poison", SCHEDULE_TOPIC)
    # Progress past it is on disk already: a restart does not meet it again.
    await wait_until(
        lambda: saved_delay_offset(broker, level=1) == 2,
        "delayOffset.json past the message set aside",
        WAIT_S,
    )


# ------------------------------------------------------------------------- timer


async def test_a_poisoned_timer_slot_sets_the_message_aside_and_moves_on(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(timer_precision_ms=100)
    due = int(time.time() * 1000) + 200
    # A timer message for a real topic the store does not take, as an older broker kept it.
    props = {"REAL_TOPIC": "bad/topic", "REAL_QID": "0", "TIMER_OUT_MS": str(due)}
    with structlog.testing.capture_logs() as logs:
        parked = await broker.store.put_message(
            MessageInner(
                topic=TIMER_TOPIC,
                queue_id=0,
                body=b"poison",
                properties=encode_properties({"UNIQ_KEY": "POISON0002", **props}),
                born_timestamp=due - 200,
                store_host=broker.store_host,
            )
        )
        assert parked.status is PutMessageStatus.PUT_OK
        later = await send(
            client, broker.address, "TopicTimer", b"later", extra={"TIMER_DELAY_MS": "400"}
        )
        assert later.code == ResponseCode.SUCCESS, later
        await wait_until(
            lambda: broker.store.get_max_offset("TopicTimer", 0) == 1,
            "the later timer message to be delivered",
            WAIT_S,
        )
    assert broker.timers.set_aside == 1 and broker.timers.pending == 0
    assert set_aside_metric(broker, "timer") == 1
    line = one_event(logs, "timer_message_set_aside")
    assert (line["topic"], line["status"], line["deliver_ms"]) == (
        "bad/topic",
        "MESSAGE_ILLEGAL",
        due,
    )
    assert await view(client, broker, line["msg_id"]) == (b"poison", TIMER_TOPIC)


# ------------------------------------------------------------ transaction check


async def test_a_half_message_that_cannot_be_appended_again_does_not_stop_the_check(
    start_broker: BrokerFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    broker = await start_broker(transaction_check_interval_ms=100, transaction_timeout_ms=200)
    _producer, checks = await producer(start_client, broker)
    # What the send path stores: the client's properties, then REAL_TOPIC, REAL_QID, CLUSTER.
    sent = {"TAGS": "TagT", "UNIQ_KEY": "U" * 24, "WAIT": "true", "TRAN_MSG": "true"}
    sent["PGROUP"] = "pg-tx"
    added = {"REAL_TOPIC": "TopicTx", "REAL_QID": "1", "CLUSTER": broker.config.broker_cluster_name}
    pad = padded(sent, added, room=10)  # TRANSACTION_CHECK_TIMES=1 takes 26 more
    with structlog.testing.capture_logs() as logs:
        poison = await send_half(client, broker, b"poison", extra={"pad": pad})
        stored = broker.store.look_message_by_offset(poison.commit_log_offset)
        assert stored is not None
        assert len(inner_from_record(stored)[0].properties.encode()) == MAX_PROPERTIES_BYTES - 10
        later = await send_half(client, broker, b"later")
        await wait_until(
            lambda: any(c.ext_fields.get("msgId") == later.msg_id for c in checks.received),
            "the later half message to be checked",
            WAIT_S,
        )
    assert broker.transactions.set_aside == 1
    assert set_aside_metric(broker, "transaction_check") == 1
    line = one_event(logs, "transaction_half_set_aside")
    assert (line["status"], line["uniq_key"]) == ("PROPERTIES_SIZE_EXCEEDED", poison.msg_id)
    # Its producer was asked one last time, at the half record's own offsets.
    asked = [c for c in checks.received if c.ext_fields.get("msgId") == poison.msg_id]
    assert asked and int(asked[0].ext_fields["commitLogOffset"]) == poison.commit_log_offset
    body, topic = await view(client, broker, line["msg_id"])
    assert (body, topic) == (b"poison", "RMQ_SYS_TRANS_HALF_TOPIC")


# ------------------------------------------------------------------- pop revive


async def test_a_message_that_cannot_be_revived_does_not_stop_the_revive(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker()
    topic, group = "TopicPop", "cg-pop"
    # Revive adds RETRY_TOPIC and ORIGIN_MESSAGE_ID: over the limit with 10 bytes of room.
    sent = {"UNIQ_KEY": "U" * 24}  # WAIT is not stored for an undelayed message
    pad = padded(sent, {"CLUSTER": broker.config.broker_cluster_name}, room=10)
    response = await send(
        client, broker.address, topic, b"poison", queue_id=0, extra={**sent, "pad": pad}
    )
    assert response.code == ResponseCode.SUCCESS, response
    _host, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    stored = broker.store.look_message_by_offset(offset)
    assert stored is not None
    assert len(inner_from_record(stored)[0].properties.encode()) == MAX_PROPERTIES_BYTES - 10
    await send_ok(client, broker.address, topic, b"later", queue_id=0)
    await wait_dispatched(broker)
    retry = f"%RETRY%{group}_{topic}"
    with structlog.testing.capture_logs() as logs:
        popped, got = await pop(client, broker, group=group, queue_id=0, invisible_ms=300)
        assert popped.code == ResponseCode.SUCCESS, popped
        assert [m.body for m in got] == [b"poison", b"later"]  # one checkpoint, not acked
        await wait_until(
            lambda: broker.store.get_max_offset(retry, 0) == 1,
            "the later message to be revived",
            WAIT_S,
        )
    assert broker.pop.set_aside == 1
    assert set_aside_metric(broker, "pop_revive") == 1
    line = one_event(logs, "pop_revive_message_set_aside")
    assert (line["status"], line["queue_offset"], line["to"]) == (
        "PROPERTIES_SIZE_EXCEEDED",
        0,
        retry,
    )
    await wait_until(lambda: not broker.pop.checkpoints, "the checkpoint to close", WAIT_S)
    assert await view(client, broker, line["msg_id"]) == (b"poison", topic)
    revived = await pull(client, broker.address, retry, group="cg-check")
    assert revived.code == ResponseCode.SUCCESS, revived
    assert [
        decode_properties(i.properties)["RETRY_TOPIC"] for i in records(revived.body_bytes)
    ] == [topic]
