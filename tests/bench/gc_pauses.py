"""The garbage collector's pauses in a test run: a pytest plugin, not a benchmark.

``python -m pytest -p tests.bench.gc_pauses tests/broker`` times every collection of the
test process (``gc.callbacks``) and, at the end of the session, prints how many full
(generation 2) collections ran, their median and longest pause, the tests the three longest
fell in (collections during test collection, before any test runs, are left out), and how
many objects the collector tracked at the end. The brokers under test share
that process and its loop, so a pause longer than the send lane's 200 ms
(waitTimeMillsInSendQueue) gets a concurrent send refused SYSTEM_BUSY: this is how that
cause was found (docs/benchmarks.md, "After M13"). With ``GC_PAUSES_UNFROZEN=1`` it undoes
the freeze of the session's heap (tests/conftest.py ``pytest_collection_finish``), to show
the pauses as they were before it.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from typing import Any

import pytest

_COLLECTING = "(collection)"
_now = {"started": 0.0}
_test = [_COLLECTING]  # the test running
_full: list[tuple[float, str]] = []  # (pause in ms, the test it fell in)


def _timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _now["started"] = time.perf_counter()
    elif info["generation"] == 2:
        _full.append(((time.perf_counter() - _now["started"]) * 1000, _test[0]))


def pytest_configure(config: pytest.Config) -> None:
    gc.callbacks.append(_timed)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("GC_PAUSES_UNFROZEN") == "1":
        gc.unfreeze()


def pytest_runtest_setup(item: pytest.Item) -> None:
    _test[0] = item.nodeid


def pytest_terminal_summary(terminalreporter: Any) -> None:
    gc.callbacks.remove(_timed)
    write = terminalreporter.write_line
    in_tests = [(ms, test) for ms, test in _full if test != _COLLECTING]
    if not in_tests:
        write("gc pauses: no full collection ran during the tests")
        return
    pauses = [ms for ms, _ in in_tests]
    write(
        f"gc pauses during the tests: {len(pauses)} full collections, median "
        f"{statistics.median(pauses):.0f} ms, longest {max(pauses):.0f} ms; at the end "
        f"{len(gc.get_objects())} objects tracked, {gc.get_freeze_count()} frozen"
    )
    for ms, test in sorted(in_tests, reverse=True)[:3]:
        write(f"  {ms:.0f} ms in {test}")
