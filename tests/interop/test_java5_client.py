"""What only the official RocketMQ 5 Java client (``rocketmq-client-java`` 5.2.0) does against
Aerolite's RocketMQ 5 endpoint: its refusal of a message the topic's ``message.type`` does not
take, and the PushConsumer (the Go client has none; the Python client's is in tests/proxy),
plain and FIFO. The scenarios every 5.x client runs are test_rmq5_clients.py's; the driver,
its jars and the fixtures are clients5.py's, the broker rmq5_broker.py's.
"""

from __future__ import annotations

import pytest

from tests.interop.clients5 import Client5
from tests.interop.rmq5_broker import Aerolite5, create_group, create_topic, read_dead_letters
from tests.proxy.scenarios import assert_like, lines, spec, type_refusal_steps

pytestmark = pytest.mark.interop

SPEC = spec("hello from java five")


def test_a_message_type_the_topic_does_not_take_is_refused(
    aerolite5: Aerolite5, java5: Client5
) -> None:
    """The route carries the topic's ``message.type`` (here NORMAL); the client refuses a
    FIFO or delayed message for it before sending (the broker's settings turn the check on)."""
    topic = create_topic(aerolite5, "j5_typed")
    run = java5.run(type_refusal_steps(topic, SPEC))
    errors = lines(run, "send_error")
    assert [(e["index"], e["type"]) for e in errors] == [
        (0, "IllegalArgumentException"),
        (1, "IllegalArgumentException"),
    ], errors
    assert "acceptMessageTypes=[NORMAL]" in errors[0]["text"]
    assert [s["index"] for s in lines(run, "sent")] == [2]


# ---------------------------------------------------------------------------- push consumer


async def test_push_consumer_acks_successes_and_retries_failures_into_the_dlq(
    aerolite5: Aerolite5, java5: Client5
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
    aerolite5: Aerolite5, java5: Client5
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
