"""mqadmin's configuration commands print Apache's text: the ``... success.`` lines,
``TopicConfig [...]`` / ``SubscriptionGroupConfig [...]`` as Java's ``toString``, the
``key=  value`` lists of getBrokerConfig / getNamesrvConfig / getConsumerConfig, and the
answers Apache leaves without a newline. Real processes against live brokers; what the
brokers and name servers hold afterwards is checked too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client.admin_cli_config import perm_text
from codec.hashing import java_hashmap_order, java_properties_order
from tests.client.conftest import create_topic
from tests.client.test_admin_cli import CliError, mqadmin, mqadmin_text, run_cli
from tests.support import BrokerFactory

CLUSTER = "DefaultCluster"


def topic_config(topic: str, queues: int = 8, order: bool = False) -> str:
    return (
        f"TopicConfig [topicName={topic}, readQueueNums={queues}, writeQueueNums={queues}, "
        f"perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order={str(order).lower()}]"
    )


def apache_masters(a: Broker, b: Broker) -> list[str]:
    """The masters of broker-a and broker-b in the order Apache's tools visit them: the
    broker names' HashSet order, each master added to a HashSet."""
    by_name = {"broker-a": a.address, "broker-b": b.address}
    return java_hashmap_order(by_name[n] for n in java_hashmap_order(by_name))


def test_perm_text_is_java_perm2string() -> None:
    assert [perm_text(p) for p in (6, 4, 2, 7, 0)] == ["RW-", "R--", "-W-", "RWX", "---"]


@pytest.fixture
async def two(start_broker: BrokerFactory) -> tuple[Broker, Broker]:
    return await start_broker("broker-a"), await start_broker("broker-b")


async def test_topic_commands_print_apaches_lines(
    namesrv: NameServer, two: tuple[Broker, Broker]
) -> None:
    a, b = two
    text = await mqadmin_text(namesrv, "updateTopic", "-b", a.address, "-t", "TopicCfg1")
    assert text == f"create topic to {a.address} success.\n{topic_config('TopicCfg1')}"

    # Ordered, on one broker: the order conf names that broker and is merged into the KV.
    text = await mqadmin_text(
        namesrv, "updateTopic", "-b", b.address, "-t", "TopicCfg1", "-w", "4", "-r", "4",
        "-o", "true",
    )  # fmt: skip
    assert text == (
        "set broker orderConf. isOrder=true, orderConf=[broker-b:4]"
        f"create topic to {b.address} success.\n{topic_config('TopicCfg1', 4, order=True)}"
    )
    got = await mqadmin(namesrv, "updateOrderConf", "-t", "TopicCfg1", "-m", "get")
    assert got["orderConf"] == "broker-b:4"

    # A whole cluster: one line per master in Apache's (HashSet) order, then the conf.
    text = await mqadmin_text(
        namesrv, "updateTopic", "-c", CLUSTER, "-t", "TopicCfg2", "-o", "true"
    )
    masters = apache_masters(a, b)
    conf = ";".join(f"{n}:8" for n in java_hashmap_order(["broker-a", "broker-b"]))
    assert text == (
        "".join(f"create topic to {m} success.\n" for m in masters)
        + f"set cluster orderConf. isOrder=true, orderConf=[{conf}]"
        + topic_config("TopicCfg2", order=True)
    )
    assert a.topics.get("TopicCfg2") is not None and b.topics.get("TopicCfg2") is not None

    text = await mqadmin_text(namesrv, "deleteTopic", "-t", "TopicCfg2", "-c", CLUSTER)
    assert text == (
        f"delete topic [TopicCfg2] from cluster [{CLUSTER}] success.\n"
        "delete topic [TopicCfg2] from NameServer success.\n"
    )
    assert a.topics.get("TopicCfg2") is None and b.topics.get("TopicCfg2") is None

    text = await mqadmin_text(
        namesrv, "updateOrderConf", "-t", "TopicCfg1", "-m", "put", "-v", "broker-a:2"
    )
    assert text == "update orderConf success. topic=[TopicCfg1], orderConf=[broker-a:2]"
    text = await mqadmin_text(namesrv, "updateOrderConf", "-t", "TopicCfg1", "-m", "get")
    assert text == "get orderConf success. topic=[TopicCfg1], orderConf=[broker-a:2] "
    text = await mqadmin_text(namesrv, "updateOrderConf", "-t", "TopicCfg1", "-m", "delete")
    assert text == "delete orderConf success. topic=[TopicCfg1]"
    with pytest.raises(CliError) as refused:
        await mqadmin_text(namesrv, "updateOrderConf", "-t", "TopicCfg1", "-m", "get")
    assert refused.value.code == 1 and "has no orderConf" in refused.value.stderr


