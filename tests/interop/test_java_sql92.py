"""Our SQL92 evaluator against Apache RocketMQ 4.9.7's, message by message.

One topic holds messages with the property sets of ``tests/broker/test_filter_sql.py``; for
every expression of that table (but RocketMQ 5's CONTAINS & co.) a pull consumer subscribed
with it reads the topic through the Java broker (``enablePropertyFilter=true``), and what the
Java broker delivers must be exactly what ``broker.filter_sql`` selects. Every expression we
refuse must be refused by the Java broker too (CHECK_CLIENT_CONFIG when the consumer starts).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.filter_sql import compile_sql
from client import ConsumeFromWhere, Message, MessageView, Producer, PullConsumer, PushConsumer
from client.errors import ClientError
from tests.broker.test_filter_sql import BAD, PROPS, ROCKETMQ5_ONLY, TABLE
from tests.interop.test_java_broker import java_lib  # noqa: F401 - the fixture
from tests.processes import Broker, JavaRocketMQ, unique

pytestmark = pytest.mark.interop

COPIES = 3  # each property set several times, so the four queues all carry some
CONCURRENT = 10
QUIET_POLLS = 3  # empty polls in a row that mean "read to the end"


@pytest.fixture
def filtering_java_broker(java_lib: Path, tmp_path: Path) -> Iterator[Broker]:  # noqa: F811
    java = JavaRocketMQ(java_lib)
    broker = java.start_broker(tmp_path / "store", {"enablePropertyFilter": "true"})
    try:
        yield broker
    finally:
        broker.kill()
        java.shutdown()


async def _selected_by_java(namesrv: str, topic: str, expression: str) -> set[str]:
    consumer = PullConsumer(
        unique("interop_sql"),
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
    )
    consumer.subscribe(topic, sql=expression)
    got: list[MessageView] = []
    async with consumer, asyncio.timeout(60):
        quiet = 0
        while quiet < QUIET_POLLS:
            batch = await consumer.poll(0.5)
            quiet = 0 if batch else quiet + 1
            got += batch
    return {m.body.decode() for m in got}


async def test_java_broker_selects_what_we_select(filtering_java_broker: Broker) -> None:
    namesrv = filtering_java_broker.namesrv
    topic = unique("interop_sql")
    async with Producer(unique("interop_sql_pg"), namesrv=namesrv) as producer:
        for (name, props), copy in itertools.product(PROPS.items(), range(COPIES)):
            await producer.send(Message(topic, f"{name}-{copy}".encode(), properties=props))
    expressions = [e for e, _ in TABLE if e not in ROCKETMQ5_ONLY]
    verdicts: dict[str, set[str]] = {}
    for start in range(0, len(expressions), CONCURRENT):
        chunk = expressions[start : start + CONCURRENT]
        found = await asyncio.gather(*(_selected_by_java(namesrv, topic, e) for e in chunk))
        verdicts.update(zip(chunk, found, strict=True))
    ours = {
        expression: {
            f"{name}-{copy}"
            for (name, props), copy in itertools.product(PROPS.items(), range(COPIES))
            if compile_sql(expression).matches(props)
        }
        for expression in expressions
    }
    differ = {
        e: (sorted(verdicts[e]), sorted(ours[e])) for e in expressions if verdicts[e] != ours[e]
    }
    assert not differ, f"(java, ours) differ: {differ}"


async def test_java_broker_refuses_what_we_refuse(filtering_java_broker: Broker) -> None:
    namesrv = filtering_java_broker.namesrv
    topic = unique("interop_sql_bad")
    async with Producer(unique("interop_sql_pg"), namesrv=namesrv) as producer:
        await producer.send(Message(topic, b"x"))  # the topic must exist for the check
    accepted: list[str] = []
    for expression, _why in BAD:
        if not expression.strip():
            continue  # the SDK refuses a blank expression before asking any broker
        consumer = PushConsumer(unique("interop_sql_bad"), namesrv=namesrv)
        consumer.subscribe(topic, sql=expression)(lambda _msg: None)
        try:
            await consumer.start()
        except ClientError:
            continue
        finally:
            await consumer.shutdown()
        accepted.append(expression)
    assert not accepted, f"the Java broker accepted expressions we refuse: {accepted}"
