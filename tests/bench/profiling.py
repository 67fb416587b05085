"""py-spy profiles of a process under a bench driver's load (``--profile`` modes).

Shared by the broker and SDK benchmarks: start a driver module, wait for its "warm" line,
sample a process (the driver itself or a server) with py-spy for a while, read the driver's
last line; and summarise a speedscope file by self time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.report import REPO_ROOT


def py_spy_path() -> str:
    """py-spy from PATH or beside this interpreter (the venv).

    Raises:
        RuntimeError: py-spy is not installed.
    """
    path = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(path).exists():
        raise RuntimeError("py-spy is not installed")
    return path


def profile_while_driving(
    argv: list[str],
    args: dict[str, Any],
    *,
    env: dict[str, str],
    spy_pid: int | None,
    seconds: float,
    out: Path,
    native: bool = False,
    settle_s: float = 0.5,
    rate_hz: int | None = None,
) -> dict[str, Any]:
    """Run the driver ``argv`` with ``args`` (one JSON line on stdin), profile ``spy_pid``
    (None: the driver) for ``seconds`` into ``out``, and return the driver's last line."""
    py_spy = py_spy_path()
    driver = subprocess.Popen(  # our own driver module, fixed arguments
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        env=env,
        text=True,
    )
    try:
        assert driver.stdin is not None and driver.stdout is not None
        driver.stdin.write(json.dumps(args) + "\n")
        driver.stdin.close()
        driver.stdout.readline()  # the "warm" line: the timed part begins
        time.sleep(settle_s)
        spy = subprocess.run(  # py-spy from the venv, fixed arguments, a PID we started
            [
                py_spy,
                "record",
                "-p",
                str(spy_pid if spy_pid is not None else driver.pid),
                "-d",
                str(int(seconds)),
                "-f",
                "speedscope",
                "-o",
                str(out),
                *(["-r", str(rate_hz)] if rate_hz is not None else []),
                # --native needs to stop the process for each sample.
                *(["--native"] if native else ["--nonblocking"]),
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
        if spy.returncode != 0:
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {spy.stderr.strip()}")
        done: dict[str, Any] = json.loads(driver.stdout.readline() or "{}")
    finally:
        if driver.poll() is None:
            try:
                driver.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.wait(10)
    return done


def speedscope_weights(
    path: Path,
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float], float]:
    """Self and total sample weight per function ``(name, file)``, all lines of a function
    together, over every thread of a py-spy speedscope file; and the grand total."""
    doc = json.loads(path.read_text())
    frames = doc["shared"]["frames"]
    # A frame is a (function, file, line); a function is its (name, file).
    function_of = [(f.get("name", "?"), f.get("file", "?")) for f in frames]
    self_w: dict[tuple[str, str], float] = {}
    total_w: dict[tuple[str, str], float] = {}
    grand = 0.0
    for profile in doc["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            grand += weight
            if stack:
                leaf = function_of[stack[-1]]
                self_w[leaf] = self_w.get(leaf, 0.0) + weight
            for fn in {function_of[i] for i in stack}:
                total_w[fn] = total_w.get(fn, 0.0) + weight
    return self_w, total_w, grand


def speedscope_top(path: Path, top: int) -> list[dict[str, Any]]:
    """Functions by self time (and total time) from a py-spy speedscope file."""
    self_w, total_w, grand = speedscope_weights(path)
    ordered = sorted(self_w.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [
        {
            "function": name,
            "file": file.replace(str(REPO_ROOT) + "/", ""),
            "self_pct": round(100 * weight / grand, 1) if grand else 0.0,
            "total_pct": round(100 * total_w.get((name, file), 0.0) / grand, 1) if grand else 0.0,
        }
        for (name, file), weight in ordered
    ]


def save_summary(out: Path, summary: dict[str, Any]) -> None:
    """Write a ``--profile`` summary as JSON beside its speedscope file (``x.speedscope.json``
    gives ``x.json``)."""
    out.with_name(out.name.replace(".speedscope", "")).write_text(
        json.dumps(summary, indent=2) + "\n"
    )


def top_self_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The rows of a summary's ``top_self`` table: function (file), self %, total %."""
    return [
        [f"{r['function']} ({r['file']})", f"{r['self_pct']:.1f}", f"{r['total_pct']:.1f}"]
        for r in summary["top_self"]
    ]
