"""The official RocketMQ 5 clients of ``make interop``, as driver processes: Java
(``rocketmq-client-java`` 5.2.0, ``java5/Java5Client.java``) and Go
(``rocketmq-clients/golang/v5`` v5.1.2, ``go5/main.go``).

Both drivers read one JSON line of steps and print JSON lines (the protocol of
tests/proxy/scenarios.py, see ``java5/Java5Client.java``'s header), and leave by their own
deadline. ``Client5`` starts them against one broker for one test, keeps every run, kills
leftovers by PID and prints each run's lines, stderr and the client's log tail at teardown
(pytest shows them for a failing test); ``Java5`` and ``Go5`` say only how their program is
started and where it logs.

- Java: a single-file program on the jars ``java5/pom.xml`` resolves (``mvn
  dependency:copy-dependencies`` into ``java5/target/lib``, once, reused while the pom is
  unchanged); ``HOME`` and ``user.home`` in the test's temp dir (it logs to
  ``~/logs/rocketmq``). SSL off unless a run asks (the client's own default is on).
- Go: built with ``go build`` into ``go5/bin`` (ignored by git), rebuilt when main.go, go.mod
  or go.sum changed (``go5/bin/build.stamp`` holds their hash). Its TLS is always on (any
  certificate trusted, no switch): ``"ssl": false`` dials in plaintext through the client's
  ``NewRpcClient`` hook. Its receives carry no long-polling time, so the broker polls an
  empty one for what the call's deadline leaves after half the request timeout
  (``ReceiveMessageActivity``): runs take a 2 s request timeout, which makes that 2 s (at
  5 s it is 3.5 s, and the change scenario's receive at 3 s, meant to find nothing, outlasts
  the 6 s its message was made invisible for and gets it). It compares a body's MD5 with the
  broker's as lower-case hex, exactly, while RocketMQ's proxy (``BinaryUtil.generateMd5``)
  and Aerolite send it upper-case, so it calls every message corrupted (and hands it over
  all the same): its driver also reports the digest as it came and checks it itself, and
  ``Go5.wire`` gives the shared checks that verdict.

Fixtures (registered in conftest.py): ``java5`` and ``go5`` (a client on the module's
``aerolite5`` broker); ``client5`` (``client5_tls`` on ``aerolite5_tls``), each test run once
with each client.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.bench.java_rocketmq import resolve_maven
from tests.interop.rmq5_broker import Aerolite5
from tests.processes import DriverRun, build_when_changed, tail
from tests.proxy.scenarios import Run, Steps

HERE = Path(__file__).parent

JAVA5_DIR = HERE / "java5"
POM = JAVA5_DIR / "pom.xml"
LIB = JAVA5_DIR / "target" / "lib"
LIB_STAMP = JAVA5_DIR / "target" / "lib.stamp"

GO5_DIR = HERE / "go5"
GO_SOURCES = ("main.go", "go.mod", "go.sum")
BINARY = GO5_DIR / "bin" / "go5client"
GO_STAMP = GO5_DIR / "bin" / "build.stamp"
GO_BUILD_TIMEOUT_S = 600.0  # the first build downloads the modules from the Go module proxy


# --------------------------------------------------------------------------- the programs


def resolve_java5_jars() -> Path:
    """``java5/target/lib``: the client's jars, resolved from Maven Central when the pom
    changed (the directory is emptied first, so that no other version stays on the class
    path)."""
    try:
        lib = resolve_maven(POM, LIB, LIB_STAMP)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"resolving the Java 5.x client in {JAVA5_DIR}: {exc}")
    if not any(lib.glob("rocketmq-client-java-*.jar")):
        pytest.fail(f"mvn in {JAVA5_DIR} resolved no rocketmq-client-java jar")
    return lib


def _go_fingerprint() -> str:
    digest = hashlib.sha256()
    for name in GO_SOURCES:
        digest.update(name.encode() + b"\0" + (GO5_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def build_go5() -> Path:
    """``go5/bin/go5client``, built again only when the sources changed since the stamp."""
    go = shutil.which("go")
    if go is None:
        pytest.fail(
            f"the Go 5.x client's tests need `go` (1.22 or newer) on PATH to build {GO5_DIR}, "
            "e.g. export PATH=$PATH:/usr/local/go/bin"
        )
    build_when_changed(
        [go, "build", "-o", str(BINARY), "."],
        cwd=GO5_DIR,
        fingerprint=_go_fingerprint(),
        stamp=GO_STAMP,
        outputs=(BINARY,),
        timeout_s=GO_BUILD_TIMEOUT_S,
    )
    return BINARY


# ---------------------------------------------------------------------------- the drivers


class Unset(enum.Enum):
    UNSET = enum.auto()  # a run that does not say: the class's default_ssl


class Client5(abc.ABC):
    """One official 5.x client's driver runs against ``broker``, for one test."""

    name: ClassVar[str]  # "java5", "go5": run names, topic and group prefixes
    version: ClassVar[str]  # the client version its ``started`` line must report
    slack_s: ClassVar[float]  # starting and stopping the process, on top of a run's deadline
    default_ssl: ClassVar[bool | None]  # what ``start`` asks for when a run does not say
    log: ClassVar[str]  # the client's log, below HOME

    def __init__(self, program: Path, broker: Aerolite5, work: Path) -> None:
        self.program = program
        self.broker = broker
        self.work = work
        self.home = work / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.runs: list[DriverRun] = []

    @abc.abstractmethod
    def argv(self) -> list[str]:
        """How the driver program is started."""

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home)}

    def args(self) -> dict[str, Any]:
        """What the driver reads beside endpoint, deadline, ssl and steps."""
        return {}

    def wire(self, run: DriverRun) -> Run:
        """``run`` as the shared checks read it (the client's own verdicts)."""
        return run

    def start(
        self,
        steps: Steps,
        *,
        deadline_s: float = 60,
        ssl: bool | Unset | None = Unset.UNSET,
        endpoint: str | None = None,
    ) -> DriverRun:
        """Start the driver on ``steps``; ``ssl`` None leaves the client's own TLS setting."""
        name = f"{self.name}-{len(self.runs):02d}-{steps[0]['op'] if steps else 'none'}"
        stderr_path = self.work / f"{name}.stderr"
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver, fixed arguments
                self.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=self.work,
                env=self.env(),
            )
        args: dict[str, Any] = {
            "endpoint": endpoint or self.broker.grpc,
            "deadline_s": deadline_s,
            **self.args(),
            "steps": steps,
        }
        tls = self.default_ssl if isinstance(ssl, Unset) else ssl
        if tls is not None:
            args["ssl"] = tls
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(args) + "\n")
        proc.stdin.flush()
        run = DriverRun(name, proc, stderr_path)
        self.runs.append(run)
        return run

    def run(self, steps: Steps, **kwargs: Any) -> DriverRun:
        """``start``, then wait for its ``done`` line (fails without one or with an error)."""
        run = self.start(steps, **kwargs)
        run.finish(float(kwargs.get("deadline_s", 60)) + self.slack_s)
        (started,) = run.of("started")
        assert started["client_version"] == self.version, started
        return run

    async def arun(self, steps: Steps, **kwargs: Any) -> DriverRun:
        """``run`` off the event loop (the 4.x SDK's clients live on it meanwhile)."""
        return await asyncio.to_thread(self.run, steps, **kwargs)

    def report(self) -> str:
        sections = [run.describe() for run in self.runs]
        if self.runs:
            sections.append(f"--- client log tail:\n{tail(self.home / self.log, 4000)}")
            sections.append(f"--- broker log tail:\n{self.broker.broker.log_tail()[-3000:]}")
        return "\n".join(sections)

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.kill()


