"""Smoke test of ``python -m tests.bench``: the machinery works; no figure is judged.

Runs the entry point in ``--quick`` mode in a subprocess (as ``make bench`` would, with real
server subprocesses on 127.0.0.1, or a real store on disk), writing its JSON and a docs file
into ``tmp_path``, and checks that every figure is there and sane. Speed is never asserted:
CI machines vary.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.__main__ import update_docs
from tests.bench.report import REPO_ROOT

# No event loop or codec choice changes the tooling: make test-asyncio leaves it out.
pytestmark = pytest.mark.once


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_quick_run_writes_sane_results(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\nintro stays\n\n"
        "<!-- remoting:begin -->\nSTALE-SECTION\n<!-- remoting:end -->\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONASYNCIODEBUG"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.bench",
            "--quick",
            "--only",
            "remoting",
            "--results-dir",
            str(tmp_path / "results"),
            "--docs",
            str(docs),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    results = json.loads((tmp_path / "results" / "remoting.json").read_text())
    assert results["quick"] is True
    servers = results["servers"]
    assert set(servers) == {"raw", "raw_per_frame", "loop", "threaded"}
    for summary in [*servers.values(), results["client_e2e"]]:
        assert _positive(summary["pipelined_requests_per_s"])
        assert summary["round_trips"] > 0
        assert 0 < summary["p50_us"] <= summary["p99_us"] <= summary["p999_us"]
    for key in (
        "raw_per_frame_vs_raw",
        "loop_vs_raw",
        "loop_vs_raw_per_frame",
        "threaded_vs_raw",
        "threaded_vs_loop",
        "client_vs_raw",
    ):
        assert _positive(results["ratios"][key]["throughput"])
        assert _positive(results["ratios"][key]["p99"])
    assert set(results["goals"]) >= {"throughput_met", "p99_met"}
    for name in ("JSON", "ROCKETMQ", "MSGPACK"):
        codec = results["codecs"][name]
        assert _positive(codec["encode_us"])
        assert _positive(codec["decode_us"])

    text = docs.read_text()
    assert "intro stays" in text
    assert "STALE-SECTION" not in text
    assert text.count("<!-- remoting:begin -->") == 1
    assert "pipelined req/s" in text
    assert "raw uvloop echo" in proc.stdout


def _run_quick(name: str, tmp_path: Path, docs: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONASYNCIODEBUG"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.bench",
            "--quick",
            "--only",
            name,
            "--results-dir",
            str(tmp_path / "results"),
            "--docs",
            str(docs),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_quick_store_run_writes_sane_results(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\nintro stays\n\n<!-- store:begin -->\nSTALE-SECTION\n<!-- store:end -->\n"
    )
    proc = _run_quick("store", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    results = json.loads((tmp_path / "results" / "store.json").read_text())
    assert results["quick"] is True
    assert not (REPO_ROOT / results["config"]["work_dir"]).exists()  # big files cleaned up
    append = results["append"]
    assert set(append) == {
        "floor",
        "commit_log_put",
        "store_put",
        "store_put_dispatch",
        "commit_log_batch",
        "store_batch",
        "store_batch_dispatch",
    }
    assert append["floor"]["vs_floor"] == 1.0
    for row in append.values():
        assert _positive(row["messages_per_s"])
        assert _positive(row["mb_per_s"])
        assert _positive(row["vs_floor"])
        assert row["messages"] > 0
    fdatasync = results["sync_flush"]["fdatasync"]
    assert 0 < fdatasync["p50_us"] <= fdatasync["p99_us"]
    sync = results["sync_flush"]["writers"]
    assert set(sync) == {"1", "16", "256"}
    for row in sync.values():
        assert _positive(row["messages_per_s"])
        assert 0 < row["p50_us"] <= row["p99_us"]
        assert row["fdatasyncs"] > 0
        assert 0 < row["fdatasyncs_per_message"] <= 1
    assert sync["1"]["vs_one_writer"] == 1.0
    recovery = results["recovery"]
    assert recovery["written"]["segments"] > 3  # so normal recovery skips some
    for key in ("normal_load", "walk_crc", "walk_no_crc", "walk_crc_cold", "abnormal_load"):
        assert _positive(recovery[key]["gib_per_s"])
        assert recovery[key]["walked_bytes"] > 0
    assert recovery["walk_crc"]["walked_bytes"] == recovery["written"]["commit_log_bytes"]
    assert recovery["normal_load"]["walked_bytes"] < recovery["walk_crc"]["walked_bytes"]
    assert recovery["abnormal_load"]["index_keys"] >= 2 * recovery["written"]["messages"]
    assert set(results["goals"]) >= {"single_met", "batch_met", "group_commit_met", "recovery_met"}

    text = docs.read_text()
    assert "intro stays" in text
    assert "STALE-SECTION" not in text
    assert text.count("<!-- store:begin -->") == 1
    assert "msgs/fdatasync" in text
    assert "floor: crc32" in proc.stdout


def test_update_docs_appends_a_missing_section(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n")
    update_docs(docs, "remoting", "first")
    update_docs(docs, "remoting", "second")
    text = docs.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "first" not in text
    assert text.count("second") == 1
    assert text.endswith("<!-- remoting:end -->\n")


def test_quick_broker_run_writes_sane_results(tmp_path: Path) -> None:
    """The broker benchmark end to end with tiny counts: Aerolite under the official client
    (skipped without it), and Redis/NATS where they are installed."""
    import importlib.util

    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("the official RocketMQ client (PyPI rocketmq) is not installed")
    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\nintro stays\n\n<!-- broker:begin -->\nSTALE-SECTION\n<!-- broker:end -->\n"
    )
    proc = _run_quick("broker", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    results = json.loads((tmp_path / "results" / "broker.json").read_text())
    assert results["quick"] is True
    assert not (REPO_ROOT / results["config"]["work_dir"]).exists()  # stores cleaned up
    assert results["notes"] == [], results["notes"]
    systems = results["systems"]
    threads = [str(n) for n in results["config"]["threads"]]
    for key in ("aerolite_async", "aerolite_sync"):
        assert systems[key]["exit_code"] == 0  # SIGTERM stops the broker cleanly
        for n in threads:
            row = systems[key]["produce"][n]
            assert row["ok"] > 0
            assert _positive(row["messages_per_s"])
            assert _positive(row["mb_per_s"])
            assert row["stall_probe"]["probes"] > 0
    consume = systems["aerolite_async"]["consume"]
    expect = results["config"]["consume_messages"]
    for kind in ("push", "pull"):
        assert consume[kind]["received"] >= expect
        assert _positive(consume[kind]["messages_per_s"])
    for n in threads:
        assert _positive(results["echo"]["produce"][n]["messages_per_s"])
        assert _positive(results["ratios"]["produce"]["async"][n]["vs_echo"])
    for peer, info in results["peers"].items():
        if info["available"]:
            for n in threads:
                assert _positive(systems[f"{peer}_async"]["produce"][n]["messages_per_s"])
                assert _positive(results["ratios"]["produce"]["async"][n][f"vs_{peer}"])
            for kind in ("push", "pull"):
                assert systems[f"{peer}_async"]["consume"][kind]["received"] >= expect

    text = docs.read_text()
    assert "intro stays" in text
    assert "STALE-SECTION" not in text
    assert text.count("<!-- broker:begin -->") == 1
    assert "Aerolite msg/s" in text
    assert "echo ceiling" in proc.stdout


def test_quick_sdk_run_writes_sane_results(tmp_path: Path) -> None:
    """The side-by-side benchmark end to end with tiny counts and two repetitions: the SDK
    against the broker in both flush modes, every size, the backlog consumers, the paced
    end-to-end and mixed runs, the interleaved echo round trips, and Redis/NATS where they
    are installed."""
    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\nintro stays\n\n<!-- sdk:begin -->\nSTALE-SECTION\n<!-- sdk:end -->\n"
    )
    proc = _run_quick("sdk", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    results = json.loads((tmp_path / "results" / "sdk.json").read_text())
    assert results["quick"] is True
    assert not (REPO_ROOT / results["config"]["work_dir"]).exists()  # stores cleaned up
    assert results["notes"] == [], results["notes"]
    reps = results["config"]["reps"]
    assert reps >= 2
    aerolite = results["systems"]["aerolite"]
    assert aerolite["exit_code"] == 0  # SIGTERM stops the broker cleanly
    sizes = results["config"]["sizes"]
    keys = ["one", "window", "batch", *(f"{s}@{n}" for n in sizes for s in ("one", "window"))]
    for key in keys:
        row = aerolite["produce"][key]
        assert row["repetitions"] == reps
        assert row["ok"] > 0
        assert row["stored"] == row["acknowledged"]  # every acknowledged send is in a queue
        assert _positive(row["messages_per_s"])
        spread = row["spread"]["messages_per_s"]
        assert spread["min"] <= row["messages_per_s"] <= spread["max"]
        assert len(spread["values"]) == reps
        assert _positive(row["client_cpu_us_per_msg"])
        assert 0 < row["p50_us"] <= row["p99_us"] <= row["p99_9_us"] <= row["max_us"]
    sync = results["systems"]["aerolite_sync"]
    assert sync["settings"]["flushDiskType"] == "SYNC_FLUSH"
    for shape in results["config"]["sync_shapes"]:
        assert sync["produce"][shape]["stored"] == sync["produce"][shape]["acknowledged"]
    expect = results["config"]["consume_messages"]
    for kind in ("push", "pull"):
        assert aerolite["consume"][kind]["received"] >= expect
        assert aerolite["consume"][kind]["duplicates"] == 0
        assert _positive(aerolite["consume"][kind]["messages_per_s"])
    e2e, mixed = aerolite["paced"]["e2e"], aerolite["paced"]["mixed"]
    assert e2e["ok"] > 0 and e2e["missing"] == 0 and e2e["failed"] == 0
    assert e2e["received"] == e2e["latencies"] >= e2e["ok"]
    assert 0 < e2e["p50_us"] <= e2e["p99_us"] <= e2e["max_us"]
    assert len(mixed["per_group"]) == results["config"]["mixed_groups"]
    assert mixed["ok"] > 0 and mixed["rss_kb"] > 0
    assert _positive(mixed["server_cpu_us_per_msg"])
    echo = results["echo"]
    assert echo["interleaved"] is True
    assert 0 < echo["p50_us"] <= echo["p99_us"]
    assert set(results["goals"]) >= {"window_vs_redis_pipelined", "e2e_p99_vs_nats"}
    window = "produce 1 KiB, window of 256"
    for peer, info in results["peers"].items():
        if info["available"]:
            for key in keys:
                assert _positive(results["systems"][peer]["produce"][key]["messages_per_s"])
            assert _positive(results["ratios"][window][f"vs_{peer}"])
            assert results["systems"][peer]["paced"]["e2e"]["ok"] > 0

    text = docs.read_text()
    assert "intro stays" in text
    assert "STALE-SECTION" not in text
    assert text.count("<!-- sdk:begin -->") == 1
    assert "Aerolite msg/s, median of" in text
    assert "Echo round trip" in proc.stdout


def test_quick_replication_run_writes_sane_results(tmp_path: Path) -> None:
    """The replication benchmark end to end with tiny counts: a master and a slave as
    processes, the lag poller, ASYNC_MASTER and SYNC_MASTER throughput, and the plot."""
    docs = tmp_path / "benchmarks.md"
    proc = _run_quick("replication", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results" / "replication.json").read_text())
    assert results["notes"] == [], results["notes"]
    lag = results["lag"]
    assert lag["messages"] > 0 and lag["polls"] > 0
    assert 0 <= lag["lag_ms"]["p50"] <= lag["lag_ms"]["p99"] <= lag["lag_ms"]["max"]
    assert 0 <= lag["lag_bytes"]["p50"] <= lag["lag_bytes"]["max"]
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        row = results[role]
        assert row["not_send_ok"] == 0  # a SYNC_MASTER with a live slave acknowledges all
        assert _positive(row["window_messages_per_s"])
        assert 0 < row["one_by_one_ms"]["p50"] <= row["one_by_one_ms"]["p99"]
    assert _positive(results["sync_over_async"]["window"])
    assert "replication" in proc.stdout and "SYNC_MASTER" in proc.stdout


def test_quick_spark_run_writes_sane_results(tmp_path: Path) -> None:
    """The Spark benchmark end to end with tiny counts: a standalone broker process, the
    SDK's pull baseline and a local[2] Spark read into Parquet (Java is on this machine;
    tests/spark says so when it is not)."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    docs = tmp_path / "benchmarks.md"
    proc = _run_quick("spark", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results" / "spark.json").read_text())
    assert results["notes"] == [], results["notes"]
    for key in ("pull", "spark"):
        row = results[key]
        assert row["messages"] == results["config"]["count"]
        assert _positive(row["messages_per_s"]) and _positive(row["mb_per_s"])
    assert _positive(results["spark_over_pull"])
    assert "Spark → Parquet" in proc.stdout


def test_quick_memory_run_writes_sane_results(tmp_path: Path) -> None:
    """The memory benchmark with a tiny target: a broker process, the sampler of its
    /proc status, the spread after the warm-up and the goal's verdict."""
    docs = tmp_path / "benchmarks.md"
    proc = _run_quick("memory", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results" / "memory.json").read_text())
    assert results["notes"] == [], results["notes"]
    assert results["write"]["bytes"] >= results["config"]["target_bytes"]
    assert len(results["samples"]) > 3
    for key in ("VmRSS", "RssAnon", "RssFile"):
        spread = results["rss"][key]
        assert 0 < spread["min_mib"] <= spread["max_mib"]
    assert isinstance(results["goal_flat_met"], bool)
    assert isinstance(results["anon_flat_met"], bool)
    assert "RssAnon" in proc.stdout


def test_profile_areas_name_the_package_of_each_function() -> None:
    """Self time is charged to the area that spent it: uvloop's C code (which py-spy shows
    as Runner.run), asyncio's Python, or one of our packages."""
    from tests.bench.profile_bench import area_of

    assert area_of("Runner.run", "/usr/lib/python3.11/asyncio/runners.py") == (
        "event loop and sockets"
    )
    assert area_of("Future.set_result", "/usr/lib/python3.11/asyncio/futures.py") == (
        "asyncio (Python)"
    )
    assert area_of("CommitLog.put", "store/commit_log.py") == "store"
    assert area_of("Connection._flush", "remoting/connection.py") == "remoting"
    assert area_of("SendProcessor.handle", "broker/processors/send.py") == "broker"
    assert area_of("Producer.send", "client/producer.py") == "client"
    assert area_of("loads", "/usr/lib/python3.11/json/__init__.py") == "other"


def test_quick_profile_run_writes_a_section(tmp_path: Path) -> None:
    """The profile benchmark samples a live broker under the produce driver with py-spy
    and writes the areas table (py-spy comes with the bench extra)."""
    from tests.bench.profiling import py_spy_path

    try:
        py_spy_path()
    except RuntimeError:
        pytest.skip("py-spy is not installed (pip install -e '.[bench]')")
    docs = tmp_path / "benchmarks.md"
    proc = _run_quick("profile", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results" / "profile.json").read_text())
    assert results["notes"] == [], results["notes"]
    (profile,) = results["profiles"]
    assert profile["top_self"], profile
    assert 99.0 <= sum(profile["areas"].values()) <= 101.0
    assert profile["areas"].get("broker", 0) + profile["areas"].get("store", 0) > 0
    assert "## Profiles: where the time goes" in docs.read_text()


def test_quick_timers_run_writes_a_section(tmp_path: Path) -> None:
    """The timer benchmark with tiny counts: pending timers entered into the wheel, and
    timers delivered after their time, none early."""
    docs = tmp_path / "benchmarks.md"
    proc = _run_quick("timers", tmp_path, docs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results" / "timers.json").read_text())
    assert results["memory"]["pending"] == results["settings"]["pending"]
    precision = results["precision"]
    assert precision["delivered"] == results["settings"]["timers"]
    assert precision["early"] == 0
    assert "## Timers" in docs.read_text()
