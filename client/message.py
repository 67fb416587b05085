"""Messages as users see them, and their wire forms.

RocketMQ counterpart: ``Message``, ``MessageExt`` (here ``MessageView``, RocketMQ 5's name),
``SendResult``/``SendStatus``, ``ConsumeConcurrentlyStatus`` (here ``ConsumeResult``),
and ``Validators`` (topic and body checks before anything is sent). The bytes of a message
(records, properties, ids, hashes) are ``codec``'s; the names used here are re-exported.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Final, TypeVar, overload

from client.errors import InvalidArgumentError, InvalidMessageError

# Defined here before client.errors held the whole tree: ``from client.message import
# MessageDecodeError`` keeps working (the alias marks it re-exported for mypy).
from client.errors import MessageDecodeError as MessageDecodeError  # noqa: PLC0414
from codec import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    RESERVED_PROPERTIES,
    RecordError,
    UniqIdGenerator,
    decode_records,
    encode_properties,
)
from codec.view import MessageExt
from remoting.route import MessageQueue

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


def check_topic(
    topic: str, error: type[InvalidArgumentError] = InvalidArgumentError, *, to_send: bool = True
) -> None:
    """``Validators.checkTopic`` plus, for a topic to send to, the forbidden topics.

    Args:
        topic: the name to check.
        error: what to raise; a message's topic is the message's fault (InvalidMessageError).
        to_send: False for a topic to read: the broker's own topics may be subscribed to
            (OFFSET_MOVED_EVENT by a monitor, as Java's MonitorService does).

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
        if not to_send:
            return
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
        body = self.body
        # this runs once per message sent: the usual message (bytes, no keys, timer or
        # properties) takes the shortest way through
        if type(body) is not bytes and not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidMessageError(f"the message body must be bytes, not {type(body).__name__}")
        size = len(body)
        if size == 0:
            raise InvalidMessageError("the message body length is zero")
        if size > max_message_bytes:
            raise InvalidMessageError(
                f"the message body size {size} is over the max value {max_message_bytes}"
            )
        tags = self.tags
        if tags is not None and (not isinstance(tags, str) or "||" in tags or not tags.strip()):
            raise InvalidMessageError(f"tags {tags!r} must be one non-blank tag without ||")
        if self.keys is not None:
            for key in self.key_list:
                if not isinstance(key, str) or not key or " " in key:
                    raise InvalidMessageError(
                        f"key {key!r} must be a non-empty string without spaces"
                    )
        if not 0 <= self.delay_level <= MAX_DELAY_LEVEL:
            raise InvalidMessageError(
                f"delay_level {self.delay_level} is not within 0..{MAX_DELAY_LEVEL}"
            )
        if self.deliver_at is not None or self.delay is not None:
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


class MessageView(MessageExt):
    """A received message (RocketMQ ``MessageExt``; RocketMQ 5 names it ``MessageView``).

    Decoded lazily (``codec.view``): the header fields when the reply is decoded, the
    body, topic, properties, tags, keys, ids and hosts when first read. It is a dataclass
    of those fields, built from keyword arguments too; changing a field changes only this
    copy, ``==`` compares the fields.
    """

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


MV = TypeVar("MV", bound=MessageView)


@overload
def decode_messages(body: bytes | memoryview, broker_name: str) -> list[MessageView]: ...
@overload
def decode_messages(body: bytes | memoryview, broker_name: str, make: type[MV]) -> list[MV]: ...
def decode_messages(
    body: bytes | memoryview, broker_name: str, make: type[MessageView] = MessageView
) -> list[Any]:
    """The records of a pull (or query) reply as messages (of class ``make``, a
    ``MessageView`` made without ``__init__``): their header fields read, the rest decoded
    (bodies inflated) when first read.

    Raises:
        MessageDecodeError: the body is truncated or not in the record layout; checked
            here, for every record, so that reading a field later cannot fail.
    """
    try:
        return decode_records(body, broker_name, make)
    except RecordError as exc:
        raise MessageDecodeError(str(exc)) from None


def _local_ipv4() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # No packet is sent: connect() on UDP only picks the outgoing interface.
            s.connect(("10.255.255.255", 1))
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


# The process's UNIQ_KEY generator (MessageClientIDSetter is a static one in Java).
UNIQ_IDS = UniqIdGenerator(_local_ipv4())
