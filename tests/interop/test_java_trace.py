"""Message trace across implementations: Apache RocketMQ's Java client (4.9.7) with
``enableMsgTrace`` writing through an Aerolite broker, read back by Aerolite's SDK and
mqadmin; Aerolite's SDK writing, read back by Apache's own ``mqadmin queryMsgTraceById``
(``MQAdminStartup`` from rocketmq-tools 4.9.7). The two mqadmins print the same text.

The broker is ``python -m broker standalone`` with ``traceTopicEnable=true``, stopped by PID
after each test; the Java client runs as ``client/JavaClient.java`` (see test_java_client).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer
from client.admin import Admin
from client.trace import TraceType, TraceView
from tests.interop.test_java_broker import java_lib  # noqa: F401 - the fixture
from tests.interop.test_java_client import RUN_TIMEOUT_S, JavaClients
from tests.processes import Broker, start_aerolite, unique

pytestmark = pytest.mark.interop

MQADMIN_TIMEOUT_S = 120.0


@pytest.fixture
def aerolite(tmp_path: Path) -> Iterator[Broker]:
    broker = start_aerolite(tmp_path / "store", {"traceTopicEnable": "true"})
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def java(java_lib: Path, aerolite: Broker, tmp_path: Path) -> Iterator[JavaClients]:  # noqa: F811
    clients = JavaClients(java_lib, aerolite.namesrv, tmp_path / "clients")
    try:
        yield clients
    finally:
        clients.close()


def apache_mqadmin(lib: Path, home: Path, namesrv: str, *args: str) -> str:
    """Apache's ``mqadmin`` (MQAdminStartup), its stdout. Its logging wants
    ``$ROCKETMQ_HOME/conf/logback_tools.xml``; an empty configuration keeps stdout clean."""
    java = shutil.which("java")
    assert java is not None
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "logback_tools.xml").write_text("<configuration/>\n")
    done = subprocess.run(  # RocketMQ's own tool, fixed arguments
        [
            java,
            f"-Drocketmq.home.dir={home}",
            f"-Duser.home={home}",
            "-Xmx256m",
            "-cp",
            f"{lib}/*",
            "org.apache.rocketmq.tools.command.MQAdminStartup",
            *args,
            "-n",
            namesrv,
        ],
        capture_output=True,
        text=True,
        timeout=MQADMIN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def our_mqadmin(namesrv: str, *args: str) -> str:
    done = subprocess.run(  # our own admin tool, fixed arguments
        [sys.executable, "-m", "client.admin_cli", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=MQADMIN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def trace_of(namesrv: str, msg_id: str, trace_topic: str, kinds: int) -> list[TraceView]:
    """The records about ``msg_id`` once ``kinds`` record types are there (a traced client
    writes its records up to half a second after the event)."""
    views: list[TraceView] = []
    async with Admin(namesrv) as admin:
        for _ in range(100):
            views = await admin.query_trace(msg_id, trace_topic)
            if len({v.trace_type for v in views}) >= kinds:
                return views
            await asyncio.sleep(0.2)
    pytest.fail(f"the trace of {msg_id} in {trace_topic}: {[v.trace_type for v in views]}")


async def test_java_clients_traces_read_by_aerolite(
    java: JavaClients,
    aerolite: Broker,
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic, pg, cg = unique("JavaTraced"), unique("java_trace_pg"), unique("java_trace_cg")
    run = java.start(
        "produce",
        group=pg,
        topic=topic,
        trace=True,
        messages=[{"body": "traced by java", "tags": "TagJ", "keys": "order-7 user-9"}],
    )
    assert run.finish(RUN_TIMEOUT_S)["ok"] == 1, run.describe()
    (sent,) = run.of("sent")
    consumer = java.start("consume", group=cg, topic=topic, trace=True, expect=1, deadline_s=60)
    assert consumer.finish(RUN_TIMEOUT_S)["count"] == 1, consumer.describe()

    views = await trace_of(aerolite.namesrv, sent["msg_id"], "RMQ_SYS_TRACE_TOPIC", kinds=3)
    by_type = {v.trace_type: v.context for v in views}
    pub = by_type[TraceType.PUB]
    assert (pub.group, pub.success) == (pg, True)
    bean = pub.beans[0]
    assert (bean.topic, bean.tags, bean.keys) == (topic, "TagJ", "order-7 user-9")
    assert bean.offset_msg_id == sent["offset_msg_id"]
    before, after = by_type[TraceType.SUB_BEFORE], by_type[TraceType.SUB_AFTER]
    assert before.group == after.group == cg
    assert after.request_id == before.request_id and after.success
    assert after.context_code == 0  # ConsumeReturnType.SUCCESS

    ours = our_mqadmin(aerolite.namesrv, "queryMsgTraceById", "-i", sent["msg_id"])
    apache = apache_mqadmin(
        java_lib, tmp_path / "mqadmin", aerolite.namesrv, "queryMsgTraceById", "-i", sent["msg_id"]
    )
    assert f"Pub        {pg}" in ours and f"Sub        {cg}" in ours
    assert ours == apache


async def test_sdk_traces_read_by_apache_mqadmin(
    aerolite: Broker,
    java_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic, trace_topic = unique("SdkTraced"), unique("TraceTopic")
    pg, cg = unique("sdk_trace_pg"), unique("sdk_trace_cg")
    async with Producer(pg, aerolite.namesrv, trace=True, trace_topic=trace_topic) as producer:
        sent = await producer.send(Message(topic, b"traced by aerolite", keys=["k-1"]))
    consumed = asyncio.Event()
    consumer = PushConsumer(
        cg,
        aerolite.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        trace=True,
        trace_topic=trace_topic,
    )

    @consumer.subscribe(topic)
    async def listener(_msg: MessageView) -> None:
        consumed.set()

    async with consumer:
        await asyncio.wait_for(consumed.wait(), 30)
    await trace_of(aerolite.namesrv, sent.msg_id, trace_topic, kinds=3)

    args = ("queryMsgTraceById", "-i", sent.msg_id, "-t", trace_topic)
    apache = apache_mqadmin(java_lib, tmp_path / "mqadmin", aerolite.namesrv, *args)
    assert f"Pub        {pg}" in apache and f"Sub        {cg}" in apache
    assert our_mqadmin(aerolite.namesrv, *args) == apache
