"""Benchmark driver for the official RocketMQ 5 Python client (PyPI ``rocketmq-python-client``
5.1.2, gRPC): ``.venv-rmq5/bin/python -m tests.bench.drivers.rmq5_driver COMMAND``.

Run by the interpreter of ``.venv-rmq5``, not ``.venv``: both have a package called
``rocketmq`` (the 5.x client here, the 4.x C++ client's binding there). This module imports
nothing of the project but the standard-library helpers of ``drivers.common`` (the JSON
channel, ``run_threads``, ``SendStats``, CPU times from /proc), so it runs in that venv
from the repository root. The client logs under ``~/logs/rocketmq_python``: the benchmark
runs it with ``HOME`` in a temp dir.

Commands (arguments as JSON on stdin; ``endpoint`` "127.0.0.1:PORT" of the gRPC server,
``topic``, ``body_bytes`` always; ``server_pids``, the processes whose CPU time is the
server's, summed; ``cpu``, pin the driver there):

- ``produce``: one ``Producer``; first ``warmup`` sends or ``warmup_s`` seconds in a window
  of ``window`` ``send_async`` calls (not timed: it warms a JVM's JIT as much as our
  caches), then the ``shape`` until ``count`` messages or ``max_s``: ``one``, ``send()`` one
  at a time; ``threads``, ``threads`` threads each calling ``send()`` one at a time;
  ``async``, ``window`` ``send_async()`` futures in flight, a new one as each completes.
  A new ``Message`` per send, as an application makes one.
- ``preload``: ``count`` messages in a window of ``window`` ``send_async`` calls (not a
  figure; the consume runs read them).
- ``consume``: a ``SimpleConsumer`` in ``group`` (created beforehand, reading from the
  first offset) calling ``receive(batch, invisible_s)`` and acknowledging every message
  with ``ack()`` before the next receive, until ``expect`` messages or ``max_s``. The rate
  runs from the start of the first receive that returned messages to the last ack.

Every loop is bounded by a count and a deadline; a watchdog leaves with an error line at
``max_s`` plus a margin whatever the client is waiting for.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any

from tests.bench.drivers.common import (
    MAX_ERROR_SAMPLES,
    SendStats,
    body_of,
    cpu_ns,
    emit,
    finish,
    foreign_cpu_s,
    percentiles_us,
    run_command,
    run_threads,
)

WATCHDOG_MARGIN_S = 45.0  # start-up, warm-up and shutdown beyond a command's max_s
DRAIN_S = 30.0  # for a window's last sends to complete
SHUTDOWN_S = 5.0  # for a client's shutdown (it notifies the server)


def _kind(exc: BaseException) -> str:
    """A failure's type and the start of its text (what the report groups failures by)."""
    code = getattr(exc, "code", None)
    if callable(code):  # grpc's AioRpcError: code() is the status
        try:
            code = code()
        except Exception:  # only a label
            code = None
    text = str(exc).replace("\n", " ").strip()
    head = f"{type(exc).__name__}" + (f" {code}" if code is not None else "")
    return f"{head}: {text[:140]}"


def _watchdog(seconds: float) -> None:
    def leave() -> None:
        time.sleep(seconds)
        finish({"error": f"still running after {seconds:g} s (watchdog)"}, 3)

    threading.Thread(target=leave, name="watchdog", daemon=True).start()