class Java5(Client5):
    name = "java5"
    version = "5.2.0"  # pinned in java5/pom.xml
    slack_s = 60.0  # the JVM compiling the single-file driver
    default_ssl = False
    log = "logs/rocketmq/rocketmq-client.log"

    def argv(self) -> list[str]:
        java = shutil.which("java")
        assert java is not None
        return [
            java,
            f"-Duser.home={self.home}",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{self.program}/*",
            str(JAVA5_DIR / "Java5Client.java"),
            "run",
        ]


# What the Go client reads from the environment; the driver and the test decide them instead.
GO_CLIENT_ENV = ("rocketmq.client.logRoot", "user.home", "mq.consoleAppender.enabled")


class WireDigest:
    """A Go run as the shared checks read it: each ``msg`` line's ``corrupted`` is the
    driver's own check of the digest the broker sent (``digest.matches``, hex in any case)."""

    def __init__(self, run: DriverRun) -> None:
        self.run = run

    def of(self, event: str) -> list[dict[str, Any]]:
        events = self.run.of(event)
        if event != "msg":
            return events
        return [{**e, "corrupted": not e["digest"]["matches"]} for e in events]


class Go5(Client5):
    name = "go5"
    version = "v5.1.2"  # pinned in go5/go.mod
    slack_s = 15.0
    default_ssl = None  # always TLS; False swaps in a plaintext dialer
    log = "logs/rocketmqlogs/rocketmq_client_go.log"
    request_timeout_ms = 2000  # see the module's docstring

    def argv(self) -> list[str]:
        return [str(self.program), "run"]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in GO_CLIENT_ENV}
        return {**env, "HOME": str(self.home)}

    def args(self) -> dict[str, Any]:
        return {"request_timeout_ms": self.request_timeout_ms}

    def wire(self, run: DriverRun) -> Run:
        return WireDigest(run)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session", name="java5_lib")
def java5_lib_fixture() -> Path:
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("java and mvn are needed")
    return resolve_java5_jars()


@pytest.fixture(scope="session", name="go5_bin")
def go5_bin_fixture() -> Path:
    return build_go5()


CLASSES: dict[str, type[Client5]] = {"java5": Java5, "go5": Go5}
PROGRAMS = {"java5": "java5_lib", "go5": "go5_bin"}  # the fixture each one's program is


def _clients(
    request: pytest.FixtureRequest, kind: str, broker: Aerolite5, work: Path
) -> Iterator[Client5]:
    client = CLASSES[kind](request.getfixturevalue(PROGRAMS[kind]), broker, work)
    try:
        yield client
    finally:
        client.close()
        print(client.report())  # captured: shown for a failing test


@pytest.fixture(name="java5")
def java5_fixture(
    request: pytest.FixtureRequest, aerolite5: Aerolite5, tmp_path: Path
) -> Iterator[Client5]:
    yield from _clients(request, "java5", aerolite5, tmp_path)


@pytest.fixture(name="go5")
def go5_fixture(
    request: pytest.FixtureRequest, aerolite5: Aerolite5, tmp_path: Path
) -> Iterator[Client5]:
    yield from _clients(request, "go5", aerolite5, tmp_path)


@pytest.fixture(params=list(CLASSES), name="client5")
def client5_fixture(
    request: pytest.FixtureRequest, aerolite5: Aerolite5, tmp_path: Path
) -> Iterator[Client5]:
    """Each official 5.x client in turn (a Go build failure fails only the Go runs)."""
    yield from _clients(request, request.param, aerolite5, tmp_path)


@pytest.fixture(params=list(CLASSES), name="client5_tls")
def client5_tls_fixture(
    request: pytest.FixtureRequest, aerolite5_tls: Aerolite5, tmp_path: Path
) -> Iterator[Client5]:
    """``client5`` on the module's broker whose ports take TLS and plaintext alike."""
    yield from _clients(request, request.param, aerolite5_tls, tmp_path)
