"""Running the console: the application with its routes, served on the running loop.

RocketMQ counterpart: rocketmq-dashboard's Spring Boot application. aiohttp's ``AppRunner``
and ``TCPSite`` serve on whatever loop runs (uvloop under ``aerolite dashboard``) and touch no
signal handler, so the process that starts the console keeps its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass

from aiohttp import web

from client.admin import Admin
from client.dashboard import pages_acl, pages_core, pages_groups, pages_messages, pages_topics
from client.dashboard.app import (
    CONSOLE,
    MAX_BODY_BYTES,
    Console,
    auth_middleware,
    errors_middleware,
    headers_middleware,
)
from client.dashboard.app import HERE as PACKAGE_DIR
from client.dashboard.auth import Accounts
from client.dashboard.sampler import Sampler
from remoting.acl import SessionCredentials

SHUTDOWN_S = 2.0  # open event streams end at once; nothing else is long


def make_app(console: Console) -> web.Application:
    """The application with every page's routes."""
    app = web.Application(
        middlewares=[headers_middleware, errors_middleware, auth_middleware],
        client_max_size=MAX_BODY_BYTES,
    )
    app[CONSOLE] = console
    app.router.add_static("/static/", PACKAGE_DIR / "static", append_version=True)
    for module in (pages_core, pages_topics, pages_groups, pages_messages, pages_acl):
        module.add_routes(app.router)
    return app


@dataclass
class ConsoleSettings:
    namesrv: str
    host: str = "127.0.0.1"
    port: int = 8080
    users: dict[str, str] | None = None
    credentials: SessionCredentials | None = None
    sample_interval_s: float = 5.0
    tls: ssl.SSLContext | None = None  # dialling the cluster
    https: ssl.SSLContext | None = None  # serving the pages


class ConsoleServer:
    """The console on one port; ``start()`` binds (``port`` is real after it, even for 0)."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.admin = Admin(
            settings.namesrv,
            instance_name="dashboard",
            credentials=settings.credentials,
            tls=settings.tls,
        )
        self.sampler = Sampler(self.admin, settings.sample_interval_s)
        self.console = Console(
            admin=self.admin,
            accounts=Accounts(dict(settings.users or {})),
            sampler=self.sampler,
            namesrv=settings.namesrv,
        )
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._sampling: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if self.settings.https is not None else "http"
        return f"{scheme}://{shown}:{self.port}"

    async def start(self) -> None:
        await self.admin.start()
        runner = web.AppRunner(
            make_app(self.console), handle_signals=False, shutdown_timeout=SHUTDOWN_S
        )
        await runner.setup()
        site = web.TCPSite(
            runner, self.settings.host, self.settings.port, ssl_context=self.settings.https
        )
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            await self.admin.shutdown()
            raise
        self._runner = runner
        self.port = site.port
        self._sampling = asyncio.create_task(self.sampler.run(self._stopping), name="sampler")

    async def shutdown(self) -> None:
        self._stopping.set()
        if self._sampling is not None:
            self._sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampling
        if self._runner is not None:
            await self._runner.cleanup()
        await self.admin.shutdown()
