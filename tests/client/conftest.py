"""Fixtures and helpers only the SDK tests use: their store sizes, a producer, topics made
by hand, reading back what a broker stored, and a listener's record of what it received.

The name server and the brokers are tests/conftest.py's (``namesrv``, ``start_broker``,
``broker``), real servers in the test's event loop; ``broker_store`` below gives them this
package's store sizes. Every wait has a deadline, so a broken SDK fails a test instead of
hanging it.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import MessageView, Producer
from client.message import decode_messages
from remoting.bodies import PERM_READ, PERM_WRITE, TopicConfig
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import ResponseCode
from tests.support import STORE_SMALL, pull, wait_dispatched, wait_until

# STORE_SMALL with 1 MiB segments: the SDK tests send more and bigger messages than the
# broker's.
STORE_DEFAULTS: dict[str, Any] = {
    **STORE_SMALL,
    "commit_log_file_bytes": 1 << 20,
    "max_message_bytes": 1 << 19,
    "consume_queue_file_bytes": 20 * 1024,
    # Retries and delays in a blink (RocketMQ's levels run 1 s .. 2 h; "ms" is our unit).
    "message_delay_level": " ".join(["100ms"] * 18),
}


@pytest.fixture
def broker_store() -> Mapping[str, Any]:
    return STORE_DEFAULTS


@pytest.fixture
async def producer(namesrv: NameServer, broker: Broker) -> AsyncIterator[Producer]:
    async with Producer("test-producer", namesrv.address) as p:
        yield p


# ------------------------------------------------------------------------------- topics


async def create_topic(
    broker: Broker, topic: str, queues: int = 4, perm: int = PERM_READ | PERM_WRITE
) -> None:
    """Create (or replace) ``topic`` on ``broker`` and register it with the name server now,
    as ``mqadmin updateTopic`` would."""
    broker.topics.update(TopicConfig(topic, queues, queues, perm))
    assert await broker.registration.register_all() >= 1


async def refuse_send_back(broker: Broker, group: str) -> None:
    """Make ``broker`` refuse CONSUMER_SEND_MSG_BACK for ``group`` (its retry topic made
    read-only: NO_PERMISSION), so the consumer's own local retry is what runs."""
    await create_topic(broker, f"%RETRY%{group}", queues=1, perm=PERM_READ)


# ------------------------------------------------------------------------------ reading


def max_offsets(broker: Broker, topic: str, queues: Iterable[int]) -> dict[int, int]:
    return {q: broker.store.get_max_offset(topic, q) for q in queues}


async def raw_pull(broker: Broker, topic: str, queue_id: int, offset: int = 0) -> bytes:
    """The body of a PULL_MESSAGE reply (the stored records as the broker sends them), by a
    plain RemotingClient rather than the SDK; b"" when nothing is there."""
    await wait_dispatched(broker)
    async with RemotingClient(ClientConfig(request_timeout_s=5.0)) as rc:
        response = await pull(
            rc, broker.address, topic, queue_id=queue_id, offset=offset, group="raw-puller"
        )
    if response.code != ResponseCode.SUCCESS:
        return b""
    return response.body_bytes


async def stored(broker: Broker, topic: str, queues: Iterable[int] = range(4)) -> list[MessageView]:
    """Every message of ``topic`` on ``broker``, queue by queue."""
    out: list[MessageView] = []
    for q in queues:
        offset = 0
        while True:
            batch = decode_messages(
                await raw_pull(broker, topic, q, offset), broker.config.broker_name
            )
            if not batch:
                break
            out += batch
            offset = batch[-1].queue_offset + 1
    return out


# ------------------------------------------------------------------------------ listeners


@dataclass
class Received:
    """What a listener saw, safe to append to from the listener's thread (sync listeners
    run in a worker thread)."""

    messages: list[MessageView] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, msg: MessageView) -> None:
        with self.lock:
            self.messages.append(msg)

    def __len__(self) -> int:
        with self.lock:
            return len(self.messages)

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages]

    def ids(self) -> list[str]:
        with self.lock:
            return [m.msg_id for m in self.messages]

    async def wait_for(self, count: int, timeout_s: float = 5.0) -> None:
        await wait_until(lambda: len(self) >= count, f"{count} messages", timeout_s)
