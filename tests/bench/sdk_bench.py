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
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tests.bench import common, loadgen, plots
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
    stored_settled,
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
from tests.bench.repeat import merge, merge_rows, rate_range
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
BATCH_GOAL = 400_000.0  # msg/s in batches of 32
CONSUME_GOAL = 3.0  # PushConsumer / Redis XREADGROUP
PRODUCER_WARMUP_S = 2.0  # a split run's producer, before its timed part


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkBenchConfig:
    """Counts and time budgets; every loop stops at whichever limit comes first."""

    body_bytes: int = 1024
    reps: int = 3  # every system's runs, repeated; figures are medians with their range
    window: int = 256
    batch: int = 32
    one_messages: int = 12_000
    one_max_s: float = 2.5
    window_messages: int = 300_000
    window_max_s: float = 2.5
    batch_messages: int = 300_000
    batch_max_s: float = 2.5
    sizes: tuple[int, ...] = (128, 16_384)  # produce also with these bodies ...
    size_shapes: tuple[str, ...] = ("window", "batch")  # ... in these shapes
    size_max_s: float = 1.5  # per produce run at another size
    sync_shapes: tuple[str, ...] = ("one", "window")  # flush per acknowledgement, 1 KiB
    warmup_messages: int = 300  # per produce run, awaited one by one, before the timed part
    consume_messages: int = 1_000_000
    consume_max_s: float = 20.0  # a slower reader reports its rate over this much
    consume_commands: tuple[str, ...] = ("push",)  # Aerolite's consumers ("pull" too)
    e2e_rate: float = 2_000.0  # end-to-end latency: messages a second, for e2e_s
    e2e_s: float = 30.0
    mixed_share: float = 0.7  # mixed run: produce at this share of the window-256 rate
    mixed_s: float = 6.0
    mixed_groups: int = 4
    drain_s: float = 5.0  # after a paced run, for the consumers to catch up
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
    reps=2,
    one_messages=100,
    one_max_s=2.0,
    window_messages=600,
    window_max_s=2.0,
    batch_messages=640,
    batch_max_s=2.0,
    sizes=(128,),
    size_shapes=("one", "window"),
    size_max_s=1.0,
    sync_shapes=("window",),
    warmup_messages=10,
    consume_messages=320,
    consume_max_s=10.0,
    consume_commands=("push", "pull"),
    e2e_rate=200.0,
    e2e_s=1.0,
    mixed_s=1.0,
    mixed_groups=2,
    drain_s=5.0,
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
        size = int(extra.get("body_bytes") or self.cfg.body_bytes)
        row = _rate_row(result.done, size, messages_key)
        row["stall_probe"] = probe
        return row

    def paced(
        self,
        module: str,
        rate: float,
        seconds: float,
        groups: int,
        *,
        split: bool = False,
        **where: Any,
    ) -> dict[str, Any]:
        """A producer at ``rate`` for ``seconds`` while ``groups`` consumer groups read
        (``drivers.paced``), in one driver process or, ``split``, the readers in a second
        one; the broker's RSS at the end."""
        cfg = self.cfg
        if split:
            row = self._paced_split(module, rate, seconds, groups, **where)
        else:
            row = self.driver(
                module,
                "paced",
                seconds + cfg.drain_s + 60.0,
                "ok",
                rate=rate,
                seconds=seconds,
                groups=groups,
                max_num=cfg.pull_batch,
                drain_s=cfg.drain_s,
                **where,
            )
        row["rss_kb"] = rss_kb(self.server.pid).get("VmRSS")
        return row

    def _paced_split(
        self, module: str, rate: float, seconds: float, groups: int, **where: Any
    ) -> dict[str, Any]:
        """The readers' driver in a thread of ours, then the producer's; the readers learn
        the producer's acknowledged count from a file and report what they received."""
        cfg = self.cfg
        self.home.mkdir(parents=True, exist_ok=True)
        tag = time.monotonic_ns()
        ready, stop = self.home / f"ready-{tag}", self.home / f"stop-{tag}"
        readers: dict[str, Any] = {}
        wait_s = PRODUCER_WARMUP_S + seconds + 120.0

        def read() -> None:
            try:
                readers.update(
                    run_driver(
                        module,
                        "paced",
                        self.args(
                            role="readers",
                            groups=groups,
                            ready=str(ready),
                            stop=str(stop),
                            max_s=wait_s,
                            drain_s=cfg.drain_s,
                            max_num=cfg.pull_batch,
                            **where,
                        ),
                        home=self.home,
                        timeout_s=wait_s + cfg.drain_s + 60.0,
                    ).done
                )
            except Exception as exc:  # reported with the row
                readers["error"] = first_line(exc)

        thread = threading.Thread(target=read, name="paced-readers", daemon=True)
        thread.start()
        deadline = time.monotonic() + 60.0
        while not ready.exists() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not ready.exists():
            stop.write_text("0\n")
            thread.join(cfg.drain_s + 60.0)
            raise RuntimeError(f"the readers did not start: {readers.get('error', 'no answer')}")
        try:
            row = self.driver(
                module,
                "paced",
                PRODUCER_WARMUP_S + seconds + 60.0,
                "ok",
                role="producer",
                rate=rate,
                seconds=seconds,
                groups=0,
                warmup_s=PRODUCER_WARMUP_S,
                **where,
            )
        except BaseException:
            stop.write_text("0\n")  # the readers stop too
            thread.join(cfg.drain_s + 90.0)
            raise
        # one write of the whole line: the readers poll for the file and read it at once
        tmp = stop.with_suffix(".tmp")
        tmp.write_text(f"{int(row.get('ok') or 0)}\n")
        tmp.replace(stop)
        thread.join(cfg.drain_s + 90.0)
        if "error" in readers or not readers:
            raise RuntimeError(f"the readers failed: {readers.get('error', 'no answer')}")
        produced_s = float(row.get("seconds") or 0.0)
        row.update(
            {k: v for k, v in readers.items() if k not in ("groups", "producer_ok", "warmed")}
        )
        row["groups"] = groups
        row["warmed"] = readers.get("warmed")
        row["consumed_per_s"] = round(readers["received"] / produced_s, 1) if produced_s else 0.0
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

    def produce(
        self, module: str, shape: str, size: int | None = None, **where: Any
    ) -> dict[str, Any]:
        """One produce run in ``shape`` with bodies of ``size`` bytes (default 1 KiB)."""
        cfg = self.cfg
        count, max_s = {
            "one": (cfg.one_messages, cfg.one_max_s),
            "window": (cfg.window_messages, cfg.window_max_s),
            "batch": (cfg.batch_messages, cfg.batch_max_s),
        }[shape]
        size = size or cfg.body_bytes
        if size != cfg.body_bytes:
            max_s = min(max_s, cfg.size_max_s)
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
            body_bytes=size,
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


