"""Fixtures for the interop tests: the Java program built once by Maven, and its processes;
and, defined in clients5.py and rmq5_broker.py, the RocketMQ 5 clients' and their brokers'.

``java_program`` builds ``tests/interop/java`` (Apache RocketMQ's rocketmq-remoting and
rocketmq-store from Maven Central, pinned in its pom.xml) with ``mvn -q -B package`` once per
session, and only when the sources changed since the last build: ``target/build.stamp`` holds a
hash of the pom, the sources and the ``java -version`` output. Later runs reuse ``target/`` and
``~/.m2``.

Java processes are started with ``Popen``, waited for with a deadline, and stopped by PID
(stdin closed, then tests/processes.py's ``stop_pid``: terminate, then kill) whatever the
test's outcome.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.interop.clients5 import (  # noqa: F401 - the 5.x clients' fixtures
    client5_fixture,
    client5_tls_fixture,
    go5_bin_fixture,
    go5_fixture,
    java5_fixture,
    java5_lib_fixture,
)
from tests.interop.rmq5_broker import (  # noqa: F401 - their brokers' fixtures
    aerolite5_fixture,
    aerolite5_tls_fixture,
)
from tests.processes import build_when_changed, stop_pid

JAVA_DIR = Path(__file__).parent / "java"
TARGET = JAVA_DIR / "target"
JAR = TARGET / "remoting-interop.jar"
STAMP = TARGET / "build.stamp"
BUILD_TIMEOUT_S = 900.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def _sources() -> list[Path]:
    return [JAVA_DIR / "pom.xml", *sorted(p for p in (JAVA_DIR / "src").rglob("*") if p.is_file())]


def _fingerprint(java: str) -> str:
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(str(path.relative_to(JAVA_DIR)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    version = subprocess.run(
        [java, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    digest.update(version.stderr.encode())
    return digest.hexdigest()


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop ``proc`` by its PID: close its stdin, then terminate, then kill; reap it."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout_s / 2)
    stop_pid(proc, timeout_s)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@dataclass
class JavaProcess:
    """A running Java program whose stdout lines are read by a thread into a queue."""

    proc: subprocess.Popen[str]
    stderr_file: IO[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, prefix: str, timeout_s: float = READY_TIMEOUT_S) -> str:
        """The first stdout line starting with ``prefix``; fails on EOF or the deadline."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"java exited ({self.proc.poll()}) before {prefix!r}:\n{self.stderr()}")
            if line.startswith(prefix):
                return line
        pytest.fail(f"java printed no {prefix!r} line within {timeout_s:g} s:\n{self.stderr()}")

    def stderr(self, tail: int = 4000) -> str:
        self.stderr_file.flush()
        self.stderr_file.seek(0)
        return self.stderr_file.read()[-tail:]

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(timeout=STOP_TIMEOUT_S)
        self.stderr_file.close()


@dataclass(frozen=True)
class JavaProgram:
    """The built interop program: ``java -jar target/remoting-interop.jar MODE ...``."""

    java: str
    jar: Path

    def command(self, *args: str) -> list[str]:
        return [self.java, "-XX:+UseSerialGC", "-jar", str(self.jar), *args]

    @contextlib.contextmanager
    def start(self, *args: str, stdin: bool = True) -> Iterator[JavaProcess]:
        """Run the program in the background; stopped by PID when the block exits."""
        stderr_file = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        proc = subprocess.Popen(  # our own jar, fixed arguments
            self.command(*args),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            encoding="utf-8",
        )
        running = JavaProcess(proc, stderr_file)
        try:
            yield running
        finally:
            running.stop()

    def run(self, *args: str, input_text: str = "", timeout_s: float = 120.0) -> list[Any]:
        """Run to completion; the JSON lines it printed. Fails on a non-zero exit."""
        result = subprocess.run(  # our own jar, fixed arguments
            self.command(*args),
            input=input_text,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout_s,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(
                f"java {' '.join(args)} exited {result.returncode}:\n{result.stderr[-4000:]}"
            )
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def java_program() -> JavaProgram:
    """The Java side, built by Maven when its sources changed (or on first use)."""
    java = shutil.which("java")
    if java is None:
        pytest.fail(
            "tests/interop needs `java` (JDK 11 or newer) on PATH, e.g. "
            "apt-get install openjdk-17-jdk-headless"
        )
    fingerprint = _fingerprint(java)
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.fail(
            "tests/interop needs `mvn` (Maven 3.6 or newer) on PATH to build "
            f"{JAVA_DIR}, e.g. apt-get install maven"
        )
    build_when_changed(
        [mvn, "-q", "-B", "-Dstyle.color=never", "package"],
        cwd=JAVA_DIR,
        fingerprint=fingerprint,
        stamp=STAMP,
        outputs=(JAR, TARGET / "lib"),
        timeout_s=BUILD_TIMEOUT_S,
    )
    return JavaProgram(java, JAR)
