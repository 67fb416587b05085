"""Message trace across implementations: the official RocketMQ 4.x Go client
(``github.com/apache/rocketmq-client-go/v2`` v2.1.2, remoting protocol) with trace on
(``producer.WithTrace`` / ``consumer.WithTrace``) writes its Pub, SubBefore and SubAfter
records through an Aerolite broker to ``RMQ_SYS_TRACE_TOPIC``; Aerolite's SDK
(``Admin.query_trace``) and mqadmin (``queryMsgTraceById``) read them back.

The Go client writes newer layouts than Java 4.9's: a Pub record has a 15th field (the client
host) and a SubBefore a 9th (the same); and it builds a trace message's KEYS with empty
entries first (its ``Keyset.slice`` appends to a slice made with that many empty strings), so
the property starts with spaces. Both must still be found and read.

The broker is ``python -m broker standalone`` with ``traceTopicEnable=true``, stopped by PID
after the test. The driver is ``go4trace/main.go``, built with ``go build`` into
``go4trace/build`` (ignored by git) and rebuilt when main.go, go.mod or go.sum changed
(``go4trace/build/build.stamp`` holds their hash); each run is one process that exits by its
own deadline, its JSON lines read by tests/processes.py's ``DriverRun``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from client.admin import Admin
from client.trace import DEFAULT_REGION, TRACE_TOPIC, MessageType, TraceType, TraceView
from tests.interop.test_java_trace import aerolite, our_mqadmin  # noqa: F401 - the fixture
from tests.processes import Broker, DriverRun, build_when_changed, unique

pytestmark = pytest.mark.interop

GO4_DIR = Path(__file__).parent / "go4trace"
GO_SOURCES = ("main.go", "go.mod", "go.sum")
BINARY = GO4_DIR / "build" / "go4trace"
STAMP = GO4_DIR / "build" / "build.stamp"
GO_BUILD_TIMEOUT_S = 600.0  # the first build downloads the modules from the Go module proxy
RUN_DEADLINE_S = 60  # the driver's own deadline (it exits 10 s after it at the latest)
RUN_TIMEOUT_S = RUN_DEADLINE_S + 30.0
TRACE_WAIT_S = 30.0
MESSAGES = 3
ALL_KINDS = {TraceType.PUB, TraceType.SUB_BEFORE, TraceType.SUB_AFTER}


def build_go4trace() -> Path:
    """``go4trace/build/go4trace``, built again only when the sources changed since the
    stamp."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(
            f"the Go 4.x client's trace test needs `go` (1.22 or newer) on PATH to build "
            f"{GO4_DIR}, e.g. export PATH=$PATH:/usr/local/go/bin"
        )
    digest = hashlib.sha256()
    for name in GO_SOURCES:
        digest.update(name.encode() + b"\0" + (GO4_DIR / name).read_bytes() + b"\0")
    BINARY.parent.mkdir(exist_ok=True)
    build_when_changed(
        [go, "build", "-o", str(BINARY), "."],
        cwd=GO4_DIR,
        fingerprint=digest.hexdigest(),
        stamp=STAMP,
        outputs=(BINARY,),
        timeout_s=GO_BUILD_TIMEOUT_S,
    )
    return BINARY


@pytest.fixture(scope="session")
def go4trace() -> Path:
    return build_go4trace()


def run_go(program: Path, work: Path, name: str, *args: str) -> DriverRun:
    """One driver run to its end (it exits by itself); killed by PID if it overruns."""
    work.mkdir(parents=True, exist_ok=True)
    stderr_path = work / f"{name}.stderr"
    env = {**os.environ, "HOME": str(work)}
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(  # our own driver, fixed arguments
            [str(program), *args, "-deadline", f"{RUN_DEADLINE_S}s"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
    run = DriverRun(name, proc, stderr_path)
    try:
        run.finish(RUN_TIMEOUT_S)
    finally:
        run.kill()  # a no-op once it exited
    return run


async def full_trace(namesrv: str, msg_id: str) -> list[TraceView]:
    """The records about ``msg_id`` once its Pub, SubBefore and SubAfter are all there (the
    Go client's dispatcher writes them on goroutines of its own, a little after the event)."""
    views: list[TraceView] = []
    deadline = time.monotonic() + TRACE_WAIT_S
    async with Admin(namesrv) as admin:
        while time.monotonic() < deadline:
            views = await admin.query_trace(msg_id, TRACE_TOPIC)
            if {v.trace_type for v in views} >= ALL_KINDS:
                return views
            await asyncio.sleep(0.3)
    pytest.fail(f"the trace of {msg_id} after {TRACE_WAIT_S:g} s: {[v.trace_type for v in views]}")


async def test_go_client_traces_read_by_aerolite(
    go4trace: Path,
    aerolite: Broker,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic, pg, cg = unique("GoTraced"), unique("go_trace_pg"), unique("go_trace_cg")
    keys, namesrv = unique("gokey"), aerolite.namesrv
    common = ("-n", namesrv, "-topic", topic)
    producer = run_go(
        go4trace, tmp_path, "go4-produce", "produce", *common, "-group", pg,
        "-count", str(MESSAGES), "-keys", keys, "-tag", "TagGo",
    )  # fmt: skip
    sent = producer.of("sent")
    assert len(sent) == MESSAGES, producer.describe()
    assert all(s["trace_on"] and s["region"] == DEFAULT_REGION for s in sent), sent
    consumer = run_go(
        go4trace, tmp_path, "go4-consume", "consume", *common, "-group", cg,
        "-expect", str(MESSAGES),
    )  # fmt: skip
    got = {m["msg_id"] for m in consumer.of("msg")}
    assert got == {s["msg_id"] for s in sent}, consumer.describe()

    for s in sent:
        views = await full_trace(namesrv, s["msg_id"])
        by_type = {v.trace_type: v for v in views}
        i, msg_keys = s["index"], f"{keys}-{s['index']} {keys}-all"

        pub = by_type[TraceType.PUB].context
        assert (pub.group, pub.success, pub.region_id) == (pg, True, DEFAULT_REGION)
        (bean,) = pub.beans
        assert (bean.msg_id, bean.topic, bean.tags, bean.keys) == (
            s["msg_id"], topic, "TagGo", msg_keys,
        )  # fmt: skip
        assert bean.store_host == aerolite.address
        assert bean.offset_msg_id == s["offset_msg_id"]
        assert (bean.msg_type, bean.body_length) == (MessageType.NORMAL, len(f"go4trace {i}"))
        assert bean.client_host  # the Go client's 15th Pub field: its own IP

        before = by_type[TraceType.SUB_BEFORE].context
        after = by_type[TraceType.SUB_AFTER].context
        assert before.group == after.group == cg
        assert before.request_id and after.request_id == before.request_id
        assert (before.beans[0].keys, before.beans[0].retry_times) == (msg_keys, 0)
        assert after.beans[0].keys == msg_keys
        assert after.success and after.context_code == 0  # ConsumeReturnType.SUCCESS

        ours = our_mqadmin(namesrv, "queryMsgTraceById", "-i", s["msg_id"])
        assert f"Pub        {pg}" in ours and f"Sub        {cg}" in ours, ours
