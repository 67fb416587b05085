"""Commit a streaming query's progress to a consumer group, so lag tools see it.

RocketMQ counterpart: a consumer's UPDATE_CONSUMER_OFFSET (what ``mqadmin consumerProgress``
and the dashboard read); for Kafka the same job is done by the community
spark-sql-kafka-offset-committer, a ``StreamingQueryListener``.

Spark passes a micro-batch's end offsets to the source's ``commit()`` only while it plans the
*next* batch, so the last batch of a run (and every batch of an idle stream) would never be
committed from there. This listener commits each batch's end offsets from the progress event
instead. The commits are advisory: a query always resumes from its checkpoint.

Usage::

    from client.spark.listener import OffsetCommitListener
    spark.streams.addListener(OffsetCommitListener("127.0.0.1:9876", "orders-etl"))
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from client.spark.offsets import SparkOptionError, offsets_from_json
from client.spark.session import BrokerSession

log = logging.getLogger(__name__)


class OffsetCommitListener(StreamingQueryListener):
    """Commits the end offsets of every ``rocketmq`` source in a progress event to ``group``.

    ``query_name`` limits it to one query (by ``queryName``); otherwise every query whose
    source offsets have the ``{topic: {broker: {queueId: n}}}`` shape is committed, for
    topics on this name server."""

    def __init__(
        self,
        namesrv: str,
        group: str,
        *,
        query_name: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        super().__init__()
        self.namesrv = namesrv
        self.group = group
        self.query_name = query_name
        self.access_key = access_key
        self.secret_key = secret_key
        self.committed_batches = 0

    def onQueryStarted(self, event: Any) -> None:
        pass  # nothing is processed yet

    def onQueryIdle(self, event: Any) -> None:
        pass  # offsets unchanged since the last progress event

    def onQueryTerminated(self, event: Any) -> None:
        pass  # the last batch was committed by its progress event

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if self.query_name is not None and progress.name != self.query_name:
            return
        for source in progress.sources:
            if "rocketmq" not in (source.description or "").lower() and not _looks_ours(
                source.endOffset
            ):
                continue
            try:
                offsets = offsets_from_json(source.endOffset, what="a progress end offset")
            except SparkOptionError:
                continue  # another source's offsets
            if not offsets:
                continue
            try:
                session = BrokerSession.get(self.namesrv, self.access_key, self.secret_key)
                session.commit_offsets(self.group, offsets)
            except Exception as exc:  # a listener must never kill Spark's listener bus
                log.warning(
                    "spark_offset_commit_failed group=%s batch_id=%s error=%s",
                    self.group,
                    progress.batchId,
                    exc,
                )
                continue
            self.committed_batches += 1
            log.info(
                "spark_offsets_committed group=%s batch_id=%s queues=%s",
                self.group,
                progress.batchId,
                len(offsets),
            )


def _looks_ours(end_offset: str | None) -> bool:
    """Our offsets nest three deep with integer leaves; Kafka's or a file source's do not."""
    if not end_offset:
        return False
    try:
        doc = json.loads(end_offset)
    except json.JSONDecodeError:
        return False
    return (
        isinstance(doc, dict)
        and bool(doc)
        and all(
            isinstance(brokers, dict)
            and all(
                isinstance(queues, dict) and all(isinstance(v, int) for v in queues.values())
                for queues in brokers.values()
            )
            for brokers in doc.values()
        )
    )
