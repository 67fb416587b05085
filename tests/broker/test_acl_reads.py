"""ACL read bypasses closed in M11's review, on a real broker with ``aclEnable``: a
QUERY_MESSAGE key whose ``topic#key`` hash collides with another topic's, a pull of the broker's
parking topics (delayed and half messages of any topic wait there), and a VIEW_MESSAGE_BY_ID
at an offset inside a message body that holds a forged record naming the sender's topic."""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.broker import Broker
from client import SessionCredentials
from codec import decode_offset_msg_id, decode_record, encode_record, java_hash
from remoting.acl import AclClientHook
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.headers import QueryMessageRequestHeader
from tests.broker.test_acl import ACL_FILE
from tests.support import BrokerFactory, call, pull, send

SUB_ACCOUNT = """\
  - accessKey: subKey
    secretKey: subSecret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY]
"""
KEYS = {
    "normal": SessionCredentials("RocketMQ", "12345678"),  # topicA DENY, topicB PUB|SUB
    "admin": SessionCredentials("adminKey", "adminSecret"),
    "sub": SessionCredentials("subKey", "subSecret"),  # SUB on every topic but topicA
}


@pytest.fixture
async def acl_broker(start_broker: BrokerFactory, tmp_path: Path) -> Broker:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE + SUB_ACCOUNT)
    broker = await start_broker(acl_enable=True, acl_file_path=path)
    for topic in ("topicA", "topicB"):
        broker.topics.create_internal(topic, 2, 6)
    return broker


@pytest.fixture
async def clients() -> AsyncIterator[dict[str, RemotingClient]]:
    async with contextlib.AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(RemotingClient(hooks=[AclClientHook(creds)]))
            for name, creds in KEYS.items()
        }


def refused(response: RemotingCommand, remark: str) -> bool:
    return response.code == ResponseCode.NO_PERMISSION and response.remark == remark


def colliding_key(topic: str, other: str) -> str:
    """A key ``k`` with java_hash(f"{topic}#{k}") == java_hash(other): seven base-31 digits
    (characters '0'..'N') after a fixed prefix reach any 32-bit residue, as 31**7 > 2**32."""
    prefix = f"{topic}#x"
    digits = 7
    lowest = sum(ord("0") * 31**i for i in range(digits))
    residue = (java_hash(other) - java_hash(prefix) * 31**digits - lowest) % 2**32
    tail = ""
    for _ in range(digits):
        residue, d = divmod(residue, 31)
        tail = chr(ord("0") + d) + tail
    assert residue == 0
    key = "x" + tail
    assert java_hash(f"{topic}#{key}") == java_hash(other)
    return key


def records_of(body: bytes) -> list[tuple[str, bytes]]:
    """(topic, body) of each record in a QUERY_MESSAGE answer."""
    out, pos = [], 0
    while pos < len(body):
        info = decode_record(body, pos)
        start = pos + info.body_offset
        out.append((info.topic, body[start : start + info.body_length]))
        pos += info.total_size
    return out


async def test_a_colliding_query_key_returns_only_the_queried_topics_records(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address
    key = colliding_key("topicB", "topicA#order-1")
    r = await send(clients["admin"], addr, "topicA", b"secret", keys="order-1")
    assert r.code == ResponseCode.SUCCESS, r
    r = await send(clients["normal"], addr, "topicB", b"mine", keys=f"other {key}")
    assert r.code == ResponseCode.SUCCESS, r
    acl_broker.store.dispatch_all()

    async def query(who: str, topic: str, key: str) -> RemotingCommand:
        ext = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=32, begin_timestamp=0, end_timestamp=2**62
        ).to_ext_fields()
        return await call(clients[who], addr, RequestCode.QUERY_MESSAGE, ext)

    got = await query("normal", "topicB", key)
    assert got.code == ResponseCode.SUCCESS, got
    assert records_of(got.body_bytes) == [("topicB", b"mine")]
    # The index finds the topicB record for topicA#order-1 too (the same hash): not a match.
    got = await query("admin", "topicA", "order-1")
    assert records_of(got.body_bytes) == [("topicA", b"secret")]
    got = await query("normal", "topicB", "order-1")
    assert got.code == ResponseCode.QUERY_NOT_FOUND, got