class ServerCpu:
    """CPU time of the server's processes (by PID, summed), of this driver, and of every
    other process on the machine (``foreign``) from creation to ``stop()``."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self._start = {pid: cpu_ns(pid) for pid in pids}
        self._client = time.process_time_ns()
        self._wall = time.perf_counter_ns()
        self._ours = {os.getpid(), os.getppid(), *pids}
        self._foreign = foreign_cpu_s(self._ours)

    def stop(self) -> dict[str, Any]:
        per_pid: dict[str, float] = {}
        for pid in self.pids:
            now, then = cpu_ns(pid), self._start[pid]
            if now is not None and then is not None:
                per_pid[str(pid)] = round((now - then) / 1e9, 3)
        out: dict[str, Any] = {
            "server_cpu_s": round(sum(per_pid.values()), 3)
            if len(per_pid) == len(self.pids) and self.pids
            else None,
            "server_cpu_s_by_pid": per_pid,
            "client_cpu_s": round((time.process_time_ns() - self._client) / 1e9, 3),
            "cpu_window_s": round((time.perf_counter_ns() - self._wall) / 1e9, 3),
        }
        foreign = foreign_cpu_s(self._ours)
        if foreign is not None and self._foreign is not None:
            out["foreign_cpu_s"] = round(max(0.0, foreign - self._foreign), 3)
        return out


def _per_message(cpu: dict[str, Any], messages: int) -> dict[str, Any]:
    """CPU µs per message of the server and of the client, from a ``ServerCpu.stop()``."""
    out = dict(cpu)
    for who in ("server", "client"):
        seconds = cpu.get(f"{who}_cpu_s")
        out[f"{who}_cpu_us_per_msg"] = (
            round(seconds / messages * 1e6, 1) if seconds is not None and messages else None
        )
    return out


def _pids(args: dict[str, Any]) -> list[int]:
    return [int(p) for p in args.get("server_pids") or []]


def _config(args: dict[str, Any]) -> Any:
    from rocketmq import ClientConfiguration, Credentials  # type: ignore[import-untyped]

    return ClientConfiguration(str(args["endpoint"]), Credentials())


def _shutdown(client: Any) -> None:
    """Shut a client down, giving up after SHUTDOWN_S (the driver leaves by os._exit)."""
    thread = threading.Thread(target=client.shutdown, name="shutdown", daemon=True)
    thread.start()
    thread.join(SHUTDOWN_S)


# ------------------------------------------------------------------------------ produce


def run_window(send_async: Any, window: int, count: int, max_s: float) -> SendStats:
    """``window`` ``send_async()`` futures in flight, a new one as each completes, until
    ``count`` sends or ``max_s``; then up to DRAIN_S for the last ones. Latency is from the
    call to the future's completion."""
    stats = SendStats()
    free = threading.Semaphore(window)
    lock = threading.Lock()
    clock = time.perf_counter_ns
    answered = [0]

    def done(fut: Future[Any], t0: int) -> None:
        t1 = clock()
        exc = fut.exception()
        with lock:
            answered[0] += 1
            if exc is None:
                stats.ok += 1
                stats.latencies_ns.append(t1 - t0)
                stats.last_ns = max(stats.last_ns, t1)
            else:
                stats.failed(_kind(exc), False, t1)
        free.release()

    stats.first_ns = clock()
    deadline = stats.first_ns + int(max_s * 1e9)
    sent = 0
    while sent < count:
        if not free.acquire(timeout=max(0.0, (deadline - clock()) / 1e9)):
            break
        t0 = clock()
        if t0 >= deadline:
            free.release()
            break
        try:
            fut = send_async()
        except Exception as exc:  # refused before it went out
            with lock:
                stats.failed(_kind(exc), False, t0)
            free.release()
            continue
        sent += 1
        fut.add_done_callback(functools.partial(done, t0=t0))
    drain_end = time.monotonic() + DRAIN_S
    for _ in range(window):  # every slot back: every send answered (or given up)
        free.acquire(timeout=max(0.0, drain_end - time.monotonic()))
    with lock:
        if sent > answered[0]:
            stats.errors[f"unanswered {DRAIN_S:g} s after the last send"] += sent - answered[0]
    return stats


def _producer(args: dict[str, Any]) -> tuple[Any, Any]:
    """A started Producer for ``topic`` and a function making one new Message."""
    from rocketmq import Message, Producer

    topic = str(args["topic"])
    body = body_of(int(args["body_bytes"]))
    producer = Producer(_config(args), [topic])
    producer.startup()

    def message() -> Any:
        msg = Message()
        msg.topic = topic
        msg.body = body
        return msg

    return producer, message


def produce(args: dict[str, Any]) -> dict[str, Any]:
    shape = str(args["shape"])
    count, max_s = int(args["count"]), float(args["max_s"])
    window, threads = int(args.get("window", 64)), int(args.get("threads", 1))
    _watchdog(max_s + float(args.get("warmup_s", 0.0)) + WATCHDOG_MARGIN_S)
    producer, message = _producer(args)

    def send_async() -> Future[Any]:
        fut: Future[Any] = producer.send_async(message())
        return fut

    def send(_i: int) -> str | None:
        producer.send(message())
        return None

    warm = run_window(send_async, window, int(args.get("warmup", 0)), float(args["warmup_s"]))
    emit("warm", ok=warm.ok, errors=sum(warm.errors.values()))
    cpu = ServerCpu(_pids(args))
    if shape == "async":
        stats = run_window(send_async, window, count, max_s)
    elif shape in ("one", "threads"):
        stats = run_threads(threads if shape == "threads" else 1, count, max_s, send)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    used = cpu.stop()
    _shutdown(producer)
    in_flight = window if shape == "async" else (threads if shape == "threads" else 1)
    return {
        "shape": shape,
        "in_flight": in_flight,
        "warmup_ok": warm.ok,
        "warmup_failed": sum(warm.errors.values()),
        **stats.summary(in_flight),
        **_per_message(used, stats.ok),
    }


