"""Apache's own mqadmin (MQAdminStartup, rocketmq-tools 4.9.7) against an Aerolite broker,
beside ours: the statistics codes answer as a RocketMQ broker does (fastjson bodies Java
parses), and the two tools print the same text for statsAll, brokerConsumeStats,
cleanUnusedTopic, printMsgByQueue, topicStatus, consumerProgress, topicList and topicRoute,
and the same
tables for brokerStatus and clusterList (whose figures move between two calls).

The broker is ``python -m broker standalone`` (stopped by PID after each test); messages are
sent and consumed with the SDK first, so there are groups, offsets and a backlog to show.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer, SendResult
from client.admin import Admin
from remoting.bodies import TopicConfig
from tests.interop.test_java_broker import java_lib  # noqa: F401 - the fixture
from tests.interop.test_java_trace import apache_mqadmin, our_mqadmin
from tests.processes import Broker, start_aerolite, unique

pytestmark = pytest.mark.interop


@pytest.fixture
def aerolite(tmp_path: Path) -> Iterator[Broker]:
    broker = start_aerolite(tmp_path / "store")
    try:
        yield broker
    finally:
        broker.stop()


async def traffic(namesrv: str, topic: str, group: str) -> SendResult:
    """Six messages on two tags, four consumed by ``group`` and its offsets committed; the
    first send's result."""
    async with Admin(namesrv) as admin:
        (addr,) = await admin.all_masters()
        await admin.create_topic(addr, TopicConfig(topic, 2, 2))
    async with Producer(unique("pg_ops"), namesrv) as producer:
        first = await producer.send(Message(topic, b"m0", tags="TagA", keys=["order-0"]))
        for n in range(1, 4):
            await producer.send(Message(topic, f"m{n}".encode(), tags="TagA"))
    seen: list[str] = []
    consumer = PushConsumer(
        group, namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )

    @consumer.subscribe(topic)
    async def listener(msg: MessageView) -> None:
        seen.append(msg.msg_id)

    async with consumer:
        for _ in range(200):
            if len(seen) >= 4:
                break
            await asyncio.sleep(0.05)
        await consumer.persist_offsets()
    assert len(seen) >= 4
    async with Producer(unique("pg_ops"), namesrv) as producer:
        for n in range(2):
            await producer.send(Message(topic, f"later{n}".encode(), tags="TagB"))
    return first


