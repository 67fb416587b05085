"""The statistics codes mqadmin's statsAll, brokerConsumeStats, cleanUnusedTopic, getAclConfig
and the exports read, against a real broker: VIEW_BROKER_STATS_DATA's minute window after two
samples, an unknown statistic refused as RocketMQ refuses it, every group's positions in one
ConsumeStatsList, who consumes a topic, the broker's system topics, the accounts of the ACL
file, and the consume queues of a deleted topic dropped."""

from __future__ import annotations

import json
from pathlib import Path

from broker.broker import Broker
from broker.stats import (
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from remoting.acl import AclClientHook, SessionCredentials
from remoting.bodies import (
    AclConfigBody,
    BrokerStatsData,
    GroupList,
    TopicList,
    decode_consume_stats_list,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.route import MessageQueue
from tests.broker.test_acl import ACL_FILE
from tests.support import BrokerFactory, pull, send_ok, wait_until

TOPIC = "TopicStats"


async def call(
    client: RemotingClient, broker: Broker, code: int, fields: dict[str, str] | None = None
) -> RemotingCommand:
    return await client.invoke(broker.address, RemotingCommand.request(code, fields or {}), 5)


async def view(client: RemotingClient, broker: Broker, name: str, key: str) -> RemotingCommand:
    fields = {"statsName": name, "statsKey": key}
    return await call(client, broker, RequestCode.VIEW_BROKER_STATS_DATA, fields)


async def test_stats_windows_count_puts_gets_and_send_backs(
    broker: Broker, client: RemotingClient
) -> None:
    broker.topics.create_internal(TOPIC, 2, 6)
    unknown = await view(client, broker, TOPIC_PUT_NUMS, TOPIC)
    assert unknown.code == ResponseCode.SYSTEM_ERROR
    assert unknown.remark == f"The stats <TOPIC_PUT_NUMS> <{TOPIC}> not exist"
    await send_ok(client, broker.address, TOPIC, b"x" * 10, queue_id=0)
    broker.stats.sample()  # the broker samples every 10 s; the test does it now
    for _ in range(4):
        await send_ok(client, broker.address, TOPIC, b"y" * 100, queue_id=1)
    await wait_until(lambda: broker.store.get_max_offset(TOPIC, 1) == 4, "dispatch")
    got = await pull(client, broker.address, TOPIC, queue_id=1, group="cg-stats")
    assert got.code == ResponseCode.SUCCESS
    broker.stats.sample()

    answer = await view(client, broker, TOPIC_PUT_NUMS, TOPIC)
    assert answer.code == ResponseCode.SUCCESS
    data = BrokerStatsData.decode(answer.body_bytes)
    # Five sends: the first one before the first sample counts too (a statistic is 0 at
    # the sample before it first counts).
    assert data.minute.sum == 5 and data.minute.avgpt == 1.0 and data.minute.tps > 0
    # The hour's and the day's first snapshots after the start come 10 minutes and an hour
    # on: until then mqadmin's 24-hour figure falls back to the minute's.
    assert data.hour.sum == data.day.sum == 0
    assert data.sum_24h() == 5
    size = BrokerStatsData.decode((await view(client, broker, TOPIC_PUT_SIZE, TOPIC)).body_bytes)
    assert size.minute.sum > 400
    gets = await view(client, broker, GROUP_GET_NUMS, f"{TOPIC}@cg-stats")
    assert BrokerStatsData.decode(gets.body_bytes).minute.sum == 4
    total = await view(client, broker, BROKER_PUT_NUMS, broker.config.broker_cluster_name)
    assert BrokerStatsData.decode(total.body_bytes).minute.sum >= 4
    # The body is fastjson's: the windows in alphabetical order.
    assert answer.body_bytes.startswith(b'{"statsDay":{"avgpt":')
    assert (await view(client, broker, SNDBCK_PUT_NUMS, f"{TOPIC}@cg-stats")).code == (
        ResponseCode.SYSTEM_ERROR
    )


async def test_broker_consume_stats_and_who_consumes(
    broker: Broker, client: RemotingClient
) -> None:
    broker.topics.create_internal(TOPIC, 2, 6)
    for n in range(5):
        await send_ok(client, broker.address, TOPIC, b"m", queue_id=n % 2)
    await wait_until(lambda: broker.store.get_max_offset(TOPIC, 0) == 3, "dispatch")
    broker.offsets.commit("cg-a", TOPIC, 0, 1)
    broker.offsets.commit("cg-b", TOPIC, 1, 2)
    for group in ("cg-a", "cg-b"):
        assert (
            broker.subscription_groups.find(group) is not None
        )  # auto-created, as a heartbeat would

    response = await call(
        client, broker, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}
    )
    assert response.code == ResponseCode.SUCCESS
    addr, groups, total = decode_consume_stats_list(response.body_bytes)
    assert addr == broker.address
    by_group = dict(groups)
    assert set(by_group) == {"cg-a", "cg-b"}  # only groups with offsets
    (a_stats,) = by_group["cg-a"]
    q0 = a_stats.offset_table[MessageQueue(TOPIC, broker.config.broker_name, 0)]
    assert (q0.broker_offset, q0.consumer_offset) == (3, 1) and q0.last_timestamp > 0
    # cg-a: 3-1 on queue 0, 2-0 on queue 1; cg-b: 3-0 and 2-2
    assert total == sum(cs.total_diff() for _g, stats in groups for cs in stats) == 4 + 3
    orderly = await call(client, broker, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    assert decode_consume_stats_list(orderly.body_bytes)[1] == []  # no orderly topic here

    who = await call(client, broker, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert GroupList.decode(who.body_bytes).groups == ["cg-a", "cg-b"]
    system = await call(client, broker, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    names = TopicList.decode(system.body_bytes).topic_list
    assert "TBW102" in names and broker.config.broker_name in names and TOPIC not in names


async def test_clean_unused_topic_drops_queues_of_deleted_topics(
    broker: Broker, client: RemotingClient
) -> None:
    broker.topics.create_internal(TOPIC, 1, 6)
    await send_ok(client, broker.address, TOPIC, b"m", queue_id=0)
    await wait_until(lambda: broker.store.get_max_offset(TOPIC, 0) == 1, "dispatch")
    broker.topics.table.pop(TOPIC)  # gone from the table, as after a crash mid-delete
    assert any(cq.topic == TOPIC for cq in broker.store.queues)
    response = await call(client, broker, RequestCode.CLEAN_UNUSED_TOPIC)
    assert response.code == ResponseCode.SUCCESS
    assert not any(cq.topic == TOPIC for cq in broker.store.queues)


async def test_acl_config_lists_the_accounts_to_an_admin(
    start_broker: BrokerFactory, tmp_path: Path
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(
        ACL_FILE.replace("globalWhiteRemoteAddresses:", "globalWhiteRemoteAddresses: [10.10.103.*]")
    )
    broker = await start_broker(acl_enable=True, acl_file_path=acl_file)
    async with RemotingClient(
        hooks=[AclClientHook(SessionCredentials("adminKey", "adminSecret"))]
    ) as admin:
        response = await call(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response.remark
    body = AclConfigBody.decode(response.body_bytes)
    assert body.global_white_addrs == ["10.10.103.*"]
    normal = next(a for a in body.accounts if a.access_key == "RocketMQ")
    assert (normal.secret_key, normal.admin) == ("12345678", False)
    assert (normal.default_topic_perm, normal.default_group_perm) == ("DENY", "SUB")
    assert normal.topic_perms == ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]
    white = next(a for a in body.accounts if a.access_key == "whiteKey")
    assert white.white_remote_address == "127.0.0.1"
    # Secret keys: an admin's read only.
    async with RemotingClient(
        hooks=[AclClientHook(SessionCredentials("RocketMQ", "12345678"))]
    ) as plain:
        refused = await call(plain, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    assert refused.code == ResponseCode.NO_PERMISSION


async def test_acl_config_without_acl_says_so(broker: Broker, client: RemotingClient) -> None:
    response = await call(client, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "aclEnable=false" in (response.remark or "")


async def test_all_producer_info_lists_every_producer_group(
    broker: Broker, client: RemotingClient
) -> None:
    """GET_ALL_PRODUCER_INFO (328), what rocketmq-exporter counts producers with: each
    group's instances as RocketMQ 4.9.4's ProducerInfo."""
    before = json.loads((await call(client, broker, RequestCode.GET_ALL_PRODUCER_INFO)).body_bytes)
    assert before == {"data": {}}
    heartbeat = {
        "clientID": "127.0.0.1@4242",
        "producerDataSet": [{"groupName": "pg-info"}],
        "consumerDataSet": [],
    }
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode())
    assert (await client.invoke(broker.address, request, 5)).code == ResponseCode.SUCCESS
    response = await call(client, broker, RequestCode.GET_ALL_PRODUCER_INFO)
    assert response.code == ResponseCode.SUCCESS
    (info,) = json.loads(response.body_bytes)["data"]["pg-info"]
    assert list(info) == ["clientId", "language", "lastUpdateTimestamp", "remoteIP", "version"]
    assert info["clientId"] == "127.0.0.1@4242" and info["language"] == "PYTHON"
    assert info["remoteIP"].startswith("127.0.0.1:") and info["lastUpdateTimestamp"] > 0
