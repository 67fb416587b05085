"""Producer against a real name server and broker(s): every send mode's round trip, what
arrives in the store, compression, auto-creation through TBW102, typed refusals, lifecycle
errors, and the latency fault tolerance with a broker killed mid-run and restarted."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import zlib
from pathlib import Path

import pytest

import client.instance
from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    BrokerError,
    ClientError,
    ClientStateError,
    InvalidMessageError,
    Message,
    MessageQueue,
    NoRouteError,
    Producer,
    PushConsumer,
    RemotingError,
    SendResult,
    SendStatus,
)
from client.fault import FaultStrategy
from client.producer import select_by_hash
from codec import COMPRESSED_FLAG, decode_record, java_hash
from remoting.bodies import PERM_READ
from remoting.errors import MessageIllegalError, NoPermissionError
from tests.client.conftest import Received, create_topic, max_offsets, stored
from tests.client.test_fault import FakeClock
from tests.support import BrokerFactory, wait_dispatched, wait_until


def offset_id_parts(offset_msg_id: str) -> tuple[str, int]:
    """``host:port`` and commit-log offset of a broker's offset msg id."""
    raw = bytes.fromhex(offset_msg_id)
    assert len(raw) == 16
    (port,) = struct.unpack(">i", raw[4:8])
    (offset,) = struct.unpack(">q", raw[8:])
    return f"{socket.inet_ntoa(raw[:4])}:{port}", offset


# ---------------------------------------------------------------------------- round trips


async def test_send_round_trip(namesrv: NameServer, broker: Broker, producer: Producer) -> None:
    msg = Message(
        "TopicRT",
        b"hello",
        tags="TagA",
        keys=["order-1", "order-2"],
        properties={"color": "red", "ünïcode": "✓"},
        flag=3,
    )
    result = await producer.send(msg)
    assert result.status is SendStatus.SEND_OK
    assert len(result.msg_id) == 32 and result.msg_id == result.msg_id.upper()
    assert result.message_queue.topic == "TopicRT"
    assert result.message_queue.broker_name == "broker-a"
    assert 0 <= result.message_queue.queue_id < 4
    assert result.queue_offset == 0
    assert result.region_id == "DefaultRegion"
    assert result.trace_on is True
    host, commit_offset = offset_id_parts(result.offset_msg_id)
    assert host == broker.address
    assert commit_offset == 0
    second = await producer.send(Message("TopicRT", b"again"))
    assert offset_id_parts(second.offset_msg_id)[1] > commit_offset
    assert second.msg_id != result.msg_id

    # What a consumer sees: same ids, tags, keys, properties.
    received = Received()
    consumer = PushConsumer("rt-consumer", namesrv.address)
    consumer.subscribe("TopicRT")(received.add)
    async with consumer:
        await received.wait_for(2)
    view = next(m for m in received.messages if m.body == b"hello")
    assert view.msg_id == result.msg_id
    assert view.properties["UNIQ_KEY"] == result.msg_id
    assert view.offset_msg_id == result.offset_msg_id
    assert view.message_queue == result.message_queue
    assert view.queue_offset == result.queue_offset
    assert view.tags == "TagA"
    assert view.keys == ["order-1", "order-2"]
    assert view.properties["color"] == "red"
    assert view.properties["ünïcode"] == "✓"
    assert "WAIT" not in view.properties
    assert view.flag == 3
    assert view.reconsume_times == 0


