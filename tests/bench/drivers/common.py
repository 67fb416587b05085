"""What every benchmark client driver shares: the JSON channel, CPU pinning, the load shapes.

A driver reads one JSON line of arguments from stdin, runs one command and prints JSON lines
on a private copy of stdout (file descriptor 1 is pointed at stderr first, because the C++
RocketMQ client prints on its own), ending with ``{"event": "done", ...}``. Every loop is
bounded by a count and a deadline.

Load shapes, the same for every system:

- ``run_threads``: N threads, each sending one message and waiting for its acknowledgement
  before the next (``Producer.send_sync``, a blocking ``XADD``), until ``count`` messages in
  all or ``max_s`` seconds, whichever comes first.
- ``run_tasks``: the same with N asyncio tasks on one event loop (clients that only come as
  asyncio libraries: nats-py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any

_OUT: list[IO[str]] = []  # the private copy of stdout, once taken
_EMIT_LOCK = threading.Lock()
MAX_ERROR_SAMPLES = 5


def take_stdout() -> None:
    """Keep a private copy of stdout for JSON and send fd 1 to stderr (call before loading a
    library that prints)."""
    if not _OUT:
        _OUT.append(os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1))
        os.dup2(2, 1)


def emit(event: str, **fields: Any) -> None:
    """One JSON line on the private stdout; safe from any thread."""
    take_stdout()
    line = json.dumps({"event": event, **fields}, separators=(",", ":"))
    with _EMIT_LOCK:
        _OUT[0].write(line + "\n")
        _OUT[0].flush()


def read_args() -> dict[str, Any]:
    """The driver's JSON arguments; pins the process to ``cpu`` when one is given, so that
    every thread the client library starts later inherits the pinning."""
    args: dict[str, Any] = json.loads(sys.stdin.readline())
    cpu = args.get("cpu")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu)})
    return args


def body_of(size: int) -> bytes:
    """A printable body of ``size`` bytes: the C++ client's ``SetMessageBody`` takes a C string,
    so a body must hold no NUL byte; every system gets the same bytes."""
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return bytes(alphabet[i * 7 % len(alphabet)] for i in range(size))


def finish(result: dict[str, Any], code: int = 0) -> None:
    """Print the ``done`` line and leave at once (``os._exit``: the C++ client's threads and
    its ``__del__`` methods do not survive interpreter teardown reliably)."""
    emit("done", **result)
    sys.stderr.flush()
    os._exit(code)


def run_command(commands: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """``main()`` of a driver: ``argv[1]`` names the command."""
    take_stdout()
    args = read_args()
    try:
        result = commands[sys.argv[1]](args)
    except Exception as exc:
        finish({"error": f"{type(exc).__name__}: {exc}"}, 1)
    finish(result)


def cpu_ns(pid: int) -> int | None:
    """CPU time every thread of process ``pid`` has run, in ns (Linux schedstat); None if
    unreadable."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            continue  # the thread ended between the listing and the read
        except (OSError, ValueError, IndexError):
            return None
    return total


class CpuWindow:
    """CPU used by the server under test (by PID) and by this driver process, from creation
    to ``stop()``."""

    def __init__(self, server_pid: int | None) -> None:
        self._pid = server_pid
        self._server = cpu_ns(server_pid) if server_pid else None
        self._client = time.process_time_ns()
        self._wall = time.perf_counter_ns()
        self._ours = {os.getpid(), os.getppid(), *([server_pid] if server_pid else [])}
        self._foreign = foreign_cpu_s(self._ours)

    def stop(self) -> dict[str, Any]:
        server = cpu_ns(self._pid) if self._pid else None
        foreign = foreign_cpu_s(self._ours)
        out = {
            "server_cpu_s": None
            if server is None or self._server is None
            else round((server - self._server) / 1e9, 3),
            "client_cpu_s": round((time.process_time_ns() - self._client) / 1e9, 3),
            "cpu_window_s": round((time.perf_counter_ns() - self._wall) / 1e9, 3),
        }
        if foreign is not None and self._foreign is not None:
            out["foreign_cpu_s"] = round(max(0.0, foreign - self._foreign), 3)
        return out


