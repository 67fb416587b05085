"""Helpers only the wire-level broker and name server tests use.

The servers (``start_namesrv``/``namesrv``, ``start_broker``/``broker``, ``start_client``/
``client``) come from tests/conftest.py, and the request builders most tests use (``call``,
``send``, ``pull``, ``records`` …) and the bounded waits from tests/support.py. What is here is
the broker's side only: a consumer's heartbeat, the runtime-info table, and frames with a JSON
header written by hand (protocol.md §7-§8).

Test modules import them: ``from tests.broker.conftest import …``. Every wait here has a
deadline, so a broken server fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import Mapping
from typing import Any

from codec import java_hash
from remoting.bodies import (
    ConsumerData,
    HeartbeatData,
    KVTable,
    SubscriptionData,
    parse_tag_expression,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, decode_command
from tests.support import TIMEOUT_S, call

# ------------------------------------------------------------------------------ requests


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table, as ``mqadmin brokerStatus`` shows it."""
    response = await call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert response.code == ResponseCode.SUCCESS, response
    return KVTable.decode(response.body_bytes).table


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
