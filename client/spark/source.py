"""``format("rocketmq")``: RocketMQ topics as a PySpark data source, batch and streaming.

RocketMQ counterpart: rocketmq-spark's ``RocketMQSourceProvider`` (``RocketMQSource``,
``RocketMQRelation``, ``RocketMQSink``), rebuilt on PySpark's Python Data Source API
(``pyspark.sql.datasource``, PySpark >= 4.2 for streaming admission control).

Reads: one input partition per message queue (split by ``maxMessagesPerPartition``); each
partition pulls ``[start, end)`` of its queue and yields Arrow record batches. A stream's
offset is ``{topic: {broker: {queueId: nextOffset}}}``; Spark writes it to its checkpoint
before a micro-batch runs and replays the same range after a failure, so a range must read
the same messages every time: it does, because a queue range is immutable once written.

Writes: a producer per task; ``write()`` returns only when the broker has answered every
send, and each message carries ``SPARK_WRITE_ID = queryId:batchId:partition:row``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from client.spark.arrow import (
    SCHEMA_DDL,
    batch_to_messages,
    check_write_columns,
    to_record_batch,
)
from client.spark.offsets import (
    Bounds,
    DataLossError,
    Offsets,
    QueueRange,
    SourceOptions,
    SparkOptionError,
    admit,
    cap,
    describe_queue,
    merge_new_queues,
    offsets_from_json,
    offsets_to_json,
    parse_source_options,
    plan_ranges,
    resolve,
)
from client.spark.session import BrokerSession, quiet_worker_logs

log = logging.getLogger(__name__)

ROWS_PER_ARROW_BATCH = 4096
DEFAULT_WRITER_GROUP = "SPARK_ROCKETMQ_WRITER"


class QueuePartition(InputPartition):
    """What one Spark task reads: a range of one queue (pickled to an executor)."""

    def __init__(self, queue_range: QueueRange) -> None:
        super().__init__(queue_range)
        self.range = queue_range

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueuePartition) and other.range == self.range

    def __hash__(self) -> int:
        return hash(self.range)


def _read(opts: SourceOptions, partition: QueuePartition) -> Iterator[pa.RecordBatch]:
    session = BrokerSession.for_options(opts)
    pending: list[Any] = []
    for messages in session.read_range(partition.range, opts):
        pending.extend(messages)
        if len(pending) >= ROWS_PER_ARROW_BATCH:
            yield to_record_batch(pending, include_properties=opts.include_properties)
            pending = []
    if pending:
        yield to_record_batch(pending, include_properties=opts.include_properties)


def _check_loss(start: Offsets, bounds: Bounds, opts: SourceOptions) -> Offsets:
    """``start`` with every queue at or above its current minimum offset.

    A start below the minimum means retention deleted messages the query has not read:
    DataLossError with ``failOnDataLoss`` (the default), else a warning and the minimum."""
    out = dict(start)
    lost = []
    for key, offset in start.items():
        low = bounds.get(key, (offset, offset))[0]
        if offset < low:
            lost.append((key, offset, low))
            out[key] = low
    if lost and opts.fail_on_data_loss:
        detail = "; ".join(
            f"queue {describe_queue(k)}: next offset {o}, but the queue now begins at {lo} "
            f"({lo - o} messages gone)"
            for k, o, lo in lost
        )
        raise DataLossError(
            f"messages the query has not read were deleted ({detail}). Set "
            "failOnDataLoss=false to skip them and continue from each queue's minimum offset"
        )
    for key, offset, low in lost:
        log.warning(
            "spark_data_loss queue=%s start=%s end=%s skipped=%s why=%s",
            describe_queue(key),
            offset,
            low,
            low - offset,
            "retention deleted them",
        )
    return out


# ---------------------------------------------------------------------------- batch read


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``: from startingOffsets to endingOffsets, once."""

    def __init__(self, options: SourceOptions) -> None:
        self.opts = options

    def _offsets(self) -> tuple[Offsets, Offsets]:
        session = BrokerSession.for_options(self.opts)
        bounds = session.bounds(self.opts)
        if not bounds:
            raise SparkOptionError(
                f"no topic to read: {self.opts.topic_pattern or ', '.join(self.opts.topics)} "
                "matched no queue"
            )
        ends: list[Offsets] = []
        for spec, latest in ((self.opts.starting, False), (self.opts.ending, True)):
            by_time = (
                session.offsets_by_time(list(bounds), spec.timestamp_ms)
                if spec.kind == "timestamp"
                else None
            )
            ends.append(resolve(spec, bounds, by_time=by_time, default_latest=latest))
        start, end = ends
        return _check_loss(start, bounds, self.opts), end

    def partitions(self) -> Sequence[InputPartition]:
        start, end = self._offsets()
        ranges = plan_ranges(start, end, self.opts.max_messages_per_partition)
        if not ranges:  # nothing to read still makes a (empty) DataFrame
            key = sorted(end)[0]
            ranges = [QueueRange(key[0], key[1], key[2], end[key], end[key])]
        return [QueuePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueuePartition)
        yield from _read(self.opts, partition)


