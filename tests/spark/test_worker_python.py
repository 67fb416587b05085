"""Spark's Python workers running an interpreter that cannot import the connector (the
system python3 instead of the venv's) get an error that says so, not DATA_SOURCE_NOT_FOUND.

The driver is a real local SparkSession in a subprocess of its own, run from the repository
root (so its workers find ``pyspark_aerolite`` on their path) with ``PYSPARK_PYTHON`` set
to the system interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"

DRIVER = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("worker-python")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
try:
    spark.read.format("rocketmq").option("namesrv", "127.0.0.1:9").option("topic", "t").load()
    print("LOADED")
except Exception as exc:
    print("ERROR", exc)
finally:
    spark.stop()
"""


def _lacks_the_connector(python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", "import msgpack, pyarrow, rich"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return probe.returncode != 0


def test_a_worker_python_without_the_connector_is_named_with_what_to_set(
    tmp_path: Path,
) -> None:
    if not os.path.exists(SYSTEM_PYTHON) or not _lacks_the_connector(SYSTEM_PYTHON):
        pytest.skip(f"needs a {SYSTEM_PYTHON} without the connector's dependencies")
    env = {
        **os.environ,
        "PYSPARK_PYTHON": SYSTEM_PYTHON,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp_path),
    }
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert "ERROR" in out, (out, done.stderr[-3000:])
    assert "DATA_SOURCE_NOT_FOUND" not in out
    assert f"{SYSTEM_PYTHON} has no module named" in out
    assert "export PYSPARK_PYTHON=$(which python)" in out
