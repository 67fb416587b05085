"""mqadmin's operations commands and Apache's conventions, as real processes against live
brokers: statsAll, brokerConsumeStats, printMsgByQueue, sendMsgStatus, checkMsgSendRT,
clusterRT, cleanUnusedTopic, getAclConfig, exportConfigs, exportMetrics, startMonitoring and
decodeMessageId; their text is checked against Apache's formats (headers, widths, the lines
scripts parse), their ``--json`` against what the brokers hold."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer
from codec.hashing import java_hashmap_order
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker.test_acl import ACL_FILE
from tests.client.conftest import create_topic
from tests.client.test_admin_cli import mqadmin, mqadmin_text, run_cli
from tests.support import BrokerFactory, ClientFactory, wait_dispatched, wait_until

TOPIC = "TopicOps"
STATS_HEAD = (
    f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} "
    f"{'#OutTPS':>11} {'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}\n"
)


async def test_apache_conventions_list_explain_and_find_commands(namesrv: NameServer) -> None:
    code, listing, _ = await run_cli()
    assert code == 0
    lines = listing.splitlines()
    assert lines[0] == "The most commonly used mqadmin commands are:"
    assert lines[1].startswith("   updateTopic          ")  # Apache's order and widths
    assert any(line.startswith("   statsAll             ") for line in lines)
    assert lines[-1] == "See 'mqadmin help <command>' for more information on a specific command."
    code, help_text, _ = await run_cli("help", "brokerconsumestats")
    assert code == 0 and "-b BROKER_ADDR, --brokerAddr BROKER_ADDR" in help_text
    code, _, err = await run_cli("noSuchCommand")
    assert code == 2 and "The sub command noSuchCommand not exist." in err
    # Any case, and Apache's aliases.
    assert await mqadmin(namesrv, "TOPICLIST") == await mqadmin(namesrv, "topicList")
    code, _, err = await run_cli("getAccessConfigSubCommand", "-n", namesrv.address, "-b", "x")
    assert code == 1 and "getAclConfig" in err  # found by its alias, then failed on -b x
    code, _, err = await run_cli("brokerConsumeStats", "-n", namesrv.address)
    assert code == 2 and "-b/--brokerAddr" in err  # the option's letter is named


async def test_stats_all_and_broker_consume_stats(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    broker.stats.sample()
    async with Producer("pg-ops", namesrv.address) as producer:
        for n in range(6):
            await producer.send(Message(TOPIC, f"m{n}".encode(), tags="TagA"))
    await wait_dispatched(broker)
    seen: list[str] = []
    consumer = PushConsumer(
        "cg-ops", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )

    @consumer.subscribe(TOPIC)
    async def listener(msg: MessageView) -> None:
        seen.append(msg.msg_id)

    async with consumer:
        await wait_until(lambda: len(seen) == 6, "six consumed")
        await consumer.persist_offsets()
    broker.stats.sample()

    rows = await mqadmin(namesrv, "statsAll", "-t", TOPIC)
    assert rows == [
        {
            "topic": TOPIC, "group": "cg-ops", "accumulation": 0, "inTps": rows[0]["inTps"],
            "outTps": rows[0]["outTps"], "inMsg24Hour": 6, "outMsg24Hour": 6,
        }
    ]  # fmt: skip
    text = await mqadmin_text(namesrv, "statsAll", "-t", TOPIC)
    head, row = text.splitlines(keepends=True)
    assert head == STATS_HEAD
    assert re.fullmatch(
        rf"{TOPIC:<64}  {'cg-ops':<64} {0:>12} +\d+\.\d\d +\d+\.\d\d {6:>14} {6:>14}\n", row
    ), row
    assert await mqadmin(namesrv, "statsAll", "-t", "NoSuchTopicHere") == []

    queues = await mqadmin(namesrv, "brokerConsumeStats", "-b", broker.address)
    mine = [q for q in queues["queues"] if q["group"] == "cg-ops"]
    assert sorted(q["queueId"] for q in mine) == [0, 1]
    assert all(q["diff"] == 0 and q["lastTimestamp"] > 0 for q in mine)
    text = await mqadmin_text(namesrv, "brokerConsumeStats", "-b", broker.address)
    lines = text.splitlines()
    assert lines[0] == (
        f"{'#Topic':<64}  {'#Group':<64}  {'#Broker Name':<32}  {'#QID':<4}  "
        f"{'#Broker Offset':<20}  {'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
    )
    assert lines[1].startswith(f"{TOPIC:<64}  {'cg-ops':<64}  {'broker-a':<32}  0   ")
    assert lines[-1] == f"Diff Total: {queues['totalDiff']}" and lines[-2] == ""


async def test_print_msg_by_queue_prints_and_counts_tags(
    namesrv: NameServer, broker: Broker
) -> None:
    await create_topic(broker, TOPIC, queues=1)
    async with Producer("pg-ops", namesrv.address) as producer:
        for tag in ("TagA", "TagB", "TagA"):
            await producer.send(Message(TOPIC, f"body-{tag}".encode(), tags=tag))
    await wait_dispatched(broker)
    args = ("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0")
    assert await mqadmin_text(namesrv, *args) == ""  # Apache prints nothing by default
    text = await mqadmin_text(namesrv, *args, "-p", "true", "-d", "true", "-f", "true")
    lines = text.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("MSGID: ") and lines[0].endswith(" BODY: body-TagA")
    assert "MessageExt [brokerName=broker-a, queueId=0, " in lines[0]
    assert lines[3:] == [f"Tag: {'TagA':<30} Count: 2", f"Tag: {'TagB':<30} Count: 1"]
    hidden = await mqadmin_text(namesrv, *args, "-p", "true")
    assert hidden.splitlines()[0].endswith(" BODY: NOT PRINT BODY")
    doc = await mqadmin(namesrv, *args, "-s", "TagB")
    assert [m["body"] for m in doc["messages"]] == [None] and doc["tags"] == {"TagB": 1}


async def test_send_rt_commands(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=2)
    text = await mqadmin_text(namesrv, "sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "20")
    lines = text.splitlines()
    assert len(lines) == 3
    assert all(
        re.match(r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, ", x) for x in lines
    )
    assert "messageQueue=MessageQueue [topic=broker-a, brokerName=broker-a, queueId=" in lines[0]

    text = await mqadmin_text(namesrv, "checkMsgSendRT", "-t", TOPIC, "-a", "4", "-s", "10")
    lines = text.splitlines()
    assert lines[0] == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"
    assert [line.split()[:3] for line in lines[1:5]] == [
        ["broker-a", str(i % 2), "true"] for i in range(4)
    ]  # queue i % queues, as Apache's selector picks
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[5])

    text = await mqadmin_text(namesrv, "clusterRT", "-a", "3", "-s", "10", "--rounds", "1")
    lines = text.splitlines()
    assert lines[0] == (
        f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  #failCount"
    )
    cells = lines[1].split()
    assert cells[0:2] == ["DefaultCluster", "broker-a"] and cells[3:] == ["3", "0"]
    missing = await mqadmin_text(
        namesrv, "clusterRT", "-c", "NoCluster", "-a", "2", "--rounds", "1"
    )
    assert missing.endswith("cluster [NoCluster] not exist")


async def test_clean_unused_topic(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=1)
    async with Producer("pg-ops", namesrv.address) as producer:
        await producer.send(Message(TOPIC, b"orphan"))
    await wait_dispatched(broker)
    broker.topics.table.pop(TOPIC)
    assert await mqadmin_text(namesrv, "cleanUnusedTopic", "-b", broker.address) == "success"
    assert not any(cq.topic == TOPIC for cq in broker.store.queues)
    done = await mqadmin(namesrv, "cleanUnusedTopic", "-c", "DefaultCluster")
    assert done == {"brokers": [broker.address], "success": True}
    assert await mqadmin_text(namesrv, "cleanUnusedTopic", "-c", "NoCluster") == "false"


async def test_get_acl_config(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        ACL_FILE.replace("globalWhiteRemoteAddresses:", "globalWhiteRemoteAddresses: [10.10.103.*]")
    )
    broker = await start_broker(acl_enable=True, acl_file_path=acl)
    keys = ("--ak", "adminKey", "--sk", "adminSecret")
    text = await mqadmin_text(namesrv, "getAclConfig", "-b", broker.address, *keys)
    lines = text.split("\n")
    assert lines[:4] == ["", "globalWhiteRemoteAddresses: [10.10.103.*]", "", "accounts:"]
    assert f"  {'accessKey':<18}: RocketMQ" in lines
    assert f"  {'topicPerms':<18}: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]" in lines
    doc = await mqadmin(namesrv, "getAclConfig", "-c", "DefaultCluster", *keys)
    assert doc[broker.address]["globalWhiteAddrs"] == ["10.10.103.*"]
    code, _, err = await run_cli(
        "getAclConfig", "-n", namesrv.address, "-b", broker.address,
        "--ak", "RocketMQ", "--sk", "12345678",
    )  # fmt: skip
    assert code == 1 and "permission" in err.lower(), err


async def test_exports_write_apache_files(
    namesrv: NameServer, broker: Broker, tmp_path: Path
) -> None:
    await create_topic(broker, TOPIC, queues=2)
    text = await mqadmin_text(namesrv, "exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert text == f"export {tmp_path / 'configs.json'} success"
    raw = (tmp_path / "configs.json").read_text()
    assert raw.startswith('{\n\t"brokerConfigs":{') and not raw.endswith("\n")
    configs = json.loads(raw)
    assert configs["clusterScale"] == {
        "namesrvSize": 1,
        "masterBrokerSize": 1,
        "slaveBrokerSize": 0,
    }
    assert configs["brokerConfigs"]["broker-a"]["brokerName"] == "broker-a"

    text = await mqadmin_text(namesrv, "exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert text == f"export {tmp_path / 'metrics.json'} success"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    quota = metrics["evaluateReport"]["broker-a"]["runtimeQuota"]
    assert quota["topicSize"] >= 1 and set(quota["tps"]) == {
        "normalInTps", "normalOutTps", "transInTps", "scheduleInTps"
    }  # fmt: skip
    assert set(metrics["totalData"]) == {"totalTps", "totalOneDayNum"}
    code, _, err = await run_cli("exportConfigs", "-n", namesrv.address, "-c", "NoCluster")
    assert code == 1 and "NoCluster" in err


async def test_start_monitoring_reports_a_backlog(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=1)
    seen: list[str] = []
    consumer = PushConsumer("cg-watched", namesrv.address)

    @consumer.subscribe(TOPIC)
    async def listener(msg: MessageView) -> None:
        seen.append(msg.msg_id)

    async with consumer:
        async with Producer("pg-ops", namesrv.address) as producer:
            await producer.send(Message(TOPIC, b"consumed"))
            await wait_until(lambda: len(seen) == 1, "one consumed")
            await consumer.persist_offsets()
            broker.offsets.commit("cg-watched", TOPIC, 0, 0)  # back to the start: a backlog
            await producer.send(Message(TOPIC, b"waiting"))
        await wait_dispatched(broker)
        code, out, err = await run_cli(
            "startMonitoring", "-n", namesrv.address, "--rounds", "1", "--interval", "0.2"
        )
    assert code == 0 and out == "", err  # Apache's prints nothing on stdout either
    assert "[MONITOR] =========================================beginRound" in err
    assert re.search(
        r"\[MONITOR\] reportUndoneMsgs: UndoneMsgs \[consumerGroup=cg-watched, "
        rf"topic={TOPIC}, undoneMsgsTotal=\d+, undoneMsgsSingleMQ=\d+, "
        r"undoneMsgsDelayTimeMills=\d+\]",
        err,
    ), err
    assert "endRound" in err


async def test_decode_message_id_takes_either_kind(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=1)
    async with Producer("pg-ops", namesrv.address) as producer:
        sent = await producer.send(Message(TOPIC, b"x"))
    offset_id = await mqadmin(namesrv, "decodeMessageId", "-i", sent.offset_msg_id)
    assert offset_id["kind"] == "offset" and offset_id["addr"] == broker.address
    await asyncio.sleep(0.01)  # a unique id's time reads back only once it is in the past
    unique = await mqadmin(namesrv, "decodeMessageId", "-i", sent.msg_id)
    assert unique["kind"] == "unique" and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", unique["ip"])
    assert abs(unique["time"] - time.time() * 1000) < 60_000
    code, _, err = await run_cli("decodeMessageId", "-n", namesrv.address, "-i", "XYZ")
    assert code == 2 and "hex digits" in err


async def test_producer_lists_each_groups_instances(
    namesrv: NameServer, broker: Broker, start_client: ClientFactory
) -> None:
    """mqadmin producer (GET_ALL_PRODUCER_INFO): one line per instance, in Apache's words."""
    assert await mqadmin_text(namesrv, "producer", "-b", broker.address) == ""
    for cid, groups in (("127.0.0.1@1", ["pg-one", "pg-two"]), ("127.0.0.1@2", ["pg-two"])):
        heartbeat = {
            "clientID": cid,
            "producerDataSet": [{"groupName": g} for g in groups],
            "consumerDataSet": [],
        }
        body = json.dumps(heartbeat).encode()
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        client = await start_client()  # a connection per instance, as real producers have
        assert (await client.invoke(broker.address, request, 5)).code == ResponseCode.SUCCESS
    text = await mqadmin_text(namesrv, "producer", "-b", broker.address)
    lines = text.splitlines()
    assert [line.split(" instance : ")[0] for line in lines] == [
        f"producer group ({g})" for g in java_hashmap_order(["pg-one", "pg-two"])
        for _ in range(1 if g == "pg-one" else 2)
    ]  # fmt: skip
    peer = broker.producers.groups["pg-one"][next(iter(broker.producers.groups["pg-one"]))].peer
    one = next(line for line in lines if line.startswith("producer group (pg-one)"))
    assert one.startswith(
        f"producer group (pg-one) instance : clientId=127.0.0.1@1,remoteIP={peer}, "
        "language=PYTHON, version="
    )
    assert re.search(r", lastUpdateTimestamp=\d{13}$", one)
    doc = await mqadmin(namesrv, "producer", "-b", broker.address)
    assert sorted(p["clientId"] for p in doc["pg-two"]) == ["127.0.0.1@1", "127.0.0.1@2"]
