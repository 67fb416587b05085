"""How ``DriverRun.finish`` judges a client driver that dies: only the C++ client's known abort
in ``shutdown()``, after a ``stopping`` line, counts as the work reported; every other death
fails the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import CPP_SHUTDOWN_ABORT, DriverRun

STOPPING = 'print(\'{"event": "stopping", "reason": "expected", "count": 3}\', flush=True)'
ABORT = "import os, sys; sys.stderr.write({message!r} + '\\n'); sys.stderr.flush(); os.abort()"


def run(tmp_path: Path, script: str) -> DriverRun:
    stderr_path = tmp_path / "driver.err"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    return DriverRun("fake-driver", proc, stderr_path)


def test_the_cpp_shutdown_abort_after_stopping_gives_the_stopping_result(tmp_path: Path) -> None:
    script = STOPPING + "\n" + ABORT.format(message=CPP_SHUTDOWN_ABORT)
    done = run(tmp_path, script).finish(timeout_s=30)
    assert done == {
        "event": "done",
        "reason": "expected",
        "count": 3,
        "shutdown_aborted": True,
    }


@pytest.mark.parametrize(
    "script",
    [
        # The same abort before the driver said it was stopping: its work is not done.
        ABORT.format(message=CPP_SHUTDOWN_ABORT),
        # Another abort after stopping: not the known one.
        STOPPING + "\n" + ABORT.format(message="free(): double free detected in tcache 2"),
        # Stopping, then an ordinary failure exit.
        STOPPING + "\nimport sys; sys.exit(3)",
    ],
    ids=["abort-before-stopping", "other-abort", "plain-exit"],
)
def test_any_other_death_fails(tmp_path: Path, script: str) -> None:
    with pytest.raises(pytest.fail.Exception, match="fake-driver failed"):
        run(tmp_path, script).finish(timeout_s=30)


def test_a_done_line_wins_over_stopping(tmp_path: Path) -> None:
    script = STOPPING + '\nprint(\'{"event": "done", "count": 3, "shutdown_s": 0.1}\')'
    assert run(tmp_path, script).finish(timeout_s=30) == {
        "event": "done",
        "count": 3,
        "shutdown_s": 0.1,
    }
