"""Fixtures for the SDK tests: a real name server and real brokers in the test's event loop.

Nothing of ours is mocked: producers and consumers talk to a ``NameServer`` and ``Broker``
objects on 127.0.0.1 (ephemeral ports, stores under ``tmp_path`` with small segments and short
flush intervals). Factories own an ``AsyncExitStack`` so everything shuts down even when a test
fails; shutting a broker down early (to kill it mid-run) is fine, ``shutdown`` is idempotent.

Every wait has a deadline, so a broken SDK fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig
from broker.namesrv.server import NameServer
from client import MessageView, Producer
from client.message import decode_messages
from remoting.bodies import PERM_READ, PERM_WRITE, TopicConfig
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.headers import PullMessageRequestHeader
from store.config import StoreConfig

LOOPBACK = "127.0.0.1"

STORE_DEFAULTS: dict[str, Any] = {
    "commit_log_file_bytes": 1 << 20,
    "max_message_bytes": 1 << 19,
    "consume_queue_file_bytes": 20 * 1024,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "flush_interval_ms": 10,
    "flush_interval_consume_queue_ms": 10,
    # Retries and delays in a blink (RocketMQ's levels run 1 s .. 2 h; "ms" is our unit).
    "message_delay_level": " ".join(["100ms"] * 18),
}


class BrokerFactory(Protocol):
    async def __call__(
        self,
        name: str = ...,
        *,
        root: Path | None = ...,
        port: int = ...,
        store: dict[str, Any] | None = ...,
        **config: Any,
    ) -> Broker: ...


@pytest.fixture
async def namesrv() -> AsyncIterator[NameServer]:
    config = NamesrvConfig(bind_address=LOOPBACK, listen_port=0, metrics_port=0)
    async with NameServer(config) as ns:
        yield ns


@pytest.fixture
async def start_broker(namesrv: NameServer, tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """``await start_broker("broker-b", root=…, port=…, store={…}, **BrokerConfig fields)``:
    a master registered with ``namesrv``. ``root`` defaults to ``tmp_path/<name>`` so a broker
    restarted under the same name finds its store again."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            name: str = "broker-a",
            *,
            root: Path | None = None,
            port: int = 0,
            store: dict[str, Any] | None = None,
            **config: Any,
        ) -> Broker:
            cfg = BrokerConfig(
                broker_name=name,
                bind_address=LOOPBACK,
                listen_port=port,
                metrics_port=0,  # metrics on a free port, never the default 5557
                namesrv_addr=namesrv.address,
                store=StoreConfig(
                    root_dir=root or tmp_path / name, **{**STORE_DEFAULTS, **(store or {})}
                ),
                **config,
            )
            return await stack.enter_async_context(Broker(cfg))

        yield start


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    return await start_broker()


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


# ------------------------------------------------------------------------------- waiting


async def wait_until(
    predicate: Callable[[], bool], what: str, timeout_s: float = 5.0, interval_s: float = 0.01
) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)


async def wait_dispatched(*brokers: Broker) -> None:
    await wait_until(
        lambda: all(b.store.dispatch_behind_bytes == 0 for b in brokers), "dispatch to catch up"
    )


def max_offsets(broker: Broker, topic: str, queues: Iterable[int]) -> dict[int, int]:
    return {q: broker.store.get_max_offset(topic, q) for q in queues}


async def raw_pull(broker: Broker, topic: str, queue_id: int, offset: int = 0) -> bytes:
    """The body of a PULL_MESSAGE reply (the stored records as the broker sends them), by a
    plain RemotingClient rather than the SDK; b"" when nothing is there."""
    await wait_dispatched(broker)
    header = PullMessageRequestHeader(
        consumer_group="raw-puller",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=0x4,
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
        expression_type="TAG",
    )
    async with RemotingClient(ClientConfig(request_timeout_s=5.0)) as rc:
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await rc.invoke(broker.address, request, 5.0)
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
