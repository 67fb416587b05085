"""A compose file's cluster as real local processes, for the cluster tests.

``ComposeCluster`` runs ``aerolite cluster up -f FILE`` (the launcher users run) on a loopback
subnet of its own, waits for its ``ready`` line and reads ``cluster.json`` for each service's
pid and address. A test may kill one service by that pid (``kill9``), stop it cleanly
(``stop_service``) or start it again (``restart``: the same command the launcher planned,
from ``broker.cluster.plan``). Everything the test started is stopped by PID at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.cluster import plan
from tests.processes import read_ready_line, stop_pid, tail

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker" / "docker-compose.yml"
# Small segments so that replication crosses file boundaries; fast enough for a test.
TEST_SETTINGS = (
    "mappedFileSizeCommitLog=262144",
    "maxMessageSize=65536",
)


def random_subnet() -> str:
    """A loopback /24 no other run is likely to use (127.0.0.x is left to everything else)."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.0"


class ComposeCluster:
    def __init__(
        self, compose_file: Path, data: Path, settings: tuple[str, ...] = TEST_SETTINGS
    ) -> None:
        self.compose_file = compose_file
        self.data = data
        self.settings = settings
        self.subnet = random_subnet()
        self.launcher: subprocess.Popen[str] | None = None
        self.state: dict[str, Any] = {}
        self.extra: dict[str, subprocess.Popen[str]] = {}  # services restarted by the test
        self.launcher_log = data / "launcher.log"
        self.output: list[str] = []  # the launcher's stdout lines so far

    def start(self, timeout_s: float = 90.0) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "broker",
            "cluster",
            "up",
            "-f",
            str(self.compose_file),
            "--data",
            str(self.data),
            "--subnet",
            self.subnet,
        ]
        for item in self.settings:
            argv += ["--set", item]
        env = dict(os.environ)
        env.pop("NAMESRV_ADDR", None)
        with self.launcher_log.open("w") as log:
            self.launcher = subprocess.Popen(  # our own launcher, fixed arguments
                argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env
            )
        try:
            self._wait_ready(self.launcher, timeout_s)
        except BaseException:
            self.close()
            raise
        self.state = json.loads((self.data / "cluster.json").read_text())

    def _wait_ready(self, proc: subprocess.Popen[str], timeout_s: float) -> None:
        """The launcher prints a line per service, then ``ready …``; read them on a thread
        (which then drains stdout until EOF) so that a silent launcher cannot hang us."""
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout

        def read() -> None:
            with stdout:
                for line in stdout:
                    self.output.append(line)
                    lines.put(line)
            lines.put("")

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the cluster was not ready within {timeout_s:g} s:\n{self.logs()}")
            if not line:
                pytest.fail(f"the launcher exited ({proc.poll()}) before ready:\n{self.logs()}")
            if line.startswith("ready "):
                return

    @property
    def namesrv(self) -> str:
        return str(self.state["namesrv"])

    def address(self, service: str) -> str:
        return str(self.state["services"][service]["address"])

    def pid(self, service: str) -> int:
        if service in self.extra:
            return self.extra[service].pid
        return int(self.state["services"][service]["pid"])

    def alive(self, service: str) -> bool:
        try:
            os.kill(self.pid(service), 0)
        except ProcessLookupError:
            return False
        return True

    def kill9(self, service: str) -> None:
        """SIGKILL one service (a process this test started, by its PID)."""
        os.kill(self.pid(service), signal.SIGKILL)
        self._wait_gone(service)

    def stop_service(self, service: str, timeout_s: float = 30.0) -> None:
        os.kill(self.pid(service), signal.SIGTERM)
        self._wait_gone(service, timeout_s)

    def _wait_gone(self, service: str, timeout_s: float = 30.0) -> None:
        proc = self.extra.get(service)
        if proc is not None:
            proc.wait(timeout=timeout_s)
            return
        deadline = time.monotonic() + timeout_s
        while self.alive(service):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{service} still running after {timeout_s} s")
            time.sleep(0.02)  # the launcher reaps it

    def restart(self, service: str, timeout_s: float = 60.0) -> None:
        """Start ``service`` again, as the launcher would, on the same store."""
        plans = plan(
            self.compose_file,
            data_dir=self.data,
            subnet=self.subnet,
            broker_overrides=self.settings,
        )
        p = next(p for p in plans if p.name == service)
        env = {**os.environ, "HOME": str(p.home)}
        env.pop("NAMESRV_ADDR", None)
        log_path = self.data / "logs" / f"{service}.restart.log"
        with log_path.open("a") as log:
            proc = subprocess.Popen(  # our own broker, fixed arguments
                [sys.executable, "-m", "broker", *p.argv],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
            )
        self.extra[service] = proc
        read_ready_line(proc, log_path, timeout_s)

    def logs(self) -> str:
        parts = [f"--- launcher\n{tail(self.launcher_log, 2000)}"]
        parts += [
            f"--- {path.name}\n{tail(path, 2000)}"
            for path in sorted((self.data / "logs").glob("*.log"))
        ]
        return "\n".join(parts)

    def close(self) -> None:
        for proc in self.extra.values():
            stop_pid(proc)
        if self.launcher is not None:
            stop_pid(self.launcher, timeout_s=60)
        # Anything the launcher could not stop (it was killed itself): by PID, ours only.
        for info in self.state.get("services", {}).values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(info["pid"]), signal.SIGKILL)
