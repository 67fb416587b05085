"""Benchmark driver for Redis Streams with redis-py:
``python -m tests.bench.drivers.redis_client COMMAND`` (see ``common``).

Commands (arguments as JSON on stdin; ``port``, ``stream``, ``body_bytes`` always):

- ``produce``: ``threads`` threads, each on its own connection, each sending ``XADD`` and
  waiting for the entry ID before the next (the shape of ``send_sync``), until ``count``
  entries or ``max_s``, after ``warmup`` entries on one thread.
- ``preload``: ``count`` entries through pipelines of ``batch`` (not timed as a figure).
- ``group``: a consumer group from ID 0: ``XREADGROUP ... COUNT max_num`` and an ``XACK``
  of each batch, one call at a time, until ``expect`` entries or ``max_s`` (the counterpart
  of a RocketMQ push consumer, whose broker keeps the group's progress).
- ``read``: ``XREAD COUNT max_num`` from ID 0 to the end, one call at a time (the
  counterpart of a RocketMQ pull consumer reading from offset 0).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import redis

from tests.bench.drivers.common import (
    ReceiveClock,
    body_of,
    emit,
    process_window,
    run_command,
    run_threads,
)

FIELD = "body"


def _client(args: dict[str, Any]) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=int(args["port"]), socket_timeout=30)


def produce(args: dict[str, Any]) -> dict[str, Any]:
    stream: str = args["stream"]
    body = body_of(int(args["body_bytes"]))
    local = threading.local()
    clients: list[redis.Redis] = []
    lock = threading.Lock()

    def send(_i: int) -> str | None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = _client(args)
            with lock:
                clients.append(client)
        client.xadd(stream, {FIELD: body})
        return None

    warmup = run_threads(1, int(args.get("warmup", 200)), 30.0, send)
    emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
    window = process_window(args.get("server_pid"))
    stats = run_threads(int(args["threads"]), int(args["count"]), float(args["max_s"]), send)
    cpu = window.stop()
    for client in clients:
        client.close()
    return {**stats.summary(int(args["threads"])), **cpu, "warmup": warmup.summary(1)}


def preload(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    body = body_of(int(args["body_bytes"]))
    count, batch = int(args["count"]), int(args.get("batch", 256))
    started = time.perf_counter()
    done = 0
    while done < count:
        pipe = client.pipeline(transaction=False)
        n = min(batch, count - done)
        for _ in range(n):
            pipe.xadd(args["stream"], {FIELD: body})
        pipe.execute()
        done += n
    return {"ok": done, "seconds": round(time.perf_counter() - started, 3)}


def _body_bytes(entries: list[Any]) -> int:
    return sum(len(fields.get(FIELD.encode(), b"")) for _id, fields in entries)


def group(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    stream: str = args["stream"]
    name = args.get("group") or f"bench_{uuid.uuid4().hex[:8]}"
    max_num, expect = int(args.get("max_num", 32)), int(args["expect"])
    client.xgroup_create(stream, name, id="0")
    clock = ReceiveClock(expect)
    window = process_window(args.get("server_pid"))
    deadline = time.monotonic() + float(args["max_s"])
    calls = 0
    while clock.count < expect and time.monotonic() < deadline:
        t0 = time.perf_counter_ns()
        reply: Any = client.xreadgroup(name, "c1", {stream: ">"}, count=max_num, block=1000)
        calls += 1
        if not reply:
            continue
        entries = reply[0][1]
        client.xack(stream, name, *(entry_id for entry_id, _ in entries))
        clock.request(time.perf_counter_ns() - t0)
        clock.add(len(entries), _body_bytes(entries))
    cpu = window.stop()
    client.close()
    return {**clock.summary(), **cpu, "calls": calls}


def read(args: dict[str, Any]) -> dict[str, Any]:
    client = _client(args)
    stream: str = args["stream"]
    max_num, expect = int(args.get("max_num", 32)), int(args["expect"])
    clock = ReceiveClock(expect)
    window = process_window(args.get("server_pid"))
    deadline = time.monotonic() + float(args["max_s"])
    last: Any = "0"
    calls = 0
    while clock.count < expect and time.monotonic() < deadline:
        t0 = time.perf_counter_ns()
        reply: Any = client.xread({stream: last}, count=max_num)
        clock.request(time.perf_counter_ns() - t0)
        calls += 1
        if not reply:
            break  # the end of the stream
        entries = reply[0][1]
        last = entries[-1][0]
        clock.add(len(entries), _body_bytes(entries))
    cpu = window.stop()
    client.close()
    return {**clock.summary(), **cpu, "calls": calls}


if __name__ == "__main__":
    run_command({"produce": produce, "preload": preload, "group": group, "read": read})
