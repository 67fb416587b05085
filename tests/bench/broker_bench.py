"""Broker benchmark: the standalone broker under a real RocketMQ client, next to Redis Streams
and NATS JetStream driven the same way, and the raw uvloop echo ceiling.

What is measured, over loopback TCP with 1 KiB bodies, every client in a driver process of its
own (``tests.bench.drivers``; the C++ RocketMQ client cannot be unloaded), every server in its
own process with its data in a temporary directory under ``bench-results/``:

- **Produce.** One client process, N threads (1 and 8), each sending one message and waiting
  for its acknowledgement before the next: the official Python client's
  ``Producer.send_sync`` (PyPI ``rocketmq`` 0.4.4, the C++ client 1.2.x) against Aerolite's
  ``python -m broker standalone``; a blocking ``XADD`` per thread (redis-py with hiredis, one
  connection per thread) against ``redis-server``; N asyncio tasks each awaiting
  ``js.publish`` (nats-py on uvloop, one connection) against ``nats-server -js``. Up to
  ``produce_messages`` or ``produce_max_s`` per run, after ``warmup_messages`` on one thread.
  Once with asynchronous flushing (Aerolite ASYNC_FLUSH, Redis ``appendfsync everysec``,
  JetStream's default) and once with a flush per acknowledgement (Aerolite SYNC_FLUSH, Redis
  ``appendfsync always``, JetStream ``sync_interval: always`` where the server knows it).
- **Consume.** ``consume_messages`` preloaded (not timed), then read whole twice: by a
  consumer whose progress the server keeps (RocketMQ ``PushConsumer`` in a new group; Redis
  ``XREADGROUP`` + ``XACK`` per batch; a durable JetStream pull consumer acking each batch)
  and by a reader from the first message that keeps no state on the server (RocketMQ
  ``PullConsumer`` over every queue from offset 0; ``XREAD``; an ephemeral JetStream pull
  consumer without acks), ``pull_batch`` messages per request. The rate runs from the first
  message received to the last.
- **Echo ceiling.** The raw uvloop echo server of the remoting benchmark (``echo_server``),
  driven by its load generator with the same number of requests in flight as each client
  shape (N for N producer threads, one per queue for the push consumer, one for the pull
  reader) and the same payload per request (1 KiB, or ``pull_batch`` KiB for consumers): the
  most any Python server on uvloop could answer.
- **Stalls.** During every run a ``StallProbe`` (``peers``) sends the server its cheapest
  request every 20 ms over a connection of its own: a probe that waits long means the server
  did not run, whatever the client saw. The same probe on Redis and NATS is the control for
  the machine's own hiccups. Failed sends, the C++ client's log and the servers' warnings are
  counted and reported.

Figures are ratios measured in the same run: Aerolite / Redis, Aerolite / NATS, Aerolite / echo
ceiling. With two or more CPUs, every server is pinned to CPU 1 and every client (driver or
load generator) to CPU 0, so no system gets more than one core. ``reps`` repetitions (3),
the brokers taking turns within each; figures are medians with their range
(``tests.bench.repeat``). Redis and NATS run here only with ``other_peers`` (the quick
mode): ``make bench`` compares them in the SDK benchmark with their best asyncio clients.
Peers that are not installed are reported as such and skipped. Nothing here asserts speed.

``python -m tests.bench.broker_bench --profile`` is not part of the benchmark: it samples the
broker with py-spy under the produce load and prints the functions with the most self time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from remoting import ClientConfig, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.bodies import KVTable
from remoting.headers import CreateTopicRequestHeader
from tests.bench import common, loadgen
from tests.bench.common import (
    NATS_NO_SYNC,
    DriverRun,
    against_echo_server,
    attempt,
    bench_work_dir,
    broker_stopped,
    can_pin,
    first_line,
    parse_profile_args,
    progress,
    results_head,
    send_failures,
    server_log_lines,
)
from tests.bench.common import row_rate as _rate
from tests.bench.java_rocketmq import VERSION as ROCKETMQ_VERSION
from tests.bench.java_rocketmq import RocketMQJavaBroker, java_peer, rss_kb
from tests.bench.peers import (
    AeroliteBroker,
    DriverResult,
    Peer,
    Service,
    cpp_client_log,
    dist_version,
    find_peers,
)
from tests.bench.profiling import (
    profile_while_driving,
    save_summary,
    speedscope_top,
    top_self_rows,
)
from tests.bench.remoting_server import ECHO_CODE
from tests.bench.repeat import merge, rate_range
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
from tests.bench.report import (
    fmt_count as _n,
)
from tests.bench.report import (
    fmt_num as _f,
)

NAME = "broker"
LOADGEN_CPU = 0  # every client
SERVER_CPU = 1  # every server
ROCKETMQ_DRIVER = "tests.bench.drivers.rocketmq_client"
REDIS_DRIVER = "tests.bench.drivers.redis_client"
NATS_DRIVER = "tests.bench.drivers.nats_client"
PRODUCE_TOPIC = "BenchProduce"
CONSUME_TOPIC = "BenchConsume"
MB = 1_000_000
# The C++ client 1.2.x zips a batch whose body passes 4 KiB, which no broker can split
# (rocketmq-client-cpp #186); batches for the preload stay below that.
CPP_BATCH_LIMIT_BYTES = 4000


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerBenchConfig:
    """Counts and time budgets; every loop stops at whichever limit comes first."""

    body_bytes: int = 1024
    reps: int = 3  # every broker's runs, repeated; figures are medians with their range
    threads: tuple[int, ...] = (1, 8)
    produce_messages: int = 20_000  # per run
    produce_max_s: float = 5.0  # per run
    warmup_messages: int = 200  # per run, one thread, before the timed part
    sync_flush: bool = True  # the produce runs once more with a flush per acknowledgement
    consume_messages: int = 50_000
    consume_max_s: float = 15.0
    pull_batch: int = 32  # messages per pull request (RocketMQ's maxTransferCountOnMessageInMemory)
    queues: int = 8  # per topic (writeQueueNums = readQueueNums)
    echo_requests: int = 200_000  # per echo run
    echo_max_s: float = 1.0  # per echo run
    peers: bool = True
    # Redis and NATS with threaded clients too; make bench compares them in the SDK
    # benchmark, with their best asyncio clients, and keeps this one to the two brokers
    other_peers: bool = False
    pin_cpus: bool = True
    broker_settings: tuple[tuple[str, str], ...] = ()


FULL = BrokerBenchConfig()
QUICK = replace(
    FULL,
    reps=1,
    other_peers=True,
    threads=(2,),
    produce_messages=300,
    produce_max_s=5.0,
    warmup_messages=20,
    consume_messages=300,
    consume_max_s=10.0,
    queues=2,
    echo_requests=2_000,
    echo_max_s=0.2,
    broker_settings=(
        ("mappedFileSizeCommitLog", str(16 << 20)),
        ("maxHashSlotNum", "10000"),
        ("maxIndexNum", "40000"),
    ),
)


def rocketmq_available() -> bool:
    """Whether the official client (PyPI ``rocketmq``) can be imported; it is loaded only in
    driver processes, so this checks for the package without loading the C++ library."""
    import importlib.util

    return importlib.util.find_spec("rocketmq") is not None


# ----------------------------------------------------------------------------- helpers


def _rate_row(done: dict[str, Any], body_bytes: int, messages_key: str) -> dict[str, Any]:
    """A driver's ``done`` line plus what every table shows: MB/s, CPU per message."""
    rate = float(done.get("messages_per_s") or 0.0)
    messages = int(done.get(messages_key) or 0)
    row = dict(done)
    row["mb_per_s"] = round(rate * body_bytes / MB, 2)
    server_cpu = done.get("server_cpu_s")
    row["server_cpu_us_per_msg"] = (
        round(server_cpu / messages * 1e6, 1) if server_cpu is not None and messages else None
    )
    window = done.get("cpu_window_s") or 0.0
    row["client_cpu_pct"] = round(100 * done["client_cpu_s"] / window) if window else None
    row["server_cpu_pct"] = (
        round(100 * server_cpu / window) if window and server_cpu is not None else None
    )
    return row


