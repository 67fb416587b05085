"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) on the wire:
stored records, response headers, auto-creation and every refusal (protocol.md §7.1, §9,
§10, §11, §13.1)."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from broker.broker import Broker
from broker.config import BrokerRole
from codec import decode_offset_msg_id, decode_record
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from store.config import FlushDiskType
from tests.broker.conftest import raw_json_call
from tests.processes import free_port
from tests.support import (
    BORN_TIMESTAMP,
    BrokerFactory,
    ClientFactory,
    batch_body,
    call,
    properties,
    pull,
    record_body,
    record_props,
    records,
    send,
    send_header,
    send_ok,
    wait_dispatched,
)


async def pull_all(
    client: RemotingClient, broker: Broker, topic: str, queue_id: int = 0
) -> tuple[bytes, list[Any]]:
    await wait_dispatched(broker)
    response = await pull(client, broker.address, topic, queue_id=queue_id)
    assert response.code == ResponseCode.SUCCESS, response
    return response.body_bytes, records(response.body_bytes)


def check_msg_id(msg_id: str, broker: Broker) -> int:
    """An offset msgId (§11): 32 upper-case hex chars of store IPv4, port, commit-log
    offset; returns the offset."""
    assert len(msg_id) == 32
    assert msg_id == msg_id.upper()
    raw = bytes.fromhex(msg_id)
    assert raw[:4] == socket.inet_aton("127.0.0.1")
    assert struct.unpack(">i", raw[4:8])[0] == broker.server.port
    (host, offset) = decode_offset_msg_id(msg_id)
    assert host == (socket.inet_aton("127.0.0.1"), broker.server.port)
    return offset


# ------------------------------------------------------------------------------ success


