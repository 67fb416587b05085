"""Every request is counted out of its connection's limits once, and parked long polls do
not use up the in-flight limit (issue 19, item 5; the review of M11).

- a oneway request whose handler arranges an answer for later (a send to a topic being
  routed) is counted out when its handler returns, and the later answer takes nothing more;
- a oneway long-polling pull is never parked, and a suspend timeout is capped;
- a held pull whose re-run fails, and a two-way END_TRANSACTION of state UNKNOWN, are
  answered (an unanswered request would keep its place in flight);
- pulls parked beyond the in-flight limit do not stop the connection being read: a send
  behind them is answered at once, and pulls beyond the parked limit are answered
  PULL_NOT_FOUND at once;
- a peer that leaves its replies unread (pausing our reading itself) still has its partial
  frame closed at the frame deadline.

Remoting-level cases run a real ``RemotingServer`` with handlers of their own; broker cases
run a real broker. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from broker.broker import Broker
from broker.long_polling import PullHoldService
from broker.processors.pull import MAX_SUSPEND_MS
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, decode_command, response_to
from remoting.connection import PARKED_PER_IN_FLIGHT, Connection, ReadPause, Refusal
from remoting.dispatch import Lane, ProcessorTable, send_response
from remoting.headers import EndTransactionRequestHeader, PopMessageRequestHeader
from remoting.server import RemotingServer, ServerConfig
from tests.broker.test_memory_bounds import open_raw, server_side
from tests.support import (
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    BrokerFactory,
    call,
    properties,
    pull_header,
    send_header,
    send_ok,
    wait_until,
)

BOUND_S = 5.0
LOOPBACK = "127.0.0.1"
ANSWER_LATER = 30101
SLOW = 30102
BIG_REPLY = 30103
PARK = 30104


async def read_response(reader: asyncio.StreamReader) -> RemotingCommand:
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    return decode_command(memoryview(await reader.readexactly(length)))


def only_connection(server: RemotingServer) -> Connection:
    (conn,) = server.connections
    return conn


# ------------------------------------------------------------------------ remoting


async def test_a_oneway_request_answered_later_is_counted_out_once() -> None:
    """As a oneway send to a topic being routed is: its handler returns None and its
    answer goes through send_response later. The slow two-way request ahead of it keeps
    its place in flight (before, each later answer took another request's place)."""
    loop = asyncio.get_running_loop()
    handled: list[RemotingCommand] = []
    release = asyncio.Event()

    async def answer_later(conn: Connection, request: RemotingCommand) -> None:
        handled.append(request)
        ok = response_to(request, ResponseCode.SUCCESS)
        loop.call_later(0.02, send_response, conn, request, ok)

    async def slow(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return response_to(request, ResponseCode.SUCCESS)

    table = ProcessorTable()
    table.register(ANSWER_LATER, answer_later, Lane("later"))
    table.register(SLOW, slow, Lane("slow"))
    async with RemotingServer(ServerConfig(host=LOOPBACK), table) as server:
        reader, writer = await asyncio.open_connection(LOOPBACK, server.port)
        try:
            first = RemotingCommand.request(SLOW)
            oneways = [RemotingCommand.request(ANSWER_LATER, oneway=True) for _ in range(3)]
            writer.write(b"".join(c.to_bytes() for c in [first, *oneways]))
            await wait_until(lambda: len(handled) == 3, "the oneway requests", BOUND_S)
            await asyncio.sleep(0.1)  # their later answers have been through send_response
            conn = only_connection(server)
            assert conn.in_flight == 1  # the slow request, still waiting
            release.set()
            async with asyncio.timeout(BOUND_S):
                response = await read_response(reader)
            assert (response.opaque, response.code) == (first.opaque, ResponseCode.SUCCESS)
            await wait_until(lambda: conn.in_flight == 0, "nothing in flight", BOUND_S)
            assert conn.in_flight == 0
        finally:
            writer.close()


async def test_a_held_pull_whose_rerun_fails_is_answered_and_counted_out() -> None:
    def failing_rerun(conn: Connection, request: RemotingCommand) -> None:
        raise RuntimeError("the store went away")

    hold = PullHoldService(failing_rerun, lambda topic, queue_id: 0, check_interval_s=5.0)

    async def park(conn: Connection, request: RemotingCommand) -> None:
        assert conn.park(request)
        hold.hold(
            conn,
            request,
            topic="TopicHeld",
            queue_id=0,
            pull_from_offset=0,
            timeout_ms=50,
            tag_filter=None,
        )

    table = ProcessorTable()
    table.register(PARK, park, Lane("park"))
    async with RemotingServer(ServerConfig(host=LOOPBACK), table) as server:
        reader, writer = await asyncio.open_connection(LOOPBACK, server.port)
        try:
            request = RemotingCommand.request(PARK)
            writer.write(request.to_bytes())
            async with asyncio.timeout(BOUND_S):
                response = await read_response(reader)
            assert response.opaque == request.opaque
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "the store went away" in (response.remark or "")
            conn = only_connection(server)
            assert (conn.in_flight, conn.parked, hold.count) == (0, 0, 0)
        finally:
            writer.close()


async def test_a_peer_that_never_reads_replies_cannot_hold_a_partial_frame() -> None:
    """The peer fills our write buffer (so we stop reading it) and leaves a frame half sent:
    the frame deadline still closes it, long before the idle timeout."""

    async def big_reply(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, body=b"r" * (256 * 1024))

    table = ProcessorTable()
    table.register(BIG_REPLY, big_reply, Lane("big"))
    config = ServerConfig(
        host=LOOPBACK,
        frame_read_timeout_s=0.3,
        idle_timeout_s=60.0,
        write_buffer_high_bytes=64 * 1024,
    )
    async with RemotingServer(config, table) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # take few replies
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (LOOPBACK, server.port))
        _reader, writer = await asyncio.open_connection(sock=sock)
        try:
            requests = b"".join(RemotingCommand.request(BIG_REPLY).to_bytes() for _ in range(64))
            # ... and the first 8 bytes of a frame announcing 1000 bytes, never finished.
            writer.write(requests + struct.pack(">iI", 1000, 100))
            budget = server.budget
            await wait_until(
                lambda: budget.read_pauses[ReadPause.WRITE_BUFFER] >= 1, "writes paused", BOUND_S
            )
            await wait_until(
                lambda: budget.refusals[Refusal.FRAME_TIMEOUT] == 1, "frame deadline", BOUND_S
            )
            await wait_until(lambda: not server.connections, "connection closed", BOUND_S)
        finally:
            writer.transport.abort()


# -------------------------------------------------------------------------- broker


async def test_a_oneway_suspended_pull_is_not_parked(
    broker: Broker, client: RemotingClient
) -> None:
    await send_ok(client, broker.address, "TopicOnewayPull", b"created", queue_id=0)
    reader, writer = await open_raw(broker)
    try:
        header = pull_header(
            "TopicOnewayPull",
            queue_id=1,
            group="cg-oneway",
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=20_000,
        )
        pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, header, oneway=True)
        probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        writer.write(pull.to_bytes() + probe.to_bytes())
        async with asyncio.timeout(BOUND_S):
            response = await read_response(reader)
        assert response.opaque == probe.opaque  # nothing comes back for the oneway pull
        conn = server_side(broker, writer)
        await wait_until(lambda: conn.in_flight == 0, "nothing in flight", BOUND_S)
        assert (conn.parked, broker.pull_hold.count) == (0, 0)
    finally:
        writer.transport.abort()


