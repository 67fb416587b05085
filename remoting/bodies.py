"""JSON request and response bodies other than routes.

RocketMQ counterpart: the ``RemotingSerializable`` bodies of
``org.apache.rocketmq.common.protocol.body`` and ``...protocol.heartbeat``: ``HeartbeatData``,
``TopicConfigSerializeWrapper``, ``RegisterBrokerBody``, ``ClusterInfo``, ``TopicList``,
``KVTable``, ``LockBatchRequestBody``, ``ConsumeStats``, ``ConsumeStatsList``,
``TopicStatsTable``, ``BrokerStatsData``, ``GroupList``,
``GetBrokerClusterAclConfigResponseBody``, ``SubscriptionGroupConfig`` and friends
(protocol.md §8).

Readers are lenient where real clients differ: the C++ client sends enums as ordinals,
numbers as strings and leaves out empty arrays and defaulted fields (§8.5). Writers emit what
fastjson emits, in standard JSON, except for maps keyed by a ``MessageQueue``: fastjson
writes the queue object itself as the key, and Java tools expect exactly that, so
``encode_queue_map`` does too and ``decode_queue_map`` reads it back.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from remoting.route import PERM_INHERIT as PERM_INHERIT  # noqa: PLC0414 - re-exported
from remoting.route import PERM_PRIORITY as PERM_PRIORITY  # noqa: PLC0414 - re-exported
from remoting.route import PERM_READ as PERM_READ  # noqa: PLC0414 - re-exported
from remoting.route import PERM_WRITE as PERM_WRITE  # noqa: PLC0414 - re-exported
from remoting.route import MessageQueue, dumps, loads

# ============================================================================== enums


class ConsumeType(Enum):
    CONSUME_ACTIVELY = 0  # pull consumers
    CONSUME_PASSIVELY = 1  # push consumers


class MessageModel(Enum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


_E = TypeVar("_E", bound=Enum)

# What reading a body of the wrong shape raises from these decoders: bad JSON or UTF-8
# (ValueError), a field missing (KeyError), a value of the wrong type (TypeError, and
# AttributeError for a list or a number where an object belongs), a list too short
# (IndexError). One tuple, so every reader of a peer's body catches the same set.
MALFORMED_BODY: tuple[type[Exception], ...] = (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
)


def _enum(cls: type[_E], value: Any, default: _E) -> _E:
    """Java writes enum names, C++ their ordinals (as numbers or strings)."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        try:
            return cls[value]
        except KeyError:
            raise ValueError(f"unknown {cls.__name__} {value!r}") from None
    return cls(int(value))


def _bool(value: Any, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() in ("true", "1")
    return bool(value)


def _int(value: Any, default: int = 0) -> int:
    if value is None or value == "":
        return default
    return int(value)


# ======================================================================== data version


@dataclass(slots=True)
class DataVersion:
    """A counter and a timestamp, bumped on every change of a broker table."""

    timestamp: int = 0
    counter: int = 0

    def bump(self, now_ms: int) -> None:
        self.timestamp = now_ms
        self.counter += 1

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> DataVersion:
        d = d or {}
        return cls(timestamp=_int(d.get("timestamp")), counter=_int(d.get("counter")))


# ============================================================================== topics

# PermName's bits are route.py's (a route's queue data carries them); re-exported above for
# the many importers that know them from bodies.


@dataclass(slots=True)
class TopicConfig:
    """One topic on one broker (RocketMQ ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ 5's topic attributes (``message.type``: NORMAL, FIFO, DELAY, TRANSACTION,
    # MIXED); written only when set, so a 4.x topic's JSON is 4.9's.
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if self.attributes:
            doc["attributes"] = dict(self.attributes)
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(d["topicName"]),
            read_queue_nums=_int(d.get("readQueueNums"), 16),
            write_queue_nums=_int(d.get("writeQueueNums"), 16),
            perm=_int(d.get("perm"), PERM_READ | PERM_WRITE),
            topic_filter_type=str(d.get("topicFilterType") or "SINGLE_TAG"),
            topic_sys_flag=_int(d.get("topicSysFlag")),
            order=_bool(d.get("order")),
            attributes={
                str(k): str(v) for k, v in (d.get("attributes") or {}).items() if v is not None
            }
            if isinstance(d.get("attributes"), dict)
            else {},
        )

    def compact(self) -> str:
        """``TopicConfig.encode()``: the compressed registration's per-topic text."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type}"
        )

    @classmethod
    def from_compact(cls, text: str) -> TopicConfig:
        name, read, write, perm, filter_type = text.split(" ")
        return cls(name, int(read), int(write), int(perm), filter_type)


