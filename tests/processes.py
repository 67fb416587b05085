"""Programs the tests run as processes of their own: brokers and client drivers.

- ``launch_standalone(store, settings, log)``: Aerolite's ``python -m broker standalone`` on
  ports 0, returned once it printed its ready line; the one launcher behind both views of it:
- ``start_aerolite(store, settings)``: that process as a ``Broker`` (``stop()`` is SIGTERM and
  must exit 0, ``kill()`` is ``kill -9``; the store survives both), for tests/e2e and
  tests/interop;
- ``start_standalone(root, settings)``: that process as a ``StandaloneBroker`` (store and log
  under ``root``, broker defaults but for the metrics port, exit code left to the caller), for
  tests whose clients live in other processes or threads (Spark's workers, the blocking
  facade, the README's examples, disk-full and shutdown tests);
- ``JavaRocketMQ``: Apache RocketMQ's ``NamesrvStartup`` and ``BrokerStartup`` from a
  directory of jars, each store with a name server of its own, as the same ``Broker``;
- ``DriverRun``: a client driver process whose JSON lines are collected on a thread.

``read_ready_line``, ``stop_pid`` and ``tail`` serve tests/e2e/compose.py too. Every
process is ours, started with fixed arguments, waited for with a deadline and stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.bench.java_rocketmq import rocketmq_jvm_options

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
DRIVER_TIMEOUT_S = 90.0
LOG_TAIL_CHARS = 6000

# The C++ client under PyPI rocketmq 0.4.4 (rocketmq-client-cpp 1.2.x) sometimes aborts inside
# shutdown(): a boost::thread_interrupted escapes one of the threads it interrupts and
# std::terminate ends the process (apache/rocketmq-client-cpp#202 and #335 report the same
# shutdown crashes). It comes after the client's work is done and reported, and no broker
# answer can cause it, so a driver that said "stopping" and then died of exactly this is judged
# by what it reported; any other death still fails the test.
CPP_SHUTDOWN_ABORT = "terminate called after throwing an instance of 'boost::thread_interrupted'"
_log = logging.getLogger(__name__)

# Small commit-log segments (512 KiB) so that the tests' messages roll over several files; the
# largest message must still fit in one (Aerolite checks), and the tests' are under 64 KiB.
DEFAULT_SETTINGS = {
    "mappedFileSizeCommitLog": str(512 << 10),
    "maxMessageSize": str(256 << 10),
    "autoCreateTopicEnable": "true",
    "metricsPort": "0",  # a free port: parallel brokers must not fight over 5557
    "grpcListenPort": "0",  # nor over 8081
    "enableDashboard": "false",  # nor over 8080 (tests/dashboard start the console themselves)
}


def unique(prefix: str) -> str:
    """A topic or group name no other test (or earlier run against the same broker) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"


def build_when_changed(
    command: list[str],
    *,
    cwd: Path,
    fingerprint: str,
    stamp: Path,
    outputs: tuple[Path, ...],
    timeout_s: float,
) -> None:
    """Run the build ``command`` in ``cwd`` unless ``stamp`` holds ``fingerprint`` (a hash of
    what goes in) and every one of ``outputs`` exists; the stamp is written after a build
    that made them. A build that fails or overruns fails the test with its output's tail."""
    built = all(p.exists() for p in outputs) and stamp.is_file()
    if built and stamp.read_text().strip() == fingerprint:
        return
    stamp.unlink(missing_ok=True)
    what = f"{Path(command[0]).name} {' '.join(command[1:])} in {cwd}"
    try:
        done = subprocess.run(  # a build tool, fixed arguments
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} took more than {timeout_s:g} s")
    if done.returncode != 0 or not all(p.exists() for p in outputs):
        output = (done.stdout + done.stderr)[-6000:]
        pytest.fail(f"{what} failed ({done.returncode}):\n{output}")
    stamp.write_text(fingerprint + "\n")


