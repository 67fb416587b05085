"""Fixtures for the end-to-end tests: a broker to talk to, and third-party clients as processes.

The broker is Aerolite's ``python -m broker standalone`` on ports 0 with its store in a temp
dir, one per session (``cluster``) plus private ones for the restart and crash tests
(``launch``). Its stderr goes to a file whose tail is attached to a failing test's report.

``AEROLITE_E2E_TARGET`` points the same tests at Apache RocketMQ instead, which is how they were
checked (a known-good comparison when Aerolite fails one):

- ``java:HOST:PORT``: an already running RocketMQ name server (and its broker). Tests that must
  restart or kill the broker are skipped.
- ``java-lib:DIR``: ``JavaRocketMQ`` starts RocketMQ's ``NamesrvStartup`` and ``BrokerStartup``
  from the jars in ``DIR`` (``mvn dependency:copy-dependencies`` of rocketmq-namesrv and
  rocketmq-broker 4.9.x; 4.9.7 is the newest on Maven Central), a name server and a broker
  wherever Aerolite would start a standalone process, so every test runs, restarts included.

Clients never run inside pytest: the C++ client (PyPI ``rocketmq``) cannot be unloaded and
starts many threads. Each client is a driver process (``drivers/cpp_client.py``, ``js/*.js``)
that reads one JSON line of arguments, prints JSON lines and stops by itself; ``Clients``
starts them with ``HOME`` in a temp dir (the C++ client writes ``~/logs/rocketmq-cpp``) and
stops leftovers by PID.

The processes themselves (``Broker``, ``start_aerolite``, ``JavaRocketMQ``, ``DriverRun``) are
tests/processes.py's, shared with tests/interop; this file holds the fixtures around them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Broker, DriverRun, JavaRocketMQ, start_aerolite, unique

E2E_DIR = Path(__file__).resolve().parent
CPP_DRIVER = E2E_DIR / "drivers" / "cpp_client.py"
JS_DIR = E2E_DIR / "js"
TARGET_ENV = "AEROLITE_E2E_TARGET"

PROPERTY_KEYS = ["seq", "color", "run", "note"]  # the user properties the tests set

# The C++ client commits consumed offsets every 5 s (persistConsumerOffsetInterval) and once
# more in shutdown(). That last commit is a burst of ONEWAY UPDATE_CONSUMER_OFFSET requests
# written just before the client closes its sockets, and one of them is sometimes lost: seen
# against RocketMQ 4.9.7 itself (a queue resumed at 0 after its offset 8 was "sent"). A consumer
# whose offsets a later step relies on therefore stays up this long after its last message, so
# that a periodic commit on a live connection covers everything it consumed.
COMMITTED_SETTLE_S = 6.5

_DIAGNOSTICS = pytest.StashKey[list[tuple[str, Callable[[], str]]]]()


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
