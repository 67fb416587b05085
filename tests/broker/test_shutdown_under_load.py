"""SIGTERM while producers send: the broker drains what it took and loses nothing it
acknowledged (M13: one lifecycle, uvicorn's shutdown order).

The standalone broker runs as a process of its own so the signal is real. Producers keep
sending while it arrives; every send that got SEND_OK must be readable after a restart on the
same store, and the broker must have exited 0 (a clean shutdown, not a recovery).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from client import ConsumeFromWhere, Message, Producer, PullConsumer, SendStatus
from client.errors import RocketMQError
from tests.processes import start_standalone
from tests.support import wait_until

TOPIC = "ShutdownUnderLoad"
SENDERS = 16
MAX_MESSAGES = 20_000  # bounded in count …
MAX_SECONDS = 30.0  # … and in time


async def _send_until_stopped(
    producer: Producer, acked: set[bytes], failures: list[str], stop: asyncio.Event, first: int
) -> None:
    i = first
    deadline = time.monotonic() + MAX_SECONDS
    while not stop.is_set() and i < MAX_MESSAGES and time.monotonic() < deadline:
        body = f"m{i}".encode()
        i += SENDERS
        try:
            result = await producer.send(Message(TOPIC, body), timeout_s=2.0)
        except RocketMQError as exc:
            failures.append(type(exc).__name__)
            await asyncio.sleep(0.01)  # the broker is gone: do not spin
            continue
        if result.status is SendStatus.SEND_OK:
            acked.add(body)


async def _read_all(namesrv: str, want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    consumer = PullConsumer(
        "shutdown-reader",
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        deadline = time.monotonic() + 60
        while not want <= got and time.monotonic() < deadline:
            got.update(m.body for m in await consumer.poll(timeout_s=1.0, max_messages=1024))
    return got


async def test_sigterm_while_sending_loses_nothing_acknowledged(tmp_path: Path) -> None:
    node = await asyncio.to_thread(start_standalone, tmp_path)
    acked: set[bytes] = set()
    failures: list[str] = []
    stop = asyncio.Event()
    try:
        async with Producer("shutdown-pg", namesrv=node.namesrv) as producer:
            await producer.send(Message(TOPIC, b"warm-up"))  # the route exists before load
            acked.add(b"warm-up")
            senders = [
                asyncio.create_task(_send_until_stopped(producer, acked, failures, stop, k))
                for k in range(SENDERS)
            ]
            await wait_until(lambda: len(acked) >= 2_000, "2,000 acknowledged sends", 20.0)
            os.kill(node.proc.pid, signal.SIGTERM)  # mid-flight: 16 sends outstanding
            code = await asyncio.to_thread(node.proc.wait, 30)
            await asyncio.sleep(0.5)  # sends in flight at the exit end one way or the other
            stop.set()
            await asyncio.gather(*senders)
    finally:
        stop.set()
        node.stop()
    assert code == 0, (tmp_path / "broker.log").read_text()[-3000:]
    assert len(acked) >= 2_000
    assert failures, "the broker went away while sending: some sends must have failed"

    again = await asyncio.to_thread(start_standalone, tmp_path)
    try:
        got = await _read_all(again.namesrv, acked)
    finally:
        again.stop()
    lost = acked - got
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"