def stop_pid(proc: subprocess.Popen[Any], timeout_s: float = STOP_TIMEOUT_S) -> int | None:
    """SIGTERM our own child, then SIGKILL it after ``timeout_s``; its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)
    return proc.returncode


# ---------------------------------------------------------------------------------- brokers


@dataclass
class Broker:
    """A running broker and its name server: Aerolite standalone, or RocketMQ's BrokerStartup
    (whose name server is started apart, once per store, and outlives its restarts).

    ``stop()`` is a clean stop (SIGTERM, which must exit 0 for Aerolite); ``kill()`` is
    ``kill -9``. ``store`` survives both, so a new ``Broker`` can be started on it.
    """

    namesrv: str
    address: str
    store: Path
    procs: list[subprocess.Popen[str]]
    logs: list[Path]
    kind: str

    def log_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{tail(p)}" for p in self.logs)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        codes = [stop_pid(p) for p in reversed(self.procs)]
        if self.kind == "aerolite":
            assert codes == [0], f"SIGTERM should exit 0, got {codes}:\n{self.log_tail()}"

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)


def read_ready_line(proc: subprocess.Popen[str], log: Path, timeout_s: float) -> str:
    """The first stdout line, read on a thread so that a silent process cannot hang us. The
    thread then drains stdout until EOF (a full pipe would block the broker) and closes it."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        with stdout:
            lines.put(stdout.readline())
            stdout.read()

    threading.Thread(target=read, daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        stop_pid(proc)
        pytest.fail(f"no ready line within {timeout_s:g} s:\n{tail(log)}")
    if not line:
        stop_pid(proc)
        pytest.fail(f"exited ({proc.poll()}) before its ready line:\n{tail(log)}")
    return line.strip()


def launch_standalone(
    store: Path, settings: Mapping[str, str], log: Path
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``python -m broker standalone --store STORE`` on ports 0 with ``settings`` (each a
    ``--set``), its stderr to ``log``: the process and the ``key=value`` fields of its ready
    line (``namesrv``, ``broker``, ``metrics`` when served), once it printed it."""
    args = [sys.executable, "-m", "broker", "standalone", "--store", str(store)]
    args += ["--namesrv-port", "0", "--listen-port", "0"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    with log.open("w") as stderr:
        proc = subprocess.Popen(  # our own broker, fixed arguments
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    line = read_ready_line(proc, log, READY_TIMEOUT_S)
    word, *fields = line.split()
    assert word == "ready", f"unexpected first line {line!r}"
    return proc, dict(f.split("=", 1) for f in fields)


def start_aerolite(store: Path, settings: dict[str, str] | None = None) -> Broker:
    """``launch_standalone`` on ``store`` with ``DEFAULT_SETTINGS`` under ``settings``."""
    store.mkdir(parents=True, exist_ok=True)
    log = store.parent / f"{store.name}-aerolite-{time.monotonic_ns()}.log"
    proc, addrs = launch_standalone(store, {**DEFAULT_SETTINGS, **(settings or {})}, log)
    return Broker(addrs["namesrv"], addrs["broker"], store, [proc], [log], "aerolite")


@dataclass
class StandaloneBroker:
    """One ``python -m broker standalone`` whose store is ``root/store`` and whose stderr is
    ``root/broker.log``. ``stop()`` is SIGTERM (SIGKILL after a deadline) and leaves the exit
    code in ``proc.returncode`` for the test to check."""

    proc: subprocess.Popen[str]
    namesrv: str
    broker: str
    store: Path
    metrics: str | None = None  # host:port of the Prometheus endpoint, if served
    grpc: str | None = None  # host:port of RocketMQ 5 clients' endpoint, if served
    dashboard: str | None = None  # the web console's URL, if served

    def stop(self) -> None:
        stop_pid(self.proc)


def start_standalone(root: Path, settings: dict[str, str] | None = None) -> StandaloneBroker:
    """``launch_standalone`` on ``root/store`` with the broker's defaults, but for the metrics
    port (a free one), the web console (none, unless ``settings`` ask for it) and
    ``settings`` (broker config keys)."""
    root.mkdir(parents=True, exist_ok=True)
    store = root / "store"
    merged = {
        "metricsPort": "0",
        "grpcListenPort": "0",
        "enableDashboard": "false",
        **(settings or {}),
    }
    proc, fields = launch_standalone(store, merged, root / "broker.log")
    return StandaloneBroker(
        proc,
        fields["namesrv"],
        fields["broker"],
        store,
        fields.get("metrics"),
        fields.get("grpc"),
        fields.get("dashboard"),
    )


def free_port(offsets: tuple[int, ...] = (0,)) -> int:
    """A port P such that P + each offset is free on 127.0.0.1 right now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + min(offsets) < 1024 or port + max(offsets) > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for off in offsets:
                    probe = stack.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port + off))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port")


