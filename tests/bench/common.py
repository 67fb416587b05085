"""Helpers the broker, SDK and remoting benchmarks share while they measure.

CPU pinning of the running process, progress lines on stderr, and running one measurement so
that its failure becomes a row and a note instead of ending the benchmark. Report-only helpers
(cell formatting, the busy-machine note) live in ``tests.bench.report``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

from remoting import ClientConfig, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from tests.bench.peers import (
    DriverResult,
    NatsServer,
    RedisServer,
    Service,
    StallProbe,
    run_driver,
)
from tests.bench.processes import ServerProcess
from tests.bench.report import REPO_ROOT

T = TypeVar("T")


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Pin this process to ``cpu`` for the duration (no-op for ``None``)."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def can_pin(*cpus: int) -> bool:
    """Whether this process may run on every one of ``cpus`` (so pinning to them works)."""
    return hasattr(os, "sched_getaffinity") and set(cpus) <= os.sched_getaffinity(0)


def bench_work_dir(prefix: str) -> Path:
    """A new temporary directory under ``bench-results/`` (the caller removes it)."""
    base = REPO_ROOT / "bench-results"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def parse_profile_args(parser: argparse.ArgumentParser, only: str) -> argparse.Namespace:
    """Parse a bench module's own command line, which only has a ``--profile`` mode: logs at
    warning level, and an error naming ``python -m tests.bench --only <only>`` without it."""
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    if not args.profile:
        parser.error(
            f"nothing to do: the benchmark runs from `python -m tests.bench --only {only}`"
        )
    return args


def results_head(
    name: str,
    *,
    quick: bool,
    machine: dict[str, Any],
    config: dict[str, Any],
    peers: dict[str, Any],
    notes: list[str],
    **clients: Any,
) -> dict[str, Any]:
    """The start of a client-server bench's results: what ran, where, with which settings
    and peers, then ``clients`` (who drove each system), the systems (filled in as they run)
    and the ``notes`` list the run appends to."""
    return {
        "benchmark": name,
        "quick": quick,
        "machine": machine,
        "config": config,
        "peers": {k: asdict(p) for k, p in peers.items()},
        **clients,
        "systems": {},
        "notes": notes,
    }


_STARTED = time.monotonic()


def progress(text: str) -> None:
    """One indented progress line on stderr, so stdout stays the report; it starts with the
    minutes and seconds since the benchmarks began, so a long run shows where time goes."""
    elapsed = int(time.monotonic() - _STARTED)
    print(f"  [{elapsed // 60:02d}:{elapsed % 60:02d}] {text}", file=sys.stderr, flush=True)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, or its type name when it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def attempt(label: str, fn: Callable[[], dict[str, Any]], notes: list[str]) -> dict[str, Any]:
    """Run one measurement; a failure becomes ``{"error": ...}`` and a note, not a crash."""
    try:
        return fn()
    except Exception as exc:  # one measurement that fails is reported, the rest go on
        notes.append(f"{label}: {first_line(exc)}")
        print(f"  {label}: FAILED: {exc}", file=sys.stderr, flush=True)
        return {"error": first_line(exc)}


def row_rate(row: dict[str, Any] | None) -> float | None:
    """A driver row's messages per second, or ``None`` when it failed, was skipped or sent
    nothing (so a ratio against it is left out rather than shown as 0)."""
    if not row or "error" in row or "skipped" in row:
        return None
    value = row.get("messages_per_s")
    return float(value) if isinstance(value, int | float) and value > 0 else None


NATS_NO_SYNC = (
    "this nats-server has no `sync_interval: always` (JetStream fsyncs every write only from "
    "nats-server 2.10 on)"
)


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """A peer system (``key`` "redis" or "nats") and the bench driver module that drives it."""

    key: str
    module: str

    def server(self, work: Path, cpu: int | None, sync: bool = False) -> Service:
        """The peer's server; ``sync`` asks it to flush every write before answering."""
        if self.key == "redis":
            return RedisServer(work, cpu, "always" if sync else "everysec")
        return NatsServer(work, cpu, sync_always=sync)

    def where(self, server: Service, name: str) -> dict[str, Any]:
        """Where a driver sends or reads the run called ``name``: a Redis stream, or a
        JetStream stream (upper case, as NATS names them) with its subject."""
        port = server.port if isinstance(server, RedisServer | NatsServer) else 0
        if self.key == "redis":
            return {"port": port, "stream": name}
        return {"port": port, "stream": name.upper(), "subject": name.lower()}


