"""A standalone broker (``python -m broker standalone``) as a process of its own, for tests
whose clients live in other processes or threads (Spark's workers, the blocking facade, the
README's examples). Loopback, ports chosen by the kernel, the store under the test's dir.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StandaloneBroker:
    proc: subprocess.Popen[str]
    namesrv: str
    broker: str
    store: Path
    metrics: str | None = None  # host:port of the Prometheus endpoint, if served

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_standalone(root: Path, settings: dict[str, str] | None = None) -> StandaloneBroker:
    """Start one and wait for its ready line; ``settings`` are broker config keys."""
    args = [
        sys.executable,
        "-m",
        "broker",
        "standalone",
        "--store",
        str(root / "store"),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        "--set",
        "metricsPort=0",
    ]
    for key, value in (settings or {}).items():
        args += ["--set", f"{key}={value}"]
    root.mkdir(parents=True, exist_ok=True)
    with (root / "broker.log").open("w") as log:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    fields = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
    if "namesrv" not in fields:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
        reason = (root / "broker.log").read_text()[-2000:]
        raise RuntimeError(f"standalone broker did not start: {line!r} {reason}")
    return StandaloneBroker(
        proc, fields["namesrv"], fields["broker"], root / "store", fields.get("metrics")
    )