def foreign_cpu_s(ours: set[int]) -> float | None:
    """CPU seconds (user + system, in ticks of 10 ms) that every user-space process but
    ``ours`` (this driver, the benchmark that started it, the server) and their children
    has used since it
    started: other work on the machine, which skews a figure. Kernel threads are left out:
    their work (loopback softirqs, page writeback) is the workload's own. A process that
    starts or ends within a run counts from or until then only. None without /proc."""
    total = 0
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if pid in ours:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue  # ended meanwhile
        # after the name: state, ppid, ..., utime (11), stime (12), counted from 0
        if fields[1] == "2" or pid == 2:  # kthreadd's children are kernel threads
            continue
        if int(fields[1]) in ours:  # what the benchmark started: servers, echo, drivers
            continue
        total += int(fields[11]) + int(fields[12])
    return total / (os.sysconf("SC_CLK_TCK") or 100)


def process_window(server_pid: Any) -> CpuWindow:
    return CpuWindow(int(server_pid) if server_pid else None)


def _percentile(ordered: list[int], pct: float) -> float:
    # nearest rank; the epsilon keeps 99.9 % of 1,000 at rank 999 despite float rounding
    rank = max(1, math.ceil(pct * len(ordered) / 100 - 1e-9))
    return ordered[rank - 1] / 1e3


# the latency percentiles every row carries (the plots draw their curves from them)
PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99)


def pct_key(pct: float) -> str:
    """``p99_9_us`` for 99.9: the JSON key of a latency percentile."""
    return "p" + f"{pct:g}".replace(".", "_") + "_us"


def percentiles_us(ordered_ns: list[int]) -> dict[str, float]:
    """The fixed percentile set and the maximum of the sorted ``ordered_ns``, in µs."""
    if not ordered_ns:
        return {}
    out = {pct_key(p): round(_percentile(ordered_ns, p), 1) for p in PERCENTILES}
    out["max_us"] = round(ordered_ns[-1] / 1e3, 1)
    return out


@dataclass(slots=True)
class SendStats:
    """What a load shape accumulated: acknowledged sends, failures, latencies."""

    ok: int = 0
    not_ok: Counter[str] = field(default_factory=Counter)  # acknowledged, status not OK
    errors: Counter[str] = field(default_factory=Counter)  # raised
    latencies_ns: list[int] = field(default_factory=list)
    failed_at_ns: list[int] = field(default_factory=list)  # when the first failures came
    first_ns: int = 0
    last_ns: int = 0

    def failed(self, kind: str, status: bool, now_ns: int) -> None:
        (self.not_ok if status else self.errors)[kind] += 1
        if len(self.failed_at_ns) < MAX_ERROR_SAMPLES:
            self.failed_at_ns.append(now_ns)

    def merge(self, other: SendStats) -> None:
        self.ok += other.ok
        self.not_ok.update(other.not_ok)
        self.errors.update(other.errors)
        self.latencies_ns += other.latencies_ns
        self.failed_at_ns = sorted(self.failed_at_ns + other.failed_at_ns)[:MAX_ERROR_SAMPLES]
        self.last_ns = max(self.last_ns, other.last_ns)

    def summary(self, threads: int) -> dict[str, Any]:
        seconds = (self.last_ns - self.first_ns) / 1e9 if self.last_ns > self.first_ns else 0.0
        ordered = sorted(self.latencies_ns)
        out: dict[str, Any] = {
            "threads": threads,
            "ok": self.ok,
            "not_ok": sum(self.not_ok.values()),
            "errors": sum(self.errors.values()),
            "not_ok_kinds": dict(self.not_ok.most_common(MAX_ERROR_SAMPLES)),
            "error_kinds": dict(self.errors.most_common(MAX_ERROR_SAMPLES)),
            "failed_at_s": [round((t - self.first_ns) / 1e9, 3) for t in self.failed_at_ns],
            "seconds": round(seconds, 3),
            "messages_per_s": round(self.ok / seconds, 1) if seconds else 0.0,
        }
        out |= percentiles_us(ordered)
        return out


def _error_kind(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text[:160]}"


