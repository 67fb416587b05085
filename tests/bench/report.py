"""What a benchmark hands back, and the small helpers to build it.

A benchmark returns a ``Report``: its JSON-ready results, a plain-text table for the console
and a Markdown section for ``docs/benchmarks.md``. ``tests.bench.__main__`` writes all three.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(slots=True)
class Report:
    """One benchmark's output."""

    name: str
    results: dict[str, Any]
    console: str
    markdown: str
    notes: list[str] = field(default_factory=list)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values (``pct`` in 0..100)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args],  # git from PATH is the point
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _git_commit() -> str | None:
    """The short commit, with ``-dirty`` when the measured packages have local changes."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return None
    diff = _git("diff", "--quiet", "HEAD", "--", "remoting", "broker", "store", "client")
    dirty = diff is not None and diff.returncode == 1
    return head.stdout.strip() + ("-dirty" if dirty else "")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """Where and when the figures were taken."""
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "uvloop": _version("uvloop"),
        "msgpack": _version("msgpack"),
        "commit": _git_commit(),
        "loadavg": _loadavg(),
    }


def _loadavg() -> list[float] | None:
    """1, 5 and 15 minute load averages: a busy machine makes every figure noisier."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_line(machine: dict[str, Any]) -> str:
    commit = machine.get("commit") or "uncommitted tree"
    load = machine.get("loadavg")
    return (
        f"{machine['date_utc']} UTC, {machine['cpu']} ({machine['cpus']} CPUs), "
        f"{machine['system']}, {machine['implementation']} {machine['python']}, "
        f"uvloop {machine['uvloop']}, {commit}"
        + (f", load average {load[0]:.2f} before the run" if load else "")
    )


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [str(cells[0]).ljust(widths[0])]
        out += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: first column left-aligned, the others right-aligned."""
    align = ["---", *(["---:"] * (len(headers) - 1))]
    lines = [headers, align, *rows]
    return "\n".join("| " + " | ".join(str(c) for c in cells) + " |" for cells in lines)


def fmt_num(value: Any, spec: str) -> str:
    """``value`` in ``format`` spec ``spec``, or a dash when it is not a number (not measured)."""
    return "—" if not isinstance(value, int | float) else format(value, spec)


def fmt_count(value: Any) -> str:
    """A positive count or rate with thousands separators, or a dash (not measured, or none)."""
    return "—" if not isinstance(value, int | float) or value <= 0 else f"{value:,.0f}"


def busy_note(results: dict[str, Any]) -> str:
    """A sentence for the report when the machine was busy before the run, else ``""``."""
    machine = results["machine"]
    load, cpus = machine.get("loadavg"), machine.get("cpus") or 1
    if not load or load[0] < 0.5 * cpus:
        return ""
    return (
        f" The machine was busy before the run (load average {load[0]:.2f} on {cpus} CPUs, "
        "which counts the benchmark that ran just before this one): figures taken while "
        "other work ran carry its noise."
    )


def pinning_text(pinned: bool, server_cpu: int, client_cpu: int) -> str:
    """How the run placed its processes, for the line under a section's heading."""
    if not pinned:
        return "no CPU pinning"
    return f"every server pinned to CPU {server_cpu}, every client to CPU {client_cpu}"


def measured_line(results: dict[str, Any], pinning: str) -> str:
    """The line under a section's heading: machine, pinning, duration, busy-machine note."""
    return (
        f"Measured {machine_line(results['machine'])}; {pinning}; "
        f"the run took {results['seconds']} s.{busy_note(results)}"
    )


def console_tail(results: dict[str, Any], reading: str, odd: Sequence[str]) -> list[str]:
    """The end of a console report: the reading without Markdown bold, then the notes and
    odd lines, then the duration."""
    lines: list[str] = []
    if reading:
        lines += ["", reading.replace("**", "")]
    if odd or results["notes"]:
        lines += ["", *results["notes"], *odd]
    lines += ["", f"({results['seconds']} s)"]
    return lines


def markdown_tail(
    results: dict[str, Any], reading: str, odd: Sequence[str], heading: str
) -> list[str]:
    """The end of a Markdown section: the reading, then the notes and odd lines as a list
    under a bold ``heading``."""
    parts: list[str] = []
    if reading:
        parts += ["", reading]
    if odd or results["notes"]:
        parts += ["", f"**{heading}:**", ""]
        parts += [f"- {line}" for line in [*results["notes"], *odd]]
    return parts
