"""Admin against a peer whose answers say SUCCESS but whose bodies cannot be read.

A real remoting server stands in for the name server and the broker, with one default
processor that answers every request SUCCESS and the body under test: not JSON, JSON of
the wrong shape, bytes that are no UTF-8. Each Admin call must raise the SDK's
ResponseDecodeError, naming the request and the address, never a bare ValueError,
KeyError or TypeError from deep inside a decoder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from client.admin import Admin
from client.errors import ResponseDecodeError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.server import RemotingServer, ServerConfig
from tests.support import LOOPBACK

BODIES = {
    "not JSON": b"{not json",
    "a JSON list": b"[1, 2, 3]",
    "a number where a table belongs": b'{"brokerAddrTable": 5, "subscriptionGroupTable": 5,'
    b' "topicConfigTable": 5, "table": 5, "topicList": 5}',
    "not UTF-8": b"\xff\xfe\xfd",
}

Call = Callable[[Admin, str], Awaitable[Any]]

CALLS: dict[str, tuple[Call, RequestCode, bool]] = {
    # name: (the call, the request whose answer is unreadable, asked of the name server)
    "cluster_info": (
        lambda a, _addr: a.cluster_info(),
        RequestCode.GET_BROKER_CLUSTER_INFO,
        True,
    ),
    "topic_list": (
        lambda a, _addr: a.topic_list(),
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        True,
    ),
    "subscription_groups": (
        lambda a, addr: a.subscription_groups(addr),
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        False,
    ),
    "runtime_info": (
        lambda a, addr: a.runtime_info(addr),
        RequestCode.GET_BROKER_RUNTIME_INFO,
        False,
    ),
    "topic_configs": (
        lambda a, addr: a.topic_configs(addr),
        RequestCode.GET_ALL_TOPIC_CONFIG,
        False,
    ),
}


@pytest.fixture(params=sorted(BODIES))
async def hostile(request: pytest.FixtureRequest) -> AsyncIterator[RemotingServer]:
    body = BODIES[request.param]

    async def answer(_conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, None, None, body)

    table = ProcessorTable()
    table.register_default(answer, Lane("hostile", workers=1))
    async with RemotingServer(ServerConfig(host=LOOPBACK, port=0), table) as server:
        yield server


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_an_unreadable_answer_is_a_response_decode_error(
    hostile: RemotingServer, name: str
) -> None:
    call, code, of_namesrv = CALLS[name]
    async with Admin(hostile.address) as admin:
        with pytest.raises(ResponseDecodeError) as caught:
            await call(admin, hostile.address)
    exc = caught.value
    assert exc.request_code == code
    assert exc.addr == ("the name server" if of_namesrv else hostile.address)
    assert f"{code.name} ({int(code)}) to {exc.addr}: unreadable answer: " in str(exc)
    assert exc.__cause__ is not None  # the decoder's own failure, kept for the curious
