"""Fixtures for the end-to-end tests: a broker to talk to, and third-party clients as processes.

The broker is Aerolite's ``python -m broker standalone`` on ports 0 with its store in a temp
dir, one per session (``cluster``) plus private ones for the restart and crash tests
(``launch``). Its stderr goes to a file whose tail is attached to a failing test's report.

``AEROLITE_E2E_TARGET`` points the same tests at Apache RocketMQ instead, which is how they were
checked (a known-good comparison when Aerolite fails one):

- ``java:HOST:PORT``: an already running RocketMQ name server (and its broker). Tests that must
  restart or kill the broker are skipped.
- ``java-lib:DIR``: this file starts RocketMQ's ``NamesrvStartup`` and ``BrokerStartup`` from
  the jars in ``DIR`` (``mvn dependency:copy-dependencies`` of rocketmq-namesrv and
  rocketmq-broker 4.9.x; 4.9.7 is the newest on Maven Central), a name server and a broker
  wherever Aerolite would start a standalone process, so every test runs, restarts included.

Clients never run inside pytest: the C++ client (PyPI ``rocketmq``) cannot be unloaded and
starts many threads. Each client is a driver process (``drivers/cpp_client.py``, ``js/*.js``)
that reads one JSON line of arguments, prints JSON lines and stops by itself; ``Clients``
starts them with ``HOME`` in a temp dir (the C++ client writes ``~/logs/rocketmq-cpp``) and
stops leftovers by PID.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

E2E_DIR = Path(__file__).resolve().parent
CPP_DRIVER = E2E_DIR / "drivers" / "cpp_client.py"
JS_DIR = E2E_DIR / "js"
TARGET_ENV = "AEROLITE_E2E_TARGET"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
DRIVER_TIMEOUT_S = 90.0
LOG_TAIL_CHARS = 6000

PROPERTY_KEYS = ["seq", "color", "run", "note"]  # the user properties the tests set

# The C++ client commits consumed offsets every 5 s (persistConsumerOffsetInterval) and once
# more in shutdown(). That last commit is a burst of ONEWAY UPDATE_CONSUMER_OFFSET requests
# written just before the client closes its sockets, and one of them is sometimes lost: seen
# against RocketMQ 4.9.7 itself (a queue resumed at 0 after its offset 8 was "sent"). A consumer
# whose offsets a later step relies on therefore stays up this long after its last message, so
# that a periodic commit on a live connection covers everything it consumed.
COMMITTED_SETTLE_S = 6.5

# Small commit-log segments (512 KiB) so that the tests' messages roll over several files; the
# largest message must still fit in one (Aerolite checks), and the tests' are under 64 KiB.
DEFAULT_SETTINGS = {
    "mappedFileSizeCommitLog": str(512 << 10),
    "maxMessageSize": str(256 << 10),
    "autoCreateTopicEnable": "true",
    "metricsPort": "0",  # a free port: parallel brokers must not fight over 5557
}

_DIAGNOSTICS = pytest.StashKey[list[tuple[str, Callable[[], str]]]]()


def unique(prefix: str) -> str:
    """A topic or group name no other test (or earlier run against the same broker) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"


def _stop_pid(proc: subprocess.Popen[Any], timeout_s: float = STOP_TIMEOUT_S) -> int | None:
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
        return "\n".join(f"--- {p.name}\n{_tail(p)}" for p in self.logs)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        codes = [_stop_pid(p) for p in reversed(self.procs)]
        if self.kind == "aerolite":
            assert codes == [0], f"SIGTERM should exit 0, got {codes}:\n{self.log_tail()}"

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)


def _read_ready_line(proc: subprocess.Popen[str], log: Path, timeout_s: float) -> str:
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
        _stop_pid(proc)
        pytest.fail(f"no ready line within {timeout_s:g} s:\n{_tail(log)}")
    if not line:
        _stop_pid(proc)
        pytest.fail(f"exited ({proc.poll()}) before its ready line:\n{_tail(log)}")
    return line.strip()


