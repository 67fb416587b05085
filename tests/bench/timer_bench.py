"""Timer messages: what pending timers cost in memory, and how late timers are delivered.

Part of ``make bench`` (``python -m tests.bench --only timers``); on its own:
``python -m tests.bench.timer_bench [--pending 1000000] [--timers 10000] [--spread-s 20]``.

1. *Memory*: an in-process broker (temporary store) is given ``--pending`` timer messages due
   an hour ahead, straight into its store; then its timer service enters them all into the
   wheel. The process's anonymous RSS (heap; /proc/self/status RssAnon) is read before and
   after that step alone: pending timers live in the mmap'd timer log (file-backed pages),
   so the heap should not grow with them.
2. *Precision*: ``--timers`` timer messages spread over ``--spread-s`` seconds at the default
   precision (1 s); each delivered record's store timestamp against its TIMER_OUT_MS gives
   its lateness. Prints the distribution.

Bounded: both phases stop by themselves (the second after spread + 15 s at most).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.logs import configure_logging
from broker.topics import TIMER_TOPIC
from codec import MessageInner, decode_properties, decode_record, encode_properties
from remoting.bodies import PERM_READ, PERM_WRITE
from store.config import StoreConfig
from tests.bench.common import bench_work_dir, progress
from tests.bench.report import Report, machine_info, machine_line, markdown_table, text_table

TOPIC = "TimerBench"
NAME = "timers"


@dataclass(frozen=True, slots=True)
class Settings:
    pending: int  # timers due an hour ahead, for the memory phase
    timers: int  # timers spread over spread_s, for the precision phase
    spread_s: float


FULL = Settings(pending=1_000_000, timers=10_000, spread_s=20.0)
QUICK = Settings(pending=2_000, timers=200, spread_s=2.0)


def rss_kib(kind: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(kind + ":"):
            return int(line.split()[1])
    return 0


def broker_config(root: Path, **config: object) -> BrokerConfig:
    return BrokerConfig(
        bind_address="127.0.0.1",
        listen_port=0,
        metrics_port=0,
        store=StoreConfig(root_dir=root, commit_log_file_bytes=256 << 20),
        **config,  # type: ignore[arg-type]
    )


async def memory_phase(root: Path, pending: int) -> dict[str, float]:
    async with Broker(broker_config(root)) as broker:
        broker.topics.create_internal(TIMER_TOPIC, 1, PERM_READ | PERM_WRITE)
        deliver = int(time.time() * 1000) + 3_600_000
        props = encode_properties(
            {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "TIMER_OUT_MS": str(deliver)}
        )
        timers = broker.timers
        await timers._loop.stop()  # enter them by hand below, to measure that alone
        started = time.monotonic()
        for n in range(pending):
            await broker.store.put_message(
                MessageInner(topic=TIMER_TOPIC, queue_id=0, body=b"t", properties=props)
            )
            if n % 100_000 == 99_999:
                progress(f"timers: stored {n + 1:,} timer messages")
        while broker.store.dispatch_behind_bytes:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        stored_s = time.monotonic() - started
        gc.collect()
        anon_before, file_before = rss_kib("RssAnon"), rss_kib("RssFile")
        started = time.monotonic()
        while timers.pending < pending and await timers.enqueue():
            pass
        entered_s = time.monotonic() - started
        gc.collect()
        anon_after, file_after = rss_kib("RssAnon"), rss_kib("RssFile")
        log_bytes = sum(mf.wrote_position for mf in timers.log.files)
        return {
            "pending": timers.pending,
            "store_s": round(stored_s, 1),
            "enter_s": round(entered_s, 1),
            "anon_growth_mib": round((anon_after - anon_before) / 1024, 1),
            "anon_bytes_per_timer": round((anon_after - anon_before) * 1024 / pending, 1),
            "file_growth_mib": round((file_after - file_before) / 1024, 1),
            "timer_log_mib": round(log_bytes / 2**20, 1),
        }


async def precision_phase(root: Path, count: int, spread_s: float) -> dict[str, float]:
    async with Broker(broker_config(root)) as broker:
        broker.topics.create_internal(TOPIC, 1, PERM_READ | PERM_WRITE)
        broker.topics.create_internal(TIMER_TOPIC, 1, PERM_READ | PERM_WRITE)
        first = int(time.time() * 1000) + 2_000
        for n in range(count):
            due = first + int(n * spread_s * 1000 / count)
            props = encode_properties(
                {"REAL_TOPIC": TOPIC, "REAL_QID": "0", "TIMER_OUT_MS": str(due)}
            )
            await broker.store.put_message(
                MessageInner(topic=TIMER_TOPIC, queue_id=0, body=b"t", properties=props)
            )
        deadline = time.monotonic() + spread_s + 15
        while broker.store.get_max_offset(TOPIC, 0) < count and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.25)
        late: list[int] = []
        offset = 0
        while offset < broker.store.get_max_offset(TOPIC, 0):
            got = broker.store.get_messages(TOPIC, 0, offset, 32, None)
            try:
                for view in got.records:
                    info = decode_record(view, 0)
                    due = int(decode_properties(info.properties)["TIMER_OUT_MS"])
                    late.append(info.store_timestamp - due)
                offset = got.next_begin_offset
            finally:
                got.release()
        late.sort()
        return {
            "delivered": len(late),
            "early": sum(1 for x in late if x < 0),
            "p50_ms": late[len(late) // 2] if late else -1,
            "p99_ms": late[int(len(late) * 0.99)] if late else -1,
            "max_ms": late[-1] if late else -1,
            "mean_ms": round(statistics.fmean(late), 1) if late else -1,
        }


def run(quick: bool = False, settings: Settings | None = None) -> Report:
    """Both phases in this process, each broker on a temporary store under
    ``bench-results/``; the report's table is the docs section."""
    s = settings or (QUICK if quick else FULL)
    machine = machine_info()
    started = time.perf_counter()
    work = bench_work_dir("timers-")
    try:
        progress(f"timers: {s.pending:,} pending timers")
        memory = asyncio.run(memory_phase(work / "memory", s.pending))
        progress(f"timers: {s.timers:,} timers over {s.spread_s:g} s at 1 s precision")
        precision = asyncio.run(precision_phase(work / "precision", s.timers, s.spread_s))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine,
        "settings": asdict(s),
        "memory": memory,
        "precision": precision,
        "seconds": round(time.perf_counter() - started, 1),
        "notes": [],
    }
    rows = _rows(results)
    console = "\n".join(
        [f"timers: {machine_line(machine)}", text_table(("measure", "figure"), rows)]
    )
    return Report(NAME, results, console, _markdown(results, rows), [])


