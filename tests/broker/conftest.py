"""Fixtures and helpers for the wire-level broker and name server tests.

Real servers on 127.0.0.1:0 and our own ``RemotingClient``; nothing of ours is mocked. A
``NameServer`` and a ``Broker`` (store in ``tmp_path``, small segments and index files, short
flush intervals) are started by factories that own an ``AsyncExitStack``, so everything shuts
down even when a test fails. Request builders follow docs/protocol.md §7 (headers), §8 (JSON
bodies) and §10 (batch bodies); pulled bodies are parsed with ``codec``.

Test modules import the helpers: ``from tests.broker.conftest import …``. Every wait here has a
deadline, so a broken server fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig
from broker.namesrv.server import NameServer
from codec import RecordInfo, decode_properties, decode_record, java_hash
from remoting.bodies import (
    ConsumerData,
    HeartbeatData,
    KVTable,
    SubscriptionData,
    parse_tag_expression,
)
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, decode_command, next_opaque
from remoting.dispatch import ProcessorTable
from remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from store.config import StoreConfig

LOOPBACK = "127.0.0.1"
TIMEOUT_S = 5.0
BORN_TIMESTAMP = 1_700_000_000_123

# Small files: segments roll and index files stay a few KiB. Short flush intervals keep
# shutdown quick.
STORE_DEFAULTS: dict[str, Any] = {
    "commit_log_file_bytes": 1 << 16,
    "consume_queue_file_bytes": 20 * 64,
    "max_message_bytes": 1 << 14,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "flush_interval_ms": 10,
    "flush_interval_consume_queue_ms": 10,
}

CLIENT_CONFIG = ClientConfig(connect_timeout_s=2.0, request_timeout_s=TIMEOUT_S)

# PullSysFlag (protocol.md §9.4)
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4


# ------------------------------------------------------------------------------ fixtures


class NamesrvFactory(Protocol):
    async def __call__(self, **config: Any) -> NameServer: ...


class BrokerFactory(Protocol):
    async def __call__(
        self, *, root: Path | None = ..., store: Mapping[str, Any] | None = ..., **config: Any
    ) -> Broker: ...


class ClientFactory(Protocol):
    async def __call__(self, processors: ProcessorTable | None = None) -> RemotingClient: ...


def store_config(root: Path, **overrides: Any) -> StoreConfig:
    """A StoreConfig under ``root`` with the small sizes above, ``overrides`` on top."""
    return StoreConfig(root_dir=root, **{**STORE_DEFAULTS, **overrides})


@pytest.fixture
async def start_namesrv() -> AsyncIterator[NamesrvFactory]:
    """``await start_namesrv(**NamesrvConfig fields)``: a name server on 127.0.0.1:0."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(**config: Any) -> NameServer:
            cfg = NamesrvConfig(
                **{"bind_address": LOOPBACK, "listen_port": 0, "metrics_port": 0, **config}
            )
            return await stack.enter_async_context(NameServer(cfg))

        yield start


@pytest.fixture
async def namesrv(start_namesrv: NamesrvFactory) -> NameServer:
    return await start_namesrv()


@pytest.fixture
async def start_broker(namesrv: NameServer, tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """``await start_broker(root=…, store={…}, **BrokerConfig fields)``: a broker on
    127.0.0.1:0 registered with ``namesrv``; each one gets its own store directory unless
    ``root`` is given (persistence tests reuse one)."""
    count = 0
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            *, root: Path | None = None, store: Mapping[str, Any] | None = None, **config: Any
        ) -> Broker:
            nonlocal count
            count += 1
            if root is None:
                root = tmp_path / f"broker-{count}"
            values: dict[str, Any] = {
                "bind_address": LOOPBACK,
                "listen_port": 0,
                "metrics_port": 0,  # metrics on a free port, never the default 5557
                "namesrv_addr": namesrv.address,
                **config,
            }
            cfg = BrokerConfig(**values, store=store_config(root, **(store or {})))
            return await stack.enter_async_context(Broker(cfg))

        yield start


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> Broker:
    return await start_broker()


