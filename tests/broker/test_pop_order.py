"""Orderly pops (POP_MESSAGE with order=true, RocketMQ 5's FIFO consumption): a queue is
blocked while its batch is in flight, its group's offset moves only over acked messages, a
batch not acked in time comes back in order without what was acked, and each message's
attempts count its deliveries. The receipts name revive queue 999, as 5.x's do."""

from __future__ import annotations

import asyncio
import time
import uuid

from broker.broker import Broker
from broker.pop_order import ORDER_REVIVE_QID, OrderedPops
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from remoting.bodies import SubscriptionGroupConfig
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from remoting.receipt import Receipt, parse_offset_info
from tests.proxy.grpc_raw import RawClient, consumer_settings, messages_of, receive_request
from tests.support import call, records, send_ok, wait_dispatched

GROUP = "cg-fifo"
POLLING_TIMEOUT = 210


def test_a_batch_blocks_its_queue_until_acked_or_expired() -> None:
    pops = OrderedPops()
    key = (GROUP, "t", 0)
    pops.handed_out(key, 0, [0, 1, 2], pop_time=1_000, invisible_time=500)
    assert pops.blocked(key, 1_200)
    assert not pops.blocked(key, 1_500)  # past its invisible time
    assert pops.ack(key, 1, 1_000) == 0  # 0 is still out: the offset stays
    assert pops.ack(key, 1, 1_000) is None  # once only
    assert pops.ack(key, 0, 999) is None  # not this batch's receipt
    assert pops.ack(key, 0, 1_000) == 2
    # Handed out again from 2 (expired): 1 is acked already and skipped; attempts grow.
    assert pops.skip_acked(key, [2, 3]) == [2, 3]
    pops.handed_out(key, 2, [2, 3], pop_time=2_000, invisible_time=500)
    assert pops.attempts(key, 2) == 2 and pops.attempts(key, 3) == 1
    assert pops.ack(key, 2, 1_000) is None  # the old receipt is void
    new_time = pops.change(key, 3, 2_000, 60_000)
    assert new_time is not None and pops.blocked(key, 2_600)
    assert pops.ack(key, 2, 2_000) == 3
    assert pops.ack(key, 3, new_time) == 4
    assert key not in pops.batches


async def _pop(
    client: RemotingClient, broker: Broker, topic: str, invisible_ms: int
) -> tuple[int, list[tuple[int, bytes, Receipt]]]:
    header = PopMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=invisible_ms,
        poll_time=0,
        born_time=0,
        init_mode=0,
        exp_type="TAG",
        exp="*",
        order=True,
    )
    response = await call(client, broker.address, RequestCode.POP_MESSAGE, header.to_ext_fields())
    if response.code != ResponseCode.SUCCESS:
        return response.code, []
    ext = response.ext_fields
    starts = parse_offset_info(ext.get("startOffsetInfo"))
    out = []
    for info in records(response.body_bytes):
        receipt = Receipt(
            ck_queue_offset=int(starts[("0", info.queue_id)]),
            pop_time=int(ext["popTime"]),
            invisible_time=int(ext["invisibleTime"]),
            revive_qid=int(ext["reviveQid"]),
            kind="0",
            broker_name=broker.config.broker_name,
            queue_id=info.queue_id,
            queue_offset=info.queue_offset,
        )
        out.append((info.queue_offset, info.topic.encode(), receipt))
    return response.code, out


async def _ack(client: RemotingClient, broker: Broker, topic: str, receipt: Receipt) -> int:
    assert receipt.queue_offset is not None
    header = AckMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=receipt.queue_id,
        extra_info=str(receipt),
        offset=receipt.queue_offset,
    )
    response = await call(client, broker.address, RequestCode.ACK_MESSAGE, header.to_ext_fields())
    return response.code


