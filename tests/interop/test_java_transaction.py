"""Transactional messages from Apache RocketMQ's Java client 4.9.7 (TransactionMQProducer),
against Aerolite and, as the reference, against Apache RocketMQ 4.9.7's own broker.

Each message's body is its plan (see JavaClient.java): the local transaction's answer, then
what the producer answers when the broker checks back. Committed messages reach a consumer
once; rolled-back ones never; an undecided one is checked back (CHECK_TRANSACTION_STATE) and
then committed or rolled back; one that stays unknown is checked ``transactionCheckMax`` times
and then dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.test_java_broker import java_lib  # noqa: F401 - the fixture
from tests.interop.test_java_client import RUN_TIMEOUT_S, JavaClients
from tests.processes import Broker, JavaRocketMQ, start_aerolite, unique

pytestmark = pytest.mark.interop

CHECK_MAX = 2
SETTINGS = {
    "transactionCheckInterval": "1000",
    "transactionTimeOut": "1000",
    "transactionCheckMax": str(CHECK_MAX),
}
PLANS = [
    "commit",
    "rollback",
    "unknown-then-commit",
    "unknown-then-rollback",
    "unknown-then-unknown",
]


@pytest.fixture(params=["aerolite", "java"])
def broker(request: pytest.FixtureRequest, java_lib: Path, tmp_path: Path) -> Iterator[Broker]:  # noqa: F811
    if request.param == "aerolite":
        started = start_aerolite(tmp_path / "store", SETTINGS)
        try:
            yield started
        finally:
            started.stop()
        return
    java = JavaRocketMQ(java_lib)
    started = java.start_broker(tmp_path / "store", SETTINGS)
    try:
        yield started
    finally:
        started.kill()
        java.shutdown()


def test_commit_rollback_and_check_back(broker: Broker, java_lib: Path, tmp_path: Path) -> None:  # noqa: F811
    java = JavaClients(java_lib, broker.namesrv, tmp_path / "clients")
    try:
        topic = unique("java_tx")
        # the topic exists before the half messages, so the consumer's route is there
        java.start(
            "produce", group=unique("java_pg"), topic=topic, messages=[{"body": "plain"}]
        ).finish(RUN_TIMEOUT_S)
        consumer = java.start(
            "consume", group=unique("java_cg"), topic=topic, expect=3, settle_s=3.0, deadline_s=75
        )
        consumer.wait_started()
        producer = java.start(
            "transaction",
            group=unique("java_txg"),
            topic=topic,
            messages=[{"body": plan} for plan in PLANS],
            # two undecided-then-decided ones are checked once, the stubborn one CHECK_MAX times
            expect_checks=2 + CHECK_MAX,
            deadline_s=60,
        )
        done = producer.finish(RUN_TIMEOUT_S)
        sent = {s["index"]: s for s in producer.of("sent")}
        assert [sent[i]["status"] for i in range(len(PLANS))] == ["SEND_OK"] * len(PLANS)
        assert [sent[i]["local_state"] for i in range(len(PLANS))] == [
            "COMMIT_MESSAGE",
            "ROLLBACK_MESSAGE",
            "UNKNOW",
            "UNKNOW",
            "UNKNOW",
        ]
        assert done["checks"] == 2 + CHECK_MAX, producer.describe()
        checks: dict[str, int] = {}
        for check in producer.of("check"):
            checks[check["body"]] = max(checks.get(check["body"], 0), check["check"])
        assert checks == {
            "unknown-then-commit": 1,
            "unknown-then-rollback": 1,
            "unknown-then-unknown": CHECK_MAX,
        }
        got = consumer.finish(RUN_TIMEOUT_S)
        assert got["reason"] == "expected", consumer.describe()
        bodies = sorted(m["body"] for m in consumer.of("msg"))
        assert bodies == ["commit", "plain", "unknown-then-commit"]
        committed = {m["body"]: m for m in consumer.of("msg")}["commit"]
        assert committed["topic"] == topic
        assert committed["msg_id"] == sent[0]["msg_id"]
    finally:
        java.close()
