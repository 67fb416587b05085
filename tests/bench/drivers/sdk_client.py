"""Benchmark driver for Aerolite's asyncio SDK (``client``), on uvloop:
``python -m tests.bench.drivers.sdk_client COMMAND`` (see ``common`` and ``async_shapes``).

Commands (arguments as JSON on stdin; ``namesrv``, ``topic``, ``body_bytes`` always):

- ``produce``: one ``Producer``; ``warmup`` sends awaited one by one, then the ``shape``
  (``one``: ``send`` awaited one by one; ``window``: ``window`` tasks each awaiting its
  ``send``; ``batch``: ``send_batch`` of ``batch`` messages, one batch at a time) until
  ``count`` messages or ``max_s``. A new ``Message`` per send, as an application makes one.
  Prints ``{"event": "warm"}`` when the timed part begins (the profiler waits for it).
  With ``echo_port`` the ``one`` shape takes turns with round trips to the raw echo server
  there, ``echo_block`` of each at a time (``_one_interleaved``).
- ``preload``: ``count`` messages through ``send_batch`` of ``batch``, ``window`` batches in
  flight (not a figure).
- ``push``: a ``PushConsumer`` in a new group from the first offset, its async listener
  counting each message and returning ``ConsumeResult.SUCCESS``, until ``expect`` messages
  or ``max_s``.
- ``pull``: a ``PullConsumer`` (auto-commit) in a new group from the first offset, calling
  ``poll()`` until ``expect`` messages or ``max_s``.
- ``paced``: ``groups`` ``PushConsumer`` groups (committed offsets) read while a ``Producer``
  sends ``rate`` messages a second for ``seconds`` (``tests.bench.drivers.paced``): each
  millisecond's due messages go out as concurrent ``send`` calls, which the producer
  coalesces into batch requests. End-to-end latency and the mixed workload; ``role``
  "producer" or "readers" runs one side only.

Consumers also count duplicates (a queue offset delivered twice) and report how many
messages each queue gave, so a lost or repeated message shows in the ``done`` line.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from tests.bench.drivers.async_shapes import run_shape, run_uvloop, summary
from tests.bench.drivers.common import (
    ReceiveClock,
    SendStats,
    body_of,
    emit,
    process_window,
    run_command,
    run_tasks,
)
from tests.bench.drivers.paced import Paced, paced_role, read_paced, run_paced


def _group(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def _produce(args: dict[str, Any]) -> dict[str, Any]:
    from client import Message, Producer, SendStatus

    topic: str = args["topic"]
    body = body_of(int(args["body_bytes"]))
    shape = str(args["shape"])
    window, batch = int(args.get("window", 256)), int(args.get("batch", 32))
    ok_status = SendStatus.SEND_OK

    async with Producer(_group("bench_sdk"), namesrv=args["namesrv"]) as producer:

        async def one(_i: int) -> str | None:
            result = await producer.send(Message(topic, body))
            return None if result.status is ok_status else str(result.status)

        async def group(_i: int, n: int) -> int:
            result = await producer.send_batch([Message(topic, body) for _ in range(n)])
            return n if result.status is ok_status else 0

        warmup = await run_tasks(1, int(args.get("warmup", 200)), 30.0, one)
        emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
        if shape == "one" and args.get("echo_port"):
            return {**await _one_interleaved(args, one), "warmup_ok": warmup.ok}
        window_cpu = process_window(args.get("server_pid"))
        stats = await run_shape(
            shape,
            count=int(args["count"]),
            max_s=float(args["max_s"]),
            window=window,
            batch=batch,
            one=one,
            group=group,
        )
        cpu = window_cpu.stop()
    size = {"one": 1, "window": window, "batch": batch}[shape]
    return {**summary(stats, shape, size, cpu), "warmup_ok": warmup.ok}


async def _one_interleaved(
    args: dict[str, Any], one: Callable[[int], Awaitable[str | None]]
) -> dict[str, Any]:
    """The one-by-one shape in blocks of ``echo_block`` sends, each followed by as many round
    trips to the raw echo server at ``echo_port`` (1 KiB requests, one at a time, from this
    process and loop): both latencies come from the same moments of the run. Rate and CPU
    count the send blocks only."""
    from tests.bench import loadgen
    from tests.bench.remoting_server import ECHO_CODE
    from tests.bench.report import percentile

    body_bytes = int(args["body_bytes"])
    ring = loadgen.FrameRing.echo_requests(ECHO_CODE, b"x" * body_bytes, 64)
    proto = await loadgen.connect(int(args["echo_port"]), short_frame_bytes=body_bytes)
    block = int(args.get("echo_block", 250))
    count, max_s = int(args["count"]), float(args["max_s"])
    await loadgen.run_unpipelined(proto, ring, requests=200, max_s=10.0)
    stats = SendStats()
    echo: list[int] = []
    client_s = server_s = busy_s = 0.0
    deadline = time.monotonic() + max_s
    try:
        while stats.ok + sum(stats.errors.values()) < count and time.monotonic() < deadline:
            n = min(block, count - stats.ok - sum(stats.errors.values()))
            window = process_window(args.get("server_pid"))
            part = await run_tasks(1, n, max(0.01, deadline - time.monotonic()), one)
            cpu = window.stop()
            client_s += cpu["client_cpu_s"]
            server_s += cpu["server_cpu_s"] or 0.0
            busy_s += cpu["cpu_window_s"]
            if not stats.first_ns:
                stats.first_ns = part.first_ns
            stats.merge(part)
            echo += await loadgen.run_unpipelined(proto, ring, requests=n, max_s=10.0)
    finally:
        await loadgen.close(proto)
    out = summary(
        stats,
        "one",
        1,
        {
            "server_cpu_s": round(server_s, 3) if args.get("server_pid") else None,
            "client_cpu_s": round(client_s, 3),
            "cpu_window_s": round(busy_s, 3),
        },
    )
    out["seconds"] = round(busy_s, 3)
    out["messages_per_s"] = round(stats.ok / busy_s, 1) if busy_s else 0.0
    ordered = sorted(echo)
    if ordered:
        out["echo"] = {
            "round_trips": len(ordered),
            "short_frames": proto.short_frames,
            "p50_us": round(percentile(ordered, 50) / 1e3, 1),
            "p99_us": round(percentile(ordered, 99) / 1e3, 1),
            "max_us": round(ordered[-1] / 1e3, 1),
        }
    return out


async def _preload(args: dict[str, Any]) -> dict[str, Any]:
    from client import Message, Producer, SendStatus

    topic: str = args["topic"]
    body = body_of(int(args["body_bytes"]))
    count, batch = int(args["count"]), int(args.get("batch", 32))
    in_flight = int(args.get("window", 8))
    started = time.perf_counter()
    stored = failed = 0
    async with Producer(_group("bench_sdk_preload"), namesrv=args["namesrv"]) as producer:
        sizes = [batch] * (count // batch) + ([count % batch] if count % batch else [])
        for first in range(0, len(sizes), in_flight):
            group = sizes[first : first + in_flight]
            results = await asyncio.gather(
                *(producer.send_batch([Message(topic, body) for _ in range(n)]) for n in group),
                return_exceptions=True,
            )
            for n, result in zip(group, results, strict=True):
                if isinstance(result, BaseException) or result.status is not SendStatus.SEND_OK:
                    failed += n
                else:
                    stored += n
    return {"ok": stored, "failed": failed, "seconds": round(time.perf_counter() - started, 3)}


class _Received:
    """Counts what a consumer got, per queue, and offsets seen twice."""

    def __init__(self, expect: int) -> None:
        self.clock = ReceiveClock(expect)
        self.done = asyncio.Event()
        self.seen: set[tuple[int, int]] = set()
        self.duplicates = 0
        self.per_queue: Counter[int] = Counter()

    def add(self, queue_id: int, offset: int, nbytes: int) -> None:
        key = (queue_id, offset)
        if key in self.seen:
            self.duplicates += 1
            return
        self.seen.add(key)
        self.per_queue[queue_id] += 1
        self.clock.add(1, nbytes)
        if self.clock.count >= self.clock.expect:
            self.done.set()

    def summary(self) -> dict[str, Any]:
        return {
            **self.clock.summary(),
            "duplicates": self.duplicates,
            "per_queue": {str(q): n for q, n in sorted(self.per_queue.items())},
        }


async def _push(args: dict[str, Any]) -> dict[str, Any]:
    from client import ConsumeFromWhere, ConsumeResult, MessageView, PushConsumer

    expect = int(args["expect"])
    received = _Received(expect)
    consumer = PushConsumer(
        _group("bench_sdk_push"),
        namesrv=args["namesrv"],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=int(args.get("max_num", 32)),
    )
    success = ConsumeResult.SUCCESS

    @consumer.subscribe(args["topic"])
    async def listener(msg: MessageView) -> ConsumeResult:
        received.add(msg.queue_id, msg.queue_offset, len(msg.body))
        return success

    window = process_window(args.get("server_pid"))
    received.clock.started_ns = time.perf_counter_ns()
    await consumer.start()
    emit("warm")  # the profiler waits for this line
    try:
        async with asyncio.timeout(float(args["max_s"])):
            await received.done.wait()
    except TimeoutError:
        pass
    cpu = window.stop()
    shutdown_started = time.perf_counter()
    await consumer.shutdown()
    return {
        **received.summary(),
        **cpu,
        "shutdown_s": round(time.perf_counter() - shutdown_started, 3),
    }


async def _pull(args: dict[str, Any]) -> dict[str, Any]:
    from client import ConsumeFromWhere, PullConsumer

    expect = int(args["expect"])
    received = _Received(expect)
    consumer = PullConsumer(
        _group("bench_sdk_pull"),
        namesrv=args["namesrv"],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=int(args.get("max_num", 32)),
    )
    consumer.subscribe(args["topic"])
    window = process_window(args.get("server_pid"))
    received.clock.started_ns = time.perf_counter_ns()
    await consumer.start()
    deadline = time.monotonic() + float(args["max_s"])
    polls = empty = 0
    while received.clock.count < expect and time.monotonic() < deadline:
        t0 = time.perf_counter_ns()
        msgs = await consumer.poll(timeout_s=min(1.0, max(0.01, deadline - time.monotonic())))
        polls += 1
        if not msgs:
            empty += 1
            continue
        received.clock.request(time.perf_counter_ns() - t0)
        for msg in msgs:
            received.add(msg.queue_id, msg.queue_offset, len(msg.body))
    cpu = window.stop()
    shutdown_started = time.perf_counter()
    await consumer.shutdown()
    return {
        **received.summary(),
        **cpu,
        "polls": polls,
        "empty_polls": empty,
        "shutdown_s": round(time.perf_counter() - shutdown_started, 3),
    }


async def _paced(args: dict[str, Any]) -> dict[str, Any]:
    from client import (
        ConsumeFromWhere,
        ConsumeResult,
        Message,
        MessageView,
        Producer,
        PushConsumer,
        SendStatus,
    )

    topic: str = args["topic"]
    role = paced_role(args)
    groups = 0 if role == "producer" else int(args.get("groups", 1))
    run = Paced(groups, int(args["body_bytes"]))
    success, ok_status = ConsumeResult.SUCCESS, SendStatus.SEND_OK
    consumers = []
    for g in range(groups):
        consumer = PushConsumer(
            _group(f"bench_sdk_paced{g}"),
            namesrv=args["namesrv"],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=int(args.get("max_num", 32)),
        )

        def listener_of(group: int) -> Callable[[MessageView], Awaitable[ConsumeResult]]:
            async def listener(msg: MessageView) -> ConsumeResult:
                run.received(group, msg.body)
                return success

            return listener

        consumer.subscribe(topic)(listener_of(g))
        consumers.append(consumer)
    try:
        for consumer in consumers:
            await consumer.start()
        if role == "readers":
            return await read_paced(run, args)
        # 30 s, as the Redis and NATS drivers allow their clients: an overloaded producer
        # falls behind its schedule (which the latencies show) instead of giving up at 3 s
        async with Producer(
            _group("bench_sdk_paced"), namesrv=args["namesrv"], send_timeout_s=30.0
        ) as producer:

            async def send(bodies: list[bytes]) -> int:
                sends = (producer.send(Message(topic, b)) for b in bodies)
                results = await asyncio.gather(*sends)
                return sum(1 for r in results if r.status is ok_status)

            return await run_paced(run, send, args)
    finally:
        for consumer in consumers:
            await consumer.shutdown()


def produce(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_produce(args))


def paced(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_paced(args))


def preload(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_preload(args))


def push(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_push(args))


def pull(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_pull(args))


if __name__ == "__main__":
    import structlog

    # Warnings only, on stderr: stdout carries the JSON lines, and nothing may log per send.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    run_command(
        {"produce": produce, "preload": preload, "push": push, "pull": pull, "paced": paced}
    )