def run_threads(
    threads: int, count: int, max_s: float, send: Callable[[int], str | None]
) -> SendStats:
    """``threads`` threads calling ``send(i)`` one after the other until ``count`` calls in all
    or ``max_s``; ``send`` returns None when acknowledged OK, else the status it got."""
    counter = itertools.count()  # next() is atomic under the GIL
    barrier = threading.Barrier(threads + 1)
    per_thread = [SendStats() for _ in range(threads)]
    clock = time.perf_counter_ns
    deadline = [0]

    def work(stats: SendStats) -> None:
        barrier.wait()
        end = deadline[0]
        latencies = stats.latencies_ns
        while True:
            i = next(counter)
            t0 = clock()
            if i >= count or t0 >= end:
                break
            try:
                status = send(i)
            except Exception as exc:
                stats.failed(_error_kind(exc), False, clock())
                continue
            t1 = clock()
            latencies.append(t1 - t0)
            stats.last_ns = t1
            if status is None:
                stats.ok += 1
            else:
                stats.failed(status, True, t1)

    workers = [threading.Thread(target=work, args=(s,), daemon=True) for s in per_thread]
    for w in workers:
        w.start()
    total = SendStats()
    deadline[0] = clock() + int(max_s * 1e9)
    total.first_ns = clock()
    barrier.wait()
    for w in workers:
        w.join(max_s + 60.0)
    for s in per_thread:
        total.merge(s)
    return total


async def run_tasks(
    tasks: int, count: int, max_s: float, send: Callable[[int], Awaitable[str | None]]
) -> SendStats:
    """The asyncio twin of ``run_threads``: ``tasks`` tasks, each awaiting its send."""
    counter = itertools.count()
    clock = time.perf_counter_ns
    total = SendStats()
    deadline = clock() + int(max_s * 1e9)

    async def work(stats: SendStats) -> None:
        latencies = stats.latencies_ns
        while True:
            i = next(counter)
            t0 = clock()
            if i >= count or t0 >= deadline:
                break
            try:
                status = await send(i)
            except Exception as exc:
                stats.failed(_error_kind(exc), False, clock())
                continue
            t1 = clock()
            latencies.append(t1 - t0)
            stats.last_ns = t1
            if status is None:
                stats.ok += 1
            else:
                stats.failed(status, True, t1)

    per_task = [SendStats() for _ in range(tasks)]
    total.first_ns = clock()
    async with asyncio.timeout(max_s + 60.0):
        await asyncio.gather(*(work(s) for s in per_task))
    for s in per_task:
        total.merge(s)
    return total


@dataclass(slots=True)
class ReceiveClock:
    """Counts received messages (from any thread) and when the first and the last came."""

    expect: int
    count: int = 0
    bytes: int = 0
    started_ns: int = field(default_factory=time.perf_counter_ns)
    first_ns: int = 0
    last_ns: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests_ns: list[int] = field(default_factory=list)  # round trips of a reader's requests

    def request(self, ns: int) -> None:
        """One read request's round trip (pull-style readers call this per request)."""
        self.requests_ns.append(ns)

    def add(self, n: int, nbytes: int) -> None:
        now = time.perf_counter_ns()
        with self.lock:
            if not self.first_ns:
                self.first_ns = now
            self.count += n
            self.bytes += nbytes
            self.last_ns = now
            if self.count >= self.expect:
                self.done.set()

    def summary(self) -> dict[str, Any]:
        with self.lock:
            window = (self.last_ns - self.first_ns) / 1e9 if self.count > 1 else 0.0
            total = (self.last_ns - self.started_ns) / 1e9 if self.count else 0.0
            return {
                "expect": self.expect,
                "received": self.count,
                "bytes": self.bytes,
                "first_message_s": round((self.first_ns - self.started_ns) / 1e9, 3)
                if self.count
                else None,
                "seconds": round(window, 3),
                "seconds_from_start": round(total, 3),
                "messages_per_s": round(self.count / window, 1) if window else 0.0,
                "messages_per_s_from_start": round(self.count / total, 1) if total else 0.0,
                **self._request_summary(),
            }

    def _request_summary(self) -> dict[str, Any]:
        ordered = sorted(self.requests_ns)
        if not ordered:
            return {}
        return {
            "requests": len(ordered),
            "p50_us": round(_percentile(ordered, 50), 1),
            "p99_us": round(_percentile(ordered, 99), 1),
            "max_us": round(ordered[-1] / 1e3, 1),
        }
