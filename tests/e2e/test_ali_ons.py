"""The JavaScript client ali-ons (npm, 3.12.0) and the C++ client talk through the broker, in
both directions, with tags, keys, user properties and a compressed body intact.

ali-ons cannot create a topic: on TOPIC_NOT_EXIST from the name server it raises before trying
the TBW102 default route. So the C++ producer creates each topic first, which also shows the
broker registers an auto-created topic with the name server at once.

Skipped when node is missing or ``npm ci`` has not run in tests/e2e/js (``make install``).
"""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.conftest import (
    JS_DIR,
    PROPERTY_KEYS,
    Clients,
    Sent,
    assert_same_messages,
    consume,
    send,
)
from tests.processes import unique

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.once,  # make test-asyncio leaves it out (pyproject's marker)
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (JS_DIR / "node_modules" / "ali-ons").is_dir(),
        reason="ali-ons is not installed (make install runs npm ci in tests/e2e/js)",
    ),
]


def mixed(prefix: str, count: int) -> list[Sent]:
    """Messages both clients can express: tags, several keys, properties, one large body."""
    return [
        Sent(
            body=(f"{prefix}-{i} " + "x" * 6000) if i == 3 else f"{prefix}-{i} ✓",
            tags=("TagA", "TagB")[i % 2],
            keys=(f"{prefix}-k{i}", "shared"),
            properties=(("seq", str(i)), ("color", "blue")),
        )
        for i in range(count)
    ]


def test_ali_ons_producer_to_cpp_push_consumer(clients: Clients) -> None:
    topic = unique("e2e_js2cpp")
    send(clients, topic, [Sent(body="probe-seed", tags="Probe")])
    messages = mixed("from-js", 30)
    producer = clients.js(
        "producer",
        group=unique("e2e_js_producer"),
        topic=topic,
        messages=[m.js_spec() for m in messages],
    )
    done = producer.finish()
    failed = [e for e in producer.of("sent") if e.get("status") != "SEND_OK"]
    assert not failed and done["ok"] == len(messages), failed[:3]
    run = consume(clients, topic, unique("e2e_cpp_from_js"), len(messages), probe_prefix="probe-")
    assert_same_messages(run, messages)


def test_cpp_producer_to_ali_ons_consumer(clients: Clients) -> None:
    topic = unique("e2e_cpp2js")
    messages = mixed("from-cpp", 30)
    send(clients, topic, messages)
    consumer = clients.js(
        "consumer",
        group=unique("e2e_js_consumer"),
        topic=topic,
        expect=len(messages),
        settle_s=3,
        deadline_s=60,
        property_keys=PROPERTY_KEYS,
    )
    done = consumer.finish()
    assert done["reason"] == "expected", done
    assert_same_messages(consumer, messages)
