"""``python -m tests.bench`` (``make bench``): run the benchmarks and publish their figures.

Each benchmark prints a table, writes ``<results-dir>/<name>.json`` and rewrites its section of
``docs/benchmarks.md``, the text between ``<!-- <name>:begin -->`` and ``<!-- <name>:end -->``
(appended when the markers are missing). Figures are ratios to a baseline measured in the
same run, so they compare across machines better than the absolute numbers do.

``--quick`` runs tiny counts to prove the machinery works (the smoke test uses it); its
figures mean nothing, so it leaves the docs alone unless ``--docs`` is given.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from tests.bench import (
    broker_bench,
    goals,
    grpc_bench,
    ha_bench,
    memory_bench,
    profile_bench,
    remoting_bench,
    sdk_bench,
    spark_bench,
    store_bench,
    timer_bench,
)
from tests.bench.report import REPO_ROOT, Report

BENCHMARKS: dict[str, Callable[[bool], Report]] = {
    remoting_bench.NAME: lambda quick: remoting_bench.run(quick=quick),
    store_bench.NAME: lambda quick: store_bench.run(quick=quick),
    broker_bench.NAME: lambda quick: broker_bench.run(quick=quick),
    sdk_bench.NAME: lambda quick: sdk_bench.run(quick=quick),
    ha_bench.NAME: lambda quick: ha_bench.run(quick=quick),
    spark_bench.NAME: lambda quick: spark_bench.run(quick=quick),
    timer_bench.NAME: lambda quick: timer_bench.run(quick=quick),
    memory_bench.NAME: lambda quick: memory_bench.run(quick=quick),
    profile_bench.NAME: lambda quick: profile_bench.run(quick=quick),
    grpc_bench.NAME: lambda quick: grpc_bench.run(quick=quick),
}

DEFAULT_RESULTS_DIR = REPO_ROOT / "bench-results"
DEFAULT_DOCS = REPO_ROOT / "docs" / "benchmarks.md"

DOCS_INTRO = """\
# Benchmarks

`make bench` (`python -m tests.bench`) runs every benchmark, prints its tables, writes the raw
results to `bench-results/<name>.json` and rewrites the sections of this file between their
`<!-- name:begin -->` / `<!-- name:end -->` markers. `python -m tests.bench --only remoting`
runs one; `--quick` only checks that the machinery works.

Absolute figures depend on the machine (each section says which), so every benchmark also
measures a baseline in the same run and reports ratios to it: a ratio taken on one machine
carries over to another far better than a request rate does.
"""


def update_docs(path: Path, name: str, section: str) -> None:
    """Replace (or append) the marked section ``name`` of the Markdown file at ``path``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{section.strip()}\n{end}"
    text = path.read_text() if path.exists() else DOCS_INTRO
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny counts (smoke test)")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), help="run one benchmark")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        help=f"Markdown file to update (default: {DEFAULT_DOCS.relative_to(REPO_ROOT)}, "
        "or none with --quick)",
    )
    parser.add_argument("--no-docs", action="store_true", help="leave the docs alone")
    args = parser.parse_args(argv)
    # Warnings only: nothing may log per request while figures are taken.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))

    docs: Path | None = args.docs
    if docs is None and not args.quick:
        docs = DEFAULT_DOCS
    if args.no_docs:
        docs = None
    names = [args.only] if args.only else list(BENCHMARKS)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        report = BENCHMARKS[name](args.quick)
        print(report.console, flush=True)
        out = args.results_dir / f"{name}.json"
        out.write_text(json.dumps(report.results, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {out}", flush=True)
        if docs is not None and report.markdown:  # empty: nothing measured, keep the old
            update_docs(docs, name, report.markdown)
            print(f"updated {docs}", flush=True)
    if not args.quick:
        # the goals of every benchmark in one table, from their latest full results
        console, markdown = goals.render(args.results_dir)
        print(console, flush=True)
        if docs is not None:
            update_docs(docs, goals.NAME, markdown)
            print(f"updated {docs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
