"""SDK benchmark: Aerolite's asyncio SDK (``client``) against the standalone broker, next to
Redis Streams (redis-py's asyncio client) and NATS JetStream (nats-py) driven in the same
shapes, and the raw uvloop echo round trip.

What is measured, over loopback TCP with 1 KiB bodies, every client in a driver process of its
own on uvloop (``tests.bench.drivers``: ``sdk_client``, ``redis_async``, ``nats_async``),
every server in its own process with its data in a temporary directory under
``bench-results/``:

- **Produce**, three shapes (``drivers.async_shapes``), each after ``warmup`` sends awaited
  one by one, up to a message count or a time budget:

  - *one by one*: ``await producer.send(msg)``, one at a time; an ``XADD`` awaited at a
    time; a ``js.publish`` awaiting its ``PubAck`` at a time.
  - *window of 256*: 256 tasks each awaiting its own ``send`` (256 in flight; the producer
    coalesces overlapping sends into batch requests by default); Redis:
    pipelines of 256 ``XADD`` (no MULTI), one pipeline at a time (redis-py's asyncio client
    runs one command per connection at a time, so the pipeline is Redis's way of having
    many in flight); NATS: 256 tasks each awaiting its publish.
  - *batches of 32*: ``send_batch`` of 32 messages (one request), one at a time; a pipeline
    of 32 ``XADD``; 32 concurrent publishes awaited together.

  Aerolite runs ASYNC_FLUSH, Redis ``appendonly yes`` + ``appendfsync everysec``, JetStream
  file storage with its default sync. After every Aerolite produce run the broker's
  max offsets of the run's topic are summed and compared with the acknowledged sends.
- **Consume**: ``consume_messages`` preloaded (not timed), then read whole by a new group:
  a ``PushConsumer`` (from the first offset, async listener returning SUCCESS) and a
  ``PullConsumer`` (``poll()``, auto-commit); Redis ``XREADGROUP COUNT 32`` + ``XACK`` per
  batch; a durable JetStream pull consumer (``fetch(32)``, one ack per batch). The rate runs
  from the first message received to the last; the SDK consumers also count duplicates.
- **Echo round trip**: the raw uvloop echo server of the remoting benchmark answering a
  1 KiB request at a time (``loadgen.run_unpipelined``), measured before and after the
  systems and pooled: the floor of a round trip between a Python client and server here.

Client CPU per message is the driver process's CPU time over the timed part divided by the
messages; server CPU per message likewise for the server's process. With two or more CPUs
every server is pinned to CPU 1 and every client to CPU 0. One run per figure. Goals (from
the M4 issue): window-256 produce ≥ 2x Redis's pipelined ``XADD``, consume ≥ 3x Redis's
``XREADGROUP``, one-by-one p99 ≤ 3x the echo p99; reported as met or not, never asserted.

``python -m tests.bench.sdk_bench --profile`` is not part of the benchmark: it samples the
SDK driver with py-spy during a window-256 produce and prints its functions by self time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from remoting import ClientConfig, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from tests.bench import common, loadgen
from tests.bench.broker_bench import _admin
from tests.bench.common import (
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
from tests.bench.java_rocketmq import RocketMQJavaBroker, java_peer, rss_kb
from tests.bench.peers import (
    AeroliteBroker,
    Service,
    dist_version,
    find_peers,
    run_driver,
)
from tests.bench.processes import ServerProcess
from tests.bench.profiling import (
    profile_while_driving,
    save_summary,
    speedscope_top,
    top_self_rows,
)
from tests.bench.remoting_server import ECHO_CODE
from tests.bench.report import (
    REPO_ROOT,
    Report,
    console_tail,
    machine_info,
    machine_line,
    markdown_table,
    markdown_tail,
    measured_line,
    percentile,
    pinning_text,
    text_table,
)
from tests.bench.report import (
    fmt_count as _n,
)
from tests.bench.report import (
    fmt_num as _f,
)

NAME = "sdk"
CLIENT_CPU = 0  # every client
SERVER_CPU = 1  # every server
SDK_DRIVER = "tests.bench.drivers.sdk_client"
REDIS_DRIVER = "tests.bench.drivers.redis_async"
NATS_DRIVER = "tests.bench.drivers.nats_async"
CONSUME_TOPIC = "SdkConsume"
MB = 1_000_000
SHAPES = ("one", "window", "batch")
PRODUCE_GOAL = 2.0  # window-256 produce / Redis pipelined XADD
CONSUME_GOAL = 3.0  # PushConsumer / Redis XREADGROUP
P99_GOAL = 3.0  # one-by-one p99 / echo p99


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkBenchConfig:
    """Counts and time budgets; every loop stops at whichever limit comes first."""

    body_bytes: int = 1024
    window: int = 256
    batch: int = 32
    one_messages: int = 12_000
    one_max_s: float = 5.0
    window_messages: int = 200_000
    window_max_s: float = 4.0
    batch_messages: int = 200_000
    batch_max_s: float = 4.0
    warmup_messages: int = 300  # per produce run, awaited one by one, before the timed part
    consume_messages: int = 100_000
    consume_max_s: float = 30.0
    pull_batch: int = 32
    queues: int = 8
    echo_block: int = 250  # one-by-one sends, then as many echo round trips, in turn
    echo_round_trips: int = 5_000  # fallback: a run of its own when the interleaved one failed
    echo_warmup: int = 500
    echo_max_s: float = 5.0
    peers: bool = True
    pin_cpus: bool = True
    broker_settings: tuple[tuple[str, str], ...] = ()


FULL = SdkBenchConfig()
QUICK = replace(
    FULL,
    one_messages=100,
    one_max_s=2.0,
    window_messages=600,
    window_max_s=2.0,
    batch_messages=640,
    batch_max_s=2.0,
    warmup_messages=10,
    consume_messages=320,
    consume_max_s=10.0,
    queues=2,
    echo_block=25,
    echo_round_trips=200,
    echo_warmup=20,
    echo_max_s=2.0,
    broker_settings=(
        ("mappedFileSizeCommitLog", str(16 << 20)),
        ("maxHashSlotNum", "10000"),
        ("maxIndexNum", "40000"),
    ),
)


# ----------------------------------------------------------------------------- helpers


def _can_pin(cfg: SdkBenchConfig) -> bool:
    return cfg.pin_cpus and can_pin(CLIENT_CPU, SERVER_CPU)


def _rate_row(done: dict[str, Any], body_bytes: int, messages_key: str) -> dict[str, Any]:
    """A driver's ``done`` line plus MB/s, CPU per message and CPU shares."""
    row = dict(done)
    rate = float(done.get("messages_per_s") or 0.0)
    messages = int(done.get(messages_key) or 0)
    row["mb_per_s"] = round(rate * body_bytes / MB, 2)
    window = done.get("cpu_window_s") or 0.0
    for who in ("client", "server"):
        cpu = done.get(f"{who}_cpu_s")
        row[f"{who}_cpu_us_per_msg"] = (
            round(cpu / messages * 1e6, 2) if cpu is not None and messages else None
        )
        row[f"{who}_cpu_pct"] = round(100 * cpu / window) if window and cpu is not None else None
    return row