async def test_apache_mqadmin_reads_our_statistics_and_agrees_with_ours(
    aerolite: Broker,
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic, group = unique("OpsTopic"), unique("ops_cg")
    first = await traffic(aerolite.namesrv, topic, group)
    home = tmp_path / "mqadmin"

    def both(*args: str) -> tuple[str, str]:
        return (
            our_mqadmin(aerolite.namesrv, *args),
            apache_mqadmin(java_lib, home, aerolite.namesrv, *args),
        )

    ours, apache = both("statsAll", "-t", topic)
    assert f" {2:>12} " in apache  # the backlog: two messages sent after the consume
    assert ours == apache

    ours, apache = both("brokerConsumeStats", "-b", aerolite.address)
    rows = [line for line in apache.splitlines() if line.startswith(topic)]
    assert len(rows) == 2 and all(group in row for row in rows)
    assert ours == apache

    args = ("printMsgByQueue", "-t", topic, "-a", "broker-a", "-i", "0", "-f", "true")
    ours, apache = both(*args)
    assert "Tag: TagA" in apache
    assert ours == apache

    ours, apache = both("cleanUnusedTopic", "-b", aerolite.address)
    assert ours == apache == "success"

    # The classic tables scripts parse.
    ours, apache = both("topicStatus", "-t", topic)
    assert apache.startswith("#Broker Name") and len(apache.splitlines()) == 3
    assert ours == apache
    ours, apache = both("consumerProgress", "-g", group)
    assert "Diff Total: 2" in apache
    # The consume TPS is the last minute's and moves between the two calls; the rest agrees.
    tps = re.compile(r"Consume TPS: \d+\.\d\d\n")
    assert tps.search(ours) and tps.search(apache)
    assert tps.sub("", ours) == tps.sub("", apache)
    ours, apache = both("topicList")
    assert topic in apache.split()
    assert ours == apache  # the same java.util.HashSet order
    ours, apache = both("topicList", "-c")
    assert ours == apache
    ours, apache = both("topicRoute", "-t", topic)
    assert '"brokerAddrs":{0:' in apache  # fastjson's unquoted Long keys
    assert ours == apache
    ours, apache = both("topicRoute", "-t", topic, "-l")
    assert ours == apache
    # The message detail block, its consumer tracks included (the group is offline now).
    ours, apache = both("queryMsgById", "-i", first.offset_msg_id)
    assert "trackType=NOT_ONLINE" in apache
    assert ours == apache
    mq = first.message_queue
    at = ("-b", mq.broker_name, "-i", str(mq.queue_id), "-o", str(first.queue_offset))
    ours, apache = both("queryMsgByOffset", "-t", topic, *at)
    assert ours == apache
    ours, apache = both("queryMsgByUniqueKey", "-t", topic, "-i", first.msg_id)
    assert ours == apache
    ours, apache = both("queryMsgByKey", "-t", topic, "-k", "order-0")
    assert first.msg_id in apache
    assert ours == apache
    ours, apache = both("brokerStatus", "-b", aerolite.address)
    assert [line.split(":")[0] for line in ours.splitlines()] == sorted(
        line.split(":")[0] for line in ours.splitlines()
    ) and "putTps" in apache
    ours, apache = both("clusterList")
    assert ours.splitlines()[0] == apache.splitlines()[0]  # the header; the figures move
    assert ours.split()[12:16] == apache.split()[12:16]  # cluster, broker, id, address


async def test_apache_mqadmin_hands_a_message_to_our_push_consumer(
    aerolite: Broker,
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``queryMsgById -g -d`` (CONSUME_MESSAGE_DIRECTLY): Apache's tool and ours hand a stored
    message through our broker to our SDK's push consumer, whose answer both print as Java's
    ``ConsumeMessageDirectlyResult``."""
    topic, group = unique("DirectTopic"), unique("direct_cg")
    async with Admin(aerolite.namesrv) as admin:
        (addr,) = await admin.all_masters()
        await admin.create_topic(addr, TopicConfig(topic, 2, 2))
    async with Producer(unique("pg_direct"), aerolite.namesrv) as producer:
        sent = await producer.send(Message(topic, "grüße".encode(), tags="TagA"))
    seen: list[bytes] = []
    consumer = PushConsumer(group, aerolite.namesrv)

    # A tag nothing carries: only the tools' hand gives the listener the message.
    @consumer.subscribe(topic, "TagNone")
    async def listener(msg: MessageView) -> None:
        seen.append(msg.body)

    home = tmp_path / "mqadmin"
    spent = re.compile(r"spentTimeMills=\d+\]")
    async with consumer, Admin(aerolite.namesrv) as admin:
        (client,) = (await admin.consumer_connection(group))["connectionSet"]
        args = ("queryMsgById", "-i", sent.offset_msg_id, "-g", group, "-d", client["clientId"])
        # The tools run on threads: the consumer answers on this loop meanwhile.
        apache = await asyncio.to_thread(apache_mqadmin, java_lib, home, aerolite.namesrv, *args)
        ours = await asyncio.to_thread(our_mqadmin, aerolite.namesrv, *args)
    assert apache.startswith(
        "ConsumeMessageDirectlyResult [order=false, autoCommit=true, "
        "consumeResult=CR_SUCCESS, remark=null, spentTimeMills="
    ), apache
    assert spent.sub("", ours) == spent.sub("", apache)
    assert seen == ["grüße".encode()] * 2
