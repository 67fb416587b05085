"""The console's overview, login, CSRF, live events and metric pages, over real HTTP against
a real broker (tests/dashboard/conftest.py)."""

from __future__ import annotations

import asyncio
import html
import json

import aiohttp
import pytest

from broker.broker import Broker
from client.dashboard.auth import (
    SESSION_IDLE_S,
    Accounts,
    hash_password,
    parse_users,
    verify_password,
)
from client.dashboard.server import ConsoleServer
from client.errors import InvalidArgumentError
from tests.dashboard.conftest import PASSWORD, USER, Web


async def test_overview_shows_the_broker_and_the_name_server(
    web: Web, broker: Broker, console: ConsoleServer
) -> None:
    status, page = await web.get("/")
    assert status == 200
    assert broker.config.broker_name in page
    assert broker.address in page
    assert "master" in page
    assert console.settings.namesrv in page
    assert "Log in" in page  # reading needs no login


async def test_healthz_answers_while_serving_and_says_what_the_last_sample_saw(
    web: Web, console: ConsoleServer
) -> None:
    """What the compose file's healthcheck (aerolite ping http://…/healthz) reads."""
    await console.sampler.sample_once()
    async with web.session.get(web.base + "/healthz") as r:
        assert r.status == 200 and r.content_type == "text/plain"
        text = await r.text()
    assert text.startswith("ok; 1 broker(s) seen ") and text.endswith(" s ago\n")


async def test_every_page_carries_a_strict_content_security_policy(web: Web) -> None:
    async with web.session.get(web.base + "/") as r:
        csp = r.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"


async def test_a_broker_page_shows_its_runtime_and_config(web: Web, broker: Broker) -> None:
    status, page = await web.get(f"/brokers/{broker.address}")
    assert status == 200
    assert "commitLogMaxOffset" in page and "brokerName" in page
    status, page = await web.get("/brokers/127.0.0.1:1")
    assert status == 422
    assert "no broker at 127.0.0.1:1" in page


async def test_a_change_without_a_login_is_refused(web: Web) -> None:
    status, page = await web.post("/logout", {}, csrf=False)
    assert status == 401
    assert "needs a login" in page


async def test_a_wrong_password_is_refused_and_the_right_one_logs_in(web: Web) -> None:
    status, page = await web.post(
        "/login", {"username": USER, "password": "nope", "next": "/"}, csrf=False
    )
    assert status == 401
    assert "Wrong user name or password" in page
    status, page = await web.post(
        "/login", {"username": "nobody", "password": PASSWORD}, csrf=False
    )
    assert status == 401
    assert "Wrong user name or password" in page
    await web.login()
    _, page = await web.get("/")
    assert f'<span class="user">{USER}</span>' in page


async def test_a_logged_in_change_needs_the_sessions_csrf_token(web: Web) -> None:
    await web.login()
    status, page = await web.post("/logout", {}, csrf=False)
    assert status == 403
    assert "security token" in page
    status, page = await web.post("/logout", {"csrf_token": "forged"}, csrf=False)
    assert status == 403
    status, page = await web.post("/logout", {})
    assert status == 200
    assert "Log in" in page


async def test_a_cross_site_post_is_refused_even_when_logged_in(web: Web) -> None:
    await web.login()
    status, page = await web.post("/logout", {}, headers={"Origin": "http://evil.example"})
    assert status == 403
    assert "another site" in page


async def test_a_login_link_cannot_send_the_user_elsewhere(web: Web) -> None:
    async with web.session.post(
        web.base + "/login",
        data={"username": USER, "password": PASSWORD, "next": "//evil.example/x"},
        allow_redirects=False,
    ) as r:
        assert r.status == 303
        assert r.headers["Location"] == "/"


async def test_events_stream_a_sample_after_each_round(web: Web, broker: Broker) -> None:
    async with web.session.get(web.base + "/events") as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        async with asyncio.timeout(10):
            while True:
                line = (await r.content.readline()).decode()
                if line.startswith("data: "):
                    sample = json.loads(line[6:])
                    break
    key = f"broker.{broker.config.broker_name}:0.in"
    assert key in sample["live"]
    assert f"in.{broker.config.broker_name}:0" in sample["points"]