async def test_topic_auto_created_via_tbw102(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    assert namesrv.routes.pick_topic_route("TopicNew") is None
    assert broker.topics.get("TopicNew") is None
    result = await producer.send(Message("TopicNew", b"first"))
    assert result.status is SendStatus.SEND_OK
    tc = broker.topics.get("TopicNew")
    assert tc is not None
    assert tc.write_queue_nums == tc.read_queue_nums == 4  # default_topic_queue_nums
    await wait_until(
        lambda: namesrv.routes.pick_topic_route("TopicNew") is not None,
        "the broker to register the new topic",
    )
    # More sends use the real route now; all land.
    for i in range(8):
        await producer.send(Message("TopicNew", f"m{i}".encode()))
    await wait_dispatched(broker)
    assert sum(max_offsets(broker, "TopicNew", range(4)).values()) == 9


async def test_default_topic_queue_nums(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-queues", namesrv.address, default_topic_queue_nums=2) as p:
        await p.send(Message("TopicTwoQueues", b"x"))
    tc = broker.topics.get("TopicTwoQueues")
    assert tc is not None and tc.write_queue_nums == 2


async def test_no_auto_creation_gives_no_route(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    await start_broker(auto_create_topic_enable=False)
    async with Producer("pg-noauto", namesrv.address) as p:
        with pytest.raises(NoRouteError, match=r"no route info of topic Unknown: .*TBW102") as e:
            await p.send(Message("Unknown", b"x"))
    assert e.value.topic == "Unknown"


async def test_compressed_body_on_the_wire(
    namesrv: NameServer, broker: Broker, producer: Producer
) -> None:
    """Bodies of 4 KiB or more travel (and are stored) zlib-compressed with sysFlag bit 0x1;
    consumers get them back intact. Smaller ones are stored as sent."""
    big = (b"0123456789abcdef" * 300)[:4096]
    small = big[:4095]
    r_big = await producer.send(Message("TopicZ", big))
    r_small = await producer.send(Message("TopicZ", small))
    await wait_dispatched(broker)

    record = broker.store.look_message_by_offset(offset_id_parts(r_big.offset_msg_id)[1])
    assert record is not None
    info = decode_record(record, 0)
    assert info.sys_flag & COMPRESSED_FLAG
    assert info.body_length < len(big)
    payload = record[info.body_offset : info.body_offset + info.body_length]
    assert zlib.decompress(payload) == big

    record = broker.store.look_message_by_offset(offset_id_parts(r_small.offset_msg_id)[1])
    assert record is not None
    info = decode_record(record, 0)
    assert not info.sys_flag & COMPRESSED_FLAG
    assert info.body_length == len(small)

    received = Received()
    consumer = PushConsumer("z-consumer", namesrv.address)
    consumer.subscribe("TopicZ")(received.add)
    async with consumer:
        await received.wait_for(2)
    assert sorted(received.bodies()) == sorted([big, small])


async def test_compress_over_bytes_argument(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-compress", namesrv.address, compress_over_bytes=10) as p:
        result = await p.send(Message("TopicZ2", b"a" * 10))
    record = broker.store.look_message_by_offset(offset_id_parts(result.offset_msg_id)[1])
    assert record is not None
    assert decode_record(record, 0).sys_flag & COMPRESSED_FLAG
    (view,) = await stored(broker, "TopicZ2", [result.message_queue.queue_id])
    assert view.body == b"a" * 10


async def test_send_oneway_arrives(broker: Broker, producer: Producer) -> None:
    await producer.send(Message("TopicOneway", b"create"))  # the topic exists from here
    for i in range(5):
        await producer.send_oneway(Message("TopicOneway", f"ow{i}".encode()))
    await wait_until(
        lambda: sum(max_offsets(broker, "TopicOneway", range(4)).values()) == 6,
        "the oneway messages to be stored",
    )
    bodies = {m.body for m in await stored(broker, "TopicOneway")}
    assert bodies == {b"create"} | {f"ow{i}".encode() for i in range(5)}


async def test_send_oneway_to_new_topic(broker: Broker, producer: Producer) -> None:
    await producer.send_oneway(Message("TopicOnewayNew", b"x"))
    await wait_until(
        lambda: sum(max_offsets(broker, "TopicOnewayNew", range(4)).values()) == 1,
        "the oneway message to be stored",
    )


async def test_send_async_callback(broker: Broker, producer: Producer) -> None:
    results: list[tuple[SendResult | None, BaseException | None]] = []
    done = asyncio.Event()

    def callback(result: SendResult | None, error: BaseException | None) -> None:
        results.append((result, error))
        done.set()

    task = producer.send_async(Message("TopicAsync", b"async"), callback)
    assert isinstance(task, asyncio.Task)
    async with asyncio.timeout(5):
        await done.wait()
    await task
    ((result, error),) = results
    assert error is None
    assert result is not None and result.status is SendStatus.SEND_OK
    (view,) = await stored(broker, "TopicAsync", [result.message_queue.queue_id])
    assert view.msg_id == result.msg_id


async def test_send_async_callback_gets_errors(broker: Broker, producer: Producer) -> None:
    await create_topic(broker, "TopicReadOnly", perm=PERM_READ)
    results: list[tuple[SendResult | None, BaseException | None]] = []
    task = producer.send_async(Message("TopicReadOnly", b"x"), lambda r, e: results.append((r, e)))
    async with asyncio.timeout(5):
        await task
    ((result, error),) = results
    assert result is None
    assert isinstance(error, NoPermissionError)


async def test_send_batch(namesrv: NameServer, broker: Broker, producer: Producer) -> None:
    msgs = [
        Message(
            "TopicBatch", f"b{i}".encode(), tags="TagB", keys=[f"k{i}"], properties={"i": str(i)}
        )
        for i in range(5)
    ]
    result = await producer.send_batch(msgs)
    assert result.status is SendStatus.SEND_OK
    ids = result.msg_id.split(",")
    assert len(ids) == 5 and len(set(ids)) == 5
    assert all(len(i) == 32 for i in ids)
    second = await producer.send_batch(msgs[:2])
    views = await stored(broker, "TopicBatch", [result.message_queue.queue_id])
    first_views = [v for v in views if v.msg_id in ids]
    assert [v.body for v in first_views] == [m.body for m in msgs]
    assert [v.msg_id for v in first_views] == ids
    offsets = [v.queue_offset for v in first_views]
    assert offsets == list(range(offsets[0], offsets[0] + 5))
    assert result.queue_offset == offsets[0]
    assert {v.queue_id for v in first_views} == {result.message_queue.queue_id}
    assert [v.properties["i"] for v in first_views] == [str(i) for i in range(5)]
    assert [v.keys for v in first_views] == [[f"k{i}"] for i in range(5)]
    assert {v.tags for v in first_views} == {"TagB"}
    assert len(second.msg_id.split(",")) == 2

    # A consumer sees every id of the batch.
    received = Received()
    consumer = PushConsumer("batch-consumer", namesrv.address)
    consumer.subscribe("TopicBatch")(received.add)
    async with consumer:
        await received.wait_for(7)
    assert set(ids) | set(second.msg_id.split(",")) == set(received.ids())


async def test_send_batch_rejects_mixed_topics(broker: Broker, producer: Producer) -> None:
    with pytest.raises(InvalidMessageError, match="a batch goes to one topic"):
        await producer.send_batch([Message("TopicA", b"a"), Message("TopicB", b"b")])
    assert broker.store.commit_log.max_offset == 0


async def test_send_orderly_same_key_same_queue(broker: Broker, producer: Producer) -> None:
    await create_topic(broker, "TopicOrder", queues=8)
    keys = [f"user-{i}" for i in range(6)]
    results: dict[str, list[SendResult]] = {k: [] for k in keys}
    for step in range(5):
        for key in keys:
            msg = Message("TopicOrder", f"{key}:{step}".encode())
            results[key].append(await producer.send_orderly(msg, sharding_key=key))
    queues = [MessageQueue("TopicOrder", "broker-a", i) for i in range(8)]
    for key in keys:
        assert {r.message_queue for r in results[key]} == {
            select_by_hash(queues, Message("TopicOrder", b"x"), key)
        }
        offsets = [r.queue_offset for r in results[key]]
        assert offsets == sorted(offsets)
    # In the queue, each key's messages are in send order.
    views = await stored(broker, "TopicOrder", range(8))
    for key in keys:
        steps = [int(v.body.split(b":")[1]) for v in views if v.body.startswith(f"{key}:".encode())]
        assert steps == list(range(5))


def test_select_by_hash_matches_java() -> None:
    """``SelectMessageQueueByHash``: ``abs(key.hashCode() % n)``."""
    queues = [MessageQueue("T", "b", i) for i in range(8)]
    msg = Message("T", b"x")
    for key in ("user-42", "polygenelubricants", "", "中文", "order-7"):
        h = java_hash(key)
        remainder = abs(h) % 8 if h < 0 else h % 8  # Java's % keeps the dividend's sign
        assert select_by_hash(queues, msg, key).queue_id == remainder
    assert select_by_hash(queues, msg, 42).queue_id == java_hash("42") % 8


async def test_send_orderly_custom_selector(broker: Broker, producer: Producer) -> None:
    await create_topic(broker, "TopicSel", queues=4)
    seen: list[tuple[list[MessageQueue], object]] = []

    def last_queue(queues: list[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
        seen.append((queues, arg))
        return queues[-1]

    result = await producer.send_orderly(
        Message("TopicSel", b"x"), selector=last_queue, arg={"id": 1}
    )
    assert result.message_queue.queue_id == 3
    assert seen[0][1] == {"id": 1}
    assert len(seen[0][0]) == 4
    with pytest.raises(InvalidMessageError, match="not a queue of TopicSel"):
        await producer.send_orderly(
            Message("TopicSel", b"x"),
            selector=lambda _q, _m, _a: MessageQueue("TopicSel", "broker-zz", 0),
        )
    with pytest.raises(InvalidMessageError, match="sharding_key or a selector"):
        await producer.send_orderly(Message("TopicSel", b"x"))
    with pytest.raises(InvalidMessageError, match="sharding_key or a selector"):
        await producer.send_orderly(
            Message("TopicSel", b"x"), sharding_key="k", selector=last_queue
        )


# ------------------------------------------------------------------------------ refusals


async def test_read_only_topic_raises_no_permission(broker: Broker, producer: Producer) -> None:
    await create_topic(broker, "TopicRO", perm=PERM_READ)
    with pytest.raises(NoPermissionError, match="sending message is forbidden") as e:
        await producer.send(Message("TopicRO", b"x"))
    assert isinstance(e.value, BrokerError)
    assert e.value.response_code == 16
    assert sum(max_offsets(broker, "TopicRO", range(4)).values()) == 0


async def test_broker_size_limit_raises_message_illegal(broker: Broker, producer: Producer) -> None:
    """The producer's limit (4 MiB) is above the broker's (512 KiB here): the broker's
    MESSAGE_ILLEGAL comes back typed, without retries on other brokers."""
    body = os.urandom(600 * 1024)  # incompressible
    with pytest.raises(MessageIllegalError):
        await producer.send(Message("TopicBig", body))


async def test_no_name_server(unused_port: int) -> None:
    async with Producer("pg-nons", f"127.0.0.1:{unused_port}") as p:
        with pytest.raises(RemotingError, match=f"127.0.0.1:{unused_port}"):
            await p.send(Message("T", b"x"))


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_no_name_server_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(ClientError, match="NAMESRV_ADDR"):
        Producer("pg")
    with pytest.raises(ClientError, match="NAMESRV_ADDR"):
        PushConsumer("cg")


async def test_namesrv_addr_from_env(
    monkeypatch: pytest.MonkeyPatch, namesrv: NameServer, broker: Broker
) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", namesrv.address)
    async with Producer("pg-env") as p:
        assert p.namesrv == namesrv.address
        result = await p.send(Message("TopicEnv", b"x"))
    assert result.status is SendStatus.SEND_OK


async def test_use_before_start_and_after_shutdown(namesrv: NameServer, broker: Broker) -> None:
    p = Producer("pg-state", namesrv.address)
    msg = Message("TopicState", b"x")
    with pytest.raises(ClientStateError, match="not started"):
        await p.send(msg)
    with pytest.raises(ClientStateError):
        await p.send_oneway(msg)
    with pytest.raises(ClientStateError):
        await p.send_batch([msg])
    with pytest.raises(ClientStateError):
        await p.send_orderly(msg, sharding_key="k")
    await p.start()
    await p.start()  # idempotent
    await p.send(msg)
    await p.shutdown()
    await p.shutdown()  # idempotent
    with pytest.raises(ClientStateError):
        await p.send(msg)  # the cached route does not let it through
    with pytest.raises(ClientStateError):
        await p.send_oneway(msg)


async def test_same_group_twice_in_one_process(namesrv: NameServer, broker: Broker) -> None:
    async with Producer("pg-dup", namesrv.address):
        second = Producer("pg-dup", namesrv.address)
        with pytest.raises(ClientError, match="pg-dup is already started"):
            await second.start()
        async with Producer("pg-other", namesrv.address) as other:  # another group is fine
            await other.send(Message("TopicDup", b"x"))
    async with second:  # free again once the first has shut down
        await second.send(Message("TopicDup", b"y"))


async def test_heartbeat_then_unregister_on_shutdown(
    monkeypatch: pytest.MonkeyPatch, namesrv: NameServer, broker: Broker
) -> None:
    """The shared instance heartbeats the producer group to the brokers it knows, and
    shutdown unregisters it (UNREGISTER_CLIENT). HEARTBEAT_S is shortened (configuration)."""
    monkeypatch.setattr(client.instance, "HEARTBEAT_S", 0.05)
    async with Producer("pg-hb", namesrv.address) as p:
        await p.send(Message("TopicHB", b"x"))  # now the instance knows broker-a
        await wait_until(lambda: "pg-hb" in broker.producers.groups, "the producer heartbeat")
    await wait_until(lambda: "pg-hb" not in broker.producers.groups, "the unregistration")


# ------------------------------------------------------------------ fault tolerance (2 brokers)


async def test_dead_broker_avoided_and_used_again_after_restart(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    broker_a = await start_broker("broker-a")
    broker_b = await start_broker("broker-b")
    for b in (broker_a, broker_b):
        await create_topic(b, "TopicFT", queues=2)
    clock = FakeClock()
    async with Producer("pg-ft", namesrv.address, send_timeout_s=3.0) as p:
        # The fault strategy's clock, so the 600 s isolation passes without waiting.
        p.fault = FaultStrategy(enabled=True, clock=clock)
        used = {
            (await p.send(Message("TopicFT", b"warm"))).message_queue.broker_name for _ in range(8)
        }
        assert used == {"broker-a", "broker-b"}

        port_a = broker_a.server.port
        await broker_a.shutdown()  # killed mid-run
        loop = asyncio.get_running_loop()
        started = loop.time()
        after: list[str] = []
        for i in range(20):
            result = await p.send(Message("TopicFT", f"during-{i}".encode()))
            assert result.status is SendStatus.SEND_OK
            after.append(result.message_queue.broker_name)
        assert loop.time() - started < 5.0  # a refused connection costs one retry, not a timeout
        assert set(after) == {"broker-b"}
        assert not p.fault.tolerance.is_available("broker-a")
        assert p.fault.tolerance.is_available("broker-b")

        # Back on the same port with the same store.
        broker_a2 = await start_broker("broker-a", port=port_a)
        assert broker_a2.address == f"127.0.0.1:{port_a}"
        for i in range(10):  # still isolated: the strategy does not try it yet
            result = await p.send(Message("TopicFT", f"isolated-{i}".encode()))
            assert result.message_queue.broker_name == "broker-b"
        clock.advance(600)
        assert p.fault.tolerance.is_available("broker-a")
        again = [
            (await p.send(Message("TopicFT", f"again-{i}".encode()))).message_queue.broker_name
            for i in range(8)
        ]
        assert "broker-a" in again
        assert p.fault.tolerance.is_available("broker-a")
    await wait_dispatched(broker_a2, broker_b)
    bodies = {m.body for m in await stored(broker_b, "TopicFT", range(2))}
    assert {f"during-{i}".encode() for i in range(20)} <= bodies
    restored = {m.body for m in await stored(broker_a2, "TopicFT", range(2))}
    assert b"warm" in restored  # the restarted broker kept what it stored before
    assert any(b.startswith(b"again-") for b in restored)


async def test_retry_avoids_failed_broker_without_fault_strategy(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    """``send_latency_fault_enable=False``: nothing is learned, but each retry still goes to
    another broker than the one that just failed, so every send succeeds."""
    broker_a = await start_broker("broker-a")
    broker_b = await start_broker("broker-b")
    for b in (broker_a, broker_b):
        await create_topic(b, "TopicRetry", queues=2)
    async with (
        Producer("pg-retry", namesrv.address, send_latency_fault_enable=False) as p,
        Producer(
            "pg-noretry",
            namesrv.address,
            send_latency_fault_enable=False,
            retry_times_when_send_failed=0,
        ) as p0,
    ):
        await p.send(Message("TopicRetry", b"warm"))
        await p0.send(Message("TopicRetry", b"warm"))  # both cache the two-broker route
        await broker_a.shutdown()
        for i in range(10):
            result = await p.send(Message("TopicRetry", f"r{i}".encode()))
            assert result.message_queue.broker_name == "broker-b"
        assert p.fault.tolerance.items == {}
        # Without retries, the round robin's turn of broker-a fails, typed.
        errors = 0
        for i in range(4):
            try:
                await p0.send(Message("TopicRetry", f"x{i}".encode()))
            except RemotingError:
                errors += 1
        assert errors == 2
