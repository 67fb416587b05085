"""Benchmark driver for Redis Streams with redis-py's asyncio client (hiredis parser), on
uvloop: ``python -m tests.bench.drivers.redis_async COMMAND`` (see ``common`` and
``async_shapes``).

Commands (arguments as JSON on stdin; ``port``, ``stream``, ``body_bytes`` always):

- ``produce``: ``warmup`` XADDs awaited one by one, then the ``shape`` until ``count``
  entries or ``max_s``: ``one``, an ``XADD`` awaited at a time; ``window``, pipelines of
  ``window`` XADDs (``transaction=False``, no MULTI), one pipeline at a time (redis-py's
  asyncio client runs one command per connection at a time, so concurrent tasks would each
  take a connection of their own: the pipeline is how Redis is driven with many in
  flight); ``batch``, the same with pipelines of ``batch``.
- ``preload``: ``count`` entries through pipelines of ``batch`` (not a figure).
- ``group``: a new consumer group from ID 0: ``XREADGROUP ... COUNT max_num`` and an
  ``XACK`` of the batch, one call at a time, until ``expect`` entries or ``max_s``.
- ``paced``: ``groups`` consumer groups (created at ``$``, a connection each, ``XREADGROUP
  ... COUNT max_num BLOCK 100`` and an ``XACK`` of each batch) read while ``rate`` XADDs a
  second go out for ``seconds``, each millisecond's due ones as one pipeline
  (``tests.bench.drivers.paced``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import redis.asyncio as aioredis

from tests.bench.drivers.async_shapes import run_shape, run_uvloop, summary
from tests.bench.drivers.common import (
    ReceiveClock,
    body_of,
    emit,
    process_window,
    run_command,
    run_tasks,
)
from tests.bench.drivers.paced import Paced, paced_role, read_paced, run_paced

FIELD = "body"


def _client(args: dict[str, Any]) -> aioredis.Redis:
    return aioredis.Redis(host="127.0.0.1", port=int(args["port"]), socket_timeout=30)


async def _produce(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    stream: str = args["stream"]
    fields: dict[Any, Any] = {FIELD: body_of(int(args["body_bytes"]))}
    shape = str(args["shape"])
    window, batch = int(args.get("window", 256)), int(args.get("batch", 32))

    async def one(_i: int) -> str | None:
        await client.xadd(stream, fields)
        return None

    async def group(_i: int, n: int) -> int:
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(n):
                pipe.xadd(stream, fields)
            replies = await pipe.execute()
        return sum(1 for r in replies if r)

    try:
        warmup = await run_tasks(1, int(args.get("warmup", 200)), 30.0, one)
        emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
        window_cpu = process_window(args.get("server_pid"))
        stats = await run_shape(
            shape,
            count=int(args["count"]),
            max_s=float(args["max_s"]),
            window=window,
            batch=batch,
            one=one,
            group=group,
            window_by_groups=True,
        )
        cpu = window_cpu.stop()
    finally:
        await client.aclose()
    size = {"one": 1, "window": window, "batch": batch}[shape]
    return {**summary(stats, shape, size, cpu), "warmup_ok": warmup.ok}


async def _preload(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    fields: dict[Any, Any] = {FIELD: body_of(int(args["body_bytes"]))}
    count, batch = int(args["count"]), int(args.get("batch", 256))
    started = time.perf_counter()
    done = 0
    try:
        while done < count:
            n = min(batch, count - done)
            async with client.pipeline(transaction=False) as pipe:
                for _ in range(n):
                    pipe.xadd(args["stream"], fields)
                await pipe.execute()
            done += n
    finally:
        await client.aclose()
    return {"ok": done, "seconds": round(time.perf_counter() - started, 3)}


async def _group(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    stream: str = args["stream"]
    name = args.get("group") or f"bench_{uuid.uuid4().hex[:8]}"
    max_num, expect = int(args.get("max_num", 32)), int(args["expect"])
    field = FIELD.encode()
    try:
        await client.xgroup_create(stream, name, id="0")
        clock = ReceiveClock(expect)
        window = process_window(args.get("server_pid"))
        deadline = time.monotonic() + float(args["max_s"])
        calls = 0
        while clock.count < expect and time.monotonic() < deadline:
            t0 = time.perf_counter_ns()
            reply: Any = await client.xreadgroup(
                name, "c1", {stream: ">"}, count=max_num, block=1000
            )
            calls += 1
            if not reply:
                continue
            entries = reply[0][1]
            await client.xack(stream, name, *(entry_id for entry_id, _ in entries))
            clock.request(time.perf_counter_ns() - t0)
            clock.add(len(entries), sum(len(f.get(field, b"")) for _id, f in entries))
        cpu = window.stop()
    finally:
        await client.aclose()
    return {**clock.summary(), **cpu, "calls": calls}


async def _paced(args: dict[str, Any]) -> dict[str, Any]:
    stream: str = args["stream"]
    role = paced_role(args)
    groups = 0 if role == "producer" else int(args.get("groups", 1))
    max_num = int(args.get("max_num", 32))
    run = Paced(groups, int(args["body_bytes"]))
    producer = _client(args)
    readers = [_client(args) for _ in range(groups)]
    names = [f"paced_{g}_{uuid.uuid4().hex[:6]}" for g in range(groups)]
    for client, name in zip(readers, names, strict=True):
        await client.xgroup_create(stream, name, id="$", mkstream=True)
    stop = asyncio.Event()
    field = FIELD.encode()

    async def read(g: int) -> None:
        client, name = readers[g], names[g]
        while not stop.is_set():
            reply: Any = await client.xreadgroup(
                name, "c1", {stream: ">"}, count=max_num, block=100
            )
            if not reply:
                continue
            entries = reply[0][1]
            for _entry_id, fields in entries:
                run.received(g, fields[field])
            await client.xack(stream, name, *(entry_id for entry_id, _ in entries))

    async def send(bodies: list[bytes]) -> int:
        async with producer.pipeline(transaction=False) as pipe:
            for body in bodies:
                pipe.xadd(stream, {FIELD: body})
            replies = await pipe.execute()
        return sum(1 for r in replies if r)

    tasks = [asyncio.create_task(read(g)) for g in range(groups)]
    try:
        if role == "readers":
            return await read_paced(run, args)
        return await run_paced(run, send, args)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in (producer, *readers):
            await client.aclose()


def paced(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_paced(args))


def produce(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_produce(args))


def preload(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_preload(args))


def group(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_group(args))


if __name__ == "__main__":
    run_command({"produce": produce, "preload": preload, "group": group, "paced": paced})
