"""The side-by-side benchmark's pictures (``tests.bench.sdk_bench``), as PNG with matplotlib:

- ``bench-throughput.png``: one panel of bars per workload, a bar per system (the median of
  the repetitions, the whisker their range), on a shared log scale;
- ``bench-latency.png``: latency percentile curves (50 % to 99.99 % and the maximum, on a
  "nines" axis) of produce one by one and of end to end at a fixed rate, a line per system;
- ``bench-cpu.png``: the server's CPU time per message in the throughput workloads and the
  mixed run, a bar per system.

Drawn from a merged results dict; a system that did not run a workload leaves a gap.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.bench.drivers.common import PERCENTILES, pct_key

COLORS = {
    "aerolite": "#d95f02",
    "rocketmq": "#7570b3",
    "redis": "#e7298a",
    "nats": "#1b9e77",
}
NAMES = {
    "aerolite": "Aerolite",
    "rocketmq": "Apache RocketMQ 4.9",
    "redis": "Redis Streams",
    "nats": "NATS JetStream",
}

# (system key, phase, run) of a figure, or None where the system has none
Where = Callable[[str], tuple[str, str, str] | None]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _row(results: dict[str, Any], where: tuple[str, str, str] | None) -> dict[str, Any]:
    if where is None:
        return {}
    system, phase, run = where
    row = ((results["systems"].get(system) or {}).get(phase) or {}).get(run) or {}
    return row if isinstance(row, dict) and "error" not in row and "skipped" not in row else {}


def _save(fig: Any, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    _pyplot().close(fig)
    return str(path)


def throughput(
    results: dict[str, Any],
    workloads: Sequence[tuple[str, Where]],
    systems: Sequence[str],
    path: Path,
) -> str:
    """Bars of msg/s, a panel per workload."""
    plt = _pyplot()
    cols = 3
    rows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.1 * rows + 0.6), dpi=100, squeeze=False)
    top = 1.0
    for ax, (label, where) in zip(axes.flat, workloads, strict=False):
        names, values, lows, highs, colors = [], [], [], [], []
        for system in systems:
            row = _row(results, where(system))
            rate = row.get("messages_per_s")
            if not rate:
                continue
            spread = (row.get("spread") or {}).get("messages_per_s") or {}
            names.append(NAMES[system])
            values.append(rate)
            lows.append(rate - spread.get("min", rate))
            highs.append(spread.get("max", rate) - rate)
            colors.append(COLORS[system])
            top = max(top, spread.get("max", rate))
        ax.barh(names, values, xerr=[lows, highs], color=colors, capsize=2)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xscale("log")
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.flat[len(workloads) :]:
        ax.axis("off")
    for ax in axes.flat[: len(workloads)]:
        ax.set_xlim(1_000, top * 1.5)
    fig.suptitle("messages per second (median of the repetitions, whiskers: min–max)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def _nines(pct: float) -> float:
    return -math.log10(1 - pct / 100)


def latency(
    results: dict[str, Any],
    panels: Sequence[tuple[str, Where]],
    systems: Sequence[str],
    path: Path,
) -> str:
    """Percentile curves, a panel per run, on a "nines" axis; the maximum at the right."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.4), dpi=100)
    axes = [axes] if len(panels) == 1 else list(axes)
    ticks = [*PERCENTILES, 99.999]
    for ax, (label, where) in zip(axes, panels, strict=True):
        for system in systems:
            row = _row(results, where(system))
            points = [
                (_nines(p), row[pct_key(p)] / 1e3) for p in PERCENTILES if row.get(pct_key(p))
            ]
            if row.get("max_us"):
                points.append((_nines(99.999), row["max_us"] / 1e3))
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", markersize=3, color=COLORS[system], label=NAMES[system])
        ax.set_xticks([_nines(p) for p in ticks])
        ax.set_xticklabels([f"{p:g}" for p in PERCENTILES] + ["max"], fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("percentile", fontsize=8)
        ax.set_ylabel("ms", fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def cpu(
    results: dict[str, Any],
    workloads: Sequence[tuple[str, Where]],
    systems: Sequence[str],
    path: Path,
) -> str:
    """Server CPU µs per message, grouped bars per workload."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=100)
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        xs, ys = [], []
        for j, (_label, where) in enumerate(workloads):
            value = _row(results, where(system)).get("server_cpu_us_per_msg")
            if value:
                xs.append(j + (i - (len(systems) - 1) / 2) * width)
                ys.append(value)
        if ys:
            ax.bar(xs, ys, width=width, color=COLORS[system], label=NAMES[system])
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([textwrap.fill(label, 22) for label, _ in workloads], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("server CPU µs per message", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("what a message costs the server (lower is better)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
