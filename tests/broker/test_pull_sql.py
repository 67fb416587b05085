"""PULL_MESSAGE with SQL92 subscriptions on a broker with ``enablePropertyFilter=true``:
the expression runs on each stored record's properties (``isMatchedByCommitLog``)."""

from __future__ import annotations

import asyncio

from broker.broker import Broker
from remoting.bodies import ConsumerData, HeartbeatData, SubscriptionData
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from tests.support import (
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    BrokerFactory,
    ClientFactory,
    call,
    pull_header,
    record_props,
    records,
    send_ok,
    wait_dispatched,
    wait_until,
)

TOPIC = "TopicSql"


async def _filtering_broker(start_broker: BrokerFactory, client: RemotingClient) -> Broker:
    broker = await start_broker(enable_property_filter=True)
    for i in range(6):
        extra = {"a": str(i), "region": "eu" if i % 2 else "us"}
        await send_ok(client, broker.address, TOPIC, f"m{i}".encode(), extra=extra)
    await wait_dispatched(broker)
    return broker


async def _sql_pull(
    client: RemotingClient, broker: Broker, expression: str, **header: object
) -> tuple[int, list[int], int]:
    ext = pull_header(TOPIC, subscription=expression, **header)  # type: ignore[arg-type]
    ext["expressionType"] = "SQL92"
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    offsets = [info.queue_offset for info in records(response.body_bytes)] if response.body else []
    return response.code, offsets, int(response.ext_fields.get("nextBeginOffset", "-1"))


async def test_only_records_the_expression_selects_are_returned(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await _filtering_broker(start_broker, client)
    code, offsets, next_offset = await _sql_pull(client, broker, "a >= 2 AND region = 'eu'")
    assert code == ResponseCode.SUCCESS
    assert offsets == [3, 5]
    assert next_offset == 6


async def test_nothing_selected_is_retry_immediately_past_the_range(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await _filtering_broker(start_broker, client)
    code, offsets, next_offset = await _sql_pull(client, broker, "missing IS NOT NULL")
    assert (code, offsets, next_offset) == (ResponseCode.PULL_RETRY_IMMEDIATELY, [], 6)


async def test_an_expression_that_does_not_parse_is_subscription_parse_failed(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await _filtering_broker(start_broker, client)
    ext = pull_header(TOPIC, subscription="a >")
    ext["expressionType"] = "SQL92"
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    assert response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "end of expression" in (response.remark or "")


async def test_the_heartbeat_subscription_is_used_without_the_subscription_flag(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await _filtering_broker(start_broker, client)
    # the SQL92 subscription a Java consumer reports in its heartbeat
    sub = SubscriptionData(TOPIC, "a IN ('1', '4')", expression_type="SQL92", sub_version=1)
    data = HeartbeatData("10.0.0.5@sql", [], [ConsumerData("cg-sql", subscription_data_set=[sub])])
    response = await call(client, broker.address, RequestCode.HEART_BEAT, body=data.encode())
    assert response.code == ResponseCode.SUCCESS, response
    ext = pull_header(TOPIC, group="cg-sql", sys_flag=0, subscription=None, sub_version=1)
    ext["expressionType"] = "SQL92"
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    assert response.code == ResponseCode.SUCCESS, response
    assert [record_props(i)["a"] for i in records(response.body_bytes)] == ["1", "4"]


async def test_tag_pulls_are_unchanged_on_a_filtering_broker(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await _filtering_broker(start_broker, client)
    ext = pull_header(TOPIC, subscription="*", sys_flag=PULL_SUBSCRIPTION)
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    assert response.code == ResponseCode.SUCCESS
    assert len(records(response.body_bytes)) == 6


async def test_held_pull_wakes_only_for_a_message_its_expression_selects(
    start_broker: BrokerFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    # No periodic re-check during the test: it wakes held pulls without any filter.
    broker = await start_broker(enable_property_filter=True, long_polling_check_interval_ms=60_000)
    consumer = await start_client()
    await send_ok(client, broker.address, TOPIC, b"first", extra={"a": "0"})
    await wait_dispatched(broker)
    ext = pull_header(
        TOPIC,
        offset=1,
        subscription="a > 5",
        sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
        suspend_ms=5000,
    )
    ext["expressionType"] = "SQL92"
    held = asyncio.create_task(
        call(consumer, broker.address, RequestCode.PULL_MESSAGE, ext, timeout_s=8.0)
    )
    await wait_until(lambda: broker.pull_hold.count == 1, "a parked pull")
    await send_ok(client, broker.address, TOPIC, b"small", extra={"a": "1"})
    await wait_dispatched(broker)
    done, _ = await asyncio.wait({held}, timeout=0.3)
    assert not done, "a pull for a > 5 was answered by a message with a = 1"

    await send_ok(client, broker.address, TOPIC, b"big", extra={"a": "9"})
    response = await asyncio.wait_for(held, 3.0)
    assert response.code == ResponseCode.SUCCESS, response
    assert [record_props(i)["a"] for i in records(response.body_bytes)] == ["9"]
