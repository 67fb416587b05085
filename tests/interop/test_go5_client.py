"""The official RocketMQ 5 Go client (``github.com/apache/rocketmq-clients/golang/v5`` v5.1.2,
gRPC) against Aerolite's RocketMQ 5 endpoint (broker/proxy), scenario for scenario as
test_java5_client.py runs the Java client: a Producer's normal, FIFO, delayed and
transactional sends (commit, rollback, an orphan checked back through the TransactionChecker),
a SimpleConsumer's receive, ack, invisible time and change of it, SQL92 filters, the
dead-letter queue after the group's max attempts, the topic's message type in the route (the
client refuses a FIFO or delayed message for a NORMAL topic), messages crossing between the Go
client and Aerolite's own 4.x SDK both ways, and TLS on a ``tlsServerMode=permissive`` port.

The Go client has no PushConsumer in v5.1.2, so the Java module's two PushConsumer scenarios
are not run here. Its TLS is always on (any certificate trusted, no switch), so every
scenario runs over TLS (the broker's gRPC port takes TLS even with ``tlsServerMode=disabled``,
with a certificate it makes); the driver's ``"ssl": false`` dials in plaintext through the
client's ``NewRpcClient`` hook, for the TLS test's plaintext half. Its receives carry no
long-polling time: the broker polls an empty one for what the call's deadline leaves after half
the request timeout (``ReceiveMessageActivity``), so the runs take a 2 s request timeout, which
makes that 2 s (with the Java driver's 5 s it is 3.5 s, and the change scenario's receive at
3 s, meant to find nothing, outlasts the 6 s its message was made invisible for and gets it).

The Go client (v5.1.2) compares a received body's MD5 with the broker's as lower-case hex,
exactly; RocketMQ's proxy (``BinaryUtil.generateMd5``) and Aerolite send it upper-case, so the
client calls every message corrupted (and hands it over all the same). The driver notes the
digest as it came on the wire and checks it itself (any case): the shared checks read that
(``WireDigest``), and the normal scenario checks the digest is the proxy's, upper-case.

The client is ``go5/main.go``, built with ``go build`` into ``go5/bin`` (ignored by git) once,
rebuilt when main.go, go.mod or go.sum changed (``go5/bin/build.stamp`` holds their hash).
It reads one JSON line of steps and prints JSON lines, as ``java5/Java5Client.java`` does
(see its header), and leaves by its own deadline; ``HOME`` points into the test's temp dir
(the driver sends the client's logs to ``~/logs/rocketmqlogs``). The broker, topics and groups
are rmq5_broker.py's, shared with test_java5_client.py. Every process is stopped by PID.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import Message, Producer
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

GO5_DIR = Path(__file__).parent / "go5"
SOURCES = ("main.go", "go.mod", "go.sum")
BIN = GO5_DIR / "bin"
BINARY = BIN / "go5client"
STAMP = BIN / "build.stamp"
CLIENT_VERSION = "v5.1.2"  # pinned in go5/go.mod
BUILD_TIMEOUT_S = 600.0  # the first build downloads the modules from the Go module proxy
# A run's own deadline is its steps' time; the process starting and stopping comes on top.
GO_SLACK_S = 15.0
# See the docstring: the broker long-polls a Go client's empty receive for await (1 s) + half
# of this.
REQUEST_TIMEOUT_MS = 2000
# What the client reads from the environment; the driver and the test decide them instead.
CLIENT_ENV = ("rocketmq.client.logRoot", "user.home", "mq.consoleAppender.enabled")

SPEC = spec("hello from go five")

# ------------------------------------------------------------------------------- the binary


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (GO5_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def build_go5() -> Path:
    """``go5/bin/go5client``, built again only when the sources changed since ``STAMP``."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(
            "tests/interop/test_go5_client.py needs `go` (1.22 or newer) on PATH to build "
            f"{GO5_DIR}, e.g. export PATH=$PATH:/usr/local/go/bin"
        )
    digest = fingerprint()
    if BINARY.is_file() and STAMP.is_file() and STAMP.read_text() == digest:
        return BINARY
    STAMP.unlink(missing_ok=True)
    try:
        done = subprocess.run(  # the Go toolchain, fixed arguments
            [go, "build", "-o", str(BINARY), "."],
            cwd=GO5_DIR,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"go build in {GO5_DIR} took more than {BUILD_TIMEOUT_S:g} s")
    if done.returncode != 0 or not BINARY.is_file():
        output = (done.stdout + done.stderr)[-6000:]
        pytest.fail(f"go build in {GO5_DIR} failed ({done.returncode}):\n{output}")
    STAMP.write_text(digest)
    return BINARY


