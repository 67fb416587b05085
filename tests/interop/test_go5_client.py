"""What only the official RocketMQ 5 Go client (``rocketmq-clients/golang/v5`` v5.1.2) does
against Aerolite's RocketMQ 5 endpoint: its refusal of a message the topic's ``message.type``
does not take (a plain error naming no type), and the body digest it is sent, which it reads
its own way. The scenarios every 5.x client runs are test_rmq5_clients.py's; the driver, its
build and the fixtures are clients5.py's (its docstring says what the Go client does
differently: TLS always on, no long-polling time, its digest check), the broker
rmq5_broker.py's.
"""

from __future__ import annotations

import hashlib

import pytest

from tests.interop.clients5 import Client5
from tests.interop.rmq5_broker import Aerolite5, create_topic
from tests.processes import unique
from tests.proxy.scenarios import lines, normal_steps, spec, type_refusal_steps

pytestmark = pytest.mark.interop

SPEC = spec("hello from go five")


def test_a_message_type_the_topic_does_not_take_is_refused(
    aerolite5: Aerolite5, go5: Client5
) -> None:
    """As the Java client does (test_java5_client.py), but the Go client's refusal names no
    type."""
    topic = create_topic(aerolite5, "g5_typed")
    run = go5.run(type_refusal_steps(topic, SPEC))
    errors = lines(run, "send_error")
    assert [(e["index"], e["code"]) for e in errors] == [(0, None), (1, None)], errors
    assert {e["text"] for e in errors} == {
        "current message type not match with topic accept message types"
    }
    assert [s["index"] for s in lines(run, "sent")] == [2]


def test_the_body_digest_is_the_proxys_upper_case_md5(aerolite5: Aerolite5, go5: Client5) -> None:
    """The digest on the wire is RocketMQ's proxy's (``BinaryUtil.generateMd5``: upper-case
    hex) of the body. (The Go client, comparing lower-case hex, calls such a message
    corrupted, against Apache RocketMQ too; the other scenarios read the driver's verdict.)"""
    topic = create_topic(aerolite5, "g5_digest")
    run = go5.run(normal_steps(topic, unique("g5g_digest"), SPEC, within_s=15))
    (msg,) = lines(run, "msg", "first")
    checksum = hashlib.md5(SPEC["body"].encode(), usedforsecurity=False).hexdigest().upper()
    assert msg["digest"] == {"type": "MD5", "checksum": checksum, "matches": True}
