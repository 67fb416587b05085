"""Trace records (client/trace.py) byte for byte as RocketMQ 4.9's TraceDataEncoder writes and
reads them: the four record types, Java's ``null`` for a missing string, the older layouts a
reader still meets, and bodies that do not parse."""

from __future__ import annotations

import pytest

from client.trace import (
    MessageType,
    TraceBean,
    TraceContext,
    TraceDecodeError,
    TraceType,
    decode_traces,
    encode_trace,
    java_hashmap_order,
    trace_keys,
)

MSG_ID = "7F000001A1B218B4AAC27C1C2D3E0000"
OFFSET_ID = "C0A8010A00002A9F0000000000001F40"
REQUEST_ID = "C0A80115A3F418B4AAC27C1C2D400001"


def fields(*values: str) -> str:
    return "\x01".join(values) + "\x02"


PUB = fields(
    "Pub", "1700000000123", "DefaultRegion", "PG_demo", "TopicTest", MSG_ID, "TagA",
    "OrderID188", "192.168.1.10:10911", "11", "3", "0", OFFSET_ID, "true",
)  # fmt: skip
SUB_BEFORE = fields(
    "SubBefore", "1700000000456", "DefaultRegion", "CG_demo", REQUEST_ID, MSG_ID, "0", "OrderID188"
)
SUB_AFTER = fields(
    "SubAfter", REQUEST_ID, MSG_ID, "5", "true", "OrderID188", "0", "1700000000461", "CG_demo"
)
END_TX = fields(
    "EndTransaction", "1700000000789", "DefaultRegion", "PG_tx", "TopicTx", MSG_ID, "null",
    "null", "192.168.1.10:10911", "2", "tx-1", "COMMIT_MESSAGE", "false",
)  # fmt: skip


def pub() -> TraceContext:
    bean = TraceBean(
        msg_id=MSG_ID,
        topic="TopicTest",
        offset_msg_id=OFFSET_ID,
        tags="TagA",
        keys="OrderID188",
        store_host="192.168.1.10:10911",
        body_length=11,
    )
    return TraceContext(
        TraceType.PUB, group="PG_demo", beans=[bean], time_ms=1700000000123,
        region_id="DefaultRegion", cost_ms=3,
    )  # fmt: skip


def test_each_record_type_is_written_as_java_writes_it() -> None:
    assert encode_trace(pub()) == PUB
    bean = TraceBean(msg_id=MSG_ID, keys="OrderID188")
    before = TraceContext(
        TraceType.SUB_BEFORE, "CG_demo", [bean], 1700000000456, "DefaultRegion",
        request_id=REQUEST_ID,
    )  # fmt: skip
    assert encode_trace(before) == SUB_BEFORE
    after = TraceContext(
        TraceType.SUB_AFTER, "CG_demo", [bean], 1700000000461, "DefaultRegion", cost_ms=5,
        request_id=REQUEST_ID,
    )  # fmt: skip
    assert encode_trace(after) == SUB_AFTER
    tx = TraceBean(
        msg_id=MSG_ID, topic="TopicTx", tags=None, keys=None, store_host="192.168.1.10:10911",
        msg_type=MessageType.TRANS_COMMIT, transaction_id="tx-1",
        transaction_state="COMMIT_MESSAGE",
    )  # fmt: skip
    end = TraceContext(TraceType.END_TRANSACTION, "PG_tx", [tx], 1700000000789, "DefaultRegion")
    assert encode_trace(end) == END_TX


def test_a_consume_batch_is_one_record_per_message() -> None:
    beans = [TraceBean(msg_id=f"ID{n}", keys=None) for n in range(3)]
    after = TraceContext(TraceType.SUB_AFTER, "CG", beans, 1, request_id="R", success=False)
    body = encode_trace(after)
    assert body.count("\x02") == 3
    assert [(c.beans[0].msg_id, c.success, c.beans[0].keys) for c in decode_traces(body)] == [
        ("ID0", False, "null"),
        ("ID1", False, "null"),
        ("ID2", False, "null"),
    ]


