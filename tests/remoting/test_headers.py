"""Typed custom headers: ext_fields round trips, Java parsing rules, V1 <-> V2 send names.

Reference: docs/protocol.md §7 (field tables) and Java's ``decodeCommandCustomHeader``
(``Integer.parseInt``/``Long.parseLong``, ``Boolean.parseBoolean``).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import remoting.headers as headers_module
from remoting.errors import HeaderError
from remoting.headers import (
    CommandHeader,
    ConsumerSendMsgBackRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueueRequestHeader,
    RegisterBrokerRequestHeader,
    SendMessageRequestHeader,
    UnregisterClientRequestHeader,
    ViewMessageRequestHeader,
)

HEADER_CLASSES: list[type[CommandHeader]] = sorted(
    (
        cls
        for cls in vars(headers_module).values()
        if inspect.isclass(cls) and issubclass(cls, CommandHeader) and cls is not CommandHeader
    ),
    key=lambda cls: cls.__name__,
)

# docs/protocol.md §7.1, written out here rather than taken from remoting.headers.
SEND_V2_TO_V1 = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}

# The V2 request of docs/protocol.md §3, as a Java 4.9.8 producer sends it.
JAVA_V2_EXT = {
    "a": "pg",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "1",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "KEYS\x01k1\x02UNIQ_KEY\x01AC11",
    "j": "0",
    "k": "false",
    "m": "false",
    "n": "broker-a",
}

_INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)


def _field_strategy(hint: Any, required: bool) -> st.SearchStrategy[Any]:
    optional = isinstance(hint, types.UnionType)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    base: st.SearchStrategy[Any] = {str: _TEXT, int: _INT64, bool: st.booleans()}[hint]
    if optional and not required:
        return st.none() | base
    return base


def _header_strategy(cls: type[CommandHeader]) -> st.SearchStrategy[CommandHeader]:
    hints = typing.get_type_hints(cls)
    kwargs = {
        f.name: _field_strategy(hints[f.name], f.default is dataclasses.MISSING)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    }
    return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))


def test_header_classes_found() -> None:
    names = {cls.__name__ for cls in HEADER_CLASSES}
    assert {"SendMessageRequestHeader", "PullMessageRequestHeader"} <= names
    assert len(HEADER_CLASSES) >= 20


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_through_ext_fields(cls: type[CommandHeader], data: st.DataObject) -> None:
    header = data.draw(_header_strategy(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    assert cls.from_ext_fields(ext) == header


def test_round_trip_example_pull() -> None:
    header = PullMessageRequestHeader(
        consumer_group="cg",
        topic="t",
        queue_id=3,
        queue_offset=1 << 40,
        max_msg_nums=32,
        sys_flag=6,
        commit_offset=-1,
        suspend_timeout_millis=15000,
        subscription="TagA || TagB",
        sub_version=1700000000000,
    )
    ext = header.to_ext_fields()
    assert ext == {
        "consumerGroup": "cg",
        "topic": "t",
        "queueId": "3",
        "queueOffset": "1099511627776",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "-1",
        "suspendTimeoutMillis": "15000",
        "subscription": "TagA || TagB",
        "subVersion": "1700000000000",
    }
    assert PullMessageRequestHeader.from_ext_fields(ext) == header


def test_booleans_written_as_java_spells_them() -> None:
    header = RegisterBrokerRequestHeader(
        broker_name="b",
        broker_addr="127.0.0.1:10911",
        cluster_name="c",
        ha_server_addr="127.0.0.1:10912",
        broker_id=0,
        compressed=True,
    )
    ext = header.to_ext_fields()
    assert ext["compressed"] == "true"
    assert ext["bodyCrc32"] == "0"
    assert ext["brokerId"] == "0"
    assert RegisterBrokerRequestHeader.from_ext_fields(ext) == header


def test_optional_fields_left_out_when_none() -> None:
    assert GetRouteInfoRequestHeader(topic="t").to_ext_fields() == {"topic": "t"}
    ext = UnregisterClientRequestHeader(client_id="c1", consumer_group="cg").to_ext_fields()
    assert ext == {"clientID": "c1", "consumerGroup": "cg"}
    back = ConsumerSendMsgBackRequestHeader(offset=5, group="g", delay_level=0).to_ext_fields()
    # unitMode has a default (false) rather than None, so it is always written.
    assert back == {"offset": "5", "group": "g", "delayLevel": "0", "unitMode": "false"}


def test_absent_optional_fields_parse_to_defaults() -> None:
    header = ConsumerSendMsgBackRequestHeader.from_ext_fields(
        {"offset": "7", "group": "g", "delayLevel": "-1"}
    )
    assert header.offset == 7
    assert header.delay_level == -1
    assert header.origin_msg_id is None
    assert header.origin_topic is None
    assert header.unit_mode is False
    assert header.max_reconsume_times is None


def test_unknown_ext_fields_are_ignored() -> None:
    ext = {"topic": "t", "AccessKey": "", "Signature": "x", "OnsChannel": "ALIYUN"}
    assert GetRouteInfoRequestHeader.from_ext_fields(ext) == GetRouteInfoRequestHeader(topic="t")


def test_empty_string_is_present_for_a_string_field() -> None:
    # Java's extFields.get returns "" (not null), so a required string may be empty.
    header = UnregisterClientRequestHeader.from_ext_fields(
        {"clientID": "c", "producerGroup": "", "consumerGroup": "cg"}
    )
    assert header.producer_group == ""
    assert header.consumer_group == "cg"


# ----------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("cls", "ext", "wire_name"),
    [
        (QueueRequestHeader, {"queueId": "1"}, "topic"),
        (QueueRequestHeader, {"topic": "t"}, "queueId"),
        (UnregisterClientRequestHeader, {"producerGroup": "pg"}, "clientID"),
        (PullMessageRequestHeader, {"topic": "t", "queueId": "0"}, "consumerGroup"),
        (GetRouteInfoRequestHeader, {"acceptStandardJsonOnly": "true"}, "topic"),
    ],
    ids=["topic", "queueId", "clientID", "consumerGroup", "route-topic"],
)
def test_missing_required_field_names_the_wire_field(
    cls: type[CommandHeader], ext: dict[str, str], wire_name: str
) -> None:
    with pytest.raises(HeaderError) as info:
        cls.from_ext_fields(ext)
    assert str(info.value) == f"the custom field <{wire_name}> is null"


def test_missing_required_v2_field_names_the_v2_wire_field() -> None:
    ext = dict(JAVA_V2_EXT)
    del ext["b"]
    with pytest.raises(HeaderError, match=r"<b>"):
        SendMessageRequestHeader.from_v2(ext)


@pytest.mark.parametrize("raw", ["abc", "", "1.5", "0x10", "1e3", "--1", "9-"])
def test_non_numeric_int_names_the_field(raw: str) -> None:
    with pytest.raises(HeaderError) as info:
        QueueRequestHeader.from_ext_fields({"topic": "t", "queueId": raw})
    message = str(info.value)
    assert "<queueId>" in message
    assert repr(raw) in message


@pytest.mark.parametrize("raw", [" 1", "1 ", "1\n", "\t1", "1_000"])
def test_int_parsing_rejects_what_java_parse_int_rejects(raw: str) -> None:
    # Integer.parseInt/Long.parseLong take no whitespace and no digit-group underscores;
    # Python's int() does.
    with pytest.raises(HeaderError, match=r"<queueId>"):
        QueueRequestHeader.from_ext_fields({"topic": "t", "queueId": raw})


@pytest.mark.parametrize(
    ("raw", "value"),
    [("+5", 5), ("-5", -5), ("007", 7), ("-2147483648", -(1 << 31))],
)
def test_int_parsing_accepts_what_java_accepts(raw: str, value: int) -> None:
    header = QueueRequestHeader.from_ext_fields({"topic": "t", "queueId": raw})
    assert header.queue_id == value
    assert type(header.queue_id) is int


def test_long_fields_take_the_whole_long_range() -> None:
    for raw, value in [
        ("9223372036854775807", (1 << 63) - 1),
        ("-9223372036854775808", -(1 << 63)),
    ]:
        assert ViewMessageRequestHeader.from_ext_fields({"offset": raw}).offset == value


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("tRuE", True),
        ("false", False),
        ("1", False),
        ("0", False),
        ("yes", False),
        ("", False),
        (" true", False),
        ("true ", False),
    ],
)
def test_booleans_follow_java_parse_boolean(raw: str, value: bool) -> None:
    header = ConsumerSendMsgBackRequestHeader.from_ext_fields(
        {"offset": "0", "group": "g", "delayLevel": "0", "unitMode": raw}
    )
    assert header.unit_mode is value


# ------------------------------------------------------------------------------ send V1/V2


def test_v2_of_a_java_request() -> None:
    header = SendMessageRequestHeader.from_v2(JAVA_V2_EXT)
    assert header.producer_group == "pg"
    assert header.topic == "TopicTest"
    assert header.default_topic == "TBW102"
    assert header.default_topic_queue_nums == 4
    assert header.queue_id == 1
    assert header.sys_flag == 0
    assert header.born_timestamp == 1700000000000
    assert header.flag == 0
    assert header.properties == "KEYS\x01k1\x02UNIQ_KEY\x01AC11"
    assert header.reconsume_times == 0
    assert header.unit_mode is False
    assert header.max_reconsume_times is None
    assert header.batch is False
    assert header.broker_name == "broker-a"
    # Written back, it is the same dict: every field Java writes, `l` left out as null.
    assert header.to_v2() == JAVA_V2_EXT


def test_v2_and_v1_names_map_per_the_protocol_table() -> None:
    v2 = dict(JAVA_V2_EXT, l="16", m="true", k="true")
    header = SendMessageRequestHeader.from_v2(v2)
    v1 = header.to_ext_fields()
    assert v1 == {SEND_V2_TO_V1[k]: v for k, v in v2.items()}
    assert SendMessageRequestHeader.from_ext_fields(v1) == header
    assert header.to_v2() == v2


def test_v1_bname_is_the_broker_name() -> None:
    # Go v2 sends SEND_MESSAGE (10) with long names plus `bname`; Java 4.9.5+ maps n <-> bname.
    v1 = {SEND_V2_TO_V1[k]: v for k, v in JAVA_V2_EXT.items()}
    assert SendMessageRequestHeader.from_ext_fields(v1).broker_name == "broker-a"


@settings(max_examples=100, deadline=None)
@given(header=_header_strategy(SendMessageRequestHeader))
def test_v2_round_trip(header: CommandHeader) -> None:
    assert isinstance(header, SendMessageRequestHeader)
    v2 = header.to_v2()
    assert set(v2) <= set(SEND_V2_TO_V1)
    assert SendMessageRequestHeader.from_v2(v2) == header
