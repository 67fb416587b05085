"""The pipelines in examples/spark run against a real broker and give the right numbers."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.processes import StandaloneBroker
from tests.spark.conftest import create_topic, queue_bounds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "spark"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_orders_per_minute_streams_final_windows_to_parquet(
    spark: Any, broker: StandaloneBroker, tmp_path: Path
) -> None:
    producer, job = _load("produce_orders"), _load("orders_per_minute")
    topic = "SparkExampleOrders"
    create_topic(broker.namesrv, broker.broker, topic, 4)
    orders = asyncio.run(producer.produce(broker.namesrv, topic, 3000, 6, 11))
    query = job.start(
        spark,
        broker.namesrv,
        topic,
        str(tmp_path / "out"),
        str(tmp_path / "checkpoint"),
        available_now=True,
        lateness="1 minute",
        max_per_trigger=1000,
    )
    assert query.awaitTermination(240)
    assert query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    by_minute = Counter(int(o["ts"]) // 60_000 for o in orders)
    amounts: dict[int, float] = {}
    for o in orders:
        minute = int(o["ts"]) // 60_000
        amounts[minute] = amounts.get(minute, 0.0) + float(o["amount"])
    # Append mode writes a window once the watermark (the newest order's time less the
    # allowed lateness) has passed its end.
    watermark_ms = max(int(o["ts"]) for o in orders) - 60_000
    final = {m for m in by_minute if (m + 1) * 60_000 <= watermark_ms}
    assert len(final) >= 4
    assert {int(r["minuteStart"].timestamp()) // 60 for r in rows} == final
    for r in rows:
        minute = int(r["minuteStart"].timestamp()) // 60
        assert r["orders"] == by_minute[minute]
        assert abs(r["amount"] - amounts[minute]) < 0.01


def test_replay_copies_exactly_the_time_range(spark: Any, broker: StandaloneBroker) -> None:
    producer, job = _load("produce_orders"), _load("replay_time_range")
    topic, target = "SparkExampleSource", "SparkExampleReplay"
    create_topic(broker.namesrv, broker.broker, topic, 2)
    create_topic(broker.namesrv, broker.broker, target, 2)
    asyncio.run(producer.produce(broker.namesrv, topic, 500, 1, 1))
    time.sleep(0.05)
    start_ms = int(time.time() * 1000)
    time.sleep(0.05)
    middle = asyncio.run(producer.produce(broker.namesrv, topic, 700, 1, 2))
    time.sleep(0.05)
    end_ms = int(time.time() * 1000)
    time.sleep(0.05)
    asyncio.run(producer.produce(broker.namesrv, topic, 300, 1, 3))

    copied = job.replay(
        spark, broker.namesrv, topic, target=target, start_ms=start_ms, end_ms=end_ms
    )
    assert copied == 700
    assert sum(hi for _, hi in queue_bounds(broker.namesrv, target).values()) == 700
    back = (
        spark.read.format("rocketmq")
        .option("namesrv", broker.namesrv)
        .option("topic", target)
        .load()
        .collect()
    )
    import json

    assert sorted(json.loads(bytes(r["body"]))["orderId"] for r in back) == sorted(
        int(o["orderId"]) for o in middle
    )
    assert {r["tags"] for r in back} == {str(o["customer"]) for o in middle}
    assert len({r["properties"]["SPARK_WRITE_ID"] for r in back}) == 700
    assert job.epoch_ms("2026-11-22T10:00:00Z") == 1_795_341_600_000


def _readme_command(script: str) -> list[str]:
    """The command line examples/spark/README.md gives for ``script`` (continuation lines
    joined, the comment lines after it left out)."""
    text = (EXAMPLES / "README.md").read_text()
    found = re.search(rf"^\.venv/bin/python examples/spark/{script}(?:.*\\\n)*.*$", text, re.M)
    assert found is not None, f"no {script} command in examples/spark/README.md"
    return shlex.split(found.group(0).replace("\\\n", " "))


def test_replay_as_the_readme_runs_it_copies_what_was_just_produced(
    broker: StandaloneBroker,
) -> None:
    producer = _load("produce_orders")
    topic, target = "SparkReplayReadme", "SparkReplayReadmeCopy"
    create_topic(broker.namesrv, broker.broker, topic, 2)
    create_topic(broker.namesrv, broker.broker, target, 2)
    asyncio.run(producer.produce(broker.namesrv, topic, 400, 1, 4))
    argv = _readme_command("replay_time_range.py")
    assert "--from" in argv and "--to" in argv  # as written: times relative to now
    named = {"orders": topic, "orders-replay": target}
    argv = [sys.executable, *(named.get(a, a) for a in argv[1:]), "--namesrv", broker.namesrv]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        argv,
        cwd=EXAMPLES.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"copied 400 messages from {topic} to {target}" in done.stdout
    assert sum(hi for _, hi in queue_bounds(broker.namesrv, target).values()) == 400