@pytest.fixture(scope="session")
def go5_bin() -> Path:
    return build_go5()


# ------------------------------------------------------------------------------- the client


class Go5:
    """Runs the Go driver against one gRPC endpoint, for one test; leftovers are killed by
    PID, and each run's lines, stderr and the client's log are printed at teardown (pytest
    shows them for a failing test)."""

    def __init__(self, binary: Path, broker: Aerolite5, work: Path) -> None:
        self.binary = binary
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
        ssl: bool | None = None,
        endpoint: str | None = None,
    ) -> DriverRun:
        """Start the driver on ``steps``; ``ssl`` None leaves the client's TLS (always on),
        False dials in plaintext."""
        name = f"go5-{len(self.runs):02d}-{steps[0]['op'] if steps else 'none'}"
        stderr_path = self.work / f"{name}.stderr"
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
        env["HOME"] = str(self.home)
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver, fixed arguments
                [str(self.binary), "run"],
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
            "request_timeout_ms": REQUEST_TIMEOUT_MS,
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
        run.finish(float(kwargs.get("deadline_s", 60)) + GO_SLACK_S)
        (started,) = run.of("started")
        assert started["client_version"] == CLIENT_VERSION, started
        return run

    async def arun(self, steps: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        """``run`` off the event loop (the 4.x SDK's clients live on it meanwhile)."""
        return await asyncio.to_thread(self.run, steps, **kwargs)

    def report(self) -> str:
        sections = [run.describe() for run in self.runs]
        log = self.home / "logs" / "rocketmqlogs" / "rocketmq_client_go.log"
        if self.runs:
            sections.append(f"--- client log tail:\n{tail(log, 4000)}")
            sections.append(f"--- broker log tail:\n{self.broker.broker.log_tail()[-3000:]}")
        return "\n".join(sections)

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.kill()


class WireDigest:
    """``run`` as the shared checks read it: each ``msg`` line's ``corrupted`` is the driver's
    own check of the digest the broker sent (``digest.matches``, hex in any case), not the
    client's, which compares lower-case hex only (see the module's docstring)."""

    def __init__(self, run: DriverRun) -> None:
        self.run = run

    def of(self, event: str) -> list[dict[str, Any]]:
        events = self.run.of(event)
        if event != "msg":
            return events
        return [{**e, "corrupted": not e["digest"]["matches"]} for e in events]


def md5_as_the_proxy_sends_it(body: str) -> dict[str, Any]:
    """A ``msg`` line's ``digest`` for ``body``: upper-case hex, as RocketMQ's proxy's."""
    checksum = hashlib.md5(body.encode(), usedforsecurity=False).hexdigest().upper()
    return {"type": "MD5", "checksum": checksum, "matches": True}


@pytest.fixture
def go5(go5_bin: Path, aerolite5: Aerolite5, tmp_path: Path) -> Iterator[Go5]:
    clients = Go5(go5_bin, aerolite5, tmp_path)
    try:
        yield clients
    finally:
        clients.close()
        print(clients.report())  # captured: shown for a failing test


# ------------------------------------------------------------------ producer, simple consumer


async def test_normal_send_then_receive_and_ack(aerolite5: Aerolite5, go5: Go5) -> None:
    topic = create_topic(aerolite5, "g5_normal")
    run = await go5.arun(normal_steps(topic, unique("g5g_normal"), SPEC, within_s=15))
    sent, msg = check_normal(WireDigest(run), topic, SPEC)
    assert msg["digest"] == md5_as_the_proxy_sends_it(SPEC["body"])
    assert (msg["message_group"], msg["delivery_timestamp"]) == (None, None)
    assert lines(run, "ack_error") == []
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert [(m.body, m.msg_id, m.tags) for m in stored] == [
        (SPEC["body"].encode(), sent["message_id"], SPEC["tag"])
    ]


def test_a_message_type_the_topic_does_not_take_is_refused(aerolite5: Aerolite5, go5: Go5) -> None:
    """The route carries the topic's ``message.type`` (here NORMAL); the client refuses a
    FIFO or delayed message for it before sending (the broker's settings turn the check on).
    The Go client's refusal is a plain error that names no type."""
    topic = create_topic(aerolite5, "g5_typed")
    run = go5.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic,
             "messages": [{**SPEC, "group": "g1"}, {**SPEC, "delay_ms": 2000}, SPEC]},
        ],
    )  # fmt: skip
    errors = lines(run, "send_error")
    assert [(e["index"], e["code"]) for e in errors] == [(0, None), (1, None)], errors
    assert {e["text"] for e in errors} == {
        "current message type not match with topic accept message types"
    }
    assert [s["index"] for s in lines(run, "sent")] == [2]


