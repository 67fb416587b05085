"""PULL_MESSAGE on the wire: stored records, status mapping and offsets, tag filtering by
request and by heartbeat, commit offsets and long polling (protocol.md §7.2, §9.4, §9.7, §12)."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.broker import Broker
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from tests.broker.conftest import heartbeat, raw_json_call
from tests.support import (
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    BrokerFactory,
    ClientFactory,
    call,
    pull,
    pull_header,
    record_body,
    record_props,
    records,
    send_ok,
    wait_dispatched,
    wait_until,
)

PULL_HEADERS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")


def offsets(response: RemotingCommand) -> tuple[int, int, int]:
    """(nextBeginOffset, minOffset, maxOffset); all four pull headers must be present."""
    ext = response.ext_fields
    for name in PULL_HEADERS:
        assert name in ext, f"{name} missing from {response}"
    assert ext["suggestWhichBrokerId"] == "0"
    return int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"])


async def fill(
    client: RemotingClient, broker: Broker, topic: str, tags: list[str | None], queue_id: int = 0
) -> None:
    for n, tag in enumerate(tags):
        await send_ok(client, broker.address, topic, f"m{n}".encode(), queue_id=queue_id, tags=tag)
    await wait_dispatched(broker)


async def parked(broker: Broker, count: int = 1) -> None:
    await wait_until(lambda: broker.pull_hold.count == count, f"{count} parked pull(s)")


# ------------------------------------------------------------------------------- found


async def test_found_body_is_the_raw_records(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicP", [None] * 5)
    response = await pull(client, broker.address, "TopicP")
    assert response.code == ResponseCode.SUCCESS, response
    assert response.remark == "FOUND"
    assert offsets(response) == (5, 0, 5)
    body = response.body_bytes
    infos = records(body)
    assert [i.queue_offset for i in infos] == [0, 1, 2, 3, 4]
    assert [record_body(body, infos, n) for n in range(5)] == [f"m{n}".encode() for n in range(5)]
    assert all(i.topic == "TopicP" and i.queue_id == 0 for i in infos)
    # Physical offsets are real and increasing.
    phys = [i.commit_log_offset for i in infos]
    assert phys == sorted(phys)
    assert len(set(phys)) == 5


async def test_found_respects_max_msg_nums_and_start_offset(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicMax", [None] * 6)
    response = await pull(client, broker.address, "TopicMax", offset=2, max_nums=3)
    assert response.code == ResponseCode.SUCCESS, response
    assert [i.queue_offset for i in records(response.body_bytes)] == [2, 3, 4]
    assert offsets(response) == (5, 0, 6)


async def test_found_in_binary_header(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicPB", [None])
    response = await pull(client, broker.address, "TopicPB", serialize_type=SerializeType.ROCKETMQ)
    assert response.code == ResponseCode.SUCCESS, response
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert len(records(response.body_bytes)) == 1


# ------------------------------------------------------------------------- not found


async def test_at_max_offset_without_suspend_is_pull_not_found(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicEnd", [None, None])
    response = await pull(client, broker.address, "TopicEnd", offset=2)
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert offsets(response) == (2, 0, 2)
    assert not response.body_bytes


async def test_empty_queue_at_offset_zero_is_pull_not_found(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicEmpty", [None], queue_id=0)
    response = await pull(client, broker.address, "TopicEmpty", queue_id=1)  # never written
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert offsets(response) == (0, 0, 0)


async def test_offset_beyond_max_is_offset_moved(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicMoved", [None, None, None])
    response = await pull(client, broker.address, "TopicMoved", offset=10)
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    next_begin, min_offset, max_offset = offsets(response)
    assert (min_offset, max_offset) == (0, 3)
    # RocketMQ 4.9.8 corrects to the min offset when it is 0 (nextOffsetCorrection).
    assert next_begin in (0, 3)


async def test_non_zero_offset_in_an_empty_queue_is_offset_moved(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicEmpty2", [None], queue_id=0)
    response = await pull(client, broker.address, "TopicEmpty2", queue_id=1, offset=4)
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    assert offsets(response)[0] == 0


# ---------------------------------------------------------------------------- filters


async def test_tag_filter_from_the_request(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicTags", ["TagA", "TagB", "TagC", None, "TagA"])
    response = await pull(client, broker.address, "TopicTags", subscription="TagA || TagB")
    assert response.code == ResponseCode.SUCCESS, response
    infos = records(response.body_bytes)
    assert [i.queue_offset for i in infos] == [0, 1, 4]
    assert [record_props(i)["TAGS"] for i in infos] == ["TagA", "TagB", "TagA"]
    assert offsets(response)[0] == 5


async def test_everything_filtered_out_is_retry_immediately(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicNone", ["TagX", "TagY"])
    response = await pull(client, broker.address, "TopicNone", subscription="TagA")
    assert response.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert offsets(response)[0] == 2


async def test_tag_filter_from_the_heartbeat(broker: Broker, client: RemotingClient) -> None:
    await heartbeat(client, broker.address, "10.0.0.5@1", "cg-hb", {"TopicHb": "TagB"})
    await fill(client, broker, "TopicHb", ["TagA", "TagB", "TagC"])
    response = await pull(
        client, broker.address, "TopicHb", group="cg-hb", sys_flag=0, subscription=None
    )
    assert response.code == ResponseCode.SUCCESS, response
    infos = records(response.body_bytes)
    assert [record_props(i)["TAGS"] for i in infos] == ["TagB"]


async def test_cpp_heartbeat_with_atoi_code_set_still_filters(
    broker: Broker, client: RemotingClient
) -> None:
    """The C++ client fills codeSet with atoi(tag) = 0 and sends ordinals and strings
    (protocol.md §8.5); the broker must recompute the hash codes from the tags."""
    body = {
        "clientID": "10.0.0.6@cpp",
        "consumerDataSet": [
            {
                "consumeFromWhere": 0,
                "consumeType": 1,
                "groupName": "cg-cpp",
                "messageModel": 1,
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "codeSet": [0, 0],
                        "expressionType": "TAG",
                        "subString": "TagA || TagC",
                        "subVersion": "1700000000000",
                        "tagsSet": ["TagA", "TagC"],
                        "topic": "TopicCppHb",
                    }
                ],
                "unitMode": False,
            }
        ],
    }
    response = await call(
        client, broker.address, RequestCode.HEART_BEAT, body=json.dumps(body).encode()
    )
    assert response.code == ResponseCode.SUCCESS, response
    await fill(client, broker, "TopicCppHb", ["TagA", "TagB", "TagC"])
    response = await pull(
        client, broker.address, "TopicCppHb", group="cg-cpp", sys_flag=0, subscription=None
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert [record_props(i)["TAGS"] for i in records(response.body_bytes)] == ["TagA", "TagC"]


async def test_no_subscription_and_no_heartbeat_is_subscription_not_exist(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicNoSub", [None])
    response = await pull(
        client, broker.address, "TopicNoSub", group="cg-nobody", sys_flag=0, subscription=None
    )
    assert response.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_heartbeat_without_that_topic_is_subscription_not_exist(
    broker: Broker, client: RemotingClient
) -> None:
    await heartbeat(client, broker.address, "10.0.0.5@2", "cg-other", {"Elsewhere": "*"})
    await fill(client, broker, "TopicNotSubscribed", [None])
    response = await pull(
        client,
        broker.address,
        "TopicNotSubscribed",
        group="cg-other",
        sys_flag=0,
        subscription=None,
    )
    assert response.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


# ---------------------------------------------------------------------------- offsets


async def query_offset(client: RemotingClient, broker: Broker, group: str, topic: str) -> int:
    response = await call(
        client,
        broker.address,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": "0"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    return int(response.ext_fields["offset"])


async def test_commit_offset_flag_stores_the_offset(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicCommit", [None] * 4)
    response = await pull(
        client,
        broker.address,
        "TopicCommit",
        group="cg-commit",
        offset=3,
        sys_flag=PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET,
        commit_offset=3,
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert await query_offset(client, broker, "cg-commit", "TopicCommit") == 3
    # Without the flag the offset in the header is ignored.
    await pull(client, broker.address, "TopicCommit", group="cg-commit", commit_offset=1)
    assert await query_offset(client, broker, "cg-commit", "TopicCommit") == 3


# ---------------------------------------------------------------------- bad requests


@pytest.mark.parametrize("queue_id", [8, 100, -1])
async def test_queue_id_out_of_range_is_system_error(
    broker: Broker, client: RemotingClient, queue_id: int
) -> None:
    await fill(client, broker, "TopicRange", [None])  # auto-created with 4 queues
    response = await pull(client, broker.address, "TopicRange", queue_id=queue_id)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and "queueId" in response.remark


async def test_unknown_topic_is_topic_not_exist(broker: Broker, client: RemotingClient) -> None:
    response = await pull(client, broker.address, "NoSuchTopic")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_missing_header_field_is_system_error(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicHdr", [None])
    ext = {"consumerGroup": "cg", "topic": "TopicHdr", "queueId": "0", "queueOffset": "0"}
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark and "<maxMsgNums>" in response.remark


# ------------------------------------------------------------------------ long polling


async def test_held_pull_is_answered_when_a_message_arrives(
    broker: Broker, client: RemotingClient, start_client: ClientFactory
) -> None:
    await fill(client, broker, "TopicLong", [None])  # create the topic; queue 1 stays empty
    consumer = await start_client()
    loop = asyncio.get_running_loop()
    started = loop.time()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicLong",
            queue_id=1,
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    assert not held.done()
    await send_ok(client, broker.address, "TopicLong", b"wake", queue_id=1)
    response = await asyncio.wait_for(held, 3.0)
    elapsed = loop.time() - started
    assert elapsed < 2.0, f"answered after {elapsed:.2f} s; suspend timeout was 5 s"
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    assert record_body(body, infos, 0) == b"wake"
    assert offsets(response)[0] == 1
    assert broker.pull_hold.count == 0


async def test_held_pull_at_the_end_of_a_queue_gets_the_next_message(
    broker: Broker, client: RemotingClient, start_client: ClientFactory
) -> None:
    await fill(client, broker, "TopicTail", [None, None])
    consumer = await start_client()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicTail",
            offset=2,
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    await send_ok(client, broker.address, "TopicTail", b"third")
    response = await asyncio.wait_for(held, 3.0)
    assert response.code == ResponseCode.SUCCESS, response
    assert [i.queue_offset for i in records(response.body_bytes)] == [2]


async def test_held_pull_ignores_messages_its_tags_do_not_match(
    start_broker: BrokerFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    # No periodic re-check during the test: RocketMQ's wakes held pulls without a tag check.
    broker = await start_broker(long_polling_check_interval_ms=60_000)
    await fill(client, broker, "TopicLongTag", [None], queue_id=1)
    consumer = await start_client()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicLongTag",
            offset=1,
            queue_id=1,
            subscription="TagA",
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    await send_ok(client, broker.address, "TopicLongTag", b"other", queue_id=1, tags="TagB")
    await wait_dispatched(broker)
    done, _ = await asyncio.wait({held}, timeout=0.3)
    assert not done, "a pull for TagA was answered by a TagB message"
    assert broker.pull_hold.count == 1

    await send_ok(client, broker.address, "TopicLongTag", b"mine", queue_id=1, tags="TagA")
    response = await asyncio.wait_for(held, 3.0)
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    infos = records(body)
    assert [i.queue_offset for i in infos] == [2]
    assert record_body(body, infos, 0) == b"mine"
    assert offsets(response)[0] == 3


async def test_held_pull_times_out_with_pull_not_found(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicIdle", [None])
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await pull(
        client,
        broker.address,
        "TopicIdle",
        offset=1,
        sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
        suspend_ms=1000,
        timeout_s=5.0,
    )
    elapsed = loop.time() - started
    assert response.code == ResponseCode.PULL_NOT_FOUND, response
    assert offsets(response) == (1, 0, 1)
    assert 0.9 <= elapsed < 2.0, f"answered after {elapsed:.2f} s for a 1 s suspend"


async def test_held_pull_of_a_closed_connection_is_dropped(
    broker: Broker, client: RemotingClient, start_client: ClientFactory
) -> None:
    await fill(client, broker, "TopicGoneConsumer", [None])
    consumer = await start_client()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicGoneConsumer",
            offset=1,
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    await consumer.shutdown()
    with pytest.raises(RemotingError):
        await asyncio.wait_for(held, 3.0)
    await wait_until(lambda: broker.pull_hold.count == 0, "the held pull to be dropped")
    # A message for that queue now wakes nobody and breaks nothing.
    await send_ok(client, broker.address, "TopicGoneConsumer", b"late")
    response = await pull(client, broker.address, "TopicGoneConsumer", offset=1)
    assert response.code == ResponseCode.SUCCESS


async def test_held_pull_with_commit_offset_stores_it_once(
    broker: Broker, client: RemotingClient, start_client: ClientFactory
) -> None:
    await fill(client, broker, "TopicHeldCommit", [None])
    consumer = await start_client()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicHeldCommit",
            group="cg-held",
            offset=1,
            commit_offset=1,
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND | PULL_COMMIT_OFFSET,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    assert await query_offset(client, broker, "cg-held", "TopicHeldCommit") == 1
    await send_ok(client, broker.address, "TopicHeldCommit", b"x")
    response = await asyncio.wait_for(held, 3.0)
    assert response.code == ResponseCode.SUCCESS, response
    assert await query_offset(client, broker, "cg-held", "TopicHeldCommit") == 1


async def test_pull_with_numbers_in_the_json_header(broker: Broker, client: RemotingClient) -> None:
    """The C++ client sends queueId, maxMsgNums, sysFlag … as JSON numbers (§3)."""
    await fill(client, broker, "TopicCppPull", ["TagA", "TagB"])
    ext = {
        "consumerGroup": "cg-cpp-pull",
        "topic": "TopicCppPull",
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": PULL_SUBSCRIPTION,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "TagB",
        "subVersion": 0,
    }
    kind, response = await raw_json_call(
        broker.address, {"code": int(RequestCode.PULL_MESSAGE), "opaque": 9, "extFields": ext}
    )
    assert kind == SerializeType.JSON
    assert response.code == ResponseCode.SUCCESS, response
    assert [record_props(i)["TAGS"] for i in records(response.body_bytes)] == ["TagB"]


async def test_pull_returns_at_most_32_messages_from_memory(
    broker: Broker, client: RemotingClient
) -> None:
    await fill(client, broker, "TopicMany", [None] * 40)
    response = await pull(client, broker.address, "TopicMany", max_nums=100)
    assert response.code == ResponseCode.SUCCESS, response
    assert len(records(response.body_bytes)) == 32
    assert offsets(response)[0] == 32


async def test_every_pull_held_on_a_queue_is_woken(
    broker: Broker, client: RemotingClient, start_client: ClientFactory
) -> None:
    await fill(client, broker, "TopicMulti", [None])
    consumers = [await start_client() for _ in range(2)]
    held = [
        asyncio.create_task(
            pull(
                c,
                broker.address,
                "TopicMulti",
                group=f"cg-{n}",
                offset=1,
                sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
                suspend_ms=5000,
                timeout_s=8.0,
                serialize_type=(SerializeType.JSON, SerializeType.ROCKETMQ)[n],
            )
        )
        for n, c in enumerate(consumers)
    ]
    await parked(broker, 2)
    await send_ok(client, broker.address, "TopicMulti", b"for-both")
    responses = await asyncio.wait_for(asyncio.gather(*held), 3.0)
    for response in responses:
        assert response.code == ResponseCode.SUCCESS, response
        assert [i.queue_offset for i in records(response.body_bytes)] == [1]
    assert [r.serialize_type for r in responses] == [SerializeType.JSON, SerializeType.ROCKETMQ]


async def test_short_polling_holds_for_short_polling_time(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(long_polling_enable=False, short_polling_time_ms=300)
    await fill(client, broker, "TopicShort", [None])
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await pull(
        client,
        broker.address,
        "TopicShort",
        offset=1,
        sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
        suspend_ms=5000,
    )
    elapsed = loop.time() - started
    assert response.code == ResponseCode.PULL_NOT_FOUND, response
    assert 0.25 <= elapsed < 1.5, f"answered after {elapsed:.2f} s; shortPollingTimeMills 300"


async def test_shutdown_answers_held_pulls(
    start_broker: BrokerFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    broker = await start_broker()
    await fill(client, broker, "TopicBye", [None])
    consumer = await start_client()
    held = asyncio.create_task(
        pull(
            consumer,
            broker.address,
            "TopicBye",
            offset=1,
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=5000,
            timeout_s=8.0,
        )
    )
    await parked(broker)
    await broker.shutdown()
    response = await asyncio.wait_for(held, 3.0)
    assert response.code == ResponseCode.PULL_NOT_FOUND, response
    assert offsets(response) == (1, 0, 1)


async def test_sql92_subscription_is_refused(broker: Broker, client: RemotingClient) -> None:
    await fill(client, broker, "TopicSql", [None])
    ext = pull_header("TopicSql", subscription="a > 1")
    ext["expressionType"] = "SQL92"
    response = await call(client, broker.address, RequestCode.PULL_MESSAGE, ext)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "The broker does not support consumer to filter message by SQL92"


async def test_subscription_older_than_the_pull_is_not_latest(
    broker: Broker, client: RemotingClient
) -> None:
    await heartbeat(client, broker.address, "10.0.0.5@v", "cg-ver", {"TopicVer": "*"})
    await fill(client, broker, "TopicVer", [None])
    response = await pull(
        client,
        broker.address,
        "TopicVer",
        group="cg-ver",
        sys_flag=0,
        subscription=None,
        sub_version=1_800_000_000_000,
    )
    assert response.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