@dataclass(slots=True)
class TopicConfigWrapper:
    """``TopicConfigSerializeWrapper``: body of GET_ALL_TOPIC_CONFIG and topics.json."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {k: v.to_json() for k, v in self.topic_config_table.items()},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicConfigWrapper:
        table = {
            str(k): TopicConfig.from_json(v) for k, v in (d.get("topicConfigTable") or {}).items()
        }
        return cls(table, DataVersion.from_json(d.get("dataVersion")))


_INT = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody:
    """Body of REGISTER_BROKER (103): the broker's topics and filter servers."""

    topic_config: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, *, compressed: bool = False) -> bytes:
        if not compressed:
            return dumps(
                {
                    "filterServerList": self.filter_server_list,
                    "topicConfigSerializeWrapper": self.topic_config.to_json(),
                }
            )
        parts: list[bytes] = []

        def put(blob: bytes) -> None:
            parts.append(_INT.pack(len(blob)))
            parts.append(blob)

        put(dumps(self.topic_config.data_version.to_json()))
        parts.append(_INT.pack(len(self.topic_config.topic_config_table)))
        for tc in self.topic_config.topic_config_table.values():
            put(tc.compact().encode())
        put(dumps(self.filter_server_list))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, body: bytes, *, compressed: bool) -> RegisterBrokerBody:
        """Raises ValueError (or zlib.error, struct.error) when the body is malformed."""
        if not compressed:
            d = loads(body) if body else {}
            return cls(
                TopicConfigWrapper.from_json(d.get("topicConfigSerializeWrapper") or {}),
                [str(s) for s in d.get("filterServerList") or []],
            )
        raw = zlib.decompress(body)
        pos = 0

        def take() -> bytes:
            nonlocal pos
            (n,) = _INT.unpack_from(raw, pos)
            if n < 0 or pos + 4 + n > len(raw):
                raise ValueError("compressed registration body is truncated")
            pos += 4 + n
            return raw[pos - n : pos]

        version = DataVersion.from_json(loads(take()))
        (count,) = _INT.unpack_from(raw, pos)
        pos += 4
        table = {}
        for _ in range(count):
            tc = TopicConfig.from_compact(take().decode())
            table[tc.topic_name] = tc
        filters = [str(s) for s in loads(take())]
        return cls(TopicConfigWrapper(table, version), filters)


# ========================================================================= name server


@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        out["topicList"] = self.topic_list
        return dumps(out)

    @classmethod
    def decode(cls, body: bytes | memoryview) -> TopicList:
        d = loads(body)
        return cls([str(t) for t in d.get("topicList") or []], d.get("brokerAddr"))


@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps({"table": self.table})

    @classmethod
    def decode(cls, body: bytes | memoryview) -> KVTable:
        d = loads(body)
        return cls({str(k): str(v) for k, v in (d.get("table") or {}).items()})


# ============================================================================ heartbeat


@dataclass(slots=True)
class SubscriptionData:
    """One topic a consumer subscribes to, with its TAG (or SQL92) expression."""

    topic: str
    sub_string: str = "*"
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": self.code_set,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubscriptionData:
        return cls(
            topic=str(d["topic"]),
            sub_string=str(d.get("subString") or "*"),
            tags_set=[str(t) for t in d.get("tagsSet") or []],
            code_set=[_int(c) for c in d.get("codeSet") or []],
            sub_version=_int(d.get("subVersion")),
            expression_type=str(d.get("expressionType") or "TAG"),
            class_filter_mode=_bool(d.get("classFilterMode")),
        )