async def test_orderly_pops_keep_a_queue_in_order_until_acked(
    broker: Broker, client: RemotingClient
) -> None:
    topic = f"fifo_{uuid.uuid4().hex[:8]}"
    for n in range(3):
        await send_ok(client, broker.address, topic, f"m{n}".encode(), queue_id=0)
    await wait_dispatched(broker)

    code, first = await _pop(client, broker, topic, invisible_ms=400)
    assert code == ResponseCode.SUCCESS
    assert [offset for offset, _, _ in first] == [0, 1, 2]
    assert {r.revive_qid for _, _, r in first} == {ORDER_REVIVE_QID}
    # Blocked while the batch is out: nothing more from that queue.
    code, none = await _pop(client, broker, topic, invisible_ms=400)
    assert (code, none) == (POLLING_TIMEOUT, [])

    assert await _ack(client, broker, topic, first[0][2]) == ResponseCode.SUCCESS
    assert await _ack(client, broker, topic, first[2][2]) == ResponseCode.SUCCESS
    assert broker.offsets.query(GROUP, topic, 0) == 1  # 1 is still out
    await asyncio.sleep(0.5)  # past the invisible time

    code, again = await _pop(client, broker, topic, invisible_ms=60_000)
    assert [offset for offset, _, _ in again] == [1]  # 0 and 2 were acked
    assert broker.pop.ordered.attempts((GROUP, topic, 0), 1) == 2
    assert await _ack(client, broker, topic, first[1][2]) == ResponseCode.NO_MESSAGE  # void
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=0,
        extra_info=str(again[0][2]),
        offset=1,
        invisible_time=60_000,
    )
    changed = await call(
        client, broker.address, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
    )
    assert changed.code == ResponseCode.SUCCESS
    assert int(changed.ext_fields["reviveQid"]) == ORDER_REVIVE_QID
    new = Receipt(
        1,
        int(changed.ext_fields["popTime"]),
        60_000,
        ORDER_REVIVE_QID,
        "0",
        broker.config.broker_name,
        0,
        1,
    )
    assert await _ack(client, broker, topic, new) == ResponseCode.SUCCESS
    assert broker.offsets.query(GROUP, topic, 0) == 3  # all three done
    await send_ok(client, broker.address, topic, b"m3", queue_id=0)
    await wait_dispatched(broker)
    code, last = await _pop(client, broker, topic, invisible_ms=60_000)
    assert [offset for offset, _, _ in last] == [3]


async def test_a_fifo_group_gets_fifo_settings_queue_assignments_and_orderly_receives(
    broker: Broker, client: RemotingClient
) -> None:
    """Over gRPC: a group with consumeMessageOrderly is told fifo=true in its settings, is
    assigned each queue, and its receives are orderly pops (receipts of revive queue 999,
    the next message of the queue only after the first is acked)."""
    topic = f"fifo_{uuid.uuid4().hex[:8]}"
    group = f"fifo_group_{uuid.uuid4().hex[:6]}"
    broker.subscription_groups.update(SubscriptionGroupConfig(group, consume_message_orderly=True))
    broker.topics.create_internal(topic, 2, 6)
    for n in range(2):
        await send_ok(client, broker.address, topic, f"m{n}".encode(), queue_id=1)
    await wait_dispatched(broker)
    async with (
        RawClient(broker.grpc.port) as five,
        five.telemetry(consumer_settings(group, topic)) as stream,
    ):
        assert stream.reply.settings.subscription.fifo is True
        assignment = await five.unary(
            "QueryAssignment",
            rpc.QueryAssignmentRequest(
                topic=pb.Resource(name=topic), group=pb.Resource(name=group)
            ),
            rpc.QueryAssignmentResponse,
        )
        assert sorted(a.message_queue.id for a in assignment.assignments) == [0, 1]
        got = await five.receive(receive_request(group, topic, invisible_s=30, batch=1))
        messages = messages_of(got)
        assert [m.body for m in messages] == [b"m0"]
        handle = messages[0].system_properties.receipt_handle
        assert handle.split(" ")[3] == str(ORDER_REVIVE_QID)
        # m1 waits for m0's ack: the queue is held for the group while m0 is out.
        assert broker.pop.ordered.blocked((group, topic, 1), int(time.time() * 1000))
