"""The SDK is a library: it logs through ``logging`` under ``client.*`` / ``remoting.*`` names,
prints nothing to stdout, is quiet until the application configures logging, and the
application's logging settings decide what shows.

Each case runs a small script in a process of its own (a fresh interpreter, so no logging or
structlog setup of the test suite leaks in) against a standalone broker process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import start_standalone

SCRIPT_TIMEOUT_S = 120.0

# Producer and PushConsumer of the asyncio SDK; argv: mode, name server, consumer group.
ASYNC_SCRIPT = """
import asyncio
import logging
import sys

from client import ConsumeResult, Message, MessageView, Producer, PushConsumer

mode, namesrv, group = sys.argv[1:4]
if mode in ("debug", "silenced"):
    logging.basicConfig(level=logging.DEBUG)
if mode == "silenced":
    logging.getLogger("client").setLevel(logging.ERROR)
    logging.getLogger("remoting").setLevel(logging.ERROR)


async def main() -> None:
    async with Producer("log-pg", namesrv=namesrv) as producer:
        result = await producer.send(Message("LogTopic", b"hello"))
    print("sent", result.status.name, flush=True)
    got: list[bytes] = []
    done = asyncio.Event()
    consumer = PushConsumer(group, namesrv=namesrv)

    @consumer.subscribe("LogTopic")
    async def handle(msg: MessageView) -> ConsumeResult:
        got.append(msg.body)
        done.set()
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await consumer.shutdown()
    print("received", got[0].decode(), flush=True)


asyncio.run(main())
"""

# The same through the blocking facade, with no logging set up.
BLOCKING_SCRIPT = """
import sys
import threading

from client import Message, MessageView
from client.blocking import Producer, PushConsumer

namesrv, group = sys.argv[1:3]
with Producer("log-blocking-pg", namesrv=namesrv) as producer:
    result = producer.send(Message("LogTopic", b"hello"))
print("sent", result.status.name, flush=True)
got: list[bytes] = []
done = threading.Event()
consumer = PushConsumer(group, namesrv=namesrv)


@consumer.subscribe("LogTopic")
def handle(msg: MessageView) -> None:
    got.append(msg.body)
    done.set()


with consumer:
    assert done.wait(60), "nothing received"
print("received", got[0].decode(), flush=True)
"""

OWN_LINES = "sent SEND_OK\nreceived hello\n"
# A level word as a whole word: "[debug ]" (structlog), "DEBUG:" (logging), "info" …
LEVEL_WORD = re.compile(r"(?i)\b(debug|info)\b")


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = start_standalone(tmp_path_factory.mktemp("sdk-logging"))
    try:
        yield broker.namesrv
    finally:
        broker.stop()


def run_script(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    root = Path(__file__).resolve().parents[2]
    env = {
        k: v
        for k, v in os.environ.items()
        # asyncio's debug mode logs slow callbacks; the app's own switch, not the SDK's
        if k not in ("NAMESRV_ADDR", "PYTHONASYNCIODEBUG", "PYTHONWARNINGS")
    }
    env["PYTHONPATH"] = str(root)  # this tree's SDK, whatever is installed
    proc = subprocess.run(  # our own interpreter on our own script
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        env=env,
        cwd=root,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_the_sdk_prints_nothing_by_default(namesrv: str, tmp_path: Path) -> None:
    proc = run_script(tmp_path, ASYNC_SCRIPT, "quiet", namesrv, "log-cg-quiet")
    assert proc.stdout == OWN_LINES
    assert not LEVEL_WORD.search(proc.stderr), proc.stderr


def test_the_application_turns_the_sdk_debug_lines_on(namesrv: str, tmp_path: Path) -> None:
    proc = run_script(tmp_path, ASYNC_SCRIPT, "debug", namesrv, "log-cg-debug")
    assert proc.stdout == OWN_LINES
    lines = proc.stderr.splitlines()
    # logging's default format: LEVEL:logger.name:message, the event name first
    assert any(
        re.match(r"DEBUG:remoting\.client:connected addr=127\.0\.0\.1:\d+$", x) for x in lines
    )
    assert any(x.startswith("INFO:client.producer:producer_started group=log-pg ") for x in lines)
    assert any(x.startswith("INFO:client.push_consumer:queue_assigned ") for x in lines)
    assert all(
        x.startswith(("DEBUG:", "INFO:", "WARNING:", "ERROR:", " ", "Traceback")) for x in lines
    ), proc.stderr


def test_the_application_silences_the_sdk(namesrv: str, tmp_path: Path) -> None:
    proc = run_script(tmp_path, ASYNC_SCRIPT, "silenced", namesrv, "log-cg-silenced")
    assert proc.stdout == OWN_LINES
    sdk_lines = [x for x in proc.stderr.splitlines() if re.match(r"\w+:(client|remoting)[.:]", x)]
    assert sdk_lines == []


def test_the_blocking_facade_prints_nothing(namesrv: str, tmp_path: Path) -> None:
    proc = run_script(tmp_path, BLOCKING_SCRIPT, namesrv, "log-cg-blocking")
    assert proc.stdout == OWN_LINES
    assert not LEVEL_WORD.search(proc.stderr), proc.stderr