async def test_series_keep_the_history_the_charts_start_from(
    web: Web, broker: Broker, console: ConsoleServer
) -> None:
    generation = console.sampler.generation
    for _ in range(3):
        generation = await console.sampler.wait_for(generation, 5.0)
    key = f"in.{broker.config.broker_name}:0"
    async with web.session.get(web.base + "/api/series", params={"key": key}) as r:
        data = await r.json()
    stamps, values = data[key]
    assert len(stamps) >= 2 and len(stamps) == len(values)
    assert stamps == sorted(stamps)


async def test_a_number_links_to_the_metric_that_carries_it(web: Web, broker: Broker) -> None:
    _, page = await web.get("/")
    assert "/metric?family=rocketmq_put_tps" in page
    status, page = await web.get("/metric", family="rocketmq_put_tps")
    assert status == 200
    assert "# TYPE rocketmq_put_tps gauge" in page
    assert f'node_id="{broker.config.broker_name}"' in html.unescape(page)
    status, page = await web.get("/metric", family="<script>")
    assert status == 422
    assert "<script>" not in page


async def test_an_unknown_page_says_so(web: Web) -> None:
    status, page = await web.get("/no/such/page")
    assert status == 404
    assert "No page at /no/such/page" in page


async def test_the_console_without_a_name_server_shows_why(user_hash: str) -> None:
    from client.dashboard.server import ConsoleSettings

    server = ConsoleServer(ConsoleSettings(namesrv="127.0.0.1:1", port=0, sample_interval_s=5))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(server.url + "/") as r:
            page = await r.text()
        assert r.status == 200
        assert "127.0.0.1:1 did not answer" in page
    finally:
        await server.shutdown()


def test_passwords_are_stored_as_salted_scrypt_hashes() -> None:
    one, two = hash_password("s3cret"), hash_password("s3cret")
    assert one != two and one.startswith("scrypt$n=32768,r=8,p=1$")
    assert verify_password("s3cret", one) and not verify_password("s3cret!", one)


def test_users_from_text_and_file_are_hashed_and_checked(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    stored = hash_password("x")
    file = tmp_path / "users"
    file.write_text(f"# operators\nbob={stored}\n\ncarol=plain-pass\n")
    users = parse_users("alice:pw1; dave:" + stored, file)
    assert set(users) == {"alice", "bob", "carol", "dave"}
    assert users["bob"] == stored and users["dave"] == stored
    assert verify_password("pw1", users["alice"]) and verify_password("plain-pass", users["carol"])
    for bad, named in [
        ("alice", "needs NAME:PASSWORD"),
        ("al ice:pw", "user name"),
        ("x:scrypt$junk", "password hash must look like"),
    ]:
        with pytest.raises(InvalidArgumentError, match=named):
            parse_users(bad)
    file.write_text("no-separator\n")
    with pytest.raises(InvalidArgumentError, match=r"users:1: expected NAME=PASSWORD_HASH"):
        parse_users("", file)
    with pytest.raises(InvalidArgumentError, match="No such file"):
        parse_users("", tmp_path / "missing")


def test_failed_logins_are_throttled_per_address() -> None:
    accounts = Accounts({"u": hash_password("right")})
    for _ in range(10):
        assert accounts.login("u", "wrong", "10.0.0.1") is None
    assert accounts.throttled("10.0.0.1")
    assert accounts.login("u", "right", "10.0.0.1") is None  # even the right one, for a minute
    assert accounts.login("u", "right", "10.0.0.2") is not None


def test_an_idle_session_is_forgotten_at_the_next_login() -> None:
    accounts = Accounts({"u": hash_password("right")})
    first = accounts.login("u", "right", "10.0.0.1")
    assert first is not None
    token, session = first
    session.last_seen -= SESSION_IDLE_S + 1  # eight idle hours ago
    assert accounts.login("u", "right", "10.0.0.2") is not None
    assert token not in accounts.sessions and len(accounts.sessions) == 1
