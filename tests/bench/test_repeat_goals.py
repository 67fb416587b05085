"""The benchmarks' bookkeeping, without running anything: repetitions merged into medians
with their range (``tests.bench.repeat``), the goals table read back from results files
(``tests.bench.goals``), and the paced runs' stamps and percentiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench import goals
from tests.bench.drivers.common import percentiles_us
from tests.bench.drivers.paced import STAMP, Paced
from tests.bench.repeat import merge, merge_rows, rate_range


def _row(rate: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {"messages_per_s": rate, "p99_us": p99, "ok": int(rate), "shape": "window", **extra}


def test_merged_row_is_the_median_with_the_range() -> None:
    merged = merge_rows([_row(100.0, 9.0), _row(300.0, 7.0), _row(200.0, 8.0)])
    assert merged["messages_per_s"] == 200.0
    assert merged["p99_us"] == 8.0
    assert merged["shape"] == "window"  # text is kept
    assert merged["repetitions"] == 3
    spread = merged["spread"]["messages_per_s"]
    assert (spread["min"], spread["max"]) == (100.0, 300.0)
    assert spread["values"] == [100.0, 300.0, 200.0]
    assert rate_range(merged) == " (100–300)"


def test_a_failed_repetition_is_left_out_and_counted() -> None:
    merged = merge_rows([_row(100.0, 9.0), {"error": "boom"}, _row(300.0, 7.0)])
    assert merged["messages_per_s"] == 200.0  # the median of the two that ran
    assert merged["failed_repetitions"] == 1
    assert merge_rows([{"error": "a"}, {"error": "b"}]) == {"error": "b"}


def test_one_repetition_shows_no_range() -> None:
    merged = merge_rows([_row(100.0, 9.0)])
    assert merged["messages_per_s"] == 100.0
    assert rate_range(merged) == ""


def test_systems_merge_phase_by_phase_keeping_the_order() -> None:
    reps: list[dict[str, dict[str, Any]]] = [
        {
            "aerolite": {
                "produce": {"one": _row(10.0, 5.0), "window": _row(1000.0, 50.0)},
                "settings": {"flushDiskType": "ASYNC_FLUSH"},
                "exit_code": 0,
            },
            "redis": {"produce": {"one": _row(20.0, 3.0)}},
        },
        {
            "aerolite": {
                "produce": {"one": _row(30.0, 7.0), "window": _row(3000.0, 70.0)},
                "settings": {"flushDiskType": "ASYNC_FLUSH"},
                "exit_code": 0,
            },
            "redis": {"produce": {"one": _row(40.0, 1.0)}, "error": "went away"},
        },
    ]
    merged = merge(reps)
    assert list(merged) == ["aerolite", "redis"]
    aerolite = merged["aerolite"]
    assert list(aerolite["produce"]) == ["one", "window"]
    assert aerolite["produce"]["window"]["messages_per_s"] == 2000.0
    assert aerolite["settings"] == {"flushDiskType": "ASYNC_FLUSH"}
    assert aerolite["exit_code"] == 0
    assert aerolite["repetitions"] == 2
    # a system that failed in one repetition keeps the other's figures, not the error
    assert "error" not in merged["redis"]
    assert merged["redis"]["produce"]["one"]["messages_per_s"] == 30.0


def test_percentiles_are_nearest_rank_in_microseconds() -> None:
    ordered = sorted(range(1_000, 1_001_000, 1_000))  # 1..1000 µs in ns
    p = percentiles_us(ordered)
    assert p["p50_us"] == 500.0
    assert p["p99_us"] == 990.0
    assert p["p99_9_us"] == 999.0
    assert p["max_us"] == 1000.0
    assert percentiles_us([]) == {}


def test_paced_bodies_carry_sequence_and_due_time() -> None:
    run = Paced(2, 64)
    body = run.body(7, 123_456_789)
    assert len(body) == 64
    assert STAMP.unpack_from(body) == (7, 123_456_789)
    run.received(1, run.body(-1, 0))  # a warm-up message: counted as warm, not timed
    assert run.warm == [False, True]
    assert run.counts == [0, 0]
    run.received(0, body)
    assert run.counts == [1, 0]
    assert len(run.latencies_ns) == 1


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data))


def test_goals_table_reads_every_benchmark(tmp_path: Path) -> None:
    _write(
        tmp_path / "sdk.json",
        {
            "quick": False,
            "goals": {
                "window_vs_redis_pipelined": {"value": 1.2, "goal": 2.0, "met": False},
                "batch_msgs_per_s": {"value": 68_000.0, "goal": 400_000.0, "met": False},
                "e2e_p99_vs_nats": {"value": 0.9, "goal": 1.0, "met": True},
            },
        },
    )
    _write(
        tmp_path / "broker.json",
        {
            "quick": False,
            "ratios": {
                "produce": {
                    "async": {"1": {"vs_rocketmq": 1.3}, "8": {"vs_rocketmq": 0.9}},
                    "sync": {"1": {"vs_rocketmq": 1.1}, "8": {"vs_rocketmq": 1.2}},
                },
                "consume": {"push": {"vs_rocketmq": 1.4}},
                "rss_vs_rocketmq": {"async": {"VmHWM": 0.2}, "sync": {"VmHWM": 0.3}},
            },
        },
    )
    _write(
        tmp_path / "memory.json",
        {
            "quick": False,
            "goal_flat_met": False,
            "anon_flat_met": True,
            "rss": {
                "VmRSS": {"min_over_warmup": 0.8, "max_over_warmup": 1.6},
                "RssAnon": {"min_over_warmup": 0.97, "max_over_warmup": 1.03},
            },
        },
    )
    table = {r[0]: r for r in goals.rows(tmp_path)}
    assert table["batches of 32 ≥ 400,000 msg/s"][1:3] == ["68,000 msg/s", "**not met**"]
    assert table["end-to-end p99 at 2,000 msg/s ≤ NATS JetStream's"][2] == "met"
    async_row = table["C++ client held fixed, ASYNC_FLUSH: produce ≥ Apache RocketMQ 4.9"]
    assert async_row[1:3] == ["1 threads 1.30x, 8 threads 0.90x", "**not met**"]
    sync_row = table["C++ client held fixed, SYNC_FLUSH: produce ≥ Apache RocketMQ 4.9"]
    assert sync_row[2] == "met"
    assert table["broker peak RSS ≤ ¼ of the JVM broker's, SYNC_FLUSH"][2] == "**not met**"
    assert table["broker RSS flat (±10 %) while writing 10 GB"][2] == "**not met**"
    console, markdown = goals.render(tmp_path)
    assert "goals: 5 of 10 met" in console
    assert markdown.startswith("## Goals at a glance")


def test_goals_without_results_say_not_run(tmp_path: Path) -> None:
    _write(tmp_path / "sdk.json", {"quick": True, "goals": {}})  # quick figures don't count
    table = goals.rows(tmp_path)
    assert [r[1] for r in table] == ["not run"] * 3