async def test_group_commands_print_apaches_lines(
    namesrv: NameServer, two: tuple[Broker, Broker]
) -> None:
    a, b = two
    text = await mqadmin_text(namesrv, "updateSubGroup", "-b", a.address, "-g", "cg-cfg", "-r", "3")
    assert text == (
        f"create subscription group to {a.address} success.\n"
        "SubscriptionGroupConfig [groupName=cg-cfg, consumeEnable=true, "
        "consumeFromMinEnable=false, consumeBroadcastEnable=false, retryQueueNums=1, "
        "retryMaxTimes=3, brokerId=0, whichBrokerWhenConsumeSlowly=1, "
        "notifyConsumerIdsChangedEnable=true]"
    )
    text = await mqadmin_text(namesrv, "getConsumerConfig", "-g", "cg-cfg")
    assert text.splitlines() == [
        f"{'=' * 29}{CLUSTER}:broker-a{'=' * 29}",
        f"{'groupName':<40}=  cg-cfg",
        f"{'consumeEnable':<40}=  true",
        f"{'consumeFromMinEnable':<40}=  false",
        f"{'consumeBroadcastEnable':<40}=  false",
        f"{'retryQueueNums':<40}=  1",
        f"{'retryMaxTimes':<40}=  3",
        f"{'brokerId':<40}=  0",
        f"{'whichBrokerWhenConsumeSlowly':<40}=  1",
        f"{'notifyConsumerIdsChangedEnable':<40}=  true",
    ]

    a.offsets.commit("cg-cfg", "TopicX", 0, 5)
    text = await mqadmin_text(
        namesrv, "deleteSubGroup", "-b", a.address, "-g", "cg-cfg", "-r", "true"
    )
    assert text == f"delete subscription group [cg-cfg] from broker [{a.address}] success.\n"
    assert "cg-cfg" not in a.subscription_groups.table
    assert a.offsets.query("cg-cfg", "TopicX", 0) == -1  # -r true: the offsets went too

    # From a whole cluster, the group's retry and dead-letter topics go as well.
    await mqadmin_text(namesrv, "updateSubGroup", "-c", CLUSTER, "-g", "cg-cfg2")
    await create_topic(a, "%RETRY%cg-cfg2", queues=1)
    b.offsets.commit("cg-cfg2", "TopicX", 0, 7)
    text = await mqadmin_text(namesrv, "deleteSubGroup", "-c", CLUSTER, "-g", "cg-cfg2")
    masters = apache_masters(a, b)
    assert text == "".join(
        [
            f"delete subscription group [cg-cfg2] from broker [{m}] in cluster [{CLUSTER}] "
            "success.\n"
            for m in masters
        ]
        + [
            f"delete topic [{t}] from cluster [{CLUSTER}] success.\n"
            f"delete topic [{t}] from NameServer success.\n"
            for t in ("%RETRY%cg-cfg2", "%DLQ%cg-cfg2")
        ]
    )
    assert a.topics.get("%RETRY%cg-cfg2") is None
    assert b.offsets.query("cg-cfg2", "TopicX", 0) == 7  # kept without -r

    with pytest.raises(CliError) as missing:
        await mqadmin_text(namesrv, "getConsumerConfig", "-g", "cg-cfg2")
    assert missing.value.code == 1 and "exists on no broker" in missing.value.stderr

    await mqadmin_text(namesrv, "updateSubGroup", "-b", a.address, "-g", "cg-src")
    await create_topic(a, "TopicClone", queues=1)
    a.offsets.commit("cg-src", "TopicClone", 0, 3)
    text = await mqadmin_text(
        namesrv, "cloneGroupOffset", "-s", "cg-src", "-d", "cg-dst", "-t", "TopicClone"
    )
    assert (
        text
        == "clone group offset success. srcGroup[cg-src], destGroup=[cg-dst], topic[TopicClone]"
    )
    assert a.offsets.query("cg-dst", "TopicClone", 0) == 3


