"""Apache's own mqadmin (MQAdminStartup, rocketmq-tools 4.9.7) beside ours against one
Aerolite broker, for the commands that change or read configuration and those over queues:
each prints the same bytes. A command that changes something runs with Apache's tool first
and then ours, on a state that makes the second run say the same (an update that is
idempotent, or the change undone between the two).

The broker is ``python -m broker standalone`` (stopped by PID after the test); the SDK sends
and consumes first, so there are messages, a group and its offsets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client.admin import Admin
from remoting.bodies import TopicConfig
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker.test_acl import ACL_FILE
from tests.interop.test_java_broker import java_broker, java_lib  # noqa: F401 - fixtures
from tests.interop.test_java_mqadmin_ops import aerolite, traffic  # noqa: F401 - the fixture
from tests.interop.test_java_trace import apache_mqadmin, our_mqadmin
from tests.processes import Broker, start_aerolite, unique

pytestmark = pytest.mark.interop


async def test_config_and_queue_commands_print_what_apaches_print(
    aerolite: Broker,  # noqa: F811
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic, group = unique("CfgTopic"), unique("cfg_cg")
    first = await traffic(aerolite.namesrv, topic, group)
    home = tmp_path / "mqadmin"
    addr, ns = aerolite.address, aerolite.namesrv

    def both(*args: str) -> tuple[str, str]:
        apache = apache_mqadmin(java_lib, home, ns, *args)
        return our_mqadmin(ns, *args), apache

    def same(*args: str) -> str:
        ours, apache = both(*args)
        assert ours == apache, args
        return apache

    # Reads over queues and messages.
    assert "MSGID: " in same("printMsg", "-t", topic)
    assert "NOT PRINT BODY" in same("printMsg", "-t", topic, "-s", "TagB", "-d", "false")
    assert "print msg finished" in same("consumeMessage", "-t", topic)
    mq = first.message_queue
    same("consumeMessage", "-t", topic, "-b", mq.broker_name, "-i", str(mq.queue_id), "-o", "1")
    assert same("allocateMQ", "-t", topic, "-i", "10.0.0.1,10.0.0.2,10.0.0.3").startswith(
        '{"result":{'
    )
    assert "idx: 0" in same("queryCq", "-t", topic, "-q", "0", "-i", "0", "-c", "3")
    assert same("topicClusterList", "-t", topic) == "DefaultCluster\n"
    assert f"{group} " in same("consumerProgress")  # every group, the offline one too

    # Reads of configuration.
    assert same("getBrokerConfig", "-b", addr).startswith(f"============{addr}============\n")
    assert "Master: " in same("getBrokerConfig", "-c", "DefaultCluster")
    assert "listenPort" in same("getNamesrvConfig")
    same("updateSubGroup", "-b", addr, "-g", group, "-r", "5")
    assert "retryMaxTimes                           =  5" in same("getConsumerConfig", "-g", group)

    async with RemotingClient() as client:  # a producer instance, connected while asked
        heartbeat = {"clientID": "127.0.0.1@7", "producerDataSet": [{"groupName": "cfg_pg"}]}
        body = json.dumps(heartbeat).encode()
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        assert (await client.invoke(addr, request, 5)).code == ResponseCode.SUCCESS
        assert "producer group (cfg_pg) instance : clientId=127.0.0.1@7" in same(
            "producer", "-b", addr
        )

    # Changes: each leaves the state the next run of the same command finds.
    cfg = unique("CfgNew")
    same("updateTopic", "-b", addr, "-t", cfg, "-r", "4", "-w", "4")
    same("updateTopic", "-c", "DefaultCluster", "-t", cfg, "-o", "true")
    same("updateBrokerConfig", "-b", addr, "-k", "slowRequestThresholdMs", "-v", "1234")
    same("updateKvConfig", "-s", "aerolite_ns", "-k", "k1", "-v", "v1")
    same("deleteKvConfig", "-s", "aerolite_ns", "-k", "k1")
    same("updateOrderConf", "-t", cfg, "-m", "put", "-v", "broker-a:4")
    same("updateOrderConf", "-t", cfg, "-m", "get")
    same("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert same("cleanExpiredCQ", "-c", "DefaultCluster") == "success"
    assert same("deleteExpiredCommitLog", "-b", addr) == "success"
    # Wipe and add alternate, so each tool's pair meets the same topics.
    apache_wipe = apache_mqadmin(java_lib, home, ns, "wipeWritePerm", "-b", "broker-a")
    apache_add = apache_mqadmin(java_lib, home, ns, "addWritePerm", "-b", "broker-a")
    assert apache_wipe.startswith("wipe write perm of broker[broker-a] in name server[")
    assert our_mqadmin(ns, "wipeWritePerm", "-b", "broker-a") == apache_wipe
    assert our_mqadmin(ns, "addWritePerm", "-b", "broker-a") == apache_add

    perm = ("updateTopicPerm", "-b", addr, "-t", cfg, "-p", "4")
    apache = apache_mqadmin(java_lib, home, ns, *perm)
    assert apache.startswith(f"update topic perm from 6 to 4 in {addr} success.")
    async with Admin(ns) as admin:  # back to read-write for our run
        await admin.create_topic(addr, TopicConfig(cfg, 8, 8, 6))
    assert our_mqadmin(ns, *perm) == apache

    same("cloneGroupOffset", "-s", group, "-d", unique("cfg_clone"), "-t", topic)
    assert "#brokerName" in same("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")
    same("skipAccumulatedMessage", "-g", group, "-t", topic)
    same("exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path / "export"))
    same("updateOrderConf", "-t", cfg, "-m", "delete")
    same("deleteSubGroup", "-b", addr, "-g", group)
    same("deleteTopic", "-t", cfg, "-c", "DefaultCluster")


async def test_a_reset_with_the_group_offline_on_apaches_broker_falls_back_as_apaches(
    java_broker: Broker,  # noqa: F811
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Apache RocketMQ 4.9's broker refuses INVOKE_BROKER_TO_RESET_OFFSET for a group with
    no consumer online (CONSUMER_NOT_ONLINE); both tools then commit each queue's offset
    themselves and print the six-column rollback table. The group's offsets are put back
    between the two runs, so each starts from the same place."""
    topic, group = unique("CfgOld"), unique("cfg_old")
    await traffic(java_broker.namesrv, topic, group)
    ns, home = java_broker.namesrv, tmp_path / "mqadmin"
    async with Admin(ns) as admin:
        _tps, before = await admin.consume_stats(group, topic)
        for args in (
            ("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now"),
            ("skipAccumulatedMessage", "-g", group, "-t", topic),
        ):
            apache = apache_mqadmin(java_lib, home, ns, *args)
            assert "#rollbackOffset" in apache
            for mq, wrapper in before.items():
                await admin.commit_consumer_offset(mq, group, wrapper.consumer_offset)
            assert our_mqadmin(ns, *args) == apache, args
            for mq, wrapper in before.items():
                await admin.commit_consumer_offset(mq, group, wrapper.consumer_offset)