def start_aerolite(store: Path, settings: dict[str, str] | None = None) -> Broker:
    """``python -m broker standalone`` on ports 0; returns once it printed its ready line."""
    store.mkdir(parents=True, exist_ok=True)
    merged = {**DEFAULT_SETTINGS, **(settings or {})}
    args = [sys.executable, "-m", "broker", "standalone", "--store", str(store)]
    args += ["--namesrv-port", "0", "--listen-port", "0"]
    for key, value in merged.items():
        args += ["--set", f"{key}={value}"]
    log = store.parent / f"{store.name}-aerolite-{time.monotonic_ns()}.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(  # our own broker, fixed arguments
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    line = _read_ready_line(proc, log, READY_TIMEOUT_S)
    words = line.split()
    assert words[0] == "ready", f"unexpected first line {line!r}"
    addrs = dict(w.split("=", 1) for w in words[1:])
    return Broker(addrs["namesrv"], addrs["broker"], store, [proc], [log], "aerolite")


def _free_port(offsets: tuple[int, ...] = (0,)) -> int:
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
                    # RocketMQ 4.x unmaps segments through java.nio internals (runbroker.sh
                    # passes the same on JDK 9+); without it a clean shutdown throws.
                    "--add-opens=java.base/java.nio=ALL-UNNAMED",
                    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
                    f"-Drocketmq.home.dir={home}",
                    f"-Duser.home={home}",
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

    def _wait_for(self, proc: subprocess.Popen[str], log: Path, marker: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if marker in _tail(log, 100_000):
                return
            if proc.poll() is not None:
                pytest.fail(f"java exited ({proc.returncode}):\n{_tail(log)}")
            time.sleep(0.2)
        _stop_pid(proc)
        pytest.fail(f"java printed no {marker!r}:\n{_tail(log)}")

    def _namesrv_for(self, store: Path) -> str:
        """The name server of ``store``'s broker, started on first use, kept over restarts."""
        if store in self.namesrvs:
            return self.namesrvs[store][1]
        port = _free_port()
        conf = store.parent / f"{store.name}-namesrv.conf"
        conf.write_text(f"listenPort={port}\n")
        log = store.parent / f"{store.name}-java-namesrv.log"
        proc = self._java(
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            "-c",
            str(conf),
            home=store.parent / f"{store.name}-namesrv-home",
            log=log,
        )
        self._wait_for(proc, log, "boot success")
        self.namesrvs[store] = (proc, f"127.0.0.1:{port}")
        return self.namesrvs[store][1]

    def start_broker(self, store: Path, settings: dict[str, str] | None = None) -> Broker:
        store.mkdir(parents=True, exist_ok=True)
        namesrv = self._namesrv_for(store)
        # Same port on every restart of one store: the name server keeps the old route for a
        # while. The broker also binds port-2 (VIP channel) and port+1 (HA).
        port = self.broker_ports.get(store) or _free_port((-2, 0, 1))
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
        conf = store.parent / f"{store.name}-broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in conf_values.items()))
        log = store.parent / f"{store.name}-java-broker-{time.monotonic_ns()}.log"
        proc = self._java(
            "org.apache.rocketmq.broker.BrokerStartup",
            "-c",
            str(conf),
            home=store.parent / f"{store.name}-home",
            log=log,
        )
        self._wait_for(proc, log, "boot success")
        # Java's SIGTERM exit code is 143, so Broker.stop() checks codes only for Aerolite.
        return Broker(namesrv, f"127.0.0.1:{port}", store, [proc], [log], "java")

    def release(self, store: Path) -> None:
        """Stop the name server of ``store`` (after its broker)."""
        if store in self.namesrvs:
            _stop_pid(self.namesrvs.pop(store)[0])

    def shutdown(self) -> None:
        for store in list(self.namesrvs):
            self.release(store)


@dataclass
class Target:
    """Where the tests send their clients, and how to get a broker of one's own."""

    kind: str  # "aerolite", "java" (external) or "java-lib"
    java: JavaRocketMQ | None = None
    external_namesrv: str = ""

    def launch(self, store: Path, settings: dict[str, str] | None = None) -> Broker:
        if self.kind == "aerolite":
            return start_aerolite(store, settings)
        if self.java is not None:
            return self.java.start_broker(store, settings)
        pytest.skip(f"{TARGET_ENV}=java:ADDR cannot start or restart brokers")

    def release(self, store: Path) -> None:
        """Whatever outlives a broker on ``store`` (a Java target's name server)."""
        if self.java is not None:
            self.java.release(store)


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    spec = os.environ.get(TARGET_ENV, "")
    if spec.startswith("java:"):
        yield Target("java", external_namesrv=spec.removeprefix("java:"))
    elif spec.startswith("java-lib:"):
        java = JavaRocketMQ(Path(spec.removeprefix("java-lib:")))
        try:
            yield Target("java-lib", java=java)
        finally:
            java.shutdown()
    else:
        yield Target("aerolite")


@pytest.fixture(scope="session")
def cluster(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker shared by every test that only adds topics and groups of its own."""
    if target.kind == "java":
        yield Broker(target.external_namesrv, "", Path(), [], [], "java")
        return
    broker = target.launch(tmp_path_factory.mktemp("shared") / "store")
    try:
        yield broker
    finally:
        if broker.alive():
            broker.stop()
        else:
            broker.kill()
        target.release(broker.store)


@pytest.fixture
def launch(target: Target, request: pytest.FixtureRequest) -> Iterator[Callable[..., Broker]]:
    """Start a broker of the test's own (``launch(store, settings)``); killed at teardown."""
    started: list[Broker] = []

    def _launch(store: Path, settings: dict[str, str] | None = None) -> Broker:
        broker = target.launch(store, settings)
        started.append(broker)
        n = len(started)
        diagnose(request, f"broker #{n} log", broker.log_tail)
        return broker

    yield _launch
    for broker in started:
        broker.kill()
    for store in {broker.store for broker in started}:
        target.release(store)


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
        done = self.of("done")
        if not done or "error" in done[-1]:
            pytest.fail(f"{self.name} failed (exit {self.proc.returncode})\n{self.describe()}")
        return done[-1]

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
            + f"\n--- {self.name} stderr tail:\n{_tail(self.stderr_path, 3000)}"
        )


class Clients:
    """Starts client drivers for one test, all against ``namesrv``, and cleans up after it."""

    def __init__(self, namesrv: str, work: Path, request: pytest.FixtureRequest) -> None:
        self.namesrv = namesrv
        self.work = work
        self.home = work / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.runs: list[DriverRun] = []
        self._request = request

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HOME"] = str(self.home)  # the C++ client logs to ~/logs/rocketmq-cpp
        env.pop("NAMESRV_ADDR", None)
        return env

    def _start(self, name: str, argv: list[str], args: dict[str, Any], cwd: Path) -> DriverRun:
        args = {"namesrv": self.namesrv, **args}
        stderr_path = self.work / f"{len(self.runs):02d}-{name}.stderr"
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver scripts, fixed arguments
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=cwd,
                env=self._env(),
            )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(args) + "\n")
        proc.stdin.flush()
        run = DriverRun(name, proc, stderr_path)
        self.runs.append(run)
        diagnose(self._request, f"driver {len(self.runs)}: {name}", run.describe)
        return run

    def cpp(self, command: str, **args: Any) -> DriverRun:
        """Start ``drivers/cpp_client.py COMMAND`` (the PyPI rocketmq client)."""
        if importlib.util.find_spec("rocketmq") is None:
            pytest.skip("the rocketmq package is not installed: run `make install`")
        return self._start(
            f"cpp-{command}", [sys.executable, str(CPP_DRIVER), command], args, self.work
        )

    def js(self, script: str, **args: Any) -> DriverRun:
        """Start ``js/SCRIPT.js`` (ali-ons); skips the test without node or ``npm ci``."""
        node = shutil.which("node")
        if node is None:
            pytest.skip("node is not installed")
        if not (JS_DIR / "node_modules" / "ali-ons").is_dir():
            pytest.skip("ali-ons is not installed: run `make install` (npm ci in tests/e2e/js)")
        return self._start(f"js-{script}", [node, str(JS_DIR / f"{script}.js")], args, JS_DIR)

    def close(self) -> None:
        for run in self.runs:
            run.kill()