def parse_tag_expression(expression: str | None) -> tuple[str, list[str]]:
    """``FilterAPI.buildSubscriptionData`` for TAG: (subString, tags); ``*`` means all."""
    if expression is None or expression.strip() in ("", "*"):
        return "*", []
    tags = [t.strip() for t in expression.split("||")]
    return expression, [t for t in tags if t]


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ConsumerData:
        return cls(
            group_name=str(d["groupName"]),
            consume_type=_enum(ConsumeType, d.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
            message_model=_enum(MessageModel, d.get("messageModel"), MessageModel.CLUSTERING),
            consume_from_where=_enum(
                ConsumeFromWhere,
                d.get("consumeFromWhere"),
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            ),
            subscription_data_set=[
                SubscriptionData.from_json(s) for s in d.get("subscriptionDataSet") or []
            ],
            unit_mode=_bool(d.get("unitMode")),
        )


@dataclass(slots=True)
class HeartbeatData:
    """Body of HEART_BEAT (34)."""

    client_id: str
    producer_data_set: list[str] = field(default_factory=list)  # group names
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def encode(self) -> bytes:
        return dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
                "producerDataSet": [{"groupName": g} for g in self.producer_data_set],
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> HeartbeatData:
        """Raises ValueError, KeyError or TypeError when the body is not a heartbeat."""
        d = loads(body)
        if not isinstance(d, dict):
            raise TypeError("heartbeat body is not a JSON object")
        return cls(
            client_id=str(d.get("clientID") or ""),
            producer_data_set=[str(p["groupName"]) for p in d.get("producerDataSet") or []],
            consumer_data_set=[ConsumerData.from_json(c) for c in d.get("consumerDataSet") or []],
        )


# ================================================================ locks and consumer list


@dataclass(slots=True)
class LockBatchBody:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request body."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool = False

    def encode(self) -> bytes:
        return dumps(
            {
                "clientId": self.client_id,
                "consumerGroup": self.consumer_group,
                "mqSet": [mq.to_json() for mq in self.mq_set],
                "onlyThisBroker": self.only_this_broker,
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> LockBatchBody:
        d = loads(body)
        return cls(
            consumer_group=str(d["consumerGroup"]),
            client_id=str(d["clientId"]),
            mq_set=[MessageQueue.from_json(q) for q in d.get("mqSet") or []],
            only_this_broker=_bool(d.get("onlyThisBroker")),
        )


def encode_lock_ok(queues: list[MessageQueue]) -> bytes:
    return dumps({"lockOKMQSet": [mq.to_json() for mq in queues]})


def decode_lock_ok(body: bytes | memoryview) -> list[MessageQueue]:
    return [MessageQueue.from_json(q) for q in loads(body).get("lockOKMQSet") or []]


def encode_consumer_list(client_ids: list[str]) -> bytes:
    return dumps({"consumerIdList": client_ids})


def decode_consumer_list(body: bytes | memoryview) -> list[str]:
    return [str(c) for c in loads(body).get("consumerIdList") or []]


# ================================================================== queue-keyed maps

_MQ_KEY = re.compile(
    r'\{"brokerName":("(?:\\.|[^"\\])*"),"queueId":(-?\d+),"topic":("(?:\\.|[^"\\])*")\}:'
)


def encode_queue_map(table: Mapping[MessageQueue, Any]) -> str:
    """A ``Map<MessageQueue, …>`` as fastjson writes it: the queue object is the key."""
    items = [
        dumps(mq.to_json()).decode() + ":" + dumps(v).decode() for mq, v in sorted(table.items())
    ]
    return "{" + ",".join(items) + "}"


def decode_queue_map(text: str) -> dict[MessageQueue, Any]:
    """Read ``encode_queue_map`` output (and fastjson's, which has the same shape)."""

    def key(m: re.Match[str]) -> str:
        packed = json.dumps([json.loads(m.group(1)), int(m.group(2)), json.loads(m.group(3))])
        return json.dumps(packed) + ":"

    raw: dict[str, Any] = json.loads(_MQ_KEY.sub(key, text))
    out = {}
    for k, v in raw.items():
        broker_name, queue_id, topic = json.loads(k)
        out[MessageQueue(topic, broker_name, queue_id)] = v
    return out


def pop_queue_map(text: str, name: str) -> tuple[str, dict[MessageQueue, Any]]:
    """Take the ``Map<MessageQueue, …>`` field ``name`` out of a fastjson object (its keys
    are objects, which JSON parsers refuse): the rest as JSON text, and the map.

    Raises:
        ValueError: the text is not an object or the field cannot be read.
    """
    marker = f'"{name}":'
    start = text.find(marker)
    if start < 0:
        return text, {}
    i = start + len(marker)
    if i >= len(text) or text[i] != "{":
        raise ValueError(f"field {name} is not an object")
    depth, in_string, escaped, j = 0, False, False, i
    while j < len(text):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    else:
        raise ValueError(f"field {name} is not closed")
    table = decode_queue_map(text[i : j + 1])
    head, tail = text[:start].rstrip(), text[j + 1 :].lstrip()
    if head.endswith(","):
        head = head[:-1]  # the field was not the first: drop the comma before it
    elif tail.startswith(","):
        tail = tail[1:]  # it was the first: drop the comma after it
    return head + tail, table


def encode_reset_offset_body(table: Mapping[MessageQueue, int]) -> bytes:
    """``ResetOffsetBody`` (INVOKE_BROKER_TO_RESET_OFFSET reply, RESET_CONSUMER_CLIENT_OFFSET
    body): ``{"offsetTable":{MessageQueue: offset}}``."""
    return ('{"offsetTable":' + encode_queue_map(table) + "}").encode()


def decode_reset_offset_body(body: bytes | memoryview) -> dict[MessageQueue, int]:
    """Read ``encode_reset_offset_body`` output (and fastjson's).

    Raises:
        ValueError: not a ResetOffsetBody.
    """
    text = bytes(body).decode()
    head = '{"offsetTable":'
    if not text.startswith(head) or not text.endswith("}"):
        raise ValueError("not a ResetOffsetBody")
    return {mq: int(v) for mq, v in decode_queue_map(text[len(head) : -1]).items()}


@dataclass(slots=True)
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }


def encode_topic_stats(table: dict[MessageQueue, TopicOffset]) -> bytes:
    """GET_TOPIC_STATS_INFO reply: ``{"offsetTable":{MessageQueue: TopicOffset}}``."""
    inner = encode_queue_map({mq: t.to_json() for mq, t in table.items()})
    return ('{"offsetTable":' + inner + "}").encode()


def decode_topic_stats(body: bytes | memoryview) -> dict[MessageQueue, TopicOffset]:
    text = bytes(body).decode()
    inner = text[len('{"offsetTable":') : -1]
    return {
        mq: TopicOffset(
            _int(v.get("minOffset")),
            _int(v.get("maxOffset")),
            _int(v.get("lastUpdateTimestamp")),
        )
        for mq, v in decode_queue_map(inner).items()
    }


@dataclass(slots=True)
class OffsetWrapper:
    """A consumer group's position in one queue (RocketMQ ``OffsetWrapper``)."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }


def encode_consume_stats(table: dict[MessageQueue, OffsetWrapper], consume_tps: float) -> bytes:
    """GET_CONSUME_STATS reply: ``{"consumeTps":…,"offsetTable":{MessageQueue: …}}``."""
    inner = encode_queue_map({mq: w.to_json() for mq, w in table.items()})
    return (
        '{"consumeTps":' + json.dumps(float(consume_tps)) + ',"offsetTable":' + inner + "}"
    ).encode()


def decode_consume_stats(
    body: bytes | memoryview,
) -> tuple[float, dict[MessageQueue, OffsetWrapper]]:
    text = bytes(body).decode()
    head, _, rest = text.partition(',"offsetTable":')
    tps = float(head[len('{"consumeTps":') :])
    table = {
        mq: OffsetWrapper(
            _int(v.get("brokerOffset")), _int(v.get("consumerOffset")), _int(v.get("lastTimestamp"))
        )
        for mq, v in decode_queue_map(rest[:-1]).items()
    }
    return tps, table


@dataclass(slots=True)
class ConsumeStats:
    """One group's positions on one broker (``ConsumeStats``)."""

    consume_tps: float
    offset_table: dict[MessageQueue, OffsetWrapper]

    def encode_text(self) -> str:
        inner = encode_queue_map({mq: w.to_json() for mq, w in self.offset_table.items()})
        return (
            '{"consumeTps":' + json.dumps(float(self.consume_tps)) + ',"offsetTable":' + inner + "}"
        )

    def total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


def encode_consume_stats_list(
    broker_addr: str, groups: list[tuple[str, list[ConsumeStats]]], total_diff: int
) -> bytes:
    """GET_BROKER_CONSUME_STATS reply, ``ConsumeStatsList``: ``{"brokerAddr":…,
    "consumeStatsList":[{group:[ConsumeStats…]}…],"totalDiff":…}`` (fastjson's field order;
    the offset tables' keys are queue objects, as fastjson writes them)."""
    items = [
        "{" + json.dumps(group) + ":[" + ",".join(cs.encode_text() for cs in stats) + "]}"
        for group, stats in groups
    ]
    return (
        '{"brokerAddr":' + json.dumps(broker_addr) + ',"consumeStatsList":[' + ",".join(items)
        + '],"totalDiff":' + str(int(total_diff)) + "}"
    ).encode()  # fmt: skip


def decode_consume_stats_list(
    body: bytes | memoryview,
) -> tuple[str, list[tuple[str, list[ConsumeStats]]], int]:
    """Read ``encode_consume_stats_list`` output (and a 4.9 broker's): the broker address,
    each group's stats in order, and the total diff.

    Raises:
        ValueError: not a ConsumeStatsList.
    """
    text = bytes(body).decode()
    groups: list[tuple[str, list[ConsumeStats]]] = []
    # Each offsetTable has queue objects as keys: take them out one by one, leaving JSON.
    tables: list[dict[MessageQueue, Any]] = []
    while '"offsetTable":' in text:
        text, table = pop_queue_map(text, "offsetTable")
        tables.append(table)
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a ConsumeStatsList")  # noqa: TRY004 - bad input, not a bad call
    taken = iter(tables)
    for entry in doc.get("consumeStatsList") or []:
        for group, stats in entry.items():
            out = []
            for cs in stats:
                table = next(taken, {})
                out.append(
                    ConsumeStats(
                        float(cs.get("consumeTps") or 0.0),
                        {
                            mq: OffsetWrapper(
                                _int(v.get("brokerOffset")),
                                _int(v.get("consumerOffset")),
                                _int(v.get("lastTimestamp")),
                            )
                            for mq, v in table.items()
                        },
                    )
                )
            groups.append((str(group), out))
    return str(doc.get("brokerAddr") or ""), groups, _int(doc.get("totalDiff"))


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window of a broker statistic (``BrokerStatsItem``): the total over it, per second,
    and per call (``avgpt``: the messages or bytes a request carried on average)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> StatsSnapshot:
        d = d or {}
        return cls(_int(d.get("sum")), float(d.get("tps") or 0.0), float(d.get("avgpt") or 0.0))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA reply: a statistic over the last minute, hour and day."""

    minute: StatsSnapshot
    hour: StatsSnapshot
    day: StatsSnapshot

    def encode(self) -> bytes:
        return dumps(
            {
                "statsDay": self.day.to_json(),
                "statsHour": self.hour.to_json(),
                "statsMinute": self.minute.to_json(),
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> BrokerStatsData:
        d = loads(body)
        return cls(
            StatsSnapshot.from_json(d.get("statsMinute")),
            StatsSnapshot.from_json(d.get("statsHour")),
            StatsSnapshot.from_json(d.get("statsDay")),
        )

    def sum_24h(self) -> int:
        """mqadmin's ``compute24HourSum``: the day's total, else the hour's, else the
        minute's (a young broker has no full day yet)."""
        return self.day.sum or self.hour.sum or self.minute.sum


@dataclass(slots=True)
class ConsumeMessageDirectlyResult:
    """CONSUME_MESSAGE_DIRECTLY's answer (RocketMQ's ``ConsumeMessageDirectlyResult``): how
    one client's listener took a message handed to it. ``consume_result`` is CR_SUCCESS,
    CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION or CR_RETURN_NULL; ``remark`` says
    why when the listener raised. Written by our SDK and the gRPC proxy, read by the admin."""

    consume_result: str
    order: bool = False
    auto_commit: bool = True
    remark: str | None = None
    spent_ms: int = 0

    def encode(self) -> bytes:
        d: dict[str, Any] = {
            "order": self.order,
            "autoCommit": self.auto_commit,
            "consumeResult": self.consume_result,
            "spentTimeMills": self.spent_ms,
        }
        if self.remark is not None:  # fastjson leaves a null field out
            d["remark"] = self.remark
        return dumps(d)

    @classmethod
    def decode(cls, body: bytes | memoryview) -> ConsumeMessageDirectlyResult:
        d = loads(body)
        remark = d.get("remark")
        return cls(
            str(d["consumeResult"]),
            bool(d.get("order", False)),
            bool(d.get("autoCommit", True)),
            None if remark is None else str(remark),
            int(d.get("spentTimeMills", 0)),
        )

    def java_text(self) -> str:
        """Java's ``toString``, which mqadmin prints."""
        return (
            f"ConsumeMessageDirectlyResult [order={str(self.order).lower()}, "
            f"autoCommit={str(self.auto_commit).lower()}, "
            f"consumeResult={self.consume_result}, "
            f"remark={'null' if self.remark is None else self.remark}, "
            f"spentTimeMills={self.spent_ms}]"
        )


@dataclass(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO reply: the groups that consume a topic on the broker."""

    groups: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return dumps({"groupList": self.groups})

    @classmethod
    def decode(cls, body: bytes | memoryview) -> GroupList:
        return cls([str(g) for g in loads(body).get("groupList") or []])


@dataclass(slots=True)
class PlainAccessConfig:
    """An ACL account as GET_BROKER_CLUSTER_ACL_CONFIG sends it (``PlainAccessConfig``)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] = field(default_factory=list)
    group_perms: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"accessKey": self.access_key, "admin": self.admin}
        perms = {"defaultGroupPerm": self.default_group_perm}
        perms["defaultTopicPerm"] = self.default_topic_perm
        out.update({k: v for k, v in perms.items() if v is not None})  # fastjson leaves nulls out
        out["groupPerms"] = self.group_perms
        out["secretKey"] = self.secret_key
        out["topicPerms"] = self.topic_perms
        if self.white_remote_address is not None:
            out["whiteRemoteAddress"] = self.white_remote_address
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PlainAccessConfig:
        return cls(
            access_key=str(d.get("accessKey") or ""),
            secret_key=str(d.get("secretKey") or ""),
            white_remote_address=d.get("whiteRemoteAddress"),
            admin=_bool(d.get("admin")),
            default_topic_perm=d.get("defaultTopicPerm"),
            default_group_perm=d.get("defaultGroupPerm"),
            topic_perms=[str(x) for x in d.get("topicPerms") or []],
            group_perms=[str(x) for x in d.get("groupPerms") or []],
        )


@dataclass(slots=True)
class AclConfigBody:
    """GET_BROKER_CLUSTER_ACL_CONFIG reply (``GetBrokerClusterAclConfigResponseBody``)."""

    global_white_addrs: list[str] = field(default_factory=list)
    accounts: list[PlainAccessConfig] = field(default_factory=list)

    def encode(self) -> bytes:
        return dumps(
            {
                "globalWhiteAddrs": self.global_white_addrs,
                "plainAccessConfigs": [a.to_json() for a in self.accounts],
            }
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> AclConfigBody:
        d = loads(body)
        return cls(
            [str(a) for a in d.get("globalWhiteAddrs") or []],
            [PlainAccessConfig.from_json(a) for a in d.get("plainAccessConfigs") or []],
        )


# ====================================================================== subscription groups


# Topics a broker keeps for itself (TopicValidator's system topic set, with RocketMQ 5's
# timer topic): a broker enforces them, and operators' views show them apart.
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "RMQ_SYS_TRACE_TOPIC",
        "rmq_sys_wheel_timer",
    }
)