@dataclass
class JavaRocketMQ:
    """Apache RocketMQ from a directory of jars (the ``java-lib:DIR`` target): brokers started
    and stopped on a store dir, each store with a name server of its own. All brokers are
    ``broker-a``, and TBW102 is on every broker, so a shared name server would route one
    test's sends to another test's broker."""

    lib: Path
    namesrvs: dict[Path, tuple[subprocess.Popen[str], str]] = field(default_factory=dict)
    broker_ports: dict[Path, int] = field(default_factory=dict)

    def _java(self, main: str, *args: str, home: Path, log: Path) -> subprocess.Popen[str]:
        java = shutil.which("java")
        if java is None:
            pytest.skip("java-lib target needs java on PATH")
        (home / "conf").mkdir(parents=True, exist_ok=True)
        for name in ("logback_namesrv.xml", "logback_broker.xml"):
            # RocketMQ insists on these files; send its logs next to the store.
            (home / "conf" / name).write_text(
                "<configuration><appender name='F' class='ch.qos.logback.core.FileAppender'>"
                f"<file>{home}/{name}.log</file><encoder><pattern>%d %-5p [%t] %c{{0}} - %m%n"
                "</pattern></encoder></appender><root level='INFO'><appender-ref ref='F'/>"
                "</root></configuration>"
            )
        with log.open("w") as out:
            return subprocess.Popen(  # RocketMQ's own entry points, fixed arguments
                [
                    java,
                    "-Xms128m",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    # RocketMQ 4.x unmaps segments through java.nio internals: without the
                    # opens its run scripts pass, a clean shutdown throws.
                    *rocketmq_jvm_options(home),
                    "-cp",
                    f"{self.lib}/*",
                    main,
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def _boot(
        self, main: str, values: Mapping[str, str], *, conf: Path, home: Path, log: Path
    ) -> subprocess.Popen[str]:
        """Write ``values`` to ``conf``, start ``main -c conf`` and wait for its boot line."""
        conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        proc = self._java(main, "-c", str(conf), home=home, log=log)
        self._wait_for(proc, log, "boot success")
        return proc

    def _wait_for(self, proc: subprocess.Popen[str], log: Path, marker: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if marker in tail(log, 100_000):
                return
            if proc.poll() is not None:
                pytest.fail(f"java exited ({proc.returncode}):\n{tail(log)}")
            time.sleep(0.2)
        stop_pid(proc)
        pytest.fail(f"java printed no {marker!r}:\n{tail(log)}")

    def _namesrv_for(self, store: Path) -> str:
        """The name server of ``store``'s broker, started on first use, kept over restarts."""
        if store in self.namesrvs:
            return self.namesrvs[store][1]
        port = free_port()
        proc = self._boot(
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            {"listenPort": str(port)},
            conf=store.parent / f"{store.name}-namesrv.conf",
            home=store.parent / f"{store.name}-namesrv-home",
            log=store.parent / f"{store.name}-java-namesrv.log",
        )
        self.namesrvs[store] = (proc, f"127.0.0.1:{port}")
        return self.namesrvs[store][1]

    def start_broker(self, store: Path, settings: dict[str, str] | None = None) -> Broker:
        store.mkdir(parents=True, exist_ok=True)
        namesrv = self._namesrv_for(store)
        # Same port on every restart of one store: the name server keeps the old route for a
        # while. The broker also binds port-2 (VIP channel) and port+1 (HA).
        port = self.broker_ports.get(store) or free_port((-2, 0, 1))
        self.broker_ports[store] = port
        conf_values = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "namesrvAddr": namesrv,
            "brokerIP1": "127.0.0.1",
            "listenPort": str(port),
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeConsumeQueue": "60000",
            "diskMaxUsedSpaceRatio": "98",
            **DEFAULT_SETTINGS,
            **(settings or {}),
        }
        log = store.parent / f"{store.name}-java-broker-{time.monotonic_ns()}.log"
        proc = self._boot(
            "org.apache.rocketmq.broker.BrokerStartup",
            conf_values,
            conf=store.parent / f"{store.name}-broker.conf",
            home=store.parent / f"{store.name}-home",
            log=log,
        )
        # Java's SIGTERM exit code is 143, so Broker.stop() checks codes only for Aerolite.
        return Broker(namesrv, f"127.0.0.1:{port}", store, [proc], [log], "java")

    def release(self, store: Path) -> None:
        """Stop the name server of ``store`` (after its broker)."""
        if store in self.namesrvs:
            stop_pid(self.namesrvs.pop(store)[0])

    def shutdown(self) -> None:
        for store in list(self.namesrvs):
            self.release(store)


# ---------------------------------------------------------------------------------- drivers


@dataclass
class DriverRun:
    """One client driver process: its JSON lines, collected on a thread as they come."""

    name: str
    proc: subprocess.Popen[str]
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _eof: bool = False

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            self._read_lines(self.proc.stdout)
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_lines(self, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            with self._cond:
                if isinstance(event, dict):
                    self.events.append(event)
                else:
                    self.raw.append(line.rstrip("\n"))
                self._cond.notify_all()

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    def wait_for(self, predicate: Callable[[DriverRun], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(self)`` holds (re-checked on every new line) or EOF."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return predicate(self)
                self._cond.wait(timeout=min(left, 0.5))
        return True

    def wait_started(self, timeout_s: float = 60.0) -> None:
        if not self.wait_for(lambda r: bool(r.of("started") or r.of("done")), timeout_s):
            pytest.fail(f"{self.name} did not start within {timeout_s:g} s\n{self.describe()}")
        if not self.of("started"):
            pytest.fail(f"{self.name} ended before it started\n{self.describe()}")

    def finish(self, timeout_s: float = DRIVER_TIMEOUT_S) -> dict[str, Any]:
        """Wait for the driver to exit by itself; its ``done`` line (fails without one)."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.name} still running after {timeout_s:g} s\n{self.describe()}")
        self._close_stdin()
        self._reader.join(timeout=10)
        done = self.of("done") or self._stopped_before_a_shutdown_abort()
        if not done or "error" in done[-1]:
            pytest.fail(f"{self.name} failed (exit {self.proc.returncode})\n{self.describe()}")
        return done[-1]

    def _stopped_before_a_shutdown_abort(self) -> list[dict[str, Any]]:
        """The ``stopping`` result as the ``done`` line, when the C++ client's shutdown
        aborted (``CPP_SHUTDOWN_ABORT``) after it; otherwise nothing."""
        stopping = self.of("stopping")
        if not stopping or self.proc.returncode != -signal.SIGABRT:
            return []
        if CPP_SHUTDOWN_ABORT not in tail(self.stderr_path, 3000):
            return []
        _log.warning(
            "%s: the C++ client aborted in shutdown() after its work\n%s",
            self.name,
            self.describe(),
        )
        return [{**stopping[-1], "event": "done", "shutdown_aborted": True}]

    def stop(self, timeout_s: float = DRIVER_TIMEOUT_S) -> dict[str, Any]:
        """Ask a consumer to stop (a ``stop`` line), then ``finish``."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
        return self.finish(timeout_s)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self._close_stdin()
        self._reader.join(timeout=10)

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def describe(self) -> str:
        events = [json.dumps(e)[:300] for e in self.events if e.get("event") != "msg"]
        return (
            f"--- {self.name} (pid {self.proc.pid}, exit {self.proc.poll()}): "
            f"{len(self.of('msg'))} msg lines; other lines:\n"
            + "\n".join(events[-20:] + self.raw[-20:])
            + f"\n--- {self.name} stderr tail:\n{tail(self.stderr_path, 3000)}"
        )