def preload(args: dict[str, Any]) -> dict[str, Any]:
    count = int(args["count"])
    max_s = float(args.get("max_s", 120.0))
    _watchdog(max_s + WATCHDOG_MARGIN_S)
    producer, message = _producer(args)
    stats = run_window(
        lambda: producer.send_async(message()), int(args.get("window", 64)), count, max_s
    )
    _shutdown(producer)
    summary = stats.summary(int(args.get("window", 64)))
    failed = summary["errors"]
    return {
        "ok": stats.ok,
        "failed": failed,
        "error_kinds": summary["error_kinds"],
        "seconds": summary["seconds"],
    }


# ------------------------------------------------------------------------------ consume


class _Receipts:
    """What a consume run saw: messages, duplicates (a message id twice), failures."""

    def __init__(self) -> None:
        self.received = 0
        self.bytes = 0
        self.acked = 0
        self.duplicates = 0
        self.empty = 0
        self.seen: set[str] = set()
        self.receive_errors: Counter[str] = Counter()
        self.ack_errors: Counter[str] = Counter()
        self.start_errors: Counter[str] = Counter()  # before the first message came
        self.requests_ns: list[int] = []
        self.first_ns = 0
        self.last_ns = 0

    def summary(self) -> dict[str, Any]:
        seconds = (self.last_ns - self.first_ns) / 1e9 if self.last_ns > self.first_ns else 0.0
        return {
            "received": self.received,
            "bytes": self.bytes,
            "acked": self.acked,
            "duplicates": self.duplicates,
            "empty_receives": self.empty,
            "receive_errors": sum(self.receive_errors.values()),
            "ack_errors": sum(self.ack_errors.values()),
            "error_kinds": dict(
                (self.receive_errors + self.ack_errors).most_common(MAX_ERROR_SAMPLES)
            ),
            "start_errors": dict(self.start_errors.most_common(MAX_ERROR_SAMPLES)),
            "seconds": round(seconds, 3),
            "messages_per_s": round(self.received / seconds, 1) if seconds else 0.0,
            "receive_calls": len(self.requests_ns),
            # a receive call's round trip (its acks not included)
            **percentiles_us(sorted(self.requests_ns)),
        }


def _ack_all(consumer: Any, batch: list[Any], seen: _Receipts) -> None:
    for msg in batch:
        message_id = str(msg.message_id)
        if message_id in seen.seen:
            seen.duplicates += 1
        seen.seen.add(message_id)
        seen.bytes += len(msg.body or b"")
        try:
            consumer.ack(msg)
        except Exception as exc:
            seen.ack_errors[_kind(exc)] += 1
            continue
        seen.acked += 1


def consume(args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq import FilterExpression, SimpleConsumer

    expect, max_s = int(args["expect"]), float(args["max_s"])
    batch, invisible_s = int(args.get("batch", 32)), int(args.get("invisible_s", 30))
    _watchdog(max_s + WATCHDOG_MARGIN_S)
    consumer = SimpleConsumer(
        _config(args),
        str(args["group"]),
        {str(args["topic"]): FilterExpression()},
        await_duration=int(args.get("await_s", 5)),
    )
    consumer.startup()
    seen = _Receipts()
    clock = time.perf_counter_ns
    cpu = ServerCpu(_pids(args))
    deadline = clock() + int(max_s * 1e9)
    while seen.received < expect and clock() < deadline:
        t0 = clock()
        try:
            got = consumer.receive(batch, invisible_s)
        except Exception as exc:
            # A receive right after start-up may come before the server has the client's
            # settings (its Telemetry stream); such failures are counted apart.
            (seen.receive_errors if seen.received else seen.start_errors)[_kind(exc)] += 1
            time.sleep(0.05)
            continue
        seen.requests_ns.append(clock() - t0)
        if not got:
            seen.empty += 1
            continue
        if not seen.first_ns:
            seen.first_ns = t0
        seen.received += len(got)
        _ack_all(consumer, got, seen)
        seen.last_ns = clock()
    used = cpu.stop()
    _shutdown(consumer)
    return {"expect": expect, **seen.summary(), **_per_message(used, seen.received)}


def main() -> None:
    run_command({"produce": produce, "preload": preload, "consume": consume})


if __name__ == "__main__":
    main()
