"""Smoke test of ``python -m tests.bench``: the machinery works; no figure is judged.

Runs the entry point in ``--quick`` mode in a subprocess (as ``make bench`` would, with real
server subprocesses on 127.0.0.1), writing its JSON and a docs file into ``tmp_path``, and
checks that every figure is there and sane. Speed is never asserted: CI machines vary.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.bench.__main__ import update_docs
from tests.bench.report import REPO_ROOT


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
        timeout=120,
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
