"""A slave broker whose dispatch fails says so: runtime info, metrics, ``aerolite ping``.

The slave replicates from a hostile "master" (a raw HA peer written here, speaking the
protocol of store/ha.py) that streams bytes no record starts with. Dispatch cannot enter them:
the consume queues stop growing, and instead of standing still silently the broker reports
``dispatchStatus FAILED at 0`` in GET_BROKER_RUNTIME_INFO, sets
``rocketmq_storage_dispatch_healthy`` to 0 with a failure count, and ``aerolite ping`` (the
compose healthcheck) exits 1. Its shutdown still ends cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
from collections.abc import AsyncIterator

import pytest

from broker.config import BrokerRole
from remoting.client import RemotingClient
from tests.broker.conftest import runtime_info
from tests.broker.test_metrics import scrape, value
from tests.support import BrokerFactory, wait_until

GARBAGE = struct.pack(">ii", 64, 0x12345678) + bytes(56)  # a size, then no magic


async def ping(address: str) -> tuple[int | None, bytes, bytes]:
    """``aerolite ping ADDRESS``, as the compose healthcheck runs it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "broker",
        "ping",
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out, err


@pytest.fixture
async def hostile_master() -> AsyncIterator[int]:
    """An HA listener that answers a slave's first report with 64 bytes of non-records."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readexactly(8)
            writer.write(struct.pack(">qi", 0, len(GARBAGE)) + GARBAGE)
            await writer.drain()
            while await reader.read(8):  # the slave's acknowledgements
                pass
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_slave_whose_dispatch_fails_is_reported_unhealthy(
    start_broker: BrokerFactory, client: RemotingClient, hostile_master: int
) -> None:
    slave = await start_broker(
        broker_role=BrokerRole.SLAVE,
        broker_id=1,
        ha_master_address=f"127.0.0.1:{hostile_master}",
    )
    await wait_until(
        lambda: slave.store.dispatch.failures >= 2, "dispatch to fail and retry", timeout_s=10
    )

    table = await runtime_info(client, slave.address)
    assert table["dispatchStatus"].startswith("FAILED at 0: CorruptRecordError")
    assert int(table["dispatchFailures"]) >= 2

    samples = await scrape(slave.metrics_port)
    assert value(samples, "rocketmq_storage_dispatch_healthy") == 0
    assert value(samples, "rocketmq_storage_dispatch_failures_total") >= 2

    code, out, err = await ping(slave.address)
    assert code == 1, (out, err)
    assert b"unhealthy: dispatch FAILED at 0" in err
    assert out == b""


async def test_a_healthy_broker_pings_ok(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker()
    table = await runtime_info(client, broker.address)
    assert table["dispatchStatus"] == "OK" and table["dispatchFailures"] == "0"
    samples = await scrape(broker.metrics_port)
    assert value(samples, "rocketmq_storage_dispatch_healthy") == 1
    code, out, err = await ping(broker.address)
    assert code == 0, (out, err)
    assert out.startswith(b"ok ")
