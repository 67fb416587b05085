"""The produce shapes of the SDK benchmark (``tests.bench.sdk_bench``), for asyncio clients.

Every system (Aerolite's SDK, redis-py's asyncio client, nats-py) gets the same three shapes,
each bounded by a message count and a deadline:

- ``one``: one send at a time, each awaited before the next (``run_tasks`` with one task).
- ``window``: ``window`` sends in flight (``run_tasks`` with ``window`` tasks, each awaiting
  its own send), or, for a client that only pipelines (``redis-py``), ``window`` sends
  written together and awaited together, one group after the other (``run_groups``).
- ``batch``: ``batch`` messages handed over together and awaited together, one group at a
  time (``run_groups``): the SDK's ``send_batch``, a Redis pipeline, concurrent publishes.

Latency is per send: for a group, every message of it waited as long as the group, so one
sample per group stands for all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from tests.bench.drivers.common import SendStats, _error_kind, run_tasks

GroupSend = Callable[[int, int], Awaitable[int]]  # (first index, size) -> messages acknowledged


async def run_groups(group: int, count: int, max_s: float, send: GroupSend) -> SendStats:
    """``send(i, n)`` for groups of ``group`` messages, one group at a time, until ``count``
    messages in all or ``max_s``; ``send`` returns how many of the ``n`` were acknowledged
    OK (the rest count as not OK)."""
    clock = time.perf_counter_ns
    stats = SendStats()
    stats.first_ns = clock()
    deadline = stats.first_ns + int(max_s * 1e9)
    latencies = stats.latencies_ns
    sent = 0
    async with asyncio.timeout(max_s + 60.0):
        while sent < count:
            t0 = clock()
            if t0 >= deadline:
                break
            n = min(group, count - sent)
            try:
                ok = await send(sent, n)
            except Exception as exc:
                stats.failed(_error_kind(exc), False, clock())
                sent += n
                continue
            t1 = clock()
            sent += n
            latencies.append(t1 - t0)
            stats.last_ns = t1
            stats.ok += ok
            if ok < n:
                stats.not_ok["not acknowledged OK"] += n - ok
    return stats


async def run_shape(
    shape: str,
    *,
    count: int,
    max_s: float,
    window: int,
    batch: int,
    one: Callable[[int], Awaitable[str | None]],
    group: GroupSend | None = None,
    window_by_groups: bool = False,
) -> SendStats:
    """One of the shapes above; ``group`` sends ``n`` messages together (batch, and window
    when ``window_by_groups``)."""
    if shape == "one":
        return await run_tasks(1, count, max_s, one)
    if shape == "window":
        if window_by_groups:
            assert group is not None
            return await run_groups(window, count, max_s, group)
        return await run_tasks(window, count, max_s, one)
    if shape == "batch":
        assert group is not None
        return await run_groups(batch, count, max_s, group)
    raise ValueError(f"unknown shape {shape!r}")


def summary(stats: SendStats, shape: str, size: int, cpu: dict[str, Any]) -> dict[str, Any]:
    """A shape's ``done`` fields: the send summary, the CPU window and CPU per message."""
    out = stats.summary(size)
    out["shape"] = shape
    out |= cpu
    ok = out["ok"]
    client = cpu.get("client_cpu_s")
    server = cpu.get("server_cpu_s")
    out["client_cpu_us_per_msg"] = round(client / ok * 1e6, 2) if ok and client else None
    out["server_cpu_us_per_msg"] = round(server / ok * 1e6, 2) if ok and server else None
    return out


def run_uvloop(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Run ``coro`` on uvloop, as every client of this benchmark does."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)
