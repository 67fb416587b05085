"""The official RocketMQ 5 Java client (``rocketmq-client-java`` 5.2.0, gRPC) against Aerolite's
RocketMQ 5 endpoint (broker/proxy), scenario for scenario as tests/proxy does it with the 5.x
Python client: a Producer's normal, FIFO, delayed and transactional sends (commit, rollback, an
orphan checked back through the TransactionChecker), a SimpleConsumer's receive, ack, invisible
time and change of it, the dead-letter queue after the group's max attempts, a PushConsumer
(and a FIFO one), messages crossing between the 5.x client and Aerolite's own 4.x SDK both
ways, and TLS as a default Java client (SSL on) meets a broker whose gRPC port is
``tlsServerMode=permissive``. Beyond the Python client's scenarios: the topic's message type
in the route (the client refuses a FIFO or delayed message for a NORMAL topic). Both suites
run the SQL92 filter scenario.

The client is ``java5/Java5Client.java``, run as a single-file program on the jar that
``java5/pom.xml`` resolves (``mvn dependency:copy-dependencies`` into ``java5/target/lib``,
once, reused while the pom is unchanged, as tests/interop/broker's jars are). It reads one
JSON line of steps and prints JSON lines (see its header), and leaves by its own deadline;
``HOME`` and ``user.home`` point into the test's temp dir (the client logs to
``~/logs/rocketmq``). The broker is ``python -m broker standalone`` (one per module, quick
settings), topics and groups are made first with ``mqadmin`` (5.x clients need their routes
from the start; RocketMQ 5's ``-a +message.type=...`` and ``-o true`` for FIFO), and what
reached the broker is read back with the 4.x SDK: rmq5_broker.py, shared with the Go client's
test_go5_client.py. Every process is stopped by PID.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import Message, Producer
from tests.bench.java_rocketmq import resolve_maven
from tests.interop.rmq5_broker import (
    Aerolite5,
    aerolite5_fixture,  # noqa: F401 - the fixture
    aerolite5_tls_fixture,  # noqa: F401 - the fixture
    create_group,
    create_topic,
    read_dead_letters,
    read_topic,
)
from tests.processes import DriverRun, tail, unique
from tests.proxy.scenarios import (
    assert_like,
    change_steps,
    check_change,
    check_dlq_tries,
    check_invisible,
    check_normal,
    check_read_by_4x,
    check_sql,
    dlq_steps,
    invisible_steps,
    lines,
    normal_steps,
    read_by_4x,
    send_steps,
    spec,
    sql_steps,
)

pytestmark = pytest.mark.interop

JAVA5_DIR = Path(__file__).parent / "java5"
POM = JAVA5_DIR / "pom.xml"
LIB = JAVA5_DIR / "target" / "lib"
STAMP = JAVA5_DIR / "target" / "lib.stamp"
DRIVER = JAVA5_DIR / "Java5Client.java"
CLIENT_VERSION = "5.2.0"  # pinned in java5/pom.xml
# A run's own deadline is its steps' time; the JVM compiling the driver comes on top.
JVM_SLACK_S = 60.0

SPEC = spec("hello from java five")


# ------------------------------------------------------------------------------- the jars


def resolve_java5_jars() -> Path:
    """``java5/target/lib``: the client's jars, resolved from Maven Central when the pom
    changed (the directory is emptied first, so that no other version stays on the class
    path)."""
    try:
        lib = resolve_maven(POM, LIB, STAMP)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"resolving the Java 5.x client in {JAVA5_DIR}: {exc}")
    if not any(lib.glob("rocketmq-client-java-*.jar")):
        pytest.fail(f"mvn in {JAVA5_DIR} resolved no rocketmq-client-java jar")
    return lib


@pytest.fixture(scope="session")
def java5_lib() -> Path:
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("java and mvn are needed")
    return resolve_java5_jars()


# ------------------------------------------------------------------------------- the client


class Java5:
    """Runs Java5Client.java against one gRPC endpoint, for one test; leftovers are killed
    by PID, and each run's lines, stderr and the client's log are printed at teardown (pytest
    shows them for a failing test)."""

    def __init__(self, lib: Path, broker: Aerolite5, work: Path) -> None:
        java = shutil.which("java")
        assert java is not None
        self.java = java
        self.lib = lib
        self.broker = broker
        self.work = work
        self.home = work / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.runs: list[DriverRun] = []

    def start(
        self,
        steps: list[dict[str, Any]],
        *,
        deadline_s: float = 60,
        ssl: bool | None = False,
        endpoint: str | None = None,
    ) -> DriverRun:
        """Start the driver on ``steps``; ``ssl`` None leaves the client's default (on)."""
        name = f"java5-{len(self.runs):02d}-{steps[0]['op'] if steps else 'none'}"
        stderr_path = self.work / f"{name}.stderr"
        env = {**os.environ, "HOME": str(self.home)}
        argv = [
            self.java,
            f"-Duser.home={self.home}",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{self.lib}/*",
            str(DRIVER),
            "run",
        ]
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver, fixed arguments
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=self.work,
                env=env,
            )
        args: dict[str, Any] = {
            "endpoint": endpoint or self.broker.grpc,
            "deadline_s": deadline_s,
            "steps": steps,
        }
        if ssl is not None:
            args["ssl"] = ssl
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(args) + "\n")
        proc.stdin.flush()
        run = DriverRun(name, proc, stderr_path)
        self.runs.append(run)
        return run

    def run(self, steps: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        """``start``, then wait for its ``done`` line (fails without one or with an error)."""
        run = self.start(steps, **kwargs)
        run.finish(float(kwargs.get("deadline_s", 60)) + JVM_SLACK_S)
        (started,) = run.of("started")
        assert started["client_version"] == CLIENT_VERSION, started
        return run

    async def arun(self, steps: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        """``run`` off the event loop (the 4.x SDK's clients live on it meanwhile)."""
        return await asyncio.to_thread(self.run, steps, **kwargs)

    def report(self) -> str:
        sections = [run.describe() for run in self.runs]
        log = self.home / "logs" / "rocketmq" / "rocketmq-client.log"
        if self.runs:
            sections.append(f"--- client log tail:\n{tail(log, 4000)}")
            sections.append(f"--- broker log tail:\n{self.broker.broker.log_tail()[-3000:]}")
        return "\n".join(sections)

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.kill()


@pytest.fixture
def java5(java5_lib: Path, aerolite5: Aerolite5, tmp_path: Path) -> Iterator[Java5]:
    clients = Java5(java5_lib, aerolite5, tmp_path)
    try:
        yield clients
    finally:
        clients.close()
        print(clients.report())  # captured: shown for a failing test


# ------------------------------------------------------------------ producer, simple consumer


async def test_normal_send_then_receive_and_ack(aerolite5: Aerolite5, java5: Java5) -> None:
    topic = create_topic(aerolite5, "j5_normal")
    run = await java5.arun(normal_steps(topic, unique("j5g_normal"), SPEC, within_s=15))
    sent, msg = check_normal(run, topic, SPEC)
    assert (msg["message_group"], msg["delivery_timestamp"]) == (None, None)
    assert lines(run, "ack_error") == []
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert [(m.body, m.msg_id, m.tags) for m in stored] == [
        (SPEC["body"].encode(), sent["message_id"], SPEC["tag"])
    ]


def test_a_message_type_the_topic_does_not_take_is_refused(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """The route carries the topic's ``message.type`` (here NORMAL); the client refuses a
    FIFO or delayed message for it before sending (the broker's settings turn the check on)."""
    topic = create_topic(aerolite5, "j5_typed")
    run = java5.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic,
             "messages": [{**SPEC, "group": "g1"}, {**SPEC, "delay_ms": 2000}, SPEC]},
        ],
    )  # fmt: skip
    errors = lines(run, "send_error")
    assert [(e["index"], e["type"]) for e in errors] == [
        (0, "IllegalArgumentException"),
        (1, "IllegalArgumentException"),
    ], errors
    assert "acceptMessageTypes=[NORMAL]" in errors[0]["text"]
    assert [s["index"] for s in lines(run, "sent")] == [2]


# ---------------------------------------------------------------------------- FIFO, delay


async def test_fifo_message_groups_are_received_in_order(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """A FIFO topic and a consumeMessageOrderly group: a message group's messages come in send
    order, and the rest of its queue is held back while a batch of it is un-acked."""
    topic = create_topic(aerolite5, "j5_fifo", "FIFO")
    group = create_group(aerolite5, "j5g_fifo", "-o", "true")
    specs = [{"body": f"{g}-{i}", "group": f"{g}_group"} for i in range(5) for g in "ab"]
    run = await java5.arun(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": specs},
            {"op": "simple", "group": group, "topic": topic},
            {"label": "head", "op": "receive", "max": 2, "invisible_s": 10, "until": 2,
             "within_s": 15},
            {"label": "blocked", "op": "receive", "invisible_s": 10},
            {"op": "ack", "indices": "all"},
            {"label": "rest", "op": "receive", "invisible_s": 10, "until_total": 10,
             "within_s": 25, "ack": True},
        ],
        deadline_s=75,
    )  # fmt: skip
    assert [e["body"] for e in lines(run, "sent")] == [s["body"] for s in specs]
    head = [e["body"] for e in lines(run, "msg", "head")]
    g = head[0][0]  # the message group the first batch came from
    assert head == [f"{g}-0", f"{g}-1"], head
    blocked = [e["body"] for e in lines(run, "msg", "blocked")]
    assert not [b for b in blocked if b.startswith(g)], blocked  # held back until acked
    assert lines(run, "ack_error") == []
    got = lines(run, "msg")
    for g in "ab":
        mine = [e for e in got if e["body"].startswith(f"{g}-")]
        assert [e["body"] for e in mine] == [f"{g}-{i}" for i in range(5)]
        assert {e["message_group"] for e in mine} == {f"{g}_group"}
        assert {e["delivery_attempt"] for e in mine} == {1}
    # On the broker: each message group in one queue, in the order it was sent.
    queues = await read_topic(aerolite5, topic)
    for g in "ab":
        holding = {q: [m.body.decode() for m in ms if m.body.startswith(g.encode())]
                   for q, ms in queues.items()}  # fmt: skip
        holding = {q: bodies for q, bodies in holding.items() if bodies}
        assert list(holding.values()) == [[f"{g}-{i}" for i in range(5)]], holding


def test_a_delayed_message_arrives_at_its_delivery_time(aerolite5: Aerolite5, java5: Java5) -> None:
    """A DELAY topic; a message sent 3 s ahead: a receive at once (1 s of long polling)
    finds nothing, the receives after it get the message at its time, with that time."""
    topic = create_topic(aerolite5, "j5_delay", "DELAY")
    run = java5.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": [{**SPEC, "delay_ms": 3000}]},
            {"op": "simple", "group": unique("j5g_delay"), "topic": topic},
            {"label": "early", "op": "receive", "invisible_s": 10},
            {"label": "due", "op": "receive", "invisible_s": 10, "until": 1, "within_s": 15,
             "ack": True},
        ],
    )  # fmt: skip
    (sent,) = lines(run, "sent")
    assert lines(run, "msg", "early") == []
    (msg,) = lines(run, "msg", "due")
    assert_like(msg, SPEC)
    assert msg["message_id"] == sent["message_id"]
    assert msg["delivery_timestamp"] == sent["deliver_at_ms"]
    # Not before its time (the timer never fires early), and not much after.
    assert sent["deliver_at_ms"] <= msg["at_ms"] < sent["deliver_at_ms"] + 5000


# ------------------------------------------------------------------------------ transactions


async def test_transaction_commit_is_delivered_rollback_never(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    topic = create_topic(aerolite5, "j5_tx", "TRANSACTION")
    # Were either checked back after all, the answer would be its own end.
    checker = {"bodies": {"tx-commit": "COMMIT", "tx-rollback": "ROLLBACK"}}
    run = await java5.arun(
        [
            {"op": "producer", "topics": [topic], "checker": checker},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "tx-commit"},
             "end": "commit"},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "tx-rollback"},
             "end": "rollback"},
            {"op": "simple", "group": unique("j5g_tx"), "topic": topic},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 4, "ack": True},
        ],
    )  # fmt: skip
    sent = {e["body"]: e for e in lines(run, "sent")}
    assert all(e["transaction_id"] for e in sent.values()), sent
    assert [e["end"] for e in lines(run, "ended")] == ["commit", "rollback"]
    assert lines(run, "end_error") == []
    (msg,) = lines(run, "msg")
    assert_like(msg, {**SPEC, "body": "tx-commit"})
    assert msg["message_id"] == sent["tx-commit"]["message_id"]
    assert lines(run, "checked") == []  # both were ended before the first check
    stored = [m.body for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert stored == [b"tx-commit"]


async def test_orphaned_transactions_are_checked_back_and_resolved(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """Two half messages left undecided: the broker asks the producer (a
    RecoverOrphanedTransactionCommand on its Telemetry stream); the TransactionChecker
    commits one and rolls back the other."""
    topic = create_topic(aerolite5, "j5_orphan", "TRANSACTION")
    checker = {"default": "UNKNOWN", "bodies": {"orphan-commit": "COMMIT",
                                                "orphan-rollback": "ROLLBACK"}}  # fmt: skip
    run = await java5.arun(
        [
            {"op": "producer", "topics": [topic], "checker": checker},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-commit"},
             "end": "none"},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-rollback"},
             "end": "none"},
            {"op": "wait_checks", "count": 2, "within_s": 30},
            {"op": "simple", "group": unique("j5g_orphan"), "topic": topic},
            {"label": "committed", "op": "receive", "invisible_s": 10, "until": 1,
             "within_s": 15, "ack": True},
            {"op": "sleep", "s": 2.5},  # more check rounds: the rolled-back one stays away
            {"label": "again", "op": "receive", "invisible_s": 10},
        ],
        deadline_s=90,
    )  # fmt: skip
    sent = {e["body"]: e for e in lines(run, "sent")}
    assert [e["end"] for e in lines(run, "ended")] == ["none", "none"]  # left to the broker
    checked = lines(run, "checked")
    assert {(c["body"], c["answer"]) for c in checked} == {
        ("orphan-commit", "COMMIT"),
        ("orphan-rollback", "ROLLBACK"),
    }, checked
    for check in checked:  # the half message as the Telemetry command carried it
        assert check["message_id"] == sent[check["body"]]["message_id"]
        assert_like(check, {**SPEC, "body": check["body"]})
    (msg,) = lines(run, "msg", "committed")
    assert_like(msg, {**SPEC, "body": "orphan-commit"})
    assert msg["message_id"] == sent["orphan-commit"]["message_id"]
    assert lines(run, "msg", "again") == []
    stored = [m.msg_id for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert stored == [sent["orphan-commit"]["message_id"]]


def test_a_sql92_filter_receives_the_matching_messages(aerolite5: Aerolite5, java5: Java5) -> None:
    """FilterExpression(..., SQL92): the broker pops by the expression on each message's
    properties, retries included; the others never come."""
    topic = create_topic(aerolite5, "j5_sql")
    check_sql(java5.run(sql_steps(topic, unique("j5g_sql"), within_s=15)))


# -------------------------------------------------------------------- invisible time, retries


def test_an_unacked_message_comes_back_after_its_invisible_time(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    topic = create_topic(aerolite5, "j5_invisible")
    steps = invisible_steps(topic, unique("j5g_invisible"), SPEC, within_s=15)
    check_invisible(java5.run(steps), topic, SPEC)


def test_change_invisible_duration_extends_and_its_new_handle_acks(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    topic = create_topic(aerolite5, "j5_change")
    check_change(java5.run(change_steps(topic, unique("j5g_change"), SPEC, within_s=15)), SPEC)


async def test_a_message_never_acked_goes_to_the_dlq_after_max_attempts(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    topic = create_topic(aerolite5, "j5_dlq")
    group = create_group(aerolite5, "j5g_dlq", "-r", "1")  # 2 deliveries in all
    sent = check_dlq_tries(await java5.arun(dlq_steps(topic, group, SPEC)))
    (dead,) = await read_dead_letters(aerolite5, group, 1)
    check_read_by_4x(dead, sent, topic, SPEC)


# ---------------------------------------------------------------------------- push consumer


async def test_push_consumer_acks_successes_and_retries_failures_into_the_dlq(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """SUCCESS is acked; FAILURE comes back after the retry policy's backoff (the client
    changes its invisible duration) until max attempts, then the client forwards it to the
    DLQ itself (ForwardMessageToDeadLetterQueue)."""
    topic = create_topic(aerolite5, "j5_push")
    group = create_group(aerolite5, "j5g_push", "-r", "2")  # 3 deliveries in all
    specs = [{**SPEC, "body": body} for body in ("ok-1", "ok-2", "fail-1")]
    run = await java5.arun(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": specs},
            {"op": "push", "group": group, "topic": topic, "fail_prefix": "fail-",
             "until_ok": 2, "until_failed": 3, "settle_s": 3, "within_s": 60},
        ],
        deadline_s=90,
    )  # fmt: skip
    sent = {e["body"]: e["message_id"] for e in lines(run, "sent")}
    (pushed,) = lines(run, "pushed")
    assert pushed["reason"] == "expected", pushed
    got = lines(run, "msg")
    for msg in got:
        assert_like(msg, {**SPEC, "body": msg["body"]})
        assert msg["message_id"] == sent[msg["body"]]
        assert not msg["corrupted"]
    ok = sorted((m["body"], m["delivery_attempt"]) for m in got if m["result"] == "SUCCESS")
    assert ok == [("ok-1", 1), ("ok-2", 1)]  # consumed once: acked
    failed = [(m["body"], m["delivery_attempt"]) for m in got if m["result"] == "FAILURE"]
    assert failed == [("fail-1", 1), ("fail-1", 2), ("fail-1", 3)]
    (dead,) = await read_dead_letters(aerolite5, group, 1)
    assert (dead.body, dead.msg_id) == (b"fail-1", sent["fail-1"])


async def test_fifo_push_consumer_keeps_group_order_around_a_failing_message(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """A FIFO group's PushConsumer: a failing message is retried in place (what follows it
    in its message group waits) until max attempts, then the client forwards it to the DLQ
    and the group goes on in order."""
    topic = create_topic(aerolite5, "j5_fifo_push", "FIFO")
    group = create_group(aerolite5, "j5g_fifo_push", "-o", "true", "-r", "1")  # 2 attempts
    specs = [{"body": f"{g}-{i}", "group": f"{g}_group"} for i in range(5) for g in "ab"]
    run = await java5.arun(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": specs},
            {"op": "push", "group": group, "topic": topic, "fail_prefix": "a-2",
             "until_ok": 9, "until_failed": 2, "settle_s": 2, "within_s": 45},
        ],
        deadline_s=75,
    )  # fmt: skip
    sent = {e["body"]: e["message_id"] for e in lines(run, "sent")}
    (pushed,) = lines(run, "pushed")
    assert pushed["reason"] == "expected", pushed
    got = lines(run, "msg")
    a = [(m["body"], m["result"], m["delivery_attempt"]) for m in got if m["body"][0] == "a"]
    assert a == [
        ("a-0", "SUCCESS", 1),
        ("a-1", "SUCCESS", 1),
        ("a-2", "FAILURE", 1),
        ("a-2", "FAILURE", 2),
        ("a-3", "SUCCESS", 1),
        ("a-4", "SUCCESS", 1),
    ]
    b = [(m["body"], m["result"]) for m in got if m["body"][0] == "b"]
    assert b == [(f"b-{i}", "SUCCESS") for i in range(5)]
    assert {m["message_group"] for m in got} == {"a_group", "b_group"}
    (dead,) = await read_dead_letters(aerolite5, group, 1)
    assert (dead.body, dead.msg_id) == (b"a-2", sent["a-2"])


# --------------------------------------------------------------------------- 5.x and 4.x


async def test_a_java5_message_reads_the_same_to_the_4x_sdk(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    topic = create_topic(aerolite5, "j5_to4")
    run = await java5.arun(send_steps(topic, SPEC))
    (sent,) = lines(run, "sent")
    msg = await read_by_4x(aerolite5.namesrv, topic)
    check_read_by_4x(msg, sent, topic, SPEC)
    assert (msg.topic, msg.delivery_attempt) == (topic, 1)


async def test_a_4x_message_reads_the_same_to_the_java5_client(
    aerolite5: Aerolite5, java5: Java5
) -> None:
    """Fields as the 5.x client reads them; a body the SDK compressed (4 KiB or more) comes
    as GZIP with the digest of the bytes on the wire, which the client checks and inflates;
    the tag expression leaves out the other tag."""
    topic = create_topic(aerolite5, "j4_to5")
    big = "".join(f"{i:05d}," for i in range(2000))  # 12 000 bytes
    async with Producer(unique("p4_to_j5"), aerolite5.namesrv) as producer:
        sent = await producer.send(
            Message(
                topic,
                SPEC["body"].encode(),
                tags=SPEC["tag"],
                keys=SPEC["keys"],
                properties=SPEC["properties"],
            )
        )
        await producer.send(Message(topic, b"not for TagA", tags="TagB"))
        sent_big = await producer.send(Message(topic, big.encode(), tags="TagA", keys=["big"]))
    run = await java5.arun(
        [
            {"op": "simple", "group": unique("j5g_from4"), "topic": topic, "expression": "TagA"},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
            {"label": "again", "op": "receive", "invisible_s": 10},
        ]
    )
    got = {m["message_id"]: m for m in lines(run, "msg")}
    assert set(got) == {sent.msg_id, sent_big.msg_id}
    msg = got[sent.msg_id]
    assert_like(msg, SPEC)
    assert (msg["topic"], msg["delivery_attempt"]) == (topic, 1)
    large = got[sent_big.msg_id]
    assert (large["body"], large["tag"], large["keys"]) == (big, "TagA", ["big"])
    assert not msg["corrupted"] and not large["corrupted"]
    assert len(lines(run, "acked")) == 2
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert any(m.msg_id == sent_big.msg_id and m.sys_flag & 0x1 for m in stored), (
        "the big body was not stored compressed: the test no longer covers GZIP"
    )


# -------------------------------------------------------------------------------------- TLS


def test_a_default_client_with_ssl_on_meets_a_permissive_tls_broker(
    aerolite5_tls: Aerolite5, java5_lib: Path, tmp_path: Path
) -> None:
    """The Java client turns SSL on unless told otherwise (and trusts any certificate): it
    sends and receives over TLS; a plaintext client on the same port reads what it sent."""
    clients = Java5(java5_lib, aerolite5_tls, tmp_path)
    try:
        topic = create_topic(aerolite5_tls, "j5_tls")
        tls = clients.run(
            [
                {"op": "producer", "topics": [topic]},
                {"op": "send", "topic": topic, "messages": [SPEC, {**SPEC, "body": "second"}]},
                {"op": "simple", "group": unique("j5g_tls"), "topic": topic},
                {"op": "receive", "invisible_s": 10, "until": 1, "within_s": 15, "ack": True,
                 "max": 1},
            ],
            ssl=None,
        )  # fmt: skip
        # SSL as the client has it by default: on.
        assert [e["ssl_enabled"] for e in lines(tls, "configured")] == [True]
        sent = {e["body"]: e["message_id"] for e in lines(tls, "sent")}
        (first,) = lines(tls, "msg")
        assert first["message_id"] == sent[first["body"]]
        assert_like(first, {**SPEC, "body": first["body"]})
        plain = clients.run(
            [
                {"op": "simple", "group": unique("j5g_plain"), "topic": topic},
                {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
            ],
            ssl=False,
        )
        assert [e["ssl_enabled"] for e in lines(plain, "configured")] == [False]
        assert sorted(m["message_id"] for m in lines(plain, "msg")) == sorted(sent.values())
    finally:
        clients.close()
        print(clients.report())
