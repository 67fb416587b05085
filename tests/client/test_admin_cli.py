"""``mqadmin`` / ``aerolite admin`` against live brokers: every command, as a real process,
with its ``--json`` output checked against what the brokers hold, and some tables read as
text. Commands about clusters run against two broker groups."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer
from remoting.bodies import PERM_READ
from tests.client.conftest import Received, create_topic, max_offsets, stored
from tests.support import BrokerFactory, wait_dispatched

TOPIC = "TopicAdmin"


class CliError(Exception):
    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"exit {code}: {stderr}")
        self.code = code
        self.stderr = stderr


async def run_cli(
    *argv: str, module: str = "client.admin_cli", cwd: Path | None = None
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def mqadmin(namesrv: NameServer, command: str, *args: str) -> Any:
    """Run one command with ``--json``; its parsed output (CliError on a non-zero exit)."""
    code, out, err = await run_cli(command, "-n", namesrv.address, "--json", *args)
    if code != 0:
        raise CliError(code, err)
    return json.loads(out)


async def mqadmin_text(namesrv: NameServer, command: str, *args: str) -> str:
    code, out, err = await run_cli(command, "-n", namesrv.address, *args)
    if code != 0:
        raise CliError(code, err)
    return out


@pytest.fixture
async def two_groups(start_broker: BrokerFactory) -> tuple[Broker, Broker]:
    a = await start_broker("broker-a")
    b = await start_broker("broker-b")
    return a, b


async def test_topic_commands(namesrv: NameServer, two_groups: tuple[Broker, Broker]) -> None:
    a, b = two_groups
    created = await mqadmin(
        namesrv, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "3", "-w", "3"
    )
    assert sorted(created["brokers"]) == sorted([a.address, b.address])
    for broker in (a, b):
        tc = broker.topics.get(TOPIC)
        assert tc is not None and tc.read_queue_nums == 3
    assert TOPIC in await mqadmin(namesrv, "topicList")
    by_cluster = await mqadmin(namesrv, "topicList", "-c")
    assert {"cluster": "DefaultCluster", "topic": TOPIC, "group": ""} in by_cluster
    route = await mqadmin(namesrv, "topicRoute", "-t", TOPIC)
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    assert await mqadmin(namesrv, "topicClusterList", "-t", TOPIC) == ["DefaultCluster"]
    text = await mqadmin_text(namesrv, "topicRoute", "-t", TOPIC)  # fastjson's pretty JSON
    assert text.startswith('{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"')
    assert text.endswith("\n\t]\n}\n")
    listed = (await mqadmin_text(namesrv, "topicRoute", "-t", TOPIC, "-l")).splitlines()
    assert listed[-2] == "-" * 158 and listed[-1].split()[:4] == ["Total:", "2", "6", "6"]

    async with Producer("pg-admin", namesrv.address) as producer:
        for n in range(12):
            await producer.send(Message(TOPIC, f"m{n}".encode()))
    await wait_dispatched(a, b)
    status = await mqadmin(namesrv, "topicStatus", "-t", TOPIC)
    assert len(status) == 6
    assert sum(q["maxOffset"] for q in status) == 12
    text = await mqadmin_text(namesrv, "topicStatus", "-t", TOPIC)
    lines = text.splitlines()  # Apache's table: header, then each queue sorted
    head = ("#Broker Name", "#QID", "#Min Offset", "#Max Offset")
    assert lines[0] == "{:<32}  {:<4}  {:<20}  {:<20}    #Last Updated".format(*head)
    assert [line.split()[:2] for line in lines[1:]] == [
        [name, str(q)] for name in ("broker-a", "broker-b") for q in range(3)
    ]

    # one broker only
    await mqadmin(namesrv, "updateTopic", "-b", a.address, "-t", "OnlyOnA")
    assert a.topics.get("OnlyOnA") is not None and b.topics.get("OnlyOnA") is None

    deleted = await mqadmin(namesrv, "deleteTopic", "-t", TOPIC, "-c", "DefaultCluster")
    assert sorted(deleted["brokers"]) == sorted([a.address, b.address])
    assert a.topics.get(TOPIC) is None and b.topics.get(TOPIC) is None
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "topicRoute", "-t", TOPIC)
    assert err.value.code == 1 and TOPIC in err.value.stderr


async def test_message_commands(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    sent = await mqadmin(
        namesrv, "sendMessage", "-t", TOPIC, "-p", "hello admin", "-c", "TagA", "-k", "order-7"
    )
    assert sent["sendStatus"] == "SEND_OK"
    to_queue = await mqadmin(
        namesrv, "sendMessage", "-t", TOPIC, "-p", "to queue 1", "-b", "broker-a", "-i", "1"
    )
    assert to_queue["queueId"] == 1
    await wait_dispatched(broker)

    by_id = await mqadmin(namesrv, "queryMsgById", "-i", sent["offsetMsgId"])
    assert [m["body"] for m in by_id] == ["hello admin"]
    # Apache's block: each value at column 21, the body saved, no consumer yet.
    text = await mqadmin_text(namesrv, "queryMsgById", "-i", sent["offsetMsgId"])
    lines = text.split("\n")
    assert lines[0] == f"{'OffsetID:':<20} {sent['offsetMsgId']}"
    assert f"{'Tags:':<20} [TagA]" in lines and f"{'Keys:':<20} [order-7]" in lines
    body_path = next(x for x in lines if x.startswith("Message Body Path:")).split()[-1]
    assert await asyncio.to_thread(Path(body_path).read_bytes) == b"hello admin"
    assert text.endswith("\n\nWARN: No Consumer")  # Apache leaves the newline out
    listed = await mqadmin_text(namesrv, "queryMsgByKey", "-t", TOPIC, "-k", "order-7")
    assert listed.splitlines()[1].split()[0] == sent["msgId"]
    assert by_id[0]["tags"] == "TagA" and by_id[0]["keys"] == "order-7"
    by_key = await mqadmin(namesrv, "queryMsgByKey", "-t", TOPIC, "-k", "order-7")
    assert [m["msgId"] for m in by_key] == [sent["msgId"]]
    by_unique = await mqadmin(namesrv, "queryMsgByUniqueKey", "-t", TOPIC, "-i", sent["msgId"])
    assert by_unique[0]["body"] == "hello admin"
    at = await mqadmin(
        namesrv, "queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "0"
    )
    assert at[0]["body"] in ("hello admin", "to queue 1")
    decoded = await mqadmin(namesrv, "decodeMessageId", "-i", sent["offsetMsgId"])
    assert decoded["addr"] == broker.address

    printed = await mqadmin(namesrv, "printMsg", "-t", TOPIC)
    assert sorted(m["body"] for m in printed) == ["hello admin", "to queue 1"]
    tagged = await mqadmin(namesrv, "printMsg", "-t", TOPIC, "-s", "TagA")
    assert [m["body"] for m in tagged] == ["hello admin"]
    future = str(int(time.time() * 1000) + 3_600_000)
    assert await mqadmin(namesrv, "printMsg", "-t", TOPIC, "-b", future) == []
    consumed = await mqadmin(namesrv, "consumeMessage", "-t", TOPIC)
    assert sorted(m["body"] for m in consumed) == ["hello admin", "to queue 1"]
    # Apache's count: each queue read takes one more than it holds, so -c 1 can stop at
    # an empty first queue.
    assert len(await mqadmin(namesrv, "consumeMessage", "-t", TOPIC, "-c", "1")) <= 1
    one_queue = await mqadmin(
        namesrv, "consumeMessage", "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "0"
    )
    assert {m["queueId"] for m in one_queue} == {1}
    text = await mqadmin_text(namesrv, "printMsg", "-t", TOPIC)
    assert "hello admin" in text and "msgId" in text

    with pytest.raises(CliError) as err:
        await mqadmin(
            namesrv, "queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", "0", "-o", "99"
        )
    assert "no message at offset 99" in err.value.stderr
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "printMsg", "-t", TOPIC, "-b", "yesterday")
    assert err.value.code == 2 and "yyyy-MM-dd#HH:mm:ss:SSS" in err.value.stderr


async def test_group_progress_connections_and_offsets(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    group = "cg-admin"
    made = await mqadmin(namesrv, "updateSubGroup", "-b", broker.address, "-g", group, "-r", "5")
    assert made["config"]["retryMaxTimes"] == 5
    assert broker.subscription_groups.table[group].retry_max_times == 5

    received = Received()
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)(received.add)
    async with Producer("pg-admin", namesrv.address) as producer:
        for n in range(10):
            await producer.send(Message(TOPIC, f"m{n}".encode()))
        async with consumer:
            await received.wait_for(10)
            conns = await mqadmin(namesrv, "consumerConnection", "-g", group)
            assert len(conns["connectionSet"]) == 1
            assert conns["connectionSet"][0]["language"] == "PYTHON"
            assert TOPIC in conns["subscriptionTable"]
            status = await mqadmin(namesrv, "consumerStatus", "-g", group)
            ((client_id, info),) = status.items()
            assert client_id == conns["connectionSet"][0]["clientId"]
            assert info["properties"]["messageModel"] == "CLUSTERING"
            mine = [q for q in info["mqTable"] if q["topic"] == TOPIC]
            assert sorted(q["queueId"] for q in mine) == [0, 1]
            assert all(0 <= q["commitOffset"] <= 10 for q in mine)
            # the group's retry topic is subscribed too, as in RocketMQ
            assert {s["topic"] for s in info["subscriptionSet"]} == {TOPIC, f"%RETRY%{group}"}
            text = await mqadmin_text(namesrv, "consumerStatus", "-g", group, "-i", client_id)
            assert text.startswith("#Consumer Properties#\n") and TOPIC in text
            assert "\n\n#Consumer Offset#\n#Topic" in text
            producers = await mqadmin(namesrv, "producerConnection", "-g", "pg-admin", "-t", TOPIC)
            assert len(producers) == 1
            # Apache's text: the connections, the subscriptions, the group's settings.
            text = await mqadmin_text(namesrv, "consumerConnection", "-g", group)
            lines = text.splitlines()
            assert lines[0].split() == ["#ClientId", "#ClientAddr", "#Language", "#Version"]
            assert lines[1].split()[0] == client_id and lines[1].split()[2] == "PYTHON"
            assert re.fullmatch(r"V\d+_\d+_\d+", lines[1].split()[3]), lines[1]
            assert "Below is subscription:" in lines and f"{TOPIC:<20} *" in lines
            assert lines[-3:] == [
                "ConsumeType: CONSUME_PASSIVELY",
                "MessageModel: CLUSTERING",
                "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET",
            ]
            text = await mqadmin_text(namesrv, "producerConnection", "-g", "pg-admin", "-t", TOPIC)
            assert text.startswith("0001  ") and " PYTHON   " in text

            await consumer.persist_offsets()
            progress = await mqadmin(namesrv, "consumerProgress", "-g", group)
            assert progress["diffTotal"] == 0
            assert sum(q["consumerOffset"] for q in progress["queues"]) == 10
            everyone = await mqadmin(namesrv, "consumerProgress")
            assert {"group": group, "count": 1, "type": "PUSH", "model": "CLUSTERING"} in [
                {k: g[k] for k in ("group", "count", "type", "model")} for g in everyone
            ]
            text = await mqadmin_text(namesrv, "consumerProgress")
            assert text.startswith(f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} #Type  ")
            (row,) = [line for line in text.splitlines() if line.startswith(f"{group} ")]
            assert row.split()[1:5] == ["1", row.split()[2], "PUSH", "CLUSTERING"]
            assert row.split()[2].startswith("V") and row.split()[-1] == "0"

            # Reset to the beginning while the consumer is online: it reads all ten again.
            reset = await mqadmin(namesrv, "resetOffsetByTime", "-g", group, "-t", TOPIC, "-s", "0")
            assert sorted(q["offset"] for q in reset) == [0, 0]
            await received.wait_for(20, timeout_s=10)
            assert sorted(received.bodies()) == sorted([f"m{n}".encode() for n in range(10)] * 2)

    cloned = await mqadmin(namesrv, "cloneGroupOffset", "-s", group, "-d", "cg-copy", "-t", TOPIC)
    assert cloned["brokers"] == ["broker-a"]
    assert broker.offsets.queues_of("cg-copy", TOPIC) == broker.offsets.queues_of(group, TOPIC)
    await mqadmin(namesrv, "deleteSubGroup", "-b", broker.address, "-g", group)
    assert group not in broker.subscription_groups.table
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "consumerConnection", "-g", "nobody-here")
    assert "not online" in err.value.stderr


async def test_broker_and_namesrv_commands(
    namesrv: NameServer, two_groups: tuple[Broker, Broker]
) -> None:
    a, b = two_groups
    clusters = await mqadmin(namesrv, "clusterList")
    assert sorted(r["brokerName"] for r in clusters) == ["broker-a", "broker-b"]
    assert all(r["cluster"] == "DefaultCluster" for r in clusters)
    text = await mqadmin_text(namesrv, "clusterList")
    head, *rows = text.splitlines()
    assert head.split() == [
        "#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
        "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE",
    ]  # fmt: skip
    assert [r.split()[:4] for r in rows] == [
        ["DefaultCluster", "broker-a", "0", a.address],
        ["DefaultCluster", "broker-b", "0", b.address],
    ]
    more = (await mqadmin_text(namesrv, "clusterList", "-m")).splitlines()
    assert more[0].split()[-4:] == [
        "#InTotalYest",
        "#OutTotalYest",
        "#InTotalToday",
        "#OutTotalToday",
    ]
    text = await mqadmin_text(namesrv, "brokerStatus", "-b", a.address)
    assert f"{'commitLogMaxOffset':<32}: " in text
    keys = [line.split(":")[0].strip() for line in text.splitlines()]
    assert keys == sorted(keys)  # Apache's TreeMap order
    status = await mqadmin(namesrv, "brokerStatus", "-b", a.address)
    assert "commitLogMaxOffset" in status[a.address]
    config = await mqadmin(namesrv, "getBrokerConfig", "-c", "DefaultCluster")
    assert config[b.address]["brokerName"] == "broker-b"
    # Ports asked for as 0 read as the ones served.
    assert config[b.address]["listenPort"] == b.address.rsplit(":", 1)[1]
    assert config[b.address]["metricsPort"] == str(b.metrics_port) != "0"

    await create_topic(a, TOPIC, queues=2)
    await mqadmin(
        namesrv, "updateBrokerConfig", "-b", a.address, "-k", "brokerPermission", "-v", "4"
    )
    assert a.config.broker_permission == PERM_READ

    async def route_perm() -> int:
        route = await mqadmin(namesrv, "topicRoute", "-t", TOPIC)
        return int(route["queueDatas"][0]["perm"])

    await a.registration.register_all()  # rather than wait for the next round
    assert await route_perm() == PERM_READ  # producers see the broker as read-only
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "updateBrokerConfig", "-b", a.address, "-k", "listenPort", "-v", "1")
    assert "listenPort cannot change while running" in err.value.stderr
    with pytest.raises(CliError) as err:
        await mqadmin(
            namesrv, "updateBrokerConfig", "-b", a.address, "-k", "brokerPermision", "-v", "6"
        )
    assert "did you mean brokerPermission" in err.value.stderr

    ns_config = await mqadmin(namesrv, "getNamesrvConfig")
    assert ns_config[namesrv.address]["orderMessageEnable"] == "false"
    await mqadmin(namesrv, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert namesrv.config.order_message_enable is True

    await mqadmin(
        namesrv, "updateBrokerConfig", "-b", a.address, "-k", "brokerPermission", "-v", "6"
    )
    wiped = await mqadmin(namesrv, "wipeWritePerm", "-b", "broker-a")
    assert wiped[namesrv.address] >= 1
    assert await route_perm() == PERM_READ
    added = await mqadmin(namesrv, "addWritePerm", "-b", "broker-a")
    assert added[namesrv.address] >= 1

    assert (await mqadmin(namesrv, "cleanExpiredCQ", "-c", "DefaultCluster"))["brokers"]
    assert (await mqadmin(namesrv, "deleteExpiredCommitLog", "-b", b.address))["brokers"]
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "brokerStatus", "-c", "NoSuchCluster")
    assert "cluster 'NoSuchCluster' is not known" in err.value.stderr


async def test_aerolite_admin_is_mqadmin(namesrv: NameServer, broker: Broker) -> None:
    code, out, err = await run_cli(
        "admin", "clusterList", "-n", namesrv.address, "--json", module="broker"
    )
    assert code == 0, err
    assert json.loads(out)[0]["brokerName"] == "broker-a"
    code, _out, err = await run_cli("admin", "noSuchCommand", module="broker")
    assert code == 2 and "The sub command noSuchCommand not exist." in err


async def test_more_commands(namesrv: NameServer, broker: Broker, tmp_path: Path) -> None:
    await create_topic(broker, TOPIC, queues=4)
    await mqadmin(namesrv, "updateTopicPerm", "-b", broker.address, "-t", TOPIC, "-p", "4")
    tc = broker.topics.get(TOPIC)
    assert tc is not None and tc.perm == PERM_READ and tc.read_queue_nums == 4
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "updateTopicPerm", "-b", broker.address, "-t", "Nope", "-p", "6")
    assert "topic Nope does not exist" in err.value.stderr
    await mqadmin(namesrv, "updateTopicPerm", "-b", broker.address, "-t", TOPIC, "-p", "6")

    await mqadmin(namesrv, "updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a:4")
    got = await mqadmin(namesrv, "updateOrderConf", "-t", TOPIC, "-m", "get")
    assert got["orderConf"] == "broker-a:4"
    await mqadmin(namesrv, "updateOrderConf", "-t", TOPIC, "-m", "delete")
    with pytest.raises(CliError) as err:  # gone: the name server has none to give
        await mqadmin(namesrv, "updateOrderConf", "-t", TOPIC, "-m", "get")
    assert err.value.code == 1 and "has no orderConf" in err.value.stderr
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a")
    assert err.value.code == 2 and "brokerName:queueNums" in err.value.stderr

    await mqadmin(namesrv, "updateKvConfig", "-s", "NS1", "-k", "k", "-v", "v")
    assert namesrv.kv.get("NS1", "k") == "v"
    await mqadmin(namesrv, "deleteKvConfig", "-s", "NS1", "-k", "k")
    assert namesrv.kv.get("NS1", "k") is None

    plan = await mqadmin(namesrv, "allocateMQ", "-t", TOPIC, "-i", "c1,c2,c3")
    assert sorted(len(v) for v in plan["result"].values()) == [1, 1, 2]

    async with Producer("pg-more", namesrv.address) as producer:
        for n in range(6):
            await producer.send(Message(TOPIC, f"m{n}".encode(), tags="T"))
    await wait_dispatched(broker)
    cq = await mqadmin(
        namesrv, "queryCq", "-t", TOPIC, "-b", broker.address, "-q", "0", "-i", "0", "-c", "5"
    )
    assert cq["maxQueueIndex"] == len(cq["queueData"]) > 0

    await mqadmin(namesrv, "updateSubGroup", "-b", broker.address, "-g", "cg-more", "-r", "3")
    config = await mqadmin(namesrv, "getConsumerConfig", "-g", "cg-more")
    assert config[broker.address]["retryMaxTimes"] == 3
    skipped = await mqadmin(namesrv, "skipAccumulatedMessage", "-g", "cg-more", "-t", TOPIC)
    assert sum(q["offset"] for q in skipped) == 6
    progress = await mqadmin(namesrv, "consumerProgress", "-g", "cg-more", "-t", TOPIC)
    assert progress["diffTotal"] == 0

    done = await mqadmin(namesrv, "exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert done["topics"] >= 1 and done["file"] == str(tmp_path / "metadata.json")
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert TOPIC in meta["topicConfigTable"] and "cg-more" in meta["subscriptionGroupTable"]


async def test_acl_commands_sign_with_the_given_keys(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        "  - {accessKey: adminKey, secretKey: adminSecret, admin: true}\n"
        "  - {accessKey: plainKey, secretKey: plainSecret, admin: false}\n"
    )
    broker = await start_broker(acl_enable=True, acl_file_path=acl)
    keys = ["--ak", "adminKey", "--sk", "adminSecret"]
    done = await mqadmin(
        namesrv,
        "updateAclConfig",
        *keys,
        "-b",
        broker.address,
        "-a",
        "newUser1",
        "-s",
        "newSecret1",
        "-i",
        "PUB",
        "-t",
        "orders=PUB|SUB,audit=DENY",
    )
    assert done["brokers"] == [broker.address]
    assert broker.acl is not None and "newUser1" in broker.acl.rules.accounts
    versions = await mqadmin(namesrv, "clusterAclConfigVersion", *keys, "-c", "DefaultCluster")
    assert versions[broker.address]["accounts"] == "3"
    await mqadmin(namesrv, "updateGlobalWhiteAddr", *keys, "-b", broker.address, "-g", "10.1.1.*")
    assert broker.acl.rules.global_white == ["10.1.1.*"]
    await mqadmin(namesrv, "deleteAclConfig", *keys, "-b", broker.address, "-a", "newUser1")
    assert "newUser1" not in broker.acl.rules.accounts

    with pytest.raises(CliError) as err:  # a non-admin account may not change the ACL
        await mqadmin(
            namesrv,
            "deleteAclConfig",
            "--ak",
            "plainKey",
            "--sk",
            "plainSecret",
            "-b",
            broker.address,
            "-a",
            "adminKey",
        )
    assert "Need admin permission" in err.value.stderr
    with pytest.raises(CliError) as err:  # and nobody may without keys
        await mqadmin(namesrv, "brokerStatus", "-b", broker.address)
    assert "No accessKey is configured" in err.value.stderr


# ------------------------------------------------------------------ searches by time


def _first_at_or_after(msgs: list[MessageView], queue_id: int, ts: int, end: int) -> int:
    """What a scan of the queue gives: the first offset stored at or after ``ts``, else the
    queue's end."""
    return min(
        (m.queue_offset for m in msgs if m.queue_id == queue_id and m.store_timestamp >= ts),
        default=end,
    )


