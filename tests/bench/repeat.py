"""Repetitions: a benchmark runs its systems several times and reports each figure as the
median of the repetitions with their range.

A repetition's results are ``{system: {phase: {run: row}}}``, the shape the broker and SDK
benchmarks share (``phase`` is "produce", "consume", "paced", ...; a row is a driver's
``done`` line with the benchmark's additions). ``merge`` folds a list of them into one of the
same shape: every numeric field of a row becomes the median over the repetitions that
measured it, and ``row["spread"]`` keeps the minimum, the maximum and every value of the
fields a reader compares (rates, latency percentiles, CPU per message). A repetition in
which a run failed is left out of that run's median; a run that failed every time keeps the
last error. Fields at the system level (RSS, settings, a phase error) are merged the same
way, non-numeric ones taken from the last repetition that has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.bench.report import median

SPREAD_FIELDS = (
    "messages_per_s",
    "consumed_per_s",
    "p50_us",
    "p99_us",
    "p99_9_us",
    "max_us",
    "server_cpu_us_per_msg",
    "client_cpu_us_per_msg",
)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def merge_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row from the repetitions' rows of the same run (see the module docstring)."""
    good = [r for r in rows if isinstance(r, dict) and "error" not in r and "skipped" not in r]
    if not good:
        return dict(rows[-1]) if rows else {}
    # the last repetition's text, lists and nested dicts
    out: dict[str, Any] = {k: v for row in good for k, v in row.items() if not _number(v)}
    keys = {k for r in good for k, v in r.items() if _number(v)}
    for key in keys:
        values = [r[key] for r in good if _number(r.get(key))]
        mid = median(values)
        if all(isinstance(v, int) for v in values):
            out[key] = round(mid)  # counts stay counts (the median of two is their mean)
        else:
            out[key] = round(mid, 2)
    spread: dict[str, dict[str, Any]] = {}
    for key in SPREAD_FIELDS:
        values = [r[key] for r in good if _number(r.get(key))]
        if values:
            spread[key] = {"min": min(values), "max": max(values), "values": values}
    out["spread"] = spread
    out["repetitions"] = len(good)
    if len(good) < len(rows):
        out["failed_repetitions"] = len(rows) - len(good)
    return out


def merge_system(reps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One system's results from its repetitions."""
    out: dict[str, Any] = {}
    for rep in reps:
        for key, value in rep.items():
            if (
                isinstance(value, dict)
                and value
                and all(isinstance(v, dict) for v in value.values())
            ):
                runs = list(dict.fromkeys(name for r in reps for name in (r.get(key) or {})))
                out[key] = {
                    name: merge_rows([r[key][name] for r in reps if name in (r.get(key) or {})])
                    for name in runs
                }
            elif not _number(value) and value is not None:
                out[key] = value
    for key in {k for r in reps for k, v in r.items() if _number(v)}:
        values = [r[key] for r in reps if _number(r.get(key))]
        mid = median(values)
        out[key] = round(mid) if all(isinstance(v, int) for v in values) else mid
        out[f"{key}_range"] = [min(values), max(values)]
    if "error" in out and any("error" not in r for r in reps):
        del out["error"]  # a repetition that failed is in the notes; the others stand
    out["repetitions"] = len(reps)
    return out


def merge(reps: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``{system: merged}`` over the repetitions' ``{system: results}``, systems in the order
    they first appeared."""
    names: list[str] = []
    for rep in reps:
        names += [n for n in rep if n not in names]
    return {name: merge_system([rep[name] for rep in reps if name in rep]) for name in names}


def rate_range(row: dict[str, Any], key: str = "messages_per_s") -> str:
    """``"(min–max)"`` of a merged row's field over its repetitions, or ``""`` with one."""
    spread = (row.get("spread") or {}).get(key)
    if not spread or len(spread["values"]) < 2:
        return ""
    return f" ({spread['min']:,.0f}–{spread['max']:,.0f})"
