"""RemotingServer.bind() takes the port without serving; serve() starts taking connections.

The broker binds before its services start (the store host names the port) and serves once
they have: in between, a client must be refused rather than have a request taken that a
service not yet started would answer.
"""

from __future__ import annotations

import pytest

from remoting.client import RemotingClient
from remoting.errors import ConnectError
from remoting.server import RemotingServer, ServerConfig
from tests.remoting.conftest import check_echo, echo_table
from tests.support import CLIENT_CONFIG, LOOPBACK


async def test_a_bound_server_refuses_until_it_serves() -> None:
    server = RemotingServer(ServerConfig(host=LOOPBACK, port=0), echo_table())
    client = RemotingClient(CLIENT_CONFIG)
    await client.start()
    try:
        await server.bind()
        assert server.port > 0
        with pytest.raises(ConnectError):
            await check_echo(client, server.address, 1)
        await server.serve()
        await server.serve()  # idempotent
        await check_echo(client, server.address, 2)
    finally:
        await client.shutdown()
        await server.shutdown()
    assert server.listener is not None and server.listener.sockets == ()
