"""RemotingClient against real servers: matching by opaque under load, timeouts, callbacks,
permits, server-initiated requests, and connection loss and recovery.

RocketMQ counterpart: ``NettyRemotingClient`` (``invokeSync``, ``invokeAsync``,
``invokeOneway``, ``semaphoreAsync``) and the broker → client requests
(CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) sent over the client's connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict

import pytest

from remoting import (
    ClientConfig,
    ConnectError,
    Connection,
    FrameError,
    Lane,
    ProcessorTable,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    ServerConfig,
    response_to,
)
from remoting.client import ResponseCallback
from remoting.errors import TooManyRequestsError
from tests.remoting.conftest import (
    ECHO,
    UNKNOWN_CODE,
    LogEntries,
    ServerFactory,
    assert_echoed,
    check_echo,
    echo_request,
    echo_table,
)
from tests.support import LOOPBACK, ClientFactory, wait_until

SLOW = 30020
GATED = 30021

Outcome = tuple[RemotingCommand | None, BaseException | None]


async def slow(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """Echo after sleeping ``sleep_s`` (ext field)."""
    await asyncio.sleep(float(request.ext_fields["sleep_s"]))
    return response_to(request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))


def slow_request(sleep_s: float, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(SLOW, {"sleep_s": str(sleep_s), **ext})


@pytest.fixture
async def slow_server(start_server: ServerFactory) -> RemotingServer:
    """Echo on ECHO, ``slow`` on SLOW (ten workers)."""
    table = echo_table()
    table.register(SLOW, slow, Lane("slow", workers=10))
    return await start_server(table)


def late_responses(logs: LogEntries) -> list[int]:
    """Opaques of responses dropped because their request had already given up."""
    return [e["opaque"] for e in logs if e["event"] == "response_without_request"]


# ------------------------------------------------------------------------------- matching


async def test_ten_thousand_concurrent_requests_on_one_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    requests = [echo_request(i, hops=i % 4) for i in range(10_000)]
    completed: list[int] = []

    async def one(request: RemotingCommand) -> RemotingCommand:
        response = await client.invoke(server.address, request, timeout_s=30.0)
        completed.append(int(response.ext_fields["i"]))
        return response

    async with asyncio.timeout(30.0):
        responses = await asyncio.gather(*(one(r) for r in requests))

    for request, response in zip(requests, responses, strict=True):
        assert_echoed(request, response)
    # Eight server workers and yields of 0-3 hops reorder the answers: matching did real work.
    assert completed != sorted(completed)
    assert len(server.connections) == 1
    assert (await client.connection(server.address)).pending == {}


async def test_ten_thousand_requests_across_fifty_connections(
    server: RemotingServer, start_client: ClientFactory
) -> None:
    clients = [await start_client() for _ in range(50)]
    requests = [[echo_request(c * 1000 + i, hops=i % 3) for i in range(200)] for c in range(50)]

    async def run(client: RemotingClient, batch: list[RemotingCommand]) -> list[RemotingCommand]:
        return await asyncio.gather(
            *(client.invoke(server.address, r, timeout_s=30.0) for r in batch)
        )

    async with asyncio.timeout(30.0):
        results = await asyncio.gather(
            *(run(c, batch) for c, batch in zip(clients, requests, strict=True))
        )

    total = 0
    for batch, responses in zip(requests, results, strict=True):
        for request, response in zip(batch, responses, strict=True):
            assert_echoed(request, response)
            total += 1
    assert total == 10_000
    assert len(server.connections) == 50
    for c in clients:
        assert (await c.connection(server.address)).pending == {}


# ------------------------------------------------------------------------------- timeouts


async def test_timeout_then_late_response_is_dropped(
    slow_server: RemotingServer, client: RemotingClient, logs: LogEntries
) -> None:
    addr = slow_server.address
    request = slow_request(0.4)
    with pytest.raises(RemotingTimeoutError) as caught:
        await client.invoke(addr, request, timeout_s=0.1)
    assert (caught.value.request_code, caught.value.opaque, caught.value.timeout_s) == (
        SLOW,
        request.opaque,
        0.1,
    )
    conn = await client.connection(addr)
    assert conn.pending == {}

    await wait_until(lambda: request.opaque in late_responses(logs), "the late response")
    assert not conn.closed
    follow = echo_request(1)
    assert_echoed(follow, await client.invoke(addr, follow))
    assert await client.connection(addr) is conn
    assert conn.pending == {}


async def test_cancelled_invoke_leaves_no_pending_entry(
    slow_server: RemotingServer, client: RemotingClient, logs: LogEntries
) -> None:
    addr = slow_server.address
    conn = await client.connection(addr)
    request = slow_request(0.3)
    task = asyncio.create_task(client.invoke(addr, request, timeout_s=5.0))
    await wait_until(lambda: request.opaque in conn.pending, "the request to be pending")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.pending == {}
    await wait_until(lambda: request.opaque in late_responses(logs), "the late response")
    follow = echo_request(2)
    assert_echoed(follow, await client.invoke(addr, follow))


async def test_invoke_with_callback_delivers_exactly_one_outcome(
    start_server: ServerFactory, start_client: ClientFactory, logs: LogEntries
) -> None:
    gate = asyncio.Event()

    async def gated(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        await gate.wait()
        return response_to(request, ResponseCode.SUCCESS)

    table = echo_table()
    table.register(SLOW, slow, Lane("slow", workers=10))
    table.register(GATED, gated, Lane("gated", workers=10))
    server = await start_server(table)
    # Four permits for sixteen requests: each callback must give its permit back.
    client = await start_client(ClientConfig(max_inflight_requests=4, request_timeout_s=5.0))
    outcomes: defaultdict[int, list[Outcome]] = defaultdict(list)

    def record(opaque: int) -> ResponseCallback:
        def callback(response: RemotingCommand | None, error: BaseException | None) -> None:
            outcomes[opaque].append((response, error))

        return callback

    expected: dict[int, str] = {}

    async def send(request: RemotingCommand, kind: str, timeout_s: float = 3.0) -> None:
        expected[request.opaque] = kind
        await client.invoke_with_callback(
            server.address,
            request,
            record(request.opaque),
            timeout_s=timeout_s,
        )

    for i in range(6):
        await send(echo_request(i), "echo")
    for _ in range(2):
        await send(RemotingCommand.request(UNKNOWN_CODE), "not supported")
    for _ in range(3):
        await send(slow_request(0.4), "timeout", timeout_s=0.1)
    await wait_until(lambda: len(outcomes) == 11, "eleven callbacks", timeout_s=5.0)
    # The three late responses arrive and are dropped; no second callback.
    await wait_until(lambda: len(late_responses(logs)) == 3, "the late responses")

    for _ in range(2):
        await send(RemotingCommand.request(GATED), "connection closed")
    await wait_until(lambda: len(server.connections) == 1, "the connection")
    conn = await client.connection(server.address)
    await wait_until(lambda: len(conn.pending) == 2, "two gated requests in flight")
    client.close_connection(server.address)
    await wait_until(lambda: len(outcomes) == 13, "thirteen callbacks")
    gate.set()

    # A callback runs for requests sent after all that, on a fresh connection.
    for i in range(3):
        await send(echo_request(100 + i), "echo")
    await wait_until(lambda: len(outcomes) == 16, "sixteen callbacks")
    await asyncio.sleep(0.1)

    assert set(outcomes) == set(expected)
    for opaque, kind in expected.items():
        calls = outcomes[opaque]
        assert len(calls) == 1, (kind, calls)
        ((response, error),) = calls
        assert (response is None) != (error is None), (kind, calls)
        if kind == "echo":
            assert response is not None
            assert (response.code, response.opaque) == (0, opaque)
        elif kind == "not supported":
            assert response is not None
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        elif kind == "timeout":
            assert isinstance(error, RemotingTimeoutError)
        else:
            assert isinstance(error, ConnectError)


async def test_bounded_inflight_permits(
    start_server: ServerFactory, start_client: ClientFactory
) -> None:
    active = 0
    most_active = 0
    started: list[str] = []
    finished: list[str] = []

    async def tracked(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        nonlocal active, most_active
        name = request.ext_fields["name"]
        active += 1
        most_active = max(most_active, active)
        started.append(name)
        await asyncio.sleep(0.4)
        finished.append(name)
        active -= 1
        return response_to(request, ResponseCode.SUCCESS, ext_fields={"name": name})

    table = ProcessorTable()
    table.register(SLOW, tracked, Lane("tracked", workers=10))
    server = await start_server(table)
    client = await start_client(ClientConfig(max_inflight_requests=2, request_timeout_s=3.0))

    def call(name: str, timeout_s: float = 3.0) -> asyncio.Task[RemotingCommand]:
        request = RemotingCommand.request(SLOW, {"name": name})
        return asyncio.create_task(client.invoke(server.address, request, timeout_s=timeout_s))

    first, second = call("a"), call("b")
    await wait_until(lambda: len(started) == 2, "two requests on the server")
    with pytest.raises(TooManyRequestsError):
        await call("refused", timeout_s=0.1)
    third = call("c")
    await asyncio.sleep(0.1)
    assert started == ["a", "b"], "the third request went out without a permit"

    responses = await asyncio.gather(first, second, third)
    assert [r.ext_fields["name"] for r in responses] == ["a", "b", "c"]
    assert "refused" not in started
    assert most_active == 2
    assert finished.index("a") < started.index("c") or finished.index("b") < started.index("c")


# ---------------------------------------------------------------- server-initiated requests


async def test_server_sends_requests_to_a_client_with_processors(
    server: RemotingServer, start_client: ClientFactory, logs: LogEntries
) -> None:
    notified: list[str] = []

    async def check_transaction(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"transactionId": request.ext_fields["transactionId"], "state": "COMMIT"},
        )

    async def ids_changed(conn: Connection, request: RemotingCommand) -> None:
        notified.append(request.ext_fields["consumerGroup"])

    processors = ProcessorTable()
    processors.register(RequestCode.CHECK_TRANSACTION_STATE, check_transaction, Lane("tx"))
    processors.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ids_changed, Lane("rebalance"))
    client = await start_client(processors=processors)
    await client.invoke(server.address, echo_request(0))
    (server_conn,) = server.connections

    # Both directions at once on one connection.
    client_requests = [echo_request(i) for i in range(50)]
    server_requests = [
        RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"transactionId": f"tx{i}"})
        for i in range(50)
    ]
    results = await asyncio.gather(
        *(client.invoke(server.address, r) for r in client_requests),
        *(server.invoke(server_conn, r, timeout_s=3.0) for r in server_requests),
    )
    for request, response in zip(client_requests, results[:50], strict=True):
        assert_echoed(request, response)
    for request, response in zip(server_requests, results[50:], strict=True):
        assert response.code == ResponseCode.SUCCESS
        assert response.opaque == request.opaque
        assert response.ext_fields == {
            "transactionId": request.ext_fields["transactionId"],
            "state": "COMMIT",
        }

    server.invoke_oneway(
        server_conn,
        RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g1"}),
    )
    await wait_until(lambda: notified == ["g1"], "the notification")

    response = await server.invoke(server_conn, RemotingCommand.request(UNKNOWN_CODE), 3.0)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == f" request type {UNKNOWN_CODE} not supported"

    await asyncio.sleep(0.1)
    assert late_responses(logs) == [], "something answered the oneway notification"
    assert server_conn.pending == {}


async def test_request_from_the_server_may_reuse_an_opaque_the_client_has_pending(
    slow_server: RemotingServer, start_client: ClientFactory
) -> None:
    """Each side numbers its own requests; only the response bit tells the two apart."""

    async def check_transaction(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, ext_fields={"from": "client"})

    processors = ProcessorTable()
    processors.register(RequestCode.CHECK_TRANSACTION_STATE, check_transaction, Lane("tx"))
    client = await start_client(processors=processors)
    mine = slow_request(0.3, tag="mine")
    task = asyncio.create_task(client.invoke(slow_server.address, mine, timeout_s=3.0))
    conn = await client.connection(slow_server.address)
    await wait_until(lambda: mine.opaque in conn.pending, "the client request in flight")
    (server_conn,) = slow_server.connections

    theirs = RemotingCommand(code=RequestCode.CHECK_TRANSACTION_STATE, opaque=mine.opaque)
    response = await slow_server.invoke(server_conn, theirs, timeout_s=3.0)
    assert (response.code, response.opaque, response.ext_fields) == (
        0,
        mine.opaque,
        {"from": "client"},
    )
    assert not task.done()
    mine_response = await task
    assert (mine_response.opaque, mine_response.ext_fields["tag"]) == (mine.opaque, "mine")


async def test_client_without_processors_answers_request_code_not_supported(
    server: RemotingServer, client: RemotingClient, logs: LogEntries
) -> None:
    await client.invoke(server.address, echo_request(0))
    (server_conn,) = server.connections
    request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"transactionId": "t"})
    response = await server.invoke(server_conn, request, timeout_s=3.0)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.opaque == request.opaque
    assert (
        response.remark == f" request type {int(RequestCode.CHECK_TRANSACTION_STATE)} not supported"
    )

    server.invoke_oneway(
        server_conn, RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    )
    await asyncio.sleep(0.2)
    assert late_responses(logs) == []  # a oneway gets no answer, not even an error
    await check_echo(client, server.address, 1)


# ------------------------------------------------------------------ losing the connection


async def test_pending_requests_fail_with_connect_error_when_the_server_goes_away(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    entered = asyncio.Event()

    async def stuck(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        entered.set()
        await asyncio.Event().wait()  # until cancelled by the shutdown
        raise AssertionError("unreachable")

    table = ProcessorTable()
    table.register(GATED, stuck, Lane("stuck", workers=4))
    server = await start_server(table, shutdown_grace_s=0.2)
    tasks = [
        asyncio.create_task(
            client.invoke(server.address, RemotingCommand.request(GATED), timeout_s=10.0)
        )
        for _ in range(3)
    ]
    await asyncio.wait_for(entered.wait(), timeout=3.0)
    conn = await client.connection(server.address)

    loop = asyncio.get_running_loop()
    began = loop.time()
    await server.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 3.0)
    assert all(isinstance(r, ConnectError) for r in results), results
    assert loop.time() - began < 3.0  # not the 10 s request timeout
    assert conn.closed
    assert conn.pending == {}
    with pytest.raises(ConnectError):
        await client.invoke(server.address, echo_request(0), timeout_s=1.0)


async def test_client_reconnects_after_the_server_restarts_on_the_same_port(
    client: RemotingClient,
) -> None:
    async with RemotingServer(ServerConfig(host=LOOPBACK, port=0), echo_table()) as first:
        port = first.port
        addr = first.address
        await check_echo(client, addr, 1)
        old = await client.connection(addr)
    await asyncio.wait_for(old.wait_closed(), timeout=3.0)  # the client saw the close

    with pytest.raises(ConnectError):
        await client.invoke(addr, echo_request(2), timeout_s=1.0)  # nobody listening

    async with RemotingServer(ServerConfig(host=LOOPBACK, port=port), echo_table()) as second:
        assert second.address == addr
        request = echo_request(3)
        assert_echoed(request, await client.invoke(addr, request))
        new = await client.connection(addr)
        assert new is not old
        assert not new.closed
        assert len(second.connections) == 1


async def test_client_reconnects_after_close_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    addr = server.address
    await check_echo(client, addr, 1)
    old = await client.connection(addr)
    (old_server_side,) = server.connections

    client.close_connection(addr)
    client.close_connection(addr)  # twice: nothing left to close
    request = echo_request(2)
    assert_echoed(request, await client.invoke(addr, request))
    new = await client.connection(addr)
    assert new is not old
    await asyncio.wait_for(old.wait_closed(), timeout=3.0)
    await wait_until(lambda: old_server_side not in server.connections, "the old server side")
    assert len(server.connections) == 1


async def test_connect_errors(client: RemotingClient, start_server: ServerFactory) -> None:
    server = await start_server()
    port = server.port
    await server.shutdown()
    with pytest.raises(ConnectError) as caught:
        await client.invoke(f"{LOOPBACK}:{port}", echo_request(0), timeout_s=1.0)
    assert caught.value.addr == f"{LOOPBACK}:{port}"
    for bad in ("no-port", f"{LOOPBACK}:http", f"{LOOPBACK}:70000"):
        with pytest.raises(ConnectError):
            await client.invoke(bad, echo_request(0), timeout_s=1.0)


async def test_frame_over_the_client_limit_closes_the_connection_not_a_timeout(
    start_server: ServerFactory, start_client: ClientFactory, logs: LogEntries
) -> None:
    """An oversized answer is a protocol error on the client side: the connection is
    aborted and the caller gets ConnectError at once, not a timeout."""

    async def blob(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, body=bytes(int(request.ext_fields["n"])))

    table = echo_table()
    table.register(GATED, blob, Lane("blob"))
    server = await start_server(table)
    client = await start_client(ClientConfig(max_frame_bytes=16 * 1024, request_timeout_s=10.0))
    small = await client.invoke(server.address, RemotingCommand.request(GATED, {"n": "1000"}))
    assert len(small.body_bytes) == 1000
    first = await client.connection(server.address)

    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(ConnectError):
        await client.invoke(server.address, RemotingCommand.request(GATED, {"n": "32768"}))
    assert loop.time() - began < 3.0
    assert first.closed
    assert any(e["event"] == "connection_closed" and "frame length" in e["reason"] for e in logs)
    await check_echo(client, server.address, 2)  # the next call dials a fresh connection
    assert await client.connection(server.address) is not first


async def test_request_over_max_frame_bytes_is_refused_before_sending(
    server: RemotingServer, start_client: ClientFactory
) -> None:
    client = await start_client(ClientConfig(max_frame_bytes=16 * 1024))
    await check_echo(client, server.address, 1)
    conn = await client.connection(server.address)
    too_big = RemotingCommand.request(ECHO, {"i": "big"}, bytes(32 * 1024))
    with pytest.raises(FrameError):
        await client.invoke(server.address, too_big)
    assert conn.pending == {}
    assert not conn.closed
    await check_echo(client, server.address, 2)
    assert await client.connection(server.address) is conn


async def test_invoke_oneway_is_processed(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    seen: list[str] = []

    async def record(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        seen.append(request.ext_fields["n"])
        return response_to(request, ResponseCode.SUCCESS)

    table = echo_table()
    table.register(GATED, record, Lane("record"))
    server = await start_server(table)
    for n in range(5):
        await client.invoke_oneway(server.address, RemotingCommand.request(GATED, {"n": str(n)}))
    await wait_until(lambda: seen == ["0", "1", "2", "3", "4"], "five oneway requests")
    conn = await client.connection(server.address)
    assert conn.pending == {}
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(conn.wait_closed(), timeout=0.1)
    assert not conn.closed
