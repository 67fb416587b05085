"""RocketMQ 5's pop consumption on the wire: POP_MESSAGE, ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME with 5.x's headers and receipts, against a real broker, through
our RemotingClient acting as a 5.x remoting client (which builds each message's receipt from
the response header as ``MQClientAPIImpl.processPopResponse`` does)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.broker import Broker
from codec import RecordInfo
from remoting.bodies import SubscriptionGroupConfig
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from remoting.receipt import Receipt, parse_offset_info, topic_type
from tests.support import (
    BrokerFactory,
    call,
    record_body,
    record_props,
    records,
    send_ok,
    wait_dispatched,
    wait_until,
)

TOPIC = "TopicPop"
GROUP = "cg-pop"
POLLING_TIMEOUT = 210


class Popped:
    """One popped message with the receipt a 5.x client would compute for it."""

    def __init__(self, info: RecordInfo, body: bytes, receipt: Receipt) -> None:
        self.info = info
        self.body = body
        self.receipt = receipt
        self.props = record_props(info)


async def pop(
    client: RemotingClient,
    broker: Broker,
    *,
    group: str = GROUP,
    max_nums: int = 32,
    invisible_ms: int = 300,
    poll_ms: int = 0,
    queue_id: int = -1,
    exp: str = "*",
    exp_type: str = "TAG",
) -> tuple[RemotingCommand, list[Popped]]:
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=TOPIC,
        queue_id=queue_id,
        max_msg_nums=max_nums,
        invisible_time=invisible_ms,
        poll_time=poll_ms,
        born_time=0,
        init_mode=0,
        exp_type=exp_type,
        exp=exp,
    )
    response = await call(
        client,
        broker.address,
        RequestCode.POP_MESSAGE,
        header.to_ext_fields(),
        timeout_s=poll_ms / 1000 + 5,
    )
    if response.code != ResponseCode.SUCCESS:
        return response, []
    ext = response.ext_fields
    starts = parse_offset_info(ext.get("startOffsetInfo"))
    body = response.body_bytes
    infos = records(body)
    out = []
    for n, info in enumerate(infos):
        kind = topic_type(info.topic)
        receipt = Receipt(
            ck_queue_offset=int(starts[(kind, info.queue_id)]),
            pop_time=int(ext["popTime"]),
            invisible_time=int(ext["invisibleTime"]),
            revive_qid=int(ext["reviveQid"]),
            kind=kind,
            broker_name=broker.config.broker_name,
            queue_id=info.queue_id,
            queue_offset=info.queue_offset,
        )
        out.append(Popped(info, record_body(body, infos, n), receipt))
    return response, out


async def ack(
    client: RemotingClient, broker: Broker, msg: Popped, *, group: str = GROUP
) -> RemotingCommand:
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=TOPIC,
        queue_id=msg.info.queue_id,
        extra_info=str(msg.receipt),
        offset=msg.info.queue_offset,
    )
    return await call(client, broker.address, RequestCode.ACK_MESSAGE, header.to_ext_fields())


async def change(
    client: RemotingClient, broker: Broker, msg: Popped, invisible_ms: int
) -> RemotingCommand:
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC,
        queue_id=msg.info.queue_id,
        extra_info=str(msg.receipt),
        offset=msg.info.queue_offset,
        invisible_time=invisible_ms,
    )
    response = await call(
        client, broker.address, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
    )
    if response.code == ResponseCode.SUCCESS:
        ext = response.ext_fields
        old = msg.receipt
        msg.receipt = Receipt(
            msg.info.queue_offset,
            int(ext["popTime"]),
            int(ext["invisibleTime"]),
            int(ext["reviveQid"]),
            old.kind,
            old.broker_name,
            old.queue_id,
            msg.info.queue_offset,
        )
    return response


async def fill(client: RemotingClient, broker: Broker, count: int) -> None:
    for n in range(count):
        await send_ok(client, broker.address, TOPIC, f"m{n}".encode(), queue_id=n % 2)
    await wait_dispatched(broker)


async def test_acked_messages_never_come_back(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, 6)
    response, got = await pop(client, broker)
    assert response.code == ResponseCode.SUCCESS, response
    assert sorted(m.body for m in got) == [f"m{n}".encode() for n in range(6)]
    assert {m.receipt.kind for m in got} == {"0"}
    for msg in got:
        assert (await ack(client, broker, msg)).code == ResponseCode.SUCCESS
    await asyncio.sleep(0.6)  # two invisible times
    response, again = await pop(client, broker)
    assert (response.code, again) == (POLLING_TIMEOUT, [])
    # The pop offsets are the group's consumer offsets, past what was handed out.
    assert broker.offsets.queues_of(GROUP, TOPIC) == {0: 3, 1: 3}
    assert broker.pop.checkpoints == {}


async def test_an_unacked_message_comes_back_with_one_more_attempt(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, 2)
    _, first = await pop(client, broker, invisible_ms=200)
    keep, drop = first
    assert (await ack(client, broker, keep)).code == ResponseCode.SUCCESS
    _response, none_yet = await pop(client, broker)
    assert none_yet == []  # invisible
    await wait_until(lambda: broker.pop.revived == 1, "the revive", 3)
    await wait_dispatched(broker)
    _, again = await pop(client, broker)
    (back,) = again
    assert back.body == drop.body
    assert back.info.reconsume_times == 1
    assert back.info.topic == f"%RETRY%{GROUP}_{TOPIC}"
    assert back.receipt.kind == "1"
    assert back.props["RETRY_TOPIC"] == TOPIC
    assert back.props["UNIQ_KEY"] == drop.props["UNIQ_KEY"]
    assert (await ack(client, broker, back)).code == ResponseCode.SUCCESS
    # A late ack of the first delivery: its checkpoint is gone.
    late = await ack(client, broker, drop)
    assert late.code == ResponseCode.NO_MESSAGE
    assert "expired or unknown" in (late.remark or "")


async def test_change_invisible_time_extends_and_shortens(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, 2)
    _, got = await pop(client, broker, invisible_ms=300)
    longer, shorter = got
    old_receipt = str(longer.receipt)
    assert (await change(client, broker, longer, 1500)).code == ResponseCode.SUCCESS
    assert (await change(client, broker, shorter, 50)).code == ResponseCode.SUCCESS
    await wait_until(lambda: broker.pop.revived == 1, "the shortened one back", 3)
    await asyncio.sleep(0.5)  # the old deadline of the other one goes by
    assert broker.pop.revived == 1
    # The receipt from before the change is no longer good; the new one is.
    stale = Popped(longer.info, longer.body, Receipt.parse(old_receipt))
    assert (await ack(client, broker, stale)).code == ResponseCode.NO_MESSAGE
    assert (await ack(client, broker, longer)).code == ResponseCode.SUCCESS
    await asyncio.sleep(1.2)
    assert broker.pop.revived == 1


async def test_after_the_max_attempts_the_message_goes_to_the_dlq(
    broker: Broker, client: RemotingClient
) -> None:
    broker.subscription_groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=2))
    await fill(client, broker, 1)
    attempts = []
    for _ in range(3):
        await wait_until(lambda: broker.pop.checkpoints == {}, "the previous delivery revived", 3)
        await wait_dispatched(broker)
        _, got = await pop(client, broker, invisible_ms=100)
        (msg,) = got
        attempts.append(msg.info.reconsume_times)
    assert attempts == [0, 1, 2]
    dlq = f"%DLQ%{GROUP}"
    await wait_until(lambda: broker.store.get_max_offset(dlq, 0) == 1, "the dead letter", 3)
    assert broker.pop.dead_lettered == 1
    await asyncio.sleep(0.3)
    _response, nothing = await pop(client, broker)
    assert nothing == []


async def test_open_checkpoints_survive_a_restart(
    start_broker: BrokerFactory, client: RemotingClient, tmp_path: Path
) -> None:
    root = tmp_path / "pop-restart"
    broker = await start_broker(root=root)
    await fill(client, broker, 4)
    _, got = await pop(client, broker, invisible_ms=1200)
    acked = {m.body for m in got[:2]}
    for msg in got[:2]:
        assert (await ack(client, broker, msg)).code == ResponseCode.SUCCESS
    await broker.shutdown()
    broker = await start_broker(root=root)
    assert len(broker.pop.checkpoints) >= 1
    await wait_until(lambda: broker.pop.revived == 2, "the two un-acked back", 5)
    await wait_dispatched(broker)
    _, again = await pop(client, broker)
    assert sorted(m.body for m in again) == sorted({m.body for m in got} - acked)
    assert {m.info.reconsume_times for m in again} == {1}


async def test_an_empty_pop_waits_for_a_message(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, 1)
    _, got = await pop(client, broker)
    await ack(client, broker, got[0])
    waiting = asyncio.create_task(pop(client, broker, poll_ms=3000))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await send_ok(client, broker.address, TOPIC, b"late", queue_id=1)
    response, late = await asyncio.wait_for(waiting, 3)
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in late] == [b"late"]
    loop = asyncio.get_running_loop()
    started = loop.time()
    response, nothing = await pop(client, broker, poll_ms=300)
    assert (response.code, nothing) == (POLLING_TIMEOUT, [])
    assert loop.time() - started >= 0.25


async def test_two_consumers_of_a_group_share_without_duplicates(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, 40)
    results = await asyncio.gather(
        *(pop(client, broker, max_nums=8, invisible_ms=5000) for _ in range(6))
    )
    bodies = [m.body for _, got in results for m in got]
    assert len(bodies) == len(set(bodies)) == 40


async def test_tag_expression(broker: Broker, client: RemotingClient) -> None:
    for n, tag in enumerate(["A", "B", "A", "C"]):
        await send_ok(client, broker.address, TOPIC, f"t{n}".encode(), tags=tag)
    await wait_dispatched(broker)
    _, got = await pop(client, broker, exp="A || C")
    assert sorted(m.body for m in got) == [b"t0", b"t2", b"t3"]


async def test_an_sql92_pop_waits_for_a_matching_message(
    broker: Broker, client: RemotingClient
) -> None:
    """SQL92 on a pop, as RocketMQ 5's PopMessageProcessor serves it (no enablePropertyFilter
    needed): a parked pop lets a non-matching arrival go by and answers the matching one."""
    assert not broker.config.enable_property_filter
    await send_ok(client, broker.address, TOPIC, b"a1", extra={"a": "1"})
    waiting = asyncio.create_task(pop(client, broker, poll_ms=4000, exp="a > 5", exp_type="SQL92"))
    await asyncio.sleep(0.3)
    await send_ok(client, broker.address, TOPIC, b"a2", queue_id=1, extra={"a": "2"})
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await send_ok(client, broker.address, TOPIC, b"a9", queue_id=2, extra={"a": "9"})
    response, got = await asyncio.wait_for(waiting, 4)
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in got] == [b"a9"]
    for exp, exp_type in (("a >", "SQL92"), ("a > 5", "CLASS")):
        refused, _ = await pop(client, broker, exp=exp, exp_type=exp_type)
        assert refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, refused
        assert "parse the consumer's subscription failed" in (refused.remark or "")


async def test_bad_requests_get_clear_codes(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, 1)
    too_many, _ = await pop(client, broker, max_nums=33)
    assert too_many.code == ResponseCode.INVALID_PARAMETER
    none, _ = await pop(client, broker, max_nums=0)
    assert none.code == ResponseCode.INVALID_PARAMETER
    bad_queue, _ = await pop(client, broker, queue_id=9)
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER
    header = PopMessageRequestHeader(
        consumer_group=GROUP,
        topic="NoSuchTopic",
        queue_id=-1,
        max_msg_nums=1,
        invisible_time=1000,
        poll_time=0,
        born_time=0,
        init_mode=0,
    )
    unknown = await call(client, broker.address, RequestCode.POP_MESSAGE, header.to_ext_fields())
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    missing = await call(client, broker.address, RequestCode.POP_MESSAGE, {"topic": TOPIC})
    assert missing.code == ResponseCode.SYSTEM_ERROR
    garbled = AckMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=0, extra_info="1 2 x", offset=0
    )
    bad_ack = await call(client, broker.address, RequestCode.ACK_MESSAGE, garbled.to_ext_fields())
    assert bad_ack.code == ResponseCode.INVALID_PARAMETER
    assert "extraInfo" in (bad_ack.remark or "")
    _, got = await pop(client, broker)
    assert len(got) == 1  # the broker serves on
