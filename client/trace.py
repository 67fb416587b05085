"""Message trace records: what a traced client writes to the trace topic, and reading it back.

RocketMQ counterpart: ``client/trace`` — ``TraceDataEncoder``, ``TraceContext``, ``TraceBean``,
``TraceType``, ``TraceConstants`` (4.9.x format, which 5.x still reads). Sans-IO: strings in,
strings out; the dispatcher that sends them and the hooks that fill them live elsewhere.

A record is its fields joined by U+0001 and ended by U+0002; a trace message's body is records
one after another. Java writes a missing string as the text ``null``; so does this module, so a
Java reader sees our records as its own. Reading follows Java's ``String.split``: trailing
empty fields are dropped, interior ones kept, and the field count tells old layouts from new.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from client.errors import ResponseDecodeError
from codec.hashing import java_hashmap_order

__all__ = [
    "DEFAULT_REGION",
    "TRACE_TOPIC",
    "ConsumeReturnType",
    "MessageType",
    "TraceBean",
    "TraceContext",
    "TraceDecodeError",
    "TraceType",
    "TraceView",
    "decode_traces",
    "encode_trace",
    "format_trace",
    "java_hashmap_order",
    "java_str",
    "trace_keys",
    "trace_views",
]

FIELD = "\x01"  # TraceConstants.CONTENT_SPLITOR, between fields
RECORD = "\x02"  # TraceConstants.FIELD_SPLITOR, after each record
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
DEFAULT_REGION = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID


class TraceDecodeError(ResponseDecodeError, ValueError):
    """A trace body with a record whose numbers do not parse or whose fields are missing."""


class TraceType(enum.StrEnum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class MessageType(enum.IntEnum):
    """``common.message.MessageType``, written by its ordinal."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3
    ORDER = 4  # 5.x


class ConsumeReturnType(enum.IntEnum):
    """How a consume ended, a SubAfter record's ``contextCode`` (Java writes the ordinal)."""

    SUCCESS = 0
    TIME_OUT = 1  # the listener ran past consumeTimeout
    EXCEPTION = 2  # the listener raised
    RETURNNULL = 3  # Java's listener returned null (ours may: None means success)
    FAILED = 4  # the listener asked for the message again (RECONSUME_LATER)


@dataclass(slots=True)
class TraceBean:
    """One message of a trace record. ``None`` strings are written ``null``, as Java does."""

    msg_id: str = ""
    topic: str = ""
    offset_msg_id: str = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    body_length: int = 0
    msg_type: MessageType = MessageType.NORMAL
    retry_times: int = 0
    transaction_id: str | None = None
    transaction_state: str | None = None  # COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW
    from_transaction_check: bool = False
    client_host: str = ""  # only a record of a newer writer carries it (Pub field 14)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class TraceContext:
    """One traced event: a send (Pub), a consume's start and end (SubBefore, SubAfter, one
    record per message), or a transaction's end.

    ``cost_ms``: Pub, the send's round trip; SubAfter, the consume's time per message.
    ``context_code``: SubAfter, ``ConsumeReturnType``'s ordinal (0 success, 1 timeout,
    2 exception, 3 returned null, 4 failed). ``request_id`` pairs a SubBefore with its
    SubAfter.
    """

    trace_type: TraceType
    group: str = ""
    beans: list[TraceBean] = field(default_factory=list)
    time_ms: int = field(default_factory=_now_ms)
    region_id: str | None = ""
    cost_ms: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0


