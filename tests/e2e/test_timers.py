"""Timer messages from the official C++ client (rocketmq==0.4.4), which knows no timers but
sets any property: ``__STARTDELIVERTIME`` (epoch ms), as Aliyun's SDKs and ali-ons set it.
They arrive at their time, and a ``kill -9`` of the broker with timers pending loses none.

Aerolite only: Apache RocketMQ 4.9 has no timer messages (5.x added them).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Clients, Target
from tests.processes import Broker, unique

pytestmark = pytest.mark.e2e

PRECISION_MS = 200
SETTINGS = {"timerPrecisionMs": str(PRECISION_MS)}
SLACK_MS = 1000  # scheduling noise on a loaded 2-core machine, on top of the precision
TIMER_KEYS = ["TIMER_OUT_MS", "__STARTDELIVERTIME", "seq"]  # properties the driver reports


@pytest.fixture(autouse=True)
def _aerolite_only(target: Target) -> None:
    if target.kind != "aerolite":
        pytest.skip("Apache RocketMQ 4.9 has no timer messages")


def _timers(prefix: str, count: int, first_ms: int, spread_ms: int) -> list[dict[str, object]]:
    return [
        {
            "body": f"{prefix}-{i}",
            "tags": "TagT",
            "properties": {
                "__STARTDELIVERTIME": str(first_ms + i * spread_ms // count),
                "seq": str(i),
            },
        }
        for i in range(count)
    ]


def test_startdelivertime_from_the_cpp_client_arrives_on_time(
    tmp_path: Path, launch: Callable[..., Broker], client_factory: Callable[[Broker], Clients]
) -> None:
    broker = launch(tmp_path / "store", SETTINGS)
    clients = client_factory(broker)
    topic = unique("e2e_timer")
    first = int(time.time() * 1000) + 3000
    specs = _timers("t", 30, first, 2000)
    producer = clients.cpp("produce", group=unique("e2e_timer_pg"), topic=topic, messages=specs)
    assert producer.finish()["ok"] == len(specs)
    consumer = clients.cpp(
        "push",
        group=unique("e2e_timer_cg"),
        topic=topic,
        expect=len(specs),
        settle_s=1.0,
        deadline_s=40,
        property_keys=TIMER_KEYS,
    )
    done = consumer.finish(timeout_s=60)
    assert done["reason"] == "expected", consumer.describe()
    got = consumer.of("msg")
    assert sorted(e["body"] for e in got) == sorted(str(s["body"]) for s in specs)
    for event in got:
        due = int(event["properties"]["TIMER_OUT_MS"])
        assert "__STARTDELIVERTIME" not in event["properties"]  # the trigger is removed
        assert 0 <= event["store_timestamp"] - due <= PRECISION_MS + SLACK_MS, event
        assert event["tags"] == "TagT"


def test_kill_9_with_timers_pending_loses_none(
    tmp_path: Path, launch: Callable[..., Broker], client_factory: Callable[[Broker], Clients]
) -> None:
    store = tmp_path / "store"
    broker = launch(store, SETTINGS)
    clients = client_factory(broker)
    topic = unique("e2e_timer_kill9")
    start = int(time.time() * 1000)
    specs = _timers("k", 600, start + 2500, 6000)
    producer = clients.cpp("produce", group=unique("e2e_timer_pg"), topic=topic, messages=specs)
    assert producer.finish()["ok"] == len(specs)
    # Kill while timers are being delivered: about half are due.
    time.sleep(max(0.0, (start + 5500) / 1000 - time.time()))
    broker.kill()

    broker = launch(store, SETTINGS)
    clients = client_factory(broker)
    time.sleep(max(0.0, (start + 8500 + PRECISION_MS) / 1000 - time.time()) + 1.5)
    pull = clients.cpp(
        "pull", group=unique("e2e_timer_pull"), topic=topic, property_keys=TIMER_KEYS
    )
    pull.finish()
    got = pull.of("msg")
    counts = Counter(e["body"] for e in got)
    lost = [str(s["body"]) for s in specs if str(s["body"]) not in counts]
    assert not lost, f"{len(lost)} timers lost, e.g. {lost[:5]}"
    # Only the slot being delivered at the kill may come twice.
    twice = {e["body"]: int(e["properties"]["TIMER_OUT_MS"]) for e in got if counts[e["body"]] > 1}
    slots = {due // PRECISION_MS for due in twice.values()}
    assert len(slots) <= 1, f"duplicates from {len(slots)} slots: {sorted(twice)[:10]}"
    assert all(e["store_timestamp"] >= int(e["properties"]["TIMER_OUT_MS"]) for e in got)
