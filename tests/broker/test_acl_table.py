"""ACL: one permission rule per request code the broker serves, walked against the running
broker's processor table, and the bypasses found in M11 closed on a real broker with
``aclEnable``: reads through POP_MESSAGE and VIEW_MESSAGE_BY_ID, offsets reset and cloned, queues
of other groups locked, DELETE_EXPIRED_COMMITLOG, a send-back or transaction end naming a
message of a topic the account may not touch, and an account's ``whiteRemoteAddress`` standing
in for its signature."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ClientError,
    ConsumeFromWhere,
    Message,
    Producer,
    SessionCredentials,
    SimpleConsumer,
)
from client.admin import Admin
from codec import decode_offset_msg_id
from remoting.acl import AclClientHook
from remoting.bodies import ConsumerData, HeartbeatData, LockBatchBody
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RocketMQError
from remoting.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    PopMessageRequestHeader,
    ResetOffsetRequestHeader,
)
from remoting.route import MessageQueue
from tests.broker.conftest import subscription
from tests.broker.test_acl import ACL_FILE
from tests.support import BrokerFactory, call, pull, send

MORE_ACCOUNTS = """\
  - accessKey: farKey
    secretKey: farSecret
    whiteRemoteAddress: 10.9.9.9
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: stranger
    secretKey: strangerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: everyKey
    secretKey: everySecret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""
KEYS = {
    "normal": SessionCredentials("RocketMQ", "12345678"),  # topicA DENY, topicB PUB|SUB, …
    "admin": SessionCredentials("adminKey", "adminSecret"),
    "white": SessionCredentials("whiteKey", "whiteSecret"),  # whiteRemoteAddress 127.0.0.1
    "white_wrong": SessionCredentials("whiteKey", "not-the-secret"),
    "far": SessionCredentials("farKey", "farSecret"),  # may connect from 10.9.9.9 only
    "stranger": SessionCredentials("stranger", "strangerSecret"),  # DENY everywhere
    "every": SessionCredentials("everyKey", "everySecret"),  # PUB|SUB everywhere, not admin
}


@pytest.fixture
async def acl_broker(start_broker: BrokerFactory, tmp_path: Path) -> Broker:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE + MORE_ACCOUNTS)
    broker = await start_broker(acl_enable=True, acl_file_path=path)
    for topic in ("topicA", "topicB", "topicC"):
        broker.topics.create_internal(topic, 2, 6)
    return broker


@pytest.fixture
async def clients() -> AsyncIterator[dict[str, RemotingClient]]:
    async with contextlib.AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(RemotingClient(hooks=[AclClientHook(creds)]))
            for name, creds in KEYS.items()
        }


async def stored(client: RemotingClient, broker: Broker, topic: str, **kw: object) -> int:
    """Send one message; its commit-log offset."""
    response = await send(client, broker.address, topic, b"secret", **kw)  # type: ignore[arg-type]
    assert response.code == ResponseCode.SUCCESS, response
    return decode_offset_msg_id(response.ext_fields["msgId"])[1]


def refused(response: RemotingCommand, remark: str) -> bool:
    return response.code == ResponseCode.NO_PERMISSION and response.remark == remark


