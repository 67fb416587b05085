"""Clients on the wire: heartbeats (Java and C++ bodies), consumer lists and the
NOTIFY_CONSUMER_IDS_CHANGED the broker sends, unregistering, consumer offsets and queue locks
(protocol.md §7.4, §8.5, §8.6, §13.2, §13.4)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from broker.broker import Broker
from broker.namesrv.server import NameServer
from remoting.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    LockBatchBody,
    MessageModel,
    decode_consumer_list,
    decode_lock_ok,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.route import MessageQueue, loads
from tests.broker.conftest import heartbeat
from tests.support import BrokerFactory, ClientFactory, call, send_ok, wait_dispatched, wait_until


class Notices:
    """Requests the broker sends to one client (a ProcessorTable on that client)."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []
        self.table = ProcessorTable()
        self.table.register(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            self._on_request,
            Lane("notices", workers=1, capacity=100),
        )

    async def _on_request(self, conn: Connection, request: RemotingCommand) -> None:
        self.received.append(request)

    async def wait(self, count: int, what: str) -> None:
        await wait_until(lambda: len(self.received) >= count, what)

    def groups(self) -> list[str]:
        return [r.ext_fields.get("consumerGroup", "") for r in self.received]


def consumer_count(broker: Broker, group: str) -> int:
    info = broker.consumers.get(group)
    return len(info.channels) if info is not None else 0


async def consumer_list(client: RemotingClient, broker: Broker, group: str) -> RemotingCommand:
    return await call(
        client, broker.address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
    )


async def consumer_ids(client: RemotingClient, broker: Broker, group: str) -> list[str]:
    response = await consumer_list(client, broker, group)
    assert response.code == ResponseCode.SUCCESS, response
    return sorted(decode_consumer_list(response.body_bytes))


