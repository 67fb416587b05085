"""client.message: validation before anything is sent, and decoding the stored records a real
broker hands back on a pull (compressed bodies inflated, malformed input refused with
MessageDecodeError). UNIQ_KEY ids and Java's String.hashCode are codec's: tests/codec."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import InvalidArgumentError, InvalidMessageError, Message, Producer
from client.message import (
    DEFAULT_MAX_MESSAGE_BYTES,
    TOPIC_MAX_LENGTH,
    UNIQ_IDS,
    MessageDecodeError,
    check_group,
    decode_messages,
)
from codec import COMPRESSED_FLAG, encode_properties
from tests.client.conftest import raw_pull

# ---------------------------------------------------------------------------- validation

INVALID: list[tuple[dict[str, Any], str]] = [
    ({"topic": ""}, "topic is blank"),
    ({"topic": "   "}, "topic is blank"),
    ({"topic": "has space"}, "contains illegal characters"),
    ({"topic": "dot.topic"}, "contains illegal characters"),
    ({"topic": "ünïcode"}, "contains illegal characters"),
    ({"topic": "TopicA\n"}, "contains illegal characters"),  # `$` matches before a \n
    ({"topic": "t" * (TOPIC_MAX_LENGTH + 1)}, "longer than topic max length 127"),
    ({"topic": "SCHEDULE_TOPIC_XXXX"}, "is forbidden"),
    ({"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, "is forbidden"),
    ({"topic": "OFFSET_MOVED_EVENT"}, "is forbidden"),
    ({"topic": "SELF_TEST_TOPIC"}, "is forbidden"),
    ({"body": b""}, "body length is zero"),
    ({"body": "text"}, "body must be bytes, not str"),
    ({"tags": "A||B"}, "one non-blank tag"),
    ({"tags": "  "}, "one non-blank tag"),
    ({"tags": ""}, "one non-blank tag"),
    ({"keys": ["ok", "has space"]}, "without spaces"),
    ({"keys": [""]}, "without spaces"),
    ({"delay_level": 19}, "not within 0..18"),
    ({"delay_level": -1}, "not within 0..18"),
    ({"properties": {"UNIQ_KEY": "x"}}, "'UNIQ_KEY' is reserved"),
    ({"properties": {"TAGS": "x"}}, "'TAGS' is reserved"),
    ({"properties": {"KEYS": "x"}}, "'KEYS' is reserved"),
    ({"properties": {"DELAY": "3"}}, "'DELAY' is reserved"),
    ({"properties": {"WAIT": "false"}}, "'WAIT' is reserved"),
    ({"properties": {"a\x01b": "v"}}, "separator"),
    ({"properties": {"a": "v\x02w"}}, "separator"),
    ({"properties": {"": "v"}}, "non-empty strings"),
    ({"properties": {"k": ""}}, "non-empty strings"),
]


def make(**overrides: Any) -> Message:
    fields: dict[str, Any] = {"topic": "TopicV", "body": b"payload", **overrides}
    return Message(**fields)


@pytest.mark.parametrize(("overrides", "error"), INVALID, ids=[e for _, e in INVALID])
def test_invalid_message_raises_clear_error(overrides: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidMessageError, match=re.escape(error)):
        make(**overrides).validate()


def test_invalid_message_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="blank"):
        make(topic="").validate()


def test_valid_edge_cases_pass() -> None:
    make(topic="t" * TOPIC_MAX_LENGTH).validate()
    make(topic="%RETRY%group_A-1|x").validate()
    make(body=bytearray(b"x")).validate()
    make(body=memoryview(b"x")).validate()
    make(keys="a  b").validate()  # a string is split on spaces
    assert make(keys="a  b").key_list == ["a", "b"]
    assert make(keys=None).key_list == []
    make(delay_level=18, tags="TagA", properties={"color": "red"}).validate()
    make(body=b"x" * DEFAULT_MAX_MESSAGE_BYTES).validate()


def test_oversized_body_names_the_sizes() -> None:
    with pytest.raises(InvalidMessageError, match="body size 1025 is over the max value 1024"):
        make(body=b"x" * 1025).validate(max_message_bytes=1024)
    with pytest.raises(InvalidMessageError, match="over the max value"):
        make(body=b"x" * (DEFAULT_MAX_MESSAGE_BYTES + 1)).validate()


@pytest.mark.parametrize(
    ("group", "error"),
    [
        ("", "blank"),
        ("a b", "illegal characters"),
        ("group\n", "illegal characters"),
        ("g" * 256, "longer than group max length"),
    ],
)
def test_group_validation(group: str, error: str) -> None:
    # a group is an argument, not a message
    with pytest.raises(InvalidArgumentError, match=error):
        check_group(group)
    with pytest.raises(InvalidArgumentError, match=error):
        Producer(group, "127.0.0.1:9876")


def test_wire_properties() -> None:
    msg = make(tags="TagA", keys=["k1", "k2"], delay_level=3, properties={"color": "red"})
    props = msg.wire_properties("ID", wait=False)
    assert props == {
        "color": "red",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "UNIQ_KEY": "ID",
        "WAIT": "false",
    }
    assert msg.properties == {"color": "red"}  # the user's dict is not touched


async def test_invalid_messages_are_never_sent(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """Every send mode refuses an invalid message before touching the broker: no topic is
    created and nothing is appended."""
    bad = [make(topic="NeverCreated", body=b""), make(topic="bad topic")]
    for msg in bad:
        with pytest.raises(InvalidMessageError):
            await producer.send(msg)
        with pytest.raises(InvalidMessageError):
            await producer.send_oneway(msg)
        with pytest.raises(InvalidMessageError):
            await producer.send_orderly(msg, sharding_key="k")
        with pytest.raises(InvalidMessageError):
            producer.send_async(msg, lambda r, e: None)
        with pytest.raises(InvalidMessageError):
            await producer.send_batch([make(topic="NeverCreated"), msg])
    with pytest.raises(InvalidMessageError, match="one topic"):
        await producer.send_batch([make(topic="NeverCreated"), make(topic="Other")])
    with pytest.raises(InvalidMessageError, match="at least one message"):
        await producer.send_batch([])
    with pytest.raises(InvalidMessageError, match="delay level"):
        await producer.send_batch([make(topic="NeverCreated", delay_level=2)])
    with pytest.raises(InvalidMessageError, match="max value 100"):
        Producer("other", namesrv.address, max_message_bytes=100)._batch(
            [make(body=b"x" * 60), make(body=b"y" * 60)]
        )
    assert broker.topics.get("NeverCreated") is None
    assert broker.store.commit_log.max_offset == 0


# ---------------------------------------------------------------------- decode_messages


async def test_decode_pulled_records(broker: Broker, producer: Producer) -> None:
    big = bytes(range(256)) * 40  # 10 KiB: compressed on the wire
    sent = [
        Message(
            "TopicDecode",
            b"small \xe2\x9c\x93",
            tags="TagA",
            keys=["k1", "k2"],
            properties={"color": "red", "ünï": "ç"},
            flag=7,
        ),
        Message("TopicDecode", big, tags="TagB"),
    ]
    results = [await producer.send_orderly(m, selector=lambda qs, _m, _a: qs[0]) for m in sent]
    body = await raw_pull(broker, "TopicDecode", 0)
    views = decode_messages(body, "broker-a")
    assert [v.body for v in views] == [m.body for m in sent]
    first, second = views
    assert first.topic == "TopicDecode"
    assert first.tags == "TagA"
    assert first.keys == ["k1", "k2"]
    assert first.properties["color"] == "red"
    assert first.properties["ünï"] == "ç"
    assert first.flag == 7
    assert first.msg_id == results[0].msg_id
    assert first.offset_msg_id == results[0].offset_msg_id
    assert first.queue_id == 0
    assert [v.queue_offset for v in views] == [0, 1]
    assert first.commit_log_offset == 0
    assert first.store_host == broker.address
    assert first.born_host.startswith("127.0.0.1:")
    assert first.reconsume_times == 0
    assert first.broker_name == "broker-a"
    assert first.message_queue == results[0].message_queue
    assert first.size == len(sent[0].body)
    assert 0 < first.born_timestamp <= first.store_timestamp
    assert not first.sys_flag & COMPRESSED_FLAG
    assert second.sys_flag & COMPRESSED_FLAG
    assert second.tags == "TagB"
    assert second.keys == []


async def test_decode_truncated_or_garbled(broker: Broker, producer: Producer) -> None:
    await producer.send_orderly(
        Message("TopicTrunc", b"one", tags="T"), selector=lambda qs, _m, _a: qs[0]
    )
    await producer.send_orderly(
        Message("TopicTrunc", b"two", tags="T"), selector=lambda qs, _m, _a: qs[0]
    )
    body = await raw_pull(broker, "TopicTrunc", 0)
    assert [v.body for v in decode_messages(body, "b")] == [b"one", b"two"]
    assert decode_messages(b"", "b") == []
    first_total = struct.unpack_from(">i", body)[0]
    for cut in (1, 10, 47, 60, first_total + 5, len(body) - 1):
        with pytest.raises(MessageDecodeError):
            decode_messages(body[:cut], "b")
    bad_total = struct.pack(">i", 12) + body[4:]
    with pytest.raises(MessageDecodeError, match="claims 12 bytes"):
        decode_messages(bad_total, "b")


async def test_decode_inner_length_beyond_record(broker: Broker, producer: Producer) -> None:
    """A record whose TOTALSIZE fits but whose BODYLEN points past it: MessageDecodeError,
    not an IndexError/struct.error that would escape the pull loop's error handling."""
    await producer.send_orderly(
        Message("TopicGarbled", b"body", tags="T"), selector=lambda qs, _m, _a: qs[0]
    )
    body = bytearray(await raw_pull(broker, "TopicGarbled", 0))
    # BODYLEN follows the 48-byte head, born host (8), store timestamp (8), store host (8)
    # and RECONSUMETIMES + PREPAREDTRANSACTIONOFFSET (12).
    pos = 48 + 8 + 8 + 8 + 12
    assert struct.unpack_from(">i", body, pos)[0] == 4
    struct.pack_into(">i", body, pos, 10_000)
    with pytest.raises(MessageDecodeError):
        decode_messages(bytes(body), "b")


@pytest.mark.parametrize(
    "msg",
    [
        Message("t", b"x"),
        Message("t", b"x", tags="TagA"),
        Message("t", b"x", tags="TagA", keys=["k1", "k2"]),
        Message("t", b"x", keys="k1  k2"),
        Message("t", b"x", keys=[]),
        Message("t", b"x", tags="A", properties={"p": "v"}),
        Message("t", b"x", delay_level=3),
    ],
)
@pytest.mark.parametrize("wait", [True, False])
def test_wire_properties_text_matches_the_dict_encoding(msg: Message, wait: bool) -> None:
    """The per-message fast path writes exactly what the general encoding writes."""
    uniq = UNIQ_IDS.next_id()
    assert msg.wire_properties_text(uniq, wait=wait) == encode_properties(
        msg.wire_properties(uniq, wait=wait)
    )
