"""Replication benchmark: how far a slave trails its master, and what SYNC_MASTER costs.

RocketMQ counterpart of what is measured: ``HAService`` / ``HAConnection`` streaming the
commit log to a slave, and ``GroupTransferService`` holding a SYNC_MASTER's acknowledgement
until a slave has the bytes (store/ha.py here).

Every run starts a name server, a master and its slave, each ``python -m broker`` in a
process of its own on 127.0.0.1 (ports 0; the slave finds the master's HA port through the
name server), stores under ``bench-results/``. The producer is the asyncio SDK in this
process, on uvloop, sending 1 KiB bodies to one topic of 8 queues.

- **Lag at a steady rate** (ASYNC_MASTER): ``rate`` messages/s for ``seconds``, issued in
  ticks of 10 ms. A poller asks master and slave for GET_BROKER_RUNTIME_INFO every
  ``poll_ms``: the *bytes* lag is the master's commitLogMaxOffset minus the slave's at each
  poll; the *time* lag of a message runs from its acknowledgement to the first poll at which
  the slave's log reached the message's end. Its resolution is the poll interval (a slave
  that is faster than that reads as 0 ms to one poll).
- **Throughput**, ASYNC_MASTER and then SYNC_MASTER (a fresh trio each, same load): ``count``
  sends with 64 in flight (the SDK coalesces overlapping sends into batches), then
  ``one_by_one`` sends awaited one at a time for their latency. The figure that carries
  over to other machines is SYNC_MASTER's rate as a ratio of ASYNC_MASTER's in the same run.

One run per figure. Nothing is asserted: CI machines vary.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client import Message, Producer, SendStatus
from client.admin import decode_offset_msg_id
from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.bodies import KVTable
from remoting.headers import CreateTopicRequestHeader
from tests.bench import common
from tests.bench.report import (
    REPO_ROOT,
    Report,
    machine_info,
    machine_line,
    markdown_table,
    percentile,
    text_table,
)

NAME = "replication"
BODY = b"r" * 1024
TOPIC = "BenchReplication"
WINDOW = 64
READY_TIMEOUT_S = 60.0
PLOT = REPO_ROOT / "docs" / "replication-lag.png"


@dataclass(frozen=True, slots=True)
class Settings:
    rate: int  # messages/s in the lag run
    seconds: float
    poll_ms: float
    count: int  # throughput run, 64 in flight
    one_by_one: int


FULL = Settings(rate=2000, seconds=10.0, poll_ms=2.0, count=30_000, one_by_one=2_000)
QUICK = Settings(rate=200, seconds=1.0, poll_ms=5.0, count=300, one_by_one=50)


# ---------------------------------------------------------------------------- processes


class _Process:
    """``python -m broker …`` whose first stdout line is its ``ready`` line."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with log.open("w") as err:
            self.proc = subprocess.Popen(  # our own broker, fixed arguments
                [sys.executable, "-m", "broker", "--log-level", "warning", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None

        def read() -> None:
            with stdout:
                lines.put(stdout.readline())
                stdout.read()  # keep the pipe drained until the process ends

        threading.Thread(target=read, daemon=True).start()
        try:
            line = lines.get(timeout=READY_TIMEOUT_S)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"no ready line from {args[0]}; see {log}") from None
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"{args[0]} exited before it was ready; see {log}")
        self.fields = dict(w.split("=", 1) for w in line.split()[1:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


@contextlib.contextmanager
def trio(work: Path, role: str) -> Any:
    """A name server, a master in ``role`` and its slave; yields their addresses."""
    work.mkdir(parents=True, exist_ok=True)
    started: list[_Process] = []
    try:
        ns = _Process(
            [
                "namesrv",
                "--port",
                "0",
                "--set",
                f"kvConfigPath={work / 'kv.json'}",
                "--set",
                "metricsPort=0",
            ],
            work / "namesrv.log",
        )
        started.append(ns)
        namesrv = ns.fields["namesrv"]
        common_args = [
            "--listen-port",
            "0",
            "--namesrv",
            namesrv,
            "--set",
            "brokerName=bench-ha",
            "--set",
            f"mappedFileSizeCommitLog={128 << 20}",
            "--set",
            "metricsPort=0",
        ]
        master = _Process(
            [
                "broker",
                "--store",
                str(work / "master"),
                *common_args,
                "--set",
                f"brokerRole={role}",
            ],
            work / "master.log",
        )
        started.append(master)
        slave = _Process(
            [
                "broker",
                "--store",
                str(work / "slave"),
                *common_args,
                "--set",
                "brokerRole=SLAVE",
                "--set",
                "brokerId=1",
            ],
            work / "slave.log",
        )
        started.append(slave)
        yield namesrv, master.fields["broker"], slave.fields["broker"]
    finally:
        for p in reversed(started):
            p.stop()


async def runtime_info(rc: RemotingClient, addr: str) -> dict[str, str]:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    response = await rc.invoke(addr, request, 5.0)
    return KVTable.decode(response.body_bytes).table


async def prepare(rc: RemotingClient, master: str) -> None:
    """The topic on the master, and the slave connected to it."""
    header = CreateTopicRequestHeader(
        topic=TOPIC,
        default_topic="TBW102",
        read_queue_nums=8,
        write_queue_nums=8,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    response = await rc.invoke(master, request, 5.0)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"topic creation refused: {response.remark}")
    deadline = time.monotonic() + 30
    while (await runtime_info(rc, master)).get("haConnectionNum") != "1":
        if time.monotonic() > deadline:
            raise RuntimeError("the slave did not connect to its master within 30 s")
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------------------- runs


async def lag_run(namesrv: str, master: str, slave: str, s: Settings) -> dict[str, Any]:
    async with RemotingClient() as rc:
        await prepare(rc, master)
        polls: list[tuple[float, int, int]] = []  # time, master max, slave max
        acks: list[tuple[int, float]] = []  # commit-log offset, ack time
        stop = asyncio.Event()

        async def poll() -> None:
            while not stop.is_set():
                t = time.monotonic()
                m, sl = await asyncio.gather(runtime_info(rc, master), runtime_info(rc, slave))
                polls.append((t, int(m["commitLogMaxOffset"]), int(sl["commitLogMaxOffset"])))
                await asyncio.sleep(s.poll_ms / 1000)

        async with Producer("bench_ha_lag", namesrv, send_timeout_s=10) as producer:
            await producer.send(Message(TOPIC, BODY))  # route and connection, not timed

            async def one() -> None:
                r = await producer.send(Message(TOPIC, BODY))
                acks.append((decode_offset_msg_id(r.offset_msg_id)[1], time.monotonic()))

            poller = asyncio.create_task(poll())
            per_tick = max(1, s.rate // 100)
            tasks: set[asyncio.Task[None]] = set()
            start = time.monotonic()
            tick = 0
            while (now := time.monotonic()) - start < s.seconds:
                for _ in range(per_tick):
                    task = asyncio.create_task(one())
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                tick += 1
                await asyncio.sleep(max(0.0, start + tick * 0.01 - now))
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - start
            await asyncio.sleep(0.5)  # let the slave finish; the poller sees it
            stop.set()
            await poller
    acks.sort()
    # A message ends where the next one starts (one producer, one topic: the log is theirs).
    lags_ms: list[float] = []
    i = 0
    for (_, acked_at), (end, _) in itertools.pairwise(acks):
        # Polls are in time order and the slave's log only grows, as do the ends here: the
        # search for the first poll that covers a message resumes where the last one stopped.
        while i < len(polls) and polls[i][2] < end:
            i += 1
        if i == len(polls):
            break
        lags_ms.append(max(0.0, (polls[i][0] - acked_at) * 1000))
    byte_lags = sorted(max(0, m - sl) for _, m, sl in polls)
    lags_ms.sort()
    t0 = polls[0][0] if polls else 0.0
    return {
        "messages": len(acks),
        "rate_target": s.rate,
        "rate_achieved": round(len(acks) / elapsed, 1),
        "polls": len(polls),
        "poll_ms": s.poll_ms,
        "lag_ms": _spread(lags_ms),
        "lag_bytes": _spread([float(b) for b in byte_lags]),
        "series": [(round(t - t0, 4), max(0, m - sl)) for t, m, sl in polls],
    }


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": -1, "p99": -1, "max": -1}
    ordered = sorted(values)
    return {
        "p50": round(percentile(ordered, 50), 2),
        "p99": round(percentile(ordered, 99), 2),
        "max": round(ordered[-1], 2),
    }


async def throughput_run(namesrv: str, master: str, s: Settings) -> dict[str, Any]:
    async with RemotingClient() as rc:
        await prepare(rc, master)
    not_ok = 0
    async with Producer("bench_ha_tput", namesrv, send_timeout_s=10) as producer:
        await producer.send(Message(TOPIC, BODY))
        sem = asyncio.Semaphore(WINDOW)

        async def one() -> None:
            nonlocal not_ok
            async with sem:
                r = await producer.send(Message(TOPIC, BODY))
            if r.status is not SendStatus.SEND_OK:
                not_ok += 1

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(s.count)))
        window_s = time.perf_counter() - start
        latencies = []
        for _ in range(s.one_by_one):
            t = time.perf_counter()
            r = await producer.send(Message(TOPIC, BODY))
            latencies.append((time.perf_counter() - t) * 1000)
            if r.status is not SendStatus.SEND_OK:
                not_ok += 1
    latencies.sort()
    return {
        "window_messages_per_s": round(s.count / window_s, 1),
        "one_by_one_messages_per_s": round(len(latencies) / (sum(latencies) / 1000), 1),
        "one_by_one_ms": _spread(latencies),
        "not_send_ok": not_ok,
    }


# ------------------------------------------------------------------------------- report


def plot(lag: dict[str, Any], path: Path) -> str | None:
    """Bytes lag over time and the time-lag percentiles, as a PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    series = lag["series"]
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=110)
    ax.plot([t for t, _ in series], [b / 1024 for _, b in series], linewidth=0.8)
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("slave behind master (KiB)")
    ax.set_title(
        f"Replication lag, ASYNC_MASTER, {lag['rate_achieved']:.0f} x 1 KiB msg/s "
        f"(p50 {lag['lag_ms']['p50']:.1f} ms, p99 {lag['lag_ms']['p99']:.1f} ms)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def run(*, quick: bool = False, plot_path: Path | None = None) -> Report:
    s = QUICK if quick else FULL
    machine = machine_info()
    notes: list[str] = []
    work = common.bench_work_dir("replication-")
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine,
        "config": {
            "body_bytes": len(BODY),
            "window": WINDOW,
            **{k: getattr(s, k) for k in ("rate", "seconds", "poll_ms", "count", "one_by_one")},
        },
        "notes": notes,
    }
    try:
        common.progress(f"lag: ASYNC_MASTER at {s.rate} msg/s for {s.seconds:g} s")

        def lag() -> dict[str, Any]:
            with trio(work / "lag", "ASYNC_MASTER") as (ns, m, sl):
                return asyncio.run(lag_run(ns, m, sl, s))

        results["lag"] = common.attempt("lag", lag, notes)
        for role in ("ASYNC_MASTER", "SYNC_MASTER"):
            common.progress(f"throughput: {role}, {s.count} sends, {WINDOW} in flight")

            def tput(role: str = role) -> dict[str, Any]:
                with trio(work / role.lower(), role) as (ns, m, _sl):
                    return asyncio.run(throughput_run(ns, m, s))

            results[role] = common.attempt(role, tput, notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a, y = results.get("ASYNC_MASTER", {}), results.get("SYNC_MASTER", {})
    if "error" not in a and "error" not in y:
        results["sync_over_async"] = {
            "window": round(y["window_messages_per_s"] / a["window_messages_per_s"], 3),
            "one_by_one": round(y["one_by_one_messages_per_s"] / a["one_by_one_messages_per_s"], 3),
        }
    lag_result = results.get("lag", {})
    if "error" not in lag_result and (plot_path is not None or not quick):
        results["plot"] = plot(lag_result, plot_path or PLOT)
    return Report(NAME, results, _console(results), _markdown(results, quick), notes)


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        r = results.get(role, {})
        if "error" in r or not r:
            rows.append([role, "failed", "", "", "", ""])
            continue
        ratio = results.get("sync_over_async", {})
        rows.append(
            [
                role,
                f"{r['window_messages_per_s']:,.0f}",
                f"{r['one_by_one_messages_per_s']:,.0f}",
                f"{r['one_by_one_ms']['p50']:.2f}",
                f"{r['one_by_one_ms']['p99']:.2f}",
                "1.00" if role == "ASYNC_MASTER" else f"{ratio.get('window', 0):.2f}",
            ]
        )
    return rows


HEADERS = ["master", "msg/s (64 in flight)", "msg/s (one by one)", "p50 ms", "p99 ms", "x ASYNC"]


def _lag_line(results: dict[str, Any]) -> str:
    lag = results.get("lag", {})
    if "error" in lag or not lag:
        return "lag: failed"
    return (
        f"lag at {lag['rate_achieved']:,.0f} msg/s of 1 KiB (target {lag['rate_target']:,}): "
        f"time p50 {lag['lag_ms']['p50']} ms, p99 {lag['lag_ms']['p99']} ms, "
        f"max {lag['lag_ms']['max']} ms; bytes p50 {lag['lag_bytes']['p50']:,.0f}, "
        f"p99 {lag['lag_bytes']['p99']:,.0f}, max {lag['lag_bytes']['max']:,.0f} "
        f"({lag['polls']} polls every {lag['poll_ms']} ms)"
    )


def _console(results: dict[str, Any]) -> str:
    return "\n".join(
        [
            "== replication ==",
            _lag_line(results),
            text_table(HEADERS, _rows(results)),
        ]
    )


def _markdown(results: dict[str, Any], quick: bool) -> str:
    if quick:
        return ""
    plot_ref = results.get("plot")
    parts = [
        "## Replication: slave lag, and what SYNC_MASTER costs",
        "",
        f"Measured {machine_line(results['machine'])}. "
        "`python -m tests.bench --only replication`; method in `tests/bench/ha_bench.py`: "
        "a name server, a master and a slave in processes of their own on loopback, the "
        "asyncio SDK producing 1 KiB bodies.",
        "",
        f"- {_lag_line(results)}.",
        "",
        markdown_table(HEADERS, _rows(results)),
        "",
        "The ratio is the figure to carry to another machine: a SYNC_MASTER acknowledges a "
        "send only once its slave has the bytes, so every send (or coalesced batch) waits "
        "one more hop. Over loopback the slave's time lag is about one poll interval at "
        "this rate; a network between master and slave adds its round trip to both. In "
        "the plot, each spike of about 20 KiB is one 10 ms tick's messages, sent together "
        "and on the slave a few milliseconds later.",
    ]
    if plot_ref:
        parts += ["", f"![replication lag over time]({Path(plot_ref).name})"]
    if results["notes"]:
        parts += ["", "Notes: " + "; ".join(results["notes"])]
    return "\n".join(parts)
