"""failOnDataLoss: retention deletes messages below a stream's checkpointed offset.

A broker of its own, with 64 KiB commit-log segments and 20-entry ConsumeQueue files, takes
a stream's first run; then more messages arrive, the old segments age past
``fileReservedTime`` and ``mqadmin deleteExpiredCommitLog`` / ``cleanExpiredCQ`` remove them.
The next run must fail naming the queue and offsets (the default), or with
``failOnDataLoss=false`` continue from the queue's new minimum.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import Message
from client.admin import Admin
from tests.processes import StandaloneBroker, start_standalone
from tests.spark.conftest import SMALL_STORE, create_topic, produce_round_robin, queue_bounds

TOPIC = "SparkRetained"


@pytest.fixture
def small_broker(tmp_path: Path) -> Iterator[StandaloneBroker]:
    server = start_standalone(
        tmp_path / "broker",
        SMALL_STORE
        | {
            "mappedFileSizeCommitLog": str(64 << 10),
            "maxMessageSize": str(32 << 10),
            "mappedFileSizeConsumeQueue": str(20 * 20),
            "maxHashSlotNum": "500",
            "maxIndexNum": "2000",
        },
    )
    try:
        yield server
    finally:
        server.stop()


def _send(server: StandaloneBroker, start: int, count: int) -> None:
    body = b"x" * 1000
    produce_round_robin(
        server.namesrv,
        [Message(TOPIC, body + str(i).encode(), keys=f"n{i}") for i in range(start, start + count)],
        batch=10,
    )


def _expire_old_segments(server: StandaloneBroker) -> None:
    for path in (server.store / "commitlog").iterdir():
        os.utime(path, (0, 0))  # older than any fileReservedTime

    async def run() -> None:
        async with Admin(server.namesrv) as admin:
            await admin.delete_expired_commit_log(server.broker)
            await admin.clean_expired_consume_queue(server.broker)

    asyncio.run(run())


def _run(spark: Any, server: StandaloneBroker, out: Path, checkpoint: Path, fail: bool) -> Any:
    query = (
        spark.readStream.format("rocketmq")
        .option("namesrv", server.namesrv)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail).lower())
        .load()
        .select("queueOffset", "keys")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    except Exception:  # StreamingQueryException; the test reads query.exception()
        assert query.exception() is not None
    return query


def test_retention_below_the_checkpoint(
    spark: Any, small_broker: StandaloneBroker, tmp_path: Path
) -> None:
    server = small_broker
    create_topic(server.namesrv, server.broker, TOPIC, 1)
    _send(server, 0, 100)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _run(spark, server, out, checkpoint, fail=True)
    assert first.exception() is None
    assert spark.read.parquet(str(out)).count() == 100

    _send(server, 100, 300)
    _expire_old_segments(server)
    ((low, high),) = queue_bounds(server.namesrv, TOPIC).values()
    assert 100 < low < high == 400, (low, high)  # messages 100..low-1 are gone, unread

    saved = tmp_path / "checkpoint-copy"
    shutil.copytree(checkpoint, saved)
    failed = _run(spark, server, out, checkpoint, fail=True)
    error = str(failed.exception())
    assert "gone" in error or "deleted" in error
    assert f"{TOPIC}/" in error and "next offset 100" in error and f"begins at {low}" in error
    assert spark.read.parquet(str(out)).count() == 100  # nothing half-written

    resumed = _run(spark, server, out, saved, fail=False)
    assert resumed.exception() is None
    offsets = sorted(r["queueOffset"] for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(100)) + list(range(low, 400))
