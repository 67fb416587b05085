"""Sends to system topics (issue 19, item 6).

RocketMQ's ``AbstractSendMessageProcessor.msgCheck`` refuses a send to a topic in
``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` with NO_PERMISSION; we refuse TBW102 and every
``rmq_sys_`` topic as well, on each send code, while the broker's own puts to those topics
(delay levels, half messages, timer wheel) and the system topics clients do send to (traces,
BenchmarkTest, the broker-name topic) keep working.
"""

from __future__ import annotations

import time

import pytest

from broker.broker import Broker
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from tests.support import batch_body, call, properties, send, send_header, send_ok, wait_dispatched

REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"
# Beyond Apache's set, which test_send's reserved-topic test and the timer tests cover.
FORBIDDEN = ["TBW102", REVIVE_TOPIC, "rmq_sys_SYNC_BROKER_MEMBER_b", "rmq_sys_never_created"]


async def refused_batch(client: RemotingClient, broker: Broker, topic: str) -> None:
    h = send_header(topic, props=properties(WAIT="true"), batch=True)
    body = batch_body([(b"one", properties(UNIQ_KEY="U1")), (b"two", properties(UNIQ_KEY="U2"))])
    response = await call(client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), body)
    assert response.code == ResponseCode.NO_PERMISSION, response
    assert response.remark == f"Sending message to topic[{topic}] is forbidden."


@pytest.mark.parametrize("topic", FORBIDDEN)
async def test_sends_to_system_topics_are_refused_on_every_send_code(
    broker: Broker, client: RemotingClient, topic: str
) -> None:
    await wait_dispatched(broker)
    before = broker.store.get_max_offset(topic, 0)
    known = broker.topics.get(topic) is not None
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        response = await send(client, broker.address, topic, b"raw", code=code)
        assert response.code == ResponseCode.NO_PERMISSION, (code, response)
        assert response.remark == f"Sending message to topic[{topic}] is forbidden."
    await refused_batch(client, broker, topic)
    await wait_dispatched(broker)
    assert broker.store.get_max_offset(topic, 0) == before
    # A refused send creates nothing either (rmq_sys_never_created was auto-created before).
    assert (broker.topics.get(topic) is not None) == known
    await send_ok(client, broker.address, "AfterRefusal")  # the connection still serves


async def test_the_system_topics_clients_use_and_the_brokers_own_puts_still_work(
    broker: Broker, client: RemotingClient
) -> None:
    # Refused first: without that, everything below passed before the change as well.
    assert (await send(client, broker.address, REVIVE_TOPIC)).code == ResponseCode.NO_PERMISSION
    for topic in ("RMQ_SYS_TRACE_TOPIC", "BenchmarkTest", broker.config.broker_name):
        await send_ok(client, broker.address, topic)
    # The broker parks these in system topics itself, past the send check.
    await send_ok(client, broker.address, "Delayed", extra={"DELAY": "1"})
    await send_ok(client, broker.address, "Half", extra={"TRAN_MSG": "true"}, sys_flag=0x4)
    deliver_ms = int(time.time() * 1000) + 60_000
    await send_ok(client, broker.address, "Timed", extra={"TIMER_DELIVER_MS": str(deliver_ms)})
    await wait_dispatched(broker)
    assert broker.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1
    assert broker.store.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1
    assert broker.store.get_max_offset("rmq_sys_wheel_timer", 0) == 1