def test_records_read_back_whole() -> None:
    pub_, before, after, end = decode_traces(PUB + SUB_BEFORE + SUB_AFTER + END_TX)
    assert encode_trace(pub_) == PUB
    assert encode_trace(before) == SUB_BEFORE
    assert encode_trace(after) == SUB_AFTER
    assert encode_trace(end) == END_TX
    assert (pub_.beans[0].offset_msg_id, pub_.cost_ms, pub_.success) == (OFFSET_ID, 3, True)
    assert (after.group, after.time_ms, after.request_id) == ("CG_demo", 1700000000461, REQUEST_ID)
    assert end.beans[0].transaction_state == "COMMIT_MESSAGE"
    assert not end.beans[0].from_transaction_check


def test_older_and_newer_layouts_are_read_by_their_field_count() -> None:
    parts = PUB.rstrip("\x02").split("\x01")
    # 4.3: no offsetMsgId, the 13th field is the status
    (old,) = decode_traces("\x01".join([*parts[:12], "false"]) + "\x02")
    assert (old.beans[0].offset_msg_id, old.success) == ("", False)
    # a writer that adds the client host as field 14
    (new,) = decode_traces("\x01".join([*parts, "10.0.0.7"]) + "\x02")
    assert (new.beans[0].client_host, new.success) == ("10.0.0.7", True)
    # 4.4-4.7 SubAfter: 7 fields, no time or group; the time is the reader's
    (sub,) = decode_traces(fields("SubAfter", REQUEST_ID, MSG_ID, "5", "false", "k", "4"))
    assert (sub.group, sub.context_code, sub.success) == ("", 4, False)
    assert sub.time_ms > 1700000000461


def test_trailing_empty_fields_are_dropped_as_javas_split_drops_them() -> None:
    # a SubAfter whose group is empty reads as the 8-field kind: no time, no group
    (sub,) = decode_traces(
        fields("SubAfter", REQUEST_ID, MSG_ID, "5", "true", "k", "0", "1700000000461", "")
    )
    assert sub.group == "" and sub.time_ms != 1700000000461
    # interior empties stay; empty records and unknown types are skipped
    body = "\x02" + fields("Recall", "1", "r", "g", "t", MSG_ID, "true") + SUB_BEFORE + "\x02"
    (before,) = decode_traces(body)
    assert before.trace_type is TraceType.SUB_BEFORE


@pytest.mark.parametrize(
    "body",
    [
        fields("Pub", "soon", "r", "g", "t", MSG_ID, "a", "k", "h", "1", "1", "0", "o", "true"),
        fields("Pub", "1", "r", "g"),
        fields("Pub", "1", "r", "g", "t", MSG_ID, "a", "k", "h", "1", "1", "9", "o", "true"),
        fields("SubBefore", "1", "r", "g", "req", MSG_ID, "x", "k"),
        fields("SubAfter", "req", MSG_ID),
        fields("EndTransaction", "1"),
    ],
)
def test_a_record_that_does_not_parse_fails_the_body(body: str) -> None:
    with pytest.raises(TraceDecodeError):
        decode_traces(SUB_BEFORE + body)


def test_the_trace_message_keys_are_each_id_and_key_once() -> None:
    ctx = pub()
    ctx.beans[0].keys = "OrderID188 user-7  OrderID188"
    other = TraceContext(TraceType.SUB_BEFORE, beans=[TraceBean(msg_id="ID2", keys=None)])
    assert trace_keys([ctx, other]) == [MSG_ID, "OrderID188", "user-7", "ID2"]


def test_groups_come_in_java_hashmap_order() -> None:
    """Checked against java.util.HashMap on JDK 17 (keySet of puts in this order): buckets of
    the spread hashCode, insertion order within one ("Aa" and "BB" collide), and the table
    grown to 32 past 12 keys."""
    keys = "CG_b CG_a Aa BB orders-consumer GID_x g1 g2 g3 g4 g5 g6 g7 g8 g9 g10 zz%RETRY% CG_demo"
    assert java_hashmap_order(keys.split()) == [
        "Aa",
        "BB",
        "g10",
        "g1",
        "g2",
        "g3",
        "g4",
        "CG_demo",
        "g5",
        "orders-consumer",
        "g6",
        "g7",
        "GID_x",
        "g8",
        "zz%RETRY%",
        "g9",
        "CG_b",
        "CG_a",
    ]
    assert java_hashmap_order(["CG_b", "CG_a", "Aa", "BB"]) == ["Aa", "BB", "CG_b", "CG_a"]