# ---------------------------------------------------------------------------- FIFO, delay


async def test_fifo_message_groups_are_received_in_order(aerolite5: Aerolite5, go5: Go5) -> None:
    """A FIFO topic and a consumeMessageOrderly group: a message group's messages come in send
    order, and the rest of its queue is held back while a batch of it is un-acked."""
    topic = create_topic(aerolite5, "g5_fifo", "FIFO")
    group = create_group(aerolite5, "g5g_fifo", "-o", "true")
    specs = [{"body": f"{g}-{i}", "group": f"{g}_group"} for i in range(5) for g in "ab"]
    run = await go5.arun(
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


def test_a_delayed_message_arrives_at_its_delivery_time(aerolite5: Aerolite5, go5: Go5) -> None:
    """A DELAY topic; a message sent 3 s ahead: a receive at once (2 s of long polling)
    finds nothing, the receives after it get the message at its time, with that time."""
    topic = create_topic(aerolite5, "g5_delay", "DELAY")
    run = go5.run(
        [
            {"op": "producer", "topics": [topic]},
            {"op": "send", "topic": topic, "messages": [{**SPEC, "delay_ms": 3000}]},
            {"op": "simple", "group": unique("g5g_delay"), "topic": topic},
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
    aerolite5: Aerolite5, go5: Go5
) -> None:
    """The Go client's Commit and RollBack return no error (they log one): the broker's
    side shows what they did."""
    topic = create_topic(aerolite5, "g5_tx", "TRANSACTION")
    # Were either checked back after all, the answer would be its own end.
    checker = {"bodies": {"tx-commit": "COMMIT", "tx-rollback": "ROLLBACK"}}
    run = await go5.arun(
        [
            {"op": "producer", "topics": [topic], "checker": checker},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "tx-commit"},
             "end": "commit"},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "tx-rollback"},
             "end": "rollback"},
            {"op": "simple", "group": unique("g5g_tx"), "topic": topic},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 4, "ack": True},
        ],
    )  # fmt: skip
    sent = {e["body"]: e for e in lines(run, "sent")}
    assert all(e["transaction_id"] for e in sent.values()), sent
    assert [e["end"] for e in lines(run, "ended")] == ["commit", "rollback"]
    (msg,) = lines(run, "msg")
    assert_like(msg, {**SPEC, "body": "tx-commit"})
    assert msg["message_id"] == sent["tx-commit"]["message_id"]
    assert lines(run, "checked") == []  # both were ended before the first check
    stored = [m.body for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert stored == [b"tx-commit"]


async def test_orphaned_transactions_are_checked_back_and_resolved(
    aerolite5: Aerolite5, go5: Go5
) -> None:
    """Two half messages left undecided: the broker asks the producer (a
    RecoverOrphanedTransactionCommand on its Telemetry stream); the TransactionChecker
    commits one and rolls back the other."""
    topic = create_topic(aerolite5, "g5_orphan", "TRANSACTION")
    checker = {"default": "UNKNOWN", "bodies": {"orphan-commit": "COMMIT",
                                                "orphan-rollback": "ROLLBACK"}}  # fmt: skip
    run = await go5.arun(
        [
            {"op": "producer", "topics": [topic], "checker": checker},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-commit"},
             "end": "none"},
            {"op": "transaction", "topic": topic, "message": {**SPEC, "body": "orphan-rollback"},
             "end": "none"},
            {"op": "wait_checks", "count": 2, "within_s": 30},
            {"op": "simple", "group": unique("g5g_orphan"), "topic": topic},
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


def test_a_sql92_filter_receives_the_matching_messages(aerolite5: Aerolite5, go5: Go5) -> None:
    """FilterExpression(..., SQL92): the broker pops by the expression on each message's
    properties, retries included; the others never come."""
    topic = create_topic(aerolite5, "g5_sql")
    check_sql(go5.run(sql_steps(topic, unique("g5g_sql"), within_s=15)))


# -------------------------------------------------------------------- invisible time, retries


def test_an_unacked_message_comes_back_after_its_invisible_time(
    aerolite5: Aerolite5, go5: Go5
) -> None:
    topic = create_topic(aerolite5, "g5_invisible")
    steps = invisible_steps(topic, unique("g5g_invisible"), SPEC, within_s=15)
    check_invisible(go5.run(steps), topic, SPEC)


def test_change_invisible_duration_extends_and_its_new_handle_acks(
    aerolite5: Aerolite5, go5: Go5
) -> None:
    topic = create_topic(aerolite5, "g5_change")
    check_change(go5.run(change_steps(topic, unique("g5g_change"), SPEC, within_s=15)), SPEC)


async def test_a_message_never_acked_goes_to_the_dlq_after_max_attempts(
    aerolite5: Aerolite5, go5: Go5
) -> None:
    topic = create_topic(aerolite5, "g5_dlq")
    group = create_group(aerolite5, "g5g_dlq", "-r", "1")  # 2 deliveries in all
    sent = check_dlq_tries(await go5.arun(dlq_steps(topic, group, SPEC)))
    (dead,) = await read_dead_letters(aerolite5, group, 1)
    check_read_by_4x(dead, sent, topic, SPEC)


# --------------------------------------------------------------------------- 5.x and 4.x


async def test_a_go5_message_reads_the_same_to_the_4x_sdk(aerolite5: Aerolite5, go5: Go5) -> None:
    topic = create_topic(aerolite5, "g5_to4")
    run = await go5.arun(send_steps(topic, SPEC))
    (sent,) = lines(run, "sent")
    msg = await read_by_4x(aerolite5.namesrv, topic)
    check_read_by_4x(msg, sent, topic, SPEC)
    assert (msg.topic, msg.delivery_attempt) == (topic, 1)


async def test_a_4x_message_reads_the_same_to_the_go5_client(
    aerolite5: Aerolite5, go5: Go5
) -> None:
    """Fields as the 5.x client reads them; a body the SDK compressed (4 KiB or more) comes
    as GZIP with the digest of the bytes on the wire, which the client checks and inflates;
    the tag expression leaves out the other tag."""
    topic = create_topic(aerolite5, "j4_to_g5")
    big = "".join(f"{i:05d}," for i in range(2000))  # 12 000 bytes
    async with Producer(unique("p4_to_g5"), aerolite5.namesrv) as producer:
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
    run = await go5.arun(
        [
            {"op": "simple", "group": unique("g5g_from4"), "topic": topic, "expression": "TagA"},
            {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
            {"label": "again", "op": "receive", "invisible_s": 10},
        ]
    )
    got = {m["message_id"]: m for m in lines(WireDigest(run), "msg")}
    assert set(got) == {sent.msg_id, sent_big.msg_id}
    msg = got[sent.msg_id]
    assert_like(msg, SPEC)
    assert (msg["topic"], msg["delivery_attempt"]) == (topic, 1)
    large = got[sent_big.msg_id]
    assert (large["body"], large["tag"], large["keys"]) == (big, "TagA", ["big"])
    assert not msg["corrupted"] and not large["corrupted"]  # of the bytes on the wire
    assert len(lines(run, "acked")) == 2
    stored = [m for q in (await read_topic(aerolite5, topic)).values() for m in q]
    assert any(m.msg_id == sent_big.msg_id and m.sys_flag & 0x1 for m in stored), (
        "the big body was not stored compressed: the test no longer covers GZIP"
    )


# -------------------------------------------------------------------------------------- TLS


def test_a_default_client_meets_a_permissive_tls_broker(
    aerolite5_tls: Aerolite5, go5_bin: Path, tmp_path: Path
) -> None:
    """The Go client dials with TLS (and trusts any certificate) whatever it is told: it
    sends and receives over TLS; a plaintext client on the same port reads what it sent."""
    clients = Go5(go5_bin, aerolite5_tls, tmp_path)
    try:
        topic = create_topic(aerolite5_tls, "g5_tls")
        tls = clients.run(
            [
                {"op": "producer", "topics": [topic]},
                {"op": "send", "topic": topic, "messages": [SPEC, {**SPEC, "body": "second"}]},
                {"op": "simple", "group": unique("g5g_tls"), "topic": topic},
                {"op": "receive", "invisible_s": 10, "until": 1, "within_s": 15, "ack": True,
                 "max": 1},
            ],
        )  # fmt: skip
        assert [e["ssl_enabled"] for e in lines(tls, "configured")] == [True]
        sent = {e["body"]: e["message_id"] for e in lines(tls, "sent")}
        (first,) = lines(tls, "msg")
        assert first["message_id"] == sent[first["body"]]
        assert_like(first, {**SPEC, "body": first["body"]})
        plain = clients.run(
            [
                {"op": "simple", "group": unique("g5g_plain"), "topic": topic},
                {"op": "receive", "invisible_s": 10, "until": 2, "within_s": 15, "ack": True},
            ],
            ssl=False,
        )
        assert [e["ssl_enabled"] for e in lines(plain, "configured")] == [False]
        assert sorted(m["message_id"] for m in lines(plain, "msg")) == sorted(sent.values())
    finally:
        clients.close()
        print(clients.report())