class _Run(DriverRun):
    """Runs drivers against one server, each with a ``StallProbe`` on the server."""

    def __init__(self, cfg: SdkBenchConfig, home: Path, server: Service, pin: bool) -> None:
        super().__init__(cfg.body_bytes, home, server, CLIENT_CPU if pin else None)
        self.cfg = cfg

    def driver(
        self, module: str, command: str, timeout_s: float, messages_key: str, **extra: Any
    ) -> dict[str, Any]:
        result, probe = self.probed(module, command, timeout_s, **extra)
        row = _rate_row(result.done, self.cfg.body_bytes, messages_key)
        row["stall_probe"] = probe
        return row

    def preload(self, module: str, **where: Any) -> dict[str, Any]:
        """Fill the consume stream (not timed, no stall probe); the driver's ``done`` line."""
        cfg = self.cfg
        args = {
            **where,
            "count": cfg.consume_messages,
            "body_bytes": cfg.body_bytes,
            "cpu": self.client_cpu,
        }
        return run_driver(
            module, "preload", args, home=self.home, timeout_s=cfg.consume_max_s + 60.0
        ).done

    def produce(self, module: str, shape: str, **where: Any) -> dict[str, Any]:
        cfg = self.cfg
        count, max_s = {
            "one": (cfg.one_messages, cfg.one_max_s),
            "window": (cfg.window_messages, cfg.window_max_s),
            "batch": (cfg.batch_messages, cfg.batch_max_s),
        }[shape]
        return self.driver(
            module,
            "produce",
            max_s + 30.0,
            "ok",
            shape=shape,
            count=count,
            max_s=max_s,
            window=cfg.window,
            batch=cfg.batch,
            warmup=cfg.warmup_messages,
            **where,
        )

    def consume(self, module: str, command: str, **where: Any) -> dict[str, Any]:
        cfg = self.cfg
        row = self.driver(
            module,
            command,
            cfg.consume_max_s,
            "received",
            expect=cfg.consume_messages,
            max_s=cfg.consume_max_s,
            max_num=cfg.pull_batch,
            **where,
        )
        row["command"] = command
        return row


# ------------------------------------------------------------------------ echo floor


async def _echo_round_trips(port: int, cfg: SdkBenchConfig) -> list[int]:
    body = b"x" * cfg.body_bytes
    ring = loadgen.FrameRing.echo_requests(ECHO_CODE, body, 64)
    proto = await loadgen.connect(port, short_frame_bytes=cfg.body_bytes)
    try:
        await loadgen.run_unpipelined(proto, ring, requests=cfg.echo_warmup, max_s=cfg.echo_max_s)
        latencies = await loadgen.run_unpipelined(
            proto, ring, requests=cfg.echo_round_trips, max_s=cfg.echo_max_s
        )
    finally:
        await loadgen.close(proto)
    if proto.short_frames:
        raise RuntimeError("echo server: responses without the echoed body")
    return latencies


def echo_round_trips(cfg: SdkBenchConfig, pin: bool) -> list[int]:
    """Round trips (ns) of 1 KiB requests, one at a time, to the raw uvloop echo server in a
    process of its own; the load generator runs here, pinned to the clients' CPU."""
    return against_echo_server(
        functools.partial(_echo_round_trips, cfg=cfg),
        SERVER_CPU if pin else None,
        CLIENT_CPU if pin else None,
    )