def _rows(results: dict[str, Any]) -> list[list[str]]:
    m, p, s = results["memory"], results["precision"], results["settings"]
    return [
        [
            f"{s['pending']:,} timer messages stored (in-process, no network)",
            f"{m['store_s']} s",
        ],
        [
            "… entered into the wheel by the timer service",
            f"{m['enter_s']} s (about {m['pending'] / max(m['enter_s'], 0.1):,.0f} a second)",
        ],
        [
            "heap (RssAnon) growth from entering them",
            f"{m['anon_growth_mib']} MiB ({m['anon_bytes_per_timer']} bytes per pending timer)",
        ],
        ["timer log on disk (mmap'd, 40 bytes per timer)", f"{m['timer_log_mib']} MiB"],
        [
            f"{s['timers']:,} timers spread over {s['spread_s']:g} s at the default 1 s "
            "precision: early",
            str(p["early"]),
        ],
        [
            "… lateness p50 / p99 / max (store time minus TIMER_OUT_MS)",
            f"{p['p50_ms']:,} / {p['p99_ms']:,} / {p['max_ms']:,} ms",
        ],
    ]


def _markdown(results: dict[str, Any], rows: list[list[str]]) -> str:
    return "\n".join(
        [
            "## Timers: what pending timers cost, and how late they arrive",
            "",
            f"Measured {machine_line(results['machine'])}; the run took {results['seconds']} s. "
            "`python -m tests.bench --only timers`; method in `tests/bench/timer_bench.py`: "
            "one process, an in-process broker on a temporary store for each phase.",
            "",
            markdown_table(("measure", "figure"), rows),
            "",
            "A slot of the wheel is delivered once all of it is due, so lateness is spread "
            "over one precision (plus the round's own time): `timerPrecisionMs=100` gives "
            "lateness under ~0.2 s. The heap figure is the point of the design: a pending "
            "timer is an entry in the timer log, not a Python object.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.timer_bench")
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--spread-s", type=float, default=20.0)
    args = parser.parse_args()
    configure_logging(level="warning")
    with tempfile.TemporaryDirectory(prefix="aerolite-timer-bench-") as tmp:
        print(f"memory: {args.pending:,} pending timers", flush=True)
        memory = asyncio.run(memory_phase(Path(tmp) / "memory", args.pending))
        print(memory, flush=True)
        print(f"precision: {args.timers:,} timers over {args.spread_s:g} s at 1 s precision")
        precision = asyncio.run(
            precision_phase(Path(tmp) / "precision", args.timers, args.spread_s)
        )
        print(precision, flush=True)


if __name__ == "__main__":
    main()
