"""Admin and query codes on the wire: topics (and their routes via the name server), queue
offsets and time lookups, stats, runtime info, consumer offsets, subscription groups,
QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, QUERY_CONSUME_QUEUE and unknown codes (protocol.md §5,
§7.3, §7.7, §7.8, §8.4, §8.6)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from broker.broker import Broker
from broker.logs import event_fields
from broker.namesrv.server import NameServer
from codec import decode_offset_msg_id
from remoting.bodies import (
    SubscriptionGroupConfig,
    TopicList,
    decode_consume_stats,
    decode_topic_stats,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.headers import CreateTopicRequestHeader
from remoting.route import MessageQueue, TopicRouteData, loads
from tests.broker.conftest import runtime_info
from tests.support import (
    BrokerFactory,
    call,
    pull,
    record_body,
    record_props,
    records,
    send,
    send_ok,
    wait_dispatched,
)


def create_topic_header(
    topic: str,
    *,
    read: int = 4,
    write: int = 4,
    perm: int = 6,
    filter_type: str = "SINGLE_TAG",
) -> dict[str, str]:
    return CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=read,
        write_queue_nums=write,
        perm=perm,
        topic_filter_type=filter_type,
        topic_sys_flag=0,
        order=False,
    ).to_ext_fields()


async def create_topic(
    client: RemotingClient,
    broker: Broker,
    topic: str,
    *,
    read: int = 4,
    write: int = 4,
    perm: int = 6,
    filter_type: str = "SINGLE_TAG",
) -> RemotingCommand:
    return await call(
        client,
        broker.address,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        create_topic_header(topic, read=read, write=write, perm=perm, filter_type=filter_type),
    )


async def route_code(client: RemotingClient, namesrv: NameServer, topic: str) -> RemotingCommand:
    return await call(client, namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def wait_route(
    client: RemotingClient, namesrv: NameServer, topic: str, *, present: bool, timeout_s: float = 5
) -> RemotingCommand:
    """Poll the name server until ``topic`` has (or has no) route; fail after the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        response = await route_code(client, namesrv, topic)
        if (response.code == ResponseCode.SUCCESS) == present:
            return response
        if loop.time() > deadline:
            pytest.fail(f"route of {topic} still {'missing' if present else 'present'}")
        await asyncio.sleep(0.05)


async def all_topic_config(client: RemotingClient, broker: Broker) -> dict[str, object]:
    response = await call(client, broker.address, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    doc = loads(response.body_bytes)
    assert set(doc) == {"dataVersion", "topicConfigTable"}
    assert set(doc["dataVersion"]) >= {"counter", "timestamp"}
    table = doc["topicConfigTable"]
    assert isinstance(table, dict)
    return table


async def queue_call(
    client: RemotingClient, broker: Broker, code: int, topic: str, queue_id: int = 0, **extra: str
) -> RemotingCommand:
    response = await call(
        client, broker.address, code, {"topic": topic, "queueId": str(queue_id), **extra}
    )
    assert response.code == ResponseCode.SUCCESS, response
    return response


# ------------------------------------------------------------------------------ topics


async def test_create_topic_and_see_its_route(
    broker: Broker, namesrv: NameServer, client: RemotingClient
) -> None:
    response = await create_topic(client, broker, "TopicAdmin", read=3, write=5, perm=6)
    assert response.code == ResponseCode.SUCCESS, response
    tc = (await all_topic_config(client, broker))["TopicAdmin"]
    assert tc == {
        "order": False,
        "perm": 6,
        "readQueueNums": 3,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "TopicAdmin",
        "topicSysFlag": 0,
        "writeQueueNums": 5,
    }
    found = await wait_route(client, namesrv, "TopicAdmin", present=True)
    route = TopicRouteData.decode(found.body_bytes)
    (qd,) = route.queue_datas
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (3, 5, 6)
    assert route.broker_datas[0].broker_addrs == {0: broker.address}

    # An update reaches the route too.
    response = await create_topic(client, broker, "TopicAdmin", read=8, write=8, perm=6)
    assert response.code == ResponseCode.SUCCESS, response
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while True:
        found = await wait_route(client, namesrv, "TopicAdmin", present=True)
        if TopicRouteData.decode(found.body_bytes).queue_datas[0].write_queue_nums == 8:
            break
        assert loop.time() < deadline, "the updated queue counts never reached the route"
        await asyncio.sleep(0.05)

    names = await call(client, broker.address, RequestCode.GET_TOPIC_NAME_LIST)
    assert "TopicAdmin" in TopicList.decode(names.body_bytes).topic_list


async def test_tbw102_route_is_registered(
    broker: Broker, namesrv: NameServer, client: RemotingClient
) -> None:
    response = await route_code(client, namesrv, "TBW102")
    assert response.code == ResponseCode.SUCCESS, response
    (qd,) = TopicRouteData.decode(response.body_bytes).queue_datas
    assert qd.perm == 7
    assert qd.write_queue_nums == broker.config.default_topic_queue_nums


async def test_auto_created_topic_reaches_the_name_server(
    broker: Broker, namesrv: NameServer, client: RemotingClient
) -> None:
    assert (await route_code(client, namesrv, "TopicAuto")).code == ResponseCode.TOPIC_NOT_EXIST
    await send_ok(client, broker.address, "TopicAuto")
    await wait_route(client, namesrv, "TopicAuto", present=True)


@pytest.mark.parametrize(
    "topic",
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "BenchmarkTest",
        "rmq_sys_anything",
        "DefaultCluster",
        "broker-a",
    ],
)
async def test_create_system_topic_is_refused(
    broker: Broker, client: RemotingClient, topic: str
) -> None:
    response = await create_topic(client, broker, topic)
    assert response.code == ResponseCode.SYSTEM_ERROR, response
    assert response.remark


