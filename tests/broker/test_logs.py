"""``configure_logging``: the broker renders structlog events and standard-library records
(``remoting.*``, shared with the SDK, and third-party code) alike, on stderr, at its level.

Run in a fresh interpreter: the configuration is process-wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import logging
import structlog
from broker.logs import configure_logging

configure_logging(json=True, level="info")
structlog.contextvars.bind_contextvars(broker="b1")
logging.getLogger("remoting.connection").warning(
    "connection_closed peer=%s reason=%s", "127.0.0.1:5", "idle for more than 0.5 s"
)
logging.getLogger("remoting.dispatch").info(
    "slow_request code=%s took_ms=%s result=%s", 310, 1.5, None
)
logging.getLogger("remoting.client").debug("connected addr=%s", "127.0.0.1:9876")
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("remoting.dispatch").exception("processor_failed code=%s", 10)
logging.getLogger("asyncio").error("Task exception was never retrieved")
structlog.get_logger("broker.broker").info("broker_started", address="127.0.0.1:10911")
structlog.get_logger("broker.broker").debug("not_shown")
"""


def test_stdlib_records_render_like_the_broker_s_own(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(  # our own interpreter on our own script
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},  # this tree's broker, whatever is installed
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    lines = [json.loads(line) for line in proc.stderr.splitlines()]
    assert all(line.pop("timestamp") for line in lines)
    exception = lines[2].pop("exception")
    assert "ZeroDivisionError" in exception and exception.startswith("Traceback")
    assert lines == [
        {
            "event": "connection_closed",
            "peer": "127.0.0.1:5",
            "reason": "idle for more than 0.5 s",
            "broker": "b1",
            "level": "warning",
        },
        {
            "event": "slow_request",
            "code": 310,
            "took_ms": 1.5,
            "result": None,
            "broker": "b1",
            "level": "info",
        },
        {"event": "processor_failed", "code": 10, "broker": "b1", "level": "error"},
        {
            "event": "Task exception was never retrieved",
            "logger": "asyncio",
            "broker": "b1",
            "level": "error",
        },
        {"address": "127.0.0.1:10911", "event": "broker_started", "broker": "b1", "level": "info"},
    ]