async def all_topics(client: RemotingClient, broker: Broker) -> dict[str, dict[str, object]]:
    response = await call(client, broker.address, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    table = loads(response.body_bytes)["topicConfigTable"]
    assert isinstance(table, dict)
    return table


async def all_groups(client: RemotingClient, broker: Broker) -> dict[str, dict[str, object]]:
    response = await call(client, broker.address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    table = loads(response.body_bytes)["subscriptionGroupTable"]
    assert isinstance(table, dict)
    return table


# -------------------------------------------------------------------------- heartbeats


async def test_java_heartbeat_creates_retry_topic_and_group(
    broker: Broker, namesrv: NameServer, client: RemotingClient
) -> None:
    await heartbeat(
        client,
        broker.address,
        "10.0.0.5@12345#1",
        "cg-java",
        {"TopicJ": "TagA || TagB", "%RETRY%cg-java": "*"},
        producer_groups=("pg-java",),
    )
    topics = await all_topics(client, broker)
    retry = topics["%RETRY%cg-java"]
    assert (retry["readQueueNums"], retry["writeQueueNums"], retry["perm"]) == (1, 1, 6)
    assert "cg-java" in await all_groups(client, broker)
    assert await consumer_ids(client, broker, "cg-java") == ["10.0.0.5@12345#1"]
    info = broker.consumers.get("cg-java")
    assert info is not None
    assert info.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert info.message_model is MessageModel.CLUSTERING
    sub = info.subscriptions["TopicJ"]
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [2598919, 2598920]

    # The retry topic reaches the name server's routes soon after.
    async def retry_route_code() -> int:
        r = await call(
            client, namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%cg-java"}
        )
        return r.code

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    code = await retry_route_code()
    while code != ResponseCode.SUCCESS and loop.time() < deadline:
        await asyncio.sleep(0.05)
        code = await retry_route_code()
    assert code == ResponseCode.SUCCESS, "the retry topic never reached the name server"


async def test_cpp_heartbeat_with_ordinals_strings_and_missing_arrays(
    broker: Broker, client: RemotingClient
) -> None:
    body = {
        "clientID": "10.0.0.6@cpp-1",
        "consumerDataSet": [
            {
                "consumeFromWhere": "4",
                "consumeType": 0,
                "groupName": "cg-cpp",
                "messageModel": 0,
                "subscriptionDataSet": [
                    {"subString": "*", "subVersion": "1700000000000", "topic": "TopicCpp"}
                ],
            }
        ],
    }
    response = await call(
        client, broker.address, RequestCode.HEART_BEAT, body=json.dumps(body).encode()
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert "%RETRY%cg-cpp" in await all_topics(client, broker)
    assert "cg-cpp" in await all_groups(client, broker)
    assert await consumer_ids(client, broker, "cg-cpp") == ["10.0.0.6@cpp-1"]
    info = broker.consumers.get("cg-cpp")
    assert info is not None
    assert info.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert info.message_model is MessageModel.BROADCASTING
    assert info.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert info.subscriptions["TopicCpp"].sub_version == 1_700_000_000_000


async def test_producer_only_heartbeat(broker: Broker, client: RemotingClient) -> None:
    body = {"clientID": "10.0.0.7@p", "producerDataSet": [{"groupName": "pg-only"}]}
    response = await call(
        client, broker.address, RequestCode.HEART_BEAT, body=json.dumps(body).encode()
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert "pg-only" in broker.producers.groups


async def test_malformed_heartbeat_is_system_error(broker: Broker, client: RemotingClient) -> None:
    for body in (b"not json", b"[1,2]", b'{"consumerDataSet":[{"consumeType":"NOPE"}]}'):
        response = await call(client, broker.address, RequestCode.HEART_BEAT, body=body)
        assert response.code == ResponseCode.SYSTEM_ERROR, (body, response)
    await heartbeat(client, broker.address, "10.0.0.5@ok", "cg-ok", {"T": "*"})


# ---------------------------------------------------------------------- consumer list


async def test_consumer_list_of_unknown_group_is_system_error(
    broker: Broker, client: RemotingClient
) -> None:
    response = await consumer_list(client, broker, "cg-nobody")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and "no consumer for this group" in response.remark


async def test_second_consumer_makes_the_broker_notify_the_first(
    broker: Broker, start_client: ClientFactory
) -> None:
    first_notices, second_notices = Notices(), Notices()
    first = await start_client(processors=first_notices.table)
    second = await start_client(processors=second_notices.table)
    await heartbeat(first, broker.address, "10.0.0.1@a", "cg-n", {"TopicN": "*"})
    # Java notifies every channel of the group on a change, the joining one included.
    await first_notices.wait(1, "the first consumer's own join notice")
    first_notices.received.clear()

    await heartbeat(second, broker.address, "10.0.0.2@b", "cg-n", {"TopicN": "*"})
    await first_notices.wait(1, "NOTIFY_CONSUMER_IDS_CHANGED at the first consumer")
    notice = first_notices.received[0]
    assert notice.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert notice.is_oneway
    assert not notice.is_response
    assert notice.ext_fields["consumerGroup"] == "cg-n"
    assert await consumer_ids(first, broker, "cg-n") == ["10.0.0.1@a", "10.0.0.2@b"]

    # A repeated heartbeat with nothing new changes nothing and notifies nobody.
    first_notices.received.clear()
    await heartbeat(second, broker.address, "10.0.0.2@b", "cg-n", {"TopicN": "*"})
    await asyncio.sleep(0.1)
    assert first_notices.received == []


async def test_unregister_client_removes_the_consumer_and_notifies(
    broker: Broker, start_client: ClientFactory
) -> None:
    notices = Notices()
    first = await start_client(processors=notices.table)
    second = await start_client()
    await heartbeat(first, broker.address, "10.0.0.1@a", "cg-u", {"TopicU": "*"})
    await heartbeat(second, broker.address, "10.0.0.2@b", "cg-u", {"TopicU": "*"})
    await notices.wait(2, "the join notices")
    notices.received.clear()

    response = await call(
        second,
        broker.address,
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "10.0.0.2@b", "consumerGroup": "cg-u"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    await notices.wait(1, "the notice after UNREGISTER_CLIENT")
    assert notices.groups() == ["cg-u"]
    assert await consumer_ids(first, broker, "cg-u") == ["10.0.0.1@a"]

    # The last consumer leaving removes the group.
    response = await call(
        first,
        broker.address,
        RequestCode.UNREGISTER_CLIENT,
        {"clientID": "10.0.0.1@a", "consumerGroup": "cg-u", "producerGroup": "pg-u"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert (await consumer_list(first, broker, "cg-u")).code == ResponseCode.SYSTEM_ERROR


async def test_closed_connection_removes_the_consumer_and_notifies(
    broker: Broker, start_client: ClientFactory
) -> None:
    notices = Notices()
    first = await start_client(processors=notices.table)
    second = await start_client()
    await heartbeat(first, broker.address, "10.0.0.1@a", "cg-c", {"TopicC": "*"})
    await heartbeat(second, broker.address, "10.0.0.2@b", "cg-c", {"TopicC": "*"})
    await notices.wait(2, "the join notices")
    notices.received.clear()

    await second.shutdown()
    await notices.wait(1, "the notice after the second consumer's connection closed")
    assert notices.groups() == ["cg-c"]
    assert await consumer_ids(first, broker, "cg-c") == ["10.0.0.1@a"]


async def test_consumer_without_heartbeats_expires(
    start_broker: BrokerFactory, start_client: ClientFactory
) -> None:
    broker = await start_broker(channel_expired_ms=1000, client_scan_interval_ms=200)
    notices = Notices()
    silent = await start_client()
    alive = await start_client(processors=notices.table)
    await heartbeat(silent, broker.address, "10.0.0.1@silent", "cg-e", {"TopicE": "*"})

    async def keep_beating() -> None:
        while True:
            await heartbeat(alive, broker.address, "10.0.0.2@alive", "cg-e", {"TopicE": "*"})
            await asyncio.sleep(0.1)

    beating = asyncio.create_task(keep_beating())
    try:
        await notices.wait(1, "the join notice")
        notices.received.clear()
        await wait_until(
            lambda: consumer_count(broker, "cg-e") == 1,
            "the silent consumer to expire",
            timeout_s=5.0,
            interval_s=0.05,
        )
        await notices.wait(1, "the notice after the expiry")
        assert await consumer_ids(alive, broker, "cg-e") == ["10.0.0.2@alive"]
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


# --------------------------------------------------------------------------- offsets


async def query_offset(
    client: RemotingClient, broker: Broker, group: str, topic: str, queue_id: int = 0
) -> RemotingCommand:
    return await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)},
    )


async def test_query_offset_of_new_group_on_empty_queue_is_zero(
    broker: Broker, client: RemotingClient
) -> None:
    await send_ok(client, broker.address, "TopicQO", queue_id=0)
    for queue_id in (0, 1):  # one message in queue 0 (in memory), nothing in queue 1
        response = await query_offset(client, broker, "cg-new", "TopicQO", queue_id)
        assert response.code == ResponseCode.SUCCESS, response
        assert response.ext_fields["offset"] == "0"
    response = await query_offset(client, broker, "cg-new", "NoSuchTopic")
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["offset"] == "0"


async def test_update_then_query_consumer_offset(broker: Broker, client: RemotingClient) -> None:
    for n in range(3):
        await send_ok(client, broker.address, "TopicUO", f"{n}".encode())
    await wait_dispatched(broker)
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-uo", "topic": "TopicUO", "queueId": "0", "commitOffset": "2"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await query_offset(client, broker, "cg-uo", "TopicUO")
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["offset"] == "2"

    # Java persists offsets oneway.
    request = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-uo", "topic": "TopicUO", "queueId": "0", "commitOffset": "3"},
        oneway=True,
    )
    await client.invoke_oneway(broker.address, request)
    await wait_until(lambda: broker.offsets.query("cg-uo", "TopicUO", 0) == 3, "oneway update")
    response = await query_offset(client, broker, "cg-uo", "TopicUO")
    assert response.ext_fields["offset"] == "3"


# ------------------------------------------------------------------------------ locks


def mqs(broker: Broker, *queue_ids: int, topic: str = "TopicLock") -> list[MessageQueue]:
    return [MessageQueue(topic, broker.config.broker_name, q) for q in queue_ids]


async def lock(
    client: RemotingClient, broker: Broker, client_id: str, queues: list[MessageQueue]
) -> list[MessageQueue]:
    body = LockBatchBody("cg-lock", client_id, queues).encode()
    response = await call(client, broker.address, RequestCode.LOCK_BATCH_MQ, body=body)
    assert response.code == ResponseCode.SUCCESS, response
    return sorted(decode_lock_ok(response.body_bytes))


async def unlock(
    client: RemotingClient, broker: Broker, client_id: str, queues: list[MessageQueue]
) -> None:
    body = LockBatchBody("cg-lock", client_id, queues).encode()
    response = await call(client, broker.address, RequestCode.UNLOCK_BATCH_MQ, body=body)
    assert response.code == ResponseCode.SUCCESS, response


async def test_lock_batch_grants_refuses_and_unlocks(
    broker: Broker, client: RemotingClient
) -> None:
    assert await lock(client, broker, "client-a", mqs(broker, 0, 1)) == mqs(broker, 0, 1)
    # Another client gets only the free queue.
    assert await lock(client, broker, "client-b", mqs(broker, 0, 1, 2)) == mqs(broker, 2)
    # The holder renews.
    assert await lock(client, broker, "client-a", mqs(broker, 0, 1)) == mqs(broker, 0, 1)
    # Unlock by someone else does nothing; by the holder frees the queue.
    await unlock(client, broker, "client-b", mqs(broker, 0))
    assert await lock(client, broker, "client-b", mqs(broker, 0)) == []
    await unlock(client, broker, "client-a", mqs(broker, 0))
    assert await lock(client, broker, "client-b", mqs(broker, 0)) == mqs(broker, 0)


async def test_lock_expires_without_renewal(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(rebalance_lock_max_live_ms=200)
    assert await lock(client, broker, "client-a", mqs(broker, 0)) == mqs(broker, 0)
    assert await lock(client, broker, "client-b", mqs(broker, 0)) == []
    await asyncio.sleep(0.3)
    assert await lock(client, broker, "client-b", mqs(broker, 0)) == mqs(broker, 0)
    assert await lock(client, broker, "client-a", mqs(broker, 0)) == []


async def test_malformed_lock_body_is_system_error(broker: Broker, client: RemotingClient) -> None:
    response = await call(client, broker.address, RequestCode.LOCK_BATCH_MQ, body=b"{}")
    assert response.code == ResponseCode.SYSTEM_ERROR


async def test_check_client_config(broker: Broker, client: RemotingClient) -> None:
    def body(expression_type: str) -> bytes:
        sub = {"expressionType": expression_type, "subString": "a > 1", "topic": "T"}
        return json.dumps(
            {"clientId": "10.0.0.5@c", "group": "cg-check", "subscriptionData": sub}
        ).encode()

    response = await call(client, broker.address, RequestCode.CHECK_CLIENT_CONFIG, body=body("TAG"))
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(
        client, broker.address, RequestCode.CHECK_CLIENT_CONFIG, body=body("SQL92")
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "The broker does not support consumer to filter message by SQL92"
