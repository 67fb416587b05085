"""Headers and properties that are not UTF-8 (issue 19, item 6).

The C++ client writes a message's keys and properties in its application's encoding (GBK on a
Chinese Windows, for one) into the request header. Java reads every header string with
``new String(bytes, UTF_8)``, which puts U+FFFD where the bytes are not UTF-8; the broker
closed such a connection as a "bad header" instead. Real frames here, written byte by byte:
a ROCKETMQ binary header and a JSON header whose properties hold GBK bytes are stored with the
replacement characters and the connection keeps serving; a batch whose inner properties are
not UTF-8 is stored as sent and both the broker and the SDK read it back. A JSON escape of a
lone surrogate, which has no UTF-8 form, is stored as Java stores it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator

import pytest

from broker.broker import Broker
from client.message import decode_messages
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, decode_command
from remoting.frame import FrameDecoder
from tests.support import (
    TIMEOUT_S,
    call,
    properties,
    pull,
    record_body,
    record_props,
    records,
    send_header,
    wait_dispatched,
)

GBK_KEY = "订单".encode("gbk")  # b"\xb6\xa9\xb5\xa5": not UTF-8
REPLACED = GBK_KEY.decode("utf-8", "replace")


class Wire:
    """One TCP connection that writes frames as given and reads whole frames back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder()

    async def round_trip(self, frame: bytes) -> RemotingCommand:
        self.writer.write(frame)
        await self.writer.drain()
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                data = await self.reader.read(65536)
                assert data, "the broker closed the connection"
                frames = self.decoder.feed(data)
                if frames:
                    (one,) = frames
                    return decode_command(one)

    async def still_serves(self, topic: str, opaque: int) -> None:
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, send_header(topic).to_v2(), b"next"
        )
        request.opaque = opaque
        response = await self.round_trip(request.to_bytes())
        assert (response.code, response.opaque) == (ResponseCode.SUCCESS, opaque), response


@contextlib.asynccontextmanager
async def wire(broker: Broker) -> AsyncIterator[Wire]:
    host, _, port = broker.address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield Wire(reader, writer)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def frame(serialize_type: int, header: bytes, body: bytes) -> bytes:
    prefix = struct.pack(">iI", 4 + len(header) + len(body), serialize_type << 24 | len(header))
    return prefix + header + body


def v2_fields(topic: str, props: bytes) -> dict[bytes, bytes]:
    """SEND_MESSAGE_V2's one-letter fields as bytes, ``i`` (the properties) as given."""
    fields = {k.encode(): v.encode() for k, v in send_header(topic).to_v2().items()}
    fields[b"i"] = props
    return fields


def gbk_props(uniq: str) -> bytes:
    return b"KEYS\x01" + GBK_KEY + b"\x02UNIQ_KEY\x01" + uniq.encode() + b"\x02WAIT\x01true"


def json_string(raw: bytes) -> bytes:
    """``raw`` between quotes, its property separators escaped, its other bytes as they are."""
    return b'"' + raw.replace(b"\x01", b"\\u0001").replace(b"\x02", b"\\u0002") + b'"'


async def stored_props(client: RemotingClient, broker: Broker, topic: str) -> dict[str, str]:
    await wait_dispatched(broker)
    response = await pull(client, broker.address, topic)
    assert response.code == ResponseCode.SUCCESS, response
    info = records(response.body_bytes)[0]
    assert record_body(response.body_bytes, [info], 0) == b"gbk"
    return record_props(info)


