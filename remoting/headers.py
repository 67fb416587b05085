"""Typed custom headers: the only place where camelCase wire names appear.

RocketMQ counterpart: the ``CommandCustomHeader`` classes of
``org.apache.rocketmq.common.protocol.header`` and ``RemotingCommand.decodeCommandCustomHeader``.

A header is a ``slots`` dataclass whose fields carry their wire name in ``wire(...)``.
``from_ext_fields`` parses the strings of a command's ``ext_fields`` the way Java does
(``Integer.parseInt``/``Long.parseLong``; ``Boolean.parseBoolean``, so only "true" in any case
is true) and raises ``HeaderError`` naming the field when a required one is missing or a
number does not parse. ``to_ext_fields`` writes every set field as a string, in field order
(the header codecs keep that order on the wire). Field types are limited to ``str``, ``int``
and ``bool`` (optionally ``| None``). Both are generated per class on first use.

Outside this module no code reads or writes a wire name by hand:
tests/remoting/test_header_discipline.py walks the tree and fails on one.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from remoting.errors import HeaderError

# Per header class: its fields as (attribute, wire name, type, required, default), computed
# on first use; and per (class, wire-name map): the parse and write functions built from them.
_Field = tuple[str, str, type, bool, Any]
_FIELDS: dict[type, tuple[_Field, ...]] = {}
_Parse = Callable[[Mapping[str, str]], Any]
_Write = Callable[[Any], dict[str, str]]
_OWN_NAMES: dict[type, tuple[_Parse, _Write]] = {}
_RENAMED: dict[tuple[type, int], tuple[_Parse, _Write]] = {}  # by (class, id of the map)
_RENAMED_MAPS: list[Mapping[str, str]] = []


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A header field with its wire name; no default means the field is required."""
    return dataclasses.field(default=default, metadata={"wire": name})


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _to_int(raw: str, name: str) -> int:
    # Long.parseLong: optional sign and ASCII digits only; Python's int() would also take
    # spaces and underscores.
    if not _JAVA_INTEGER.fullmatch(raw):
        raise HeaderError(f"the custom field <{name}> is not a number: {raw!r}")
    value = int(raw)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise HeaderError(f"the custom field <{name}> is out of range: {raw!r}")
    return value


