"""ACL 1.0 on a real broker (``aclEnable=true``, a plain_acl.yml in the test's directory):
the allow/deny matrix over accounts, default and per-resource permissions, admin codes,
whitelists and signatures; the file re-read when it changes (a broken one keeps the rules);
the ACL admin codes; and the SDK signing end to end."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog.testing

from broker.acl import address_matcher, check_permission, parse_perm
from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, Producer, PushConsumer, SessionCredentials
from client.errors import ClientError
from remoting.acl import AclClientHook
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.errors import RocketMQError
from tests.support import BrokerFactory, call, pull, send, wait_until

ACL_FILE = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
  - accessKey: adminKey
    secretKey: adminSecret
    admin: true
  - accessKey: whiteKey
    secretKey: whiteSecret
    whiteRemoteAddress: 127.0.0.1
"""
NORMAL = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("adminKey", "adminSecret")


@pytest.fixture
async def acl_broker(start_broker: BrokerFactory, tmp_path: Path) -> Broker:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    broker = await start_broker(acl_enable=True, acl_file_path=path)
    assert broker.acl is not None
    # Topics exist (created by the admin, as an operator would), so only the ACL decides.
    for topic in ("topicA", "topicB", "topicC", "topicX"):
        broker.topics.create_internal(topic, 2, 6)
    return broker


@pytest.fixture
async def signed() -> AsyncIterator[dict[str, RemotingClient]]:
    """A remoting client per account (plus one that does not sign)."""
    async with contextlib.AsyncExitStack() as stack:
        out = {}
        for name, creds in {
            "normal": NORMAL,
            "admin": ADMIN,
            "wrong": SessionCredentials("RocketMQ", "not-the-secret"),
            "unknown": SessionCredentials("nobody1", "whatever1"),
            "white": SessionCredentials("whiteKey", "wrong-secret-but-whitelisted"),
        }.items():
            out[name] = await stack.enter_async_context(
                RemotingClient(hooks=[AclClientHook(creds)])
            )
        out["plain"] = await stack.enter_async_context(RemotingClient())
        yield out


