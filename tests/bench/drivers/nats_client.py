"""Benchmark driver for NATS JetStream with nats-py:
``python -m tests.bench.drivers.nats_client COMMAND`` (see ``common``).

nats-py is an asyncio library, so N sending threads become N tasks on one event loop (and one
connection, which NATS multiplexes), each awaiting its ``PubAck`` before the next publish.

Commands (arguments as JSON on stdin; ``port``, ``stream``, ``subject``, ``body_bytes``
always); the stream (file storage) is created when missing:

- ``produce``: ``threads`` tasks calling ``js.publish`` until ``count`` or ``max_s``, after
  ``warmup`` publishes on one task.
- ``preload``: ``count`` publishes, ``batch`` at a time in flight (not timed as a figure).
- ``durable``: a durable pull consumer (``AckPolicy.ALL``, from the first message):
  ``fetch(max_num)`` and an ack of each batch's last message, one fetch at a time, until
  ``expect`` or ``max_s`` (the counterpart of a RocketMQ push consumer).
- ``ephemeral``: an ephemeral pull consumer without acks (``AckPolicy.NONE``) reading from
  the first message (the counterpart of a RocketMQ pull consumer reading from offset 0).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from nats.js.errors import NotFoundError

from tests.bench.drivers.common import (
    ReceiveClock,
    body_of,
    emit,
    process_window,
    run_command,
    run_tasks,
)


async def _connect(args: dict[str, Any]) -> tuple[Client, JetStreamContext]:
    nc = await nats.connect(f"nats://127.0.0.1:{int(args['port'])}", connect_timeout=10)
    js = nc.jetstream(timeout=30)
    try:
        await js.stream_info(args["stream"])
    except NotFoundError:
        await js.add_stream(
            name=args["stream"], subjects=[args["subject"]], storage=StorageType.FILE
        )
    return nc, js


async def _produce(args: dict[str, Any]) -> dict[str, Any]:
    nc, js = await _connect(args)
    subject: str = args["subject"]
    body = body_of(int(args["body_bytes"]))

    async def send(_i: int) -> str | None:
        await js.publish(subject, body)
        return None

    warmup = await run_tasks(1, int(args.get("warmup", 200)), 30.0, send)
    emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
    window = process_window(args.get("server_pid"))
    stats = await run_tasks(int(args["threads"]), int(args["count"]), float(args["max_s"]), send)
    cpu = window.stop()
    await nc.close()
    return {**stats.summary(int(args["threads"])), **cpu, "warmup": warmup.summary(1)}


async def _preload(args: dict[str, Any]) -> dict[str, Any]:
    nc, js = await _connect(args)
    body = body_of(int(args["body_bytes"]))
    count, batch = int(args["count"]), int(args.get("batch", 256))
    started = time.perf_counter()
    done = 0
    while done < count:
        n = min(batch, count - done)
        await asyncio.gather(*(js.publish(args["subject"], body) for _ in range(n)))
        done += n
    await nc.close()
    return {"ok": done, "seconds": round(time.perf_counter() - started, 3)}


async def _consume(args: dict[str, Any], *, durable: bool) -> dict[str, Any]:
    nc, js = await _connect(args)
    max_num, expect = int(args.get("max_num", 32)), int(args["expect"])
    config = ConsumerConfig(
        ack_policy=AckPolicy.ALL if durable else AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        max_ack_pending=-1,
    )
    clock = ReceiveClock(expect)
    window = process_window(args.get("server_pid"))
    sub = await js.pull_subscribe(
        args["subject"],
        durable=args.get("group", "bench") if durable else None,
        stream=args["stream"],
        config=config,
    )
    deadline = time.monotonic() + float(args["max_s"])
    fetches = timeouts = 0
    while clock.count < expect and time.monotonic() < deadline:
        fetches += 1
        t0 = time.perf_counter_ns()
        try:
            msgs = await sub.fetch(min(max_num, expect - clock.count), timeout=5)
        except TimeoutError:
            timeouts += 1
            if timeouts >= 3:
                break
            continue
        if durable:
            await msgs[-1].ack()
        clock.request(time.perf_counter_ns() - t0)
        clock.add(len(msgs), sum(len(m.data) for m in msgs))
    cpu = window.stop()
    await nc.close()
    return {**clock.summary(), **cpu, "calls": fetches, "timeouts": timeouts}


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """On uvloop, as Aerolite runs: the client should cost no more than it must."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def produce(args: dict[str, Any]) -> dict[str, Any]:
    return _run(_produce(args))


def preload(args: dict[str, Any]) -> dict[str, Any]:
    return _run(_preload(args))


def durable(args: dict[str, Any]) -> dict[str, Any]:
    return _run(_consume(args, durable=True))


def ephemeral(args: dict[str, Any]) -> dict[str, Any]:
    return _run(_consume(args, durable=False))


if __name__ == "__main__":
    run_command(
        {"produce": produce, "preload": preload, "durable": durable, "ephemeral": ephemeral}
    )
