"""Spark connector benchmark: a batch read of a topic into Parquet, against the SDK's own pull.

RocketMQ counterpart of what is measured: reading a topic end to end with pull requests
(``DefaultMQPullConsumer`` / ``DefaultLitePullConsumer``), here once by Spark through
``format("rocketmq")`` (client/spark/) and once by the SDK's ``PullConsumer`` alone.

A standalone broker (``python -m broker standalone``, its own process on 127.0.0.1, ports 0,
128 MiB commit-log segments) holds ``count`` messages of 1 KiB in one topic of 8 queues,
produced first by the asyncio SDK. Then, in this order:

- **baseline**: the SDK's ``PullConsumer`` in this process, on uvloop, assigned all 8 queues
  from offset 0, polls until it has every message (bodies touched, nothing written);
- **Spark**: ``spark.read.format("rocketmq")…load().write.parquet(dir)`` in a ``local[2]``
  SparkSession (one task per queue; two Python workers pull in parallel), timed from the
  call to the written files, and the files' row count checked.

The figure that carries over is Spark's rate as a ratio of the baseline's: it prices the
connector (Arrow conversion, Parquet encoding, Spark's scheduling) against the bare pull
path on the same broker. One run per figure; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client import Message, Producer
from client.admin import Admin
from client.pull_consumer import PullConsumer
from remoting.bodies import TopicConfig
from tests.bench import common
from tests.bench.ha_bench import _Process
from tests.bench.report import Report, machine_info, machine_line, markdown_table, text_table

NAME = "spark"
TOPIC = "BenchSpark"
QUEUES = 8
BODY_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Settings:
    count: int
    batch: int  # messages per send_batch while producing


FULL = Settings(count=1_000_000, batch=64)
QUICK = Settings(count=4_000, batch=64)


def _standalone(work: Path) -> _Process:
    return _Process(
        [
            "standalone",
            "--store",
            str(work / "store"),
            "--namesrv-port",
            "0",
            "--listen-port",
            "0",
            "--set",
            f"mappedFileSizeCommitLog={128 << 20}",
            "--set",
            "metricsPort=0",
        ],
        work / "broker.log",
    )


async def produce(namesrv: str, broker: str, s: Settings) -> dict[str, Any]:
    async with Admin(namesrv) as admin:
        await admin.create_topic(broker, TopicConfig(TOPIC, QUEUES, QUEUES))
        for _ in range(200):
            if await _routed(admin):
                break
            await asyncio.sleep(0.05)
    start = time.perf_counter()
    async with Producer("bench-spark-producer", namesrv) as producer:
        in_flight: set[asyncio.Task[Any]] = set()
        for i in range(0, s.count, s.batch):
            n = min(s.batch, s.count - i)
            body = (b"%010d" % i).ljust(BODY_BYTES, b".")
            msgs = [Message(TOPIC, body, keys=str(i + k)) for k in range(n)]
            task = asyncio.create_task(producer.send_batch(msgs))
            in_flight.add(task)
            if len(in_flight) >= 16:
                done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    t.result()
        for t in in_flight:
            await t
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 3), "messages_per_s": round(s.count / seconds)}


async def _routed(admin: Admin) -> bool:
    try:
        route = await admin.topic_route(TOPIC)
    except Exception:  # not registered yet
        return False
    return bool(route.queue_datas)


async def pull_baseline(namesrv: str, count: int) -> dict[str, Any]:
    async with Admin(namesrv) as admin:
        queues = sorted(await admin.topic_stats(TOPIC))
    consumer = PullConsumer("bench-spark-baseline", namesrv)
    consumer.assign(queues)
    await consumer.start()
    try:
        for mq in queues:
            await consumer.seek(mq, 0)
        got = 0
        size = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < count and time.monotonic() < deadline:
            for m in await consumer.poll(timeout_s=5.0):
                got += 1
                size += len(m.body)
        seconds = time.perf_counter() - start
    finally:
        await consumer.shutdown()
    if got < count:
        raise RuntimeError(f"the pull consumer read {got} of {count} messages in 600 s")
    return _rates(got, size, seconds)


def _rates(count: int, size: int, seconds: float) -> dict[str, Any]:
    return {
        "messages": count,
        "seconds": round(seconds, 3),
        "messages_per_s": round(count / seconds),
        "mb_per_s": round(size / seconds / 1e6, 1),
    }


def spark_read(namesrv: str, work: Path, count: int) -> dict[str, Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session_start = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("aerolite-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - session_start
    try:
        out = work / "parquet"
        start = time.perf_counter()
        (
            spark.read.format("rocketmq")
            .option("namesrv", namesrv)
            .option("topic", TOPIC)
            .load()
            .write.mode("overwrite")
            .parquet(str(out))
        )
        seconds = time.perf_counter() - start
        written = spark.read.parquet(str(out)).count()
        parquet_bytes = sum(p.stat().st_size for p in out.glob("*.parquet"))
    finally:
        spark.stop()
    if written != count:
        raise RuntimeError(f"Spark wrote {written} rows of {count}")
    result = _rates(count, count * BODY_BYTES, seconds)
    result["session_start_s"] = round(session_s, 1)
    result["parquet_mb"] = round(parquet_bytes / 1e6, 1)
    return result


def run(*, quick: bool = False) -> Report:
    s = QUICK if quick else FULL
    notes: list[str] = []
    work = common.bench_work_dir("spark-")
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine_info(),
        "config": {"count": s.count, "body_bytes": BODY_BYTES, "queues": QUEUES},
        "notes": notes,
    }
    try:
        broker = _standalone(work)
        try:
            namesrv, addr = broker.fields["namesrv"], broker.fields["broker"]
            common.progress(f"spark: producing {s.count:,} messages of 1 KiB over {QUEUES} queues")
            results["produce"] = asyncio.run(produce(namesrv, addr, s))
            common.progress("spark: baseline, the SDK's PullConsumer in one process")
            results["pull"] = common.attempt(
                "pull", lambda: asyncio.run(pull_baseline(namesrv, s.count)), notes
            )
            common.progress("spark: format('rocketmq') → Parquet, local[2]")
            results["spark"] = common.attempt(
                "spark", lambda: spark_read(namesrv, work, s.count), notes
            )
        finally:
            broker.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pull, spark = results.get("pull", {}), results.get("spark", {})
    if "error" not in pull and "error" not in spark:
        results["spark_over_pull"] = round(spark["messages_per_s"] / pull["messages_per_s"], 3)
    return Report(NAME, results, _console(results), _markdown(results, quick), notes)


HEADERS = ["reader", "messages", "seconds", "msg/s", "MB/s (bodies)", "x pull"]


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, label in (
        ("pull", "SDK PullConsumer, 1 process"),
        ("spark", "Spark → Parquet, local[2]"),
    ):
        r = results.get(key, {})
        if not r or "error" in r:
            rows.append([label, "failed", "", "", "", ""])
            continue
        ratio = "1.00" if key == "pull" else f"{results.get('spark_over_pull', 0):.2f}"
        rows.append(
            [
                label,
                f"{r['messages']:,}",
                f"{r['seconds']:.1f}",
                f"{r['messages_per_s']:,}",
                f"{r['mb_per_s']:.1f}",
                ratio,
            ]
        )
    return rows


def _console(results: dict[str, Any]) -> str:
    return "\n".join(["== spark ==", text_table(HEADERS, _rows(results))])


def _markdown(results: dict[str, Any], quick: bool) -> str:
    if quick:
        return ""
    spark = results.get("spark", {})
    produce = results.get("produce", {})
    return "\n".join(
        [
            "## Spark: a batch read of a topic into Parquet",
            "",
            f"Measured {machine_line(results['machine'])}. "
            "`python -m tests.bench --only spark`; method in `tests/bench/spark_bench.py`: a "
            f"standalone broker in its own process holds {results['config']['count']:,} "
            f"messages of 1 KiB over {QUEUES} queues (produced at "
            f"{produce.get('messages_per_s', 0):,} msg/s in batches of 64); the baseline reads "
            "them with the SDK's PullConsumer in one process, then Spark reads them through "
            '`format("rocketmq")` and writes Parquet.',
            "",
            markdown_table(HEADERS, _rows(results)),
            "",
            f"Spark's session took {spark.get('session_start_s', 0)} s to start (not counted); "
            f"the Parquet files hold {spark.get('parquet_mb', 0)} MB. The ratio is the figure "
            "to carry to another machine: both readers pull 32 messages per request from the "
            "same broker, so what it prices is the connector's own work (Arrow batches, "
            "Parquet encoding, Spark's tasks) against one process that only pulls, with two "
            "Spark workers in parallel on two cores that the broker shares.",
        ]
    )
