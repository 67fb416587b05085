"""What a broker keeps across a restart on the same store directory: topics
(``config/topics.json``), consumer offsets (``config/consumerOffset.json``), subscription
groups (``config/subscriptionGroup.json``) and messages; and files a real RocketMQ broker wrote
(fastjson, pretty-printed, bare numeric keys) load (protocol.md §8, §8.4, §8.6)."""

from __future__ import annotations

import json
from pathlib import Path

from broker.broker import Broker
from broker.namesrv.server import NameServer
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.headers import CreateTopicRequestHeader
from remoting.route import TopicRouteData, loads
from tests.support import (
    BrokerFactory,
    call,
    pull,
    record_body,
    records,
    send_ok,
    wait_dispatched,
    wait_until,
)


async def query_offset(
    client: RemotingClient, broker: Broker, group: str, topic: str, queue_id: int
) -> int:
    response = await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)},
    )
    assert response.code == ResponseCode.SUCCESS, response
    return int(response.ext_fields["offset"])


async def topic_table(client: RemotingClient, broker: Broker) -> dict[str, dict[str, object]]:
    response = await call(client, broker.address, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    table = loads(response.body_bytes)["topicConfigTable"]
    assert isinstance(table, dict)
    return table


async def group_table(client: RemotingClient, broker: Broker) -> dict[str, dict[str, object]]:
    response = await call(client, broker.address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert response.code == ResponseCode.SUCCESS, response
    table = loads(response.body_bytes)["subscriptionGroupTable"]
    assert isinstance(table, dict)
    return table


async def test_everything_survives_a_restart(
    start_broker: BrokerFactory, namesrv: NameServer, client: RemotingClient, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    first = await start_broker(root=root)
    header = CreateTopicRequestHeader(
        topic="TopicKeep",
        default_topic="TBW102",
        read_queue_nums=2,
        write_queue_nums=2,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    response = await call(
        client, first.address, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
    )
    assert response.code == ResponseCode.SUCCESS, response
    for n in range(3):
        await send_ok(client, first.address, "TopicKeep", f"kept-{n}".encode(), queue_id=1)
    response = await call(
        client,
        first.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-keep", "topic": "TopicKeep", "queueId": "1", "commitOffset": "2"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(
        client,
        first.address,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=b'{"groupName":"cg-keep","retryQueueNums":2,"retryMaxTimes":3}',
    )
    assert response.code == ResponseCode.SUCCESS, response
    await wait_dispatched(first)
    await first.shutdown()

    # The files, in RocketMQ's shapes.
    config_dir = root / "config"
    topics = json.loads((config_dir / "topics.json").read_text())
    assert set(topics) == {"dataVersion", "topicConfigTable"}
    assert set(topics["dataVersion"]) >= {"counter", "timestamp"}
    assert topics["topicConfigTable"]["TopicKeep"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 2,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "TopicKeep",
        "topicSysFlag": 0,
        "writeQueueNums": 2,
    }
    offsets = json.loads((config_dir / "consumerOffset.json").read_text())
    assert offsets == {"offsetTable": {"TopicKeep@cg-keep": {"1": 2}}}
    groups = json.loads((config_dir / "subscriptionGroup.json").read_text())
    assert groups["subscriptionGroupTable"]["cg-keep"]["retryQueueNums"] == 2

    second = await start_broker(root=root)
    tc = (await topic_table(client, second))["TopicKeep"]
    assert (tc["readQueueNums"], tc["writeQueueNums"]) == (2, 2)
    assert await query_offset(client, second, "cg-keep", "TopicKeep", 1) == 2
    group = (await group_table(client, second))["cg-keep"]
    assert (group["retryQueueNums"], group["retryMaxTimes"]) == (2, 3)

    response = await pull(client, second.address, "TopicKeep", queue_id=1)
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    assert [record_body(body, infos, n) for n in range(len(infos))] == [
        b"kept-0",
        b"kept-1",
        b"kept-2",
    ]
    response = await send_ok(client, second.address, "TopicKeep", b"after", queue_id=1)
    assert response.ext_fields["queueOffset"] == "3"

    # The restarted broker registers its topics again.
    response = await call(
        client, namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicKeep"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    route = TopicRouteData.decode(response.body_bytes)
    assert route.broker_datas[0].broker_addrs == {0: second.address}


async def test_offsets_committed_by_pulls_survive_a_restart(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    first = await start_broker(root=root)
    for n in range(4):
        await send_ok(client, first.address, "TopicPulled", f"{n}".encode())
    await wait_dispatched(first)
    response = await pull(
        client,
        first.address,
        "TopicPulled",
        group="cg-pulled",
        offset=3,
        commit_offset=3,
        sys_flag=0x4 | 0x1,
    )
    assert response.code == ResponseCode.SUCCESS, response
    await first.shutdown()
    second = await start_broker(root=root)
    assert await query_offset(client, second, "cg-pulled", "TopicPulled", 0) == 3


async def test_files_written_by_rocketmq_load(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    """fastjson output: pretty-printed (topics, groups) and bare numeric map keys
    (consumer offsets: ``{0:5,1:7}``), as a 4.9 broker leaves them in ``config/``."""
    root = tmp_path / "store"
    config_dir = root / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "consumerOffset.json").write_text(
        '{"offsetTable":{"TopicOld@cg-old":{0:5,1:7},"%RETRY%cg-old@cg-old":{0:0}}}'
    )
    (config_dir / "topics.json").write_text(
        "{\n"
        '\t"dataVersion":{\n'
        '\t\t"counter":7,\n'
        '\t\t"timestamp":1700000000000\n'
        "\t},\n"
        '\t"topicConfigTable":{\n'
        '\t\t"TopicOld":{\n'
        '\t\t\t"order":false,\n'
        '\t\t\t"perm":6,\n'
        '\t\t\t"readQueueNums":2,\n'
        '\t\t\t"topicFilterType":"SINGLE_TAG",\n'
        '\t\t\t"topicName":"TopicOld",\n'
        '\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":2\n'
        "\t\t}\n"
        "\t}\n"
        "}"
    )
    (config_dir / "subscriptionGroup.json").write_text(
        "{\n"
        '\t"dataVersion":{"counter":2,"timestamp":1700000000000},\n'
        '\t"subscriptionGroupTable":{\n'
        '\t\t"cg-old":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
        '"consumeFromMinEnable":true,"groupName":"cg-old","notifyConsumerIdsChangedEnable":true,'
        '"retryMaxTimes":9,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}\n'
        "\t}\n"
        "}"
    )
    broker = await start_broker(root=root)
    assert await query_offset(client, broker, "cg-old", "TopicOld", 0) == 5
    assert await query_offset(client, broker, "cg-old", "TopicOld", 1) == 7
    tc = (await topic_table(client, broker))["TopicOld"]
    assert (tc["readQueueNums"], tc["writeQueueNums"], tc["perm"]) == (2, 2, 6)
    assert (await group_table(client, broker))["cg-old"]["retryMaxTimes"] == 9
    await send_ok(client, broker.address, "TopicOld", queue_id=1)


async def test_consumer_offsets_are_flushed_periodically(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    """Offsets reach the file while the broker runs (flushConsumerOffsetInterval), not only
    at a clean shutdown."""
    root = tmp_path / "store"
    broker = await start_broker(root=root, flush_consumer_offset_interval_ms=100)
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "cg-flush", "topic": "TopicFlush", "queueId": "3", "commitOffset": "9"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    path = root / "config" / "consumerOffset.json"

    def flushed() -> bool:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        return bool(doc.get("offsetTable", {}).get("TopicFlush@cg-flush") == {"3": 9})

    await wait_until(flushed, "consumerOffset.json to hold the offset", timeout_s=3.0)
