"""Server and lane lifecycle: restart on one table, concurrent shutdown, one invoke budget."""

from __future__ import annotations

import asyncio

import pytest

from remoting.client import ClientConfig, RemotingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.errors import RemotingTimeoutError
from remoting.server import RemotingServer, ServerConfig

ECHO = 1000
SLOW = 1001


def _table(release: asyncio.Event | None = None) -> ProcessorTable:
    async def echo(_conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))

    async def slow(_conn: Connection, request: RemotingCommand) -> RemotingCommand:
        assert release is not None
        await release.wait()
        return response_to(request, ResponseCode.SUCCESS)

    table = ProcessorTable()
    lane = Lane("test", workers=2)
    table.register(ECHO, echo, lane)
    table.register(SLOW, slow, lane)
    return table


async def test_a_table_serves_again_after_its_server_restarts() -> None:
    table = _table()
    async with RemotingClient() as client:
        for _ in range(2):
            async with RemotingServer(ServerConfig(port=0), table) as server:
                response = await client.invoke(
                    server.address, RemotingCommand.request(ECHO, {"n": "1"}), timeout_s=5
                )
                assert response.code == ResponseCode.SUCCESS
                assert response.ext_fields == {"n": "1"}
            client.close_connection(server.address)


async def test_a_second_shutdown_waits_for_the_first() -> None:
    release = asyncio.Event()
    server = RemotingServer(ServerConfig(port=0, shutdown_grace_s=5), _table(release))
    await server.start()
    async with RemotingClient() as client:
        pending = asyncio.ensure_future(
            client.invoke(server.address, RemotingCommand.request(SLOW), timeout_s=5)
        )
        await asyncio.sleep(0.05)  # the request is in the lane
        first = asyncio.ensure_future(server.shutdown())
        second = asyncio.ensure_future(server.shutdown())
        await asyncio.sleep(0.1)
        assert not first.done()
        assert not second.done()  # it does not return before the server has stopped
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert (await pending).code == ResponseCode.SUCCESS  # drained, then closed


async def test_invoke_timeout_covers_the_permit_wait_too() -> None:
    release = asyncio.Event()
    async with (
        RemotingServer(ServerConfig(port=0), _table(release)) as server,
        RemotingClient(ClientConfig(max_inflight_requests=1)) as client,
    ):
        first = asyncio.ensure_future(
            client.invoke(server.address, RemotingCommand.request(SLOW), timeout_s=0.6)
        )
        await asyncio.sleep(0.3)  # holds the only permit
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The permit frees at 0.6 s (timeout of the first); 0.4 s of budget is left at most.
        with pytest.raises(RemotingTimeoutError) as info:
            await client.invoke(server.address, RemotingCommand.request(SLOW), timeout_s=0.7)
        assert loop.time() - started < 0.7 + 0.2
        assert info.value.timeout_s == 0.7
        with pytest.raises(RemotingTimeoutError):
            await first
        release.set()
