"""Paced runs for the comparison benchmark (``tests.bench.sdk_bench``): a producer at a fixed
rate while consumer groups read, for the end-to-end latency and the mixed workloads.

The producer is open-loop: every millisecond it sends the messages that are due by then, as
one group handed to the client at once, without waiting for the previous groups' answers (up
to ``max_in_flight`` groups). Each body starts with its sequence number and the time it was
*due* (``time.perf_counter_ns``, CLOCK_MONOTONIC), so a late producer shows up as latency
instead of silently lowering the rate (no coordinated omission). A consumer hands every body
to ``Paced.received(group, body)``, which takes the latency from that stamp: the time from
when the message was due to be sent until the group's listener had it, in this one process.

A run: the consumers start; warm-up messages (negative sequence numbers, not counted) go out
at the same rate until every group has seen one; then ``seconds`` of timed sends; then up to
``drain_s`` for the groups to catch up. The mixed run splits the two sides over two
processes (``role``): the readers (``Paced.read``) start first and say when they are ready
through a file; the producer (``Paced.run`` with no groups) warms up for a fixed time, sends,
and the benchmark hands its acknowledged count to the readers through another file. Each
side then gets its own share of the client CPU instead of one starving the other.

The summary reports the producer's achieved rate, how far behind its schedule it fell, each
group's count, the latency percentiles over all groups, and what is still missing at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.bench.drivers.common import _error_kind, percentiles_us, process_window

STAMP = struct.Struct("<qq")  # sequence number, due time (ns)
SendGroup = Callable[[list[bytes]], Awaitable[int]]  # bodies -> how many acknowledged OK


class Paced:
    """The bookkeeping of one paced run with ``groups`` consumer groups."""

    def __init__(self, groups: int, body_bytes: int) -> None:
        self.groups = groups
        self.padding = b"x" * max(0, body_bytes - STAMP.size)
        self.counts = [0] * groups
        self.warm = [False] * groups
        self.latencies_ns: list[int] = []
        self.ok = 0
        self.failed = 0
        self.error_kinds: dict[str, int] = {}
        self.behind_max_ns = 0
        self.stalled_ticks = 0
        self.caught_up = asyncio.Event()

    def body(self, seq: int, due_ns: int) -> bytes:
        return STAMP.pack(seq, due_ns) + self.padding

    def received(self, group: int, body: bytes) -> None:
        now = time.perf_counter_ns()
        seq, due = STAMP.unpack_from(body)
        if seq < 0:
            self.warm[group] = True
            return
        self.counts[group] += 1
        self.latencies_ns.append(now - due)
        self.caught_up.set()  # wakes the drain wait, which checks the counts again

    async def _send(self, send: SendGroup, bodies: list[bytes], gate: asyncio.Semaphore) -> None:
        try:
            ok = await send(bodies)
        except Exception as exc:
            kind = _error_kind(exc)
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
            ok = 0
        finally:
            gate.release()
        self.ok += ok
        self.failed += len(bodies) - ok

    async def pace(
        self,
        send: SendGroup,
        rate: float,
        seconds: float,
        *,
        first_seq: int,
        max_in_flight: int,
        until: Callable[[], bool] | None = None,
    ) -> int:
        """Send at ``rate`` for ``seconds`` (or until ``until()``), numbering from
        ``first_seq`` (counting down when negative); returns how many were sent."""
        gate = asyncio.Semaphore(max_in_flight)
        tasks: set[asyncio.Task[None]] = set()
        start = time.perf_counter_ns()
        end = start + int(seconds * 1e9)
        period = 1e9 / rate
        sent = 0
        step = -1 if first_seq < 0 else 1
        seq = first_seq
        while True:
            now = time.perf_counter_ns()
            if now >= end or (until is not None and until()):
                break
            due = int((now - start) / period) + 1
            if due > sent:
                self.behind_max_ns = max(self.behind_max_ns, now - (start + int(sent * period)))
                bodies = []
                for i in range(sent, due):
                    bodies.append(self.body(seq, start + int(i * period)))
                    seq += step
                sent = due
                if gate.locked():
                    self.stalled_ticks += 1
                await gate.acquire()
                task = asyncio.create_task(self._send(send, bodies, gate))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.sleep(0.001)
        if tasks:
            await asyncio.gather(*tasks)
        return sent

    async def run(
        self,
        send: SendGroup,
        *,
        rate: float,
        seconds: float,
        warmup_max_s: float = 20.0,
        drain_s: float = 10.0,
        max_in_flight: int = 64,
        server_pid: Any = None,
    ) -> dict[str, Any]:
        """Warm up until every group has seen a message (without groups: for
        ``warmup_max_s``), send for ``seconds``, wait up to ``drain_s`` for the groups."""
        await self.pace(
            send,
            rate,
            warmup_max_s,
            first_seq=-1,
            max_in_flight=max_in_flight,
            until=(lambda: all(self.warm)) if self.groups else None,
        )
        warmed = all(self.warm)
        self.ok = self.failed = 0
        self.behind_max_ns = self.stalled_ticks = 0
        window = process_window(server_pid)
        started = time.perf_counter()
        sent = await self.pace(send, rate, seconds, first_seq=0, max_in_flight=max_in_flight)
        produce_s = time.perf_counter() - started
        cpu = window.stop()
        await self.drain(self.ok, drain_s)
        received = sum(self.counts)
        out: dict[str, Any] = {
            "target_per_s": round(rate, 1),
            "groups": self.groups,
            "warmed": warmed,
            "sent": sent,
            "ok": self.ok,
            "failed": self.failed,
            "error_kinds": self.error_kinds,
            "seconds": round(produce_s, 3),
            "messages_per_s": round(self.ok / produce_s, 1) if produce_s else 0.0,
            "received": received,
            "per_group": self.counts,
            "missing": max(0, self.ok * self.groups - received) if self.groups else None,
            "consumed_per_s": round(received / produce_s, 1) if produce_s else 0.0,
            "behind_max_ms": round(self.behind_max_ns / 1e6, 2),
            "stalled_ticks": self.stalled_ticks,
            "latencies": len(self.latencies_ns),
            **percentiles_us(sorted(self.latencies_ns)),
            **cpu,
        }
        ok = self.ok
        out["server_cpu_us_per_msg"] = (
            round(cpu["server_cpu_s"] / ok * 1e6, 2) if ok and cpu.get("server_cpu_s") else None
        )
        out["client_cpu_us_per_msg"] = (
            round(cpu["client_cpu_s"] / ok * 1e6, 2) if ok and cpu.get("client_cpu_s") else None
        )
        return out

    async def drain(self, ok: int, drain_s: float) -> None:
        """Until every group has ``ok`` timed messages, for at most ``drain_s``."""
        if not self.groups:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_s):
                while min(self.counts) < ok:
                    self.caught_up.clear()
                    await self.caught_up.wait()

    async def read(
        self, *, ready: Path, stop: Path, max_s: float, drain_s: float, server_pid: Any = None
    ) -> dict[str, Any]:
        """The readers' side of a run whose producer is another process: say ``ready`` (a
        file) once the groups are subscribed, read until the ``stop`` file appears (it holds
        how many timed messages the producer had acknowledged), then up to ``drain_s`` for
        the groups to have them all."""
        _say(ready, "ready")
        window = process_window(server_pid)
        ok = await asyncio.to_thread(_wait_for_count, stop, max_s)
        await self.drain(ok, drain_s)
        cpu = window.stop()
        received = sum(self.counts)
        return {
            "groups": self.groups,
            "warmed": all(self.warm),
            "producer_ok": ok,
            "received": received,
            "per_group": self.counts,
            "missing": max(0, ok * self.groups - received),
            "latencies": len(self.latencies_ns),
            **percentiles_us(sorted(self.latencies_ns)),
            "reader_cpu_s": cpu["client_cpu_s"],
            "reader_window_s": cpu["cpu_window_s"],
        }


def _say(path: Path, text: str) -> None:
    path.write_text(text + "\n")


def _wait_for_count(path: Path, max_s: float) -> int:
    """The count written to ``path`` once it appears (0 if it never does in ``max_s``)."""
    deadline = time.monotonic() + max_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text.isdigit() else 0


ROLES = ("both", "producer", "readers")


def paced_role(args: dict[str, Any]) -> str:
    """The driver's side of a paced run: "both" (default), "producer" or "readers"."""
    role = str(args.get("role", "both"))
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return role


async def run_paced(run: Paced, send: SendGroup, args: dict[str, Any]) -> dict[str, Any]:
    """``Paced.run`` with a driver's arguments; a producer alone warms up for ``warmup_s``."""
    return await run.run(
        send,
        rate=float(args["rate"]),
        seconds=float(args["seconds"]),
        warmup_max_s=float(args.get("warmup_s", 20.0 if run.groups else 2.0)),
        drain_s=float(args.get("drain_s", 10.0)),
        server_pid=args.get("server_pid"),
    )


async def read_paced(run: Paced, args: dict[str, Any]) -> dict[str, Any]:
    """``Paced.read`` with a driver's arguments (``ready`` and ``stop`` file paths)."""
    return await run.read(
        ready=Path(args["ready"]),
        stop=Path(args["stop"]),
        max_s=float(args["max_s"]),
        drain_s=float(args.get("drain_s", 10.0)),
        server_pid=args.get("server_pid"),
    )
