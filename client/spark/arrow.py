"""Messages to Arrow record batches and Arrow batches to messages, for the Spark connector.

RocketMQ counterpart: rocketmq-spark's ``RocketMQRecordToRowConverter`` (read) and
``RocketMQWriteTask`` (write); our schema carries tags, keys, the message ids and the
properties as a map instead of JSON text.

Spark checks that a batch's Arrow schema *equals* the declared one, so the types here are
exactly what Spark derives from ``SCHEMA_DDL``: INT → int32, BIGINT → int64, TIMESTAMP →
timestamp[us, UTC], MAP<STRING,STRING> → map<string, string>.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from client.errors import InvalidArgumentError
from client.message import Message, MessageView
from codec import RESERVED_PROPERTIES

SCHEMA_DDL = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, msgId STRING, "
    "offsetMsgId STRING, tags STRING, keys STRING, body BINARY, "
    "properties MAP<STRING, STRING>, bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, "
    "reconsumeTimes INT, flag INT"
)

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("offsetMsgId", pa.string()),
        ("tags", pa.string()),
        ("keys", pa.string()),
        ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("bornTimestamp", _TS),
        ("storeTimestamp", _TS),
        ("reconsumeTimes", pa.int32()),
        ("flag", pa.int32()),
    ]
)

# Properties that have a column of their own, or that the broker adds to every pull.
_COLUMN_PROPERTIES = RESERVED_PROPERTIES


def to_record_batch(messages: Sequence[MessageView], *, include_properties: bool) -> pa.RecordBatch:
    """One record batch of ``messages`` with exactly ``ARROW_SCHEMA``."""
    if include_properties:
        props: list[list[tuple[str, str]] | None] = [
            [(k, v) for k, v in m.properties.items() if k not in _COLUMN_PROPERTIES]
            for m in messages
        ]
    else:
        props = [None] * len(messages)
    columns = [
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([m.broker_name for m in messages], pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.msg_id for m in messages], pa.string()),
        pa.array([m.offset_msg_id for m in messages], pa.string()),
        pa.array([m.tags for m in messages], pa.string()),
        pa.array([" ".join(m.keys) if m.keys else None for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array(props, pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp * 1000 for m in messages], _TS),
        pa.array([m.store_timestamp * 1000 for m in messages], _TS),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
        pa.array([m.flag for m in messages], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


# ---------------------------------------------------------------------------- writing

WRITE_COLUMNS = {
    "body",
    "topic",
    "tags",
    "keys",
    "properties",
    "queueId",
    "delayTimeLevel",
    "deliverAt",
}
WRITE_ID_PROPERTY = "SPARK_WRITE_ID"


class WriteSchemaError(InvalidArgumentError):
    """A DataFrame cannot be written to RocketMQ as it is; the message names the column.

    An ``InvalidArgumentError`` of the SDK's tree (``client.errors``), and so a ValueError.
    """


def check_write_columns(
    names: Sequence[str], types: dict[str, str], topic_option: str | None
) -> None:
    """Columns and their Spark type names (``simpleString``) are fit to write.

    Raises:
        WriteSchemaError: no ``body``, no topic (column or option), or a column of a type
            the sink cannot send.
    """
    if "body" not in names:
        raise WriteSchemaError(
            "a DataFrame written to RocketMQ needs a column body (binary or string)"
        )
    if "topic" not in names and not topic_option:
        raise WriteSchemaError("name the topic: the option topic, or a column topic")
    allowed = {
        "body": ("binary", "string"),
        "topic": ("string",),
        "tags": ("string",),
        "keys": ("string", "array<string>"),
        "properties": ("map<string,string>",),
        "queueId": ("int", "bigint", "smallint", "tinyint"),
        "delayTimeLevel": ("int", "bigint", "smallint", "tinyint"),
        "deliverAt": ("timestamp", "timestamp_ntz", "bigint"),
    }
    for name, ok in allowed.items():
        if name in types and types[name] not in ok:
            raise WriteSchemaError(
                f"column {name} is {types[name]}; the sink takes {' or '.join(ok)}"
            )


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    values: list[Any] = batch.column(index).to_pylist()
    return values


def batch_to_messages(
    batch: pa.RecordBatch,
    *,
    topic_option: str | None,
    write_id_prefix: str,
    first_row: int,
) -> list[tuple[Message, int | None]]:
    """(message, queue id or None) per row. The topic option wins over a topic column, as
    in Spark's Kafka sink. Each message gets ``SPARK_WRITE_ID = prefix:row``.

    Raises:
        WriteSchemaError: a row with a null body or no topic.
    """
    rows = batch.num_rows
    bodies = _column(batch, "body") or []
    topics = _column(batch, "topic")
    tags = _column(batch, "tags")
    keys = _column(batch, "keys")
    props = _column(batch, "properties")
    queue_ids = _column(batch, "queueId")
    delays = _column(batch, "delayTimeLevel")
    deliver_at = _column(batch, "deliverAt")
    out: list[tuple[Message, int | None]] = []
    for i in range(rows):
        row = first_row + i
        body = bodies[i]
        if body is None:
            raise WriteSchemaError(f"row {row} has a null body")
        if isinstance(body, str):
            body = body.encode()
        topic = topic_option or (topics[i] if topics is not None else None)
        if not topic:
            raise WriteSchemaError(f"row {row} has no topic (null topic column, no option)")
        properties = dict(props[i]) if props is not None and props[i] else {}
        properties[WRITE_ID_PROPERTY] = f"{write_id_prefix}:{row}"
        when = deliver_at[i] if deliver_at is not None else None
        if isinstance(when, int):
            when = datetime.fromtimestamp(when / 1000, tz=UTC)
        elif isinstance(when, datetime) and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        msg = Message(
            topic,
            bytes(body),
            tags=tags[i] if tags is not None else None,
            keys=keys[i] if keys is not None else None,
            properties=properties,
            delay_level=int(delays[i] or 0) if delays is not None else 0,
            deliver_at=when,
        )
        queue_id = queue_ids[i] if queue_ids is not None else None
        out.append((msg, None if queue_id is None else int(queue_id)))
    return out