async def test_reset_offset_by_time_now_skips_the_backlog_and_a_time_is_exact(
    namesrv: NameServer, broker: Broker
) -> None:
    topic, group = "TopicResetNow", "cg-reset-now"
    await create_topic(broker, topic, queues=4)
    async with Producer("pg-reset-now", namesrv.address, auto_batch=False) as producer:
        for n in range(12):
            await producer.send(Message(topic, f"m{n}".encode()))
            await asyncio.sleep(0.01)
    await wait_dispatched(broker)
    ends = max_offsets(broker, topic, range(4))
    assert sum(ends.values()) == 12 and all(ends.values())

    received = Received()
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic)(received.add)
    async with consumer:
        await received.wait_for(12, timeout_s=20)
        await consumer.persist_offsets()
    consumed = {q: broker.offsets.query(group, topic, q) for q in range(4)}
    assert consumed == ends

    reset = await mqadmin(namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")
    # every queue at its end: nothing moved back over a consumed message
    assert {q["queueId"]: q["offset"] for q in reset} == ends
    assert {q: broker.offsets.query(group, topic, q) for q in range(4)} == ends

    again = Received()
    later = PushConsumer(group, namesrv.address)
    later.subscribe(topic)(again.add)
    async with later:
        await asyncio.sleep(2.0)  # time to rebalance and pull: nothing old may come
        async with Producer("pg-reset-now", namesrv.address) as producer:
            await producer.send(Message(topic, b"after the reset"))
        await again.wait_for(1, timeout_s=20)
        await asyncio.sleep(0.5)
    assert again.bodies() == [b"after the reset"]

    # A time equal to a message's store time moves each queue to the first message stored
    # at or after it, the broker's nearest-message answer corrected.
    msgs = await stored(broker, topic, range(4))
    for pick in sorted(msgs, key=lambda m: m.store_timestamp)[3:9]:
        for ts in (pick.store_timestamp, pick.store_timestamp + 1):
            moved = await mqadmin(
                namesrv, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(ts)
            )
            ends = max_offsets(broker, topic, range(4))
            want = {q: _first_at_or_after(msgs, q, ts, ends[q]) for q in range(4)}
            assert {q["queueId"]: q["offset"] for q in moved} == want, ts
            assert {q: broker.offsets.query(group, topic, q) for q in range(4)} == want


async def test_print_msg_time_range_includes_both_ends(namesrv: NameServer, broker: Broker) -> None:
    topic = "TopicPrintRange"
    await create_topic(broker, topic, queues=2)
    begin_ms = int(time.time() * 1000)
    async with Producer("pg-print-range", namesrv.address, auto_batch=False) as producer:
        for n in range(10):
            await producer.send(Message(topic, f"p{n}".encode()))
            await asyncio.sleep(0.02)
    await wait_dispatched(broker)
    msgs = sorted(await stored(broker, topic, range(2)), key=lambda m: m.store_timestamp)
    assert len(msgs) == 10

    everything = await mqadmin(namesrv, "printMsg", "-t", topic, "-b", str(begin_ms), "-e", "now")
    # the newest message of each queue is there
    assert sorted(m["body"] for m in everything) == sorted(f"p{n}" for n in range(10))

    # a begin and an end equal to messages' store times take those messages in
    first, last = msgs[2], msgs[7]
    inside = await mqadmin(
        namesrv,
        "printMsg",
        "-t",
        topic,
        "-b",
        str(first.store_timestamp),
        "-e",
        str(last.store_timestamp),
    )
    want = [
        m.body.decode()
        for m in msgs
        if first.store_timestamp <= m.store_timestamp <= last.store_timestamp
    ]
    assert sorted(m["body"] for m in inside) == sorted(want)
    assert {first.body.decode(), last.body.decode()} <= set(want)
    tail = await mqadmin(
        namesrv, "printMsg", "-t", topic, "-b", str(msgs[-1].store_timestamp), "-e", "now"
    )
    assert [m["body"] for m in tail] == [
        m.body.decode() for m in msgs if m.store_timestamp == msgs[-1].store_timestamp
    ]
    with pytest.raises(CliError) as err:
        await mqadmin(namesrv, "printMsg", "-t", topic, "-b", "now", "-e", str(begin_ms))
    assert err.value.code == 2 and "is before the begin time" in err.value.stderr
