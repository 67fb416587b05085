"""The broker side of the official RocketMQ 5 clients' interop tests (test_rmq5_clients.py,
test_java5_client.py, test_go5_client.py): Aerolite standalone with its gRPC endpoint, on
quick settings, the topics and groups a 5.x client needs made first with ``mqadmin``, and
what reached the broker read back with the 4.x SDK.

- ``start_aerolite5(store, settings)``: ``python -m broker standalone`` on ports 0 with
  ``QUICK``; the ``aerolite5`` fixture (one per test module) and ``aerolite5_tls`` (ports that
  take TLS and plaintext alike, with a certificate of the test's) are made with it
  (registered in conftest.py under those names).
- ``mqadmin``, ``create_topic`` (RocketMQ 5's ``-a +message.type=...``), ``create_group``
  (``-o true`` for FIFO): 5.x clients need their routes from the start.
- ``read_topic``, ``read_dead_letters``: each queue's messages as stored, with ``Admin.pull``.

Every broker is stopped by PID (SIGTERM, which must exit 0).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from client import MessageView
from client.admin import Admin
from remoting.route import MessageQueue
from tests.processes import DEFAULT_SETTINGS, Broker, launch_standalone, unique
from tests.remoting.test_tls import make_cert

ADMIN_TIMEOUT_S = 120.0

# Quick scenarios, as tests/proxy's QUICK_BROKER: receives that find nothing come back after
# 1 s (the long-polling floor lowered from 5 s), invisible times from 1 s (from 10 s), retry
# backoffs of 1 s (a 5.x consumer's backoff is the delay levels from the third on), and a
# half message is checked back once 3 s old (transactionTimeOut; long enough that a
# transaction ended at once is never checked) on a 1 s round.
QUICK = {
    "grpcClientConsumerMinLongPollingTimeoutMillis": "500",
    # A PushConsumer polls as long as the broker's settings say (the max, 20 s by default) and
    # its close waits for that receive to end.
    "grpcClientConsumerMaxLongPollingTimeoutMillis": "5000",
    "minInvisibleTimeMillsForRecv": "1000",
    "messageDelayLevel": " ".join(["1s"] * 18),
    "transactionCheckInterval": "1000",
    "transactionTimeOut": "3000",
    "enablePropertyFilter": "true",  # SQL92 subscriptions
}


@dataclass
class Aerolite5:
    """A standalone Aerolite (name server + broker) and its gRPC endpoint."""

    broker: Broker
    grpc: str

    @property
    def namesrv(self) -> str:
        return self.broker.namesrv


def start_aerolite5(store: Path, settings: dict[str, str] | None = None) -> Aerolite5:
    """``python -m broker standalone`` on ports 0 with ``QUICK`` and ``settings``."""
    store.mkdir(parents=True, exist_ok=True)
    log = store.parent / f"{store.name}-aerolite.log"
    merged = {**DEFAULT_SETTINGS, **QUICK, **(settings or {})}
    proc, fields = launch_standalone(store, merged, log)
    broker = Broker(fields["namesrv"], fields["broker"], store, [proc], [log], "aerolite")
    assert "grpc" in fields, f"no grpc= in the ready line: {fields}"
    return Aerolite5(broker, fields["grpc"])


@pytest.fixture(scope="module", name="aerolite5")
def aerolite5_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aerolite5]:
    started = start_aerolite5(tmp_path_factory.mktemp("aerolite5") / "store")
    try:
        yield started
    finally:
        started.broker.stop()  # SIGTERM must exit 0


@pytest.fixture(scope="module", name="aerolite5_tls")
def aerolite5_tls_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aerolite5]:
    """A broker whose ports take TLS and plaintext alike, with a certificate of the test's."""
    root = tmp_path_factory.mktemp("aerolite5-tls")
    cert = make_cert(root)
    settings = {
        "tlsServerMode": "permissive",
        "tlsServerCertPath": str(cert.cert),
        "tlsServerKeyPath": str(cert.key),
    }
    started = start_aerolite5(root / "store", settings)
    try:
        yield started
    finally:
        started.broker.stop()


def mqadmin(namesrv: str, *args: str) -> Any:
    """Aerolite's admin CLI (``mqadmin``) with ``--json``: its answer."""
    done = subprocess.run(  # our own admin tool, fixed arguments
        [sys.executable, "-m", "client.admin_cli", args[0], "-n", namesrv, "--json", *args[1:]],
        capture_output=True,
        text=True,
        timeout=ADMIN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"mqadmin {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def create_topic(broker: Aerolite5, prefix: str, message_type: str = "NORMAL") -> str:
    """A new topic of RocketMQ 5's ``message.type`` (``mqadmin updateTopic -a``), routed by
    the name server when this returns."""
    topic = unique(prefix)
    mqadmin(
        broker.namesrv,
        "updateTopic",
        "-b",
        broker.broker.address,
        "-t",
        topic,
        "-r",
        "4",
        "-w",
        "4",
        "-a",
        f"+message.type={message_type}",
    )
    return topic


def create_group(broker: Aerolite5, prefix: str, *options: str) -> str:
    """A new subscription group (``mqadmin updateSubGroup`` with ``options``)."""
    group = unique(prefix)
    mqadmin(broker.namesrv, "updateSubGroup", "-b", broker.broker.address, "-g", group, *options)
    return group


async def read_topic(
    broker: Aerolite5, topic: str, queues: int = 4
) -> dict[int, list[MessageView]]:
    """Each queue's messages as stored, read with the 4.x SDK (``Admin.pull``)."""
    out: dict[int, list[MessageView]] = {}
    async with Admin(broker.namesrv) as admin:
        for queue_id in range(queues):
            mq = MessageQueue(topic, "broker-a", queue_id)
            got: list[MessageView] = []
            offset = 0
            for _ in range(100):
                batch, offset, max_offset = await admin.pull(mq, offset)
                got += batch
                if not batch or offset >= max_offset:
                    break
            out[queue_id] = got
    return out


async def read_dead_letters(broker: Aerolite5, group: str, count: int) -> list[MessageView]:
    """The group's dead-letter queue once it holds ``count`` messages (fails after 15 s)."""
    dlq = f"%DLQ%{group}"
    got: list[MessageView] = []
    async with asyncio.timeout(15):
        while True:
            try:
                got = (await read_topic(broker, dlq, queues=1))[0]
            except Exception:  # not routed yet: the broker makes the DLQ topic on first use
                got = []
            if len(got) >= count:
                return got
            await asyncio.sleep(0.5)