@pytest.fixture
async def start_client() -> AsyncIterator[ClientFactory]:
    """``await start_client(processors)``: a RemotingClient, shut down after the test."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(processors: ProcessorTable | None = None) -> RemotingClient:
            client = RemotingClient(CLIENT_CONFIG, processors=processors)
            return await stack.enter_async_context(client)

        yield start


@pytest.fixture
async def client(start_client: ClientFactory) -> RemotingClient:
    return await start_client()


# ------------------------------------------------------------------------------- waiting


async def wait_until(
    predicate: Callable[[], bool], what: str, timeout_s: float = 3.0, interval_s: float = 0.01
) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    for _ in range(int(timeout_s / interval_s) + 2):
        if predicate():
            return
        if loop.time() > deadline:
            break
        await asyncio.sleep(interval_s)
    if not predicate():
        pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


async def wait_dispatched(broker: Broker, timeout_s: float = 3.0) -> None:
    """Wait until every appended message is in its consume queue (and the index)."""
    await wait_until(
        lambda: broker.store.dispatch_behind_bytes == 0, "dispatch to catch up", timeout_s
    )


# ------------------------------------------------------------------------------ requests


async def call(
    client: RemotingClient,
    addr: str,
    code: int,
    ext: Mapping[str, str] | None = None,
    body: bytes | None = None,
    *,
    serialize_type: int = SerializeType.JSON,
    timeout_s: float = TIMEOUT_S,
) -> RemotingCommand:
    """One request/response round trip."""
    request = RemotingCommand.request(
        code, dict(ext) if ext else {}, body, serialize_type=serialize_type
    )
    response = await client.invoke(addr, request, timeout_s)
    assert response.is_response
    assert response.opaque == request.opaque
    return response


def properties(**pairs: str) -> str:
    """``name\\x01value`` pairs joined by ``\\x02`` (protocol.md §9.1)."""
    return "\x02".join(f"{k}\x01{v}" for k, v in pairs.items())


def send_header(
    topic: str,
    *,
    queue_id: int = 0,
    props: str | None = None,
    producer_group: str = "pg",
    default_topic: str = "TBW102",
    default_topic_queue_nums: int = 4,
    sys_flag: int = 0,
    flag: int = 0,
    batch: bool = False,
    born_timestamp: int = BORN_TIMESTAMP,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group=producer_group,
        topic=topic,
        default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        flag=flag,
        properties=props,
        reconsume_times=reconsume_times,
        unit_mode=False,
        batch=batch,
        max_reconsume_times=max_reconsume_times,
    )


async def send(
    client: RemotingClient,
    addr: str,
    topic: str,
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    extra: Mapping[str, str] | None = None,
    code: int = RequestCode.SEND_MESSAGE_V2,
    serialize_type: int = SerializeType.JSON,
    timeout_s: float = TIMEOUT_S,
    **header: Any,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 (or code 10 with long names) of one message, as a Java producer
    builds it: TAGS, KEYS, UNIQ_KEY and WAIT in the properties."""
    pairs: dict[str, str] = {}
    if tags is not None:
        pairs["TAGS"] = tags
    if keys is not None:
        pairs["KEYS"] = keys
    pairs["UNIQ_KEY"] = f"AC110001{next_opaque():024X}"
    pairs["WAIT"] = "true"
    pairs.update(extra or {})
    h = send_header(topic, queue_id=queue_id, props=properties(**pairs), **header)
    ext = h.to_ext_fields() if code == RequestCode.SEND_MESSAGE else h.to_v2()
    return await call(
        client, addr, code, ext, body, serialize_type=serialize_type, timeout_s=timeout_s
    )


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table, as ``mqadmin brokerStatus`` shows it."""
    response = await call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert response.code == ResponseCode.SUCCESS, response
    return KVTable.decode(response.body_bytes).table


async def send_ok(
    client: RemotingClient, addr: str, topic: str, body: bytes = b"hello", **kw: Any
) -> RemotingCommand:
    """``send`` that must succeed."""
    response = await send(client, addr, topic, body, **kw)
    assert response.code == ResponseCode.SUCCESS, response
    return response


def batch_body(entries: list[tuple[bytes, str]]) -> bytes:
    """A SEND_BATCH_MESSAGE body (protocol.md §10) from (body, properties) entries:
    TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG 0, BODYLEN, BODY, PROPLEN (short), PROPERTIES."""
    parts: list[bytes] = []
    for body, props_text in entries:
        props = props_text.encode()
        total = 20 + len(body) + 2 + len(props)
        parts.append(struct.pack(">iiiii", total, 0, 0, 0, len(body)))
        parts.append(body)
        parts.append(struct.pack(">h", len(props)))
        parts.append(props)
    return b"".join(parts)


def pull_header(
    topic: str,
    *,
    queue_id: int = 0,
    offset: int = 0,
    group: str = "cg",
    max_nums: int = 32,
    sys_flag: int = PULL_SUBSCRIPTION,
    commit_offset: int = 0,
    suspend_ms: int = 0,
    subscription: str | None = "*",
    sub_version: int = 0,
) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=suspend_ms,
        subscription=subscription,
        sub_version=sub_version,
        expression_type="TAG",
    ).to_ext_fields()


async def pull(
    client: RemotingClient,
    addr: str,
    topic: str,
    *,
    timeout_s: float = TIMEOUT_S,
    serialize_type: int = SerializeType.JSON,
    **header: Any,
) -> RemotingCommand:
    """PULL_MESSAGE; by default with flag 0x4 and subscription ``*`` and no suspension."""
    return await call(
        client,
        addr,
        RequestCode.PULL_MESSAGE,
        pull_header(topic, **header),
        serialize_type=serialize_type,
        timeout_s=timeout_s,
    )


def subscription(topic: str, expression: str = "*", sub_version: int = 0) -> SubscriptionData:
    """A TAG subscription as ``FilterAPI.buildSubscriptionData`` makes it."""
    sub_string, tags = parse_tag_expression(expression)
    return SubscriptionData(topic, sub_string, tags, [java_hash(t) for t in tags], sub_version)


async def heartbeat(
    client: RemotingClient,
    addr: str,
    client_id: str,
    group: str = "cg",
    subscriptions: Mapping[str, str] | None = None,
    *,
    producer_groups: tuple[str, ...] = (),
) -> RemotingCommand:
    """HEART_BEAT of one push consumer (Java-style body), ``{topic: expression}``."""
    subs = [subscription(t, e) for t, e in (subscriptions or {}).items()]
    data = HeartbeatData(
        client_id,
        list(producer_groups),
        [ConsumerData(group, subscription_data_set=subs)],
    )
    response = await call(client, addr, RequestCode.HEART_BEAT, body=data.encode())
    assert response.code == ResponseCode.SUCCESS, response
    return response


# ---------------------------------------------------------------------- raw JSON frames


async def raw_json_call(
    addr: str, header: Mapping[str, Any], body: bytes = b"", timeout_s: float = TIMEOUT_S
) -> tuple[int, RemotingCommand]:
    """Send one frame whose JSON header is written by hand (numbers and booleans in
    extFields, as the C++ client and ali-ons send them); returns (serialize type byte of the
    reply, the reply)."""
    host, _, port = addr.rpartition(":")
    doc = {"language": "CPP", "version": 63, "flag": 0, "remark": "", **header}
    header_bytes = json.dumps(doc).encode() + b"\n"  # C++ FastWriter appends a newline
    frame = (
        struct.pack(">iI", 4 + len(header_bytes) + len(body), len(header_bytes))
        + header_bytes
        + body
    )
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
    try:
        writer.write(frame)
        await writer.drain()
        async with asyncio.timeout(timeout_s):
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            data = await reader.readexactly(length)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await asyncio.wait_for(writer.wait_closed(), timeout_s)
    return data[0], decode_command(memoryview(data))


# ---------------------------------------------------------------------------- records


def records(body: bytes | memoryview) -> list[RecordInfo]:
    """Every stored record of a pull / query / view body, in order."""
    data = bytes(body)
    out: list[RecordInfo] = []
    pos = 0
    for _ in range(100_000):
        if pos >= len(data):
            return out
        info = decode_record(data, pos, check_crc=True)
        out.append(info)
        pos += info.total_size
    raise AssertionError("body has too many records")


def record_body(body: bytes | memoryview, infos: list[RecordInfo], index: int) -> bytes:
    """The message body of ``infos[index]`` within ``body``."""
    data = bytes(body)
    start = sum(i.total_size for i in infos[:index])
    info = infos[index]
    return data[start + info.body_offset : start + info.body_offset + info.body_length]


def record_props(info: RecordInfo) -> dict[str, str]:
    return decode_properties(info.properties)
