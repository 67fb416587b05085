"""Where the time goes: py-spy profiles of the broker and of the SDK on the hot paths, as a
section of ``docs/benchmarks.md`` (``python -m tests.bench --only profile``).

Each profile drives a standalone broker with the SDK benchmark's drivers (1 KiB bodies,
ASYNC_FLUSH) and samples one process with py-spy for a few seconds
(``sdk_bench.profile_sdk``): the broker and the client with 256 sends in flight (the
throughput path), the broker with one send at a time (the latency path), and a
``PushConsumer`` reading a preloaded backlog. Self time is grouped by area,
so that the question "is it our Python or the event loop and the kernel?" has a figure:

- *event loop and sockets*: time inside uvloop's C code, which py-spy (without ``--native``)
  charges to the frame that entered it (``Runner.run``): epoll, ``recv``/``send`` and the
  transports' buffers, callbacks' C parts;
- *asyncio (Python)*: the Python parts of asyncio (futures, events, tasks, timeouts);
- *remoting*, *store*, *broker*, *client*: our packages;
- *other*: the standard library and the rest.

The sampler slows the sampled process down, so the rates printed beside each profile are not
figures; only the shares are.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench import sdk_bench
from tests.bench.common import attempt, bench_work_dir, progress
from tests.bench.profiling import py_spy_path, speedscope_weights
from tests.bench.report import (
    REPO_ROOT,
    Report,
    machine_info,
    machine_line,
    markdown_table,
    text_table,
)

NAME = "profile"
AREAS = ("event loop and sockets", "asyncio (Python)", "remoting", "store", "broker", "client")


@dataclass(frozen=True, slots=True)
class Settings:
    seconds: float
    rate_hz: int
    top: int
    runs: tuple[tuple[str, str], ...]  # (process sampled, produce shape)


FULL = Settings(
    5.0,
    250,
    10,
    (("broker", "window"), ("client", "window"), ("broker", "one"), ("client", "push")),
)
QUICK = Settings(1.0, 100, 5, (("broker", "window"),))

WHAT = {
    ("broker", "window"): "the broker, 256 sends in flight",
    ("client", "window"): "the SDK producer, 256 sends in flight",
    ("broker", "one"): "the broker, one send at a time",
    ("client", "one"): "the SDK producer, one send at a time",
    ("client", "push"): "the SDK PushConsumer, reading a backlog",
    ("broker", "push"): "the broker, serving a PushConsumer's pulls",
}


def area_of(name: str, file: str) -> str:
    """Which area a function's self time belongs to (see the module docstring)."""
    if name == "Runner.run" or "uvloop" in file:
        return "event loop and sockets"
    if "/asyncio/" in file:
        return "asyncio (Python)"
    for package in ("remoting", "store", "broker", "client"):
        if file.startswith(f"{package}/") or f"/{package}/" in file.replace(str(REPO_ROOT), ""):
            return package
    return "other"


def areas(path: Path) -> dict[str, float]:
    """Self time by area, in per cent of all samples, from a py-spy speedscope file."""
    self_w, _total, grand = speedscope_weights(path)
    weights: dict[str, float] = {}
    for (name, file), weight in self_w.items():
        area = area_of(name, file.replace(str(REPO_ROOT) + "/", ""))
        weights[area] = weights.get(area, 0.0) + weight
    return {k: round(100 * v / grand, 1) for k, v in weights.items()} if grand else {}


def run(quick: bool = False) -> Report:
    s = QUICK if quick else FULL
    started = time.perf_counter()
    machine = machine_info()
    notes: list[str] = []
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine,
        "settings": {"seconds": s.seconds, "rate_hz": s.rate_hz},
        "profiles": [],
        "notes": notes,
    }
    try:
        py_spy_path()
    except RuntimeError as exc:
        notes.append(f"{exc}: pip install -e '.[bench]' (make bench does); nothing profiled")
        results["seconds"] = round(time.perf_counter() - started, 1)
        return Report(NAME, results, "\n".join(notes), "", notes)
    work = bench_work_dir("profile-")
    try:
        for spy, shape in s.runs:
            progress(f"py-spy: {WHAT[(spy, shape)]}")
            out = work / f"{spy}-{shape}.speedscope.json"

            def one(spy: str = spy, shape: str = shape, out: Path = out) -> dict[str, Any]:
                summary = sdk_bench.profile_sdk(
                    seconds=s.seconds, shape=shape, out=out, top=s.top, rate=s.rate_hz, spy=spy
                )
                summary["areas"] = areas(out)
                summary["speedscope"] = out.name
                return summary

            results["profiles"].append(
                {"what": WHAT[(spy, shape)], **attempt(f"profile {spy} {shape}", one, notes)}
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return Report(NAME, results, render_console(results), render_markdown(results), notes)


def _area_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for p in results["profiles"]:
        if "error" in p:
            rows.append([p["what"], "failed", *[""] * len(AREAS)])
            continue
        a = p["areas"]
        rows.append(
            [p["what"], *(f"{a.get(k, 0.0):.1f}" for k in AREAS), f"{a.get('other', 0.0):.1f}"]
        )
    return rows


def _top_rows(profile: dict[str, Any]) -> list[list[str]]:
    return [
        [f"`{r['function']}` ({r['file']})", f"{r['self_pct']:.1f}", f"{r['total_pct']:.1f}"]
        for r in profile["top_self"]
    ]


AREA_HEADERS = ("profile", *(f"{a} %" for a in AREAS), "other %")


def render_console(results: dict[str, Any]) -> str:
    lines = [f"profile: {machine_line(results['machine'])}", ""]
    lines += [text_table(AREA_HEADERS, _area_rows(results)), ""]
    for p in results["profiles"]:
        if "error" in p:
            continue
        lines += [p["what"], text_table(("function", "self %", "total %"), _top_rows(p)), ""]
    lines += [*results["notes"], f"({results['seconds']} s)"]
    return "\n".join(lines)


def render_markdown(results: dict[str, Any]) -> str:
    st = results["settings"]
    parts = [
        "## Profiles: where the time goes",
        "",
        f"Measured {machine_line(results['machine'])}. `python -m tests.bench --only "
        "profile`; method in `tests/bench/profile_bench.py`: a standalone broker "
        "(ASYNC_FLUSH) under the SDK benchmark's produce driver (1 KiB bodies), one process "
        f"sampled by py-spy for {st['seconds']:g} s at {st['rate_hz']} Hz. Self time by "
        "area, in per cent of the samples (the sampler slows the process down, so only the "
        "shares mean something):",
        "",
        markdown_table(AREA_HEADERS, _area_rows(results)),
    ]
    for p in results["profiles"]:
        if "error" in p:
            continue
        parts += [
            "",
            f"**{p['what'][:1].upper()}{p['what'][1:]}**: the functions with the most self "
            "time "
            f"({p.get('messages_per_s_while_sampled') or 0:,.0f} msg/s while sampled).",
            "",
            markdown_table(("function", "self %", "total %"), _top_rows(p)),
        ]
    if results["notes"]:
        parts += ["", *(f"- {n}" for n in results["notes"])]
    return "\n".join(parts)