@pytest.mark.parametrize(
    "code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE], ids=["310", "10"]
)
async def test_send_single_message(
    broker: Broker, client: RemotingClient, code: RequestCode
) -> None:
    response = await send_ok(
        client,
        broker.address,
        "TopicSend",
        b"payload",
        queue_id=1,
        tags="TagA",
        keys="k1 k2",
        extra={"color": "red"},
        code=code,
    )
    ext = response.ext_fields
    assert ext["queueId"] == "1"
    assert ext["queueOffset"] == "0"
    assert ext["MSG_REGION"] == "DefaultRegion"
    assert ext["TRACE_ON"] == "true"
    offset = check_msg_id(ext["msgId"], broker)

    body, (info,) = await pull_all(client, broker, "TopicSend", 1)
    assert info.commit_log_offset == offset
    assert info.queue_id == 1
    assert info.queue_offset == 0
    assert info.topic == "TopicSend"
    assert info.born_timestamp == BORN_TIMESTAMP
    assert record_body(body, [info], 0) == b"payload"
    props = record_props(info)
    assert props["TAGS"] == "TagA"
    assert props["KEYS"] == "k1 k2"
    assert props["color"] == "red"
    assert props["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in props
    assert "UNIQ_KEY" in props


async def test_send_offsets_are_consecutive(broker: Broker, client: RemotingClient) -> None:
    offsets = []
    for i in range(5):
        response = await send_ok(client, broker.address, "TopicSeq", f"m{i}".encode())
        offsets.append(int(response.ext_fields["queueOffset"]))
    assert offsets == [0, 1, 2, 3, 4]


async def test_send_in_binary_header_is_answered_in_binary(
    broker: Broker, client: RemotingClient
) -> None:
    response = await send(
        client, broker.address, "TopicBin", b"x", serialize_type=SerializeType.ROCKETMQ
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.ext_fields["queueOffset"] == "0"


async def test_negative_queue_id_picks_a_writable_queue(
    broker: Broker, client: RemotingClient
) -> None:
    seen = set()
    for _ in range(20):
        response = await send_ok(client, broker.address, "TopicAny", queue_id=-1)
        seen.add(int(response.ext_fields["queueId"]))
    assert seen <= {0, 1, 2, 3}


async def test_batch_with_m_true_stores_each_message(
    broker: Broker, client: RemotingClient
) -> None:
    entries = [
        (f"batch-{i}".encode(), properties(TAGS=f"T{i}", KEYS=f"key{i}", UNIQ_KEY=f"U{i}"))
        for i in range(3)
    ]
    h = send_header("TopicBatch", queue_id=0, props=properties(WAIT="true"), batch=True)
    response = await call(
        client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), batch_body(entries)
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["queueOffset"] == "0"
    msg_ids = response.ext_fields["msgId"].split(",")
    assert len(msg_ids) == 3
    commit_offsets = [check_msg_id(m, broker) for m in msg_ids]

    body, infos = await pull_all(client, broker, "TopicBatch")
    assert [i.queue_offset for i in infos] == [0, 1, 2]
    assert [i.commit_log_offset for i in infos] == commit_offsets
    for n, info in enumerate(infos):
        assert record_body(body, infos, n) == f"batch-{n}".encode()
        props = record_props(info)
        assert props["TAGS"] == f"T{n}"
        assert props["UNIQ_KEY"] == f"U{n}"
        assert props["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in props


async def test_code_10_with_cpp_batch_flag_stores_separate_messages(
    broker: Broker, client: RemotingClient
) -> None:
    entries = [(b"one", properties(TAGS="A")), (b"two", properties(TAGS="B"))]
    ext = send_header("TopicCppBatch").to_ext_fields()
    ext["batch"] = "1"  # C++ streams a bool as 1
    response = await call(
        client, broker.address, RequestCode.SEND_MESSAGE, ext, batch_body(entries)
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert len(response.ext_fields["msgId"].split(",")) == 2
    body, infos = await pull_all(client, broker, "TopicCppBatch")
    assert [record_body(body, infos, n) for n in range(2)] == [b"one", b"two"]
    assert [i.queue_offset for i in infos] == [0, 1]


async def test_code_320_without_batch_flag_is_one_message(
    broker: Broker, client: RemotingClient
) -> None:
    """A 4.9.8 broker chooses the batch path from ``m``, not from the code (§10)."""
    encoded = batch_body([(b"one", ""), (b"two", "")])
    h = send_header("TopicNoM", props=properties(TAGS="x"))
    response = await call(
        client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), encoded
    )
    assert response.code == ResponseCode.SUCCESS, response
    body, infos = await pull_all(client, broker, "TopicNoM")
    assert len(infos) == 1
    assert record_body(body, infos, 0) == encoded


# The one-letter names of SEND_MESSAGE_V2 (protocol.md §7.1).
V2_NAMES = {
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
}


@pytest.mark.parametrize("style", ["numbers", "strings"])
@pytest.mark.parametrize(
    "code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2], ids=["10", "310"]
)
async def test_numbers_in_json_header_as_numbers_or_strings(
    broker: Broker, client: RemotingClient, style: str, code: RequestCode
) -> None:
    """C++ sends queueId, sysFlag, flag, d … as JSON numbers and ali-ons raw JS values;
    Java sends strings. A C++ header also ends with a newline and has empty ACL fields."""
    ext: dict[str, Any] = {
        "producerGroup": "pg",
        "topic": "TopicCpp",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 2,
        "sysFlag": 0,
        "bornTimestamp": BORN_TIMESTAMP,
        "flag": 7,
        "properties": properties(TAGS="TagC"),
        "reconsumeTimes": 0,
        "unitMode": False,
    }
    if code == RequestCode.SEND_MESSAGE_V2:
        ext = {V2_NAMES[k]: v for k, v in ext.items()}
    if style == "strings":
        ext = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in ext.items()}
    ext |= {"AccessKey": "", "Signature": "", "OnsChannel": ""}
    kind, response = await raw_json_call(
        broker.address, {"code": int(code), "opaque": 5, "extFields": ext}, b"from-cpp"
    )
    assert kind == SerializeType.JSON
    assert response.code == ResponseCode.SUCCESS, response
    assert response.opaque == 5
    assert response.ext_fields["queueId"] == "2"
    body, (info,) = await pull_all(client, broker, "TopicCpp", 2)
    assert info.flag == 7
    assert record_body(body, [info], 0) == b"from-cpp"


# ------------------------------------------------------------------------ auto-create


async def test_auto_created_topic_takes_min_of_requested_and_template_queues(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(default_topic_queue_nums=3)
    await send_ok(client, broker.address, "TopicSix", default_topic_queue_nums=6)
    tc = broker.topics.get("TopicSix")
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 3, 6)

    await send_ok(client, broker.address, "TopicTwo", default_topic_queue_nums=2)
    tc = broker.topics.get("TopicTwo")
    assert tc is not None
    assert (tc.read_queue_nums, tc.write_queue_nums) == (2, 2)
    # A queue id beyond the created count is refused.
    response = await send(
        client, broker.address, "TopicTwo", queue_id=2, default_topic_queue_nums=2
    )
    assert response.code == ResponseCode.SYSTEM_ERROR


async def test_auto_create_disabled_is_topic_not_exist(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(auto_create_topic_enable=False)
    response = await send(client, broker.address, "TopicNever")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert broker.topics.get("TopicNever") is None
    await send_ok(client, broker.address, "%RETRY%group")  # retry topics are still made


# ------------------------------------------------------------------------------ refusals


async def assert_still_serves(client: RemotingClient, broker: Broker) -> None:
    response = await send(client, broker.address, "TopicGood", b"good")
    assert response.code == ResponseCode.SUCCESS, response


@pytest.mark.parametrize(
    "topic",
    ["has space", "T" * 128, "", "bad/slash", "Tópico", "Trailing\n"],
    ids=["space", "128-chars", "empty", "slash", "non-ascii", "trailing-newline"],
)
async def test_illegal_topic_names_are_system_error(
    broker: Broker, client: RemotingClient, topic: str
) -> None:
    response = await send(client, broker.address, topic)
    assert response.code == ResponseCode.SYSTEM_ERROR, response
    assert response.remark
    await assert_still_serves(client, broker)


async def test_127_char_topic_is_accepted(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "T" * 127)


@pytest.mark.parametrize(
    "topic",
    [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ],
)
async def test_reserved_topics_are_no_permission(
    broker: Broker, client: RemotingClient, topic: str
) -> None:
    response = await send(client, broker.address, topic)
    assert response.code == ResponseCode.NO_PERMISSION
    await assert_still_serves(client, broker)


async def test_queue_id_beyond_queue_count_is_system_error(
    broker: Broker, client: RemotingClient
) -> None:
    await send_ok(client, broker.address, "TopicQ", default_topic_queue_nums=4)
    response = await send(client, broker.address, "TopicQ", queue_id=4)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and "queueId" in response.remark
    await assert_still_serves(client, broker)


async def test_body_over_max_message_size_is_message_illegal(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(store={"max_message_bytes": 1024})
    response = await send(client, broker.address, "TopicBig", b"x" * 1025)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    await send_ok(client, broker.address, "TopicBig", b"x" * 1000)
    assert broker.store.get_max_offset("TopicBig", 0) <= 1


@pytest.mark.parametrize(
    ("code", "field"),
    [
        (RequestCode.SEND_MESSAGE_V2, "b"),
        (RequestCode.SEND_MESSAGE_V2, "e"),
        (RequestCode.SEND_MESSAGE, "topic"),
        (RequestCode.SEND_MESSAGE, "bornTimestamp"),
    ],
)
async def test_missing_required_field_is_system_error_naming_it(
    broker: Broker, client: RemotingClient, code: RequestCode, field: str
) -> None:
    h = send_header("TopicMissing")
    ext = h.to_ext_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2()
    del ext[field]
    response = await call(client, broker.address, code, ext, b"x")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and f"<{field}>" in response.remark
    await assert_still_serves(client, broker)


@pytest.mark.parametrize(("field", "value"), [("e", "zero"), ("g", "12abc"), ("d", "")])
async def test_garbage_in_numeric_field_is_system_error(
    broker: Broker, client: RemotingClient, field: str, value: str
) -> None:
    ext = send_header("TopicGarbage").to_v2()
    ext[field] = value
    response = await call(client, broker.address, RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and f"<{field}>" in response.remark
    await assert_still_serves(client, broker)


async def test_malformed_batch_body_is_refused(broker: Broker, client: RemotingClient) -> None:
    h = send_header("TopicBadBatch", batch=True)
    good = batch_body([(b"abc", "")])
    response = await call(
        client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), good[:-2]
    )
    assert response.code == ResponseCode.MESSAGE_ILLEGAL, response
    await assert_still_serves(client, broker)


async def test_oneway_send_gets_no_response_and_is_stored(
    broker: Broker, client: RemotingClient
) -> None:
    ext = send_header("TopicOneway", props=properties(TAGS="o")).to_v2()
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"ow", oneway=True)
    await client.invoke_oneway(broker.address, request)
    # A request after it on the same connection is answered; the oneway one is stored.
    await assert_still_serves(client, broker)
    await wait_dispatched(broker)
    assert broker.store.get_max_offset("TopicOneway", 0) == 1


async def test_properties_over_32767_bytes_are_message_illegal(
    broker: Broker, client: RemotingClient
) -> None:
    response = await send(client, broker.address, "TopicProps", extra={"big": "p" * 33_000})
    assert response.code == ResponseCode.MESSAGE_ILLEGAL, response
    await assert_still_serves(client, broker)


@pytest.mark.parametrize(
    ("batch_props", "sys_flag"),
    [(properties(DELAY="3"), 0), ("", 0x4)],
    ids=["delay-level", "transaction"],
)
async def test_batch_with_delay_or_transaction_is_message_illegal(
    broker: Broker, client: RemotingClient, batch_props: str, sys_flag: int
) -> None:
    h = send_header("TopicBatchBad", props=batch_props, sys_flag=sys_flag, batch=True)
    response = await call(
        client,
        broker.address,
        RequestCode.SEND_BATCH_MESSAGE,
        h.to_v2(),
        batch_body([(b"a", ""), (b"b", "")]),
    )
    assert response.code == ResponseCode.MESSAGE_ILLEGAL, response
    await assert_still_serves(client, broker)


async def test_batch_offsets_continue_the_queue(broker: Broker, client: RemotingClient) -> None:
    for _ in range(2):
        await send_ok(client, broker.address, "TopicMixed")
    h = send_header("TopicMixed", batch=True)
    entries = [(b"b0", properties(TAGS="x")), (b"b1", ""), (b"b2", properties(KEYS="k"))]
    response = await call(
        client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), batch_body(entries)
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["queueOffset"] == "2"
    response = await send_ok(client, broker.address, "TopicMixed")
    assert response.ext_fields["queueOffset"] == "5"
    body, infos = await pull_all(client, broker, "TopicMixed")
    assert [i.queue_offset for i in infos] == [0, 1, 2, 3, 4, 5]
    assert record_body(body, infos, 3) == b"b1"
    assert record_props(infos[3]).get("CLUSTER") == "DefaultCluster"


async def test_record_hosts_are_the_client_and_the_broker(
    broker: Broker, client: RemotingClient
) -> None:
    await send_ok(client, broker.address, "TopicHosts")
    body, (info,) = await pull_all(client, broker, "TopicHosts")
    conn = await client.connection(broker.address)
    assert conn.transport is not None
    local_port = conn.transport.get_extra_info("sockname")[1]
    # BORNHOST at 48 and STOREHOST at 64 for IPv4 hosts (store-format.md §2.2).
    assert info.sys_flag & 0x30 == 0
    born_ip, born_port = body[48:52], struct.unpack(">i", body[52:56])[0]
    store_ip, store_port = body[64:68], struct.unpack(">i", body[68:72])[0]
    assert born_ip == socket.inet_aton("127.0.0.1")
    assert born_port == local_port
    assert (store_ip, store_port) == (socket.inet_aton("127.0.0.1"), broker.server.port)


async def test_sync_flush_broker_answers_once_stored(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(store={"flush_disk_type": FlushDiskType.SYNC_FLUSH})
    await send_ok(client, broker.address, "TopicSync", b"durable")
    h = send_header("TopicSync", props=properties(WAIT="true"), batch=True)
    response = await call(
        client,
        broker.address,
        RequestCode.SEND_BATCH_MESSAGE,
        h.to_v2(),
        batch_body([(b"a", ""), (b"b", "")]),
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["queueOffset"] == "1"
    # WAIT=false: answered without waiting for the flush, but stored all the same.
    await send_ok(client, broker.address, "TopicSync", b"nowait", extra={"WAIT": "false"})
    _, infos = await pull_all(client, broker, "TopicSync")
    assert len(infos) == 4


async def test_slave_refuses_sends(start_broker: BrokerFactory, client: RemotingClient) -> None:
    await start_broker()
    slave = await start_broker(broker_id=1, broker_role=BrokerRole.SLAVE)
    assert slave.registration.master_addr is not None
    response = await send(client, slave.address, "TopicOnSlave")
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE, response
    assert slave.store.get_max_offset("TopicOnSlave", 0) == 0


async def test_multi_tag_topic_sets_the_multi_tags_flag(
    broker: Broker, client: RemotingClient
) -> None:
    ext = {
        "topic": "TopicMulti",
        "defaultTopic": "TBW102",
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "6",
        "topicFilterType": "MULTI_TAG",
    }
    response = await call(client, broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert response.code == ResponseCode.SUCCESS, response
    await send_ok(client, broker.address, "TopicMulti", tags="a")
    _, (info,) = await pull_all(client, broker, "TopicMulti")
    assert info.sys_flag & 0x2


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
async def test_concurrent_sends_get_distinct_consecutive_offsets(
    start_broker: BrokerFactory, start_client: ClientFactory, flush: FlushDiskType
) -> None:
    broker = await start_broker(store={"flush_disk_type": flush})
    clients = [await start_client() for _ in range(4)]
    responses = await asyncio.gather(
        *(send(clients[n % 4], broker.address, "TopicRace", f"r{n}".encode()) for n in range(200))
    )
    assert all(r.code == ResponseCode.SUCCESS for r in responses)
    assert sorted(int(r.ext_fields["queueOffset"]) for r in responses) == list(range(200))
    assert len({r.ext_fields["msgId"] for r in responses}) == 200
    await wait_dispatched(broker)
    seen: list[bytes] = []
    offset = 0
    for _ in range(20):
        response = await pull(clients[0], broker.address, "TopicRace", offset=offset)
        if response.code != ResponseCode.SUCCESS:
            break
        body = response.body_bytes
        infos = records(body)
        assert [i.queue_offset for i in infos] == list(range(offset, offset + len(infos)))
        seen += [record_body(body, infos, n) for n in range(len(infos))]
        offset = int(response.ext_fields["nextBeginOffset"])
    assert sorted(seen) == sorted(f"r{n}".encode() for n in range(200))


async def test_messages_across_commit_log_segments(broker: Broker, client: RemotingClient) -> None:
    """10 KiB bodies in 64 KiB segments: the commit log rolls several times."""
    bodies = [bytes([n]) * 10_000 for n in range(20)]
    for body in bodies:
        await send_ok(client, broker.address, "TopicRoll", body)
    await wait_dispatched(broker)
    got: list[bytes] = []
    offset = 0
    for _ in range(20):
        response = await pull(client, broker.address, "TopicRoll", offset=offset)
        if response.code != ResponseCode.SUCCESS:
            break
        body = response.body_bytes
        infos = records(body)
        got += [record_body(body, infos, n) for n in range(len(infos))]
        offset = int(response.ext_fields["nextBeginOffset"])
    assert got == bodies
    assert len(list((broker.config.store.root_dir / "commitlog").iterdir())) >= 3


async def test_broker_also_serves_the_vip_port(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    port = free_port((-2, 0))  # the VIP channel listens two below
    broker = await start_broker(listen_port=port)
    assert broker.address.endswith(f":{port}")
    response = await send(client, f"127.0.0.1:{port - 2}", "TopicVip")
    assert response.code == ResponseCode.SUCCESS, response


@pytest.mark.parametrize(
    ("extra", "sys_flag"),
    [({"TRAN_MSG": "true", "PGROUP": "pg"}, 0x4), ({"TRAN_MSG": "true"}, 0), ({}, 0x4)],
    ids=["flag-and-property", "property-only", "flag-only"],
)
async def test_transactional_half_messages_wait_in_the_half_topic(
    broker: Broker, client: RemotingClient, extra: dict[str, str], sys_flag: int
) -> None:
    """A half message is parked in RMQ_SYS_TRANS_HALF_TOPIC queue 0, its target in
    REAL_TOPIC / REAL_QID and its sysFlag type cleared; the real topic sees nothing yet."""
    await send_ok(client, broker.address, "TopicTx", b"first", queue_id=2)
    response = await send(
        client, broker.address, "TopicTx", b"half", queue_id=2, extra=extra, sys_flag=sys_flag
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["queueId"] == "2"
    assert response.ext_fields["queueOffset"] == "0"  # of the half queue
    await wait_dispatched(broker)
    assert broker.store.get_max_offset("TopicTx", 2) == 1
    assert broker.store.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1
    _, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    record = broker.store.look_message_by_offset(offset)
    assert record is not None
    info = decode_record(record, 0, check_crc=True)
    assert (info.topic, info.queue_id, info.sys_flag & 0xC) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0)
    props = record_props(info)
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("TopicTx", "2")
    assert props["WAIT"] == "true"  # kept: the commit stores this property string unchanged


async def test_reject_transaction_message_refuses_half_messages(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(reject_transaction_message=True)
    response = await send(
        client, broker.address, "TopicTx", b"half", extra={"TRAN_MSG": "true"}, sys_flag=0x4
    )
    assert response.code == ResponseCode.NO_PERMISSION, response
    assert "sending transaction message is forbidden" in (response.remark or "")
    await assert_still_serves(client, broker)
    assert broker.store.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0
