"""gRPC benchmark: RocketMQ 5 clients against Aerolite's gRPC front end and against Apache
RocketMQ 5 (name server + proxy in local mode), the official 5.x Python client held fixed.

The client is PyPI ``rocketmq-python-client`` (5.1.2) in ``.venv-rmq5``: its package is
called ``rocketmq``, as is the 4.x client's in ``.venv``, so it only ever runs in driver
processes of that venv's interpreter (``tests.bench.drivers.rmq5_driver``), each with
``HOME`` in a temp dir (the client logs under ``~/logs``) and stopped by PID if it overruns.

The systems, both up for the whole run, every server on 127.0.0.1 as far as it can be told
so (see ``RocketMQ5Proxy``), pinned to CPU 1 with the drivers on CPU 0 when there are two
CPUs:

- **Aerolite**: ``python -m broker standalone`` (name server and broker in one process,
  the gRPC front end in-process on ``grpcListenPort``), ASYNC_FLUSH.
- **Apache RocketMQ 5**: ``NamesrvStartup`` and ``ProxyStartup -pm local`` (the proxy runs
  the broker in its own JVM) from ``rocketmq-namesrv`` / ``rocketmq-proxy`` 5.5.0, resolved
  from Maven Central with a pom written under ``bench-results/rocketmq5-jars/`` (reused
  while it is unchanged), ASYNC_FLUSH. Not run with ``--quick``, or without Java and Maven;
  a system that cannot start is reported as such (console, JSON and the docs section) and
  Aerolite is measured all the same.

What is measured, with 1 KiB bodies, topics of ``queues`` queues made beforehand over
remoting (a 5.x client needs its topic to exist), in ``reps`` repetitions where the two
systems take turns run by run:

- **Produce**: after a warm-up (not timed) in the async shape, up to a message count or a
  time budget: ``send()`` one at a time; ``threads`` threads each calling ``send()``;
  ``window`` ``send_async()`` futures in flight. Throughput, and latency per send (from
  the call to its answer). After every run the broker's queues are summed over remoting
  (GET_MAX_OFFSET) and compared with the acknowledged sends.
- **Consume**: ``consume_messages`` preloaded once per system (not timed), then read whole
  in every repetition by a new consumer group (created beforehand): a ``SimpleConsumer``
  calling ``receive(32, 30 s)`` and ``ack()`` on every message before the next receive.

CPU per message: the server processes' on-CPU time (``/proc/<pid>/task/*/schedstat``,
Aerolite's one process; Apache RocketMQ's proxy JVM plus its name server's) over the timed
part, divided by the messages; the driver's own CPU likewise. Figures are medians over the
repetitions; ratios are Aerolite's over Apache RocketMQ's, from the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from client.admin import Admin
from remoting.bodies import SubscriptionGroupConfig
from tests.bench.broker_bench import Addressed, _admin
from tests.bench.common import (
    attempt,
    bench_work_dir,
    can_pin,
    first_line,
    progress,
    results_head,
    stored_settled,
)
from tests.bench.java_rocketmq import (
    _port_with_neighbours,
    missing_reason,
    resolve_maven,
    rss_kb,
    start_jvm,
    wait_for_line,
)
from tests.bench.peers import (
    AeroliteBroker,
    Peer,
    Service,
    _stop_pid,
    _wait_port,
    free_port,
    pin_pid,
    run_driver,
    scan_log,
)
from tests.bench.repeat import merge_rows, rate_range
from tests.bench.report import (
    REPO_ROOT,
    Report,
    console_tail,
    machine_info,
    machine_line,
    markdown_table,
    markdown_tail,
    measured_line,
    pinning_text,
    text_table,
)
from tests.bench.report import fmt_count as _n
from tests.bench.report import fmt_num as _f

NAME = "grpc"
CLIENT_CPU = 0
SERVER_CPU = 1
RMQ5_PYTHON = REPO_ROOT / ".venv-rmq5" / "bin" / "python"
CLIENT_DIST = "rocketmq-python-client"
DRIVER = "tests.bench.drivers.rmq5_driver"
SYSTEMS = ("aerolite", "rocketmq5")
LABELS = {"aerolite": "Aerolite", "rocketmq5": "Apache RocketMQ 5"}
PRODUCE_RUNS = ("one", "threads", "async")
RUNS = (*PRODUCE_RUNS, "consume")
BACKLOG_TOPIC = "GrpcBacklog"

JAVA_VERSION = "5.5.0"
JARS_DIR = REPO_ROOT / "bench-results" / "rocketmq5-jars"
RESOLVE_TIMEOUT_S = 900.0
BOOT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0  # the proxy stops its gRPC server, then the broker in it
PROXY_HEAP = "1g"  # the proxy and, in local mode, the broker in the same JVM
NAMESRV_HEAP = "256m"
POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Apache RocketMQ 5's name server and proxy (which runs the broker in local mode), for
     tests/bench/grpc_bench.py; written by it. Only the jars are used. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.aerolite</groupId>
  <artifactId>rocketmq5-proxy-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-namesrv</artifactId>
      <version>{JAVA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-proxy</artifactId>
      <version>{JAVA_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcBenchConfig:
    """Counts and time budgets; every loop stops at whichever limit comes first."""

    body_bytes: int = 1024
    reps: int = 3
    queues: int = 8
    threads: int = 8  # produce: threads each calling send()
    window: int = 64  # produce: send_async() futures in flight
    messages: int = 100_000  # per produce run
    max_s: float = 2.5  # per produce run
    warmup_messages: int = 1_000  # per produce run, before its timed part ...
    warmup_s: float = 0.5  # ... or this long
    warm_s: float = 6.0  # per system before the repetitions: async and threaded sends ...
    warm_consume: int = 1_500  # ... and this many messages read (0 s: no warm-up)
    consume_messages: int = 2_000
    consume_max_s: float = 15.0
    batch: int = 32
    invisible_s: int = 30
    await_s: int = 5  # a receive's long polling when nothing is there
    java: bool = True
    pin_cpus: bool = True
    broker_settings: tuple[tuple[str, str], ...] = ()


FULL = GrpcBenchConfig()
QUICK = replace(
    FULL,
    reps=1,
    queues=2,
    threads=2,
    window=8,
    messages=60,
    max_s=2.0,
    warmup_messages=10,
    warmup_s=0.5,
    warm_s=0.0,
    consume_messages=100,
    consume_max_s=10.0,
    java=False,
    broker_settings=(
        ("mappedFileSizeCommitLog", str(16 << 20)),
        ("maxHashSlotNum", "10000"),
        ("maxIndexNum", "40000"),
    ),
)


# ------------------------------------------------------------------------- the client


def client_version() -> tuple[str, str]:
    """(the 5.x client's version, "") or ("", why it cannot run here)."""
    if not RMQ5_PYTHON.exists():
        return "", f"{RMQ5_PYTHON} is missing (`make install` makes it)"
    try:
        out = subprocess.run(  # the venv's own interpreter, a fixed one-liner
            [
                str(RMQ5_PYTHON),
                "-c",
                "import importlib.metadata as m, platform, rocketmq;"
                f"print(m.version('{CLIENT_DIST}'), platform.python_version())",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO_ROOT,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return "", f"{RMQ5_PYTHON} does not run: {exc}"
    if out.returncode != 0:
        return "", f"{CLIENT_DIST} is not importable in .venv-rmq5: {tail_text(out.stderr)}"
    version, _, python = out.stdout.strip().partition(" ")
    return f"{CLIENT_DIST} {version} (Python {python}, .venv-rmq5)", ""


def tail_text(text: str, lines: int = 3) -> str:
    return " / ".join(text.strip().splitlines()[-lines:])


def run_rmq5(command: str, args: dict[str, Any], *, home: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``rmq5_driver COMMAND`` with ``args`` under .venv-rmq5's interpreter; its ``done``
    line (``peers.run_driver``: ``DriverError`` when it fails or overruns)."""
    return run_driver(
        DRIVER, command, args, home=home, timeout_s=timeout_s, python=str(RMQ5_PYTHON)
    ).done


# ------------------------------------------------------------------------- the servers


class AeroliteGrpc(AeroliteBroker):
    """The standalone broker with its gRPC front end on a port chosen here."""

    def __init__(self, work: Path, cpu: int | None, settings: dict[str, str]) -> None:
        self.grpc_port = free_port()
        super().__init__(work, cpu, {**settings, "grpcListenPort": str(self.grpc_port)})

    def start(self) -> None:
        super().start()
        assert self.proc is not None
        _wait_port(self.grpc_port, self.proc, self.log, 30.0)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pids(self) -> list[int]:
        return [self.pid]


def resolve_jars() -> Path:
    """The directory of RocketMQ 5's jars, resolved from Maven Central when the pom changed."""
    JARS_DIR.mkdir(parents=True, exist_ok=True)
    pom = JARS_DIR / "pom.xml"
    if not pom.is_file() or pom.read_text() != POM:
        progress(f"resolving Apache RocketMQ {JAVA_VERSION} from Maven Central")
        pom.write_text(POM)
    return resolve_maven(pom, JARS_DIR / "lib", JARS_DIR / "lib.stamp")


class RocketMQ5Proxy(Service):
    """Apache RocketMQ 5: a name server JVM and a proxy JVM in local mode (the broker runs
    inside it); ``pid`` is the proxy's.

    Bound to 127.0.0.1 where 5.5.0 lets it be: the name server and the broker's listeners
    (``bindAddress``). The proxy's gRPC listener (``NettyServerBuilder.forPort``), its
    remoting listener and the broker's HA port bind every interface, with no setting to
    narrow them; the clients reach them on 127.0.0.1.
    """

    label = "Apache RocketMQ 5"

    def __init__(self, work: Path, cpu: int | None = None) -> None:
        super().__init__(work, cpu)
        self.namesrv = ""
        self.address = ""  # the broker's remoting listener
        self.grpc_port = 0
        self.namesrv_proc: subprocess.Popen[bytes] | None = None
        self.namesrv_log = work / "namesrv.log"
        self.home = work / "home"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pids(self) -> list[int]:
        return [self.pid, self.namesrv_proc.pid if self.namesrv_proc else 0]

    def _jvm(self, main: str, heap: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        self.home.mkdir(parents=True, exist_ok=True)
        lib = resolve_jars()
        return start_jvm(main, heap, args, lib=lib, home=self.home, log=log, cwd=self.work)

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        ns_port = free_port()
        ns_conf = self.work / "namesrv.conf"
        ns_conf.write_text(f"listenPort={ns_port}\nbindAddress=127.0.0.1\n")
        self.namesrv_proc = self._jvm(
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            NAMESRV_HEAP,
            ["-c", str(ns_conf)],
            self.namesrv_log,
        )
        wait_for_line(self.namesrv_proc, self.namesrv_log, "boot success")
        pin_pid(self.namesrv_proc.pid, self.cpu)
        self.namesrv = f"127.0.0.1:{ns_port}"
        port = _port_with_neighbours()
        broker_conf = self.work / "broker.conf"
        broker_conf.write_text(self._broker_conf(port))
        self.grpc_port = free_port()
        proxy_conf = self.work / "rmq-proxy.json"
        proxy_conf.write_text(
            json.dumps(
                {
                    "rocketMQClusterName": "DefaultCluster",
                    "namesrvAddr": self.namesrv,
                    "grpcServerPort": self.grpc_port,
                    "remotingListenPort": free_port(),
                    "grpcShutdownTimeSeconds": 1,  # not the 30 s default
                }
            )
        )
        self.proc = self._jvm(
            "org.apache.rocketmq.proxy.ProxyStartup",
            PROXY_HEAP,
            ["-pm", "local", "-bc", str(broker_conf), "-pc", str(proxy_conf)],
            self.log,
        )
        wait_for_line(self.proc, self.log, "rocketmq-proxy startup successfully")
        _wait_port(self.grpc_port, self.proc, self.log, 30.0)
        self.address = f"127.0.0.1:{port}"

    def _broker_conf(self, port: int) -> str:
        store = self.work / "store"
        values = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": self.namesrv,
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "listenPort": str(port),
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true",
        }
        return "".join(f"{k}={v}\n" for k, v in values.items())

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            self.exit_code = _stop_pid(proc, STOP_TIMEOUT_S)
        if self.exit_code == 143:  # a JVM's clean end on SIGTERM (128 + 15)
            self.exit_code = 0
        proc, self.namesrv_proc = self.namesrv_proc, None
        if proc is not None:
            _stop_pid(proc)

    def warnings(self) -> dict[str, Any]:
        """ERROR lines of the proxy's and the broker's logs (RocketMQ logs under
        ``~/logs/rocketmqlogs``, here the JVM's home), less routine ones: the shutdown's,
        and "telemetry on error" with "CANCELLED: client cancelled" on the next line, which
        the proxy logs whenever a client shuts down (its Telemetry stream ends so)."""
        shapes: Counter[str] = Counter()
        for name in ("proxy.log", "broker.log", "broker_default.log"):
            try:
                text = (self.home / "logs" / "rocketmqlogs" / name).read_text(errors="replace")
            except OSError:
                continue
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if " ERROR " not in line or re.search(r"unregister|[Ss]hutdown", line):
                    continue
                after = lines[i + 1] if i + 1 < len(lines) else ""
                if "telemetry on error" in line and "client cancelled" in after:
                    continue
                shapes[re.sub(r"\d+", "N", line.split(" ", 2)[-1])[:160]] += 1
        return {"lines": sum(shapes.values()), "kinds": dict(shapes.most_common(5))}


System = AeroliteGrpc | RocketMQ5Proxy


# ------------------------------------------------------------------------- admin


async def _make_group(server: Addressed, group: str) -> None:
    async with Admin(server.namesrv) as admin:
        await admin.create_subscription_group(server.address, SubscriptionGroupConfig(group))


# ------------------------------------------------------------------------- the runs


class Runner:
    """Drives one system: its topics, its groups, the driver runs against it."""

    def __init__(self, key: str, server: System, cfg: GrpcBenchConfig, work: Path, pin: bool):
        self.key = key
        self.server = server
        self.cfg = cfg
        self.home = work / f"home-{key}"
        self.cpu = CLIENT_CPU if pin else None

    def _args(self, topic: str, **extra: Any) -> dict[str, Any]:
        return {
            "endpoint": self.server.endpoint,
            "topic": topic,
            "body_bytes": self.cfg.body_bytes,
            "server_pids": self.server.pids,
            "cpu": self.cpu,
            **extra,
        }

    def produce(self, shape: str, topic: str, *, max_s: float, warmup_s: float) -> dict[str, Any]:
        """One produce run in ``shape`` into the new ``topic``; the stored count checked."""
        cfg = self.cfg
        asyncio.run(_admin(self.server, topic, cfg.queues))
        row = run_rmq5(
            "produce",
            self._args(
                topic,
                shape=shape,
                count=cfg.messages,
                max_s=max_s,
                warmup=cfg.warmup_messages if warmup_s else 0,
                warmup_s=warmup_s,
                window=cfg.window,
                threads=cfg.threads,
            ),
            home=self.home,
            timeout_s=max_s + warmup_s + 120.0,
        )
        row["acknowledged"] = int(row.get("ok") or 0) + int(row.get("warmup_ok") or 0)
        row["stored"] = stored_settled(self.server.address, topic, cfg.queues, row["acknowledged"])
        return row

    def preload(self) -> dict[str, Any]:
        cfg = self.cfg
        asyncio.run(_admin(self.server, BACKLOG_TOPIC, cfg.queues))
        row = run_rmq5(
            "preload",
            self._args(BACKLOG_TOPIC, count=cfg.consume_messages, window=cfg.window, max_s=120.0),
            home=self.home,
            timeout_s=240.0,
        )
        row["stored"] = stored_settled(self.server.address, BACKLOG_TOPIC, cfg.queues, row["ok"])
        return row

    def consume(self, group: str, expect: int) -> dict[str, Any]:
        """The backlog read by the new ``group`` (created here), ``expect`` messages."""
        cfg = self.cfg
        asyncio.run(_make_group(self.server, group))
        return run_rmq5(
            "consume",
            self._args(
                BACKLOG_TOPIC,
                group=group,
                expect=expect,
                max_s=cfg.consume_max_s,
                batch=cfg.batch,
                invisible_s=cfg.invisible_s,
                await_s=cfg.await_s,
            ),
            home=self.home,
            timeout_s=cfg.consume_max_s + 120.0,
        )

    def warm_up(self, notes: list[str]) -> dict[str, Any]:
        """Every path once, not timed: ``warm_s`` of async sends, as long of threaded sends,
        ``warm_consume`` messages of the backlog read by a group of its own. A JVM compiles
        its hot paths over the first tens of thousands of calls; Aerolite gets the same."""
        cfg, label = self.cfg, LABELS[self.key]
        out: dict[str, Any] = {}
        for shape in ("async", "threads"):
            row = attempt(
                f"{label} warm-up {shape}",
                functools.partial(
                    self.produce, shape, f"GrpcWarm_{shape}", max_s=cfg.warm_s, warmup_s=0.0
                ),
                notes,
            )
            out[shape] = _brief(row)
        row = attempt(
            f"{label} warm-up consume",
            functools.partial(
                self.consume, "GrpcWarm", min(cfg.warm_consume, cfg.consume_messages)
            ),
            notes,
        )
        out["consume"] = _brief(row)
        return out

    def repetition(self, rep: int, backlog: bool, notes: list[str]) -> dict[str, Any]:
        """One repetition of every run (the consume run only when the backlog is there)."""
        cfg, label = self.cfg, LABELS[self.key]
        out: dict[str, Any] = {}
        for shape in PRODUCE_RUNS:
            progress(f"{label}: produce, {run_label(shape, cfg)} ({rep + 1} of {cfg.reps})")
            out[shape] = attempt(
                f"{label} produce {shape}",
                functools.partial(
                    self.produce,
                    shape,
                    f"GrpcProduce_{shape}_{rep}",
                    max_s=cfg.max_s,
                    warmup_s=cfg.warmup_s,
                ),
                notes,
            )
        if backlog:
            progress(f"{label}: consume ({rep + 1} of {cfg.reps})")
            out["consume"] = attempt(
                f"{label} consume",
                functools.partial(self.consume, f"GrpcBench_{rep}", cfg.consume_messages),
                notes,
            )
        return out


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    """What the results keep of a warm-up run."""
    keys = ("error", "messages_per_s", "server_cpu_us_per_msg", "ok", "received", "seconds")
    return {k: row[k] for k in keys if k in row}


def _start(
    key: str, cfg: GrpcBenchConfig, work: Path, pin: bool, stack: contextlib.ExitStack
) -> System:
    cpu = SERVER_CPU if pin else None
    if key == "aerolite":
        settings = {"flushDiskType": "ASYNC_FLUSH", **dict(cfg.broker_settings)}
        return stack.enter_context(AeroliteGrpc(work / key, cpu, settings))
    return stack.enter_context(RocketMQ5Proxy(work / key, cpu))


def _stopped(server: System, out: dict[str, Any], notes: list[str]) -> None:
    out["log"] = server.warnings()
    out["exit_code"] = server.exit_code
    if server.exit_code not in (0, None):
        notes.append(f"{server.label}: exited with {server.exit_code} on SIGTERM")


def _bring_up(
    key: str,
    cfg: GrpcBenchConfig,
    work: Path,
    pin: bool,
    stack: contextlib.ExitStack,
    *,
    notes: list[str],
) -> tuple[System, Runner, dict[str, Any]]:
    """Start a system, preload its backlog and warm it up."""
    label = LABELS[key]
    progress(f"{label}: starting")
    server = _start(key, cfg, work, pin, stack)
    runner = Runner(key, server, cfg, work, pin)
    progress(f"{label}: preload {cfg.consume_messages:,} messages")
    system: dict[str, Any] = {"settings": getattr(server, "settings", {})}
    system["preload"] = attempt(f"{label} preload", runner.preload, notes)
    if cfg.warm_s > 0:
        progress(f"{label}: warm-up")
        system["warmup"] = runner.warm_up(notes)
    system["reps"] = []
    return server, runner, system


def measure(
    cfg: GrpcBenchConfig, work: Path, pin: bool, peers: dict[str, Peer], notes: list[str]
) -> dict[str, Any]:
    """Start the systems, preload and warm them up, run the repetitions (the systems taking
    turns), stop them; the merged results."""
    systems: dict[str, dict[str, Any]] = {}
    runners: dict[str, Runner] = {}
    servers: dict[str, System] = {}
    with contextlib.ExitStack() as stack:
        for key in SYSTEMS:
            if not peers[key].available:
                continue
            try:
                servers[key], runners[key], systems[key] = _bring_up(
                    key, cfg, work, pin, stack, notes=notes
                )
            except Exception as exc:  # reported; the other system is measured all the same
                reason = f"could not be started here: {first_line(exc)}"
                peers[key] = replace(peers[key], available=False, reason=reason)
                notes.append(f"{LABELS[key]}: {reason}")
        for rep in range(cfg.reps):
            for key, runner in runners.items():
                backlog = "error" not in systems[key]["preload"]
                systems[key]["reps"].append(runner.repetition(rep, backlog, notes))
        for key, server in servers.items():
            systems[key]["rss_kb"] = _rss(server.pids)
            systems[key]["client_log"] = client_log(runners[key].home)
        stack.close()  # stops every server, by PID
        for key, server in servers.items():
            _stopped(server, systems[key], notes)
    return {key: _merged(system) for key, system in systems.items()}


def _rss(pids: list[int]) -> dict[str, int]:
    """Resident set now and at its peak, KiB, summed over the server's processes."""
    out: dict[str, int] = {}
    for pid in pids:
        for key, value in rss_kb(pid).items():
            out[key] = out.get(key, 0) + value
    return out


def client_log(home: Path) -> dict[str, Any]:
    """Warning and error lines the 5.x client logged in the drivers against one system."""
    return scan_log(
        home / "logs" / "rocketmq_python" / "rocketmq_client.log",
        r"\[(WARNING|ERROR|CRITICAL)\]",
        strip=r"^\S+ \S+ ",
    )


def _merged(system: dict[str, Any]) -> dict[str, Any]:
    reps: list[dict[str, Any]] = system.pop("reps")
    runs = {run: merge_rows([r[run] for r in reps if run in r]) for run in RUNS}
    return {**system, "runs": {k: v for k, v in runs.items() if v}}


# ------------------------------------------------------------------------- results


def _ratio(a: Any, b: Any) -> float | None:
    ok = all(isinstance(v, int | float) and v > 0 for v in (a, b))
    return round(a / b, 2) if ok else None


def compute_ratios(systems: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Aerolite's figure over Apache RocketMQ 5's, per run (when both measured it)."""
    ours = (systems.get("aerolite") or {}).get("runs") or {}
    theirs = (systems.get("rocketmq5") or {}).get("runs") or {}
    out: dict[str, dict[str, float | None]] = {}
    for run in RUNS:
        a, b = ours.get(run) or {}, theirs.get(run) or {}
        if not a or not b or "error" in a or "error" in b:
            continue
        out[run] = {
            "throughput": _ratio(a.get("messages_per_s"), b.get("messages_per_s")),
            "p50": _ratio(a.get("p50_us"), b.get("p50_us")),
            "p99": _ratio(a.get("p99_us"), b.get("p99_us")),
            "server_cpu": _ratio(a.get("server_cpu_us_per_msg"), b.get("server_cpu_us_per_msg")),
        }
    return out


def run_label(run: str, cfg: GrpcBenchConfig | dict[str, Any]) -> str:
    c = cfg if isinstance(cfg, dict) else asdict(cfg)
    return {
        "one": "send() one at a time",
        "threads": f"{c['threads']} threads each calling send()",
        "async": f"{c['window']} send_async() in flight",
        "consume": f"SimpleConsumer receive({c['batch']}) + ack() each",
    }[run]


def run(quick: bool = False) -> Report:
    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    client, why_not = client_version()
    pin = cfg.pin_cpus and can_pin(CLIENT_CPU, SERVER_CPU)
    peers = _peers(cfg)
    notes: list[str] = []
    results = results_head(
        NAME,
        quick=quick,
        machine=machine_info(),
        config={**asdict(cfg), "pinned": pin},
        peers=peers,
        notes=notes,
        client=client or None,
    )
    if why_not:
        results["skipped"] = why_not
        results["seconds"] = round(time.perf_counter() - started, 1)
        console = f"grpc: not run: {why_not}\n\n({results['seconds']} s)"
        return Report(NAME, results, console, "", notes)
    work = bench_work_dir("grpc-")
    try:
        results["systems"] = measure(cfg, work, pin, peers, notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["peers"] = {k: asdict(p) for k, p in peers.items()}
    results["config"]["work_dir"] = str(work.relative_to(REPO_ROOT))
    results["ratios"] = compute_ratios(results["systems"])
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results), notes)


def _peers(cfg: GrpcBenchConfig) -> dict[str, Peer]:
    aerolite = Peer(
        "aerolite",
        LABELS["aerolite"],
        True,
        version="`python -m broker standalone`, its gRPC front end in-process, ASYNC_FLUSH",
    )
    label = f"Apache RocketMQ {JAVA_VERSION}"
    if not cfg.java:
        java = Peer("rocketmq5", label, False, "not run with --quick (two JVMs and Maven)")
    elif (reason := missing_reason()) is not None:
        java = Peer("rocketmq5", label, False, reason)
    else:
        java = Peer(
            "rocketmq5",
            label,
            True,
            version=f"name server + proxy in local mode (broker in the proxy's JVM) "
            f"{JAVA_VERSION} from Maven Central, JVM heap {PROXY_HEAP} / {NAMESRV_HEAP}, "
            "ASYNC_FLUSH (its proxy's gRPC and remoting listeners and the broker's HA port "
            "bind every interface: 5.5.0 has no setting for them; the rest 127.0.0.1)",
        )
    return {"aerolite": aerolite, "rocketmq5": java}


# ------------------------------------------------------------------------- render

NOISY_SPREAD = 1.3  # repetitions whose rates differ more than this are flagged
NOISY_FOREIGN = 0.25  # ... or runs during which other work took this share of a CPU


def _noise(row: dict[str, Any]) -> str:
    flags = []
    spread = (row.get("spread") or {}).get("messages_per_s")
    if spread and spread["min"] > 0 and spread["max"] / spread["min"] > NOISY_SPREAD:
        flags.append(f"spread {spread['max'] / spread['min']:.2f}x")
    foreign, window = row.get("foreign_cpu_s"), row.get("cpu_window_s")
    if foreign and window and foreign / window > NOISY_FOREIGN:
        flags.append(f"other work {100 * foreign / window:.0f} % CPU")
    return ", ".join(flags)


def _row(results: dict[str, Any], key: str, run: str) -> dict[str, Any]:
    return ((results["systems"].get(key) or {}).get("runs") or {}).get(run) or {}


def _rate(row: dict[str, Any]) -> str:
    if not row:
        return "—"
    if "error" in row:
        return "failed"
    return _n(row.get("messages_per_s")) + rate_range(row)


def _ms(row: dict[str, Any]) -> str:
    if not row or "error" in row or "p50_us" not in row:
        return "—"
    return f"{_f(row['p50_us'] / 1e3, '.2f')} / {_f(row['p99_us'] / 1e3, '.2f')}"


def _x(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}x"


HEADERS = (
    "run",
    "Aerolite msg/s",
    "RocketMQ 5 msg/s",
    "msg/s Aerolite ÷ RocketMQ",
    "p50 / p99 ms: Aerolite",
    "RocketMQ",
    "server CPU µs/msg: Aerolite",
    "RocketMQ",
    "server CPU Aerolite ÷ RocketMQ",
    "client CPU µs/msg: Aerolite",
    "RocketMQ",
)


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for run_ in RUNS:
        a, r = _row(results, "aerolite", run_), _row(results, "rocketmq5", run_)
        ratio = (results.get("ratios") or {}).get(run_) or {}
        verb = "consume" if run_ == "consume" else "produce"
        rows.append(
            [
                f"{verb}, {run_label(run_, results['config'])}",
                _rate(a),
                _rate(r),
                _x(ratio.get("throughput")),
                _ms(a),
                _ms(r),
                _f(a.get("server_cpu_us_per_msg"), ",.0f"),
                _f(r.get("server_cpu_us_per_msg"), ",.0f"),
                _x(ratio.get("server_cpu")),
                _f(a.get("client_cpu_us_per_msg"), ",.0f"),
                _f(r.get("client_cpu_us_per_msg"), ",.0f"),
            ]
        )
    return rows


def _odd_lines(results: dict[str, Any]) -> list[str]:
    """Failed sends or receives, lost or repeated messages, noise, server log errors."""
    lines: list[str] = []
    for key, system in results["systems"].items():
        label = LABELS[key]
        preload = system.get("preload") or {}
        if preload and "error" not in preload and preload.get("stored") != preload.get("ok"):
            lines.append(
                f"{label}, preload: {preload.get('ok')} sends acknowledged, the queues hold "
                f"{preload.get('stored')}"
            )
        for run_, row in (system.get("runs") or {}).items():
            lines += _row_lines(label, run_label(run_, results["config"]), row)
        for what, log in (("server", system.get("log")), ("client", system.get("client_log"))):
            if log and log.get("lines"):
                kinds = log.get("events") or log.get("kinds") or {}
                top = "; ".join(f"{n} x {k[:120]}" for k, n in kinds.items())
                lines.append(f"{label}: {what} log, {log['lines']} warning/error lines: {top}")
    return lines


def _row_lines(label: str, name: str, row: dict[str, Any]) -> list[str]:
    if not row or "error" in row:
        return []
    lines = []
    failed = int(row.get("errors") or 0) + int(row.get("receive_errors") or 0)
    failed += int(row.get("ack_errors") or 0)
    if failed:
        kinds = "; ".join(f"{n} x {k[:140]}" for k, n in (row.get("error_kinds") or {}).items())
        lines.append(f"{label}, {name}: {failed} calls failed ({kinds})")
    if row.get("failed_repetitions"):
        lines.append(f"{label}, {name}: failed in {row['failed_repetitions']} repetitions")
    if "stored" in row and row["stored"] != row.get("acknowledged"):
        lines.append(
            f"{label}, {name}: {row.get('acknowledged', 0):,} sends acknowledged, the queues "
            f"hold {row['stored']:,} (median over the repetitions)"
        )
    if "expect" in row and row.get("received", 0) < row["expect"]:
        lines.append(
            f"{label}, {name}: received {row.get('received', 0):,} of {row['expect']:,} "
            "messages before the time limit"
        )
    if row.get("duplicates"):
        lines.append(f"{label}, {name}: {row['duplicates']} messages delivered twice")
    if row.get("start_errors"):
        kinds = "; ".join(f"{n} x {k[:120]}" for k, n in row["start_errors"].items())
        lines.append(f"{label}, {name}: receives failed before the first message ({kinds})")
    if noise := _noise(row):
        lines.append(f"{label}, {name}: noisy ({noise})")
    return lines


def _rss_line(results: dict[str, Any]) -> str:
    parts = []
    for key, system in results["systems"].items():
        rss = (system.get("rss_kb") or {}).get("VmRSS")
        if rss:
            parts.append(f"{LABELS[key]} {rss / 1024:,.0f} MiB")
    if not parts:
        return ""
    java = " (the proxy JVM with the broker, plus the name server's JVM)"
    return (
        "Resident memory of the server processes at the end: "
        + "; ".join(parts)
        + (java if "rocketmq5" in results["systems"] else "")
        + "."
    )


def _peer_lines(results: dict[str, Any]) -> list[str]:
    out = []
    for peer in results["peers"].values():
        if peer["available"]:
            out.append(f"{peer['label']}: {peer['version']}")
        else:
            out.append(f"{peer['label']}: **not measured**, {peer['reason']}")
    return out


def _warm_text(cfg: dict[str, Any]) -> str:
    if not cfg["warm_s"]:
        return "No warm-up before the repetitions (quick run). "
    return (
        f"Before the repetitions each system is warmed up, not timed: {cfg['warm_s']:g} s "
        f"of `send_async()`, {cfg['warm_s']:g} s of threaded `send()`, "
        f"{cfg['warm_consume']:,} messages received and acknowledged (a JVM compiles its "
        "hot paths over the first tens of thousands of calls: in trial runs Apache "
        "RocketMQ's first seconds were several times slower and costlier). "
    )


def _method(cfg: dict[str, Any]) -> str:
    return (
        "One client for both: the official RocketMQ 5 Python client, driven from a process "
        f"of its own per run; topics of {cfg['queues']} queues, created beforehand; "
        f"{cfg['body_bytes']:,} B bodies; both systems up for the whole benchmark, ASYNC_FLUSH. "
        + _warm_text(cfg)
        + f"Then {cfg['reps']} repetitions in which the two systems take turns run by run; "
        "a figure is the median with the lowest and highest in brackets. **Produce**, "
        f"into a new topic, after {cfg['warmup_s']:g} s of `send_async()` (not timed), up "
        f"to {cfg['messages']:,} messages or {cfg['max_s']:g} s: `send()` one at a time; "
        f"{cfg['threads']} threads each calling `send()`; a window of {cfg['window']} "
        "`send_async()` futures in flight, a new send as each one completes. Latency is per "
        "send, from the call to its answer. **Consume**: "
        f"{cfg['consume_messages']:,} messages preloaded once (not timed), read whole in "
        "each repetition by a new consumer group: a `SimpleConsumer` calling "
        f"`receive({cfg['batch']}, {cfg['invisible_s']} s)` and `ack()` on each message "
        "(one RPC per message: the client has no batch ack) before the next receive; the "
        "rate runs from the first receive that returned messages to the last ack, the "
        "latency columns are a `receive()` call's. **Server CPU** is the on-CPU time of "
        "the server's processes over the timed part per message: Aerolite's one process; "
        "Apache RocketMQ's proxy JVM (with the broker in it) plus its name server's. "
        "**Client CPU** is the driver's: the 5.x client is Python over grpcio and costs "
        "about as much CPU per message as the servers, so the rates are bounded "
        "by the client as much as by the server; server CPU per message compares the two "
        "servers more directly. Ratios are Aerolite's over Apache RocketMQ's."
    )


def render_console(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = [
        f"grpc: the RocketMQ 5 client {results.get('client')}, {cfg['body_bytes']} B bodies, "
        f"{cfg['reps']} repetitions, {'pinned' if cfg['pinned'] else 'not pinned'}"
        f"{', quick' if results['quick'] else ''}; {machine_line(results['machine'])}",
        *(f"  {line.replace('**', '')}" for line in _peer_lines(results)),
        "",
        text_table(HEADERS, _rows(results)),
    ]
    lines += console_tail(results, _rss_line(results), _odd_lines(results))
    return "\n".join(lines)


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    pinning = pinning_text(cfg["pinned"], SERVER_CPU, CLIENT_CPU)
    parts = [
        "## gRPC: RocketMQ 5 clients on Aerolite and on Apache RocketMQ 5",
        "",
        measured_line(results, pinning),
        "",
        f"- Client: {results.get('client')}",
        *(f"- {line}" for line in _peer_lines(results)),
        "",
        _method(cfg),
        "",
        markdown_table(HEADERS, _rows(results)),
    ]
    parts += markdown_tail(
        results, _rss_line(results), _odd_lines(results), "Failures and warnings in this run"
    )
    return "\n".join(parts)