def produce_runs(cfg: SdkBenchConfig, sync: bool) -> list[tuple[str, str, int]]:
    """(run key, shape, body bytes) of a system's produce runs: every shape at 1 KiB and at
    the other sizes (``window@128``), or, flushing per acknowledgement, ``sync_shapes``."""
    if sync:
        return [(shape, shape, cfg.body_bytes) for shape in cfg.sync_shapes]
    runs = [(shape, shape, cfg.body_bytes) for shape in SHAPES]
    sized = [(f"{shape}@{size}", shape, size) for size in cfg.sizes for shape in cfg.size_shapes]
    return runs + sized


def _aerolite_produce(
    run: _Run,
    broker: AeroliteBroker | RocketMQJavaBroker,
    *,
    key: str,
    shape: str,
    size: int,
    echo_port: int | None,
) -> dict[str, Any]:
    topic = f"SdkProduce_{key.replace('@', '_')}"
    asyncio.run(_admin(broker, topic, run.cfg.queues))
    extra: dict[str, Any] = {}
    if key == "one" and echo_port:
        extra = {"echo_port": echo_port, "echo_block": run.cfg.echo_block}
    row = run.produce(SDK_DRIVER, shape, size, namesrv=broker.namesrv, topic=topic, **extra)
    acknowledged = int(row.get("ok") or 0) + int(row.get("warmup_ok") or 0)
    row["stored"] = stored_settled(broker.address, topic, run.cfg.queues, acknowledged)
    row["acknowledged"] = acknowledged
    return row


def _mixed_rate(cfg: SdkBenchConfig, out: dict[str, Any]) -> float | None:
    """The mixed run's produce rate: ``mixed_share`` of this repetition's window-256 rate."""
    rate = _rate(out["produce"].get("window") or {})
    return None if rate is None else max(1.0, cfg.mixed_share * rate)


def _paced_runs(
    cfg: SdkBenchConfig,
    out: dict[str, Any],
    tag: str,
    notes: list[str],
    paced: Callable[[str, float, float, int], dict[str, Any]],
) -> None:
    """The end-to-end latency run and the mixed run into ``out["paced"]``; ``paced(name,
    rate, seconds, groups)`` runs one."""
    progress(f"{tag}: end to end, {cfg.e2e_rate:,.0f} msg/s for {cfg.e2e_s:g} s")
    out["paced"]["e2e"] = attempt(
        f"{tag} end to end",
        functools.partial(paced, "e2e", cfg.e2e_rate, cfg.e2e_s, 1),
        notes,
    )
    rate = _mixed_rate(cfg, out)
    if rate is None:
        out["paced"]["mixed"] = {"skipped": "no window-256 rate to take 70 % of"}
        return
    progress(f"{tag}: mixed, {rate:,.0f} msg/s and {cfg.mixed_groups} consumer groups")
    out["paced"]["mixed"] = attempt(
        f"{tag} mixed",
        functools.partial(paced, "mixed", rate, cfg.mixed_s, cfg.mixed_groups),
        notes,
    )


