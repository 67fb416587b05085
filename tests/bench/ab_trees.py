"""Before and after: one SDK produce shape on this tree and on an older commit, in turns.

``python -m tests.bench.ab_trees REV [--shape window] [--body-bytes 128] [--count 60000]
[--reps 3]`` checks REV out into a temporary git worktree, then for each repetition and each
tree (REV first, then this one) starts that tree's ``python -m broker standalone`` on loopback
ports chosen by the kernel, with its store in a temporary directory, and runs that tree's SDK
driver (``tests.bench.drivers.sdk_client produce``) against it. It prints each run's msg/s,
the medians and their ratio (this tree over REV). The trees take turns, so a machine that
gets busier or quieter during the runs weighs on both alike. Everything it starts it stops
by PID, and it removes the worktree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.report import REPO_ROOT


def _standalone(tree: Path, root: Path) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "broker", "standalone", "--store", str(root / "store")]
    argv += ["--namesrv-port", "0", "--listen-port", "0", "--set", "metricsPort=0"]
    with (root / "broker.log").open("w") as log:
        proc = subprocess.Popen(argv, cwd=tree, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    fields = dict(w.split("=", 1) for w in proc.stdout.readline().split()[1:] if "=" in w)
    if "namesrv" not in fields:
        proc.kill()
        proc.wait(timeout=10)
        raise RuntimeError(f"the broker of {tree} did not start: see {root / 'broker.log'}")
    return proc, fields["namesrv"]


def _produce(tree: Path, args: argparse.Namespace, run: int) -> float:
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        proc, namesrv = _standalone(tree, Path(tmp))
        try:
            spec = {
                "namesrv": namesrv,
                "topic": f"AbTopic{run}",
                "body_bytes": args.body_bytes,
                "shape": args.shape,
                "count": args.count,
                "max_s": 60.0,
            }
            out = subprocess.run(
                [sys.executable, "-m", "tests.bench.drivers.sdk_client", "produce"],
                cwd=tree,
                input=json.dumps(spec),
                capture_output=True,
                text=True,
                timeout=180,
                check=True,
            ).stdout
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    done = next(json.loads(line) for line in out.splitlines() if '"event":"done"' in line)
    return float(done["messages_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.ab_trees")
    parser.add_argument("rev", help="the commit to compare this tree with")
    parser.add_argument("--shape", choices=("one", "window", "batch"), default="window")
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--reps", type=int, default=3)
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
            figures: dict[str, list[float]] = {args.rev: [], "this tree": []}
            for run in range(args.reps):
                for name, tree in ((args.rev, old), ("this tree", REPO_ROOT)):
                    figures[name].append(_produce(tree, args, run))
                    print(f"{name}: {figures[name][-1]:,.0f} msg/s", flush=True)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=REPO_ROOT, check=False
            )
    before, after = (statistics.median(v) for v in figures.values())
    print(
        f"{args.shape}, {args.body_bytes} B, {args.count:,} messages, median of {args.reps}: "
        f"{args.rev} {before:,.0f} msg/s, this tree {after:,.0f} msg/s, ratio {after / before:.2f}"
    )


if __name__ == "__main__":
    main()
