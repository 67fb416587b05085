"""The console as an operator starts it: served by ``aerolite standalone`` on
``dashboardPort`` (its ready line names it), or as ``aerolite dashboard -n NAMESRV`` alone.
Real processes, ports 0, stopped by PID."""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from client.dashboard.auth import parse_users, verify_password
from tests.processes import read_ready_line, start_standalone, stop_pid, tail
from tests.remoting.test_tls import make_cert

CONSOLE = {"enableDashboard": "true", "dashboardPort": "0"}


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:  # noqa: S310 - our console
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _run(
    module: str,
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` to its end: our own CLI, fixed arguments."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env=env,
    )


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie child of ours is gone too, once reaped by its parent
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_standalone_serves_the_console_and_names_it_last(tmp_path: Path) -> None:
    broker = start_standalone(tmp_path, CONSOLE)
    try:
        assert broker.dashboard is not None and broker.dashboard.startswith("http://127.0.0.1:")
        status, page = _get(broker.dashboard + "/")
        assert status == 200
        assert broker.broker in page and "broker-a" in page
    finally:
        broker.stop()
    assert broker.proc.returncode == 0


def test_without_enable_dashboard_no_console_is_started(tmp_path: Path) -> None:
    broker = start_standalone(tmp_path, {"enableDashboard": "false"})
    try:
        assert broker.dashboard is None
        assert _children(broker.proc.pid) == []
    finally:
        broker.stop()


def test_a_taken_dashboard_port_stops_the_start_with_a_message(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = _run(
            *("broker", "standalone", "--store", str(tmp_path)),
            *("--namesrv-port", "0", "--listen-port", "0"),
            *("--set", "metricsPort=0", "--set", "grpcListenPort=0"),
            *("--set", f"dashboardPort={port}"),
            timeout_s=90,
        )
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert "ready" not in done.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "set dashboardPort to a free port, or enableDashboard=false" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_console_ends_with_a_standalone_killed_by_sigkill(tmp_path: Path) -> None:
    broker = start_standalone(tmp_path, CONSOLE)
    try:
        children = _children(broker.proc.pid)
        assert len(children) == 1
        os.kill(broker.proc.pid, signal.SIGKILL)
        broker.proc.wait(timeout=10)
        # its stdin was our pipe: closed with us, the console stops by itself
        assert _gone(children[0], 15.0), "the console outlived its standalone broker"
    finally:
        broker.stop()


def test_the_brokers_config_never_sends_the_consoles_passwords(tmp_path: Path) -> None:
    broker = start_standalone(
        tmp_path,
        {
            **CONSOLE,
            "dashboardUsers": "ops:hunter22",
            "dashboardAccessKey": "console",
            "dashboardSecretKey": "s3cr3t-key",
        },
    )
    try:
        done = _run(
            "client.admin_cli", "getBrokerConfig", "-n", broker.namesrv, "-b", broker.broker
        )
        assert done.returncode == 0, done.stderr
        assert "dashboardPort" in done.stdout
        assert "hunter22" not in done.stdout
        assert re.search(r"^dashboardUsers\s", done.stdout, re.MULTILINE) is None
        assert "s3cr3t-key" not in done.stdout
    finally:
        broker.stop()


def test_under_enforcing_tls_the_console_speaks_only_https(tmp_path: Path) -> None:
    cert = make_cert(tmp_path)
    broker = start_standalone(
        tmp_path / "b",
        {
            **CONSOLE,
            "tlsServerMode": "enforcing",
            "tlsServerCertPath": str(cert.cert),
            "tlsServerKeyPath": str(cert.key),
        },
    )
    try:
        assert broker.dashboard is not None and broker.dashboard.startswith("https://")
        trust = ssl.create_default_context(cafile=str(cert.cert))
        status, page = _get(broker.dashboard + "/", trust)
        assert status == 200 and "broker-a" in page, page[-2000:]
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _get(broker.dashboard.replace("https://", "http://") + "/")
    finally:
        broker.stop()


def test_aerolite_dashboard_alone_prints_its_ready_line(tmp_path: Path) -> None:
    broker = start_standalone(tmp_path / "b")
    log = tmp_path / "dashboard.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(  # our own console, fixed arguments
            [sys.executable, "-m", "broker", "dashboard", "-n", broker.namesrv, "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        line = read_ready_line(proc, log, 60.0)
        assert line.startswith("ready dashboard=http://127.0.0.1:"), line
        status, page = _get(line.removeprefix("ready dashboard=") + "/")
        assert status == 200 and broker.broker in page
    finally:
        assert stop_pid(proc) == 0, tail(log)
        broker.stop()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "no name server: pass -n HOST:PORT or set NAMESRV_ADDR"),
        (
            ("-n", "127.0.0.1:1", "--set", "dashboardUser=x:y"),
            "unknown console key 'dashboardUser'",
        ),
        (("-n", "127.0.0.1:1", "--set", "dashboardUsers=x"), "needs NAME:PASSWORD"),
        (("-n", "127.0.0.1:1", "--port", "70000"), "not a port"),
        (("-n", "127.0.0.1:1", "--set", "dashboardAccessKey=k"), "go together"),
    ],
)
def test_aerolite_dashboard_names_what_is_wrong(args: tuple[str, ...], said: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    done = _run("broker", "dashboard", *args, env=env)
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_hash_password_prints_a_hash_the_console_accepts() -> None:
    done = _run("broker", "dashboard", "--hash-password", stdin="s3cret-pass\n")
    assert done.returncode == 0, done.stderr
    stored = done.stdout.strip()
    assert verify_password("s3cret-pass", stored)
    assert parse_users(f"ops:{stored}") == {"ops": stored}
    empty = _run("broker", "dashboard", "--hash-password", stdin="\n")
    assert empty.returncode == 1 and "a password cannot be empty" in empty.stderr
