"""The web console against Apache RocketMQ 4.9's own name server and broker (Maven): it learns
everything through the admin protocol, so an operator of a stock cluster can run
``aerolite dashboard -n`` against it. And the reset a 4.9 broker refuses for a group with no
consumer online (CONSUMER_NOT_ONLINE) is done by the console itself, queue by queue, as
mqadmin's fallback does."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator

import aiohttp
import pytest

from client.admin import Admin
from client.dashboard.auth import hash_password
from client.dashboard.server import ConsoleServer, ConsoleSettings
from tests.dashboard.conftest import PASSWORD, USER, Web
from tests.interop.test_java_broker import java_broker, java_lib  # noqa: F401 - fixtures
from tests.interop.test_java_mqadmin_ops import traffic
from tests.processes import Broker, unique

pytestmark = pytest.mark.interop


@pytest.fixture
async def apache_web(java_broker: Broker) -> AsyncIterator[Web]:  # noqa: F811
    server = ConsoleServer(
        ConsoleSettings(
            namesrv=java_broker.namesrv,
            port=0,
            users={USER: hash_password(PASSWORD)},
            sample_interval_s=0.5,
        )
    )
    await server.start()
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            yield Web(server.url, http)
    finally:
        await server.shutdown()


async def test_the_console_shows_an_apache_cluster(
    apache_web: Web,
    java_broker: Broker,  # noqa: F811
) -> None:
    topic, group = unique("ConsoleApache"), unique("console_apache")
    await traffic(java_broker.namesrv, topic, group)
    # a 4.9 broker refuses GET_BROKER_RUNTIME_INFO until its first statistics minute has
    # passed (NoSuchElementException); the overview says so, then shows its figures
    page = ""
    for _ in range(150):
        status, page = await apache_web.get("/")
        assert status == 200, page
        assert java_broker.address in page
        if "V4_9_" in page:
            break
        assert "no figures" in page and "NoSuchElementException" in page
        await asyncio.sleep(0.5)
    assert "V4_9_" in page, "no runtime figures from Apache's broker in 75 s"
    status, page = await apache_web.get("/topics", q=topic)
    assert status == 200 and topic in page
    status, page = await apache_web.get(f"/topics/{topic}")
    assert status == 200 and group in page
    status, page = await apache_web.get(f"/groups/{group}")
    assert status == 200, page
    assert 'id="group-lag">2<' in page  # traffic leaves two messages unconsumed


async def test_a_reset_apaches_broker_refuses_for_an_offline_group_is_done_by_the_console(
    apache_web: Web,
    java_broker: Broker,  # noqa: F811
) -> None:
    topic, group = unique("ConsoleOld"), unique("console_old")
    await traffic(java_broker.namesrv, topic, group)
    await apache_web.login()
    status, page = await apache_web.post(
        f"/groups/{group}/reset", {"topic": topic, "at": "1970-01-02T00:00:00", "force": "on"}
    )
    assert status == 200, page
    assert "the console committed each queue's offset itself" in html.unescape(page)
    async with Admin(java_broker.namesrv) as admin:
        _tps, table = await admin.consume_stats(group, topic)
        assert table and all(w.consumer_offset == 0 for w in table.values())
        status, page = await apache_web.post(f"/groups/{group}/skip", {"topic": topic})
        assert status == 200 and "committed each queue" in page
        _tps, table = await admin.consume_stats(group, topic)
        assert all(w.consumer_offset == w.broker_offset for w in table.values())