def aerolite_phase(
    cfg: SdkBenchConfig,
    work: Path,
    pin: bool,
    notes: list[str],
    *,
    java: bool = False,
    sync: bool = False,
) -> dict[str, Any]:
    """The broker under the SDK: the produce runs, then (ASYNC_FLUSH) the end-to-end and the
    mixed runs (the backlog has a phase of its own, ``backlog_phase``). ``java``: the same
    against Apache RocketMQ's own broker, the SDK held fixed (produce only). ``sync``:
    SYNC_FLUSH, produce only."""
    name = ("rocketmq" if java else "aerolite") + ("_sync" if sync else "")
    flush = "SYNC_FLUSH" if sync else "ASYNC_FLUSH"
    settings = {"flushDiskType": flush, **({} if java else dict(cfg.broker_settings))}
    tag = f"{'Apache RocketMQ' if java else 'Aerolite'} {flush}"
    out: dict[str, Any] = {"settings": settings, "produce": {}, "consume": {}, "paced": {}}
    broker: AeroliteBroker | RocketMQJavaBroker = (RocketMQJavaBroker if java else AeroliteBroker)(
        work / name, SERVER_CPU if pin else None, settings
    )
    try:
        with broker:
            run = _Run(cfg, work / f"home-{name}", broker, pin)
            for key, shape, size in produce_runs(cfg, sync):
                progress(f"{tag}: produce, {shape}, {size} B")
                with contextlib.ExitStack() as stack:
                    echo_port = None
                    if key == "one" and not java and not sync:
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
                    out["produce"][key] = attempt(
                        f"{tag} produce {key}",
                        functools.partial(
                            _aerolite_produce,
                            run,
                            broker,
                            key=key,
                            shape=shape,
                            size=size,
                            echo_port=echo_port,
                        ),
                        notes,
                    )
            if not sync and not java:  # the paced runs compare with Redis and NATS

                def paced(what: str, rate: float, seconds: float, groups: int) -> dict[str, Any]:
                    topic = f"SdkPaced_{what}"
                    asyncio.run(_admin(broker, topic, cfg.queues))
                    return run.paced(
                        SDK_DRIVER,
                        rate,
                        seconds,
                        groups,
                        split=what == "mixed",
                        namesrv=broker.namesrv,
                        topic=topic,
                    )

                _paced_runs(cfg, out, tag, notes, paced)
            out["rss_kb"] = rss_kb(broker.pid)
    except Exception as exc:  # a system that fails is reported, the benchmark goes on
        notes.append(f"{tag}: {first_line(exc)}")
        out["error"] = first_line(exc)
    broker_stopped(out, broker, tag, notes)
    return out


def _aerolite_consume(
    cfg: SdkBenchConfig,
    *,
    broker: AeroliteBroker | RocketMQJavaBroker,
    run: _Run,
    out: dict[str, Any],
    tag: str,
    notes: list[str],
) -> None:
    """Preload the backlog (not timed), then read it whole with each consumer."""
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
    if "error" in preload:
        return
    rows: dict[str, list[dict[str, Any]]] = {}
    for rep in range(cfg.reps):
        for command in cfg.consume_commands:
            progress(f"{tag}: consume, {command} ({rep + 1} of {cfg.reps})")
            rows.setdefault(command, []).append(
                attempt(
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
            )
    out["consume"] = {command: merge_rows(r) for command, r in rows.items()}


def backlog_phase(
    cfg: SdkBenchConfig,
    work: Path,
    pin: bool,
    notes: list[str],
    *,
    system: str,
    spec: PeerSpec | None = None,
    label: str = "",
) -> dict[str, Any]:
    """The backlog workload of one system (``aerolite``, ``rocketmq``, or a peer with its
    ``spec``): one server, ``consume_messages`` preloaded once (not timed), then read whole
    by a new consumer group in each of ``reps`` repetitions, merged like the others."""
    out: dict[str, Any] = {"consume": {}}
    if spec is None:
        java = system == "rocketmq"
        tag = f"{'Apache RocketMQ' if java else 'Aerolite'} backlog"
        extra = {} if java else dict(cfg.broker_settings)
        settings = {"flushDiskType": "ASYNC_FLUSH", **extra}
        broker: AeroliteBroker | RocketMQJavaBroker = (
            RocketMQJavaBroker if java else AeroliteBroker
        )(work / f"{system}-backlog", SERVER_CPU if pin else None, settings)
        try:
            with broker:
                run = _Run(cfg, work / f"home-{system}-backlog", broker, pin)
                _aerolite_consume(cfg, broker=broker, run=run, out=out, tag=tag, notes=notes)
        except Exception as exc:  # reported, the benchmark goes on
            notes.append(f"{tag}: {first_line(exc)}")
            out["error"] = first_line(exc)
        broker_stopped(out, broker, tag, notes)
        return out
    tag = f"{label} backlog"
    server = spec.server(work / f"{spec.key}-backlog", SERVER_CPU if pin else None, False)
    try:
        with server:
            run = _Run(cfg, work / f"home-{spec.key}-backlog", server, pin)
            consume_at = spec.where(server, "consume")
            progress(f"{tag}: preload {cfg.consume_messages:,} messages")
            out["preload"] = attempt(
                f"{tag} preload", functools.partial(run.preload, spec.module, **consume_at), notes
            )
            if "error" not in out["preload"]:
                rows = []
                for rep in range(cfg.reps):
                    progress(f"{tag}: consume, {spec.consume_command} ({rep + 1} of {cfg.reps})")
                    rows.append(
                        attempt(
                            f"{tag} {spec.consume_command}",
                            functools.partial(
                                run.consume,
                                spec.module,
                                spec.consume_command,
                                group=f"bench{rep}",  # a new group reads from the start
                                **consume_at,
                            ),
                            notes,
                        )
                    )
                out["consume"][spec.consume_command] = merge_rows(rows)
    except Exception as exc:  # a peer that fails is reported, the benchmark goes on
        notes.append(f"{tag}: {first_line(exc)}")
        out["error"] = first_line(exc)
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
    spec: PeerSpec,
    label: str,
    cfg: SdkBenchConfig,
    work: Path,
    pin: bool,
    *,
    notes: list[str],
    sync: bool = False,
) -> dict[str, Any]:
    """A peer in the same runs as ``aerolite_phase``; ``sync``: fsync per write, produce
    only."""
    out: dict[str, Any] = {"produce": {}, "consume": {}, "paced": {}}
    tag = f"{label}{' (fsync always)' if sync else ''}"
    where_to = work / (spec.key + ("_sync" if sync else ""))
    server = spec.server(where_to, SERVER_CPU if pin else None, sync)
    try:
        with server:
            run = _Run(cfg, work / f"home-{spec.key}", server, pin)
            for key, shape, size in produce_runs(cfg, sync):
                progress(f"{tag}: produce, {shape}, {size} B")
                where = spec.where(server, f"produce_{key.replace('@', '_')}")
                out["produce"][key] = attempt(
                    f"{tag} produce {key}",
                    functools.partial(run.produce, spec.module, shape, size, **where),
                    notes,
                )
            if not sync:

                def paced(what: str, rate: float, seconds: float, groups: int) -> dict[str, Any]:
                    where = spec.where(server, f"paced_{what}")
                    return run.paced(
                        spec.module, rate, seconds, groups, split=what == "mixed", **where
                    )

                _paced_runs(cfg, out, tag, notes, paced)
            out["rss_kb"] = rss_kb(server.pid)
    except Exception as exc:  # a peer that fails is reported, the benchmark goes on
        if sync and spec.key == "nats" and "unknown field" in str(exc):
            out["skipped"] = common.NATS_NO_SYNC
        else:
            notes.append(f"{tag}: {first_line(exc)}")
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