async def test_gbk_keys_in_a_binary_header_and_a_batch_are_stored_and_read_back(
    broker: Broker, client: RemotingClient
) -> None:
    fields = v2_fields("GbkBinary", gbk_props("U-BIN"))
    fields[b"x" + GBK_KEY] = GBK_KEY  # a key no header knows, not UTF-8 either
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in fields.items()
    )
    header = (
        struct.pack(">hBhiii", RequestCode.SEND_MESSAGE_V2, 1, 317, 11, 0, len(GBK_KEY))
        + GBK_KEY  # the remark
        + struct.pack(">i", len(entries))
        + entries
    )
    async with wire(broker) as conn:
        response = await conn.round_trip(frame(SerializeType.ROCKETMQ, header, b"gbk"))
        assert (response.code, response.opaque) == (ResponseCode.SUCCESS, 11), response
        await conn.still_serves("GbkBinary", 12)
    props = await stored_props(client, broker, "GbkBinary")
    assert props["KEYS"] == REPLACED
    assert props["UNIQ_KEY"] == "U-BIN"

    # In a batch the inner properties are stored as the client sent them, so a consumer
    # meets the GBK bytes themselves: the broker's decoder and the SDK's replace them too.
    inner = b"KEYS\x01" + GBK_KEY + b"\x02UNIQ_KEY\x01U-BATCH"
    body = b"gbk"
    entry = struct.pack(">iiiii", 20 + len(body) + 2 + len(inner), 0, 0, 0, len(body)) + body
    entry += struct.pack(">h", len(inner)) + inner
    h = send_header("GbkBatch", props=properties(WAIT="true"), batch=True)
    response = await call(client, broker.address, RequestCode.SEND_BATCH_MESSAGE, h.to_v2(), entry)
    assert response.code == ResponseCode.SUCCESS, response
    stored = await stored_props(client, broker, "GbkBatch")
    assert (stored["KEYS"], stored["UNIQ_KEY"]) == (REPLACED, "U-BATCH")
    pulled = await pull(client, broker.address, "GbkBatch")
    (view,) = decode_messages(pulled.body_bytes, broker.config.broker_name)
    assert (view.body, view.keys, view.properties["UNIQ_KEY"]) == (b"gbk", [REPLACED], "U-BATCH")


async def test_a_json_header_with_gbk_bytes_is_stored_and_the_connection_stays(
    broker: Broker, client: RemotingClient
) -> None:
    fields = v2_fields("GbkJson", gbk_props("U-JSON"))
    fields[b"x" + GBK_KEY] = GBK_KEY
    ext = b",".join(json_string(k) + b":" + json_string(v) for k, v in fields.items())
    header = (
        b'{"code":310,"language":"CPP","version":63,"opaque":21,"flag":0,"remark":'
        + json_string(GBK_KEY)
        + b',"extFields":{'
        + ext
        + b"}}\n"
    )
    async with wire(broker) as conn:
        response = await conn.round_trip(frame(SerializeType.JSON, header, b"gbk"))
        assert (response.code, response.opaque) == (ResponseCode.SUCCESS, 21), response
        await conn.still_serves("GbkJson", 22)
    props = await stored_props(client, broker, "GbkJson")
    assert props["KEYS"] == REPLACED
    assert props["UNIQ_KEY"] == "U-JSON"


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udc80x"], ids=["high", "low"])
async def test_a_lone_surrogate_escape_is_stored_as_java_stores_it(
    broker: Broker, client: RemotingClient, escape: bytes
) -> None:
    """JSON can spell a lone surrogate, which has no UTF-8 form: Java writes it as '?'."""
    fields = v2_fields("Surrogate", b"KEYS\x01k" + escape + b"\x02UNIQ_KEY\x01U-SUR")
    ext = b",".join(json_string(k) + b":" + json_string(v) for k, v in fields.items())
    header = b'{"code":310,"opaque":31,"extFields":{' + ext + b"}}"
    async with wire(broker) as conn:
        response = await conn.round_trip(frame(SerializeType.JSON, header, b"gbk"))
        assert (response.code, response.opaque) == (ResponseCode.SUCCESS, 31), response
        await conn.still_serves("Surrogate", 32)
    stored = await stored_props(client, broker, "Surrogate")
    assert stored["KEYS"] == "k?" + escape[6:].decode()
