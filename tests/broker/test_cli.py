"""The ``aerolite`` process: ready line, protocol on both ports, clean stop, config errors,
start errors (a taken port, a locked store) as one line and exit 2."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.route import TopicRouteData

# Every process here serves metrics on a free port: 5557 may be anyone's on this machine.
FREE_METRICS = ("--set", "metricsPort=0")


def _start(
    *args: str, env: dict[str, str] | None = None, stderr: IO[str] | int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """A broker CLI process. A test that does not read its stderr passes a file: a pipe nobody
    reads fills up (PYTHONASYNCIODEBUG's tracebacks fill it fast) and stalls the process.
    A standalone broker serves no web console unless the test asks (its 8080 is shared)."""
    if "standalone" in args and not any("ashboard" in a for a in args):
        args = (*args, "--set", "enableDashboard=false")
    return subprocess.Popen(
        [sys.executable, "-m", "broker", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    """Kill our own child if still running and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = _start(
        "standalone",
        "--store",
        str(tmp_path),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        *FREE_METRICS,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield proc, line
    finally:
        _stop(proc)


def _addresses(line: str) -> dict[str, str]:
    words = line.split()
    assert words[0] == "ready"
    return dict(w.split("=", 1) for w in words[1:])


async def test_standalone_prints_one_ready_line_and_speaks_the_protocol(
    standalone: tuple[subprocess.Popen[str], str],
) -> None:
    _proc, line = standalone
    addrs = _addresses(line)
    assert list(addrs) == ["namesrv", "broker", "metrics", "grpc"]
    for addr in addrs.values():
        host, port = addr.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
    async with RemotingClient() as client:
        for addr in (addrs["namesrv"], addrs["broker"]):
            request = RemotingCommand.request(9999, {"k": "v"})
            response = await client.invoke(addr, request, timeout_s=5)
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert response.opaque == request.opaque
            assert response.remark == " request type 9999 not supported"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_with_exit_zero(tmp_path: Path, signum: int) -> None:
    proc = _start(
        "standalone",
        "--store",
        str(tmp_path),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        *FREE_METRICS,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("ready ")
        os.kill(proc.pid, signum)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        _stop(proc)


def test_single_role_commands_print_their_part(tmp_path: Path) -> None:
    for args, fields in (
        (["namesrv", "--port", "0"], ["namesrv", "metrics"]),
        (["broker", "--listen-port", "0", "--store", str(tmp_path)], ["broker", "metrics", "grpc"]),
    ):
        proc = _start(*args, *FREE_METRICS)
        try:
            assert proc.stdout is not None
            assert list(_addresses(proc.stdout.readline())) == fields
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            _stop(proc)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["standalone", "--set", "listenPortt=1"], "unknown config key 'listenPortt'"),
        (["broker", "--set", "listenPort=abc"], "config key listenPort"),
        (["namesrv", "--set", "brokerName=x"], "unknown config key 'brokerName'"),
        (["broker", "-c", "/nonexistent/broker.conf"], "cannot read config file"),
        (["standalone", "--set", "tlsServerMode=enforcing"], "needs tlsServerCertPath"),
        (["standalone", "--set", "tlsServerMode=sometimes"], "config key tlsServerMode"),
        (
            [
                "namesrv",
                "--set",
                "tlsServerMode=permissive",
                "--set",
                "tlsServerCertPath=/nonexistent/cert.pem",
                "--set",
                "tlsServerKeyPath=/nonexistent/key.pem",
            ],
            "tlsServerCertPath/tlsServerKeyPath: cannot load",
        ),
        (["broker", "--set", "metricsPort=70000"], "metricsPort 70000"),
    ],
)
def test_bad_config_fails_before_starting(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "broker", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "ready" not in proc.stdout


def _role_args(role: str, store: Path, port: int = 0) -> list[str]:
    """The command line of one role listening on ``port`` (the others free; the store
    under ``store``)."""
    if role == "namesrv":
        return ["namesrv", "--port", str(port), "--set", f"kvConfigPath={store / 'kv.json'}"]
    args = [role, "--store", str(store), "--listen-port", str(port)]
    return [*args, "--namesrv-port", "0"] if role == "standalone" else args


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _start_error(role: str, done: subprocess.CompletedProcess[str]) -> str:
    """The one line a start error prints: exit 2, no ready line, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "ready" not in done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith(f"aerolite {role}:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _taken_port() -> socket.socket:
    """A listening socket on 127.0.0.1:0, held by this test."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


@pytest.mark.parametrize(
    ("role", "key"),
    [
        ("namesrv", "listenPort"),
        ("broker", "listenPort"),
        ("broker", "haListenPort"),
        ("broker", "grpcListenPort"),
    ],
)
def test_port_in_use_is_a_clear_error(tmp_path: Path, role: str, key: str) -> None:
    with _taken_port() as taken:
        port = taken.getsockname()[1]
        if key == "listenPort":
            done = _run(*_role_args(role, tmp_path, port), *FREE_METRICS)
        else:
            done = _run(*_role_args(role, tmp_path), "--set", f"{key}={port}", *FREE_METRICS)
    line = _start_error(role, done)
    assert f"{key} 127.0.0.1:{port}: address already in use" in line


@pytest.mark.parametrize("role", ["standalone", "broker", "namesrv"])
def test_metrics_port_zero_is_served_and_named_on_the_ready_line(tmp_path: Path, role: str) -> None:
    proc = _start(*_role_args(role, tmp_path), *FREE_METRICS)
    try:
        assert proc.stdout is not None
        fields = _addresses(proc.stdout.readline())
        first = ["namesrv", "broker"] if role == "standalone" else [role]
        then = ["metrics", "grpc"] if role != "namesrv" else ["metrics"]
        assert list(fields) == [*first, *then]  # the first fields never move
        host, port = fields["metrics"].rsplit(":", 1)
        assert host == "127.0.0.1"
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            body = response.read().decode()
        finally:
            conn.close()
        assert response.status == 200
        family = "rocketmq_namesrv_brokers" if role == "namesrv" else "rocketmq_put_tps"
        assert family in body
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        _stop(proc)


@pytest.mark.parametrize("role", ["standalone", "broker", "namesrv"])
def test_a_taken_metrics_port_is_a_start_error_naming_the_key(tmp_path: Path, role: str) -> None:
    with _taken_port() as taken:
        port = taken.getsockname()[1]
        done = _run(*_role_args(role, tmp_path), "--set", f"metricsPort={port}")
    line = _start_error(role, done)
    assert f"metricsPort 127.0.0.1:{port}" in line
    assert "address already in use" in line.lower()


def test_a_second_broker_on_a_locked_store_is_one_line_and_exit_2(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _start(*_role_args("broker", store), *FREE_METRICS)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().startswith("ready ")
        done = _run(*_role_args("broker", store), *FREE_METRICS)
    finally:
        _stop(first)
    line = _start_error("broker", done)
    assert str(store) in line
    assert "another process" in line


async def test_get_namesrv_config_reports_the_metrics_actually_served(tmp_path: Path) -> None:
    """Standalone serves the name server's families on the broker's endpoint: the name
    server's config says so, with the port chosen for metricsPort=0. Without metrics, the
    config says that and the ready line has no metrics field."""
    cases = [
        ("standalone", FREE_METRICS, True),
        ("namesrv", FREE_METRICS, True),
        ("standalone", ("--set", "metricsEnable=false"), False),
    ]
    for n, (role, settings, served) in enumerate(cases):
        proc = _start(*_role_args(role, tmp_path / str(n)), *settings)
        try:
            assert proc.stdout is not None
            fields = _addresses(proc.stdout.readline())
            async with RemotingClient() as client:
                request = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, {})
                response = await client.invoke(fields["namesrv"], request, timeout_s=5)
            assert response.code == ResponseCode.SUCCESS
            config = dict(
                line.split("=", 1) for line in response.body_bytes.decode().splitlines() if line
            )
            if served:
                assert config["metricsEnable"] == "true", role
                assert config["metricsPort"] == fields["metrics"].rsplit(":", 1)[1], role
            else:
                assert config["metricsEnable"] == "false"
                assert "metrics" not in fields
        finally:
            _stop(proc)


async def test_broker_finds_namesrv_in_env_and_reads_properties_file(tmp_path: Path) -> None:
    """``aerolite broker -c broker.conf`` with NAMESRV_ADDR: it registers under its conf name."""
    namesrv = _start(
        "namesrv", "--port", "0", "--set", f"kvConfigPath={tmp_path / 'kv.json'}", *FREE_METRICS
    )
    broker: subprocess.Popen[str] | None = None
    try:
        assert namesrv.stdout is not None
        ns_addr = _addresses(namesrv.stdout.readline())["namesrv"]
        conf = tmp_path / "broker.conf"
        conf.write_text(
            "# a RocketMQ broker.conf\nbrokerClusterName=TestCluster\nbrokerName=broker-x\n"
            f"storePathRootDir={tmp_path / 'store'}\nlistenPort=0\n"
        )
        broker = _start(
            "broker", "-c", str(conf), *FREE_METRICS, env={**os.environ, "NAMESRV_ADDR": ns_addr}
        )
        assert broker.stdout is not None
        broker_addr = _addresses(broker.stdout.readline())["broker"]
        async with RemotingClient() as client:
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
            )
            response = await client.invoke(ns_addr, request, timeout_s=5)
            assert response.code == ResponseCode.SUCCESS
            route = TopicRouteData.decode(response.body_bytes)
            assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
                ("TestCluster", "broker-x", {0: broker_addr})
            ]
        os.kill(broker.pid, signal.SIGTERM)
        assert broker.wait(timeout=15) == 0
        # A clean stop unregisters: the route is gone.
        async with RemotingClient() as client:
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
            )
            response = await client.invoke(ns_addr, request, timeout_s=5)
            assert response.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        if broker is not None:
            _stop(broker)
        _stop(namesrv)


def test_every_log_line_names_its_broker(tmp_path: Path) -> None:
    proc = _start(
        "standalone",
        "--store",
        str(tmp_path),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        "--set",
        "brokerName=broker-logs",
        *FREE_METRICS,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("ready ")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        lines = [json.loads(line) for line in proc.stderr.read().splitlines() if line.strip()]
    finally:
        _stop(proc)
    events = {line["event"] for line in lines}
    assert {"broker_started", "stopped"} <= events
    for line in lines:
        assert line.get("broker") == "broker-logs", line
        assert line["cluster"] == "DefaultCluster", line
