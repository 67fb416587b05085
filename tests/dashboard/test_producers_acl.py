"""The console's producers page and ACL accounts page, against real brokers."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeResult, Message, Producer, PushConsumer
from client.dashboard.server import ConsoleServer, ConsoleSettings
from remoting.acl import SessionCredentials
from tests.dashboard.conftest import USER, Web
from tests.support import BrokerFactory

TOPIC = "ConsoleProduced"


async def test_online_producer_groups_are_listed_without_typing_them(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    consumer = PushConsumer("cg-console", namesrv.address)
    consumer.subscribe(TOPIC)(lambda _m: ConsumeResult.SUCCESS)
    async with Producer("pg-console", namesrv.address) as producer:
        await producer.send(Message(TOPIC, b"x"))
        # a producer's first heartbeat goes out with the instance's next round (30 s) or
        # when a consumer of the same instance starts, as in RocketMQ: the latter here
        async with consumer:
            status, page = await web.get("/producers")
            assert status == 200
            assert "pg-console" in page
            status, page = await web.get("/producers", group="pg-console", topic=TOPIC)
            assert status == 200
            assert 'id="producer-connections"' in page and "PYTHON" in page


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"group": "pg-console"}, "needs both a producer group and a topic"),
        ({"group": "pg console", "topic": TOPIC}, "pg console"),
        ({"group": "pg-console", "topic": "NoSuchTopicHere"}, "NoSuchTopicHere"),
    ],
)
async def test_a_producer_lookup_with_bad_input_says_why(
    web: Web, query: dict[str, str], said: str
) -> None:
    status, page = await web.get("/producers", **query)
    assert status == 422
    assert said in html.unescape(page)


async def test_without_acl_the_page_says_there_is_nothing_to_manage(web: Web) -> None:
    status, page = await web.get("/acl")
    assert status == 200
    assert "ACL is off on every broker (aclEnable=false)" in page


@pytest.fixture
async def acl_broker(start_broker: BrokerFactory, tmp_path: Path) -> Broker:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "globalWhiteRemoteAddresses: []\n"
        "accounts:\n"
        "  - {accessKey: consoleAdmin, secretKey: consoleSecret, admin: true}\n"
        "  - {accessKey: plainUser, secretKey: plainSecret1, admin: false}\n"
    )
    return await start_broker(acl_enable=True, acl_file_path=acl)


async def _console(
    namesrv: NameServer, user_hash: str, credentials: SessionCredentials | None
) -> ConsoleServer:
    server = ConsoleServer(
        ConsoleSettings(
            namesrv=namesrv.address,
            port=0,
            users={USER: user_hash},
            credentials=credentials,
            sample_interval_s=0.5,
        )
    )
    await server.start()
    return server


@pytest.fixture
async def acl_web(
    namesrv: NameServer, acl_broker: Broker, user_hash: str
) -> AsyncIterator[tuple[Web, Broker]]:
    server = await _console(namesrv, user_hash, SessionCredentials("consoleAdmin", "consoleSecret"))
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            yield Web(server.url, http), acl_broker
    finally:
        await server.shutdown()


async def test_acl_accounts_are_listed_created_and_deleted_signed_as_admin(
    acl_web: tuple[Web, Broker],
) -> None:
    web, broker = acl_web
    assert broker.acl is not None
    status, page = await web.get("/acl")
    assert status == 200
    assert "consoleAdmin" in page and "plainUser" in page
    assert "consoleSecret" not in page  # secret keys are never shown
    await web.login()
    status, page = await web.post(
        "/acl/accounts",
        {
            "accessKey": "newAccount1",
            "secretKey": "newSecret1",
            "defaultTopicPerm": "PUB",
            "topicPerms": "orders=PUB|SUB\naudit=DENY",
        },
    )
    assert status == 200, page
    assert "Account newAccount1 saved on 1 broker(s)." in page
    account = broker.acl.rules.accounts["newAccount1"]
    assert account.secret_key == "newSecret1"  # noqa: S105 - the one the form set
    status, page = await web.post("/acl/accounts/newAccount1/delete", {"confirm": "nope"})
    assert status == 422 and "type the access key newAccount1" in page
    assert "newAccount1" in broker.acl.rules.accounts
    status, page = await web.post("/acl/accounts/newAccount1/delete", {"confirm": "newAccount1"})
    assert status == 200 and "Account newAccount1 deleted" in page
    assert "newAccount1" not in broker.acl.rules.accounts
    status, page = await web.post("/acl/white", {"addresses": "10.1.1.*\n10.2.2.*"})
    assert status == 200
    assert broker.acl.rules.global_white == ["10.1.1.*", "10.2.2.*"]


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"accessKey": "abc"}, "at least 6"),
        ({"accessKey": "goodKey1", "topicPerms": "orders"}, "expected NAME=PERM"),
        ({"accessKey": "goodKey1", "topicPerms": "orders=ALL"}, "expected NAME=PERM"),
        ({"accessKey": "goodKey1", "defaultTopicPerm": "ALL"}, "defaultTopicPerm must be one of"),
    ],
)
async def test_a_bad_account_form_says_why(
    acl_web: tuple[Web, Broker], form: dict[str, str], said: str
) -> None:
    web, broker = acl_web
    await web.login()
    status, page = await web.post("/acl/accounts", form)
    assert status == 422
    assert said in html.unescape(page)
    assert broker.acl is not None and "goodKey1" not in broker.acl.rules.accounts


async def test_acl_without_credentials_names_the_keys_to_set(
    namesrv: NameServer, acl_broker: Broker, user_hash: str
) -> None:
    server = await _console(namesrv, user_hash, None)
    try:
        async with aiohttp.ClientSession() as http, http.get(server.url + "/acl") as r:
            page = await r.text()
        assert "dashboardAccessKey and dashboardSecretKey" in page
    finally:
        await server.shutdown()
