"""Apache RocketMQ's own Java client (rocketmq-client 4.9.7) against an Aerolite broker.

The M5 features as an unmodified Java application uses them: SQL92 subscriptions
(``MessageSelector.bySql``), consume retry with RECONSUME_LATER, delay levels. The driver is
``client/JavaClient.java``, run as a single-file program on the jars that
``tests/interop/broker/pom.xml`` resolves (rocketmq-client comes with rocketmq-broker); it
speaks the same JSON lines as the C++ driver of tests/e2e. The broker is ``python -m broker
standalone`` in a subprocess, stopped by PID after each test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.filter_sql import compile_sql
from tests.interop.test_java_broker import java_lib  # noqa: F401 - the fixture
from tests.processes import Broker, DriverRun, start_aerolite, unique

pytestmark = pytest.mark.interop

DRIVER = Path(__file__).parent / "client" / "JavaClient.java"
# Level 2 = 2 s for the delay test; level 3 (a first retry) = 1 s.
DELAY_LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
RUN_TIMEOUT_S = 90.0


class JavaClients:
    """Starts JavaClient.java runs against one name server; kills what is left after a test."""

    def __init__(self, lib: Path, namesrv: str, work: Path) -> None:
        java = shutil.which("java")
        assert java is not None
        self.java = java
        self.lib = lib
        self.namesrv = namesrv
        self.work = work
        self.runs: list[DriverRun] = []

    def start(self, command: str, **args: Any) -> DriverRun:
        home = self.work / "home"  # the client logs under ~/logs/rocketmqlogs
        home.mkdir(parents=True, exist_ok=True)
        stderr_path = self.work / f"{len(self.runs):02d}-java-{command}.stderr"
        argv = [
            self.java,
            f"-Duser.home={home}",
            "-Xmx256m",
            "-cp",
            f"{self.lib}/*",
            str(DRIVER),
            command,
        ]
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver, fixed arguments
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=self.work,
            )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"namesrv": self.namesrv, **args}) + "\n")
        proc.stdin.flush()
        run = DriverRun(f"java-{command}", proc, stderr_path)
        self.runs.append(run)
        return run

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.kill()


@pytest.fixture
def aerolite(tmp_path: Path) -> Iterator[Broker]:
    broker = start_aerolite(
        tmp_path / "store", {"enablePropertyFilter": "true", "messageDelayLevel": DELAY_LEVELS}
    )
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def java(java_lib: Path, aerolite: Broker, tmp_path: Path) -> Iterator[JavaClients]:  # noqa: F811
    clients = JavaClients(java_lib, aerolite.namesrv, tmp_path)
    try:
        yield clients
    finally:
        clients.close()


def _produce(java: JavaClients, topic: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    run = java.start("produce", group=unique("java_pg"), topic=topic, messages=messages)
    done = run.finish(RUN_TIMEOUT_S)
    assert done["ok"] == len(messages), run.describe()
    return run.of("sent")


def test_sql92_subscription(java: JavaClients) -> None:
    topic = unique("java_sql")
    props = [{"a": str(i), "region": ("eu", "us", "apac")[i % 3]} for i in range(12)]
    _produce(java, topic, [{"body": f"m{i}", "properties": p} for i, p in enumerate(props)])
    expression = "a BETWEEN 2 AND 9 AND region IN ('eu', 'apac') OR a = 11"
    wanted = {f"m{i}" for i, p in enumerate(props) if compile_sql(expression).matches(p)}
    assert wanted == {"m2", "m3", "m5", "m6", "m8", "m9", "m11"}
    run = java.start(
        "consume",
        group=unique("java_cg"),
        topic=topic,
        sql=expression,
        expect=len(wanted),
        settle_s=1.5,
        deadline_s=60,
    )
    done = run.finish(RUN_TIMEOUT_S)
    assert done["reason"] == "expected", run.describe()
    assert sorted(m["body"] for m in run.of("msg")) == sorted(wanted)


def test_sql92_expression_that_does_not_parse_fails_the_start(java: JavaClients) -> None:
    topic = unique("java_sql_bad")
    _produce(java, topic, [{"body": "x"}])
    run = java.start("consume", group=unique("java_cg"), topic=topic, sql="a >", deadline_s=30)
    done = run.finish(RUN_TIMEOUT_S)
    assert done["reason"] == "start_error", run.describe()
    (error,) = run.of("start_error")
    assert "SUBSCRIPTION_PARSE_FAILED" in error["error"] or "does not parse" in error["error"]


def test_reconsume_later_comes_back_from_the_retry_topic(java: JavaClients) -> None:
    topic = unique("java_retry")
    (sent,) = _produce(java, topic, [{"body": "again", "tags": "TagR", "keys": "k-r"}])
    run = java.start(
        "consume",
        group=unique("java_cg"),
        topic=topic,
        fail_first=True,
        expect=1,
        settle_s=1.0,
        deadline_s=60,
    )
    done = run.finish(RUN_TIMEOUT_S)
    assert done["reason"] == "expected", run.describe()
    first, second = run.of("msg")
    assert (first["answer"], first["reconsume_times"]) == ("RECONSUME_LATER", 0)
    assert (second["answer"], second["reconsume_times"]) == ("CONSUME_SUCCESS", 1)
    # The Java client restores the original topic and id of a retried message.
    assert second["topic"] == topic
    assert second["msg_id"] == sent["msg_id"]
    assert (second["tags"], second["keys"], second["body"]) == ("TagR", "k-r", "again")
    assert second["at"] - first["at"] >= 900  # delay level 3 is 1 s here


def test_delay_level(java: JavaClients) -> None:
    topic = unique("java_delay")
    run = java.start(
        "consume", group=unique("java_cg"), topic=topic, expect=2, settle_s=0.5, deadline_s=60
    )
    run.wait_started()
    sent = _produce(java, topic, [{"body": "now"}, {"body": "later", "delay_level": 2}])
    done = run.finish(RUN_TIMEOUT_S)
    assert done["reason"] == "expected", run.describe()
    got = {m["body"]: m for m in run.of("msg")}
    assert set(got) == {"now", "later"}
    later = got["later"]
    assert later["topic"] == topic
    assert later["properties"]["DELAY"] == "2"
    assert later["at"] - sent[1]["at"] >= 2000 - 100  # level 2 = 2 s (100 ms of clock slack)
