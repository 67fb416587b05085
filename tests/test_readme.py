"""The README's examples run as written, against a real name server and broker: the SDK
quick-start and the official client's (PyPI rocketmq, the C++ client inside)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.processes import start_standalone

README = Path(__file__).parent.parent / "README.md"


def sdk_examples() -> list[str]:
    text = README.read_text()
    section = text.split("## The Python SDK", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2, "the SDK section lost its python blocks"
    return blocks


def sdk_example() -> str:
    return sdk_examples()[0]


def run_example(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    """Run a README example against ``python -m broker standalone`` on free ports."""
    broker = start_standalone(tmp_path)
    try:
        namesrv = broker.namesrv
        script = tmp_path / "example.py"
        # The README uses make run's fixed port; the test's broker has a free one.
        script.write_text(source.replace("127.0.0.1:9876", namesrv))
        run = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=Path(__file__).parent.parent,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        return run
    finally:
        broker.stop()


def test_readme_sdk_quick_start_runs(tmp_path: Path) -> None:
    run = run_example(tmp_path, sdk_example())
    assert "SendStatus.SEND_OK" in run.stdout
    assert "got orders b'TagA' b'hello'" in run.stdout or "got orders TagA b'hello'" in run.stdout


def test_readme_reliable_delivery_example_runs(tmp_path: Path) -> None:
    run = run_example(tmp_path, sdk_examples()[1])
    assert "local transaction for order 42" in run.stdout
    assert "transaction COMMIT" in run.stdout
    assert "reminder b'after a while' attempt 1" in run.stdout
    assert "reminder b'at a time' attempt 1" in run.stdout


def test_readme_official_client_example_runs(tmp_path: Path) -> None:
    """Produce and then consume with the official client, ending by itself."""
    text = README.read_text()
    section = text.split("## Point an existing RocketMQ client at it", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    run = run_example(tmp_path, block)
    assert "SendStatus.OK" in run.stdout
    assert "b'TagA' b'hello'" in run.stdout or "TagA b'hello'" in run.stdout


RMQ5_PYTHON = Path(__file__).parent.parent / ".venv-rmq5" / "bin" / "python"


def test_readme_rocketmq5_client_example_runs(tmp_path: Path) -> None:
    """The RocketMQ 5 section as written: mqadmin creates the topic, then the official 5.x
    Python client (make install puts it in .venv-rmq5) sends and receives over gRPC."""
    text = README.read_text()
    section = text.split("## RocketMQ 5 clients", 1)[1].split("\n## ", 1)[0]
    (commands,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    mqadmin = next(line for line in commands.splitlines() if "mqadmin" in line)
    broker = start_standalone(tmp_path)
    try:
        assert broker.grpc is not None
        argv = mqadmin.replace("127.0.0.1:9876", broker.namesrv).split()
        argv[0] = str(Path(sys.executable).parent / "mqadmin")
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
        script = tmp_path / "example5.py"
        script.write_text(block.replace("127.0.0.1:8081", broker.grpc))
        run = subprocess.run(
            [str(RMQ5_PYTHON), str(script)],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},  # its logs go under ~/logs
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert "TagA b'hello'" in run.stdout, run.stdout
    finally:
        broker.stop()


def test_readme_message_trace_example_runs(tmp_path: Path) -> None:
    """The trace example, then the mqadmin command it prints, as a user would type it."""
    (source,) = [block for block in sdk_examples() if "trace=True" in block]
    broker = start_standalone(tmp_path)
    try:
        script = tmp_path / "trace_example.py"
        script.write_text(source.replace("127.0.0.1:9876", broker.namesrv))
        run = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        command = run.stdout.strip().splitlines()[-1].split()
        assert command[0] == "mqadmin", run.stdout
        mqadmin = str(Path(sys.executable).with_name("mqadmin"))
        shown = ""
        for _ in range(50):  # the broker indexes the trace messages a moment after storing
            shown = subprocess.run(
                [mqadmin, *command[1:]], capture_output=True, text=True, timeout=60, check=True
            ).stdout
            if "Sub        traced-consumer" in shown:
                break
            time.sleep(0.1)
        assert "Pub        traced-producer      127.0.0.1" in shown, shown
        assert "Sub        traced-consumer      127.0.0.1" in shown, shown
        assert shown.count("success") == 2, shown
    finally:
        broker.stop()