# Groups RocketMQ defines for its own tools and internal consumers (MixAll): every broker
# has them, and operators' views leave them out.
BUILTIN_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_RMQ_SYS_TRANS",
)


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """A consumer group's settings on one broker (RocketMQ ``SubscriptionGroupConfig``)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # RocketMQ 5: a FIFO group (5.x clients get fifo settings and orderly pops); written
    # only when set, so a 4.x group's JSON is 4.9's.
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            **({"consumeMessageOrderly": True} if self.consume_message_orderly else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        return cls(
            group_name=str(d["groupName"]),
            consume_enable=_bool(d.get("consumeEnable"), True),
            consume_from_min_enable=_bool(d.get("consumeFromMinEnable"), True),
            consume_broadcast_enable=_bool(d.get("consumeBroadcastEnable"), True),
            retry_queue_nums=_int(d.get("retryQueueNums"), 1),
            retry_max_times=_int(d.get("retryMaxTimes"), 16),
            broker_id=_int(d.get("brokerId")),
            which_broker_when_consume_slowly=_int(d.get("whichBrokerWhenConsumeSlowly"), 1),
            notify_consumer_ids_changed_enable=_bool(d.get("notifyConsumerIdsChangedEnable"), True),
            consume_message_orderly=_bool(d.get("consumeMessageOrderly")),
        )
