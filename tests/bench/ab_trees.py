"""Before and after: one SDK workload on this tree and on an older commit, in turns.

``python -m tests.bench.ab_trees REV [--shape window] [--body-bytes 128] [--count 60000]
[--reps 3] [--rate 2000] [--seconds 15]`` checks REV out into a temporary git worktree,
then for each repetition and each tree (REV first, then this one) starts that tree's
``python -m broker standalone`` on loopback ports chosen by the kernel, with its store in a
temporary directory, and runs that tree's SDK driver (``tests.bench.drivers.sdk_client
produce``) against it. It prints each run's msg/s, the medians and their ratio (this tree
over REV). ``--shape e2e`` runs the driver's paced workload instead (``--rate`` messages a
second for ``--seconds``, one PushConsumer group in the same process, on a topic of 8
queues made first, as the side-by-side benchmark's end-to-end run) and compares the p99
from due time to the listener. Where the machine has two CPUs the broker runs on CPU 1 and
the driver on CPU 0, as in the side-by-side benchmark. The trees take turns, so a machine
that gets busier or quieter during the runs weighs on both alike. Everything it starts it
stops by PID, and it removes the worktree. The old tree's codec speedups are compiled in its
worktree first, so both trees run the same kind of codec; each run also prints the CPU time
per message of the driver and of the broker, which tells more CPU from more waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from tests.bench.broker_bench import _admin as create_topic
from tests.bench.common import can_pin, pinned
from tests.bench.report import REPO_ROOT

_PIN = can_pin(0, 1)


class _Addresses(NamedTuple):
    address: str  # the broker's remoting address
    namesrv: str


def _on_cpu(cpu: int) -> int | None:
    return cpu if _PIN else None


def _standalone(tree: Path, root: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    argv = [sys.executable, "-m", "broker", "standalone", "--store", str(root / "store")]
    argv += ["--namesrv-port", "0", "--listen-port", "0", "--set", "metricsPort=0"]
    with (root / "broker.log").open("w") as log, pinned(_on_cpu(1)):
        proc = subprocess.Popen(argv, cwd=tree, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    fields = dict(w.split("=", 1) for w in proc.stdout.readline().split()[1:] if "=" in w)
    if "namesrv" not in fields or "broker" not in fields:
        proc.kill()
        proc.wait(timeout=10)
        raise RuntimeError(f"the broker of {tree} did not start: see {root / 'broker.log'}")
    return proc, fields


def _run(tree: Path, args: argparse.Namespace, run: int) -> dict[str, Any]:
    """One run of the driver against a fresh standalone broker of ``tree``: its done line."""
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        proc, addresses = _standalone(tree, Path(tmp))
        try:
            spec: dict[str, Any] = {
                "namesrv": addresses["namesrv"],
                "topic": f"AbTopic{run}",
                "body_bytes": args.body_bytes,
                "server_pid": proc.pid,  # CPU per message on both sides
            }
            if args.shape == "e2e":
                command = "paced"
                # made first, as the side-by-side benchmark does: a consumer subscribed
                # before the producer creates the topic would learn its route only at its
                # next poll of the name server, seconds into the run
                where = _Addresses(addresses["broker"], spec["namesrv"])
                asyncio.run(create_topic(where, spec["topic"], 8))
                spec.update(rate=args.rate, seconds=args.seconds, groups=1, drain_s=10.0)
            else:
                command = "produce"
                spec.update(shape=args.shape, count=args.count, max_s=60.0)
            with pinned(_on_cpu(0)):
                out = subprocess.run(
                    [sys.executable, "-m", "tests.bench.drivers.sdk_client", command],
                    cwd=tree,
                    input=json.dumps(spec),
                    capture_output=True,
                    text=True,
                    timeout=args.seconds + 180,
                    check=True,
                ).stdout
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    done: dict[str, Any] = next(
        json.loads(line) for line in out.splitlines() if '"event":"done"' in line
    )
    return done


def _figure(done: dict[str, Any], shape: str) -> tuple[float, str]:
    """The figure compared (msg/s, or the end-to-end p99) and how a run is printed."""
    if shape == "e2e":
        p99 = float(done["p99_us"])
        return p99, (
            f"p50 {float(done['p50_us']):,.0f} µs, p99 {p99:,.0f} µs, "
            f"max {float(done.get('max_us') or 0):,.0f} µs, received {done.get('received')} "
            f"of {done.get('ok')}, server CPU {done.get('server_cpu_us_per_msg')} µs/msg"
        )
    rate = float(done["messages_per_s"])
    return rate, (
        f"{rate:,.0f} msg/s, CPU per message: SDK {done.get('client_cpu_us_per_msg')} µs, "
        f"broker {done.get('server_cpu_us_per_msg')} µs"
    )


def _build_speedups(tree: Path) -> None:
    """Compile the old tree's codec speedups in its worktree, as ``make install`` does here:
    without them it would run the pure-Python codec against this tree's compiled one."""
    if not (tree / "setup.py").exists():
        return  # a tree from before the speedups: pure Python is all it has
    subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    built = subprocess.run(
        [sys.executable, "-c", "import codec; print(codec.SPEEDUPS)"],
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"codec speedups of the old tree: {built}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ab_trees")
    parser.add_argument("rev", help="the commit to compare this tree with")
    parser.add_argument("--shape", choices=("one", "window", "batch", "e2e"), default="window")
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2_000.0, help="e2e: messages a second")
    parser.add_argument("--seconds", type=float, default=15.0, help="e2e: how long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ab-tree-") as tmp:
        old = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.rev],
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
        )
        try:
            _build_speedups(old)
            figures: dict[str, list[float]] = {args.rev: [], "this tree": []}
            for run in range(args.reps):
                for name, tree in ((args.rev, old), ("this tree", REPO_ROOT)):
                    figure, text = _figure(_run(tree, args, run), args.shape)
                    figures[name].append(figure)
                    print(f"{name}: {text}", flush=True)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=REPO_ROOT, check=False
            )
    before, after = (statistics.median(v) for v in figures.values())
    if args.shape == "e2e":
        what, unit = f"e2e at {args.rate:,.0f} msg/s for {args.seconds:g} s, p99", "µs"
    else:
        what, unit = f"{args.shape}, {args.count:,} messages", "msg/s"
    print(
        f"{what}, {args.body_bytes} B, median of {args.reps}: {args.rev} {before:,.0f} {unit}, "
        f"this tree {after:,.0f} {unit}, ratio {after / before:.2f}"
    )


if __name__ == "__main__":
    main()