async def test_every_code_the_broker_serves_has_a_rule_and_fails_closed(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    from broker.acl import (
        ADMIN,
        OPEN,
        PERMISSIONS,
    )  # imported here: new in M11, the rest runs on older trees

    served = acl_broker.processors.codes
    assert len(served) > 40
    assert sorted(served - PERMISSIONS.keys()) == []  # a code without a rule
    assert sorted(PERMISSIONS.keys() - served) == []  # a rule nobody serves
    addr = acl_broker.address
    victim = await stored(clients["admin"], acl_broker, "topicA")
    # Every field any header names a topic, group or offset in, all naming the victims.
    fields = {
        "topic": "topicA",
        "b": "topicA",
        "consumerGroup": "groupA",
        "group": "groupA",
        "srcGroup": "groupA",
        "destGroup": "groupA",
        "producerGroup": "groupA",
        "a": "groupA",
        "offset": str(victim),
        "commitLogOffset": str(victim),
        "queueId": "0",
    }
    mq = MessageQueue("topicA", acl_broker.config.broker_name, 0)
    bodies: dict[int, bytes] = {
        RequestCode.HEART_BEAT: HeartbeatData(
            "cid", [], [ConsumerData("groupA", subscription_data_set=[subscription("topicA")])]
        ).encode(),
        RequestCode.LOCK_BATCH_MQ: LockBatchBody("groupA", "cid", [mq]).encode(),
        RequestCode.UNLOCK_BATCH_MQ: LockBatchBody("groupA", "cid", [mq]).encode(),
    }
    # A signed account with no permission gets through only where nothing is needed.
    through = set()
    for code in sorted(served):
        r = await call(clients["stranger"], addr, code, fields, bodies.get(code))
        if r.code != ResponseCode.NO_PERMISSION:
            through.add(code)
    assert through == {c for c in served if PERMISSIONS[c] == OPEN}
    assert through == {RequestCode.CHECK_CLIENT_CONFIG, RequestCode.GET_BROKER_RUNTIME_INFO}
    # Every permission on every topic and group is still not an admin's.
    admin_codes = {c for c in served if PERMISSIONS[c] == ADMIN}
    assert {
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    } <= admin_codes
    for code in sorted(admin_codes):
        r = await call(clients["every"], addr, code, fields, bodies.get(code))
        assert refused(
            r, f"Need admin permission for request code={code}, but accessKey=everyKey is not"
        ), (code, r)


async def test_pop_and_view_by_id_read_only_what_the_account_may(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address
    in_a = await stored(clients["admin"], acl_broker, "topicA")  # normal: topicA DENY
    in_b = await stored(clients["admin"], acl_broker, "topicB")  # normal: topicB PUB|SUB

    async def pop(topic: str, group: str) -> RemotingCommand:
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=32,
            invisible_time=60_000,
            poll_time=0,
            born_time=int(time.time() * 1000),
            init_mode=0,
        )
        return await call(clients["normal"], addr, RequestCode.POP_MESSAGE, header.to_ext_fields())

    assert refused(await pop("topicA", "groupB"), "No default permission for topic=topicA")
    assert refused(await pop("topicB", "groupA"), "No default permission for group=groupA")
    got = await pop("topicB", "groupB")
    assert got.code == ResponseCode.SUCCESS and b"secret" in got.body_bytes, got

    async def view(offset: int) -> RemotingCommand:
        ext = {"offset": str(offset)}
        return await call(clients["normal"], addr, RequestCode.VIEW_MESSAGE_BY_ID, ext)

    assert refused(await view(in_a), "No default permission for topic=topicA")
    assert (await view(in_b)).code == ResponseCode.SUCCESS
    nowhere = 1 << 40
    assert refused(
        await view(nowhere), f"No message at commit log offset {nowhere} to check the permission of"
    )


async def test_offsets_locks_and_files_of_others_need_an_admin_or_the_group(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address
    reset = ResetOffsetRequestHeader(topic="topicB", group="groupB", timestamp=0).to_ext_fields()
    clone = CloneGroupOffsetRequestHeader(
        src_group="groupB", dest_group="groupC", topic="topicB"
    ).to_ext_fields()
    for code, ext in (
        (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset),
        (RequestCode.CLONE_GROUP_OFFSET, clone),
        (RequestCode.DELETE_EXPIRED_COMMITLOG, {}),
    ):
        r = await call(clients["normal"], addr, code, ext)
        assert refused(
            r, f"Need admin permission for request code={code}, but accessKey=RocketMQ is not"
        ), r
        assert (await call(clients["admin"], addr, code, ext)).code == ResponseCode.SUCCESS

    mqs = [MessageQueue("topicB", acl_broker.config.broker_name, q) for q in (0, 1)]
    for code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        other = LockBatchBody("groupA", "intruder", mqs).encode()  # groupA: DENY
        r = await call(clients["normal"], addr, code, body=other)
        assert refused(r, "No default permission for group=groupA"), r
        hidden = LockBatchBody("groupB", "me", [MessageQueue("topicA", "b", 0)]).encode()
        r = await call(clients["normal"], addr, code, body=hidden)
        assert refused(r, "No default permission for topic=topicA"), r
        own = LockBatchBody("groupB", "me", mqs).encode()
        assert (await call(clients["normal"], addr, code, body=own)).code == ResponseCode.SUCCESS
    assert sorted(acl_broker.locks.try_lock("groupA", mqs, "owner", int(time.time() * 1000))) == mqs


async def test_send_back_and_transaction_end_check_the_stored_message(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address

    async def send_back(who: str, group: str, offset: int, origin: str) -> RemotingCommand:
        ext = ConsumerSendMsgBackRequestHeader(
            offset=offset, group=group, delay_level=0, origin_topic=origin
        ).to_ext_fields()
        return await call(clients[who], addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext)

    in_a = await stored(clients["admin"], acl_broker, "topicA")
    in_c = await stored(clients["admin"], acl_broker, "topicC")
    # The header's originTopic is the sender's word; the stored message's topic decides.
    r = await send_back("normal", "groupB", in_a, "topicB")
    assert refused(r, "No default permission for topic=topicA"), r
    # A consumer needs SUB, not PUB: topicC=SUB and groupC=SUB are enough (as RocketMQ).
    assert (await send_back("normal", "groupC", in_c, "topicC")).code == ResponseCode.SUCCESS
    # A retry topic is its group's, whatever producer group a send names.
    r = await send(clients["normal"], addr, "%RETRY%groupA", b"x", producer_group="groupB")
    assert refused(r, "No default permission for group=groupA"), r
    r = await pull(clients["normal"], addr, "%RETRY%groupA", queue_id=0, group="groupB")
    assert refused(r, "No default permission for group=groupA"), r

    props = {"TRAN_MSG": "true", "PGROUP": "pgT"}
    half_a = await stored(clients["admin"], acl_broker, "topicA", sys_flag=0x4, extra=props)
    half_b = await stored(clients["admin"], acl_broker, "topicB", sys_flag=0x4, extra=props)

    async def commit(offset: int) -> RemotingCommand:
        ext = EndTransactionRequestHeader(
            producer_group="pgT",
            tran_state_table_offset=0,
            commit_log_offset=offset,
            commit_or_rollback=8,
            msg_id="m",
        ).to_ext_fields()
        return await call(clients["normal"], addr, RequestCode.END_TRANSACTION, ext)

    assert refused(await commit(half_a), "No default permission for topic=topicA")
    assert (await commit(half_b)).code != ResponseCode.NO_PERMISSION


async def test_an_accounts_white_address_restricts_and_never_replaces_the_signature(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address
    create = {
        "topic": "topicNew",
        "defaultTopic": "TBW102",
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    r = await call(clients["white_wrong"], addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
    assert refused(r, "Check signature failed for accessKey=whiteKey"), r
    assert acl_broker.topics.get("topicNew") is None
    # The right secret from its address: the account's own permissions (default DENY) apply.
    r = await send(clients["white"], addr, "topicB", b"x")
    assert refused(r, "No default permission for topic=topicB"), r
    # The right secret from elsewhere: refused, whatever the permissions.
    r = await send(clients["far"], addr, "topicB", b"x")
    assert refused(
        r, "accessKey=farKey may not connect from 127.0.0.1, outside its whiteRemoteAddress"
    ), r
    # globalWhiteRemoteAddresses keeps its meaning: a trusted network needs no keys.
    acl = acl_broker.acl
    assert acl is not None
    rules = acl.rules
    rules.global_white = ["127.0.0.1"]
    acl.save(rules)
    async with RemotingClient() as plain:
        assert (await send(plain, addr, "topicA", b"x")).code == ResponseCode.SUCCESS


async def test_the_sdk_with_credentials_pops_and_an_admin_views_and_resets(
    namesrv: NameServer, acl_broker: Broker
) -> None:
    await acl_broker.registration.register_all()
    async with Producer("pg-acl", namesrv.address, credentials=KEYS["admin"]) as producer:
        hidden = await producer.send(Message("topicA", b"for admins"))
        await producer.send(Message("topicB", b"for groupB"))
    async with SimpleConsumer(
        "groupB",
        namesrv.address,
        subscriptions={"topicB": "*"},
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        credentials=KEYS["normal"],
    ) as sc:
        got = await sc.receive(16)
        assert [m.body for m in got] == [b"for groupB"]
        await sc.ack(got[0])
    async with Admin(namesrv.address, credentials=KEYS["normal"]) as admin:
        with pytest.raises((ClientError, RocketMQError), match="topic=topicA"):
            await admin.view_message(hidden.offset_msg_id)
        with pytest.raises((ClientError, RocketMQError), match="Need admin permission"):
            await admin.reset_offset_by_time("groupB", "topicB", 0)
    async with Admin(namesrv.address, credentials=KEYS["admin"]) as admin:
        assert (await admin.view_message(hidden.offset_msg_id)).body == b"for admins"
        await admin.reset_offset_by_time("groupB", "topicB", 0)
