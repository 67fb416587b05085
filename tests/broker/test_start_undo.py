"""A broker start that fails half way undoes exactly what it started (M13: one lifecycle).

The metrics port is taken, so the start fails at its "metrics" stage, after both listeners
had bound (and before the store, which recovers with the ports already answering); a taken
gRPC port fails it after every other stage, the store, the tables and the outbound client
included. The main port and the store's lock must be free again (a second start on the same
port and store succeeds), and no stage may be left running.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from tests.processes import free_port
from tests.support import BrokerFactory, store_config


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def test_a_failed_start_releases_the_port_and_the_store(
    start_broker: BrokerFactory, taken_port: int
) -> None:
    port = free_port()
    with pytest.raises(OSError, match="metricsPort"):
        await start_broker("undo", port=port, metrics_port=taken_port)
    broker: Broker = await start_broker("undo", port=port)  # same port, same store
    assert broker.server.port == port
    started = broker.lifecycle.started
    assert started == tuple(s.name for s in broker.lifecycle.stages)
    assert started[:6] == ("acl", "listen", "metrics", "recovering", "store", "tables")
    assert started[-5:] == ("serve", "grpc", "registration", "followers", "housekeeping")


async def test_the_failed_broker_keeps_no_stage_running(taken_port: int, tmp_path: Path) -> None:
    config = BrokerConfig(
        bind_address="127.0.0.1",
        listen_port=0,
        metrics_port=taken_port,
        namesrv_addr=None,
        store=store_config(tmp_path / "alone"),
    )
    broker = Broker(config)
    with pytest.raises(OSError, match="metricsPort"):
        await broker.start()
    assert broker.lifecycle.started == ()
    assert broker.server.listener is not None and broker.server.listener.sockets == ()


async def test_a_taken_grpc_port_stops_the_start_and_undoes_every_stage(
    taken_port: int, tmp_path: Path
) -> None:
    # The gRPC listener starts after the broker serves: its failure must still undo the
    # stages before it (the main port released, the store shut), not leave them running.
    config = BrokerConfig(
        bind_address="127.0.0.1",
        listen_port=0,
        metrics_port=0,
        grpc_listen_port=taken_port,
        namesrv_addr=None,
        store=store_config(tmp_path / "grpc"),
    )
    broker = Broker(config)
    with pytest.raises(OSError, match="grpcListenPort"):
        await broker.start()
    assert broker.lifecycle.started == ()
    assert broker.server.listener is not None and broker.server.listener.sockets == ()
    # The store was loaded and is released: a broker on it starts.
    again = Broker(dataclasses.replace(config, grpc_listen_port=0))
    await again.start()
    try:
        assert again.lifecycle.started[-1] == "housekeeping"
    finally:
        await again.shutdown()
