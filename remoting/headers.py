"""Typed custom headers: the only place where camelCase wire names appear.

RocketMQ counterpart: the ``CommandCustomHeader`` classes of
``org.apache.rocketmq.common.protocol.header`` and ``RemotingCommand.decodeCommandCustomHeader``.

A header is a ``slots`` dataclass whose fields carry their wire name in ``wire(...)``.
``from_ext_fields`` parses the strings of a command's ``ext_fields`` the way Java does
(``Integer.parseInt``/``Long.parseLong``; ``Boolean.parseBoolean``, so only "true" in any case
is true) and raises ``HeaderError`` naming the field when a required one is missing or a
number does not parse. ``to_ext_fields`` writes every set field as a string. Field types are
limited to ``str``, ``int`` and ``bool`` (optionally ``| None``).
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

_Converter = Callable[[str, str], Any]
# Per header class: (attribute, wire name, converter, required), computed on first use.
_Spec = tuple[tuple[str, str, _Converter, bool], ...]
_SPECS: dict[type, _Spec] = {}


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


def _to_bool(raw: str, _name: str) -> bool:
    return raw.lower() == "true"  # Java Boolean.parseBoolean: "1" is false


def _to_str(raw: str, _name: str) -> str:
    return raw


_CONVERTERS: dict[type, _Converter] = {int: _to_int, bool: _to_bool, str: _to_str}


def _wire_str(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


class CommandHeader:
    """Base of typed headers. Subclasses are ``@dataclass(slots=True, kw_only=True)``."""

    __slots__ = ()

    @classmethod
    def _fields_spec(cls) -> _Spec:
        spec = _SPECS.get(cls)
        if spec is not None:
            return spec
        hints = typing.get_type_hints(cls)
        built: list[tuple[str, str, _Converter, bool]] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # subclasses are dataclasses
            tp = hints[f.name]
            if isinstance(tp, types.UnionType):
                tp = next(a for a in typing.get_args(tp) if a is not type(None))
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            built.append((f.name, f.metadata["wire"], _CONVERTERS[tp], required))
        spec = _SPECS[cls] = tuple(built)
        return spec

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
        kwargs: dict[str, Any] = {}
        for name, wire_name, convert, required in cls._fields_spec():
            key = wire_names[wire_name] if wire_names is not None else wire_name
            raw = ext.get(key)
            if raw is None:
                if required:
                    raise HeaderError(f"the custom field <{key}> is null")
                continue
            kwargs[name] = convert(raw, key)
        return cls(**kwargs)

    def to_ext_fields(self, *, wire_names: Mapping[str, str] | None = None) -> dict[str, str]:
        """The header as wire ext_fields; fields that are None are left out."""
        out: dict[str, str] = {}
        for name, wire_name, _convert, _required in self._fields_spec():
            value = getattr(self, name)
            if value is not None:
                key = wire_names[wire_name] if wire_names is not None else wire_name
                out[key] = _wire_str(value)
        return out


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
    """DELETE_TOPIC_IN_NAMESRV / DELETE_TOPIC_IN_BROKER."""

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

    @classmethod
    def from_v2(cls, ext: Mapping[str, str]) -> SendMessageRequestHeader:
        """Parse the one-letter header of codes 310/320/325."""
        return cls.from_ext_fields(ext, wire_names=_SEND_V2_NAMES)

    def to_v2(self) -> dict[str, str]:
        return self.to_ext_fields(wire_names=_SEND_V2_NAMES)


@dataclass(slots=True, kw_only=True)
class SendMessageResponseHeader(CommandHeader):
    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    transaction_id: str | None = wire("transactionId", None)


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


# ============================================================================== offsets


@dataclass(slots=True, kw_only=True)
class QueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")


@dataclass(slots=True, kw_only=True)
class OffsetResponseHeader(CommandHeader):
    """Reply of GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP and QUERY_CONSUMER_OFFSET."""

    offset: int = wire("offset")


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


@dataclass(slots=True, kw_only=True)
class GroupNameRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP."""

    group_name: str = wire("groupName")


@dataclass(slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", None)


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
class ConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307): admin → broker → the client."""

    consumer_group: str = wire("consumerGroup")
    client_id: str = wire("clientId")
    jstack_enable: bool = wire("jstackEnable", False)