def java_str(value: object) -> str:
    """Java's ``String.valueOf`` (and ``+`` on strings): ``null``, ``true``/``false``, or the
    value's text; the tools' ``toString`` output is built with it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_trace(ctx: TraceContext) -> str:
    """The records of ``ctx``, as a 4.9.x Java client writes them (LOCAL access channel)."""
    t = ctx.trace_type
    out: list[str] = []
    for bean in ctx.beans:
        if t is TraceType.PUB:
            fields: tuple[object, ...] = (
                t, ctx.time_ms, ctx.region_id, ctx.group, bean.topic, bean.msg_id, bean.tags,
                bean.keys, bean.store_host, bean.body_length, ctx.cost_ms, int(bean.msg_type),
                bean.offset_msg_id, ctx.success,
            )  # fmt: skip
        elif t is TraceType.SUB_BEFORE:
            fields = (
                t, ctx.time_ms, ctx.region_id, ctx.group, ctx.request_id, bean.msg_id,
                bean.retry_times, bean.keys,
            )  # fmt: skip
        elif t is TraceType.SUB_AFTER:
            fields = (
                t, ctx.request_id, bean.msg_id, ctx.cost_ms, ctx.success, bean.keys,
                ctx.context_code, ctx.time_ms, ctx.group,
            )  # fmt: skip
        else:
            fields = (
                t, ctx.time_ms, ctx.region_id, ctx.group, bean.topic, bean.msg_id, bean.tags,
                bean.keys, bean.store_host, int(bean.msg_type), bean.transaction_id,
                bean.transaction_state, bean.from_transaction_check,
            )  # fmt: skip
        out.append(FIELD.join(map(java_str, fields)) + RECORD)
        if t is TraceType.PUB:
            break  # a Pub is one record (a batch's ids are joined in its one bean)
    return "".join(out)


def trace_keys(contexts: Iterable[TraceContext]) -> list[str]:
    """The KEYS of a trace message carrying ``contexts``: each message id and each of its
    keys, once each (queryMsgTraceById finds records by these)."""
    keys: dict[str, None] = {}
    for ctx in contexts:
        for bean in ctx.beans:
            keys[bean.msg_id] = None
            if bean.keys:
                for key in bean.keys.split(" "):
                    if key:
                        keys[key] = None
    return list(keys)


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TraceDecodeError(f"{what} {text!r} is not a number") from None


def _msg_type(text: str) -> MessageType:
    ordinal = _int(text, "msgType")
    try:
        return MessageType(ordinal)
    except ValueError:
        raise TraceDecodeError(f"msgType {ordinal} is no message type") from None


def _fields(parts: list[str], least: int) -> int:
    if len(parts) < least:
        raise TraceDecodeError(f"a {parts[0]} record has {len(parts)} fields, fewer than {least}")
    return len(parts)


def _headed(kind: TraceType, parts: list[str], bean: TraceBean) -> TraceContext:
    """A record's fields 1-3, alike in Pub, SubBefore and EndTransaction: time, region,
    group."""
    return TraceContext(kind, parts[3], [bean], _int(parts[1], "timeStamp"), region_id=parts[2])


def _sent_bean(parts: list[str]) -> TraceBean:
    """Fields 4-8, alike in Pub and EndTransaction: topic, id, tags, keys, store host."""
    return TraceBean(
        topic=parts[4], msg_id=parts[5], tags=parts[6], keys=parts[7], store_host=parts[8]
    )


def _decode_pub(parts: list[str]) -> TraceContext:
    n = _fields(parts, 12)
    bean = _sent_bean(parts)
    bean.body_length, bean.msg_type = _int(parts[9], "bodyLength"), _msg_type(parts[11])
    ctx = _headed(TraceType.PUB, parts, bean)
    ctx.cost_ms = _int(parts[10], "costTime")
    if n == 13:  # 4.3: no offsetMsgId
        ctx.success = _bool(parts[12])
    elif n >= 14:
        bean.offset_msg_id, ctx.success = parts[12], _bool(parts[13])
        if n >= 15:
            bean.client_host = parts[14]
    return ctx


def _decode_sub_before(parts: list[str]) -> TraceContext:
    _fields(parts, 8)
    bean = TraceBean(msg_id=parts[5], retry_times=_int(parts[6], "retryTimes"), keys=parts[7])
    ctx = _headed(TraceType.SUB_BEFORE, parts, bean)
    ctx.request_id = parts[4]
    return ctx


def _decode_sub_after(parts: list[str]) -> TraceContext:
    n = _fields(parts, 6)
    ctx = TraceContext(
        TraceType.SUB_AFTER,
        request_id=parts[1],
        beans=[TraceBean(msg_id=parts[2], keys=parts[5])],
        cost_ms=_int(parts[3], "costTime"),
        success=_bool(parts[4]),
    )
    if n >= 7:
        ctx.context_code = _int(parts[6], "contextCode")
    if n >= 9:  # 4.8 on; older records leave the time of reading and no group
        ctx.time_ms, ctx.group = _int(parts[7], "timeStamp"), parts[8]
    return ctx


def _decode_end_transaction(parts: list[str]) -> TraceContext:
    _fields(parts, 13)
    bean = _sent_bean(parts)
    bean.msg_type = _msg_type(parts[9])
    bean.transaction_id, bean.transaction_state = parts[10], parts[11]
    bean.from_transaction_check = _bool(parts[12])
    return _headed(TraceType.END_TRANSACTION, parts, bean)


_DECODERS: dict[str, Callable[[list[str]], TraceContext]] = {
    TraceType.PUB: _decode_pub,
    TraceType.SUB_BEFORE: _decode_sub_before,
    TraceType.SUB_AFTER: _decode_sub_after,
    TraceType.END_TRANSACTION: _decode_end_transaction,
}


def decode_traces(body: str) -> list[TraceContext]:
    """The records of a trace message's body, in order; unknown types are skipped.

    Raises:
        TraceDecodeError: a record's numbers do not parse or its fields are too few (Java
            gives up on the whole body then; so does this).
    """
    out: list[TraceContext] = []
    for record in body.split(RECORD):
        parts = record.split(FIELD)
        while parts and parts[-1] == "":
            parts.pop()  # Java's split drops trailing empty fields
        if not parts:
            continue
        decode = _DECODERS.get(parts[0])
        if decode is not None:  # a type this reader does not know (5.x's Recall) is skipped
            out.append(decode(parts))
    return out


# ------------------------------------------------------------------ reading a message's trace


@dataclass(frozen=True, slots=True)
class TraceView:
    """One record about a message, as ``queryMsgTraceById`` shows it (RocketMQ's
    ``TraceView``). ``client_host`` is the IP the trace message was sent from, i.e. the
    producer's or consumer's host: a record does not carry it."""

    context: TraceContext
    client_host: str

    @property
    def trace_type(self) -> TraceType:
        return self.context.trace_type

    @property
    def group(self) -> str:
        return self.context.group

    @property
    def status(self) -> str:
        return "success" if self.context.success else "failed"


def trace_views(msg_id: str, messages: Iterable[tuple[str, str]]) -> list[TraceView]:
    """The records about ``msg_id`` in trace messages given as (body, born host) pairs, in
    their order. A body that does not parse is skipped (the others still tell the story).
    """
    views: list[TraceView] = []
    for body, born_host in messages:
        host = born_host.rsplit(":", 1)[0] if ":" in born_host else born_host
        try:
            contexts = decode_traces(body)
        except TraceDecodeError:
            continue
        views += [TraceView(c, host) for c in contexts if c.beans and c.beans[0].msg_id == msg_id]
    return views


_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"  # Java's "%-10s %-20s ... %-10s%n"


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def format_trace(views: Iterable[TraceView]) -> str:
    """``queryMsgTraceById``'s text, as RocketMQ 4.9 prints it: each send under its own
    header, then each consumer group's consumes (their SubAfter records) under one, each block
    followed by an empty line; times in the local zone, trailing spaces kept."""
    out: list[str] = []
    subs: dict[str, list[TraceView]] = {}
    for view in views:
        ctx = view.context
        if ctx.trace_type is TraceType.PUB:
            out.append(_ROW.format(
                "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"
            ))  # fmt: skip
            out.append(_ROW.format(
                "Pub", ctx.group, view.client_host, _when(ctx.time_ms), f"{ctx.cost_ms}ms",
                view.status,
            ))  # fmt: skip
            out.append("\n")
        elif ctx.trace_type is TraceType.SUB_AFTER:
            subs.setdefault(ctx.group, []).append(view)
    for group in java_hashmap_order(subs):
        out.append(_ROW.format(
            "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"
        ))  # fmt: skip
        for view in subs[group]:
            ctx = view.context
            out.append(_ROW.format(
                "Sub", group, view.client_host, _when(ctx.time_ms), f"{ctx.cost_ms}ms",
                view.status,
            ))  # fmt: skip
        out.append("\n")
    return "".join(out)