async def test_a_oneway_pop_does_not_wait(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicOnewayPop", b"created", queue_id=0)
    popped = await call(
        client,
        broker.address,
        RequestCode.POP_MESSAGE,
        _pop_header("TopicOnewayPop", poll_ms=0).to_ext_fields(),
    )
    assert popped.code == ResponseCode.SUCCESS  # the queue is empty from now on
    reader, writer = await open_raw(broker)
    try:
        header = _pop_header("TopicOnewayPop", poll_ms=20_000).to_ext_fields()
        pop = RemotingCommand.request(RequestCode.POP_MESSAGE, header, oneway=True)
        probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        writer.write(pop.to_bytes() + probe.to_bytes())
        async with asyncio.timeout(BOUND_S):
            response = await read_response(reader)
        assert response.opaque == probe.opaque
        conn = server_side(broker, writer)
        await wait_until(lambda: conn.in_flight == 0, "nothing in flight", BOUND_S)
        assert conn.parked == 0
        assert not broker.pop_processor._polls  # no poll waits for a oneway pop
    finally:
        writer.transport.abort()


def _pop_header(topic: str, *, poll_ms: int) -> PopMessageRequestHeader:
    return PopMessageRequestHeader(
        consumer_group="cg-oneway-pop",
        topic=topic,
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=60_000,
        poll_time=poll_ms,
        born_time=0,
        init_mode=0,
        exp_type="TAG",
        exp="*",
    )


async def test_a_suspend_timeout_is_capped(broker: Broker, client: RemotingClient) -> None:
    await send_ok(client, broker.address, "TopicLongSuspend", b"created", queue_id=0)
    _reader, writer = await open_raw(broker)
    try:
        header = pull_header(
            "TopicLongSuspend",
            queue_id=1,
            group="cg-long",
            sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
            suspend_ms=2_000_000_000,  # 23 days
        )
        writer.write(RemotingCommand.request(RequestCode.PULL_MESSAGE, header).to_bytes())
        await wait_until(lambda: broker.pull_hold.count == 1, "the pull parked", BOUND_S)
        (held,) = [p for pulls in broker.pull_hold.held.values() for p in pulls]
        left_s = held.deadline - asyncio.get_running_loop().time()
        assert 0 < left_s <= MAX_SUSPEND_MS / 1000
    finally:
        writer.transport.abort()


async def test_a_two_way_end_transaction_of_state_unknown_is_answered(broker: Broker) -> None:
    header = EndTransactionRequestHeader(
        producer_group="pg-unknown",
        tran_state_table_offset=0,
        commit_log_offset=0,
        commit_or_rollback=0,  # TRANSACTION_NOT_TYPE: the producer does not know yet
        msg_id="0" * 32,
    )
    reader, writer = await open_raw(broker)
    try:
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        writer.write(request.to_bytes())
        async with asyncio.timeout(BOUND_S):
            response = await read_response(reader)
        assert (response.opaque, response.code) == (request.opaque, ResponseCode.SUCCESS)
        conn = server_side(broker, writer)
        await wait_until(lambda: conn.in_flight == 0, "nothing in flight", BOUND_S)
    finally:
        writer.transport.abort()


async def test_parked_pulls_beyond_the_in_flight_limit_do_not_hold_back_a_send(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    """One connection parks more pulls than its in-flight limit (a client process reading
    many queues of one broker), then sends: the send is answered at once. Pulls beyond the
    parked limit are answered PULL_NOT_FOUND at once."""
    in_flight_limit = 4
    parked_limit = PARKED_PER_IN_FLIGHT * in_flight_limit
    surplus = 6
    broker = await start_broker(max_in_flight_per_connection=in_flight_limit)
    await send_ok(client, broker.address, "TopicManyQueues", b"created", queue_id=0)
    header = pull_header(
        "TopicManyQueues",
        queue_id=1,
        group="cg-many",
        sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
        suspend_ms=20_000,
    )
    pulls = [
        RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(header))
        for _ in range(parked_limit + surplus)
    ]
    h = send_header("TopicManyQueues", queue_id=0, props=properties(WAIT="false"))
    send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2(), b"behind the pulls")
    reader, writer = await open_raw(broker)
    try:
        writer.write(b"".join(c.to_bytes() for c in [*pulls, send]))
        not_found = 0
        async with asyncio.timeout(2.0):
            while True:
                response = await read_response(reader)
                if response.opaque == send.opaque:
                    break
                assert response.code == ResponseCode.PULL_NOT_FOUND
                not_found += 1
        assert response.code == ResponseCode.SUCCESS
        # The surplus pulls may be answered after the send (they are handed on in turn).
        async with asyncio.timeout(BOUND_S):
            while not_found < surplus:
                assert (await read_response(reader)).code == ResponseCode.PULL_NOT_FOUND
                not_found += 1
        conn = server_side(broker, writer)
        await wait_until(lambda: conn.in_flight == 0, "nothing in flight", BOUND_S)
        assert conn.parked == broker.pull_hold.count == parked_limit
    finally:
        writer.transport.abort()
