"""What the test packages share: constants, store configs, bounded waits, request builders.

The fixtures that start servers (``start_namesrv``/``namesrv``, ``start_broker``/``broker``,
``start_client``/``client``) are in tests/conftest.py; this module holds what test modules
import by name (``from tests.support import …``):

- constants: ``LOOPBACK``, the request timeout ``TIMEOUT_S`` and ``CLIENT_CONFIG``, the hosts
  and born timestamp the codec and store tests write into records;
- store configs: ``store_config(root, defaults=…, **overrides)`` under one of the size presets
  (``STORE_SMALL`` here; tests/store and tests/client keep their own, which only they use);
- waits with a deadline, so a broken server fails a test instead of hanging it:
  ``wait_until`` and ``wait_dispatched``;
- the Protocols of the factory fixtures, for test signatures;
- bodies built by hand from docs/protocol.md §9-§10, independently of the code under test:
  properties text, batch bodies (and the malformed ones every parser must refuse);
- wire requests as a Java client builds them (docs/protocol.md §7 headers): ``call``, ``send``,
  ``pull`` and their headers, and the records of a pulled body, parsed with ``codec``.

Package-specific fixtures and helpers stay in that package's conftest.py.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from codec import Host, RecordInfo, decode_properties, decode_record
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, next_opaque
from remoting.dispatch import ProcessorTable, RPCHook
from remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from store.config import StoreConfig
from store.message_store import MessageStore

LOOPBACK = "127.0.0.1"
TIMEOUT_S = 5.0
CLIENT_CONFIG = ClientConfig(connect_timeout_s=2.0, request_timeout_s=TIMEOUT_S)

BORN_TIMESTAMP = 1_700_000_000_123
STORE_HOST: Host = (socket.inet_pton(socket.AF_INET, "127.0.0.1"), 10911)
BORN_HOST: Host = (socket.inet_pton(socket.AF_INET, "10.0.0.7"), 54321)
STORE_HOST_V6: Host = (socket.inet_pton(socket.AF_INET6, "::1"), 10911)
BORN_HOST_V6: Host = (socket.inet_pton(socket.AF_INET6, "2001:db8::7"), 54321)

# PullSysFlag (protocol.md §9.4)
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4


# -------------------------------------------------------------------------- store configs

# The brokers of ``start_broker``: small files (segments roll, index files stay a few KiB)
# and short flush intervals, which keep shutdown quick.
STORE_SMALL: dict[str, Any] = {
    "commit_log_file_bytes": 1 << 16,
    "consume_queue_file_bytes": 20 * 64,
    "max_message_bytes": 1 << 14,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "flush_interval_ms": 10,
    "flush_interval_consume_queue_ms": 10,
}


def store_config(
    root: Path, *, defaults: Mapping[str, Any] = STORE_SMALL, **overrides: Any
) -> StoreConfig:
    """A StoreConfig under ``root`` with the sizes of ``defaults``, ``overrides`` on top."""
    return StoreConfig(root_dir=root, **{**defaults, **overrides})


# ------------------------------------------------------------------------------ factories


class NamesrvFactory(Protocol):
    async def __call__(self, **config: Any) -> NameServer: ...


class BrokerFactory(Protocol):
    async def __call__(
        self,
        name: str | None = ...,
        *,
        root: Path | None = ...,
        port: int = ...,
        store: Mapping[str, Any] | None = ...,
        **config: Any,
    ) -> Broker: ...


class ClientFactory(Protocol):
    async def __call__(
        self,
        config: ClientConfig | None = None,
        *,
        processors: ProcessorTable | None = None,
        hooks: list[RPCHook] | None = None,
    ) -> RemotingClient: ...


# ---------------------------------------------------------------------------------- waits


async def wait_until(
    predicate: Callable[[], bool], what: str, timeout_s: float = 5.0, interval_s: float = 0.01
) -> None:
    """Poll ``predicate`` on the loop until true; fail the test after ``timeout_s``.

    The loop is bounded by a count as well as the deadline, and the predicate gets one last
    look after the deadline, so a slow machine that oversleeps does not fail a test whose
    condition did come true.
    """
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


async def wait_dispatched(*targets: Broker | MessageStore, timeout_s: float = 5.0) -> None:
    """Wait until every message appended to each broker's (or store's) commit log is in its
    consume queue and the index."""
    stores = [t.store if isinstance(t, Broker) else t for t in targets]
    # 1 ms: store tests wait for dispatch after nearly every append.
    await wait_until(
        lambda: all(s.dispatch_behind_bytes == 0 for s in stores),
        "dispatch to catch up",
        timeout_s,
        interval_s=0.001,
    )
    # One more turn of the loop: whoever the dispatch woke (long polls) runs first.
    await asyncio.sleep(0)


# ------------------------------------------------------------------------ text and bodies


def properties_text(pairs: Iterable[tuple[str, str]]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02``, no trailing separator (protocol.md §9.1);
    unlike ``encode_properties``, a name may come twice."""
    return "\x02".join(f"{name}\x01{value}" for name, value in pairs)


