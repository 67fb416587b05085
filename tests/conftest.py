"""Suite-wide fixtures: the event loop, a guard against unhandled loop errors, and real servers.

The suite runs on uvloop. ``AEROLITE_LOOP=asyncio`` (``make test-asyncio``, which also sets
``PYTHONASYNCIODEBUG=1``) runs it on the stdlib loop instead, as asyncpg does, so code that
only works on one loop, or that debug mode flags, is caught.

The server fixtures start a real ``NameServer``, ``Broker`` (store in ``tmp_path``) and
``RemotingClient`` on 127.0.0.1 with ephemeral ports; nothing of ours is mocked. Factories own
an ``AsyncExitStack``, so everything shuts down even when a test fails; shutting a broker down
early (to kill it mid-run) is fine, ``shutdown`` is idempotent. What test modules import by
name (constants, waits, request builders, the factories' Protocols) is in tests/support.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig
from broker.namesrv.server import NameServer
from remoting.client import ClientConfig, RemotingClient
from remoting.dispatch import ProcessorTable, RPCHook
from tests.support import (
    CLIENT_CONFIG,
    LOOPBACK,
    STORE_SMALL,
    BrokerFactory,
    ClientFactory,
    NamesrvFactory,
    store_config,
)

LOOP = os.environ.get("AEROLITE_LOOP", "uvloop")


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    if LOOP == "asyncio":
        return {"asyncio": asyncio.new_event_loop}
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-interop",
        action="store_true",
        help="collect tests/interop (Apache RocketMQ's Java side, from Maven): make interop",
    )


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    # Interop needs Java and Maven downloads; `make test` leaves it to `make interop`.
    if collection_path.name == "interop" and not config.getoption("--run-interop"):
        return True
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    # The brokers under test share this process with pytest and every collected test: a
    # full collection of that heap stalls their loop long enough for a send to wait out its
    # lane's 200 ms (waitTimeMillsInSendQueue) and be refused SYSTEM_BUSY. Frozen, the
    # session's own objects are never scanned again; what the tests allocate still is.
    # The pauses, with and without: `python -m pytest -p tests.bench.gc_pauses` (its
    # docstring).
    gc.collect()
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    # Keep test output readable: warnings and errors only, rendered plainly.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30),
        cache_logger_on_first_use=False,
    )


@pytest.fixture(autouse=True)
async def _fail_on_unhandled_loop_errors() -> AsyncIterator[None]:
    """Fail a test whose event loop reported an unhandled exception (asyncpg's habit)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    yield
    await asyncio.sleep(0)
    loop.set_exception_handler(previous)
    if errors:
        messages = "; ".join(f"{c.get('message')}: {c.get('exception')!r}" for c in errors)
        pytest.fail(f"unhandled exception in the event loop: {messages}")


# ------------------------------------------------------------------------------- servers


@pytest.fixture
async def start_namesrv() -> AsyncIterator[NamesrvFactory]:
    """``await start_namesrv(**NamesrvConfig fields)``: a name server on 127.0.0.1:0."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(**config: Any) -> NameServer:
            cfg = NamesrvConfig(
                **{"bind_address": LOOPBACK, "listen_port": 0, "metrics_port": 0, **config}
            )
            return await stack.enter_async_context(NameServer(cfg))

        yield start


@pytest.fixture
async def namesrv(start_namesrv: NamesrvFactory) -> NameServer:
    return await start_namesrv()


@pytest.fixture
def broker_store() -> Mapping[str, Any]:
    """The store settings a ``start_broker`` broker starts from; a package whose tests need
    other sizes overrides this fixture (tests/client does)."""
    return STORE_SMALL


@pytest.fixture
async def start_broker(
    namesrv: NameServer, tmp_path: Path, broker_store: Mapping[str, Any]
) -> AsyncIterator[BrokerFactory]:
    """``await start_broker(name, root=…, port=…, store={…}, **BrokerConfig fields)``: a broker
    on 127.0.0.1 registered with ``namesrv``.

    Its store is ``root`` if given; else ``tmp_path/<name>`` when a name is given, so a broker
    restarted under the same name finds its store again; else a directory of its own per call
    (a master and its slave share a ``broker_name`` but not a store).
    """
    count = 0
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            name: str | None = None,
            *,
            root: Path | None = None,
            port: int = 0,
            store: Mapping[str, Any] | None = None,
            **config: Any,
        ) -> Broker:
            nonlocal count
            count += 1
            if name is not None:
                config["broker_name"] = name
            if root is None:
                root = tmp_path / (name if name is not None else f"broker-{count}")
            values: dict[str, Any] = {
                "bind_address": LOOPBACK,
                "listen_port": port,
                "metrics_port": 0,  # metrics on a free port, never the default 5557
                "grpc_listen_port": 0,  # and gRPC, never 8081
                "namesrv_addr": namesrv.address,
                **config,
            }
            cfg = BrokerConfig(
                **values, store=store_config(root, defaults=broker_store, **(store or {}))
            )
            return await stack.enter_async_context(Broker(cfg))

        yield start


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    return await start_broker()


@pytest.fixture
async def start_client() -> AsyncIterator[ClientFactory]:
    """``await start_client(config, processors=…, hooks=…)``: a RemotingClient
    (``CLIENT_CONFIG`` unless given), shut down after the test; with ``processors``, a client
    that serves the broker's requests."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            config: ClientConfig | None = None,
            *,
            processors: ProcessorTable | None = None,
            hooks: list[RPCHook] | None = None,
        ) -> RemotingClient:
            client = RemotingClient(config or CLIENT_CONFIG, processors=processors, hooks=hooks)
            return await stack.enter_async_context(client)

        yield start


@pytest.fixture
async def client(start_client: ClientFactory) -> RemotingClient:
    """A RemotingClient with a 5 s request timeout."""
    return await start_client()
