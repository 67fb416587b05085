"""The broker benchmark's processes: servers under test (Aerolite, Redis, NATS) and drivers.

Every server is started here, bound to 127.0.0.1 (on a port of its own or a free one found
here), with its data in a directory the caller owns, its output in a log file there, and is
stopped by PID in a ``finally`` (SIGTERM, then SIGKILL). Peers are optional: ``find_peers``
says which ones can run (server binary on PATH, Python client importable) and why not.

Clients never run in the benchmark's own process: each measurement is one driver process
(``tests.bench.drivers.*``) started by ``run_driver``, with ``HOME`` in a temp dir (the C++
RocketMQ client writes ``~/logs/rocketmq-cpp``), pinned to a CPU of its own when asked.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.bench.report import REPO_ROOT, percentile

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_SAMPLES = 5  # distinct warning lines kept per log

# ------------------------------------------------------------------------------ helpers


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for servers that cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin_pid(pid: int, cpu: int | None) -> None:
    """Move every thread of ``pid`` to ``cpu`` (threads started later inherit it)."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, {cpu})


def _stop_pid(proc: subprocess.Popen[Any], timeout_s: float = STOP_TIMEOUT_S) -> int | None:
    """SIGTERM our own child, SIGKILL it if it lingers; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
    return proc.returncode


def tail(path: Path, chars: int = 3000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"


def _shape(line: str) -> str:
    """A log line with its numbers blanked, so that repeats of one message count together."""
    return re.sub(r"\d+", "N", line.strip())[:200]


def scan_log(
    path: Path, pattern: str, *, skip: str | None = None, strip: str | None = None
) -> dict[str, Any]:
    """Lines of ``path`` matching the regex ``pattern`` (less those matching ``skip``): how
    many, and the commonest shapes once ``strip`` (a timestamp, say) is removed."""
    shapes: Counter[str] = Counter()
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {"lines": 0, "kinds": {}}
    rx = re.compile(pattern)
    skip_rx = re.compile(skip) if skip else None
    strip_rx = re.compile(strip) if strip else None
    for line in text.splitlines():
        if rx.search(line) and not (skip_rx and skip_rx.search(line)):
            shapes[_shape(strip_rx.sub("", line) if strip_rx else line)] += 1
    return {"lines": sum(shapes.values()), "kinds": dict(shapes.most_common(LOG_SAMPLES))}


def scan_structlog(path: Path) -> dict[str, Any]:
    """Aerolite's JSON log lines at warning level or above, counted by level and event."""
    events: Counter[str] = Counter()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "events": {}}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip():
                events[f"(not JSON) {_shape(line)[:120]}"] += 1
            continue
        level = str(entry.get("level", "")).lower()
        if level in ("warning", "error", "critical", "exception"):
            events[f"{level}: {entry.get('event')}"] += 1
    return {"lines": sum(events.values()), "events": dict(events.most_common(10))}