# ----------------------------------------------------------------------- echo ceiling


async def _echo_run(port: int, body_bytes: int, window: int, cfg: BrokerBenchConfig) -> float:
    """Requests per second with ``window`` in flight, after a short warm-up."""
    ring = loadgen.FrameRing.echo_requests(ECHO_CODE, b"x" * body_bytes, max(64, window * 4))
    proto = await loadgen.connect(port, short_frame_bytes=body_bytes)
    try:
        await loadgen.run_pipelined(
            proto, ring, max_requests=max(window * 50, 500), window=window, max_s=2.0
        )
        run = await loadgen.run_pipelined(
            proto, ring, max_requests=cfg.echo_requests, window=window, max_s=cfg.echo_max_s
        )
    finally:
        await loadgen.close(proto)
    if proto.short_frames:
        raise RuntimeError("echo server: responses without the echoed body")
    return run.requests_per_s


async def _echo_shapes(port: int, cfg: BrokerBenchConfig) -> dict[str, Any]:
    batch_bytes = cfg.pull_batch * cfg.body_bytes
    out: dict[str, Any] = {"produce": {}, "consume": {}}
    for n in cfg.threads:
        rps = await _echo_run(port, cfg.body_bytes, n, cfg)
        out["produce"][str(n)] = {
            "window": n,
            "request_bytes": cfg.body_bytes,
            "requests_per_s": round(rps),
            "messages_per_s": round(rps),
            "mb_per_s": round(rps * cfg.body_bytes / MB, 1),
        }
    for kind, window in (("push", cfg.queues), ("pull", 1)):
        rps = await _echo_run(port, batch_bytes, window, cfg)
        out["consume"][kind] = {
            "window": window,
            "request_bytes": batch_bytes,
            "requests_per_s": round(rps),
            "messages_per_s": round(rps * cfg.pull_batch),
            "mb_per_s": round(rps * batch_bytes / MB, 1),
        }
    return out


def echo_ceiling(cfg: BrokerBenchConfig, pin: bool) -> dict[str, Any]:
    """The raw uvloop echo server, in its own process, under each client shape."""
    return against_echo_server(
        functools.partial(_echo_shapes, cfg=cfg),
        SERVER_CPU if pin else None,
        LOADGEN_CPU if pin else None,
    )


# ---------------------------------------------------------------------------- Aerolite


class Addressed(Protocol):
    """A running broker as the admin requests need it: its remoting and name server
    addresses (``AeroliteBroker``, ``RocketMQJavaBroker``, another tree's standalone)."""

    @property
    def address(self) -> str: ...

    @property
    def namesrv(self) -> str: ...


async def _admin(broker: Addressed, topic: str, queues: int) -> None:
    """Create ``topic`` with ``queues`` queues, then wait for its route on the name server."""
    client = RemotingClient(ClientConfig(request_timeout_s=10.0))
    await client.start()
    try:
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=6,
            topic_filter_type="SINGLE_TAG",
            topic_sys_flag=0,
            order=False,
        ).to_ext_fields()
        response = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        )
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"creating {topic}: {response.code} {response.remark}")
        deadline = time.monotonic() + 15.0
        while True:
            route = await client.invoke(
                broker.namesrv,
                RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
            )
            if route.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no route for {topic} on the name server after 15 s")
            await asyncio.sleep(0.1)
    finally:
        await client.shutdown()


async def _runtime(broker: AeroliteBroker | RocketMQJavaBroker) -> dict[str, str]:
    client = RemotingClient(ClientConfig(request_timeout_s=10.0))
    await client.start()
    try:
        response = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
    finally:
        await client.shutdown()
    table = KVTable.decode(response.body_bytes).table
    keys = ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "dispatchBehindBytes")
    return {k: table[k] for k in keys if k in table}


class _Run(DriverRun):
    """Shared arguments of one system's measurements."""

    def __init__(
        self, cfg: BrokerBenchConfig, home: Path, server: Service, pin: bool, notes: list[str]
    ) -> None:
        super().__init__(cfg.body_bytes, home, server, LOADGEN_CPU if pin else None)
        self.cfg = cfg
        self.notes = notes

    def driver(self, module: str, command: str, timeout_s: float, **extra: Any) -> DriverResult:
        """Run a driver with a ``StallProbe`` on the server; the probe's summary goes into
        the ``done`` line as ``stall_probe``."""
        result, probe = self.probed(module, command, timeout_s, **extra)
        result.done["stall_probe"] = probe
        return result


