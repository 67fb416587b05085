"""Benchmark servers in subprocesses: the child's serve loop and the parent's handle on it.

On a 2-core machine the server under test and the load generator must not share one
interpreter (and one GIL), so every server runs in its own process. The child binds
127.0.0.1 port 0, prints ``PORT <n>`` on stdout and serves until SIGTERM, SIGINT or the end
of its stdin; the last one means a parent that died without cleaning up cannot leave a
server behind. The parent stops its children by PID in a ``finally`` (``ServerProcess`` is a
context manager), escalating from SIGTERM to SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Self

import structlog

REPO_ROOT = Path(__file__).resolve().parents[2]

# A started server: its port and the coroutine function that shuts it down.
Started = tuple[int, Callable[[], Awaitable[None]]]


class _StdinWatch(asyncio.Protocol):
    """Sets ``stop`` when the parent's end of our stdin closes."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop.set()


async def _serve(start: Callable[[], Awaitable[Started]]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    port, shutdown = await start()
    with contextlib.suppress(OSError, ValueError, NotImplementedError):
        await loop.connect_read_pipe(lambda: _StdinWatch(stop), sys.stdin)
    print(f"PORT {port}", flush=True)
    try:
        await stop.wait()
    finally:
        await shutdown()


def serve_main(start: Callable[[], Awaitable[Started]]) -> None:
    """Child side: run ``start()`` on uvloop, announce the port, serve until told to stop."""
    import uvloop

    # Warnings only, and on stderr: stdout carries the port line, and nothing may log per
    # request in a benchmark.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(start))


class ServerProcess:
    """Parent side: one server subprocess, started by ``start()`` and stopped by PID.

    Args:
        name: label for errors.
        module: run as ``python -m module *args``.
        args: extra command-line arguments.
        cpu: pin the child to this CPU (``None``: leave it to the scheduler).
    """

    def __init__(
        self, name: str, module: str, args: list[str] | None = None, cpu: int | None = None
    ) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", module, *(args or [])]
        self.cpu = cpu
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def spawn(self) -> None:
        """Start the child without waiting for its port (``wait_ready`` does that)."""
        env = dict(os.environ)
        env.pop("PYTHONASYNCIODEBUG", None)  # a benchmark server never runs in debug mode
        self._proc = subprocess.Popen(  # argv is our own interpreter and module
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
        )
        if self.cpu is not None:
            self.pin(self.cpu)

    def _tids(self) -> list[int]:
        try:
            return [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return [self.pid]

    def pin(self, cpu: int) -> None:
        """Move every thread of the child to ``cpu`` (threads it starts later inherit it)."""
        for tid in self._tids():
            with contextlib.suppress(OSError, AttributeError):
                os.sched_setaffinity(tid, {cpu})

    def cpu_ns(self) -> int | None:
        """CPU time the child's threads have run, in ns (Linux schedstat); None elsewhere."""
        total = 0
        for tid in self._tids():
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:
                continue  # the thread ended between the listing and the read
            except (OSError, ValueError, IndexError):
                return None
        return total

    def wait_ready(self, timeout_s: float = 15.0) -> int:
        """Read ``PORT <n>`` from the child; raise if it exits or stays silent."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{self.name}: no port announced within {timeout_s:g} s")
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 256)
            if not chunk:
                raise RuntimeError(f"{self.name}: exited with {proc.wait()} before serving")
            line += chunk
        word, _, port = line.decode().strip().partition(" ")
        if word != "PORT" or not port.isdigit():
            raise RuntimeError(f"{self.name}: unexpected first line {line!r}")
        self.port = int(port)
        return self.port

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM by PID, then SIGKILL if it lingers; always reaps. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout_s)
        finally:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    def __enter__(self) -> Self:
        self.spawn()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