async def test_parking_topics_are_read_by_admins_only(
    acl_broker: Broker, clients: dict[str, RemotingClient]
) -> None:
    addr = acl_broker.address
    r = await send(clients["admin"], addr, "topicA", b"delayed secret", extra={"DELAY": "3"})
    assert r.code == ResponseCode.SUCCESS, r
    half = {"TRAN_MSG": "true", "PGROUP": "pgT"}
    r = await send(clients["admin"], addr, "topicA", b"half secret", sys_flag=0x4, extra=half)
    assert r.code == ResponseCode.SUCCESS, r
    acl_broker.store.dispatch_all()
    parked = (("SCHEDULE_TOPIC_XXXX", 2), ("RMQ_SYS_TRANS_HALF_TOPIC", 0))
    for topic, queue_id in parked:
        r = await pull(clients["sub"], addr, topic, queue_id=queue_id, group="g1")
        assert refused(
            r, f"Need admin permission for system topic={topic}, but accessKey=subKey is not"
        ), (topic, r)
        r = await pull(clients["admin"], addr, topic, queue_id=queue_id, group="g1")
        assert r.code == ResponseCode.SUCCESS and b"secret" in r.body_bytes, (topic, r)
    for topic in ("RMQ_SYS_TRANS_OP_HALF_TOPIC", "rmq_sys_wheel_timer", "rmq_sys_REVIVE_LOG_x"):
        r = await pull(clients["sub"], addr, topic, queue_id=0, group="g1")
        assert r.code == ResponseCode.NO_PERMISSION, (topic, r)
    # Trace readers keep their SUB on the trace topic.
    r = await pull(clients["sub"], addr, "RMQ_SYS_TRACE_TOPIC", queue_id=0, group="g1")
    assert r.code != ResponseCode.NO_PERMISSION, r
    # The account's own topics stay readable.
    r = await pull(clients["sub"], addr, "topicB", queue_id=0, group="g1")
    assert r.code != ResponseCode.NO_PERMISSION, r


async def test_a_view_at_a_forged_record_inside_a_body_is_refused(
    acl_broker: Broker, clients: dict[str, RemotingClient], start_broker: BrokerFactory
) -> None:
    async def forge_and_send(broker: Broker, client: RemotingClient) -> tuple[int, int]:
        """Send to topicB a body holding a record that names topicB and claims to be where
        it lands; (the real record's offset, the forged one's)."""
        host = (b"\x7f\x00\x00\x01", 1)
        fake = bytearray(
            encode_record(
                topic=b"topicB",
                queue_id=0,
                body=b"forged",
                flag=0,
                properties=b"",
                sys_flag=0,
                born_timestamp=int(time.time() * 1000),
                born_host=host,
                store_host=host,
            )
        )
        prefix = b"pad:"
        start = broker.store.commit_log.max_offset
        forged_at = start + 88 + len(prefix)  # an IPv4 record's body starts at byte 88
        struct.pack_into(">q", fake, 28, forged_at)  # PHYSICALOFFSET, as a real one says
        r = await send(client, broker.address, "topicB", prefix + bytes(fake) + b":pad")
        assert r.code == ResponseCode.SUCCESS, r
        real = decode_offset_msg_id(r.ext_fields["msgId"])[1]
        assert real == start
        broker.store.dispatch_all()
        return real, forged_at

    real, forged = await forge_and_send(acl_broker, clients["normal"])

    async def view(offset: int) -> RemotingCommand:
        ext = {"offset": str(offset)}
        return await call(
            clients["normal"], acl_broker.address, RequestCode.VIEW_MESSAGE_BY_ID, ext
        )

    assert (await view(real)).code == ResponseCode.SUCCESS
    assert refused(
        await view(forged), f"No message at commit log offset {forged} to check the permission of"
    )
    # Without the ACL the view answers as for any offset where no message starts.
    plain = await start_broker()
    plain.topics.create_internal("topicB", 2, 6)
    async with RemotingClient() as client:
        real, forged = await forge_and_send(plain, client)
        ext = {"offset": str(forged)}
        r = await call(client, plain.address, RequestCode.VIEW_MESSAGE_BY_ID, ext)
        assert r.code == ResponseCode.SYSTEM_ERROR, r
        assert r.remark == f"can not find message by the offset, {forged}"
        ext = {"offset": str(real)}
        r = await call(client, plain.address, RequestCode.VIEW_MESSAGE_BY_ID, ext)
        assert r.code == ResponseCode.SUCCESS, r