def _aerolite_produce(
    run: _Run, broker: AeroliteBroker | RocketMQJavaBroker, threads: int
) -> dict[str, Any]:
    cfg = run.cfg
    result = run.driver(
        ROCKETMQ_DRIVER,
        "produce",
        cfg.produce_max_s,
        namesrv=broker.namesrv,
        topic=PRODUCE_TOPIC,
        threads=threads,
        count=cfg.produce_messages,
        max_s=cfg.produce_max_s,
        warmup=cfg.warmup_messages,
    )
    row = _rate_row(result.done, cfg.body_bytes, "ok")
    row["client_log"] = cpp_client_log(run.home, result.pid)
    return row


def _aerolite_preload(run: _Run, broker: AeroliteBroker | RocketMQJavaBroker) -> dict[str, Any]:
    """``consume_messages`` into CONSUME_TOPIC through ``send_batch`` (the driver retries
    batches that fail: the C++ client drops a few sends under contention)."""
    cfg = run.cfg
    batch = max(1, CPP_BATCH_LIMIT_BYTES // (cfg.body_bytes + 200))
    stored = failed = 0
    started = time.perf_counter()
    # Whole batches only, so that exactly consume_messages are stored.
    full, rest = divmod(cfg.consume_messages, batch)
    for count, size in ((full * batch, batch), (rest, rest)):
        if count <= 0:
            continue
        done = run.driver(
            ROCKETMQ_DRIVER,
            "preload",
            cfg.consume_max_s,
            namesrv=broker.namesrv,
            topic=CONSUME_TOPIC,
            count=count,
            batch=size,
            threads=4,
            max_s=cfg.consume_max_s,
        ).done
        stored += int(done["ok"])
        failed += int(done["failed_batches"])
    if stored != cfg.consume_messages:
        raise RuntimeError(f"preload stored {stored} of {cfg.consume_messages} messages")
    return {
        "messages": stored,
        "batch": batch,
        "failed_batches": failed,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _aerolite_consume(
    run: _Run, broker: AeroliteBroker | RocketMQJavaBroker, kind: str
) -> dict[str, Any]:
    cfg = run.cfg
    extra: dict[str, Any] = {"group": f"bench_{kind}_{uuid.uuid4().hex[:8]}"}
    if kind == "pull":
        extra["max_num"] = cfg.pull_batch
    result = run.driver(
        ROCKETMQ_DRIVER,
        kind,
        cfg.consume_max_s,
        namesrv=broker.namesrv,
        topic=CONSUME_TOPIC,
        expect=cfg.consume_messages,
        max_s=cfg.consume_max_s,
        **extra,
    )
    row = _rate_row(result.done, cfg.body_bytes, "received")
    row["client_log"] = cpp_client_log(run.home, result.pid)
    return row


def aerolite_phase(
    cfg: BrokerBenchConfig,
    work: Path,
    pin: bool,
    *,
    sync: bool,
    notes: list[str],
    java: bool = False,
) -> dict[str, Any]:
    """One broker (ASYNC_FLUSH or SYNC_FLUSH): the produce runs, and with ASYNC_FLUSH the
    consume runs. ``java`` runs the same against Apache RocketMQ's own broker, driven by the
    same C++ client: the brokers compared with the client held fixed."""
    flush = "SYNC_FLUSH" if sync else "ASYNC_FLUSH"
    name = "rocketmq" if java else "aerolite"
    settings = {"flushDiskType": flush, **({} if java else dict(cfg.broker_settings))}
    tag = f"{'Apache RocketMQ' if java else 'Aerolite'} {flush}"
    out: dict[str, Any] = {"settings": settings, "produce": {}, "consume": {}}
    broker: AeroliteBroker | RocketMQJavaBroker = (RocketMQJavaBroker if java else AeroliteBroker)(
        work / f"{name}-{flush.lower()}", SERVER_CPU if pin else None, settings
    )
    home = work / f"home-{name}-{flush.lower()}"
    try:
        with broker:
            run = _Run(cfg, home, broker, pin, notes)
            asyncio.run(_admin(broker, PRODUCE_TOPIC, cfg.queues))
            for n in cfg.threads:
                progress(f"{tag}: produce, {n} thread(s)")
                out["produce"][str(n)] = attempt(
                    f"{tag} produce x{n}",
                    functools.partial(_aerolite_produce, run, broker, n),
                    notes,
                )
            if not sync:
                asyncio.run(_admin(broker, CONSUME_TOPIC, cfg.queues))
                progress(f"{tag}: preload {cfg.consume_messages:,} messages")
                out["preload"] = attempt(
                    f"{tag} preload", lambda: _aerolite_preload(run, broker), notes
                )
                if "error" not in out["preload"]:
                    for kind in ("push", "pull"):
                        progress(f"{tag}: consume, {kind}")
                        out["consume"][kind] = attempt(
                            f"{tag} {kind}",
                            functools.partial(_aerolite_consume, run, broker, kind),
                            notes,
                        )
            with contextlib.suppress(Exception):
                out["runtime"] = asyncio.run(_runtime(broker))
            # The broker's resident memory after its runs, and its peak (the whole process:
            # Aerolite's holds its name server too, the JVM's does not).
            out["rss_kb"] = rss_kb(broker.pid)
    except Exception as exc:  # a system that fails is reported, the benchmark goes on
        first = first_line(exc)
        notes.append(f"{tag}: {first}")
        out["error"] = first
    broker_stopped(out, broker, tag, notes)
    return out


# ------------------------------------------------------------------------------- peers


def _peer_produce(run: _Run, module: str, threads: int, **where: Any) -> dict[str, Any]:
    cfg = run.cfg
    result = run.driver(
        module,
        "produce",
        cfg.produce_max_s,
        threads=threads,
        count=cfg.produce_messages,
        max_s=cfg.produce_max_s,
        warmup=cfg.warmup_messages,
        **where,
    )
    return _rate_row(result.done, cfg.body_bytes, "ok")


def _peer_consume(run: _Run, module: str, command: str, **where: Any) -> dict[str, Any]:
    cfg = run.cfg
    result = run.driver(
        module,
        command,
        cfg.consume_max_s,
        expect=cfg.consume_messages,
        max_s=cfg.consume_max_s,
        max_num=cfg.pull_batch,
        **where,
    )
    row = _rate_row(result.done, cfg.body_bytes, "received")
    row["command"] = command
    return row


@dataclass(frozen=True, slots=True)
class PeerSpec(common.PeerSpec):
    consume_commands: tuple[str, str]  # (push counterpart, pull counterpart)


PEER_SPECS = (
    PeerSpec("redis", REDIS_DRIVER, ("group", "read")),
    PeerSpec("nats", NATS_DRIVER, ("durable", "ephemeral")),
)


def peer_phase(
    spec: PeerSpec,
    label: str,
    cfg: BrokerBenchConfig,
    work: Path,
    pin: bool,
    *,
    sync: bool,
    notes: list[str],
) -> dict[str, Any]:
    mode = "sync" if sync else "async"
    tag = f"{label} ({mode})"
    out: dict[str, Any] = {"produce": {}, "consume": {}}
    server = spec.server(work / f"{spec.key}-{mode}", SERVER_CPU if pin else None, sync)
    try:
        with server:
            run = _Run(cfg, work / f"home-{spec.key}-{mode}", server, pin, notes)
            produce_at = spec.where(server, "produce")
            for n in cfg.threads:
                progress(f"{tag}: produce, {n} thread(s)")
                out["produce"][str(n)] = attempt(
                    f"{tag} produce x{n}",
                    functools.partial(_peer_produce, run, spec.module, n, **produce_at),
                    notes,
                )
            if not sync:
                consume_at = spec.where(server, "consume")
                progress(f"{tag}: preload {cfg.consume_messages:,} messages")
                out["preload"] = attempt(
                    f"{tag} preload",
                    lambda: (
                        run.driver(
                            spec.module,
                            "preload",
                            cfg.consume_max_s,
                            count=cfg.consume_messages,
                            **consume_at,
                        ).done
                    ),
                    notes,
                )
                if "error" not in out["preload"]:
                    for kind, command in zip(("push", "pull"), spec.consume_commands, strict=True):
                        progress(f"{tag}: consume, {command}")
                        out["consume"][kind] = attempt(
                            f"{tag} {command}",
                            functools.partial(
                                _peer_consume, run, spec.module, command, **consume_at
                            ),
                            notes,
                        )
    except Exception as exc:  # a peer that fails is reported, the benchmark goes on
        first = first_line(exc)
        if sync and spec.key == "nats" and "unknown field" in str(exc):
            out["skipped"] = NATS_NO_SYNC
        else:
            notes.append(f"{tag}: {first}")
            out["error"] = first
    out["log"] = server.warnings()
    return out


# ---------------------------------------------------------------------------- ratios


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not b or not a:
        return None
    return round(a / b, 2)


def compute_ratios(results: dict[str, Any]) -> dict[str, Any]:
    systems = results["systems"]
    echo = results.get("echo") or {}
    out: dict[str, Any] = {"produce": {}, "consume": {}}
    for mode in ("async", "sync"):
        aero = systems.get(f"aerolite_{mode}") or {}
        per_level: dict[str, Any] = {}
        for n, row in (aero.get("produce") or {}).items():
            mine = _rate(row)
            per_level[n] = {
                "vs_redis": _ratio(
                    mine, _rate((systems.get(f"redis_{mode}") or {}).get("produce", {}).get(n))
                ),
                "vs_nats": _ratio(
                    mine, _rate((systems.get(f"nats_{mode}") or {}).get("produce", {}).get(n))
                ),
                "vs_echo": _ratio(mine, _rate(echo.get("produce", {}).get(n))),
                "vs_rocketmq": _ratio(
                    mine,
                    _rate((systems.get(f"rocketmq_{mode}") or {}).get("produce", {}).get(n)),
                ),
            }
            if mode == "sync":
                async_row = (systems.get("aerolite_async") or {}).get("produce", {}).get(n)
                per_level[n]["vs_async"] = _ratio(mine, _rate(async_row))
        out["produce"][mode] = per_level
    aero = systems.get("aerolite_async") or {}
    for kind in ("push", "pull"):
        mine = _rate((aero.get("consume") or {}).get(kind))
        out["consume"][kind] = {
            "vs_redis": _ratio(
                mine, _rate((systems.get("redis_async") or {}).get("consume", {}).get(kind))
            ),
            "vs_nats": _ratio(
                mine, _rate((systems.get("nats_async") or {}).get("consume", {}).get(kind))
            ),
            "vs_echo": _ratio(mine, _rate(echo.get("consume", {}).get(kind))),
            "vs_rocketmq": _ratio(
                mine, _rate((systems.get("rocketmq_async") or {}).get("consume", {}).get(kind))
            ),
        }
    rss = {}
    for mode in ("async", "sync"):
        mine_rss = (systems.get(f"aerolite_{mode}") or {}).get("rss_kb") or {}
        java_rss = (systems.get(f"rocketmq_{mode}") or {}).get("rss_kb") or {}
        rss[mode] = {
            key: _ratio(mine_rss.get(key), java_rss.get(key)) for key in ("VmRSS", "VmHWM")
        }
    out["rss_vs_rocketmq"] = rss
    return out


# ------------------------------------------------------------------------------- run


def run(quick: bool = False, config: BrokerBenchConfig | None = None) -> Report:
    """Run the whole broker benchmark and return its report."""
    cfg = config or (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_info()  # before our own load shows in the load average
    pin = cfg.pin_cpus and can_pin(LOADGEN_CPU, SERVER_CPU)
    notes: list[str] = []
    peers = find_peers() if cfg.peers else {}
    if cfg.peers:
        peers["rocketmq"] = java_peer(quick)
    results = results_head(
        NAME,
        quick=quick,
        machine=machine,
        config={**asdict(cfg), "pinned": pin},
        peers=peers,
        notes=notes,
        client=f"rocketmq {dist_version('rocketmq') or '?'} (PyPI, the C++ client 1.2.x)",
    )
    if not rocketmq_available():
        notes.append(
            "the official RocketMQ client (PyPI rocketmq==0.4.4) is not installed: "
            "pip install -e '.[bench]'; nothing measured"
        )
        results["ratios"] = compute_ratios(results)
        results["seconds"] = round(time.perf_counter() - started, 1)
        # No markdown: the docs keep the last section that measured something.
        return Report(NAME, results, render_console(results), "", notes)

    work = bench_work_dir("broker-bench-")
    results["config"]["work_dir"] = str(work.relative_to(REPO_ROOT))
    modes = (False, True) if cfg.sync_flush else (False,)
    rocketmq_peer = peers.get("rocketmq")
    java = rocketmq_peer is not None and rocketmq_peer.available
    reps: list[dict[str, Any]] = []
    try:
        progress("echo ceiling")
        results["echo"] = attempt("echo ceiling", lambda: echo_ceiling(cfg, pin), notes)
        # the brokers take turns within every repetition, so that foreign load and the
        # machine's drift hit them alike
        for rep in range(cfg.reps):
            progress(f"repetition {rep + 1} of {cfg.reps}")
            systems: dict[str, Any] = {}
            for sync in modes:
                mode = "sync" if sync else "async"
                systems[f"aerolite_{mode}"] = aerolite_phase(cfg, work, pin, sync=sync, notes=notes)
                if java:
                    systems[f"rocketmq_{mode}"] = aerolite_phase(
                        cfg, work, pin, sync=sync, notes=notes, java=True
                    )
            for spec in PEER_SPECS if cfg.other_peers else ():
                peer: Peer | None = peers.get(spec.key)
                if peer is None or not peer.available:
                    continue
                for sync in modes:
                    key = f"{spec.key}_{'sync' if sync else 'async'}"
                    systems[key] = peer_phase(
                        spec, peer.label, cfg, work, pin, sync=sync, notes=notes
                    )
            reps.append(systems)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["systems"] = merge(reps)
    results["ratios"] = compute_ratios(results)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results), notes)


# ---------------------------------------------------------------------------- render


def _cell_rate(row: dict[str, Any] | None) -> str:
    if not row:
        return "—"
    if "error" in row:
        return "failed"
    if "skipped" in row:
        return "n/a"
    return _n(row.get("messages_per_s")) + rate_range(row)


def _ms(us: Any) -> str:
    return "—" if not isinstance(us, int | float) else f"{us / 1e3:.2f}"


def _produce_rows(results: dict[str, Any], mode: str) -> list[list[str]]:
    systems, ratios = results["systems"], results["ratios"]["produce"].get(mode, {})
    echo = (results.get("echo") or {}).get("produce", {})
    aero = (systems.get(f"aerolite_{mode}") or {}).get("produce", {})
    rows = []
    for n in results["config"]["threads"]:
        key = str(n)
        row = aero.get(key) or {}
        r = ratios.get(key, {})
        redis_row = (systems.get(f"redis_{mode}") or {}).get("produce", {}).get(key)
        nats_row = (systems.get(f"nats_{mode}") or {}).get("produce", {}).get(key)
        nats_sys = systems.get(f"nats_{mode}") or {}
        java_row = (systems.get(f"rocketmq_{mode}") or {}).get("produce", {}).get(key)
        rows.append(
            [
                key,
                _cell_rate(row),
                _f(row.get("mb_per_s"), ".1f"),
                _cell_rate(java_row),
                _cell_rate(redis_row),
                "n/a" if "skipped" in nats_sys else _cell_rate(nats_row),
                _cell_rate(echo.get(key)),
                _f(r.get("vs_rocketmq"), ".2f"),
                _f(r.get("vs_redis"), ".2f"),
                _f(r.get("vs_nats"), ".2f"),
                _f(r.get("vs_echo"), ".3f"),
            ]
        )
    return rows


_PRODUCE_HEADERS = (
    "threads",
    "Aerolite msg/s",
    "MB/s",
    "RocketMQ msg/s",
    "Redis msg/s",
    "NATS msg/s",
    "echo ceiling",
    "vs RocketMQ",
    "vs Redis",
    "vs NATS",
    "vs echo",
)

CONSUME_LABELS = {
    "push": "group consumer: PushConsumer | XREADGROUP+XACK | durable pull, ack per batch",
    "pull": "reader from 0: PullConsumer | XREAD | ephemeral pull, no acks",
}
CONSUME_SHORT = {"push": "group consumer (PushConsumer)", "pull": "reader from 0 (PullConsumer)"}


def _consume_rows(results: dict[str, Any], short: bool) -> list[list[str]]:
    systems, ratios = results["systems"], results["ratios"]["consume"]
    echo = (results.get("echo") or {}).get("consume", {})
    aero = (systems.get("aerolite_async") or {}).get("consume", {})
    rows = []
    for kind in ("push", "pull"):
        row = aero.get(kind) or {}
        r = ratios.get(kind, {})
        rows.append(
            [
                (CONSUME_SHORT if short else CONSUME_LABELS)[kind],
                _cell_rate(row),
                _f(row.get("mb_per_s"), ".1f"),
                _cell_rate((systems.get("rocketmq_async") or {}).get("consume", {}).get(kind)),
                _cell_rate((systems.get("redis_async") or {}).get("consume", {}).get(kind)),
                _cell_rate((systems.get("nats_async") or {}).get("consume", {}).get(kind)),
                _cell_rate(echo.get(kind)),
                _f(r.get("vs_rocketmq"), ".2f"),
                _f(r.get("vs_redis"), ".2f"),
                _f(r.get("vs_nats"), ".2f"),
                _f(r.get("vs_echo"), ".3f"),
            ]
        )
    return rows


_CONSUME_HEADERS = (
    "consumer",
    "Aerolite msg/s",
    "MB/s",
    "RocketMQ msg/s",
    "Redis msg/s",
    "NATS msg/s",
    "echo ceiling",
    "vs RocketMQ",
    "vs Redis",
    "vs NATS",
    "vs echo",
)

SYSTEM_LABELS = {
    "aerolite_async": "Aerolite, ASYNC_FLUSH",
    "aerolite_sync": "Aerolite, SYNC_FLUSH",
    "rocketmq_async": "Apache RocketMQ, ASYNC_FLUSH",
    "rocketmq_sync": "Apache RocketMQ, SYNC_FLUSH",
    "redis_async": "Redis, appendfsync everysec",
    "redis_sync": "Redis, appendfsync always",
    "nats_async": "NATS JetStream (default sync)",
    "nats_sync": "NATS JetStream, sync_interval always",
}

_DETAIL_HEADERS = (
    "system",
    "run",
    "msg/s",
    "p50 ms",
    "p99 ms",
    "max ms",
    "server CPU µs/msg",
    "server CPU %",
    "client CPU %",
    "probe p99 ms",
    "probe max ms",
    "failed",
)


def _detail_rows(results: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for key, system in results["systems"].items():
        label = SYSTEM_LABELS.get(key, key)
        if "skipped" in system or ("error" in system and not system.get("produce")):
            rows.append([label, "—", "n/a" if "skipped" in system else "failed", *[""] * 9])
            continue
        entries = [(f"produce x{n}", r) for n, r in system.get("produce", {}).items()]
        entries += [
            (f"consume {r.get('command', kind)}" if "command" in r else f"consume {kind}", r)
            for kind, r in system.get("consume", {}).items()
        ]
        for what, row in entries:
            if "error" in row:
                rows.append([label, what, "failed", *[""] * 9])
                continue
            probe = row.get("stall_probe") or {}
            rows.append(
                [
                    label,
                    what,
                    _n(row.get("messages_per_s")),
                    _ms(row.get("p50_us")),
                    _ms(row.get("p99_us")),
                    _ms(row.get("max_us")),
                    _f(row.get("server_cpu_us_per_msg"), ".1f"),
                    _f(row.get("server_cpu_pct"), ".0f"),
                    _f(row.get("client_cpu_pct"), ".0f"),
                    _f(probe.get("p99_ms"), ".1f"),
                    _f(probe.get("max_ms"), ".0f"),
                    str(send_failures(row)),
                ]
            )
    return rows


def _rss_lines(results: dict[str, Any]) -> list[str]:
    """Each broker's resident memory after its runs (peak in brackets), and the goal that
    Aerolite's stays within a quarter of the JVM broker's."""
    systems = results["systems"]
    parts = []
    for key in ("aerolite_async", "aerolite_sync", "rocketmq_async", "rocketmq_sync"):
        rss = (systems.get(key) or {}).get("rss_kb") or {}
        if rss.get("VmRSS"):
            parts.append(
                f"{SYSTEM_LABELS[key]} {rss['VmRSS'] / 1024:,.0f} MiB "
                f"(peak {rss.get('VmHWM', 0) / 1024:,.0f} MiB)"
            )
    if not parts:
        return []
    lines = ["Broker RSS after its runs: " + "; ".join(parts) + "."]
    ratios = (results.get("ratios") or {}).get("rss_vs_rocketmq") or {}
    for mode in ("async", "sync"):
        peak = (ratios.get(mode) or {}).get("VmHWM")
        if peak is not None:
            verdict = "met" if peak <= 0.25 else "**not met**"
            lines.append(
                f"Goal, {mode.upper()}_FLUSH: peak RSS ≤ ¼ of Apache RocketMQ's broker JVM "
                f"({peak:.2f}x: {verdict})."
            )
    return lines


def _peer_lines(results: dict[str, Any]) -> list[str]:
    lines = [f"Aerolite: driven by {results.get('client', 'rocketmq')}"]
    for peer in results["peers"].values():
        if peer["available"]:
            lines.append(f"{peer['label']}: {peer['version']}")
        else:
            lines.append(f"{peer['label']}: not measured, {peer['reason']}")
    nats_sync = results["systems"].get("nats_sync") or {}
    if "skipped" in nats_sync:
        lines.append(
            f"NATS JetStream, flush per acknowledgement: not measured, {nats_sync['skipped']}"
        )
    return lines


# Failures of the C++ client that are its own (they happen against any broker): the
# explanation goes into the report once when a run's client log shows the pattern.
KNOWN_CLIENT_ISSUES = {
    "get timed_mutex timeout": (
        "`GetTransport ... get timed_mutex timeout` is the C++ client's own: concurrent sends "
        "share one connection table lock whose `try_lock_for` gives up at once under "
        "contention (apache/rocketmq-client-cpp#224, #456); the send fails without reaching "
        "the broker and, retries spent, surfaces as `No route info of this topic`."
    ),
    "TIMEOUT_CLEAN_QUEUE": (
        "`[TIMEOUT_CLEAN_QUEUE]broker busy` is Aerolite's answer (SYSTEM_BUSY) to a send "
        "that waited longer than waitTimeMillsInSendQueue (200 ms) in the send lane: the "
        "broker stalled."
    ),
}


def _odd_lines(results: dict[str, Any]) -> list[str]:
    """What went wrong or looked odd: failed sends, client and server log warnings."""
    lines: list[str] = []
    seen_issues: set[str] = set()
    for key, system in results["systems"].items():
        label = SYSTEM_LABELS.get(key, key)
        runs = [
            *(("produce x" + n, r) for n, r in system.get("produce", {}).items()),
            *(("consume " + k, r) for k, r in system.get("consume", {}).items()),
        ]
        for what, row in runs:
            if what.startswith("consume") and row.get("received", 0) < row.get("expect", 0):
                lines.append(
                    f"{label}, {what}: received {row['received']:,} of {row['expect']:,} "
                    "messages before the time limit"
                )
            kinds = {**(row.get("error_kinds") or {}), **(row.get("not_ok_kinds") or {})}
            if kinds:
                failed = send_failures(row)
                top = "; ".join(f"{n} x {k[:140]}" for k, n in kinds.items())
                lines.append(f"{label}, {what}: {failed} sends failed ({top})")
            probe = row.get("stall_probe") or {}
            if probe.get("over_100ms"):
                lines.append(
                    f"{label}, {what}: {probe['over_100ms']} of {probe['probes']} stall probes "
                    f"waited over 100 ms (worst {probe['max_ms']:.0f} ms, "
                    f"{probe['max_at_s']:.1f} s after the driver started)"
                )
            client_log = row.get("client_log") or {}
            if client_log.get("lines"):
                top = "; ".join(f"{n} x {k[:120]}" for k, n in client_log["kinds"].items())
                lines.append(f"{label}, {what}: C++ client log, {client_log['lines']} lines: {top}")
                seen_issues.update(k for k in KNOWN_CLIENT_ISSUES if k in top)
        lines += server_log_lines(label, system)
    lines += [KNOWN_CLIENT_ISSUES[k] for k in KNOWN_CLIENT_ISSUES if k in seen_issues]
    return lines


def render_console(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = [
        f"broker: {cfg['body_bytes']} B bodies, threads {tuple(cfg['threads'])}, up to "
        f"{cfg['produce_messages']:,} messages or {cfg['produce_max_s']:g} s per produce run, "
        f"{cfg['consume_messages']:,} consumed, "
        f"{'pinned' if cfg['pinned'] else 'not pinned'}"
        f"{', quick' if results['quick'] else ''}; {machine_line(results['machine'])}",
        *(f"  {line}" for line in _peer_lines(results)),
    ]
    if not results["systems"]:
        lines += ["", *results["notes"]]
        return "\n".join(lines)
    lines += [
        "",
        "produce, ASYNC_FLUSH (Redis everysec, NATS default):",
        text_table(_PRODUCE_HEADERS, _produce_rows(results, "async")),
    ]
    if "aerolite_sync" in results["systems"]:
        lines += [
            "",
            "produce, SYNC_FLUSH (Redis appendfsync always, NATS sync_interval always):",
            text_table(_PRODUCE_HEADERS, _produce_rows(results, "sync")),
        ]
    lines += [
        "",
        f"consume {cfg['consume_messages']:,} preloaded messages:",
        text_table(_CONSUME_HEADERS, _consume_rows(results, short=False)),
        "",
        text_table(_DETAIL_HEADERS, _detail_rows(results)),
    ]
    lines += ["", *_rss_lines(results)] if _rss_lines(results) else []
    lines += console_tail(results, _reading(results), _odd_lines(results))
    return "\n".join(lines)


def _row(results: dict[str, Any], system: str, phase: str, key: str) -> dict[str, Any]:
    row = ((results["systems"].get(system) or {}).get(phase) or {}).get(key) or {}
    return {} if "error" in row else row


def _reading(results: dict[str, Any]) -> str:
    """What the figures say, computed from them: where the CPU went, who was the limit."""
    top = str(max(results["config"]["threads"]))
    mine = _row(results, "aerolite_async", "produce", top)
    if not mine.get("server_cpu_us_per_msg"):
        return ""
    cpu = mine["server_cpu_us_per_msg"]
    text = (
        f"**Reading.** With {top} producer threads Aerolite's process was on CPU "
        f"{_f(mine.get('server_cpu_pct'), '.0f')} % of the time, {cpu:.1f} µs per message"
    )
    others = []
    client_bound = []
    for key, name in (("redis_async", "Redis"), ("nats_async", "NATS")):
        row = _row(results, key, "produce", top)
        if row.get("server_cpu_us_per_msg"):
            others.append(
                f"{cpu / row['server_cpu_us_per_msg']:.1f}x {name}'s "
                f"{row['server_cpu_us_per_msg']:.1f} µs (on CPU "
                f"{_f(row.get('server_cpu_pct'), '.0f')} %)"
            )
            if (row.get("client_cpu_pct") or 0) >= 90:
                client_bound.append(f"{name}'s ({row['client_cpu_pct']} % of a CPU)")
    text += (": " + " and ".join(others) + ". " if others else ". ") + (
        f"The C++ client used {_f(mine.get('client_cpu_pct'), '.0f')} % of its CPU"
    )
    if client_bound:
        text += (
            f"; the Python client was the limit for {' and '.join(client_bound)}, so those "
            "rates, and Aerolite's ratios to them, understate the servers' difference"
        )
    text += ". "
    sync = _row(results, "aerolite_sync", "produce", top)
    if sync.get("messages_per_s") and mine.get("messages_per_s"):
        text += (
            f"SYNC_FLUSH kept {sync['messages_per_s'] / mine['messages_per_s']:.2f}x of the "
            f"ASYNC_FLUSH rate at {top} threads ({sync['p50_us'] / 1e3:.2f} ms p50 per send "
            f"against {mine['p50_us'] / 1e3:.2f} ms). "
        )
    pull = _row(results, "aerolite_async", "consume", "pull")
    if pull.get("p50_us"):
        text += (
            f"A pull of {results['config']['pull_batch']} messages took "
            f"{pull['p50_us'] / 1e3:.2f} ms (p50) end to end, at "
            f"{_f(pull.get('server_cpu_us_per_msg'), '.1f')} µs of broker CPU per message."
        )
    return text


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    pinning = pinning_text(cfg["pinned"], SERVER_CPU, LOADGEN_CPU)
    parts = [
        "## Broker: produce and consume with a real RocketMQ client, next to Redis and NATS",
        "",
        measured_line(results, pinning),
        "",
        *(f"- {line}" for line in _peer_lines(results)),
    ]
    if not results["systems"]:
        return "\n".join([*parts, "", *results["notes"]])
    parts += [
        "",
        f"Aerolite is `python -m broker standalone` (name server and broker in one process, "
        f"topics of {cfg['queues']} queues) driven by the official Python client, PyPI "
        "`rocketmq` 0.4.4 (the C++ client 1.2.x), in a process of its own. Produce: one "
        "client process with N threads, each calling `send_sync` in a loop (one message in "
        f"flight per thread), {cfg['body_bytes']} B bodies, up to "
        f"{cfg['produce_messages']:,} messages or {cfg['produce_max_s']:g} s per run after "
        f"{cfg['warmup_messages']} warm-up sends. Redis Streams gets the same shape from "
        "redis-py (with hiredis): N threads, one connection each, a blocking `XADD` at a "
        "time. NATS JetStream gets N asyncio tasks (nats-py on uvloop, one connection), each "
        "awaiting its `PubAck`. MB/s counts message bodies. The echo ceiling is the raw "
        "uvloop echo server of the remoting benchmark answering 1 KiB requests with N in "
        "flight, driven by its raw load generator: the most a Python server on uvloop could "
        "answer in that shape. Ratios are Aerolite's rate over the other's, from the same "
        f"run. {cfg['reps']} repetitions, the brokers taking turns within each, every one on "
        "a freshly started server; a figure is the median with the lowest and the highest "
        "in brackets. Redis and NATS are compared in the SDK section, with their best "
        "asyncio clients; this one holds the RocketMQ client fixed for the two brokers.",
        "",
        "**Produce, asynchronous flush** (Aerolite ASYNC_FLUSH, Redis `appendonly yes` + "
        "`appendfsync everysec`, JetStream file storage with its default sync):",
        "",
        markdown_table(_PRODUCE_HEADERS, _produce_rows(results, "async")),
    ]
    if "aerolite_sync" in results["systems"]:
        parts += [
            "",
            "**Produce, a flush per acknowledgement** (Aerolite SYNC_FLUSH, Redis "
            "`appendfsync always`, JetStream `sync_interval: always` where the server "
            "knows it):",
            "",
            markdown_table(_PRODUCE_HEADERS, _produce_rows(results, "sync")),
        ]
    parts += [
        "",
        f"**Consume.** {cfg['consume_messages']:,} messages preloaded (not timed), then read "
        "whole twice. Group consumer: a RocketMQ `PushConsumer` in a new group (the broker "
        "keeps its offsets); Redis `XREADGROUP COUNT "
        f"{cfg['pull_batch']}` and an `XACK` of each batch; a durable JetStream pull consumer "
        f"(`fetch({cfg['pull_batch']})`, `AckPolicy.ALL`, one ack per batch). Reader from "
        "the start, no state kept on the server: a RocketMQ `PullConsumer` reading every "
        f"queue from offset 0, {cfg['pull_batch']} messages per pull, one pull at a time; "
        "Redis `XREAD` from ID 0; an ephemeral JetStream pull consumer without acks. Rates "
        "run from the first message received to the last. The echo ceiling answers "
        f"{cfg['pull_batch']} KiB requests, one per queue in flight for the group consumer "
        "(the C++ push consumer keeps one pull per queue) and one at a time for the reader.",
        "",
        markdown_table(_CONSUME_HEADERS, _consume_rows(results, short=True)),
        "",
        "Every run: latency is per send (p50/p99 over all sends of the run); server CPU is "
        "the server process's on-CPU time per message over the timed part; client CPU is the "
        "driver process's share of its CPU (near 100 %, the client is the limit, not the "
        "server).",
        "",
        markdown_table(_DETAIL_HEADERS, _detail_rows(results)),
    ]
    if "rocketmq_async" in results["systems"]:
        parts += [
            "",
            "Apache RocketMQ is its own name server and broker (two JVMs, "
            f"{ROCKETMQ_VERSION} from Maven Central) with the broker.conf of "
            "`tests/bench/java_rocketmq.py` (the stock settings but ports, store path, "
            "`brokerIP1=127.0.0.1` and `flushDiskType`), driven by the same C++ client in "
            "the same shapes: the two brokers compared with the client held fixed.",
        ]
    parts += [f"- {line}" for line in _rss_lines(results)]
    parts += markdown_tail(
        results, _reading(results), _odd_lines(results), "Failures and log warnings in this run"
    )
    return "\n".join(parts)


# --------------------------------------------------------------------------- profile


def profile_broker(
    *,
    seconds: float,
    threads: int,
    out: Path,
    sync: bool = False,
    native: bool = False,
    top: int = 10,
) -> dict[str, Any]:
    """py-spy the broker for ``seconds`` while one client process produces with ``threads``
    threads (not a figure: the sampler slows the broker down)."""
    cfg = FULL
    pin = can_pin(LOADGEN_CPU, SERVER_CPU)
    work = bench_work_dir("broker-profile-")
    settings = {"flushDiskType": "SYNC_FLUSH" if sync else "ASYNC_FLUSH"}
    try:
        with AeroliteBroker(work / "aerolite", SERVER_CPU if pin else None, settings) as broker:
            asyncio.run(_admin(broker, PRODUCE_TOPIC, cfg.queues))
            run = _Run(cfg, work / "home", broker, pin, [])
            args = run.args(
                namesrv=broker.namesrv,
                topic=PRODUCE_TOPIC,
                threads=threads,
                count=10_000_000,
                max_s=seconds + 4.0,
                warmup=cfg.warmup_messages,
            )
            env = {**os.environ, "HOME": str(work / "home")}
            (work / "home").mkdir(parents=True, exist_ok=True)
            done = profile_while_driving(
                [sys.executable, "-m", ROCKETMQ_DRIVER, "produce"],
                args,
                env=env,
                spy_pid=broker.pid,
                seconds=seconds,
                out=out,
                native=native,
                settle_s=1.0,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "threads": threads,
        "flush": settings["flushDiskType"],
        "messages_per_s_while_sampled": done.get("messages_per_s"),
        "speedscope": str(out),
        "top_self": speedscope_top(out, top),
    }


def main() -> None:
    """``python -m tests.bench.broker_bench --profile``: a py-spy profile of the broker under
    the produce load (the benchmark itself runs from ``python -m tests.bench --only broker``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.bench.broker_bench")
    parser.add_argument("--profile", action="store_true", help="py-spy the broker under load")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--sync", action="store_true", help="SYNC_FLUSH instead of ASYNC_FLUSH")
    parser.add_argument("--native", action="store_true", help="C frames too (py-spy --native)")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "bench-results" / "broker-profile.speedscope.json"
    )
    args = parse_profile_args(parser, "broker")
    summary = profile_broker(
        seconds=args.seconds, threads=args.threads, out=args.out, sync=args.sync, native=args.native
    )
    save_summary(args.out, summary)
    print(
        f"py-spy, {args.seconds:g} s, "
        f"{summary['threads']} producer threads, {summary['flush']}, "
        f"{summary['messages_per_s_while_sampled']} msg/s while sampled; {summary['speedscope']}"
    )
    print(text_table(("function", "self %", "total %"), top_self_rows(summary)))


if __name__ == "__main__":
    main()