async def test_broker_and_name_server_config_commands(
    namesrv: NameServer, two: tuple[Broker, Broker]
) -> None:
    a, b = two
    text = await mqadmin_text(namesrv, "getBrokerConfig", "-b", a.address)
    head, *rows, blank, end = text.split("\n")
    assert head == f"============{a.address}============" and blank == "" and end == ""
    props = {r[:50].rstrip(): r[53:] for r in rows}
    assert all(r[50:53] == "=  " for r in rows)
    assert props["brokerName"] == "broker-a"
    served = (await mqadmin(namesrv, "getBrokerConfig", "-b", a.address))[a.address]
    assert list(props) == java_properties_order(served) and props == served
    text = await mqadmin_text(namesrv, "getBrokerConfig", "-c", CLUSTER)
    heads = [line for line in text.splitlines() if line.startswith("====")]
    masters = apache_masters(a, b)
    assert heads == [f"============Master: {m}============" for m in masters]

    text = await mqadmin_text(
        namesrv, "updateBrokerConfig", "-c", CLUSTER, "-k", "slowRequestThresholdMs", "-v", "1234"
    )
    assert text == "".join(f"update broker config success, {m}\n" for m in masters)
    assert a.config.slow_request_threshold_ms == b.config.slow_request_threshold_ms == 1234

    text = await mqadmin_text(namesrv, "getNamesrvConfig")
    head, *rows, end = text.split("\n")
    assert head == f"============{namesrv.address}============" and end == ""
    keys = [r[:50].rstrip() for r in rows]
    assert keys == java_properties_order(keys) and "listenPort" in keys

    text = await mqadmin_text(
        namesrv, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"
    )
    assert (
        text
        == f"update name server config success![{namesrv.address}]\norderMessageEnable : true\n"
    )

    text = await mqadmin_text(namesrv, "updateKvConfig", "-s", "ns1", "-k", "k1", "-v", "v1")
    assert text == "create or update kv config to namespace success.\n"
    text = await mqadmin_text(namesrv, "deleteKvConfig", "-s", "ns1", "-k", "k1")
    assert text == "delete kv config from namespace success.\n"

    await create_topic(a, "TopicPerm", queues=2)
    text = await mqadmin_text(namesrv, "wipeWritePerm", "-b", "broker-a")
    assert text.startswith(
        f"wipe write perm of broker[broker-a] in name server[{namesrv.address}] OK, "
    )
    wiped = int(text.rsplit(", ", 1)[1])
    assert wiped >= 1 and text.endswith("\n")
    text = await mqadmin_text(namesrv, "addWritePerm", "-b", "broker-a")
    assert (
        text
        == f"add write perm of broker[broker-a] in name server[{namesrv.address}] OK, {wiped}\n"
    )

    assert await mqadmin_text(namesrv, "cleanExpiredCQ", "-c", CLUSTER) == "success"
    assert await mqadmin_text(namesrv, "deleteExpiredCommitLog", "-b", b.address) == "success"
    done = await mqadmin(namesrv, "cleanExpiredCQ")  # no -b, no -c: every cluster's brokers
    assert sorted(done["brokers"]) == sorted([a.address, b.address])


async def test_export_metadata_writes_apaches_files(
    namesrv: NameServer, two: tuple[Broker, Broker], tmp_path: Path
) -> None:
    a, b = two
    await create_topic(a, "TopicExp", queues=2)
    await create_topic(b, "TopicExp", queues=3)
    await create_topic(a, "%RETRY%cg-exp", queues=1)
    await mqadmin_text(namesrv, "updateSubGroup", "-c", CLUSTER, "-g", "cg-exp")

    text = await mqadmin_text(namesrv, "exportMetadata", "-c", CLUSTER, "-f", str(tmp_path))
    assert text == f"export {tmp_path / 'metadata.json'} success\n"
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["topicConfigTable"]["TopicExp"]["writeQueueNums"] == 5  # summed over masters
    assert "%RETRY%cg-exp" not in meta["topicConfigTable"]  # without -s
    assert meta["subscriptionGroupTable"]["cg-exp"]["retryQueueNums"] == 2
    # RocketMQ's own groups and topics are on the brokers but left out.
    assert "TOOLS_CONSUMER" in a.subscription_groups.table
    assert "TOOLS_CONSUMER" not in meta["subscriptionGroupTable"]
    assert a.topics.get("SCHEDULE_TOPIC_XXXX") is not None
    assert "SCHEDULE_TOPIC_XXXX" not in meta["topicConfigTable"]

    text = await mqadmin_text(
        namesrv, "exportMetadata", "-b", a.address, "-t", "-s", "-f", str(tmp_path)
    )
    assert text == f"export {tmp_path / 'topic.json'} success"
    topics = json.loads((tmp_path / "topic.json").read_text())["topicConfigTable"]
    assert "%RETRY%cg-exp" in topics and topics["TopicExp"]["writeQueueNums"] == 2

    code, _, err = await run_cli("exportMetadata", "-n", namesrv.address, "-b", a.address)
    assert code == 2 and "-t" in err
