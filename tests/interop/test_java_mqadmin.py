"""``mqadmin`` against Apache RocketMQ 4.9.7's own name server and broker: the admin tool
speaks the protocol, not Aerolite, so RocketMQ users can point it at their clusters.

Each command runs as a real process with ``--json``; its answers are checked against what
was done through it (a topic created, a message sent and found again)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.interop.test_java_broker import java_broker, java_lib
from tests.processes import Broker, unique

pytestmark = pytest.mark.interop
__all__ = ["java_broker", "java_lib"]  # fixtures, used by name


def mqadmin(namesrv: str, *args: str) -> Any:
    done = subprocess.run(  # our own admin tool, fixed arguments
        [sys.executable, "-m", "client.admin_cli", args[0], "-n", namesrv, "--json", *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_mqadmin_against_apache_rocketmq(java_broker: Broker) -> None:
    ns = java_broker.namesrv
    # A JVM just started may be slow to answer its first admin request: clusterList then
    # shows the broker with an "error" entry; ask again for a while.
    deadline = time.monotonic() + 60
    while True:
        clusters = mqadmin(ns, "clusterList")
        if clusters and "brokerVersionDesc" in clusters[0]:
            break
        assert time.monotonic() < deadline, clusters
        time.sleep(1)
    assert clusters[0]["brokerVersionDesc"].startswith("V4_9")
    cluster = clusters[0]["cluster"]

    topic = unique("interop_admin")
    made = mqadmin(ns, "updateTopic", "-c", cluster, "-t", topic, "-r", "2", "-w", "2")
    assert made["brokers"] == [java_broker.address]
    route = mqadmin(ns, "topicRoute", "-t", topic)
    assert route["queueDatas"][0]["readQueueNums"] == 2
    assert topic in mqadmin(ns, "topicList")

    sent = mqadmin(ns, "sendMessage", "-t", topic, "-p", "hello java", "-c", "TagA", "-k", "k-1")
    assert sent["sendStatus"] == "SEND_OK"
    status = mqadmin(ns, "topicStatus", "-t", topic)
    assert sum(q["maxOffset"] for q in status) == 1
    found = mqadmin(ns, "queryMsgById", "-i", sent["offsetMsgId"])
    assert found[0]["body"] == "hello java" and found[0]["tags"] == "TagA"
    printed = mqadmin(ns, "printMsg", "-t", topic)
    assert [m["body"] for m in printed] == ["hello java"]

    group = unique("interop_admin_cg")
    mqadmin(ns, "updateSubGroup", "-c", cluster, "-g", group, "-r", "3")
    progress = mqadmin(ns, "consumerProgress", "-g", group, "-t", topic)
    assert progress["diffTotal"] == 1  # nothing consumed yet
    config = mqadmin(ns, "getBrokerConfig", "-b", java_broker.address)
    assert config[java_broker.address]["brokerClusterName"] == cluster
    runtime = mqadmin(ns, "brokerStatus", "-b", java_broker.address)
    assert int(runtime[java_broker.address]["msgPutTotalTodayNow"]) >= 1
    assert mqadmin(ns, "getNamesrvConfig")