COLUMNS = ("aerolite", "rocketmq", "redis", "nats")  # Aerolite first, then the peers


@dataclass(frozen=True, slots=True)
class Workload:
    """A row of the comparison: where each system's figure is (Apache RocketMQ's run is
    Aerolite's, the SDK held fixed) and whether the systems flush per acknowledgement."""

    label: str
    phase: str
    mine: str
    redis: str
    nats: str
    sync: bool = False

    def cell(self, system: str) -> tuple[str, str, str]:
        """(system key, phase, run key) of ``system``'s figure for this workload."""
        run = {"redis": self.redis, "nats": self.nats}.get(system, self.mine)
        return (system + ("_sync" if self.sync else ""), self.phase, run)


def _size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def workloads(cfg: dict[str, Any]) -> list[Workload]:
    """Every row of the comparison, for the sizes and shapes this run measured."""
    body = int(cfg["body_bytes"])
    shapes = {"one": "one by one", "window": f"window of {cfg['window']}"}
    shapes["batch"] = f"batches of {cfg['batch']}"
    rows = [
        Workload(f"produce {_size_label(body)}, {text}", "produce", shape, shape, shape)
        for shape, text in shapes.items()
    ]
    for size in cfg["sizes"]:
        for shape in cfg["size_shapes"]:
            key, text = f"{shape}@{size}", shapes[shape]
            rows.append(Workload(f"produce {_size_label(size)}, {text}", "produce", key, key, key))
    rows += [
        Workload(
            f"produce {_size_label(body)}, {shapes[shape]}, flush per ack",
            "produce",
            shape,
            shape,
            shape,
            sync=True,
        )
        for shape in cfg["sync_shapes"]
    ]
    rows.append(Workload("consume backlog, PushConsumer", "consume", "push", "group", "durable"))
    if "pull" in cfg["consume_commands"]:
        rows.append(
            Workload("consume backlog, PullConsumer", "consume", "pull", "group", "durable")
        )
    return rows


