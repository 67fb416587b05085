"""Messages as users see them, and their wire forms.

RocketMQ counterpart: ``Message``, ``MessageExt`` (here ``MessageView``, RocketMQ 5's name),
``SendResult``/``SendStatus``, ``ConsumeConcurrentlyStatus`` (here ``ConsumeResult``),
``MessageDecoder`` (the stored-record layout of pull bodies, store-format.md §2, decoded on
the client side because ``client`` imports only ``remoting``), ``MessageClientIDSetter``
(UNIQ_KEY ids) and ``Validators`` (topic and body checks before anything is sent).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Final

from client.errors import InvalidArgumentError, InvalidMessageError

# Defined here before client.errors held the whole tree: ``from client.message import
# MessageDecodeError`` keeps working (the alias marks it re-exported for mypy).
from client.errors import MessageDecodeError as MessageDecodeError  # noqa: PLC0414
from remoting.route import MessageQueue

# ----------------------------------------------------------------------- property keys

PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT: Final = "WAIT"
PROPERTY_DELAY: Final = "DELAY"
PROPERTY_UNIQ_KEY: Final = "UNIQ_KEY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_CONSUME_START_TIME: Final = "CONSUME_START_TIME"
# Set by the SDK or the broker: users may not set them through ``properties``.
RESERVED_PROPERTIES: Final = frozenset(
    {
        PROPERTY_KEYS,
        PROPERTY_TAGS,
        PROPERTY_WAIT,
        PROPERTY_DELAY,
        PROPERTY_UNIQ_KEY,
        PROPERTY_RETRY_TOPIC,
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        PROPERTY_MIN_OFFSET,
        PROPERTY_MAX_OFFSET,
        "CLUSTER",
        PROPERTY_RECONSUME_TIME,
        PROPERTY_MAX_RECONSUME_TIMES,
        PROPERTY_ORIGIN_MESSAGE_ID,
    }
)

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# ----------------------------------------------------------------------------- limits

TOPIC_MAX_LENGTH: Final = 127
CONSUMER_GROUP_MAX_LENGTH: Final = TOPIC_MAX_LENGTH - len("%RETRY%")
DEFAULT_MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
COMPRESS_OVER_BYTES: Final = 4096  # compressMsgBodyOverHowmuch
MAX_DELAY_LEVEL: Final = 18
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_NOT_ALLOWED_SEND = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)

# sysFlag bits (protocol.md §9.3)
FLAG_COMPRESSED: Final = 0x1
FLAG_BORNHOST_V6: Final = 0x10
FLAG_STOREHOST_V6: Final = 0x20
COMPRESSION_ZLIB: Final = 0x300  # compression type 3 in bits 8-10, as Java 4.9.8 sends
_COMPRESSION_MASK = 0x700


def check_topic(topic: str, error: type[InvalidArgumentError] = InvalidArgumentError) -> None:
    """``Validators.checkTopic`` plus the forbidden topics.

    Args:
        topic: the name to check.
        error: what to raise; a message's topic is the message's fault (InvalidMessageError).

    Raises:
        InvalidArgumentError: blank, illegal characters, too long, or a system topic.
    """
    if type(topic) is str and topic in _VALID_TOPICS:
        return  # checked before: this runs once per message sent
    if not isinstance(topic, str) or not topic.strip():
        raise error("the specified topic is blank")
    if not _VALID_NAME.fullmatch(topic):
        raise error(
            f"the specified topic[{topic}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        raise error(f"the specified topic is longer than topic max length {TOPIC_MAX_LENGTH}")
    if topic in _NOT_ALLOWED_SEND:
        raise error(f"sending message to topic[{topic}] is forbidden")
    if len(_VALID_TOPICS) > 10_000:
        _VALID_TOPICS.clear()
    _VALID_TOPICS.add(topic)


_VALID_TOPICS: set[str] = set()


def check_group(group: str, *, consumer: bool = False) -> None:
    """``Validators.checkGroup``; a consumer group also makes a legal topic of its retry
    topic ``%RETRY%<group>`` (at most 120 characters, as RocketMQ 5's brokers require).

    Raises:
        InvalidArgumentError: blank, illegal characters or too long.
    """
    if not isinstance(group, str) or not group.strip():
        raise InvalidArgumentError("the specified group is blank")
    if not _VALID_NAME.fullmatch(group):
        raise InvalidArgumentError(
            f"the specified group[{group}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if len(group) > 255:
        raise InvalidArgumentError("the specified group is longer than group max length 255")
    if consumer and len(group) > CONSUMER_GROUP_MAX_LENGTH:
        raise InvalidArgumentError(
            f"the specified consumer group is longer than {CONSUMER_GROUP_MAX_LENGTH}: its "
            f"retry topic %RETRY%<group> would exceed the topic max length {TOPIC_MAX_LENGTH}"
        )


# ---------------------------------------------------------------------------- message


@dataclass(slots=True)
class Message:
    """A message to send.

    Args:
        topic: the topic; created on first send when the broker allows auto-creation.
        body: the payload (non-empty, at most the producer's ``max_message_bytes``).
        tags: one tag, used by consumers' filter expressions.
        keys: business keys, indexed by the broker for queries.
        properties: user properties (string to string).
        delay_level: 1..18 delays delivery by the broker's ``messageDelayLevel`` entry.
        flag: an int stored with the message and handed back to consumers unchanged.
        deliver_at: deliver at this time (timezone-aware), as a RocketMQ 5 timer message
            (TIMER_DELIVER_MS); up to the broker's ``timerMaxDelaySec`` ahead.
        delay: deliver this long after the broker stores it (TIMER_DELAY_MS).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    flag: int = 0
    deliver_at: datetime | None = None
    delay: timedelta | None = None

    @property
    def key_list(self) -> list[str]:
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(" ") if k]
        return list(self.keys)

    def validate(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        """``Validators.checkMessage``: everything a broker would refuse, caught before sending.

        Raises:
            InvalidMessageError: names the problem.
        """
        check_topic(self.topic, InvalidMessageError)
        if not isinstance(self.body, bytes | bytearray | memoryview):
            raise InvalidMessageError(
                f"the message body must be bytes, not {type(self.body).__name__}"
            )
        if len(self.body) == 0:
            raise InvalidMessageError("the message body length is zero")
        if len(self.body) > max_message_bytes:
            raise InvalidMessageError(
                f"the message body size {len(self.body)} is over the max value {max_message_bytes}"
            )
        if self.tags is not None and (
            not isinstance(self.tags, str) or "||" in self.tags or not self.tags.strip()
        ):
            raise InvalidMessageError(f"tags {self.tags!r} must be one non-blank tag without ||")
        for key in self.key_list:
            if not isinstance(key, str) or not key or " " in key:
                raise InvalidMessageError(f"key {key!r} must be a non-empty string without spaces")
        if not 0 <= self.delay_level <= MAX_DELAY_LEVEL:
            raise InvalidMessageError(
                f"delay_level {self.delay_level} is not within 0..{MAX_DELAY_LEVEL}"
            )
        self._validate_timer()
        for name, value in self.properties.items():
            if not isinstance(name, str) or not isinstance(value, str) or not name or not value:
                raise InvalidMessageError(
                    f"property {name!r}={value!r}: names and values must be non-empty strings"
                )
            if name in RESERVED_PROPERTIES:
                raise InvalidMessageError(f"property {name!r} is reserved by RocketMQ")
            if any(c in name + value for c in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)):
                raise InvalidMessageError(
                    f"property {name!r} contains the \\x01 or \\x02 separator characters"
                )

    @property
    def is_timed(self) -> bool:
        """A delay level or a timer: the broker parks it, so it travels alone."""
        return bool(self.delay_level) or self.deliver_at is not None or self.delay is not None

    def _validate_timer(self) -> None:
        if self.deliver_at is not None and self.delay is not None:
            raise InvalidMessageError("give deliver_at or delay, not both")
        if (self.deliver_at is not None or self.delay is not None) and self.delay_level:
            raise InvalidMessageError("a timer (deliver_at / delay) excludes a delay_level")
        if self.deliver_at is not None:
            if not isinstance(self.deliver_at, datetime):
                raise InvalidMessageError(f"deliver_at {self.deliver_at!r} is not a datetime")
            if self.deliver_at.tzinfo is None or self.deliver_at.utcoffset() is None:
                raise InvalidMessageError(
                    f"deliver_at {self.deliver_at} has no time zone: give an aware datetime "
                    "(datetime.now(timezone.utc) + ...)"
                )
        if self.delay is not None:
            if not isinstance(self.delay, timedelta):
                raise InvalidMessageError(f"delay {self.delay!r} is not a timedelta")
            if self.delay < timedelta(0):
                raise InvalidMessageError(f"delay {self.delay} is negative")

    def wire_properties(self, uniq_key: str, *, wait: bool = True) -> dict[str, str]:
        """The properties as they travel (TAGS, KEYS, DELAY, UNIQ_KEY, WAIT added)."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        keys = self.key_list
        if keys:
            props[PROPERTY_KEYS] = " ".join(keys)
        if self.delay_level:
            props[PROPERTY_DELAY] = str(self.delay_level)
        if self.deliver_at is not None:
            props[PROPERTY_TIMER_DELIVER_MS] = str(int(self.deliver_at.timestamp() * 1000))
        elif self.delay is not None:
            props[PROPERTY_TIMER_DELAY_MS] = str(self.delay // timedelta(milliseconds=1))
        props[PROPERTY_UNIQ_KEY] = uniq_key
        props[PROPERTY_WAIT] = "true" if wait else "false"
        return props

    def wire_properties_text(self, uniq_key: str, *, wait: bool = True) -> str:
        """``encode_properties(self.wire_properties(...))``, quicker for the usual message
        without user properties or a delay (this runs once per message sent)."""
        if self.properties or self.is_timed:
            return encode_properties(self.wire_properties(uniq_key, wait=wait))
        head = ""
        if self.tags:
            head = f"{PROPERTY_TAGS}\x01{self.tags}\x02"
        if self.keys:
            keys = self.key_list
            if keys:
                head += f"{PROPERTY_KEYS}\x01{' '.join(keys)}\x02"
        flag = "true" if wait else "false"
        return f"{head}{PROPERTY_UNIQ_KEY}\x01{uniq_key}\x02{PROPERTY_WAIT}\x01{flag}"


def encode_properties(props: dict[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02`` (Java 4.9.1+ writes no trailing one)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
    """Parse as Java does: skip empty segments, pairs without ``\\x01``, empty names/values."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


# ----------------------------------------------------------------------------- results


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, not yet durable
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # stored, not yet replicated
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # stored, no slave to replicate to


@dataclass(slots=True)
class SendResult:
    """Where a sent message landed.

    ``msg_id`` is the client-generated UNIQ_KEY (comma-joined for a batch), what consumers
    see as the message id; ``offset_msg_id`` is the broker's id (store host + commit-log
    offset) used to look the message up.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str | None = None
    trace_on: bool = True


class ConsumeResult(Enum):
    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # redelivered later, with backoff


# ------------------------------------------------------------------------ message view


@dataclass(slots=True)
class MessageView:
    """A received message (RocketMQ ``MessageExt``).

    Built once per delivered message, so it is a plain slotted dataclass: a frozen one costs
    ten times as much to construct. Changing a field changes only this copy.
    """

    topic: str
    body: bytes
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int
    sys_flag: int
    flag: int
    broker_name: str
    body_crc: int

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def user_properties(self) -> dict[str, str]:
        """The properties the sender set, without the ones RocketMQ and the SDK add."""
        return {k: v for k, v in self.properties.items() if k not in RESERVED_PROPERTIES}

    def to_message(self, topic: str | None = None) -> Message:
        """A new message with this one's body, tags, keys and user properties, for ``topic``
        or else the topic it was first sent to (a retry or dead-letter copy names it in
        RETRY_TOPIC): how a dead letter is re-sent once its cause is fixed."""
        target = topic or self.properties.get(PROPERTY_RETRY_TOPIC) or self.topic
        return Message(
            target, self.body, tags=self.tags, keys=self.keys, properties=self.user_properties
        )


_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_TAIL = struct.Struct(">iq")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
# Both hosts IPv4 (the usual case): TOTALSIZE .. BODYLENGTH in one unpack.
_HEAD_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
assert _HEAD.size == 48 and _TAIL.size == 12 and _HEAD_V4.size == 88
_V6_FLAGS = FLAG_BORNHOST_V6 | FLAG_STOREHOST_V6


@functools.lru_cache(maxsize=1024)
def _host_text(raw: bytes) -> str:
    """``ip:port`` of a stored host field (address bytes + port); few distinct per process."""
    v6 = len(raw) == 20
    ip = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, raw[:-4])
    (port,) = _INT.unpack_from(raw, len(raw) - 4)
    return f"[{ip}]:{port}" if v6 else f"{ip}:{port}"


# host field → (ip:port, upper-case hex); a process talks to a handful of brokers, so this
# stays tiny, and a plain dict lookup is what the per-message path can afford.
_HOSTS: dict[bytes, tuple[str, str]] = {}


def _host_info(raw: bytes) -> tuple[str, str]:
    info = _HOSTS.get(raw)
    if info is None:
        if len(_HOSTS) > 1024:
            _HOSTS.clear()
        info = _HOSTS[raw] = (_host_text(raw), raw.hex().upper())
    return info


def decode_messages(body: bytes | memoryview, broker_name: str) -> list[MessageView]:
    """The records of a pull (or query) reply, bodies inflated.

    Raises:
        MessageDecodeError: the body is truncated or not in the record layout.
    """
    data = body if isinstance(body, bytes) else bytes(body)
    out: list[MessageView] = []
    append = out.append
    pos = 0
    end = len(data)
    while pos < end:
        try:
            view, total = _decode_one(data, pos, end, broker_name)
        except (struct.error, IndexError, ValueError, OSError) as exc:
            if isinstance(exc, MessageDecodeError):
                raise
            raise MessageDecodeError(f"record at byte {pos} is malformed: {exc}") from None
        append(view)
        pos += total
    return out


def _decode_one(data: bytes, pos: int, end: int, broker_name: str) -> tuple[MessageView, int]:
    """One record at ``pos``; every inner length is checked against TOTALSIZE."""
    if end - pos < _HEAD.size:
        raise MessageDecodeError(f"truncated record header at byte {pos}")
    if not data[pos + 39] & _V6_FLAGS and end - pos >= _HEAD_V4.size:  # SYSFLAG's low byte
        (
            total,
            _magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_ts,
            born_raw,
            store_ts,
            store_raw,
            reconsume_times,
            _prepared,
            body_len,
        ) = _HEAD_V4.unpack_from(data, pos)
        p = pos + _HEAD_V4.size
        record_end = pos + total
        if total < _HEAD_V4.size or record_end > end:
            raise MessageDecodeError(f"record at byte {pos} claims {total} bytes")
    else:
        (
            total,
            _magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_ts,
        ) = _HEAD.unpack_from(data, pos)
        record_end = pos + total
        if total < _HEAD.size or record_end > end:
            raise MessageDecodeError(f"record at byte {pos} claims {total} bytes")
        p = pos + _HEAD.size
        born_len = 20 if sys_flag & FLAG_BORNHOST_V6 else 8
        born_raw = data[p : p + born_len]
        p += born_len
        (store_ts,) = _LONG.unpack_from(data, p)
        p += 8
        store_len = 20 if sys_flag & FLAG_STOREHOST_V6 else 8
        store_raw = data[p : p + store_len]
        p += store_len
        reconsume_times, _prepared = _TAIL.unpack_from(data, p)
        p += _TAIL.size
        (body_len,) = _INT.unpack_from(data, p)
        p += 4
    if body_len < 0 or p + body_len + 3 > record_end:
        raise MessageDecodeError(f"record at byte {pos}: body length {body_len} overruns it")
    payload = data[p : p + body_len]
    p += body_len
    topic_len = data[p]
    if p + 1 + topic_len + 2 > record_end:
        raise MessageDecodeError(f"record at byte {pos}: topic length overruns it")
    topic = data[p + 1 : p + 1 + topic_len].decode("utf-8", "replace")
    p += 1 + topic_len
    props_len = (data[p] << 8) | data[p + 1]
    p += 2
    if props_len > 0x7FFF or p + props_len > record_end:
        raise MessageDecodeError(f"record at byte {pos}: properties length overruns it")
    props = decode_properties(data[p : p + props_len].decode("utf-8", "replace"))
    if sys_flag & FLAG_COMPRESSED:
        payload = _inflate(payload, sys_flag)
    born_host = _host_info(born_raw)[0]
    store_host, store_hex = _host_info(store_raw)
    offset_id = f"{store_hex}{commit_log_offset:016X}"
    keys = props.get(PROPERTY_KEYS)
    return (
        MessageView(
            topic,
            payload,
            props.get(PROPERTY_TAGS),
            [k for k in keys.split(" ") if k] if keys else [],
            props,
            props.get(PROPERTY_UNIQ_KEY) or offset_id,
            offset_id,
            queue_id,
            queue_offset,
            commit_log_offset,
            born_ts,
            store_ts,
            born_host,
            store_host,
            reconsume_times,
            sys_flag,
            flag,
            broker_name,
            body_crc,
        ),
        total,
    )


def _inflate(payload: bytes, sys_flag: int) -> bytes:
    kind = sys_flag & _COMPRESSION_MASK
    if kind not in (0, COMPRESSION_ZLIB):
        # LZ4/ZSTD (types 1 and 2) come from RocketMQ 5 clients; hand the bytes over as
        # stored rather than drop the message.
        return payload
    try:
        return zlib.decompress(payload)
    except zlib.error:
        return payload


def compress_body(body: bytes, level: int = 5) -> bytes:
    return zlib.compress(body, level)


# ------------------------------------------------------------------------- java hash


def java_hash(text: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# ----------------------------------------------------------------------- UNIQ_KEY ids


def _local_ipv4() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # No packet is sent: connect() on UDP only picks the outgoing interface.
            s.connect(("10.255.255.255", 1))
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


class UniqIdGenerator:
    """``MessageClientIDSetter``: 32 hex chars = IPv4 + pid + a per-process hash (the fixed
    prefix) + milliseconds since the start of the month + a 16-bit counter."""

    def __init__(self) -> None:
        prefix = _local_ipv4() + struct.pack(">h", os.getpid() & 0x7FFF) + os.urandom(4)
        self._prefix = prefix.hex().upper()
        self._counter = 0
        self._lock = threading.Lock()  # the blocking facade may call from other threads
        self._month_start_ms = 0
        self._next_month_ms = 0
        self._last_ms = -1
        self._head = ""  # prefix + the time part of _last_ms

    def _set_month(self, now_ms: int) -> None:
        now = datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._month_start_ms = int(start.timestamp() * 1000)
        self._next_month_ms = int(nxt.timestamp() * 1000)

    def next_id(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            counter = self._counter
            self._counter = (counter + 1) & 0xFFFF
            if now_ms != self._last_ms:
                # Many ids share a millisecond: format its part once.
                if now_ms >= self._next_month_ms:
                    self._set_month(now_ms)
                # Java writes (int) of the span and reads the 4 bytes back unsigned
                # (getNearlyTimeFromID): past 24.8 days into a month the top bit is set.
                elapsed = (now_ms - self._month_start_ms) & 0xFFFFFFFF
                self._head = f"{self._prefix}{elapsed:08X}"
                self._last_ms = now_ms
            head = self._head
        return f"{head}{counter:04X}"


UNIQ_IDS = UniqIdGenerator()
