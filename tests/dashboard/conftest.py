"""Fixtures of the console's tests: a real name server and broker (tests/conftest.py's), the
console serving them on 127.0.0.1:0 in the test's loop, and an HTTP client that can log in.

``web`` is a ``Web``: ``await web.get(path)`` / ``await web.post(path, data)`` return
``(status, text)``; ``post`` adds the session's CSRF token unless told not to, and
``await web.login()`` signs in as ``USER`` first. The browser tests (test_browser.py) drive
a standalone broker process instead; they need no loop of their own.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client.dashboard.auth import hash_password
from client.dashboard.server import ConsoleServer, ConsoleSettings
from tests.client.conftest import STORE_DEFAULTS

USER = "ops"
PASSWORD = "correct horse battery"  # noqa: S105 - the test user's, made up
CSRF_INPUT = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def broker_store() -> Mapping[str, Any]:
    return STORE_DEFAULTS


@pytest.fixture(scope="session")
def user_hash() -> str:
    return hash_password(PASSWORD)  # a tenth of a second: once per session


@pytest.fixture
async def console(
    namesrv: NameServer, broker: Broker, user_hash: str
) -> AsyncIterator[ConsoleServer]:
    server = ConsoleServer(
        ConsoleSettings(
            namesrv=namesrv.address, port=0, users={USER: user_hash}, sample_interval_s=0.3
        )
    )
    await server.start()
    try:
        yield server
    finally:
        await server.shutdown()


class Web:
    """An HTTP client of the console with a cookie jar (so a login sticks)."""

    def __init__(self, base: str, session: aiohttp.ClientSession) -> None:
        self.base = base
        self.session = session
        self.csrf = ""

    async def get(self, path: str, **params: str) -> tuple[int, str]:
        async with self.session.get(self.base + path, params=params or None) as r:
            text = await r.text()
        found = CSRF_INPUT.search(text)
        if found:
            self.csrf = found.group(1)
        return r.status, text

    async def post(
        self,
        path: str,
        data: Mapping[str, str] | None = None,
        *,
        csrf: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, str]:
        form = dict(data or {})
        if csrf and self.csrf:
            form.setdefault("csrf_token", self.csrf)
        async with self.session.post(
            self.base + path, data=form, headers=headers, allow_redirects=True
        ) as r:
            text = await r.text()
        found = CSRF_INPUT.search(text)
        if found:
            self.csrf = found.group(1)
        return r.status, text

    async def login(self, user: str = USER, password: str = PASSWORD) -> None:
        status, text = await self.post(
            "/login", {"username": user, "password": password, "next": "/"}, csrf=False
        )
        assert status == 200, text
        await self.get("/")  # the page carries the session's CSRF token
        assert self.csrf, "no CSRF token on the overview after logging in"


@pytest.fixture
async def web(console: ConsoleServer) -> AsyncIterator[Web]:
    jar = aiohttp.CookieJar(unsafe=True)  # cookies for 127.0.0.1 (an IP, not a domain)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        yield Web(console.url, session)
