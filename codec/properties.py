"""Message property names and the properties text codec.

RocketMQ counterpart: ``common/message/MessageConst`` (the names, and ``STRING_HASH_SET``,
the names users may not set) and ``MessageDecoder.messageProperties2String`` /
``string2messageProperties`` (the codec). A properties string is ``name\\x01value`` pairs
joined by ``\\x02``; it is stored and sent as UTF-8, at most 32,767 bytes in a record.

The codec's functions have compiled twins in codec/_cprops.pyx, bound here when built
(below).
"""

from __future__ import annotations

import contextlib
from typing import Final

from codec import _ext

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# Our names are the property's text; the Java constant is named where it differs.
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT: Final = "WAIT"  # PROPERTY_WAIT_STORE_MSG_OK
PROPERTY_DELAY: Final = "DELAY"  # PROPERTY_DELAY_TIME_LEVEL
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_UNIQ_KEY: Final = "UNIQ_KEY"  # PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_CONSUME_START_TIME: Final = "CONSUME_START_TIME"  # ..._START_TIMESTAMP
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_CLUSTER: Final = "CLUSTER"
# RocketMQ 5 timer messages
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS: Final = "TIMER_OUT_MS"
PROPERTY_START_DELIVER_TIME: Final = "__STARTDELIVERTIME"

# Set by the SDK or the broker: users may not set them through a message's properties.
RESERVED_PROPERTIES: Final = frozenset(
    {
        PROPERTY_KEYS,
        PROPERTY_TAGS,
        PROPERTY_WAIT,
        PROPERTY_DELAY,
        PROPERTY_UNIQ_KEY,
        PROPERTY_RETRY_TOPIC,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_TRANSACTION_PREPARED,
        PROPERTY_PRODUCER_GROUP,
        PROPERTY_MIN_OFFSET,
        PROPERTY_MAX_OFFSET,
        PROPERTY_CLUSTER,
        PROPERTY_RECONSUME_TIME,
        PROPERTY_MAX_RECONSUME_TIMES,
        PROPERTY_ORIGIN_MESSAGE_ID,
    }
)


# MessageConst.STRING_HASH_SET, with the 5.x names beside it: every property a client library
# or the broker sets, none a user's own. RocketMQ 5's proxy refuses a send that names one as a
# user property (ILLEGAL_MESSAGE_PROPERTY_KEY) and leaves them out of a received message's user
# properties (broker/proxy/convert.py). RESERVED_PROPERTIES, the SDK's narrower rule, is part.
SYSTEM_PROPERTIES: Final = RESERVED_PROPERTIES | frozenset(
    {
        "TRACE_ON", "MSG_REGION", "BUYER_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG",
        "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
        PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME",
        "PUSH_REPLY_TIME", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
        PROPERTY_TRANSACTION_CHECK_TIMES, PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
        "SHARDING_KEY", "__SHARDINGKEY", PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_OUT_MS, "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", PROPERTY_START_DELIVER_TIME, "TRACE_CONTEXT",
        "__BORNHOST", "INNER_NUM", "INNER_BASE", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
    }
)  # fmt: skip


def encode_properties(props: dict[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02``, without a trailing separator (as Java
    4.9.1+ writes them)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string as Java does: empty segments, pairs without ``\\x01`` and
    pairs with an empty name or value are skipped; a trailing ``\\x02`` is accepted; a name
    seen twice keeps its last value."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


_NEEDLES: dict[bytes, tuple[bytes, bytes]] = {}


def property_value(props: bytes, name: bytes) -> bytes | None:
    """``decode_properties(props.decode(errors="replace")).get(name)``, UTF-8 encoded,
    without parsing the other pairs (dispatch needs only TAGS, KEYS and UNIQ_KEY).

    A pair's name is everything up to the first ``\\x01`` of its ``\\x02``-separated
    segment, so ``name`` is the name of a segment starting with ``name\\x01``; the last such
    segment wins, as in the dict. Only when that one has an empty value (Java skips it and
    an earlier one counts) is the whole string parsed.
    """
    needles = _NEEDLES.get(name)
    if needles is None:
        needles = _NEEDLES[name] = (name + b"\x01", b"\x02" + name + b"\x01")
    at_start, inside = needles
    i = props.rfind(inside)
    if i >= 0:
        i += len(inside)
    elif props.startswith(at_start):
        i = len(at_start)
    else:
        return None
    j = props.find(b"\x02", i)
    value = props[i:] if j < 0 else props[i:j]
    if value:
        return value
    text = decode_properties(props.decode(errors="replace")).get(name.decode())
    return None if text is None else text.encode()


# The compiled speedups (codec/_cprops.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
encode_properties_py = encode_properties
decode_properties_py = decode_properties
property_value_py = property_value

if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._cprops import decode_properties, encode_properties, property_value