def _echo_summary(latencies_ns: list[int]) -> dict[str, Any]:
    ordered = sorted(latencies_ns)
    return {
        "round_trips": len(ordered),
        "p50_us": round(percentile(ordered, 50) / 1e3, 1),
        "p99_us": round(percentile(ordered, 99) / 1e3, 1),
        "max_us": round(ordered[-1] / 1e3, 1),
    }


# ---------------------------------------------------------------------------- Aerolite


async def _stored(broker: AeroliteBroker | RocketMQJavaBroker, topic: str, queues: int) -> int:
    """The sum of the topic's max queue offsets: how many messages its queues hold."""
    client = RemotingClient(ClientConfig(request_timeout_s=10.0))
    await client.start()
    try:
        total = 0
        for queue in range(queues):
            response = await client.invoke(
                broker.address,
                RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue)}
                ),
            )
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"GET_MAX_OFFSET {topic}/{queue}: {response.code}")
            total += int(response.ext_fields.get("offset", "0"))
        return total
    finally:
        await client.shutdown()


def _stored_settled(
    broker: AeroliteBroker | RocketMQJavaBroker, topic: str, queues: int, want: int
) -> int:
    """``_stored`` once dispatch has caught up (it runs behind the commit log): until it
    reaches ``want`` or stops moving, for at most 5 s."""
    deadline = time.monotonic() + 5.0
    last = -1
    while True:
        now = asyncio.run(_stored(broker, topic, queues))
        if now >= want or now == last or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(0.2)


def _aerolite_produce(
    run: _Run, broker: AeroliteBroker | RocketMQJavaBroker, shape: str, echo_port: int | None
) -> dict[str, Any]:
    topic = f"SdkProduce_{shape}"
    asyncio.run(_admin(broker, topic, run.cfg.queues))
    extra: dict[str, Any] = {}
    if shape == "one" and echo_port:
        extra = {"echo_port": echo_port, "echo_block": run.cfg.echo_block}
    row = run.produce(SDK_DRIVER, shape, namesrv=broker.namesrv, topic=topic, **extra)
    acknowledged = int(row.get("ok") or 0) + int(row.get("warmup_ok") or 0)
    row["stored"] = _stored_settled(broker, topic, run.cfg.queues, acknowledged)
    row["acknowledged"] = acknowledged
    return row


def aerolite_phase(
    cfg: SdkBenchConfig, work: Path, pin: bool, notes: list[str], *, java: bool = False
) -> dict[str, Any]:
    """The broker (ASYNC_FLUSH) under the SDK: the produce shapes, preload, the consumers.
    ``java``: the same against Apache RocketMQ's own broker, the SDK held fixed."""
    name = "rocketmq" if java else "aerolite"
    settings = {"flushDiskType": "ASYNC_FLUSH", **({} if java else dict(cfg.broker_settings))}
    tag = "Apache RocketMQ" if java else "Aerolite"
    out: dict[str, Any] = {"settings": settings, "produce": {}, "consume": {}}
    broker: AeroliteBroker | RocketMQJavaBroker = (RocketMQJavaBroker if java else AeroliteBroker)(
        work / name, SERVER_CPU if pin else None, settings
    )
    try:
        with broker:
            run = _Run(cfg, work / f"home-{name}", broker, pin)
            for shape in SHAPES:
                progress(f"{tag}: produce, {shape}")
                with contextlib.ExitStack() as stack:
                    echo_port = None
                    if shape == "one" and not java:
                        try:
                            echo = stack.enter_context(
                                ServerProcess(
                                    "raw uvloop echo",
                                    "tests.bench.echo_server",
                                    cpu=SERVER_CPU if pin else None,
                                )
                            )
                            echo_port = echo.wait_ready()
                        except Exception as exc:  # the echo figure falls back to a run alone
                            notes.append(f"echo server for the interleaved round trips: {exc}")
                    out["produce"][shape] = attempt(
                        f"{tag} produce {shape}",
                        functools.partial(_aerolite_produce, run, broker, shape, echo_port),
                        notes,
                    )
            asyncio.run(_admin(broker, CONSUME_TOPIC, cfg.queues))
            progress(f"{tag}: preload {cfg.consume_messages:,} messages")
            out["preload"] = attempt(
                f"{tag} preload",
                functools.partial(
                    run.preload,
                    SDK_DRIVER,
                    namesrv=broker.namesrv,
                    topic=CONSUME_TOPIC,
                    batch=cfg.batch,
                ),
                notes,
            )
            preload = out["preload"]
            if "error" not in preload and preload.get("ok") != cfg.consume_messages:
                notes.append(
                    f"{tag} preload: stored {preload.get('ok')} of {cfg.consume_messages:,} "
                    f"({preload.get('failed')} failed)"
                )
            if "error" not in preload:
                for command in ("push", "pull"):
                    progress(f"{tag}: consume, {command}")
                    out["consume"][command] = attempt(
                        f"{tag} {command}",
                        functools.partial(
                            run.consume,
                            SDK_DRIVER,
                            command,
                            namesrv=broker.namesrv,
                            topic=CONSUME_TOPIC,
                        ),
                        notes,
                    )
            out["rss_kb"] = rss_kb(broker.pid)
    except Exception as exc:  # a system that fails is reported, the benchmark goes on
        notes.append(f"{tag}: {first_line(exc)}")
        out["error"] = first_line(exc)
    broker_stopped(out, broker, tag, notes)
    return out


