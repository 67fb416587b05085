"""A push consumer's figures (``ConsumerStatsManager``): the minute's averages and rates and
the hour's failures, on a clock the test moves; then a live consumer's ``statusTable`` as
consumerStatus shows it."""

from __future__ import annotations

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, ConsumeResult, Message, MessageView, Producer, PushConsumer
from client.consume_stats import ConsumerStats
from tests.client.conftest import create_topic
from tests.client.test_admin_cli import mqadmin, mqadmin_text
from tests.support import wait_dispatched, wait_until


class Clock:
    def __init__(self, now: float = 10_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_minute_figures_and_the_hours_failures() -> None:
    clock = Clock()
    stats = ConsumerStats(clock)
    assert stats.status("T") == {
        "pullRT": 0.0, "pullTPS": 0.0, "consumeRT": 0.0, "consumeOKTPS": 0.0,
        "consumeFailedTPS": 0.0, "consumeFailedMsgs": 0,
    }  # fmt: skip
    for n in range(30):  # 30 pulls of 4 messages, 20 ms each, and their consumes, in 60 s
        clock.now += 2
        stats.pulled("T", clock.now - 0.020, 4)
        for i in range(4):
            stats.consumed("T", clock.now - (5 + i) / 1000, ok=i != 3 or n % 2 == 0)
    status = stats.status("T")
    span = clock.now - (int(clock.now) // 10 - 5) * 10  # the last 50 to 60 s
    in_window = [n for n in range(30) if 10_000 + 2 * (n + 1) >= clock.now - span]
    assert status["pullRT"] == pytest.approx(20.0)
    assert status["pullTPS"] == pytest.approx(4 * len(in_window) / span)
    assert status["consumeRT"] == pytest.approx(6.5)
    failed_in_window = sum(1 for n in in_window if n % 2)
    assert status["consumeFailedTPS"] == pytest.approx(failed_in_window / span)
    assert status["consumeOKTPS"] == pytest.approx((4 * len(in_window) - failed_in_window) / span)
    assert status["consumeFailedMsgs"] == 15

    clock.now += 1800  # half an hour of nothing: the minute is empty, the hour is not
    status = stats.status("T")
    assert status["pullTPS"] == status["consumeOKTPS"] == 0.0 and status["pullRT"] == 0.0
    assert status["consumeFailedMsgs"] == 15
    clock.now += 1800
    assert stats.status("T")["consumeFailedMsgs"] == 0
    stats.consumed("T", clock.now, ok=False)  # old buckets go as new ones come
    assert stats.status("T")["consumeFailedMsgs"] == 1


async def test_a_consumers_status_table_has_its_figures(
    namesrv: NameServer, broker: Broker
) -> None:
    topic, group = "TopicFigures", "cg-figures"
    await create_topic(broker, topic, queues=2)
    async with Producer("pg-figures", namesrv.address) as producer:
        for n in range(10):
            await producer.send(Message(topic, f"m{n}".encode()))
    await wait_dispatched(broker)
    seen: list[str] = []
    failed: list[str] = []
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )

    @consumer.subscribe(topic)
    async def listener(msg: MessageView) -> ConsumeResult:
        if msg.body == b"m0" and not failed:  # once: it comes back from the retry topic
            failed.append(msg.msg_id)
            return ConsumeResult.RECONSUME_LATER
        seen.append(msg.msg_id)
        return ConsumeResult.SUCCESS

    async with consumer:
        await wait_until(lambda: len(set(seen)) == 10, "ten consumed")
        status = await mqadmin(namesrv, "consumerStatus", "-g", group)
        ((client_id, info),) = status.items()
        text = await mqadmin_text(namesrv, "consumerStatus", "-g", group, "-i", client_id)
    figures = info["statusTable"][topic]
    assert figures["pullTPS"] > 0 and figures["consumeOKTPS"] > 0
    assert figures["consumeFailedMsgs"] == 1 and figures["consumeFailedTPS"] > 0
    assert f"%RETRY%{group}" in info["statusTable"]
    rows = text.split("#Consumer RT&TPS#\n", 1)[1].splitlines()[1:]
    (row,) = [r for r in rows if r.startswith(topic)]
    assert row.split()[-1] == "1"  # ConsumeFailedMsgsInHour