@pytest.fixture
def clients(cluster: Broker, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Clients]:
    """Client drivers against the shared broker."""
    if cluster.procs:
        diagnose(request, "shared broker log", cluster.log_tail)
    c = Clients(cluster.namesrv, tmp_path, request)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def client_factory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[Broker], Clients]]:
    """Client drivers against a broker the test started itself (its address changes on
    restart, so each incarnation gets its own ``Clients``)."""
    made: list[Clients] = []

    def make(broker: Broker) -> Clients:
        c = Clients(broker.namesrv, tmp_path / f"clients-{len(made)}", request)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


# ---------------------------------------------------------------------------------- reports


def diagnose(request: pytest.FixtureRequest, title: str, source: Callable[[], str]) -> None:
    """Attach ``source()`` to the report of the current test if it fails."""
    request.node.stash.setdefault(_DIAGNOSTICS, []).append((title, source))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and call.when in ("setup", "call"):
        # Module- and session-scoped fixtures register on their own node, tests on theirs.
        sources = [src for node in item.listchain() for src in node.stash.get(_DIAGNOSTICS, [])]
        for title, source in sources:
            try:
                text = source()
            except Exception as exc:
                text = f"(could not collect: {exc!r})"
            report.sections.append((f"e2e: {title}", text))
    return report


