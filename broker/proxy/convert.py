"""Messages between the v2 protobuf form and the broker's remoting form.

RocketMQ counterpart: the proxy's ``SendMessageActivity.buildMessage`` /
``buildMessageProperty`` (v2 ``Message`` → a send's properties and sysflag) and
``GrpcConverter.buildMessage`` (a stored ``MessageExt`` → v2 ``Message``). The v2 system
properties are RocketMQ's reserved properties under other names: ``tag`` is ``TAGS``,
``keys`` ``KEYS`` (space-joined), ``message_id`` ``UNIQ_KEY``, ``message_group``
``__SHARDINGKEY``, ``delivery_timestamp`` ``TIMER_DELIVER_MS``, a transaction
``TRAN_MSG``, its recovery time ``CHECK_IMMUNITY_TIME_IN_SECONDS``. A message sent by a 4.x
client reads the same to a 5.x client and the other way round.
"""

from __future__ import annotations

import hashlib

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from broker.proxy.apis import definition_pb2 as pb
from codec import (
    COMPRESSED_FLAG,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_START_DELIVER_TIME,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    SYSTEM_PROPERTIES,
    TRANSACTION_PREPARED_TYPE,
)
from codec.view import MessageExt

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"  # MessageConst.PROPERTY_SHARDING_KEY: the FIFO group
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"  # MessageConst.PROPERTY_TRACE_CONTEXT
PROPERTY_BORN_HOST = "__BORNHOST"  # MessageConst.PROPERTY_BORN_HOST: the client's own word
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def millis(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def digest_of(body: bytes) -> pb.Digest:
    """The body's MD5 as the proxy sends it (``GrpcConverter``): upper-case hex, which the
    Python and Java clients compare exactly."""
    return pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper())  # noqa: S324


def send_properties(message: pb.Message, producer_group: str) -> tuple[dict[str, str], int]:
    """The properties and sysflag a v2 message is stored with (``buildMessageProperty``);
    the caller has validated it."""
    sp = message.system_properties
    props = dict(message.user_properties)
    props[PROPERTY_UNIQ_KEY] = sp.message_id
    if sp.HasField("tag") and sp.tag:
        props[PROPERTY_TAGS] = sp.tag
    if sp.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(sp.keys)
    sys_flag = 0
    if sp.message_type == pb.TRANSACTION:
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        sys_flag |= TRANSACTION_PREPARED_TYPE
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(seconds, 0))
    if sp.HasField("delivery_timestamp"):
        props[PROPERTY_TIMER_DELIVER_MS] = str(millis(sp.delivery_timestamp))
    if sp.HasField("message_group") and sp.message_group:
        props[PROPERTY_SHARDING_KEY] = sp.message_group
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    if sp.born_host:
        props[PROPERTY_BORN_HOST] = sp.born_host
    props["PGROUP"] = producer_group
    if sp.body_encoding == pb.GZIP:
        sys_flag |= COMPRESSED_FLAG
    return props, sys_flag


def message_type_of(props: dict[str, str], sys_flag: int) -> int:
    """The v2 type of a stored message, from what its properties say."""
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" or sys_flag & TRANSACTION_PREPARED_TYPE:
        return pb.TRANSACTION
    if props.get(PROPERTY_SHARDING_KEY):
        return pb.FIFO
    if (
        PROPERTY_TIMER_DELIVER_MS in props
        or PROPERTY_START_DELIVER_TIME in props
        or props.get(PROPERTY_DELAY, "0") not in ("", "0")
    ):
        return pb.DELAY
    return pb.NORMAL


def to_v2(
    view: MessageExt,
    *,
    topic: str | None = None,
    receipt_handle: str | None = None,
    invisible_ms: int | None = None,
) -> pb.Message:
    """A stored message as a 5.x client reads it (``GrpcConverter.buildMessage``).

    ``topic``: the topic to name (a retry copy names its original); the body is the
    stored one inflated, so its encoding is IDENTITY and its digest that body's.
    """
    props = view.properties
    body = view.body
    sp = pb.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_KEY) or view.msg_id,
        body_digest=digest_of(body),
        body_encoding=pb.IDENTITY,
        message_type=message_type_of(props, view.sys_flag),  # type: ignore[arg-type]
        born_timestamp=timestamp(view.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or view.born_host.rpartition(":")[0],
        store_timestamp=timestamp(view.store_timestamp),
        store_host=view.store_host,
        queue_id=view.queue_id,
        queue_offset=view.queue_offset,
        delivery_attempt=view.reconsume_times + 1,
    )
    _optional_properties(sp, view)
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.CopyFrom(duration(invisible_ms))
    origin = props.get(PROPERTY_DLQ_ORIGIN_TOPIC)
    if origin:
        sp.dead_letter_queue.CopyFrom(
            pb.DeadLetterQueue(
                topic=origin, message_id=props.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID, "")
            )
        )
    name = topic or props.get(PROPERTY_RETRY_TOPIC) or view.topic
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
    return pb.Message(
        topic=pb.Resource(name=name),
        user_properties=user,
        system_properties=sp,
        body=body,
    )


def _optional_properties(sp: pb.SystemProperties, view: MessageExt) -> None:
    """The system properties a stored message has only sometimes: tag, keys, delivery
    time, message group, trace context, transaction recovery time."""
    props = view.properties
    if view.tags:
        sp.tag = view.tags
    if view.keys:
        sp.keys.extend(view.keys)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS) or props.get(PROPERTY_START_DELIVER_TIME)
    if deliver and deliver.isdigit():
        sp.delivery_timestamp.CopyFrom(timestamp(int(deliver)))
    group = props.get(PROPERTY_SHARDING_KEY)
    if group:
        sp.message_group = group
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace:
        sp.trace_context = trace
    immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity and immunity.isdigit():
        sp.orphaned_transaction_recovery_duration.CopyFrom(duration(int(immunity) * 1000))
