"""Options, offsets and admission control of the Spark connector, with no Spark in sight.

RocketMQ counterpart: the option handling of rocketmq-spark's ``RocketMQSourceProvider`` /
``RocketMQConf`` and the offset JSON of its ``RocketMQSourceOffset`` (topic → brokerName →
queueId, with -2 for earliest and -1 for latest), and of Spark's Kafka source the
proportional ``maxOffsetsPerTrigger`` split (``KafkaMicroBatchStream.rateLimit``).

Everything here is plain data, so the driver, the executors and JVM-free unit tests share it.
An offset is always the *next* queue offset to read: a range is ``[start, end)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from client.errors import ClientError, InvalidArgumentError

QueueKey = tuple[str, str, int]  # (topic, brokerName, queueId)
Offsets = dict[QueueKey, int]

EARLIEST = -2
LATEST = -1
DEFAULT_PULL_BATCH = 32  # the broker's per-pull cap for messages in memory


class SparkOptionError(InvalidArgumentError):
    """An option of ``format("rocketmq")`` is missing or malformed; the message names it.

    An ``InvalidArgumentError`` of the SDK's tree (``client.errors``), and so a ValueError.
    """


class DataLossError(ClientError, RuntimeError):
    """Messages a query still had to read are gone (retention, or a re-created topic).

    A ``ClientError`` of the SDK's tree (``client.errors``), and a RuntimeError as before.
    """


# ------------------------------------------------------------------------ offsets JSON


def offsets_to_json(offsets: Offsets) -> dict[str, Any]:
    """``{topic: {broker: {queueId: nextOffset}}}`` with string keys in sorted order: Spark
    stores the JSON and hands it back parsed, and compares offsets by their text."""
    doc: dict[str, dict[str, dict[str, int]]] = {}
    for (topic, broker, queue_id), offset in sorted(offsets.items()):
        doc.setdefault(topic, {}).setdefault(broker, {})[str(queue_id)] = int(offset)
    return doc


def offsets_from_json(doc: object, *, what: str = "offsets") -> Offsets:
    """The inverse of ``offsets_to_json``; accepts the JSON text as well.

    Raises:
        SparkOptionError: not that nesting, a queue id that is not an integer, or an offset
            that is not an integer (-2 and -1 are the earliest/latest sentinels).
    """
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise SparkOptionError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise SparkOptionError(
            f"{what} must be a JSON object {{topic: {{broker: {{queueId: n}}}}}}"
        )
    out: Offsets = {}
    for topic, brokers in doc.items():
        if not isinstance(brokers, dict):
            raise SparkOptionError(f"{what}: topic {topic!r} must map broker names to queues")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise SparkOptionError(
                    f"{what}: {topic}/{broker} must map queue ids to offsets, not {queues!r}"
                )
            for queue_id, offset in queues.items():
                try:
                    qid = int(queue_id)
                except ValueError:
                    raise SparkOptionError(
                        f"{what}: queue id {queue_id!r} of {topic}/{broker} is not an integer"
                    ) from None
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise SparkOptionError(
                        f"{what}: offset {offset!r} of {topic}/{broker}/{qid} must be an "
                        "integer >= 0, or -2 (earliest) / -1 (latest)"
                    )
                out[(str(topic), str(broker), qid)] = offset
    return out


def describe_queue(key: QueueKey) -> str:
    topic, broker, queue_id = key
    return f"{topic}/{broker}/{queue_id}"


# ------------------------------------------------------------------------ options


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``, ``latest``, per-queue JSON, or a time."""

    kind: str  # "earliest" | "latest" | "json" | "timestamp"
    queues: Offsets = field(default_factory=dict)
    timestamp_ms: int = 0