def send_failures(row: dict[str, Any]) -> int:
    """Sends of a driver row that raised or came back not OK."""
    return int(row.get("errors") or 0) + int(row.get("not_ok") or 0)


def server_log_lines(label: str, system: dict[str, Any]) -> list[str]:
    """The report line for a server's warning/error log lines, if it wrote any."""
    log = system.get("log") or {}
    if not log.get("lines"):
        return []
    kinds = log.get("events") or log.get("kinds") or {}
    top = "; ".join(f"{n} x {k[:120]}" for k, n in kinds.items())
    return [f"{label}: server log, {log['lines']} warning/error lines: {top}"]


def against_echo_server(
    drive: Callable[[int], Coroutine[Any, Any, T]], server_cpu: int | None, client_cpu: int | None
) -> T:
    """Start the raw uvloop echo server in a process of its own (on ``server_cpu``) and run
    ``drive(port)`` here on a uvloop loop, pinned to ``client_cpu``."""
    import uvloop

    with ServerProcess("raw uvloop echo", "tests.bench.echo_server", cpu=server_cpu) as server:
        port = server.wait_ready()
        with pinned(client_cpu), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(drive(port))


def broker_stopped(out: dict[str, Any], broker: Service, tag: str, notes: list[str]) -> None:
    """Record a stopped broker's log warnings and exit code in ``out``; an exit other than a
    clean one on SIGTERM also becomes a note."""
    out["log"] = broker.warnings()
    out["exit_code"] = broker.exit_code
    if broker.exit_code not in (0, None):
        notes.append(f"{tag}: the broker exited with {broker.exit_code} on SIGTERM")


class DriverRun:
    """Runs bench drivers against one server: the arguments every driver takes, and a
    ``StallProbe`` on the server for the length of each run."""

    def __init__(
        self, body_bytes: int, home: Path, server: Service, client_cpu: int | None
    ) -> None:
        self.body_bytes = body_bytes
        self.home = home
        self.server = server
        self.client_cpu = client_cpu

    def args(self, **extra: Any) -> dict[str, Any]:
        return {
            "body_bytes": self.body_bytes,
            "server_pid": self.server.pid,
            "cpu": self.client_cpu,
            **extra,
        }

    def probed(
        self, module: str, command: str, timeout_s: float, **extra: Any
    ) -> tuple[DriverResult, dict[str, Any]]:
        """Run a driver (allowing a minute over ``timeout_s`` to start and stop) and return
        its result with the stall probe's summary."""
        with StallProbe(self.server) as probe:
            result = run_driver(
                module, command, self.args(**extra), home=self.home, timeout_s=timeout_s + 60.0
            )
        return result, probe.summary()


async def _stored(address: str, topic: str, queues: int) -> int:
    """The sum of the topic's max queue offsets on the broker at ``address``: how many
    messages its queues hold (GET_MAX_OFFSET, which Aerolite and Apache RocketMQ answer)."""
    client = RemotingClient(ClientConfig(request_timeout_s=10.0))
    await client.start()
    try:
        total = 0
        for queue in range(queues):
            response = await client.invoke(
                address,
                RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue)}
                ),
            )
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"GET_MAX_OFFSET {topic}/{queue}: {response.code}")
            total += int(response.ext_fields.get("offset", "0"))
        return total
    finally:
        await client.shutdown()


def stored_settled(address: str, topic: str, queues: int, want: int) -> int:
    """How many messages ``topic`` holds once dispatch has caught up (it runs behind the
    commit log): counted until it reaches ``want`` or stops moving, for at most 5 s."""
    deadline = time.monotonic() + 5.0
    last = -1
    while True:
        now = asyncio.run(_stored(address, topic, queues))
        if now >= want or now == last or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(0.2)