@pytest.mark.parametrize("topic", ["bad topic", "T" * 128, "a/b"])
async def test_create_topic_with_bad_name_is_refused(
    broker: Broker, client: RemotingClient, topic: str
) -> None:
    response = await create_topic(client, broker, topic)
    assert response.code == ResponseCode.SYSTEM_ERROR, response
    assert topic not in await all_topic_config(client, broker)


async def test_topic_perm_is_enforced(broker: Broker, client: RemotingClient) -> None:
    assert (await create_topic(client, broker, "ReadOnly", perm=4)).code == ResponseCode.SUCCESS
    assert (await create_topic(client, broker, "WriteOnly", perm=2)).code == ResponseCode.SUCCESS
    response = await send(client, broker.address, "ReadOnly")
    assert response.code == ResponseCode.NO_PERMISSION
    await send_ok(client, broker.address, "WriteOnly")
    response = await pull(client, broker.address, "WriteOnly")
    assert response.code == ResponseCode.NO_PERMISSION


async def test_read_only_broker_refuses_sends(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(broker_permission=4)
    response = await send(client, broker.address, "TopicRO")
    assert response.code == ResponseCode.NO_PERMISSION


async def test_delete_topic_in_broker(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicDel", b"old")
    await wait_dispatched(broker)
    await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-del", "topic": "TopicDel", "queueId": "0", "commitOffset": "1"},
    )
    response = await call(
        client, broker.address, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TopicDel"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert "TopicDel" not in await all_topic_config(client, broker)
    assert broker.offsets.query("cg-del", "TopicDel", 0) == -1
    assert (await pull(client, broker.address, "TopicDel")).code == ResponseCode.TOPIC_NOT_EXIST

    # Re-created on the next send, it starts empty.
    response = await send_ok(client, broker.address, "TopicDel", b"new")
    assert response.ext_fields["queueOffset"] == "0"
    await wait_dispatched(broker)
    response = await pull(client, broker.address, "TopicDel")
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    assert [record_body(body, infos, n) for n in range(len(infos))] == [b"new"]


async def test_delete_system_topic_is_refused(broker: Broker, client: RemotingClient) -> None:
    response = await call(
        client, broker.address, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"}
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "TBW102" in await all_topic_config(client, broker)


# ----------------------------------------------------------------- offsets and times


async def test_queue_offsets_and_times(broker: Broker, client: RemotingClient) -> None:
    before_ms = int(time.time() * 1000)
    for n in range(3):
        await send_ok(client, broker.address, "TopicTimes", f"{n}".encode())
        await asyncio.sleep(0.02)  # distinct store timestamps
    await wait_dispatched(broker)
    after_ms = int(time.time() * 1000)

    r = await queue_call(client, broker, RequestCode.GET_MAX_OFFSET, "TopicTimes")
    assert r.ext_fields["offset"] == "3"
    r = await queue_call(client, broker, RequestCode.GET_MIN_OFFSET, "TopicTimes")
    assert r.ext_fields["offset"] == "0"
    r = await queue_call(client, broker, RequestCode.GET_MAX_OFFSET, "TopicTimes", 1)
    assert r.ext_fields["offset"] == "0"
    r = await queue_call(client, broker, RequestCode.GET_MAX_OFFSET, "NoSuchTopic")
    assert r.ext_fields["offset"] == "0"

    r = await queue_call(client, broker, RequestCode.GET_EARLIEST_MSG_STORETIME, "TopicTimes")
    earliest = int(r.ext_fields["timestamp"])
    assert before_ms <= earliest <= after_ms

    r = await queue_call(
        client,
        broker,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        "TopicTimes",
        timestamp=str(before_ms - 60_000),
    )
    assert r.ext_fields["offset"] == "0"
    r = await queue_call(
        client,
        broker,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        "TopicTimes",
        timestamp=str(earliest),
    )
    assert r.ext_fields["offset"] == "0"
    r = await queue_call(
        client,
        broker,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        "TopicTimes",
        timestamp=str(after_ms + 60_000),
    )
    # RocketMQ answers the last message's offset for a time after every message.
    assert r.ext_fields["offset"] == "2"

    # Between two messages: the one closer in time.
    response = await pull(client, broker.address, "TopicTimes")
    stored = [i.store_timestamp for i in records(response.body_bytes)]
    assert stored == sorted(stored) and len(set(stored)) == 3
    for target, expected in (
        (stored[1] - 1, "1"),
        (stored[1] + 1, "1"),
        (stored[0] + 1, "0"),
        (stored[2], "2"),
    ):
        r = await queue_call(
            client,
            broker,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            "TopicTimes",
            timestamp=str(target),
        )
        assert r.ext_fields["offset"] == expected, (target, stored)

    # A queue with nothing in it.
    r = await queue_call(client, broker, RequestCode.GET_EARLIEST_MSG_STORETIME, "TopicTimes", 3)
    assert r.ext_fields["timestamp"] == "-1"
    r = await queue_call(
        client, broker, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "TopicTimes", 3, timestamp="1"
    )
    assert r.ext_fields["offset"] == "0"


# ------------------------------------------------------------------------------- stats


async def test_topic_stats(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicStats", queue_id=0)
    await send_ok(client, broker.address, "TopicStats", queue_id=0)
    await send_ok(client, broker.address, "TopicStats", queue_id=2)
    await wait_dispatched(broker)
    response = await call(
        client, broker.address, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TopicStats"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    stats = decode_topic_stats(response.body_bytes)
    name = broker.config.broker_name
    assert sorted(stats) == [MessageQueue("TopicStats", name, q) for q in range(4)]
    q0 = stats[MessageQueue("TopicStats", name, 0)]
    assert (q0.min_offset, q0.max_offset) == (0, 2)
    assert q0.last_update_timestamp > 0
    assert stats[MessageQueue("TopicStats", name, 2)].max_offset == 1
    assert stats[MessageQueue("TopicStats", name, 1)].max_offset == 0

    response = await call(
        client, broker.address, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"}
    )
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_consume_stats(broker: Broker, client: RemotingClient) -> None:
    for _ in range(3):
        await send_ok(client, broker.address, "TopicCS", queue_id=1)
    await wait_dispatched(broker)
    await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-cs", "topic": "TopicCS", "queueId": "1", "commitOffset": "2"},
    )
    response = await call(
        client,
        broker.address,
        RequestCode.GET_CONSUME_STATS,
        {"consumerGroup": "cg-cs", "topic": "TopicCS"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    tps, table = decode_consume_stats(response.body_bytes)
    assert tps >= 0
    q1 = table[MessageQueue("TopicCS", broker.config.broker_name, 1)]
    assert (q1.broker_offset, q1.consumer_offset) == (3, 2)
    assert q1.last_timestamp > 0
    # Without a topic: every topic the group has offsets for.
    response = await call(
        client, broker.address, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg-cs"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    _, table = decode_consume_stats(response.body_bytes)
    assert {mq.topic for mq in table} == {"TopicCS"}


async def test_broker_runtime_info(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicRt")
    table = await runtime_info(client, broker.address)
    for key in (
        "brokerVersion",
        "brokerVersionDesc",
        "bootTimestamp",
        "runtime",
        "commitLogMinOffset",
        "commitLogMaxOffset",
        "msgPutTotalTodayNow",
        "msgGetTotalTodayNow",
        "putTps",
        "getTransferedTps",
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "earliestMessageTimeStamp",
    ):
        assert key in table, key
    assert int(table["commitLogMaxOffset"]) > 0
    assert int(table["msgPutTotalTodayNow"]) >= 1


async def test_all_consumer_offset(broker: Broker, client: RemotingClient) -> None:
    for queue_id, offset in ((0, 5), (1, 7)):
        await call(
            client,
            broker.address,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {
                "consumerGroup": "cg-all",
                "topic": "TopicAll",
                "queueId": str(queue_id),
                "commitOffset": str(offset),
            },
        )
    response = await call(client, broker.address, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert response.code == ResponseCode.SUCCESS, response
    doc = loads(response.body_bytes)
    assert doc["offsetTable"]["TopicAll@cg-all"] == {"0": 5, "1": 7}


# ---------------------------------------------------------------- subscription groups


async def test_subscription_group_create_list_delete(
    broker: Broker, client: RemotingClient
) -> None:
    cfg = SubscriptionGroupConfig("cg-admin", retry_queue_nums=3, retry_max_times=5)
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=b'{"groupName":"cg-admin","retryQueueNums":3,"retryMaxTimes":5}',
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(client, broker.address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    doc = loads(response.body_bytes)
    assert "dataVersion" in doc
    assert doc["subscriptionGroupTable"]["cg-admin"] == cfg.to_json()

    response = await call(
        client, broker.address, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "cg-admin"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(client, broker.address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert "cg-admin" not in loads(response.body_bytes)["subscriptionGroupTable"]

    response = await call(
        client, broker.address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"nope"
    )
    assert response.code == ResponseCode.SYSTEM_ERROR


async def test_disabled_group_may_not_pull(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicOff")
    await wait_dispatched(broker)
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=b'{"groupName":"cg-off","consumeEnable":false}',
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await pull(client, broker.address, "TopicOff", group="cg-off")
    assert response.code == ResponseCode.NO_PERMISSION


async def test_unknown_group_without_auto_create_may_not_pull(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(auto_create_subscription_group=False)
    await send_ok(client, broker.address, "TopicNoGroup")
    await wait_dispatched(broker)
    response = await pull(client, broker.address, "TopicNoGroup", group="cg-unknown")
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


# ------------------------------------------------------------------------------ queries


async def query_message(
    client: RemotingClient, broker: Broker, topic: str, key: str, **extra: str
) -> RemotingCommand:
    return await call(
        client,
        broker.address,
        RequestCode.QUERY_MESSAGE,
        {
            "topic": topic,
            "key": key,
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": str(int(time.time() * 1000) + 60_000),
            **extra,
        },
    )


async def test_query_message_by_key(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicKeys", b"first", keys="order-1 shared")
    await send_ok(client, broker.address, "TopicKeys", b"second", keys="order-2 shared")
    await wait_dispatched(broker)

    response = await query_message(client, broker, "TopicKeys", "order-2")
    assert response.code == ResponseCode.SUCCESS, response
    assert "indexLastUpdateTimestamp" in response.ext_fields
    assert "indexLastUpdatePhyoffset" in response.ext_fields
    body = response.body_bytes
    infos = records(body)
    # The index stores hashes; clients filter again by key. Ours must be among them.
    matching = [
        record_body(body, infos, n)
        for n, i in enumerate(infos)
        if "order-2" in record_props(i).get("KEYS", "").split()
    ]
    assert matching == [b"second"]

    response = await query_message(client, broker, "TopicKeys", "shared")
    assert response.code == ResponseCode.SUCCESS, response
    assert len(records(response.body_bytes)) == 2

    response = await query_message(client, broker, "TopicKeys", "no-such-key")
    assert response.code == ResponseCode.QUERY_NOT_FOUND

    # Outside the time range.
    response = await query_message(client, broker, "TopicKeys", "order-1", endTimestamp="1000")
    assert response.code == ResponseCode.QUERY_NOT_FOUND


async def test_query_message_by_unique_key(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicUniq", b"u", extra={"UNIQ_KEY": "AC11000100FF"})
    await wait_dispatched(broker)
    response = await query_message(
        client, broker, "TopicUniq", "AC11000100FF", _UNIQUE_KEY_QUERY="true"
    )
    assert response.code == ResponseCode.SUCCESS, response
    (info,) = records(response.body_bytes)
    assert record_props(info)["UNIQ_KEY"] == "AC11000100FF"


async def test_view_message_by_id(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicView", b"before")
    response = await send_ok(client, broker.address, "TopicView", b"viewed", tags="TagV")
    _host, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    response = await call(
        client, broker.address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}
    )
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    (info,) = records(body)
    assert info.commit_log_offset == offset
    assert record_body(body, [info], 0) == b"viewed"
    assert record_props(info)["TAGS"] == "TagV"


@pytest.mark.parametrize("where", ["beyond-end", "inside-a-record", "negative"])
async def test_view_message_at_a_bad_offset_is_system_error(
    broker: Broker, client: RemotingClient, where: str
) -> None:
    response = await send_ok(client, broker.address, "TopicView2", b"x" * 100)
    _host, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    bad = {"beyond-end": offset + 1_000_000, "inside-a-record": offset + 40, "negative": -20}
    response = await call(
        client, broker.address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(bad[where])}
    )
    assert response.code == ResponseCode.SYSTEM_ERROR, response
    await send_ok(client, broker.address, "TopicView2")


async def test_query_consume_queue(broker: Broker, client: RemotingClient) -> None:
    offsets = []
    for tag in ("TagA", "TagB"):
        response = await send_ok(client, broker.address, "TopicCQ", tags=tag)
        offsets.append(decode_offset_msg_id(response.ext_fields["msgId"])[1])
    await wait_dispatched(broker)
    response = await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUME_QUEUE,
        {"topic": "TopicCQ", "queueId": "0", "index": "0", "count": "10"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    doc = loads(response.body_bytes)
    assert (doc["minQueueIndex"], doc["maxQueueIndex"]) == (0, 2)
    assert [e["physicOffset"] for e in doc["queueData"]] == offsets
    assert [e["tagsCode"] for e in doc["queueData"]] == [2598919, 2598920]

    response = await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUME_QUEUE,
        {"topic": "NoSuchTopic", "queueId": "0", "index": "0", "count": "10"},
    )
    assert response.code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize(
    "code",
    [9999, RequestCode.GET_ROUTEINFO_BY_TOPIC],
    ids=["unknown", "namesrv-code"],
)
async def test_unknown_code_is_request_code_not_supported(
    broker: Broker, client: RemotingClient, code: int
) -> None:
    response = await call(client, broker.address, code, {"topic": "T"})
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == f" request type {int(code)} not supported"


async def test_consume_stats_cover_every_read_queue(broker: Broker, client: RemotingClient) -> None:
    response = await create_topic(client, broker, "TopicRW", read=6, write=2)
    assert response.code == ResponseCode.SUCCESS, response
    await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-rw", "topic": "TopicRW", "queueId": "5", "commitOffset": "0"},
    )
    response = await call(
        client,
        broker.address,
        RequestCode.GET_CONSUME_STATS,
        {"consumerGroup": "cg-rw", "topic": "TopicRW"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    _, table = decode_consume_stats(response.body_bytes)
    assert sorted(mq.queue_id for mq in table) == [0, 1, 2, 3, 4, 5]


async def test_delete_subscription_group_keeps_consumer_offsets(
    broker: Broker, client: RemotingClient
) -> None:
    await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-keepoff", "topic": "TopicKO", "queueId": "0", "commitOffset": "4"},
    )
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=b'{"groupName":"cg-keepoff"}',
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(
        client, broker.address, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "cg-keepoff"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "cg-keepoff", "topic": "TopicKO", "queueId": "0"},
    )
    assert response.ext_fields.get("offset") == "4", response


async def test_a_slow_request_is_logged_with_its_code_and_time(
    broker: Broker, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    # remoting (shared with the SDK) logs through the standard library, not structlog
    caplog.set_level(logging.WARNING, logger="remoting")
    # The topic exists first: a send that creates one is answered later, once its route is
    # on the name servers, and its handler's line has no result (as for a parked pull).
    await send_ok(client, broker.address, "TopicSlow")
    broker.processors.slow_request_s = 0.0  # every request counts as slow here
    await send_ok(client, broker.address, "TopicSlow")
    slow = [f for r in caplog.records if (f := event_fields(r)) and f["event"] == "slow_request"]
    assert slow, caplog.records
    assert slow[0]["code"] in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
    assert slow[0]["took_ms"] >= 0 and slow[0]["lane"] and slow[0]["result"] == 0
    broker.processors.slow_request_s = None
    caplog.clear()
    await send_ok(client, broker.address, "TopicSlow")
    assert not [r for r in caplog.records if r.getMessage().startswith("slow_request ")]