@dataclass(frozen=True)
class SourceOptions:
    namesrv: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    sub_expression: str
    sql_filter: str | None
    fail_on_data_loss: bool
    include_properties: bool
    max_messages_per_partition: int | None
    max_messages_per_trigger: int | None
    consumer_group: str | None
    commit_offsets: bool
    pull_batch_size: int
    access_key: str | None
    secret_key: str | None

    @property
    def expression(self) -> tuple[str, str]:
        """(expression, type) for the broker-side filter of every pull."""
        if self.sql_filter is not None:
            return self.sql_filter, "SQL92"
        return self.sub_expression, "TAG"

    def matches(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None and not is_system_topic(
                topic
            )
        return topic in self.topics


_SYSTEM_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_", "TBW102")


def is_system_topic(topic: str) -> bool:
    """Retry, dead-letter and broker-internal topics, which a pattern never selects."""
    return topic.startswith(_SYSTEM_PREFIXES) or topic in {
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
    }


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands a case-insensitive dict whose keys are already lower-cased; a plain dict
    # from a unit test may not be, so both are folded the same way.
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(opts: dict[str, str], key: str, default: bool, name: str) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise SparkOptionError(f"option {name} must be true or false, not {raw!r}")


def _positive(opts: dict[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SparkOptionError(f"option {name} must be a positive integer, not {raw!r}") from None
    if value <= 0:
        raise SparkOptionError(f"option {name} must be a positive integer, not {raw!r}")
    return value


def _timestamp(raw: str, name: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SparkOptionError(
            f"option {name} must be epoch milliseconds (an integer), not {raw!r}"
        ) from None
    if value < 0:
        raise SparkOptionError(f"option {name} must be epoch milliseconds >= 0, not {raw!r}")
    return value


def _offset_spec(raw: str | None, name: str, default: str, *, ending: bool) -> OffsetSpec:
    text = (raw if raw is not None else default).strip()
    if text.lower() in ("earliest", "latest"):
        if ending and text.lower() == "earliest":
            raise SparkOptionError(
                f"option {name} cannot be earliest: a read would end before it began"
            )
        return OffsetSpec(text.lower())
    if not text.startswith("{"):
        raise SparkOptionError(
            f"option {name} must be earliest, latest or JSON "
            f'{{"topic": {{"broker": {{"0": offset}}}}}}, not {text!r}'
        )
    queues = offsets_from_json(text, what=f"option {name}")
    if ending and EARLIEST in queues.values():
        raise SparkOptionError(f"option {name} cannot use -2 (earliest)")
    return OffsetSpec("json", queues)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the options of a read; a problem raises SparkOptionError naming the option.

    Defaults follow Spark's Kafka source: a batch read covers earliest..latest, a new
    streaming query starts at latest; timestamps win over the offset options.
    """
    opts = _lower(options)
    namesrv = opts.get("namesrv") or opts.get("nameserver")
    if not namesrv:
        raise SparkOptionError("option namesrv (the name server address, host:port) is required")
    topics, pattern = _topics(opts)
    starting, ending = _range(opts, streaming=streaming)
    sub_expression, sql_filter = _filter(opts)
    per_trigger = _positive(opts, "maxmessagespertrigger", "maxMessagesPerTrigger")
    if per_trigger is not None and not streaming:
        raise SparkOptionError("option maxMessagesPerTrigger applies to streaming reads only")
    group = opts.get("consumergroup") or None
    commit = _bool(opts, "commitoffsets", False, "commitOffsets")
    if commit and not group:
        raise SparkOptionError("option commitOffsets=true needs the option consumerGroup")
    batch = _positive(opts, "pullbatchsize", "pullBatchSize") or DEFAULT_PULL_BATCH
    access_key = opts.get("accesskey") or None
    secret_key = opts.get("secretkey") or None
    if (access_key is None) != (secret_key is None):
        raise SparkOptionError("options accessKey and secretKey go together")
    return SourceOptions(
        namesrv=namesrv,
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        sub_expression=sub_expression,
        sql_filter=sql_filter,
        fail_on_data_loss=_bool(opts, "failondataloss", True, "failOnDataLoss"),
        include_properties=_bool(opts, "includeproperties", True, "includeProperties"),
        max_messages_per_partition=_positive(
            opts, "maxmessagesperpartition", "maxMessagesPerPartition"
        ),
        max_messages_per_trigger=per_trigger,
        consumer_group=group,
        commit_offsets=commit,
        pull_batch_size=batch,
        access_key=access_key,
        secret_key=secret_key,
    )


def _topics(opts: dict[str, str]) -> tuple[tuple[str, ...], str | None]:
    """The topics named (sorted, no duplicates), or the topic pattern: exactly one option."""
    chosen = [k for k in ("topic", "topics", "topicpattern") if opts.get(k)]
    if len(chosen) != 1:
        raise SparkOptionError(
            "exactly one of the options topic, topics or topicPattern is required"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    if "topicpattern" in chosen:
        pattern = opts["topicpattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SparkOptionError(
                f"option topicPattern is not a regular expression: {exc}"
            ) from exc
    else:
        raw = opts.get("topic") or opts.get("topics") or ""
        topics = tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
        if not topics:
            raise SparkOptionError("option topic/topics names no topic")
    return topics, pattern


def _range(opts: dict[str, str], *, streaming: bool) -> tuple[OffsetSpec, OffsetSpec]:
    """Where the read starts and ends; a stream has no end."""
    starting = _offset_spec(
        opts.get("startingoffsets"),
        "startingOffsets",
        "latest" if streaming else "earliest",
        ending=False,
    )
    if "startingtimestamp" in opts:
        starting = OffsetSpec(
            "timestamp", timestamp_ms=_timestamp(opts["startingtimestamp"], "startingTimestamp")
        )
    ending = OffsetSpec("latest")
    if "endingoffsets" in opts or "endingtimestamp" in opts:
        if streaming:
            raise SparkOptionError(
                "options endingOffsets/endingTimestamp apply to batch reads only; "
                "a stream has no end (use Trigger.AvailableNow to stop at the current end)"
            )
        ending = _offset_spec(opts.get("endingoffsets"), "endingOffsets", "latest", ending=True)
        if "endingtimestamp" in opts:
            ending = OffsetSpec(
                "timestamp", timestamp_ms=_timestamp(opts["endingtimestamp"], "endingTimestamp")
            )
    if (
        starting.kind == "timestamp"
        and ending.kind == "timestamp"
        and ending.timestamp_ms < starting.timestamp_ms
    ):
        raise SparkOptionError("option endingTimestamp is before startingTimestamp")
    return starting, ending


def _filter(opts: dict[str, str]) -> tuple[str, str | None]:
    """The tag expression and the SQL filter (stripped), which exclude each other."""
    sub_expression = (opts.get("subexpression") or "*").strip() or "*"
    sql_filter = opts.get("sqlfilter")
    if sql_filter is not None and not sql_filter.strip():
        raise SparkOptionError("option sqlFilter is empty")
    if sql_filter is not None and sub_expression != "*":
        raise SparkOptionError("options subExpression and sqlFilter exclude each other")
    return sub_expression, sql_filter.strip() if sql_filter else None


# ------------------------------------------------------------------------ resolving


Bounds = dict[QueueKey, tuple[int, int]]  # queue -> (min offset, max offset)


def resolve(
    spec: OffsetSpec,
    bounds: Bounds,
    *,
    by_time: Mapping[QueueKey, int] | None = None,
    default_latest: bool,
) -> Offsets:
    """Concrete offsets for every queue in ``bounds``.

    ``by_time`` holds the broker's search-by-time answers for a timestamp spec. A JSON spec
    may name some queues only; the others take earliest (a start) or latest (an end)."""
    out: Offsets = {}
    for key, (low, high) in sorted(bounds.items()):
        if spec.kind == "earliest":
            out[key] = low
        elif spec.kind == "latest":
            out[key] = high
        elif spec.kind == "timestamp":
            if by_time is None or key not in by_time:
                raise SparkOptionError(f"no offset by time for {describe_queue(key)}")
            out[key] = min(max(by_time[key], low), high)
        else:
            wanted = spec.queues.get(key, LATEST if default_latest else EARLIEST)
            if wanted == EARLIEST:
                out[key] = low
            elif wanted == LATEST:
                out[key] = high
            else:
                out[key] = wanted
    unknown = sorted(set(spec.queues) - set(bounds))
    if unknown:
        raise SparkOptionError(
            "offsets name queues the topic does not have: "
            + ", ".join(describe_queue(k) for k in unknown)
        )
    return out


# ------------------------------------------------------------------------ planning


@dataclass(frozen=True)
class QueueRange:
    """Messages ``[start, end)`` of one queue: an input partition of a read."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker, self.queue_id)


def plan_ranges(start: Offsets, end: Offsets, max_per_partition: int | None) -> list[QueueRange]:
    """One range per queue with something to read, split so none exceeds
    ``max_per_partition`` messages; ordered by queue then offset (deterministic)."""
    out: list[QueueRange] = []
    for key in sorted(end):
        lo, hi = start.get(key, 0), end[key]
        if hi <= lo:
            continue
        step = max_per_partition or hi - lo
        out.extend(
            QueueRange(key[0], key[1], key[2], s, min(s + step, hi)) for s in range(lo, hi, step)
        )
    return out


def admit(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """The end offsets of the next micro-batch under a cap of ``max_rows`` messages.

    Every queue with a backlog gets one message first (so a small queue is never starved
    by big ones), then the rest of the cap is split in proportion to what each still has,
    by largest remainder so the total is exactly the cap. When more queues wait than the
    cap allows, the fullest go first; the others keep their backlog and lead the next turn.
    """
    if max_rows <= 0:
        raise InvalidArgumentError(f"max_rows must be positive, not {max_rows}")
    backlog = {k: latest[k] - start.get(k, 0) for k in sorted(latest)}
    waiting = [k for k, b in backlog.items() if b > 0]
    total = sum(backlog[k] for k in waiting)
    end = {k: max(start.get(k, 0), latest[k]) for k in latest}
    for k, v in start.items():
        end.setdefault(k, v)
    if total <= max_rows:
        return end
    take = {k: 0 for k in waiting}
    if len(waiting) >= max_rows:
        for k in sorted(waiting, key=lambda k: (-backlog[k], k))[:max_rows]:
            take[k] = 1
    else:
        for k in waiting:
            take[k] = 1
        budget = max_rows - len(waiting)
        rest = {k: backlog[k] - 1 for k in waiting}
        rest_total = sum(rest.values())
        shares = {k: budget * rest[k] / rest_total for k in waiting}
        floors = {k: int(shares[k]) for k in waiting}
        left = budget - sum(floors.values())
        for k in sorted(waiting, key=lambda k: (-(shares[k] - floors[k]), k))[:left]:
            floors[k] += 1
        for k in waiting:
            take[k] += min(floors[k], rest[k])
    for k in waiting:
        end[k] = start.get(k, 0) + take[k]
    return end


def cap(latest: Offsets, target: Offsets | None) -> Offsets:
    """``latest`` held at an AvailableNow target: queues that appeared after the target
    was taken are left out, so the run ends."""
    if target is None:
        return dict(latest)
    return {k: min(v, target[k]) for k, v in latest.items() if k in target}


def merge_new_queues(start: Offsets, latest: Iterable[QueueKey]) -> Offsets:
    """``start`` plus queues it does not know yet, at offset 0: a queue that appears while
    a stream runs is read from its beginning (a minimum above 0 is then data loss)."""
    out = dict(start)
    for key in latest:
        out.setdefault(key, 0)
    return dict(sorted(out.items()))