# ---------------------------------------------------------------------------- stream read


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``.

    Lives in one long-running Python process on the driver per query (offsets, planning,
    commits); ``read()`` runs on executors in a separately unpickled copy."""

    def __init__(self, options: SourceOptions) -> None:
        self.opts = options
        self._target: Offsets | None = None  # the AvailableNow end
        self._latest: Offsets | None = None  # the brokers' ends, for progress reports

    def _bounds(self) -> Bounds:
        return BrokerSession.for_options(self.opts).bounds(self.opts)

    def initialOffset(self) -> dict[str, Any]:
        bounds = self._bounds()
        by_time = None
        if self.opts.starting.kind == "timestamp":
            by_time = BrokerSession.for_options(self.opts).offsets_by_time(
                list(bounds), self.opts.starting.timestamp_ms
            )
        return offsets_to_json(
            resolve(self.opts.starting, bounds, by_time=by_time, default_latest=False)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_messages_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: high for k, (_, high) in self._bounds().items()}
        log.info("spark_available_now_target queues=%s", len(self._target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start, what="the checkpointed offset")
        latest = {k: high for k, (_, high) in self._bounds().items()}
        self._latest = latest
        latest = cap(latest, self._target)
        begin = merge_new_queues(begin, latest)
        backlog = sum(max(0, v - begin.get(k, 0)) for k, v in latest.items())
        if isinstance(limit, ReadMaxRows):
            end = admit(begin, latest, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and backlog < limit.min_rows:
            end = dict(begin)
        else:
            end = admit(begin, latest, max(backlog, 1))
        if backlog == 0:
            return start  # the same offset: Spark runs no batch
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start, what="the batch start")
        finish = offsets_from_json(end, what="the batch end")
        begin = merge_new_queues(begin, finish)
        ranges = plan_ranges(begin, finish, self.opts.max_messages_per_partition)
        if not ranges:
            return []
        bounds = self._bounds()
        checked = _check_loss({r.key: begin[r.key] for r in ranges}, bounds, self.opts)
        begin.update(checked)
        ranges = plan_ranges(begin, finish, self.opts.max_messages_per_partition)
        return [QueuePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueuePartition)
        yield from _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Advisory only: lag tools read the group's offsets; the checkpoint decides where
        # a query resumes. Spark calls this while planning the *next* batch, so the last
        # batch is committed by OffsetCommitListener (client.spark.listener).
        if self.opts.commit_offsets and self.opts.consumer_group:
            offsets = offsets_from_json(end, what="the committed offset")
            BrokerSession.for_options(self.opts).commit_offsets(self.opts.consumer_group, offsets)

    def stop(self) -> None:
        log.info("spark_stream_reader_stopped")


# ---------------------------------------------------------------------------- writes


@dataclass(frozen=True)
class WriteReport(WriterCommitMessage):
    """What one write task sent: its partition and the number of messages."""

    partition: int
    messages: int


@dataclass(frozen=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    producer_group: str
    access_key: str | None
    secret_key: str | None

    @classmethod
    def parse(cls, options: Any, schema: StructType) -> WriteOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        namesrv = opts.get("namesrv") or opts.get("nameserver")
        if not namesrv:
            raise SparkOptionError(
                "option namesrv (the name server address, host:port) is required"
            )
        topic = opts.get("topic") or None
        types = {f.name: f.dataType.simpleString() for f in schema.fields}
        check_write_columns([f.name for f in schema.fields], types, topic)
        access_key = opts.get("accesskey") or None
        secret_key = opts.get("secretkey") or None
        if (access_key is None) != (secret_key is None):
            raise SparkOptionError("options accessKey and secretKey go together")
        return cls(
            namesrv,
            topic,
            opts.get("producergroup") or DEFAULT_WRITER_GROUP,
            access_key,
            secret_key,
        )


def _write(
    opts: WriteOptions, batches: Iterator[pa.RecordBatch], query_id: str, batch_id: str
) -> WriteReport:
    from pyspark import TaskContext  # noqa: PLC0415 - only inside a Spark task

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    prefix = f"{query_id}:{batch_id}:{partition}"
    quiet_worker_logs()
    session = BrokerSession.get(opts.namesrv, opts.access_key, opts.secret_key)
    row = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        messages = batch_to_messages(
            batch, topic_option=opts.topic, write_id_prefix=prefix, first_row=row
        )
        session.send_all(opts.producer_group, messages)
        row += batch.num_rows
    return WriteReport(partition, row)


class RocketMQBatchWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")``; at least once, like every message sink."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex  # the "query id" of a batch write

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return _write(self.opts, iterator, self.write_id, "0")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, WriteReport))
        log.info("spark_write_committed write_id=%s messages=%s", self.write_id, sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, WriteReport))
        log.warning("spark_write_aborted write_id=%s messages_sent=%s", self.write_id, sent)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("rocketmq")``: every micro-batch is sent before it commits."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        from pyspark import TaskContext  # noqa: PLC0415 - only inside a Spark task

        context = TaskContext.get()
        query_id = (context.getLocalProperty("sql.streaming.queryId") if context else None) or "-"
        batch_id = (context.getLocalProperty("streaming.sql.batchId") if context else None) or "-"
        return _write(self.opts, iterator, query_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, WriteReport))
        log.info("spark_stream_write_committed batch_id=%s messages=%s", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, WriteReport))
        log.warning("spark_stream_write_aborted batch_id=%s messages_sent=%s", batchId, sent)


# ---------------------------------------------------------------------------- the source


class RocketMQDataSource(DataSource):
    """The ``rocketmq`` format. Options are documented in README.md ("Spark")."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        return RocketMQBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        return RocketMQStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        return RocketMQBatchWriter(WriteOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        return RocketMQStreamWriter(WriteOptions.parse(self.options, schema))