async def test_the_allow_deny_matrix(acl_broker: Broker, signed: dict[str, RemotingClient]) -> None:
    addr = acl_broker.address

    async def sent(who: str, topic: str) -> tuple[int, str]:
        r = await send(signed[who], addr, topic, b"x")
        return r.code, r.remark or ""

    assert await sent("plain", "topicB") == (
        ResponseCode.NO_PERMISSION,
        "No accessKey is configured",
    )
    assert await sent("unknown", "topicB") == (
        ResponseCode.NO_PERMISSION,
        "No acl config for nobody1",
    )
    assert await sent("wrong", "topicB") == (
        ResponseCode.NO_PERMISSION,
        "Check signature failed for accessKey=RocketMQ",
    )
    assert (await sent("normal", "topicB"))[0] == ResponseCode.SUCCESS  # PUB|SUB
    for topic in ("topicA", "topicC", "topicX"):  # DENY, SUB only, default DENY
        assert await sent("normal", topic) == (
            ResponseCode.NO_PERMISSION,
            f"No default permission for topic={topic}",
        )
    assert (await sent("admin", "topicA"))[0] == ResponseCode.SUCCESS  # admin: everything
    # An account's whiteRemoteAddress no longer stands in for its signature.
    assert await sent("white", "topicA") == (
        ResponseCode.NO_PERMISSION,
        "Check signature failed for accessKey=whiteKey",
    )

    async def pulled(topic: str, group: str) -> int:
        return (await pull(signed["normal"], addr, topic, queue_id=0, group=group)).code

    allowed = {ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED}
    assert await pulled("topicB", "groupB") in allowed
    assert await pulled("topicC", "groupC") in allowed
    assert await pulled("topicC", "groupZ") in allowed  # defaultGroupPerm SUB
    assert await pulled("topicC", "groupA") == ResponseCode.NO_PERMISSION  # group DENY
    assert await pulled("topicA", "groupB") == ResponseCode.NO_PERMISSION  # topic DENY

    create = {
        "topic": "topicNew",
        "defaultTopic": "TBW102",
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    refused = await call(signed["normal"], addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert (
        refused.remark == "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    )
    done = await call(signed["admin"], addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
    assert done.code == ResponseCode.SUCCESS


async def test_refusals_are_logged(acl_broker: Broker, signed: dict[str, RemotingClient]) -> None:
    with structlog.testing.capture_logs() as logs:
        await send(signed["plain"], acl_broker.address, "topicB", b"x")
    denied = [e for e in logs if e["event"] == "acl_denied"]
    assert denied and denied[0]["reason"] == "No accessKey is configured"


async def test_the_file_is_re_read_and_a_broken_one_changes_nothing(
    acl_broker: Broker, signed: dict[str, RemotingClient]
) -> None:
    acl = acl_broker.acl
    assert acl is not None
    assert any(loop.name == "acl-reload" and loop.running for loop in acl_broker.housekeeping)
    path = acl.path
    path.write_text(
        ACL_FILE.replace(
            "globalWhiteRemoteAddresses:\n", "globalWhiteRemoteAddresses: [127.0.0.*]\n"
        )
    )
    os.utime(path, (1, 1))  # a different mtime, whatever the clock's resolution
    assert acl.reload_if_changed()
    assert (
        await send(signed["plain"], acl_broker.address, "topicA", b"x")
    ).code == ResponseCode.SUCCESS
    path.write_text("accounts: [oops")
    os.utime(path, (2, 2))
    with structlog.testing.capture_logs() as logs:
        assert not acl.reload_if_changed()
    assert any(e["event"] == "acl_reload_failed" for e in logs)
    # still the last good rules
    assert (
        await send(signed["plain"], acl_broker.address, "topicA", b"x")
    ).code == ResponseCode.SUCCESS


async def test_the_acl_admin_codes(acl_broker: Broker, signed: dict[str, RemotingClient]) -> None:
    addr = acl_broker.address
    fields = {
        "accessKey": "newUser1",
        "secretKey": "newSecret1",
        "defaultTopicPerm": "PUB",
        "defaultGroupPerm": "SUB",
        "topicPerms": "topicA=SUB,topicB=DENY",
        "admin": "false",
    }
    refused = await call(signed["normal"], addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)
    assert refused.code == ResponseCode.NO_PERMISSION
    made = await call(signed["admin"], addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)
    assert made.code == ResponseCode.SUCCESS, made
    assert "newUser1" in acl_broker.acl.path.read_text()  # type: ignore[union-attr]
    async with RemotingClient(
        hooks=[AclClientHook(SessionCredentials("newUser1", "newSecret1"))]
    ) as c:
        assert (await send(c, addr, "topicX", b"x")).code == ResponseCode.SUCCESS  # default PUB
        assert (await send(c, addr, "topicB", b"x")).code == ResponseCode.NO_PERMISSION
    info = await call(signed["admin"], addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
    assert info.ext_fields["accounts"] == "4"
    version = json.loads(info.ext_fields["version"])  # a DataVersion, as Java's client reads it
    assert version["counter"] >= 2 and version["timestamp"] > 0
    files = json.loads(info.ext_fields["allAclFileVersion"])
    assert files == {str(acl_broker.acl.path): version}  # type: ignore[union-attr]
    white = await call(
        signed["admin"],
        addr,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        {"globalWhiteAddrs": "10.0.0.*,192.168.1.1-10"},
    )
    assert white.code == ResponseCode.SUCCESS
    bad = await call(
        signed["admin"],
        addr,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        {"globalWhiteAddrs": "x.y"},
    )
    assert bad.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    gone = await call(
        signed["admin"], addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newUser1"}
    )
    assert gone.code == ResponseCode.SUCCESS
    again = await call(
        signed["admin"], addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newUser1"}
    )
    assert again.code == ResponseCode.DELETE_ACL_CONFIG_FAILED


async def test_the_sdk_signs_end_to_end(
    namesrv: NameServer, start_broker: BrokerFactory, tmp_path: Path
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    broker = await start_broker(acl_enable=True, acl_file_path=path)
    broker.topics.create_internal("topicB", 2, 6)
    await broker.registration.register_all()
    received: list[bytes] = []
    consumer = PushConsumer(
        "groupB",
        namesrv.address,
        credentials=NORMAL,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe("topicB")(lambda m: received.append(m.body))
    async with Producer("pg-acl", namesrv.address, credentials=NORMAL) as producer:
        for n in range(5):
            await producer.send(Message("topicB", f"m{n}".encode()))
        async with consumer:
            await wait_until(lambda: len(received) >= 5, "the signed consumer", 10)
    assert sorted(received) == [f"m{n}".encode() for n in range(5)]
    async with Producer(
        "pg-anon", namesrv.address, retry_times_when_send_failed=0, send_timeout_s=2
    ) as anonymous:
        with pytest.raises((ClientError, RocketMQError)) as err:
            await anonymous.send(Message("topicB", b"no keys"))
    assert "No accessKey is configured" in str(err.value)


def test_patterns_and_permissions() -> None:
    assert address_matcher("192.168.0.*")("192.168.0.7")
    assert not address_matcher("192.168.0.*")("192.168.1.7")
    assert address_matcher("192.168.*.*")("192.168.9.9")
    assert address_matcher("192.168.1.1-10")("192.168.1.10")
    assert not address_matcher("192.168.1.1-10")("192.168.1.11")
    assert address_matcher("192.168.1.{1,2,3}")("192.168.1.2")
    assert address_matcher("10.0.0.1,10.0.0.2")("10.0.0.2")
    assert address_matcher("*")("anything")
    assert not address_matcher("")("127.0.0.1")
    assert address_matcher("::1")("::1")
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB")
    assert parse_perm("nonsense") == parse_perm("DENY")
    assert check_permission(parse_perm("SUB"), parse_perm("PUB|SUB"))
    assert not check_permission(parse_perm("PUB"), parse_perm("SUB"))
    assert not check_permission(parse_perm("SUB"), parse_perm("DENY"))