def properties(**pairs: str) -> str:
    """``properties_text`` of keyword arguments."""
    return properties_text(pairs.items())


def java_string2message_properties(text: str) -> dict[str, str]:
    """Java's ``MessageDecoder.string2messageProperties``, transcribed (protocol.md §9.1)."""
    out: dict[str, str] = {}
    index, length = 0, len(text)
    while index < length:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                out[text[index:kv]] = text[kv + 1 : new_index]
        index = new_index + 1
    return out


BatchEntry = tuple[int, bytes, bytes] | tuple[bytes, str]


def batch_body(entries: Iterable[BatchEntry]) -> bytes:
    """A batch body (protocol.md §10), packed field by field: TOTALSIZE, MAGICCODE 0,
    BODYCRC 0, FLAG, BODYLEN, BODY, PROPLEN (short), PROPERTIES.

    An entry is (flag, body, properties bytes), or (body, properties text) with flag 0.
    """
    parts: list[bytes] = []
    for entry in entries:
        if len(entry) == 2:
            body, text = entry
            flag, props = 0, text.encode()
        else:
            flag, body, props = entry
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        parts += [
            struct.pack(">i", total),
            struct.pack(">i", 0),
            struct.pack(">i", 0),
            struct.pack(">i", flag),
            struct.pack(">i", len(body)),
            body,
            struct.pack(">h", len(props)),
            props,
        ]
    return b"".join(parts)


def _malformed_batches() -> list[tuple[str, bytes]]:
    """Batch bodies every parser must refuse, each named for what is wrong with it."""
    good = batch_body([(0, b"hello", b"TAGS\x01a"), (0, b"world", b"")])
    one = batch_body([(0, b"hello", b"TAGS\x01a")])
    return [
        ("empty", b""),
        ("truncated-entry-header", good[: len(one) + 10]),
        ("truncated-body", one[:22]),
        ("truncated-properties", one[:-1]),
        ("negative-body-length", one[:16] + struct.pack(">i", -1) + one[20:]),
        ("body-length-past-end", one[:16] + struct.pack(">i", 1000) + one[20:]),
        ("properties-length-past-end", one[:25] + struct.pack(">h", 200) + one[27:]),
        ("negative-properties-length", one[:25] + struct.pack(">h", -1) + one[27:]),
        ("total-size-too-small", struct.pack(">i", len(one) - 1) + one[4:]),
        ("total-size-too-large", struct.pack(">i", len(one) + 1) + one[4:] + b"\x00"),
        ("trailing-byte", good + b"\x00"),
    ]


MALFORMED_BATCHES = _malformed_batches()


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


async def send_ok(
    client: RemotingClient, addr: str, topic: str, body: bytes = b"hello", **kw: Any
) -> RemotingCommand:
    """``send`` that must succeed."""
    response = await send(client, addr, topic, body, **kw)
    assert response.code == ResponseCode.SUCCESS, response
    return response


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


# ------------------------------------------------------------------------------- records


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