def _wire_str(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


# How a generated parser turns ``raw`` into a field's value, per field type. An int of at
# most 18 plain ASCII digits is a Long whatever it says, so it skips _to_int's regex and range
# check (that is the common case, and it is on every send and pull); anything else goes
# through _to_int, which decides as Long.parseLong would. Boolean.parseBoolean: only "true"
# in any case is true, "1" is false.
_PARSE_EXPR = {
    str: "raw",
    int: "int(raw) if raw.isdigit() and raw.isascii() and len(raw) < 19 else _to_int(raw, {key!r})",
    bool: 'raw.lower() == "true"',
}
# How a generated writer spells a value: as _wire_str would, without the call for the
# declared type.
_WRITE_EXPR = {
    str: "v if type(v) is str else _wire_str(v)",
    int: "str(v) if type(v) is int else _wire_str(v)",
    bool: "_wire_str(v)",
}


def _fields_of(cls: type) -> tuple[_Field, ...]:
    fields = _FIELDS.get(cls)
    if fields is not None:
        return fields
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if params.frozen or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: a header is not frozen and has no __post_init__")
    hints = typing.get_type_hints(cls)
    built: list[_Field] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if isinstance(tp, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        if tp not in _PARSE_EXPR:
            raise TypeError(f"{cls.__name__}.{f.name}: header fields are str, int or bool")
        assert f.default_factory is dataclasses.MISSING, "wire() gives plain defaults only"
        required = f.default is dataclasses.MISSING
        built.append((f.name, f.metadata["wire"], tp, required, f.default))
    fields = _FIELDS[cls] = tuple(built)
    return fields


def _compile(cls: type, wire_names: Mapping[str, str] | None) -> tuple[_Parse, _Write]:
    """The parse and write functions of ``cls``, as straight-line code (as ``dataclasses``
    generates ``__init__``): per field one lookup and one store, where a loop over a table
    of the fields also pays the loop and a dispatch on the field's type.

    The parser does what the dataclass ``__init__`` would, without its call and keyword
    passing: it fills the slots of a new instance (so header classes may not be frozen nor
    have a ``__post_init__``; ``_fields_of`` refuses one).
    """
    names: dict[str, Any] = {
        "cls": cls,
        "new": object.__new__,
        "HeaderError": HeaderError,
        "_to_int": _to_int,
        "_wire_str": _wire_str,
    }
    parse = ["def parse(ext):", "    get = ext.get", "    self = new(cls)"]
    write = ["def write(self):", "    out = {}"]
    for attr, wire_name, tp, required, default in _fields_of(cls):
        key = wire_names[wire_name] if wire_names is not None else wire_name
        value = _PARSE_EXPR[tp].format(key=key)
        if tp is str and default is None:
            parse.append(f"    self.{attr} = get({key!r})")  # absent is None, the default
        else:
            parse.append(f"    raw = get({key!r})")
            if required:
                parse.append("    if raw is None:")
                parse.append(f"        raise HeaderError({f'the custom field <{key}> is null'!r})")
                parse.append(f"    self.{attr} = {value}")
            else:
                names[f"d_{attr}"] = default
                parse.append(f"    self.{attr} = d_{attr} if raw is None else ({value})")
        write.append(f"    v = self.{attr}")
        write.append("    if v is not None:")
        write.append(f"        out[{key!r}] = {_WRITE_EXPR[tp]}")
    parse.append("    return self")
    write.append("    return out")
    exec("\n".join(parse) + "\n\n" + "\n".join(write), names)  # noqa: S102 - our own text
    return names["parse"], names["write"]


def _code(cls: type, wire_names: Mapping[str, str] | None) -> tuple[_Parse, _Write]:
    if wire_names is None:
        entry = _OWN_NAMES.get(cls)
        if entry is None:
            entry = _OWN_NAMES[cls] = _compile(cls, None)
        return entry
    key = (cls, id(wire_names))
    entry = _RENAMED.get(key)
    if entry is None:
        entry = _RENAMED[key] = _compile(cls, wire_names)
        _RENAMED_MAPS.append(wire_names)  # kept, so that no other map takes its id
    return entry


class CommandHeader:
    """Base of typed headers. Subclasses are ``@dataclass(slots=True, kw_only=True)``."""

    __slots__ = ()

    @classmethod
    def from_ext_fields(
        cls, ext: Mapping[str, str], *, wire_names: Mapping[str, str] | None = None
    ) -> Self:
        """Parse a command's ext_fields.

        Args:
            wire_names: other names the fields travel under (the one-letter send header).

        Raises:
            HeaderError: a required field is missing or a number does not parse; the
                message names the field as it travels.
        """
        # the lookup by class alone is the common case, and on every send and pull
        own = _OWN_NAMES.get(cls) if wire_names is None else None
        parse: Callable[[Mapping[str, str]], Self] = (own or _code(cls, wire_names))[0]
        return parse(ext)

    def to_ext_fields(self, *, wire_names: Mapping[str, str] | None = None) -> dict[str, str]:
        """The header as wire ext_fields, in field order; fields that are None are left out."""
        own = _OWN_NAMES.get(type(self)) if wire_names is None else None
        return (own or _code(type(self), wire_names))[1](self)


# ============================================================================ name server


@dataclass(slots=True, kw_only=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = wire("topic")
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", None)


@dataclass(slots=True, kw_only=True)
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId")
    compressed: bool = wire("compressed", False)
    body_crc32: int = wire("bodyCrc32", 0)


@dataclass(slots=True, kw_only=True)
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = wire("haServerAddr", None)
    master_addr: str | None = wire("masterAddr", None)


@dataclass(slots=True, kw_only=True)
class UnregisterBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@dataclass(slots=True, kw_only=True)
class KVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (value set), GET_KV_CONFIG and DELETE_KV_CONFIG (value unset)."""

    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str | None = wire("value", None)


@dataclass(slots=True, kw_only=True)
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = wire("value", None)


@dataclass(slots=True, kw_only=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = wire("namespace")


@dataclass(slots=True, kw_only=True)
class TopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV / DELETE_TOPIC_IN_BROKER, and GET_TOPIC_STATS_INFO (202,
    Java's GetTopicStatsInfoRequestHeader) with the topic alone."""

    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", None)


@dataclass(slots=True, kw_only=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = wire("cluster")


@dataclass(slots=True, kw_only=True)
class BrokerNameRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER."""

    broker_name: str = wire("brokerName")


@dataclass(slots=True, kw_only=True)
class QueryDataVersionResponseHeader(CommandHeader):
    """QUERY_DATA_VERSION (322): whether the broker's topic config changed since it last
    registered (the request carries RegisterBrokerRequestHeader and the DataVersion)."""

    changed: bool | None = wire("changed", None)


@dataclass(slots=True, kw_only=True)
class WipeWritePermResponseHeader(CommandHeader):
    wipe_topic_count: int = wire("wipeTopicCount")


@dataclass(slots=True, kw_only=True)
class AddWritePermResponseHeader(CommandHeader):
    add_topic_count: int = wire("addTopicCount")


# ================================================================================= send

# SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and SEND_REPLY_MESSAGE_V2 (325) carry the
# same header with one-letter names, to save bytes on every send.
_SEND_V2_NAMES = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "bname": "n",
}


@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10, long names); ``from_v2``/``to_v2`` for the short-name codes."""

    producer_group: str = wire("producerGroup")
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums")
    queue_id: int = wire("queueId")
    sys_flag: int = wire("sysFlag")
    born_timestamp: int = wire("bornTimestamp")
    flag: int = wire("flag")
    properties: str | None = wire("properties", None)
    reconsume_times: int | None = wire("reconsumeTimes", None)
    unit_mode: bool = wire("unitMode", False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", None)
    batch: bool = wire("batch", False)
    broker_name: str | None = wire("bname", None)

    # from_v2 and to_v2 are ``from/to_ext_fields(wire_names=_SEND_V2_NAMES)`` with the
    # generated code called directly: one call less on every send.

    @classmethod
    def from_v2(cls, ext: Mapping[str, str]) -> SendMessageRequestHeader:
        """Parse the one-letter header of codes 310/320/325."""
        header: SendMessageRequestHeader = _code(cls, _SEND_V2_NAMES)[0](ext)
        return header

    def to_v2(self) -> dict[str, str]:
        return _code(type(self), _SEND_V2_NAMES)[1](self)

    @staticmethod
    def batch_flag(ext: Mapping[str, str], *, v2: bool) -> bool:
        """The batch flag as the broker takes it: what ``batch`` holds (Java's
        ``Boolean.parseBoolean``) and also "1", which the C++ client 1.2 sends for a batch."""
        raw = ext.get(_SEND_V2_NAMES["batch"] if v2 else "batch", "")
        return raw.strip().lower() in ("true", "1")


@dataclass(slots=True, kw_only=True)
class SendMessageResponseHeader(CommandHeader):
    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    transaction_id: str | None = wire("transactionId", None)
    # Not fields of Java's class: its broker adds them to the reply's extFields
    # (MessageConst.PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH), and its client reads them
    # from there. TRACE_ON stays a string: the client turns tracing off only on "false".
    msg_region: str | None = wire("MSG_REGION", None)
    trace_on: str | None = wire("TRACE_ON", None)

    @staticmethod
    def ext_fields_of(
        msg_id: str, queue_id: int, queue_offset: int, msg_region: str, trace_on: str
    ) -> dict[str, str]:
        """``SendMessageResponseHeader(...).to_ext_fields()`` of a stored send, without
        building the header: the broker answers every send with one (the cost of both is
        compared as told at ``PullMessageResponseHeader.ext_fields_of``)."""
        return {
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "MSG_REGION": msg_region,
            "TRACE_ON": trace_on,
        }


# ================================================================================= pull


@dataclass(slots=True, kw_only=True)
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    max_msg_nums: int = wire("maxMsgNums")
    sys_flag: int = wire("sysFlag")
    commit_offset: int = wire("commitOffset")
    suspend_timeout_millis: int = wire("suspendTimeoutMillis")
    subscription: str | None = wire("subscription", None)
    sub_version: int = wire("subVersion")
    expression_type: str | None = wire("expressionType", None)


@dataclass(slots=True, kw_only=True)
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int = wire("suggestWhichBrokerId")
    next_begin_offset: int = wire("nextBeginOffset")
    min_offset: int = wire("minOffset")
    max_offset: int = wire("maxOffset")

    @staticmethod
    def ext_fields_of(
        suggest_which_broker_id: int, next_begin_offset: int, min_offset: int, max_offset: int
    ) -> dict[str, str]:
        """``PullMessageResponseHeader(...).to_ext_fields()`` without building the header:
        the broker answers every pull with one. tests/remoting/test_header_fast_paths.py
        checks both agree; this takes under half the time, as ``python -m timeit -s 'from
        remoting.headers import PullMessageResponseHeader as P'`` shows for the statement
        ``'P.ext_fields_of(0, 32, 0, 100)'`` against ``'P(suggest_which_broker_id=0,
        next_begin_offset=32, min_offset=0, max_offset=100).to_ext_fields()'``."""
        return {
            "suggestWhichBrokerId": str(suggest_which_broker_id),
            "nextBeginOffset": str(next_begin_offset),
            "minOffset": str(min_offset),
            "maxOffset": str(max_offset),
        }


# ============================================================================== offsets


@dataclass(slots=True, kw_only=True)
class QueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")


@dataclass(slots=True, kw_only=True)
class OffsetResponseHeader(CommandHeader):
    """The one field of the four offset replies below; Java has a class for each."""

    offset: int = wire("offset")


@dataclass(slots=True, kw_only=True)
class GetMaxOffsetResponseHeader(OffsetResponseHeader):
    """GET_MAX_OFFSET (30): the queue's max offset, one past its last message."""


@dataclass(slots=True, kw_only=True)
class GetMinOffsetResponseHeader(OffsetResponseHeader):
    """GET_MIN_OFFSET (31)."""


@dataclass(slots=True, kw_only=True)
class SearchOffsetResponseHeader(OffsetResponseHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""


@dataclass(slots=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(OffsetResponseHeader):
    """QUERY_CONSUMER_OFFSET (14): the group's committed offset (QUERY_NOT_FOUND: none)."""


@dataclass(slots=True, kw_only=True)
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    timestamp: int = wire("timestamp")


@dataclass(slots=True, kw_only=True)
class EarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int = wire("timestamp")


@dataclass(slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")


@dataclass(slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    commit_offset: int = wire("commitOffset")
    # Aerolite: set by a slave offering a commit it took while its master was away: the
    # DataVersion of the master's offset table the slave copied last. The master then takes
    # the offset only if larger than its own and unchanged since (RocketMQ has no offer).
    offset_version_timestamp: int | None = wire("offsetVersionTimestamp", None)
    offset_version_counter: int | None = wire("offsetVersionCounter", None)


# ====================================================================== clients and groups


@dataclass(slots=True, kw_only=True)
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", None)
    consumer_group: str | None = wire("consumerGroup", None)


@dataclass(slots=True, kw_only=True)
class ConsumerGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED and
    GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = wire("consumerGroup")


@dataclass(slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = wire("offset")
    group: str = wire("group")
    delay_level: int = wire("delayLevel")
    origin_msg_id: str | None = wire("originMsgId", None)
    origin_topic: str | None = wire("originTopic", None)
    unit_mode: bool = wire("unitMode", False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", None)


# ========================================================================= transactions


@dataclass(slots=True, kw_only=True)
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    commit_or_rollback: int = wire("commitOrRollback")
    from_transaction_check: bool = wire("fromTransactionCheck", False)
    msg_id: str = wire("msgId")
    transaction_id: str | None = wire("transactionId", None)


@dataclass(slots=True, kw_only=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    msg_id: str | None = wire("msgId", None)
    transaction_id: str | None = wire("transactionId", None)
    offset_msg_id: str | None = wire("offsetMsgId", None)


# ================================================================================ query


@dataclass(slots=True, kw_only=True)
class QueryMessageRequestHeader(CommandHeader):
    topic: str = wire("topic")
    key: str = wire("key")
    max_num: int = wire("maxNum")
    begin_timestamp: int = wire("beginTimestamp")
    end_timestamp: int = wire("endTimestamp")
    # MixAll.UNIQUE_MSG_QUERY_FLAG, an extField beside Java's header: the key is a message's
    # UNIQ_KEY, so the broker answers at most defaultQueryMaxNum records.
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", None)


@dataclass(slots=True, kw_only=True)
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset")


@dataclass(slots=True, kw_only=True)
class ViewMessageRequestHeader(CommandHeader):
    offset: int = wire("offset")


# ================================================================================ admin


@dataclass(slots=True, kw_only=True)
class CreateTopicRequestHeader(CommandHeader):
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_nums: int = wire("readQueueNums")
    write_queue_nums: int = wire("writeQueueNums")
    perm: int = wire("perm")
    topic_filter_type: str = wire("topicFilterType")
    topic_sys_flag: int | None = wire("topicSysFlag", None)
    order: bool = wire("order", False)
    attributes: str | None = wire("attributes", None)  # 5.x: "+message.type=FIFO,-k"


@dataclass(slots=True, kw_only=True)
class GroupNameRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (RocketMQ 4.9's DeleteSubscriptionGroupRequestHeader)."""

    group_name: str = wire("groupName")
    # mqadmin deleteSubGroup -r true: the group's committed offsets go with it.
    remove_offset: bool = wire("removeOffset", False)


@dataclass(slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", None)


@dataclass(slots=True, kw_only=True)
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315): one statistic (``TOPIC_PUT_NUMS``…) of one key."""

    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")


@dataclass(slots=True, kw_only=True)
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317): every group's positions; ``isOrder``: orderly topics
    only."""

    is_order: bool = wire("isOrder", False)


@dataclass(slots=True, kw_only=True)
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    index: int = wire("index")
    count: int = wire("count")
    consumer_group: str | None = wire("consumerGroup", None)


# ======================================================================== 5.x pop (§14)


@dataclass(slots=True, kw_only=True)
class PopMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")  # -1: any queue of the topic
    max_msg_nums: int = wire("maxMsgNums")
    invisible_time: int = wire("invisibleTime")  # ms
    poll_time: int = wire("pollTime")  # ms to hold the request when nothing is there
    born_time: int = wire("bornTime")
    init_mode: int = wire("initMode")  # ConsumeInitMode: 0 MIN (earliest), 1 MAX (latest)
    exp_type: str | None = wire("expType", None)
    exp: str | None = wire("exp", None)
    order: bool | None = wire("order", None)
    attempt_id: str | None = wire("attemptId", None)


@dataclass(slots=True, kw_only=True)
class PopMessageResponseHeader(CommandHeader):
    pop_time: int = wire("popTime")
    invisible_time: int = wire("invisibleTime")
    revive_qid: int = wire("reviveQid")
    rest_num: int = wire("restNum")
    start_offset_info: str | None = wire("startOffsetInfo", None)
    msg_offset_info: str | None = wire("msgOffsetInfo", None)
    order_count_info: str | None = wire("orderCountInfo", None)


@dataclass(slots=True, kw_only=True)
class AckMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")  # the receipt handle (ExtraInfoUtil format)
    offset: int = wire("offset")


@dataclass(slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")
    offset: int = wire("offset")
    invisible_time: int = wire("invisibleTime")


@dataclass(slots=True, kw_only=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: int = wire("popTime")
    invisible_time: int = wire("invisibleTime")
    revive_qid: int = wire("reviveQid")


# ------------------------------------------------------------------- operations (mqadmin)


@dataclass(slots=True, kw_only=True)
class ProducerGroupRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = wire("producerGroup")


@dataclass(slots=True, kw_only=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str = wire("topic")
    group: str = wire("group")
    timestamp: int = wire("timestamp")
    is_force: bool = wire("isForce", False)


@dataclass(slots=True, kw_only=True)
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314)."""

    src_group: str = wire("srcGroup")
    dest_group: str = wire("destGroup")
    topic: str | None = wire("topic", None)
    offline: bool = wire("offline", False)


@dataclass(slots=True, kw_only=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309): admin → broker → the client (mqadmin
    consumeMessage): one stored message, by its offset message id, for the client to
    consume now."""

    consumer_group: str = wire("consumerGroup")
    client_id: str | None = wire("clientId", None)
    msg_id: str = wire("msgId")
    broker_name: str | None = wire("brokerName", None)
    topic: str | None = wire("topic", None)


@dataclass(slots=True, kw_only=True)
class ConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307): admin → broker → the client."""

    consumer_group: str = wire("consumerGroup")
    client_id: str = wire("clientId")
    jstack_enable: bool = wire("jstackEnable", False)


@dataclass(slots=True, kw_only=True)
class GetBrokerConfigResponseHeader(CommandHeader):
    """GET_BROKER_CONFIG (26): the topic table's DataVersion (JSON) beside the config text."""

    version: str = wire("version")


# ------------------------------------------------------------------------------ ACL


@dataclass(slots=True, kw_only=True)
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): one plain_acl.yml account. A field left out (or
    empty) keeps the account's value; topicPerms and groupPerms are comma-separated. Java
    requires accessKey; a broker here answers one left out as an account without a key."""

    access_key: str = wire("accessKey", "")
    secret_key: str | None = wire("secretKey", None)
    white_remote_address: str | None = wire("whiteRemoteAddress", None)
    default_topic_perm: str | None = wire("defaultTopicPerm", None)
    default_group_perm: str | None = wire("defaultGroupPerm", None)
    topic_perms: str | None = wire("topicPerms", None)
    group_perms: str | None = wire("groupPerms", None)
    admin: bool | None = wire("admin", None)


@dataclass(slots=True, kw_only=True)
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = wire("accessKey", "")


@dataclass(slots=True, kw_only=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the whole global whitelist, comma-separated."""

    global_white_addrs: str = wire("globalWhiteAddrs", "")


@dataclass(slots=True, kw_only=True)
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO (52): the ACL file's version on this broker.

    As RocketMQ 4.9's: ``version`` is a DataVersion as JSON and ``allAclFileVersion`` a JSON
    object of each ACL file's path to its DataVersion (Java's client parses both)."""

    version: str = wire("version")
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    all_acl_file_version: str = wire("allAclFileVersion")
    accounts: int = wire("accounts")  # Aerolite: how many accounts the file holds
