"""Fixtures for the Spark connector: one SparkSession and one standalone broker per run.

The SparkSession is local[2] with the UI off, bound to 127.0.0.1, and its Python workers run
this interpreter (``PYSPARK_PYTHON``), so they import the connector from the checkout. The
broker is a real ``aerolite standalone`` process on loopback ports chosen by the kernel, with
its store under the test's temp dir and small segments.

The tests skip, saying why, only when no Java runtime is on PATH (Spark needs one).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from client import Message, Producer
from client.admin import Admin
from remoting.bodies import TopicConfig
from tests.processes import StandaloneBroker, start_standalone

if shutil.which("java") is None:
    pytest.skip("Spark needs a Java runtime and none is on PATH", allow_module_level=True)
pytest.importorskip(
    "pyspark", reason="the spark extra is not installed (pip install -e '.[spark]')"
)

SMALL_STORE = {
    "mappedFileSizeCommitLog": str(8 << 20),
    "mappedFileSizeConsumeQueue": str(20 * 20_000),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
    "enablePropertyFilter": "true",  # sqlFilter reads
}


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneBroker]:
    server = start_standalone(tmp_path_factory.mktemp("spark-broker"), SMALL_STORE)
    try:
        yield server
    finally:
        # The listener's client in this process would go on refreshing routes of a broker
        # that is gone.
        from client.spark.session import BrokerSession

        BrokerSession.close_all()
        server.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("aerolite-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# ---------------------------------------------------------------------------- helpers


def create_topic(namesrv: str, broker_addr: str, topic: str, queues: int) -> None:
    async def run() -> None:
        async with Admin(namesrv) as admin:
            await admin.create_topic(broker_addr, TopicConfig(topic, queues, queues))
            for _ in range(100):
                try:
                    route = await admin.topic_route(topic)
                except Exception:  # not registered with the name server yet
                    route = None
                if route is not None and route.queue_datas:
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"topic {topic} never appeared in the name server")

    asyncio.run(run())


def produce_round_robin(namesrv: str, messages: Sequence[Message], batch: int) -> None:
    """Send ``messages`` in batches of ``batch``; the producer's round robin spreads the
    batches over the queues, so n batches per queue land evenly."""

    async def run() -> None:
        async with Producer("spark-test-producer", namesrv) as producer:
            for i in range(0, len(messages), batch):
                await producer.send_batch(messages[i : i + batch])

    asyncio.run(run())


def queue_bounds(namesrv: str, topic: str) -> dict[tuple[str, int], tuple[int, int]]:
    async def run() -> dict[tuple[str, int], tuple[int, int]]:
        async with Admin(namesrv) as admin:
            stats = await admin.topic_stats(topic)
        return {
            (mq.broker_name, mq.queue_id): (s.min_offset, s.max_offset) for mq, s in stats.items()
        }

    return asyncio.run(run())


def committed(namesrv: str, group: str, topic: str) -> dict[tuple[str, int], int]:
    async def run() -> dict[tuple[str, int], int]:
        async with Admin(namesrv) as admin:
            stats = await admin.topic_stats(topic)
            return {
                (mq.broker_name, mq.queue_id): await admin.consumer_offset(mq, group)
                for mq in stats
            }

    return asyncio.run(run())