def compute_ratios(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for w in workloads(results["config"]):
        rate = _rate(_get(results, *w.cell("aerolite")))
        out[w.label] = {
            f"vs_{peer}": _ratio(rate, _rate(_get(results, *w.cell(peer)))) for peer in COLUMNS[1:]
        }
    e2e = {s: _get(results, s, "paced", "e2e").get("p99_us") for s in COLUMNS}
    out["end-to-end p99 (lower is better)"] = {
        f"vs_{peer}": _ratio(e2e["aerolite"], e2e[peer]) for peer in COLUMNS[1:]
    }
    return out


def _goal(value: float | None, goal: float, at_least: bool = True) -> dict[str, Any]:
    met = None if value is None else (value >= goal if at_least else value <= goal)
    return {"value": value, "goal": goal, "met": met}


def compute_goals(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals for this benchmark's runs, each with its figure and met or not."""
    cfg = results["config"]
    body = _size_label(int(cfg["body_bytes"]))
    ratios = results["ratios"]
    window = ratios[f"produce {body}, window of {cfg['window']}"]["vs_redis"]
    batch = _rate(_get(results, "aerolite", "produce", "batch"))
    one = _get(results, "aerolite", "produce", "one").get("p99_us")
    redis_one = _get(results, "redis", "produce", "one").get("p99_us")
    sync_label = f"produce {body}, window of {cfg['window']}, flush per ack"
    sync = (ratios.get(sync_label) or {}).get("vs_redis")
    consume = ratios["consume backlog, PushConsumer"]["vs_redis"]
    e2e = ratios["end-to-end p99 (lower is better)"]["vs_nats"]
    return {
        "window_vs_redis_pipelined": _goal(window, PRODUCE_GOAL),
        "batch_msgs_per_s": _goal(batch, BATCH_GOAL),
        "one_p99_vs_redis": _goal(_ratio(one, redis_one), 1.0, at_least=False),
        "sync_window_vs_redis_always": _goal(sync, 1.0),
        "consume_vs_redis_xreadgroup": _goal(consume, CONSUME_GOAL),
        "e2e_p99_vs_nats": _goal(e2e, 1.0, at_least=False),
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
    rocketmq_peer = peers.get("rocketmq")
    java = rocketmq_peer is not None and rocketmq_peer.available
    specs = [spec for spec in PEER_SPECS if (p := peers.get(spec.key)) and p.available]
    reps: list[dict[str, Any]] = []
    backlogs: dict[str, dict[str, Any]] = {}
    try:
        # the systems take turns within every repetition, so that foreign load and the
        # machine's drift hit them alike
        for rep in range(cfg.reps):
            progress(f"repetition {rep + 1} of {cfg.reps}")
            systems: dict[str, Any] = {}
            for sync in (False, True):
                suffix = "_sync" if sync else ""
                systems["aerolite" + suffix] = aerolite_phase(cfg, work, pin, notes, sync=sync)
                if java:
                    systems["rocketmq" + suffix] = aerolite_phase(
                        cfg, work, pin, notes, java=True, sync=sync
                    )
                for spec in specs:
                    systems[spec.key + suffix] = peer_phase(
                        spec, peers[spec.key].label, cfg, work, pin, notes=notes, sync=sync
                    )
            reps.append(systems)
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True, exist_ok=True)
        # the backlog: preloaded once per system, read by a new group in each repetition
        backlogs = {"aerolite": backlog_phase(cfg, work, pin, notes, system="aerolite")}
        if java:
            backlogs["rocketmq"] = backlog_phase(cfg, work, pin, notes, system="rocketmq")
        for spec in specs:
            backlogs[spec.key] = backlog_phase(
                cfg, work, pin, notes, system=spec.key, spec=spec, label=peers[spec.key].label
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["systems"] = merge(reps)
    for key, backlog in backlogs.items():
        system = results["systems"].setdefault(key, {})
        system["consume"] = backlog.get("consume") or {}
        system["preload"] = backlog.get("preload")
        if "error" in backlog:
            system["backlog_error"] = backlog["error"]
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
    if not quick or config is not None:
        results["plots"] = attempt(
            "plots", lambda: draw_plots(results, PLOT_DIR if not quick else work.parent), notes
        )
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results), notes)


# ----------------------------------------------------------------------------- plots

PLOT_DIR = REPO_ROOT / "docs"


def draw_plots(results: dict[str, Any], out: Path) -> dict[str, Any]:
    """The PNGs of ``tests.bench.plots`` into ``out``; their paths."""
    cfg = results["config"]
    runs = [(w.label, w.cell) for w in workloads(cfg)]
    paced = [(run_label("aerolite", "mixed", cfg) + ", produced", lambda s: (s, "paced", "mixed"))]
    one = f"produce {_size_label(int(cfg['body_bytes']))}, one by one"
    panels = [
        (one, lambda s: (s, "produce", "one")),
        (run_label("aerolite", "e2e", cfg), lambda s: (s, "paced", "e2e")),
        (run_label("aerolite", "mixed", cfg), lambda s: (s, "paced", "mixed")),
    ]
    wanted = {"window", "batch", "push"}
    cpu_runs = [
        (label, cell)
        for (label, cell), w in zip(runs, workloads(cfg), strict=True)
        if w.mine in wanted
    ]
    return {
        "throughput": plots.throughput(
            results, runs + paced, COLUMNS, out / "bench-throughput.png"
        ),
        "latency": plots.latency(results, panels, COLUMNS, out / "bench-latency.png"),
        "cpu": plots.cpu(results, cpu_runs + paced, COLUMNS, out / "bench-cpu.png"),
    }


# ---------------------------------------------------------------------------- render

NOISY_SPREAD = 1.3  # a run whose repetitions' rates differ more than this is flagged
NOISY_FOREIGN = 0.25  # ... or during which other work took this share of a CPU


def _cell(row: dict[str, Any], key: str = "messages_per_s") -> str:
    """A merged row's median with its range over the repetitions."""
    if not row:
        return "—"
    if "skipped" in row:
        return "n/a"
    if "error" in row:
        return "failed"
    return _n(row.get(key)) + rate_range(row, key)


def _noise(row: dict[str, Any]) -> str:
    """Why a run's figure is less sure than the others ("" when it is not)."""
    flags = []
    spread = (row.get("spread") or {}).get("messages_per_s")
    if spread and spread["min"] > 0 and spread["max"] / spread["min"] > NOISY_SPREAD:
        flags.append(f"spread {spread['max'] / spread['min']:.2f}x")
    foreign, window = row.get("foreign_cpu_s"), row.get("cpu_window_s")
    if foreign and window and foreign / window > NOISY_FOREIGN:
        flags.append(f"other work {100 * foreign / window:.0f} % CPU")
    return ", ".join(flags)


def _summary_headers(results: dict[str, Any]) -> tuple[str, ...]:
    n = results["config"]["reps"]
    return (
        "run",
        f"Aerolite msg/s, median of {n} (min–max)",
        "MB/s",
        "RocketMQ msg/s",
        "Redis msg/s",
        "NATS msg/s",
        "vs RocketMQ",
        "vs Redis",
        "vs NATS",
    )


def _summary_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for w in workloads(results["config"]):
        cells = {system: _get(results, *w.cell(system)) for system in COLUMNS}
        for system in COLUMNS:
            if "skipped" in (results["systems"].get(w.cell(system)[0]) or {}):
                cells[system] = {"skipped": True}
        ratio = results["ratios"][w.label]
        rows.append(
            [
                w.label,
                _cell(cells["aerolite"]),
                _f(cells["aerolite"].get("mb_per_s"), ".1f"),
                *(_cell(cells[peer]) for peer in COLUMNS[1:]),
                *(_f(ratio[f"vs_{peer}"], ".2f") for peer in COLUMNS[1:]),
            ]
        )
    return rows


SYSTEM_LABELS = {
    "aerolite": "Aerolite, ASYNC_FLUSH",
    "aerolite_sync": "Aerolite, SYNC_FLUSH",
    "rocketmq": "Apache RocketMQ (SDK), ASYNC_FLUSH",
    "rocketmq_sync": "Apache RocketMQ (SDK), SYNC_FLUSH",
    "redis": "Redis, appendfsync everysec",
    "redis_sync": "Redis, appendfsync always",
    "nats": "NATS JetStream (default sync)",
    "nats_sync": "NATS JetStream, sync_interval always",
}
_SHAPE_WORDS = {
    "aerolite": {
        "one": "send, one by one",
        "window": "send, 256 in flight",
        "batch": "send_batch of 32",
        "push": "PushConsumer",
        "pull": "PullConsumer.poll",
    },
    "redis": {
        "one": "XADD, one by one",
        "window": "pipelines of 256 XADD",
        "batch": "pipelines of 32 XADD",
        "group": "XREADGROUP 32 + XACK",
    },
    "nats": {
        "one": "publish, one by one",
        "window": "256 publishes in flight",
        "batch": "32 publishes, gathered",
        "durable": "durable pull, fetch(32)",
    },
}


def run_label(system: str, key: str, cfg: dict[str, Any]) -> str:
    """What a system's run was, in its own API's words (``window@128`` gets its size)."""
    if key == "e2e":
        return f"end to end, {cfg['e2e_rate']:,.0f} msg/s"
    if key == "mixed":
        return f"mixed, {cfg['mixed_groups']} groups reading"
    kind = system.removesuffix("_sync").replace("rocketmq", "aerolite")
    shape, _, size = key.partition("@")
    words = _SHAPE_WORDS.get(kind, {}).get(shape, shape)
    return f"{words}, {_size_label(int(size))}" if size else words


_DETAIL_HEADERS = (
    "system",
    "run",
    "msg/s",
    "MB/s",
    "p50 µs",
    "p99 µs",
    "p99.9 µs",
    "client CPU µs/msg",
    "server CPU µs/msg",
    "server CPU %",
    "probe max ms",
    "failed",
    "noise",
)


def _runs(system: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        *system.get("produce", {}).items(),
        *system.get("consume", {}).items(),
        *system.get("paced", {}).items(),
    ]


def _order(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The systems in the order of the tables: each system, then its flush-per-ack run."""
    systems = results["systems"]
    keys = [k + suffix for k in COLUMNS for suffix in ("", "_sync") if k + suffix in systems]
    return [(k, systems[k]) for k in keys]


def _detail_rows(results: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    cfg = results["config"]
    for key, system in _order(results):
        label = SYSTEM_LABELS.get(key, key)
        if "skipped" in system:
            rows.append([label, "—", "n/a", *[""] * 10])
            continue
        if "error" in system and not system.get("produce"):
            rows.append([label, "—", "failed", *[""] * 10])
            continue
        for what, row in _runs(system):
            name = run_label(key, what, cfg)
            if "error" in row or "skipped" in row:
                rows.append([label, name, "failed" if "error" in row else "n/a", *[""] * 10])
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
                    _f(row.get("p99_9_us"), ",.0f"),
                    _f(row.get("client_cpu_us_per_msg"), ".1f"),
                    _f(row.get("server_cpu_us_per_msg"), ".1f"),
                    _f(row.get("server_cpu_pct"), ".0f"),
                    _f(probe.get("max_ms"), ".0f"),
                    str(send_failures(row)),
                    _noise(row),
                ]
            )
    return rows


_LATENCY_HEADERS = ("system", "run", "p50 µs", "p99 µs (min–max)", "p99.9 µs", "max µs")


def _latency_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    cfg = results["config"]
    for what in ("one", "e2e"):
        for system in COLUMNS:
            row = _get(results, system, "paced" if what == "e2e" else "produce", what)
            if not row or "error" in row:
                continue
            rows.append(
                [
                    SYSTEM_LABELS[system],
                    run_label(system, what, cfg),
                    _f(row.get("p50_us"), ",.0f"),
                    _f(row.get("p99_us"), ",.0f") + rate_range(row, "p99_us"),
                    _f(row.get("p99_9_us"), ",.0f"),
                    _f(row.get("max_us"), ",.0f"),
                ]
            )
    return rows


_MIXED_HEADERS = (
    "system",
    "target msg/s",
    "produced msg/s (min–max)",
    "consumed msg/s, all groups",
    "missing at the end",
    "end-to-end p99 ms",
    "broker CPU µs/msg",
    "broker CPU %",
    "broker RSS MiB",
)


def _mixed_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for system in COLUMNS:
        row = _get(results, system, "paced", "mixed")
        if not row:
            continue
        if "error" in row or "skipped" in row:
            rows.append([SYSTEM_LABELS[system], "—", "failed", *[""] * 6])
            continue
        window = row.get("cpu_window_s") or 0
        cpu = row.get("server_cpu_s")
        p99 = row.get("p99_us")
        rss = row.get("rss_kb")
        rows.append(
            [
                SYSTEM_LABELS[system],
                _n(row.get("target_per_s")),
                _cell(row),
                _n(row.get("consumed_per_s")),
                _n(row.get("missing")),
                _f(p99 / 1e3 if p99 else None, ",.1f"),
                _f(row.get("server_cpu_us_per_msg"), ".1f"),
                _f(100 * cpu / window if cpu is not None and window else None, ".0f"),
                _f(rss / 1024 if rss else None, ",.0f"),
            ]
        )
    return rows


def _met(flag: Any) -> str:
    return "not measured" if flag is None else ("met" if flag else "**not met**")


GOAL_TEXTS = {
    "window_vs_redis_pipelined": ("window-256 produce ≥ {goal:g}x Redis's pipelined XADD", "x"),
    "batch_msgs_per_s": ("batches of 32 ≥ {goal:,.0f} msg/s", " msg/s"),
    "one_p99_vs_redis": ("one-by-one produce p99 ≤ Redis's XADD p99", "x Redis's"),
    "sync_window_vs_redis_always": (
        "SYNC_FLUSH window-256 ≥ Redis pipelined with appendfsync always",
        "x",
    ),
    "consume_vs_redis_xreadgroup": ("consume backlog ≥ {goal:g}x Redis's XREADGROUP", "x"),
    "e2e_p99_vs_nats": ("end-to-end p99 at 2,000 msg/s ≤ NATS JetStream's", "x NATS's"),
}


def goal_lines(results: dict[str, Any]) -> list[str]:
    """One line per goal: what it asks, the figure, met or not."""
    lines = []
    for key, goal in results["goals"].items():
        text, unit = GOAL_TEXTS[key]
        value = goal["value"]
        figure = "—" if value is None else (f"{value:,.0f}" if value >= 1000 else f"{value:.2f}")
        lines.append(f"{text.format(goal=goal['goal'])}: {figure}{unit}, {_met(goal['met'])}")
    return lines


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
    cfg = results["config"]
    for key, system in _order(results):
        label = SYSTEM_LABELS.get(key, key)
        for what, row in _runs(system):
            name = run_label(key, what, cfg)
            if "error" in row or "skipped" in row:
                continue
            if row.get("failed_repetitions"):
                lines.append(f"{label}, {name}: failed in {row['failed_repetitions']} repetitions")
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
            if row.get("missing"):
                lines.append(
                    f"{label}, {name}: the consumer groups had not received "
                    f"{row['missing']:,} acknowledged messages {cfg['drain_s']:g} s after the "
                    "producer stopped (median over the repetitions)"
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
        f"sdk: {cfg['body_bytes']} B bodies (also {', '.join(map(str, cfg['sizes']))} B), "
        f"window {cfg['window']}, batch {cfg['batch']}, {cfg['consume_messages']:,} consumed, "
        f"{cfg['reps']} repetitions, {'pinned' if cfg['pinned'] else 'not pinned'}"
        f"{', quick' if results['quick'] else ''}; {machine_line(results['machine'])}",
        *(f"  {line}" for line in _peer_lines(results)),
        "",
        text_table(_summary_headers(results), _summary_rows(results)),
        "",
        text_table(_LATENCY_HEADERS, _latency_rows(results)),
        "",
        text_table(_MIXED_HEADERS, _mixed_rows(results)),
        "",
        text_table(_DETAIL_HEADERS, _detail_rows(results)),
        "",
        _echo_text(results),
        "Goals: " + "; ".join(goal_lines(results)).replace("**", ""),
    ]
    lines += console_tail(results, _reading(results), _odd_lines(results))
    return "\n".join(lines)


def _size_shape_words(cfg: dict[str, Any]) -> list[str]:
    words = {"one": "one by one", "window": f"window of {cfg['window']}"}
    words["batch"] = f"batches of {cfg['batch']}"
    return [f"*{words[shape]}*" for shape in cfg["size_shapes"]]


def _method(cfg: dict[str, Any]) -> str:
    sizes = " and ".join(_size_label(int(size)) for size in cfg["sizes"])
    return (
        f"Every client runs in a process of its own on uvloop; topics of {cfg['queues']} "
        "queues. Aerolite and Apache RocketMQ run ASYNC_FLUSH, Redis `appendonly yes` + "
        "`appendfsync everysec`, JetStream file storage with its default sync; the rows "
        "marked *flush per ack* run Aerolite and Apache RocketMQ with SYNC_FLUSH and Redis "
        "with `appendfsync always`. Apache RocketMQ is driven by our SDK too, so the two "
        f"brokers are compared with the client held fixed. **Repetitions**: {cfg['reps']}; "
        "in each, every system runs every workload on a freshly started server, the systems "
        "taking turns; a figure is the median over the repetitions with the lowest and the "
        "highest in brackets. **Produce**, after "
        f"{cfg['warmup_messages']} sends awaited one by one: *one by one*, each "
        "`await producer.send(Message(...))` before the next (an `XADD`, a `js.publish` "
        f"awaiting its `PubAck`), up to {cfg['one_messages']:,} messages or "
        f"{cfg['one_max_s']:g} s; *window of {cfg['window']}*, {cfg['window']} tasks each "
        "awaiting its own `send` (the producer's auto-batching coalesces the sends that "
        "overlap into batch requests, each caller still getting its own result; NATS the "
        f"same; Redis: pipelines of {cfg['window']} `XADD`s without MULTI, one pipeline at a "
        "time, since redis-py's asyncio client runs one command per connection at a time), "
        f"up to {cfg['window_messages']:,} messages or {cfg['window_max_s']:g} s; *batches "
        f"of {cfg['batch']}*, one `send_batch` of {cfg['batch']} messages at a time (a "
        f"pipeline of {cfg['batch']} `XADD`s, {cfg['batch']} publishes gathered), as long. "
        f"The {' and '.join(_size_shape_words(cfg))} shapes again with {sizes} bodies, "
        f"{cfg['size_max_s']:g} s each. **Consume "
        f"backlog**: {cfg['consume_messages']:,} messages preloaded (not timed), then read "
        "whole by a new group: a `PushConsumer` from the first offset with an async listener "
        "returning `SUCCESS` (offsets committed to the broker)"
        + (
            ", and a `PullConsumer` calling `poll()` (auto-commit)"
            if "pull" in cfg["consume_commands"]
            else ""
        )
        + f"; Redis `XREADGROUP COUNT {cfg['pull_batch']}` + `XACK` of "
        f"each batch; a durable JetStream pull consumer (`fetch({cfg['pull_batch']})`, one "
        "ack per batch); the rate runs from the first message received to the last, over at "
        f"most {cfg['consume_max_s']:g} s. **End "
        f"to end**: {cfg['e2e_rate']:,.0f} msg/s for {cfg['e2e_s']:g} s, open loop (each "
        "millisecond's due messages handed to the client at once, without waiting for "
        "earlier answers), one consumer group in the same process: a `PushConsumer`, "
        "`XREADGROUP BLOCK` + `XACK`, a durable JetStream push consumer with an ack per "
        "message; latency from the moment a message was due to be sent to its arrival in "
        "the listener, so a late producer counts against it. **Mixed**: the same producer "
        f"at {cfg['mixed_share']:.0%} of the system's window-{cfg['window']} rate in that "
        f"repetition for {cfg['mixed_s']:g} s while {cfg['mixed_groups']} consumer groups "
        "read; broker CPU per message is the server's CPU time over the run per message "
        "produced (each is written once and read by every group); RSS at the end. The "
        "readers run in a driver process of their own, beside the producer's, both on the "
        "clients' CPU. Apache RocketMQ runs the produce and backlog workloads (the paced "
        "ones compare with Redis and NATS). Ratios are Aerolite's median over the other's."
    )


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    pinning = pinning_text(cfg["pinned"], SERVER_CPU, CLIENT_CPU)
    parts = [
        "## Side by side: Aerolite, Apache RocketMQ, Redis Streams and NATS JetStream",
        "",
        measured_line(results, pinning),
        "",
        *(f"- {line}" for line in _peer_lines(results)),
        "",
        _method(cfg),
        "",
        markdown_table(_summary_headers(results), _summary_rows(results)),
        "",
        "![throughput per workload](bench-throughput.png)",
        "",
        "**Goals** (this benchmark's; the native-client, RSS and memory goals are in the "
        "broker and memory sections):",
        "",
        *(f"- {line}" for line in goal_lines(results)),
        "",
        "**Latency.** Produce one by one (per send) and end to end at a fixed rate (from due "
        "time to the listener), medians over the repetitions:",
        "",
        markdown_table(_LATENCY_HEADERS, _latency_rows(results)),
        "",
        "![latency percentiles](bench-latency.png)",
        "",
        "**Mixed.**",
        "",
        markdown_table(_MIXED_HEADERS, _mixed_rows(results)),
        "",
        "![broker CPU per message](bench-cpu.png)",
        "",
        "**Every run.** Latency is per send (for a pipeline or a batch, every message of it "
        "waited as long as the whole), per `poll()`/read for consumers, due-to-listener for "
        "the paced runs; server CPU is the server process's on-CPU time per message over "
        "the timed part; probe max is the slowest answer to a ping sent to the server every "
        "20 ms over a connection of its own during the run. *noise* flags a run whose "
        f"repetitions differ by more than {NOISY_SPREAD:g}x, or during which other work on "
        f"the machine took more than {NOISY_FOREIGN:.0%} of a CPU.",
        "",
        markdown_table(_DETAIL_HEADERS, _detail_rows(results)),
        "",
        _echo_text(results),
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
    ``seconds`` while the driver produces in ``shape``, or, with ``shape="push"``, while a
    ``PushConsumer`` reads a preloaded backlog (not a figure: the sampler slows the sampled
    process down)."""
    cfg = FULL
    pin = _can_pin(cfg)
    work = bench_work_dir("sdk-profile-")
    topic = "SdkProfile"
    command = "push" if shape == "push" else "produce"
    try:
        with AeroliteBroker(
            work / "aerolite", SERVER_CPU if pin else None, {"flushDiskType": "ASYNC_FLUSH"}
        ) as broker:
            asyncio.run(_admin(broker, topic, cfg.queues))
            if command == "push":
                # more than the sampled seconds can read, at the rates this path reaches
                backlog = int(max(100_000, 120_000 * seconds))
                run_driver(
                    SDK_DRIVER,
                    "preload",
                    {
                        "namesrv": broker.namesrv,
                        "topic": topic,
                        "body_bytes": cfg.body_bytes,
                        "count": backlog,
                        "batch": cfg.batch,
                        "cpu": CLIENT_CPU if pin else None,
                    },
                    home=work / "home",
                    timeout_s=600.0,
                )
            args = {
                "expect": 100_000_000,
                "max_num": cfg.pull_batch,
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
                [sys.executable, "-m", SDK_DRIVER, command],
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
    parser.add_argument("--shape", choices=(*SHAPES, "push"), default="window")
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
