"""Suite-wide fixtures: the event loop choice and a guard against unhandled loop errors.

The suite runs on uvloop. ``AEROLITE_LOOP=asyncio`` (``make test-asyncio``, which also sets
``PYTHONASYNCIODEBUG=1``) runs it on the stdlib loop instead, as asyncpg does, so code that
only works on one loop, or that debug mode flags, is caught.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest
import structlog

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
