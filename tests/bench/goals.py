"""The performance goals (M9) in one table, from the results the benchmarks wrote to
``bench-results/``: the side-by-side SDK benchmark (``sdk.json``), the native-client broker
benchmark (``broker.json``) and the memory benchmark (``memory.json``).

``python -m tests.bench`` writes it as the ``goals`` section of ``docs/benchmarks.md``
after the benchmarks it ran, from whatever results are there (a goal whose benchmark has
not run says so). Every goal is reported met or not with its figure and where it comes from;
nothing here measures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench.report import markdown_table, text_table

NAME = "goals"
HEADERS = ("goal", "figure", "met", "from")


def _load(results_dir: Path, name: str) -> dict[str, Any] | None:
    path = results_dir / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("quick"):
        return None  # quick figures mean nothing
    return data


def _verdict(met: Any) -> str:
    return "not measured" if met is None else ("met" if met else "**not met**")


def _x(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}x"


def sdk_rows(sdk: dict[str, Any]) -> list[list[str]]:
    """The SDK benchmark's own goals (``sdk_bench.compute_goals``)."""
    from tests.bench.sdk_bench import GOAL_TEXTS

    rows = []
    for key, goal in (sdk.get("goals") or {}).items():
        text, unit = GOAL_TEXTS[key]
        value = goal.get("value")
        if value is None:
            figure = "—"
        elif value >= 1000:
            figure = f"{value:,.0f}{unit}"
        else:
            figure = f"{value:.2f}{unit}"
        rows.append([text.format(goal=goal["goal"]), figure, _verdict(goal.get("met")), "SDK"])
    return rows


def broker_rows(broker: dict[str, Any]) -> list[list[str]]:
    """Native client held fixed: Aerolite's rate over Apache RocketMQ's at every thread
    count (the lowest ratio is the figure), and peak RSS over the JVM's."""
    rows = []
    ratios = broker.get("ratios") or {}
    for mode, flush in (("async", "ASYNC_FLUSH"), ("sync", "SYNC_FLUSH")):
        levels = (ratios.get("produce") or {}).get(mode) or {}
        values = {n: r.get("vs_rocketmq") for n, r in levels.items()}
        known = [v for v in values.values() if v is not None]
        figure = ", ".join(f"{n} threads {_x(v)}" for n, v in values.items()) or "—"
        rows.append(
            [
                f"C++ client held fixed, {flush}: produce ≥ Apache RocketMQ 4.9",
                figure,
                _verdict(min(known) >= 1.0 if known else None),
                "broker",
            ]
        )
    consume = (ratios.get("consume") or {}).get("push", {}).get("vs_rocketmq")
    rows.append(
        [
            "C++ client held fixed: PushConsumer ≥ Apache RocketMQ 4.9",
            _x(consume),
            _verdict(None if consume is None else consume >= 1.0),
            "broker",
        ]
    )
    for mode, flush in (("async", "ASYNC_FLUSH"), ("sync", "SYNC_FLUSH")):
        peak = ((ratios.get("rss_vs_rocketmq") or {}).get(mode) or {}).get("VmHWM")
        rows.append(
            [
                f"broker peak RSS ≤ ¼ of the JVM broker's, {flush}",
                _x(peak),
                _verdict(None if peak is None else peak <= 0.25),
                "broker",
            ]
        )
    return rows


def memory_rows(memory: dict[str, Any]) -> list[list[str]]:
    rss = memory.get("rss") or {}
    rows = []
    for key, flag, what in (
        ("VmRSS", "goal_flat_met", "broker RSS flat (±10 %) while writing 10 GB"),
        ("RssAnon", "anon_flat_met", "the broker's own memory (RssAnon) flat while writing"),
    ):
        r = rss.get(key) or {}
        figure = (
            f"{r['min_over_warmup']}x to {r['max_over_warmup']}x of the first GiB"
            if r.get("max_over_warmup") is not None
            else "—"
        )
        rows.append([what, figure, _verdict(memory.get(flag)), "memory"])
    return rows


def rows(results_dir: Path) -> list[list[str]]:
    out: list[list[str]] = []
    for name, fn in (("sdk", sdk_rows), ("broker", broker_rows), ("memory", memory_rows)):
        data = _load(results_dir, name)
        if data is None:
            out.append([f"({name} benchmark)", "not run", "not measured", name])
        else:
            out += fn(data)
    return out


def render(results_dir: Path) -> tuple[str, str]:
    """(console text, Markdown section) of the goals table."""
    table = rows(results_dir)
    met = sum(1 for r in table if r[2] == "met")
    judged = sum(1 for r in table if r[2] in ("met", "**not met**"))
    console = "\n".join(
        [
            f"goals: {met} of {judged} met",
            text_table(HEADERS, [[c.replace("**", "") for c in r] for r in table]),
        ]
    )
    markdown = "\n".join(
        [
            "## Goals at a glance",
            "",
            f"The performance goals of the side-by-side comparison, from the last full run of "
            f"each benchmark below: {met} of {judged} met. A goal not met is data: the "
            "profiles section shows where the time goes.",
            "",
            markdown_table(HEADERS, table),
        ]
    )
    return console, markdown