def _wait_port(port: int, proc: subprocess.Popen[Any], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before serving:\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no listener on port {port} within {timeout_s:g} s:\n{tail(log)}")


# ------------------------------------------------------------------------------ servers


class Service:
    """A server process of ours: ``start()`` returns once it serves, ``stop()`` by PID."""

    label = "server"

    def __init__(self, work: Path, cpu: int | None = None) -> None:
        self.work = work
        self.cpu = cpu
        self.log = work / f"{type(self).__name__.lower()}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def _spawn(self, argv: list[str], *, stdout: int | None = None) -> subprocess.Popen[bytes]:
        self.work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop("PYTHONASYNCIODEBUG", None)  # a benchmark server never runs in debug mode
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(  # our own servers, fixed argument lists
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log if stdout is None else stdout,
                stderr=log,
                cwd=self.work,
                env=env,
            )
        return self.proc

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            self.exit_code = _stop_pid(proc)
            if proc.stdout is not None:
                with contextlib.suppress(OSError):
                    proc.stdout.close()

    def warnings(self) -> dict[str, Any]:
        """Warning and error lines of the server's log."""
        return {"lines": 0, "kinds": {}}

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        pin_pid(self.pid, self.cpu)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class AeroliteBroker(Service):
    """``python -m broker standalone`` on ports 0, store in ``work/store``."""

    label = "Aerolite"

    def __init__(
        self, work: Path, cpu: int | None = None, settings: dict[str, str] | None = None
    ) -> None:
        super().__init__(work, cpu)
        self.settings = settings or {}
        self.namesrv = ""
        self.address = ""

    def start(self) -> None:
        argv = [sys.executable, "-m", "broker", "standalone", "--store", str(self.work / "store")]
        argv += ["--namesrv-port", "0", "--listen-port", "0", "--set", "metricsPort=0"]
        argv += ["--set", "enableDashboard=false"]
        for key, value in self.settings.items():
            argv += ["--set", f"{key}={value}"]
        # From the repository root, like `make run`, so that the project is importable.
        self.work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop("PYTHONASYNCIODEBUG", None)
        with self.log.open("ab") as log:
            proc = subprocess.Popen(  # our own broker, fixed argument list
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=REPO_ROOT,
                env=env,
            )
        self.proc = proc
        line = _read_line(proc, self.log, READY_TIMEOUT_S)
        words = line.split()
        if not words or words[0] != "ready":
            raise RuntimeError(f"Aerolite: unexpected first line {line!r}:\n{tail(self.log)}")
        addrs = dict(w.split("=", 1) for w in words[1:])
        self.namesrv, self.address = addrs["namesrv"], addrs["broker"]
        assert proc.stdout is not None
        stdout = proc.stdout
        # Whatever else comes on stdout must not fill the pipe and block the broker.
        threading.Thread(target=stdout.read, daemon=True).start()

    def warnings(self) -> dict[str, Any]:
        return scan_structlog(self.log)


def _read_line(proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> str:
    """The first stdout line, read on a thread so that a silent process cannot hang us."""
    assert proc.stdout is not None
    stdout = proc.stdout
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not got or not got[0]:
        code = proc.poll()
        _stop_pid(proc)
        what = f"exited ({code})" if code is not None else f"silent for {timeout_s:g} s"
        raise RuntimeError(f"Aerolite {what} before its ready line:\n{tail(log)}")
    return got[0].decode(errors="replace").strip()


class RedisServer(Service):
    """``redis-server`` with an append-only file, fsync ``everysec`` or ``always``."""

    label = "Redis"

    def __init__(self, work: Path, cpu: int | None = None, fsync: str = "everysec") -> None:
        super().__init__(work, cpu)
        self.fsync = fsync
        self.port = 0

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH")
        for _attempt in range(3):
            self.port = free_port()
            proc = self._spawn(
                [
                    binary,
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--dir",
                    str(self.work),
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    self.fsync,
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "yes",
                    "--logfile",
                    "",
                ]
            )
            try:
                _wait_port(self.port, proc, self.log, READY_TIMEOUT_S)
            except RuntimeError:
                self.stop()  # most likely the port was taken between probe and bind
            else:
                return
        raise RuntimeError(f"redis-server did not start:\n{tail(self.log)}")

    def warnings(self) -> dict[str, Any]:
        # Redis logs at warning level ("#" after the timestamp) its start-up banner too, and
        # the host's vm.overcommit_memory advice, which concerns background saves (off here).
        return scan_log(
            self.log,
            r" # .*(?i:warning|error|fail|refused|timeout)",
            skip=r"overcommit",
            strip=r"^[^#]*# ",
        )


NATS_SYNC_ALWAYS = "sync_interval: always"


class NatsServer(Service):
    """``nats-server`` with JetStream on file storage; ``sync_always`` asks JetStream to fsync
    every write (``sync_interval: always``, nats-server 2.10 and later)."""

    label = "NATS"

    def __init__(self, work: Path, cpu: int | None = None, sync_always: bool = False) -> None:
        super().__init__(work, cpu)
        self.sync_always = sync_always
        self.port = 0

    def start(self) -> None:
        binary = shutil.which("nats-server")
        if binary is None:
            raise RuntimeError("nats-server is not on PATH")
        for _attempt in range(3):
            self.port = free_port()
            conf = self.work / "nats.conf"
            self.work.mkdir(parents=True, exist_ok=True)
            sync = f"  {NATS_SYNC_ALWAYS}\n" if self.sync_always else ""
            conf.write_text(
                f"listen: 127.0.0.1:{self.port}\n"
                f'jetstream {{\n  store_dir: "{self.work / "js"}"\n{sync}}}\n'
            )
            proc = self._spawn([binary, "-c", str(conf)])
            try:
                _wait_port(self.port, proc, self.log, READY_TIMEOUT_S)
            except RuntimeError as exc:
                self.stop()
                if "unknown field" in str(exc):
                    raise  # this nats-server does not know the option: no use retrying
            else:
                return
        raise RuntimeError(f"nats-server did not start:\n{tail(self.log)}")

    def warnings(self) -> dict[str, Any]:
        return scan_log(self.log, r"\[(WRN|ERR|FTL)\]", strip=r"^\[\d+\] \S+ \S+ ")


# ------------------------------------------------------------------------------ probe


class StallProbe:
    """The cheapest request a server answers (Aerolite and Apache RocketMQ: GET_MAX_OFFSET,
    on Aerolite a loop-lane admin request; Redis: PING; NATS: PING), one at a time every
    ``interval_s`` over a connection of its own, from a thread of the benchmark process,
    while a measurement runs. A probe that waits long means the server did not run for that
    long, whatever the client under test saw; the same probe on Redis and NATS tells the
    machine's hiccups from the server's.

    A context manager; ``summary()`` afterwards.
    """

    def __init__(self, server: Service, interval_s: float = 0.02) -> None:
        self.server = server
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (seconds since start, round trip s)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="stall-probe", daemon=True)
        self._buffer = b""

    # Per server: how to open the conversation and what one ping is.

    def _speaks_remoting(self) -> bool:
        # Aerolite's broker and Apache RocketMQ's (tests.bench.java_rocketmq) both answer
        # GET_MAX_OFFSET on their remoting address.
        return isinstance(getattr(self.server, "address", None), str)

    def _port(self) -> int:
        if self._speaks_remoting():
            return int(str(getattr(self.server, "address", "")).rpartition(":")[2])
        if isinstance(self.server, RedisServer | NatsServer):
            return self.server.port
        raise TypeError(f"no probe for {type(self.server).__name__}")

    def _read_line(self, sock: socket.socket) -> bytes:
        while b"\r\n" not in self._buffer:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\r\n")
        return line

    def _read_exactly(self, sock: socket.socket, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = sock.recv(max(4096, n - len(self._buffer)))
            if not chunk:
                raise ConnectionError("closed")
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def _hello(self, sock: socket.socket) -> None:
        if isinstance(self.server, NatsServer):
            self._read_line(sock)  # INFO {...}
            sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')

    def _ping(self, sock: socket.socket) -> None:
        server = self.server
        if self._speaks_remoting():
            from remoting import RemotingCommand, RequestCode

            request = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": "0"}
            )
            sock.sendall(request.to_bytes())
            length = int.from_bytes(self._read_exactly(sock, 4), "big")
            self._read_exactly(sock, length)
        elif isinstance(server, RedisServer):
            sock.sendall(b"PING\r\n")
            if self._read_line(sock) != b"+PONG":
                raise ConnectionError("unexpected answer to PING")
        else:
            sock.sendall(b"PING\r\n")
            while (line := self._read_line(sock)) != b"PONG":
                if line == b"PING":  # the server's own keep-alive
                    sock.sendall(b"PONG\r\n")

    def _main(self) -> None:
        clock = time.perf_counter
        t0 = clock()
        try:
            sock = socket.create_connection(("127.0.0.1", self._port()), timeout=10.0)
        except OSError:
            self.errors += 1
            return
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._hello(sock)
                while not self._stop.wait(self.interval_s):
                    sent = clock()
                    self._ping(sock)
                    self.samples.append((sent - t0, clock() - sent))
            except (OSError, ValueError):
                self.errors += 1

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(15.0)

    def summary(self) -> dict[str, Any]:
        rtts = sorted(rtt for _t, rtt in self.samples)
        if not rtts:
            return {"probes": 0, "errors": self.errors}
        worst_at, worst = max(self.samples, key=lambda s: s[1])
        return {
            "probes": len(rtts),
            "errors": self.errors,
            "p50_ms": round(percentile(rtts, 50) * 1e3, 2),
            "p99_ms": round(percentile(rtts, 99) * 1e3, 2),
            "max_ms": round(worst * 1e3, 1),
            "max_at_s": round(worst_at, 2),
            "over_50ms": sum(1 for r in rtts if r > 0.05),
            "over_100ms": sum(1 for r in rtts if r > 0.1),
        }


# ------------------------------------------------------------------------------- peers


@dataclass(frozen=True, slots=True)
class Peer:
    """A system to compare with, and whether it can run here."""

    key: str
    label: str
    available: bool
    reason: str = ""
    version: str = ""


def _version(argv: list[str]) -> str:
    """``x.y.z`` from a server's ``--version`` output ("" when it says none)."""
    try:
        out = subprocess.run(  # a server binary found on PATH, asked for its version
            argv, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"(\d+\.\d+\.\d+)", out.stdout + out.stderr)
    return found.group(1) if found else ""


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


INSTALL_HINT = "pip install -e '.[bench]' (make bench does)"


def find_peers() -> dict[str, Peer]:
    """Which peers can run: the server on PATH and its Python client importable."""
    out: dict[str, Peer] = {}
    for key, label, binary, module, clients in (
        ("redis", "Redis Streams", "redis-server", "redis", ("redis", "hiredis")),
        ("nats", "NATS JetStream", "nats-server", "nats", ("nats-py",)),
    ):
        path = shutil.which(binary)
        if path is None:
            out[key] = Peer(
                key, label, False, f"{binary} is not installed (apt-get install -y {binary})"
            )
        elif not _importable(module):
            out[key] = Peer(key, label, False, f"the Python client is missing: {INSTALL_HINT}")
        else:
            client = ", ".join(f"{d} {dist_version(d) or '?'}" for d in clients)
            version = f"{binary} {_version([path, '--version']) or '?'}, {client}"
            out[key] = Peer(key, label, True, version=version)
    return out


# ------------------------------------------------------------------------------ drivers


class DriverError(RuntimeError):
    """A driver process failed, timed out or printed no ``done`` line."""


@dataclass(slots=True)
class DriverResult:
    done: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    pid: int = 0
    seconds: float = 0.0


def run_driver(
    module: str,
    command: str,
    args: dict[str, Any],
    *,
    home: Path,
    timeout_s: float,
    python: str = sys.executable,
) -> DriverResult:
    """Run ``python -m module command`` with ``args`` on stdin; its ``done`` line.
    ``python``: another interpreter (a client that needs a venv of its own), which gets no
    PYTHONPATH of ours.

    Raises ``DriverError`` (with the driver's stderr tail) when it fails or overruns; a
    driver that overruns is killed by PID.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if python != sys.executable:
        env.pop("PYTHONPATH", None)
    env["HOME"] = str(home)  # the clients log under ~/logs (rocketmq-cpp, rocketmq_python)
    env.pop("NAMESRV_ADDR", None)
    env.pop("PYTHONASYNCIODEBUG", None)
    stderr_path = home / f"{module.rsplit('.', 1)[-1]}-{command}-{time.monotonic_ns()}.stderr"
    started = time.perf_counter()
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(  # our own driver modules, fixed argument lists
            [python, "-m", module, command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
            env=env,
            text=True,
        )
    try:
        out, _ = proc.communicate(json.dumps(args) + "\n", timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise DriverError(
            f"{module} {command}: still running after {timeout_s:g} s, killed:\n{tail(stderr_path)}"
        ) from None
    finally:
        if proc.poll() is None:
            _stop_pid(proc)
    events: list[dict[str, Any]] = []
    for line in out.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                events.append(event)
    done = [e for e in events if e.get("event") == "done"]
    if not done or "error" in done[-1] or proc.returncode != 0:
        why = done[-1].get("error") if done else f"exit {proc.returncode}, no done line"
        raise DriverError(f"{module} {command}: {why}\n{tail(stderr_path)}")
    result = {k: v for k, v in done[-1].items() if k != "event"}
    return DriverResult(result, events, proc.pid, time.perf_counter() - started)


# Lines the C++ client logs as errors or warnings in every run, against any broker: at a
# clean shutdown, before its first route lookup (heartbeat with no broker known yet, a route
# update before credentials are set) and when a new push consumer looks up its retry topic,
# which the broker only creates on that consumer's first heartbeat.
CPP_CLIENT_ROUTINE = (
    r"stopAllTcpTransportThread|sendheartbeat brokeradd is empty"
    r"|didn't get the session_credentials|The topic:\[%RETRY%[^\]]*\] not exist"
)


def cpp_client_log(home: Path, pid: int) -> dict[str, Any]:
    """Error and warning lines of the C++ RocketMQ client's log for driver ``pid``."""
    lines = 0
    kinds: Counter[str] = Counter()
    for log in sorted((home / "logs" / "rocketmq-cpp").glob(f"{pid}_rocketmq-cpp.log*")):
        scanned = scan_log(
            log,
            r"\((error|warning)\)",
            skip=CPP_CLIENT_ROUTINE,
            strip=r"^\[[^\]]*\]",  # the timestamp
        )
        lines += scanned["lines"]
        kinds.update(scanned["kinds"])
    return {"lines": lines, "kinds": dict(kinds.most_common(LOG_SAMPLES))}