# ---------------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Sent:
    """One message as a test builds it, in the drivers' JSON shape."""

    body: str
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    shard: int = 0

    def cpp_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"body": self.body, "properties": dict(self.properties)}
        if self.tags:
            spec["tags"] = self.tags
        if self.keys:
            spec["keys"] = " ".join(self.keys)  # the C++ client's key separator is a space
        spec["shard"] = self.shard
        return spec

    def js_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"body": self.body, "properties": dict(self.properties)}
        if self.tags:
            spec["tags"] = self.tags
        if self.keys:
            spec["keys"] = list(self.keys)
        return spec

    def fingerprint(self) -> tuple[str, str | None, str | None, tuple[tuple[str, str], ...]]:
        return (self.body, self.tags, " ".join(self.keys) or None, tuple(sorted(self.properties)))


def received_fingerprint(
    event: dict[str, Any],
) -> tuple[str, str | None, str | None, tuple[tuple[str, str], ...]]:
    """The same shape as ``Sent.fingerprint`` from a driver's ``msg`` line."""
    props = event.get("properties") or {}
    return (
        event["body"],
        event.get("tags") or None,
        event.get("keys") or None,
        tuple(sorted(props.items())),
    )


def bodies(run: DriverRun) -> list[str]:
    return [e["body"] for e in run.of("msg")]


def send(
    clients: Clients,
    topic: str,
    messages: list[Sent],
    mode: str = "sync",
    *,
    warmup_topic: str | None = None,
) -> DriverRun:
    """Send with the C++ producer and check every send was acknowledged; with
    ``warmup_topic``, a round of sends there first opens the client's connections to every
    broker (the driver's ``_warm_up`` says why a route of several brokers needs it)."""
    extra = {"warmup_topic": warmup_topic} if warmup_topic else {}
    run = clients.cpp(
        "produce",
        group=unique("e2e_producer"),
        topic=topic,
        mode=mode,
        messages=[m.cpp_spec() for m in messages],
        deadline_s=90,
        **extra,
    )
    done = run.finish(timeout_s=120)
    if warmup_topic:
        assert [e["ok"] for e in run.of("warm")] == [8], run.of("warm")
    failed = [e for e in run.of("sent") if e.get("status") != "OK"]
    assert not failed, f"{len(failed)} sends failed, first: {failed[:3]}"
    assert done["ok"] == len(messages), done
    return run


def consume(
    clients: Clients,
    topic: str,
    group: str,
    expect: int,
    *,
    expression: str = "*",
    settle_s: float = 3.0,
    deadline_s: float = 60.0,
    **extra: object,
) -> DriverRun:
    """Run a C++ PushConsumer until ``expect`` messages and ``settle_s`` of quiet (extras and
    duplicates would show up in that window), then stop it cleanly."""
    run = clients.cpp(
        "push",
        group=group,
        topic=topic,
        expression=expression,
        expect=expect,
        settle_s=settle_s,
        deadline_s=deadline_s,
        property_keys=PROPERTY_KEYS,
        **extra,
    )
    run.finish(timeout_s=deadline_s + 30)
    return run


def assert_same_messages(run: DriverRun, expected: list[Sent]) -> None:
    """Received exactly ``expected``: each once, body, tags, keys and properties equal."""
    got = Counter(received_fingerprint(e) for e in run.of("msg"))
    want = Counter(m.fingerprint() for m in expected)
    missing = want - got
    extra = got - want
    assert not missing and not extra, (
        f"received {sum(got.values())} of {sum(want.values())}: "
        f"{sum(missing.values())} missing (e.g. {[k[0][:60] for k in list(missing)[:3]]}), "
        f"{sum(extra.values())} unexpected or duplicated "
        f"(e.g. {[(k[0][:60], k[1], k[2]) for k in list(extra)[:3]]})"
    )