async def test_acl_commands_print_what_apaches_print(
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Against a broker with ACL on: Apache's tool signs with ``$ROCKETMQ_HOME/conf/
    tools.yml``, ours with ``--ak``/``--sk``; GET_BROKER_CLUSTER_ACL_INFO answers as RocketMQ
    4.9's (a DataVersion and each file's), so Apache's clusterAclConfigVersion reads it."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_FILE)
    broker = start_aerolite(tmp_path / "store", {"aclEnable": "true", "aclFilePath": str(acl)})
    try:
        home = tmp_path / "mqadmin"
        (home / "conf").mkdir(parents=True)
        (home / "conf" / "tools.yml").write_text("accessKey: adminKey\nsecretKey: adminSecret\n")
        ns, addr = broker.namesrv, broker.address
        keys = ("--ak", "adminKey", "--sk", "adminSecret")

        def same(*args: str) -> str:
            apache = apache_mqadmin(java_lib, home, ns, *args)
            assert our_mqadmin(ns, *args, *keys) == apache, args
            return apache

        assert f"{acl}" in same("clusterAclConfigVersion", "-c", "DefaultCluster")
        assert same("clusterAclConfigVersion", "-b", addr).endswith(
            "get broker's plain access config version success.\n"
        )
        assert "adminKey" in same("getAclConfig", "-b", addr)
        # 4.9's tool then prints PlainAccessConfig's object id; the lines before it agree.
        create = ("updateAclConfig", "-b", addr, "-a", "newUser1", "-s", "newSecret1")
        apache = apache_mqadmin(java_lib, home, ns, *create, "-t", "topicA=PUB")
        ours = our_mqadmin(ns, *create, "-t", "topicA=PUB", *keys)
        line = f"create or update plain access config to {addr} success.\n"
        assert apache.startswith(line) and ours.startswith(line)
        assert same("updateGlobalWhiteAddr", "-b", addr, "-g", "10.1.1.*") == (
            f"update global white remote addresses to {addr} success.\n"
        )
        delete = ("deleteAclConfig", "-b", addr, "-a", "newUser1")
        apache = apache_mqadmin(java_lib, home, ns, *delete)
        assert apache.endswith("account's accesskey is:newUser1")
        our_mqadmin(ns, *create, *keys)  # the account back, for our tool to delete
        assert our_mqadmin(ns, *delete, *keys) == apache
    finally:
        broker.stop()