# ------------------------------------------------------------------------------- peers


@dataclass(frozen=True, slots=True)
class PeerSpec(common.PeerSpec):
    consume_command: str


PEER_SPECS = (
    PeerSpec("redis", REDIS_DRIVER, "group"),
    PeerSpec("nats", NATS_DRIVER, "durable"),
)


def peer_phase(
    spec: PeerSpec, label: str, cfg: SdkBenchConfig, work: Path, pin: bool, *, notes: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {"produce": {}, "consume": {}}
    server = spec.server(work / spec.key, SERVER_CPU if pin else None)
    try:
        with server:
            run = _Run(cfg, work / f"home-{spec.key}", server, pin)
            for shape in SHAPES:
                progress(f"{label}: produce, {shape}")
                out["produce"][shape] = attempt(
                    f"{label} produce {shape}",
                    functools.partial(
                        run.produce, spec.module, shape, **spec.where(server, f"produce_{shape}")
                    ),
                    notes,
                )
            consume_at = spec.where(server, "consume")
            progress(f"{label}: preload {cfg.consume_messages:,} messages")
            out["preload"] = attempt(
                f"{label} preload",
                functools.partial(run.preload, spec.module, **consume_at),
                notes,
            )
            if "error" not in out["preload"]:
                progress(f"{label}: consume, {spec.consume_command}")
                out["consume"][spec.consume_command] = attempt(
                    f"{label} {spec.consume_command}",
                    functools.partial(run.consume, spec.module, spec.consume_command, **consume_at),
                    notes,
                )
    except Exception as exc:  # a peer that fails is reported, the benchmark goes on
        notes.append(f"{label}: {first_line(exc)}")
        out["error"] = first_line(exc)
    out["log"] = server.warnings()
    return out


# ---------------------------------------------------------------------------- ratios


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return round(a / b, 2)


def _get(results: dict[str, Any], system: str, phase: str, key: str) -> dict[str, Any]:
    row = ((results["systems"].get(system) or {}).get(phase) or {}).get(key) or {}
    return row if isinstance(row, dict) else {}


# (label, Aerolite's phase and key, Redis's, NATS's)
ROWS: tuple[tuple[str, tuple[str, str], tuple[str, str], tuple[str, str]], ...] = (
    ("produce, one by one", ("produce", "one"), ("produce", "one"), ("produce", "one")),
    ("produce, window of 256", ("produce", "window"), ("produce", "window"), ("produce", "window")),
    ("produce, batches of 32", ("produce", "batch"), ("produce", "batch"), ("produce", "batch")),
    ("consume, PushConsumer", ("consume", "push"), ("consume", "group"), ("consume", "durable")),
    ("consume, PullConsumer", ("consume", "pull"), ("consume", "group"), ("consume", "durable")),
)


def compute_ratios(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, mine, redis, nats in ROWS:
        rate = _rate(_get(results, "aerolite", *mine))
        out[label] = {
            "vs_rocketmq": _ratio(rate, _rate(_get(results, "rocketmq", *mine))),
            "vs_redis": _ratio(rate, _rate(_get(results, "redis", *redis))),
            "vs_nats": _ratio(rate, _rate(_get(results, "nats", *nats))),
        }
    return out


def compute_goals(results: dict[str, Any]) -> dict[str, Any]:
    ratios = results["ratios"]
    produce = ratios["produce, window of 256"]["vs_redis"]
    consume = ratios["consume, PushConsumer"]["vs_redis"]
    one = _get(results, "aerolite", "produce", "one")
    echo_p99 = (results.get("echo") or {}).get("p99_us")
    p99 = _ratio(one.get("p99_us"), echo_p99) if "error" not in one else None
    return {
        "produce_vs_redis_pipelined": produce,
        "produce_goal": PRODUCE_GOAL,
        "produce_met": None if produce is None else produce >= PRODUCE_GOAL,
        "consume_vs_redis_xreadgroup": consume,
        "consume_goal": CONSUME_GOAL,
        "consume_met": None if consume is None else consume >= CONSUME_GOAL,
        "one_by_one_p99_vs_echo_p99": p99,
        "p99_goal": P99_GOAL,
        "p99_met": None if p99 is None else p99 <= P99_GOAL,
    }


# ------------------------------------------------------------------------------- run


def run(quick: bool = False, config: SdkBenchConfig | None = None) -> Report:
    """Run the whole SDK benchmark and return its report."""
    cfg = config or (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_info()  # before our own load shows in the load average
    pin = _can_pin(cfg)
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
        clients={
            "aerolite": "Aerolite's asyncio SDK (client/)",
            "rocketmq": "Aerolite's asyncio SDK (client/), JSON headers as with any Java broker",
            "redis": f"redis {dist_version('redis') or '?'} asyncio, "
            f"hiredis {dist_version('hiredis') or '?'}",
            "nats": f"nats-py {dist_version('nats-py') or '?'}",
        },
    )
    work = bench_work_dir("sdk-bench-")
    results["config"]["work_dir"] = str(work.relative_to(REPO_ROOT))
    systems = results["systems"]
    try:
        systems["aerolite"] = aerolite_phase(cfg, work, pin, notes)
        rocketmq_peer = peers.get("rocketmq")
        if rocketmq_peer is not None and rocketmq_peer.available:
            systems["rocketmq"] = aerolite_phase(cfg, work, pin, notes, java=True)
        for spec in PEER_SPECS:
            peer = peers.get(spec.key)
            if peer is None or not peer.available:
                continue
            systems[spec.key] = peer_phase(spec, peer.label, cfg, work, pin, notes=notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    echo = _get(results, "aerolite", "produce", "one").get("echo")
    if echo:
        results["echo"] = {**echo, "interleaved": True}
    else:
        progress("echo round trips (the interleaved ones are missing)")
        results["echo"] = attempt(
            "echo round trips",
            lambda: {**_echo_summary(echo_round_trips(cfg, pin)), "interleaved": False},
            notes,
        )
    results["ratios"] = compute_ratios(results)
    results["goals"] = compute_goals(results)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results), notes)


# ---------------------------------------------------------------------------- render


def _cell(row: dict[str, Any]) -> str:
    if not row:
        return "—"
    if "error" in row:
        return "failed"
    return _n(row.get("messages_per_s"))


_SUMMARY_HEADERS = (
    "run",
    "Aerolite msg/s",
    "MB/s",
    "RocketMQ msg/s",
    "Redis msg/s",
    "NATS msg/s",
    "vs RocketMQ",
    "vs Redis",
    "vs NATS",
    "Aerolite client µs/msg",
    "Redis client µs/msg",
    "NATS client µs/msg",
)


def _summary_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for label, mine, redis, nats in ROWS:
        a = _get(results, "aerolite", *mine)
        j = _get(results, "rocketmq", *mine)
        r = _get(results, "redis", *redis)
        n = _get(results, "nats", *nats)
        ratio = results["ratios"][label]
        rows.append(
            [
                label,
                _cell(a),
                _f(a.get("mb_per_s"), ".1f"),
                _cell(j),
                _cell(r),
                _cell(n),
                _f(ratio.get("vs_rocketmq"), ".2f"),
                _f(ratio["vs_redis"], ".2f"),
                _f(ratio["vs_nats"], ".2f"),
                _f(a.get("client_cpu_us_per_msg"), ".1f"),
                _f(r.get("client_cpu_us_per_msg"), ".1f"),
                _f(n.get("client_cpu_us_per_msg"), ".1f"),
            ]
        )
    return rows


SYSTEM_LABELS = {
    "aerolite": "Aerolite SDK, ASYNC_FLUSH",
    "rocketmq": "Apache RocketMQ (SDK), ASYNC_FLUSH",
    "redis": "Redis, appendfsync everysec",
    "nats": "NATS JetStream (default sync)",
}
RUN_LABELS = {
    ("aerolite", "one"): "send, one by one",
    ("aerolite", "window"): "send, 256 in flight",
    ("aerolite", "batch"): "send_batch of 32",
    ("aerolite", "push"): "PushConsumer",
    ("aerolite", "pull"): "PullConsumer.poll",
    ("rocketmq", "one"): "send, one by one",
    ("rocketmq", "window"): "send, 256 in flight",
    ("rocketmq", "batch"): "send_batch of 32",
    ("rocketmq", "push"): "PushConsumer",
    ("rocketmq", "pull"): "PullConsumer.poll",
    ("redis", "one"): "XADD, one by one",
    ("redis", "window"): "pipelines of 256 XADD",
    ("redis", "batch"): "pipelines of 32 XADD",
    ("redis", "group"): "XREADGROUP 32 + XACK",
    ("nats", "one"): "publish, one by one",
    ("nats", "window"): "256 publishes in flight",
    ("nats", "batch"): "32 publishes, gathered",
    ("nats", "durable"): "durable pull, fetch(32)",
}

_DETAIL_HEADERS = (
    "system",
    "run",
    "msg/s",
    "MB/s",
    "p50 µs",
    "p99 µs",
    "max µs",
    "client CPU µs/msg",
    "server CPU µs/msg",
    "client CPU %",
    "server CPU %",
    "probe max ms",
    "failed",
)


def _detail_rows(results: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for key, system in results["systems"].items():
        label = SYSTEM_LABELS.get(key, key)
        if "error" in system and not system.get("produce"):
            rows.append([label, "—", "failed", *[""] * 10])
            continue
        runs = [*system.get("produce", {}).items(), *system.get("consume", {}).items()]
        for what, row in runs:
            name = RUN_LABELS.get((key, what), what)
            if "error" in row:
                rows.append([label, name, "failed", *[""] * 10])
                continue
            probe = row.get("stall_probe") or {}
            rows.append(
                [
                    label,
                    name,
                    _n(row.get("messages_per_s")),
                    _f(row.get("mb_per_s"), ".1f"),
                    _f(row.get("p50_us"), ",.0f"),
                    _f(row.get("p99_us"), ",.0f"),
                    _f(row.get("max_us"), ",.0f"),
                    _f(row.get("client_cpu_us_per_msg"), ".1f"),
                    _f(row.get("server_cpu_us_per_msg"), ".1f"),
                    _f(row.get("client_cpu_pct"), ".0f"),
                    _f(row.get("server_cpu_pct"), ".0f"),
                    _f(probe.get("max_ms"), ".0f"),
                    str(send_failures(row)),
                ]
            )
    return rows


def _met(flag: Any) -> str:
    return "not measured" if flag is None else ("goal met" if flag else "**not met**")


def _goal_text(results: dict[str, Any]) -> str:
    g = results["goals"]
    echo = results.get("echo") or {}
    one = _get(results, "aerolite", "produce", "one")
    return (
        f"Goals: window-256 produce ≥ {PRODUCE_GOAL:g}x Redis's pipelined `XADD` "
        f"({_f(g['produce_vs_redis_pipelined'], '.2f')}x: {_met(g['produce_met'])}); "
        f"PushConsumer ≥ {CONSUME_GOAL:g}x Redis's `XREADGROUP` "
        f"({_f(g['consume_vs_redis_xreadgroup'], '.2f')}x: {_met(g['consume_met'])}); "
        f"one-by-one p99 ≤ {P99_GOAL:g}x the raw uvloop echo p99 "
        f"({_f(one.get('p99_us'), '.0f')} µs against {_f(echo.get('p99_us'), '.0f')} µs, "
        f"{_f(g['one_by_one_p99_vs_echo_p99'], '.2f')}x: {_met(g['p99_met'])})."
    )


def _echo_text(results: dict[str, Any]) -> str:
    echo = results.get("echo") or {}
    if "error" in echo or not echo:
        return "Echo round trip: not measured."
    block = results["config"]["echo_block"]
    how = (
        f"taking turns with the SDK's one-by-one sends, {block} of each at a time, from the "
        "same driver process and event loop"
        if echo.get("interleaved")
        else "in a run of its own"
    )
    one = _get(results, "aerolite", "produce", "one")
    return (
        f"Echo round trip: the raw uvloop echo server of the remoting benchmark (its own "
        f"process, on the servers' CPU) answering 1 KiB requests one at a time, {how}: "
        f"{echo['round_trips']:,} round trips, p50 {echo['p50_us']:.0f} µs, p99 "
        f"{echo['p99_us']:.0f} µs, max {echo['max_us']:.0f} µs; the SDK's one-by-one sends "
        f"in the same stretch: p50 {_f(one.get('p50_us'), '.0f')} µs, p99 "
        f"{_f(one.get('p99_us'), '.0f')} µs, max {_f(one.get('max_us'), '.0f')} µs."
    )


def _limit(row: dict[str, Any]) -> str:
    """Which side a run was bound by: the one near a full CPU, if either."""
    client, server = row.get("client_cpu_pct") or 0, row.get("server_cpu_pct") or 0
    if max(client, server) < 90:
        return "neither side used a full CPU"
    return "the broker was the limit" if server >= client else "the client was the limit"


def _budget(goal: float, base: dict[str, Any], mine: dict[str, Any], what: str) -> str:
    """What a goal means per message: the rate it asks for and the CPU it leaves."""
    rate = _rate(base)
    if rate is None or not mine.get("client_cpu_us_per_msg"):
        return ""
    target = goal * rate
    return (
        f"{what} asks for {target:,.0f} msg/s: at most {1e6 / target:.1f} µs of CPU per "
        f"message on each side (now client {mine['client_cpu_us_per_msg']:.1f} µs, broker "
        f"{_f(mine.get('server_cpu_us_per_msg'), '.1f')} µs)."
    )


def _reading(results: dict[str, Any]) -> str:
    """Where the time went and which side was the limit, computed from the figures."""
    parts = []
    window = _get(results, "aerolite", "produce", "window")
    redis_window = _get(results, "redis", "produce", "window")
    if window.get("client_cpu_us_per_msg"):
        text = (
            f"With 256 sends in flight the SDK's process was on CPU "
            f"{_f(window.get('client_cpu_pct'), '.0f')} % of the time at "
            f"{window['client_cpu_us_per_msg']:.1f} µs per message, the broker "
            f"{_f(window.get('server_cpu_pct'), '.0f')} % at "
            f"{_f(window.get('server_cpu_us_per_msg'), '.1f')} µs: {_limit(window)}"
        )
        if redis_window.get("client_cpu_us_per_msg"):
            text += (
                f"; redis-py spent {redis_window['client_cpu_us_per_msg']:.1f} µs per pipelined "
                f"XADD and Redis {_f(redis_window.get('server_cpu_us_per_msg'), '.1f')} µs"
            )
        parts.append(text + ".")
    batch = _get(results, "aerolite", "produce", "batch")
    if batch.get("client_cpu_us_per_msg"):
        parts.append(
            f"A message of a `send_batch` of 32 cost the client "
            f"{batch['client_cpu_us_per_msg']:.1f} µs and the broker "
            f"{_f(batch.get('server_cpu_us_per_msg'), '.1f')} µs ({_limit(batch)})."
        )
    push = _get(results, "aerolite", "consume", "push")
    if push.get("client_cpu_us_per_msg"):
        parts.append(
            f"The PushConsumer spent {push['client_cpu_us_per_msg']:.1f} µs of client CPU per "
            f"message (on CPU {_f(push.get('client_cpu_pct'), '.0f')} %), the broker "
            f"{_f(push.get('server_cpu_us_per_msg'), '.1f')} µs ({_limit(push)})."
        )
    redis_group = _get(results, "redis", "consume", "group")
    budgets = (
        _budget(PRODUCE_GOAL, redis_window, window, "The produce goal"),
        _budget(CONSUME_GOAL, redis_group, push, "The consume goal"),
    )
    parts += [b for b in budgets if b]
    return ("**Reading.** " + " ".join(parts)) if parts else ""


def _odd_lines(results: dict[str, Any]) -> list[str]:
    """Failed sends, lost or repeated messages, stalls, server log warnings."""
    lines: list[str] = []
    for key, system in results["systems"].items():
        label = SYSTEM_LABELS.get(key, key)
        runs = [*system.get("produce", {}).items(), *system.get("consume", {}).items()]
        for what, row in runs:
            name = RUN_LABELS.get((key, what), what)
            if "error" in row:
                continue
            kinds = {**(row.get("error_kinds") or {}), **(row.get("not_ok_kinds") or {})}
            if kinds:
                top = "; ".join(f"{n} x {k[:140]}" for k, n in kinds.items())
                lines.append(f"{label}, {name}: {send_failures(row)} sends failed ({top})")
            if "stored" in row and row["stored"] != row.get("acknowledged"):
                lines.append(
                    f"{label}, {name}: the broker's queues hold {row['stored']:,} messages, "
                    f"{row.get('acknowledged', 0):,} sends were acknowledged"
                )
            if "expect" in row and row.get("received", 0) < row["expect"]:
                lines.append(
                    f"{label}, {name}: received {row.get('received', 0):,} of "
                    f"{row['expect']:,} messages before the time limit"
                )
            if row.get("duplicates"):
                lines.append(f"{label}, {name}: {row['duplicates']} messages delivered twice")
            probe = row.get("stall_probe") or {}
            if probe.get("over_100ms"):
                lines.append(
                    f"{label}, {name}: {probe['over_100ms']} of {probe['probes']} stall probes "
                    f"waited over 100 ms (worst {probe['max_ms']:.0f} ms)"
                )
        lines += server_log_lines(label, system)
    return lines


def _peer_lines(results: dict[str, Any]) -> list[str]:
    clients = results["clients"]
    lines = [f"Aerolite: `python -m broker standalone`, driven by {clients['aerolite']}"]
    for key, peer in results["peers"].items():
        if peer["available"]:
            lines.append(f"{peer['label']}: {peer['version']}; driven by {clients[key]}")
        else:
            lines.append(f"{peer['label']}: not measured, {peer['reason']}")
    return lines


def render_console(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = [
        f"sdk: {cfg['body_bytes']} B bodies, window {cfg['window']}, batch {cfg['batch']}, "
        f"{cfg['consume_messages']:,} consumed, {'pinned' if cfg['pinned'] else 'not pinned'}"
        f"{', quick' if results['quick'] else ''}; {machine_line(results['machine'])}",
        *(f"  {line}" for line in _peer_lines(results)),
        "",
        text_table(_SUMMARY_HEADERS, _summary_rows(results)),
        "",
        text_table(_DETAIL_HEADERS, _detail_rows(results)),
        "",
        _echo_text(results),
        _goal_text(results).replace("**", ""),
    ]
    lines += console_tail(results, _reading(results), _odd_lines(results))
    return "\n".join(lines)


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    pinning = pinning_text(cfg["pinned"], SERVER_CPU, CLIENT_CPU)
    parts = [
        "## SDK: the asyncio client against the broker, next to Redis and NATS",
        "",
        measured_line(results, pinning),
        "",
        *(f"- {line}" for line in _peer_lines(results)),
        "",
        f"Every client runs in a process of its own on uvloop, {cfg['body_bytes']} B bodies; "
        f"Aerolite with ASYNC_FLUSH and topics of {cfg['queues']} queues, Redis with "
        "`appendonly yes` + `appendfsync everysec`, JetStream on file storage with its "
        f"default sync. Produce, after {cfg['warmup_messages']} sends awaited one by one: "
        "**one by one**, each `await producer.send(Message(...))` before the next (an `XADD`, "
        "a `js.publish` awaiting its `PubAck`), up to "
        f"{cfg['one_messages']:,} messages or {cfg['one_max_s']:g} s; **window of "
        f"{cfg['window']}**, {cfg['window']} tasks each awaiting its own `send` (the "
        "producer's default auto-batching coalesces the sends that overlap into batch "
        "requests, each caller still getting its own result; NATS the "
        f"same; Redis: pipelines of {cfg['window']} `XADD`s without MULTI, one pipeline at a "
        "time, since redis-py's asyncio client runs one command per connection at a time), "
        f"up to {cfg['window_messages']:,} messages or {cfg['window_max_s']:g} s; **batches "
        f"of {cfg['batch']}**, one `send_batch` request of {cfg['batch']} messages at a time "
        f"(a pipeline of {cfg['batch']} `XADD`s, {cfg['batch']} publishes gathered), up to "
        f"{cfg['batch_messages']:,} messages or {cfg['batch_max_s']:g} s. Consume: "
        f"{cfg['consume_messages']:,} messages preloaded, then read whole by a new group: a "
        "`PushConsumer` from the first offset with an async listener returning `SUCCESS`, "
        "and a `PullConsumer` calling `poll()` (auto-commit); Redis `XREADGROUP COUNT "
        f"{cfg['pull_batch']}` + `XACK` of each batch; a durable JetStream pull consumer "
        f"(`fetch({cfg['pull_batch']})`, one ack per batch); the rate runs from the first "
        "message received to the last. Ratios are Aerolite's rate over the other's; "
        "client µs/msg is the driver process's CPU time over the timed part per message. "
        "One run per figure.",
        "",
        markdown_table(_SUMMARY_HEADERS, _summary_rows(results)),
        "",
        "Every run: latency is per send (for a pipeline or a batch, every message of it "
        "waited as long as the whole), or per `poll()`/read for consumers; server CPU is the "
        "server process's on-CPU time per message over the timed part; CPU % is the share of "
        "one CPU; probe max is the slowest answer to a ping sent to the server every 20 ms "
        "over a connection of its own during the run.",
        "",
        markdown_table(_DETAIL_HEADERS, _detail_rows(results)),
        "",
        _echo_text(results),
        "",
        _goal_text(results),
    ]
    parts += markdown_tail(
        results, _reading(results), _odd_lines(results), "Failures and warnings in this run"
    )
    return "\n".join(parts)


# --------------------------------------------------------------------------- profile


def profile_sdk(
    *,
    seconds: float,
    shape: str,
    out: Path,
    top: int = 10,
    rate: int = 1000,
    native: bool = False,
    spy: str = "client",
) -> dict[str, Any]:
    """py-spy the SDK driver (``spy="client"``) or the broker (``spy="broker"``) for
    ``seconds`` while the driver produces in ``shape`` (not a figure: the sampler slows the
    sampled process down)."""
    cfg = FULL
    pin = _can_pin(cfg)
    work = bench_work_dir("sdk-profile-")
    topic = "SdkProfile"
    try:
        with AeroliteBroker(
            work / "aerolite", SERVER_CPU if pin else None, {"flushDiskType": "ASYNC_FLUSH"}
        ) as broker:
            asyncio.run(_admin(broker, topic, cfg.queues))
            args = {
                "namesrv": broker.namesrv,
                "topic": topic,
                "body_bytes": cfg.body_bytes,
                "server_pid": broker.pid,
                "cpu": CLIENT_CPU if pin else None,
                "shape": shape,
                "count": 100_000_000,
                "max_s": seconds + 3.0,
                "window": cfg.window,
                "batch": cfg.batch,
                "warmup": cfg.warmup_messages,
            }
            env = {k: v for k, v in os.environ.items() if k != "PYTHONASYNCIODEBUG"}
            done = profile_while_driving(
                [sys.executable, "-m", SDK_DRIVER, "produce"],
                args,
                env=env,
                spy_pid=broker.pid if spy == "broker" else None,
                seconds=seconds,
                out=out,
                native=native,
                settle_s=0.5,
                rate_hz=rate,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "shape": shape,
        "spy": spy,
        "seconds": seconds,
        "rate_hz": rate,
        "native": native,
        "messages_per_s_while_sampled": done.get("messages_per_s"),
        "client_cpu_us_per_msg": done.get("client_cpu_us_per_msg"),
        "speedscope": str(out),
        "top_self": speedscope_top(out, top),
    }


def main() -> None:
    """``python -m tests.bench.sdk_bench --profile``: a py-spy profile of the SDK client under
    the produce load (the benchmark itself runs from ``python -m tests.bench --only sdk``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.bench.sdk_bench")
    parser.add_argument("--profile", action="store_true", help="py-spy the SDK driver")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--shape", choices=SHAPES, default="window")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--native", action="store_true", help="C frames too (py-spy --native)")
    parser.add_argument(
        "--spy", choices=("client", "broker"), default="client", help="which process to sample"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "bench-results" / "sdk-profile.speedscope.json"
    )
    args = parse_profile_args(parser, "sdk")
    summary = profile_sdk(
        seconds=args.seconds,
        shape=args.shape,
        out=args.out,
        top=args.top,
        rate=args.rate,
        native=args.native,
        spy=args.spy,
    )
    save_summary(args.out, summary)
    print(
        f"py-spy, {args.seconds:g} s, {args.spy}, shape {summary['shape']}, "
        f"{summary['messages_per_s_while_sampled']} msg/s and "
        f"{summary['client_cpu_us_per_msg']} µs of client CPU per message while sampled; "
        f"{summary['speedscope']}"
    )
    print(text_table(("function", "self %", "total %"), top_self_rows(summary)))


if __name__ == "__main__":
    main()
