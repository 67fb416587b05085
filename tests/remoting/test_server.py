"""RemotingServer and its processor table over real sockets.

What a RocketMQ client relies on (docs/protocol.md §1-2): replies carry the request's opaque
and serialization; unknown codes get REQUEST_CODE_NOT_SUPPORTED; a full lane answers
SYSTEM_BUSY "[OVERLOAD]" at once; oneway requests are never answered. Plus our own promises:
handler errors become responses, threaded lanes keep the loop free, a client that does not
read cannot make the server buffer without bound, shutdown drains queued work.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import NamedTuple

import pytest

from remoting import (
    BrokerError,
    Connection,
    HeaderError,
    Lane,
    ProcessorTable,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    ResponseCode,
    SerializeType,
    response_to,
)
from remoting.errors import ConnectError, NoPermissionError, TopicNotExistError
from tests.remoting.conftest import (
    ECHO,
    UNKNOWN_CODE,
    LogEntries,
    RawFactory,
    ServerFactory,
    assert_echoed,
    assert_silent,
    check_echo,
    echo,
    echo_request,
    echo_table,
    read_frame,
    read_until_closed,
)
from tests.support import ClientFactory, wait_until

BLOCKED = 30002
RECORD = 30003
CRASH = 30004
TOPIC_MISSING = 30005
BAD_HEADER = 30006
THREAD_CRASH = 30007
BLOCKING = 30008
BIG = 30009
ODD_CODE = 30010
DEFERRED = 30011
SLOW = 30012


# ------------------------------------------------------------------ codes and serialization


@pytest.mark.parametrize("serialize_type", list(SerializeType), ids=lambda t: t.name)
async def test_reply_uses_the_request_serialization(
    serialize_type: SerializeType, server: RemotingServer, raw: RawFactory
) -> None:
    reader, writer = await raw(server)
    request = echo_request(1, serialize_type=serialize_type)
    unknown = RemotingCommand.request(UNKNOWN_CODE, serialize_type=serialize_type)
    writer.write(request.to_bytes() + unknown.to_bytes())

    # The unknown code is answered at once, the echo after its lane: read both, match by opaque.
    frames = [await read_frame(reader) for _ in range(2)]
    by_opaque = {response.opaque: (type_byte, response) for type_byte, response in frames}
    assert sorted(by_opaque) == sorted([request.opaque, unknown.opaque])
    for type_byte, response in frames:
        assert type_byte == serialize_type
        assert response.serialize_type == serialize_type
    assert_echoed(request, by_opaque[request.opaque][1])
    not_supported = by_opaque[unknown.opaque][1]
    assert not_supported.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_unknown_code_gets_request_code_not_supported(
    server: RemotingServer, raw: RawFactory, logs: LogEntries
) -> None:
    reader, writer = await raw(server)
    request = RemotingCommand.request(UNKNOWN_CODE, {"k": "v"})
    writer.write(request.to_bytes())

    _type, response = await read_frame(reader)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.opaque == request.opaque
    assert response.is_response and not response.is_oneway
    assert response.remark == f" request type {UNKNOWN_CODE} not supported"
    assert any(
        e["event"] == "request_code_not_supported" and e["code"] == UNKNOWN_CODE for e in logs
    )
    # The connection stays usable.
    follow = echo_request(2)
    writer.write(follow.to_bytes())
    _type, response = await read_frame(reader)
    assert_echoed(follow, response)


async def test_register_default_catches_unlisted_codes(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    async def default(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(
            request, ResponseCode.SUCCESS, ext_fields={"by": f"default {request.code}"}
        )

    table = echo_table()
    table.register_default(default, Lane("default"))
    server = await start_server(table)

    response = await client.invoke(server.address, RemotingCommand.request(UNKNOWN_CODE))
    assert (response.code, response.ext_fields) == (0, {"by": f"default {UNKNOWN_CODE}"})
    request = echo_request(3)
    assert_echoed(request, await client.invoke(server.address, request))


async def test_response_code_a_rocketmq_header_cannot_hold_becomes_system_error(
    start_server: ServerFactory, client: RemotingClient, logs: LogEntries
) -> None:
    async def odd(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, 40_000, "wide code")

    table = ProcessorTable()
    table.register(ODD_CODE, odd, Lane("odd"))
    server = await start_server(table)

    response = await client.invoke(server.address, RemotingCommand.request(ODD_CODE))
    assert (response.code, response.remark) == (40_000, "wide code")  # JSON holds it
    request = RemotingCommand.request(ODD_CODE, serialize_type=SerializeType.ROCKETMQ)
    response = await client.invoke(server.address, request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.remark is not None
    assert response.remark.startswith("response not encodable")
    assert any(e["event"] == "response_not_encodable" for e in logs)


async def test_answer_over_max_frame_bytes_becomes_system_error(
    start_server: ServerFactory, client: RemotingClient, logs: LogEntries
) -> None:
    """The server will not send a frame its own limit forbids (the peer would drop the
    connection for it): the caller gets SYSTEM_ERROR instead, on a connection that lives."""

    async def blob(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, body=bytes(int(request.ext_fields["n"])))

    table = echo_table()
    table.register(ODD_CODE, blob, Lane("blob"))
    server = await start_server(table)  # max_frame_bytes 64 KiB

    response = await client.invoke(server.address, RemotingCommand.request(ODD_CODE, {"n": "1000"}))
    assert len(response.body_bytes) == 1000
    conn = await client.connection(server.address)
    too_big = RemotingCommand.request(ODD_CODE, {"n": "70000"})
    response = await client.invoke(server.address, too_big)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None
    assert response.remark.startswith("response not encodable")
    assert any(e["event"] == "response_not_encodable" for e in logs)
    await check_echo(client, server.address, 1)
    assert await client.connection(server.address) is conn


# -------------------------------------------------------------------------------- oneway


async def test_oneway_requests_are_processed_but_never_answered(
    start_server: ServerFactory, raw: RawFactory, logs: LogEntries
) -> None:
    seen: list[str] = []

    async def record(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        seen.append(request.ext_fields["n"])
        return response_to(request, ResponseCode.SUCCESS)  # must be dropped for oneway

    async def crash(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("oneway handler failed")

    table = echo_table()
    table.register(RECORD, record, Lane("record"))
    table.register(CRASH, crash, Lane("crash"))
    server = await start_server(table)
    reader, writer = await raw(server)

    oneways = [
        RemotingCommand.request(RECORD, {"n": "1"}, oneway=True),
        RemotingCommand.request(
            RECORD, {"n": "2"}, oneway=True, serialize_type=SerializeType.ROCKETMQ
        ),
        RemotingCommand.request(UNKNOWN_CODE, oneway=True),
        RemotingCommand.request(CRASH, oneway=True),
    ]
    writer.write(b"".join(r.to_bytes() for r in oneways))
    await wait_until(lambda: seen == ["1", "2"], "the oneway side effects")
    await wait_until(
        lambda: any(e["event"] == "processor_failed" for e in logs), "the oneway crash"
    )
    await assert_silent(reader, 0.3)

    # The first frame on the wire now must be the answer to this request: nothing was queued
    # for the oneways.
    request = echo_request(4)
    writer.write(request.to_bytes())
    _type, response = await read_frame(reader)
    assert_echoed(request, response)


# ------------------------------------------------------------------------- lanes and busy


async def test_full_lane_answers_system_busy_at_once(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def blocked(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        entered.set()
        await gate.wait()
        return response_to(request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))

    lane = Lane("narrow", workers=1, capacity=2)
    table = ProcessorTable()
    table.register(BLOCKED, blocked, lane)
    server = await start_server(table)
    await client.connection(server.address)

    requests = [RemotingCommand.request(BLOCKED, {"i": str(i)}) for i in range(10)]
    tasks = [asyncio.create_task(client.invoke(server.address, r, timeout_s=5.0)) for r in requests]
    try:
        await wait_until(
            lambda: entered.is_set() and lane.rejected + lane.depth + 1 == 10,
            "all ten requests to be dispatched",
        )
        await wait_until(
            lambda: sum(t.done() for t in tasks) == lane.rejected, "the SYSTEM_BUSY answers"
        )
        early = [t.result() for t in tasks if t.done()]
        assert len(early) >= 7  # one running, two queued at most
        for response in early:
            assert response.code == ResponseCode.SYSTEM_BUSY
            assert response.remark is not None
            assert response.remark.startswith("[OVERLOAD]")
        assert not gate.is_set()
    finally:
        gate.set()
    responses = await asyncio.gather(*tasks)

    ok = [(req, resp) for req, resp in zip(requests, responses, strict=True) if resp.code == 0]
    assert len(ok) == 10 - len(early)
    for req, resp in ok:
        assert resp.ext_fields == req.ext_fields
    # The lane recovered: a new request is served.
    response = await client.invoke(server.address, RemotingCommand.request(BLOCKED, {"i": "x"}))
    assert (response.code, response.ext_fields) == (0, {"i": "x"})


async def test_request_that_waited_too_long_answers_timeout_clean_queue(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    async def blocked(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ran.append(request.ext_fields["i"])
        await gate.wait()
        return response_to(request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))

    lane = Lane("send", workers=1, capacity=100, max_wait_ms=50)
    table = ProcessorTable()
    table.register(BLOCKED, blocked, lane)
    server = await start_server(table)
    requests = [RemotingCommand.request(BLOCKED, {"i": str(i)}) for i in range(3)]
    tasks = [asyncio.create_task(client.invoke(server.address, r, timeout_s=5.0)) for r in requests]
    await wait_until(lambda: ran == ["0"] and lane.depth == 2, "one running, two queued")
    await asyncio.sleep(0.1)  # the queued two now exceed max_wait_ms
    gate.set()
    first, *late = await asyncio.gather(*tasks)

    assert (first.code, first.ext_fields) == (ResponseCode.SUCCESS, {"i": "0"})
    for response in late:
        assert response.code == ResponseCode.SYSTEM_BUSY
        assert response.remark is not None
        assert response.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
    assert ran == ["0"]  # expired requests are answered, never run
    assert lane.expired == 2
    # Fresh requests run again.
    response = await client.invoke(server.address, RemotingCommand.request(BLOCKED, {"i": "x"}))
    assert (response.code, response.ext_fields) == (0, {"i": "x"})


async def test_reject_hook_answers_rejectrequest(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    page_cache_busy = True
    handled: list[int] = []

    async def handler(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        handled.append(request.opaque)
        return response_to(request, ResponseCode.SUCCESS)

    table = ProcessorTable()
    table.register(RECORD, handler, Lane("store"), reject=lambda: page_cache_busy)
    server = await start_server(table)

    response = await client.invoke(server.address, RemotingCommand.request(RECORD))
    assert response.code == ResponseCode.SYSTEM_BUSY
    assert response.remark is not None
    assert response.remark.startswith("[REJECTREQUEST]")
    assert handled == []

    page_cache_busy = False
    request = RemotingCommand.request(RECORD)
    response = await client.invoke(server.address, request)
    assert response.code == ResponseCode.SUCCESS
    assert handled == [request.opaque]


# ---------------------------------------------------------------------- handler failures


async def _topic_missing(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    raise TopicNotExistError("topic T1 not exist, apply first please!")


async def _bad_header(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    raise HeaderError("the custom field <topic> is null")


async def _crash(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("boom")


def _thread_crash(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("boom in a thread")


class Failure(NamedTuple):
    code: int  # the request code whose handler raises
    response_code: int
    remark: str
    logged: bool  # "processor_failed" with a traceback


FAILURES = {
    "BrokerError": Failure(TOPIC_MISSING, 17, "topic T1 not exist, apply first please!", False),
    "HeaderError": Failure(
        BAD_HEADER, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null", False
    ),
    "RuntimeError": Failure(CRASH, ResponseCode.SYSTEM_ERROR, "RuntimeError: boom", True),
    "RuntimeError in a thread": Failure(
        THREAD_CRASH, ResponseCode.SYSTEM_ERROR, "RuntimeError: boom in a thread", True
    ),
}


@pytest.mark.parametrize("failure", list(FAILURES.values()), ids=list(FAILURES))
async def test_handler_exceptions_become_responses(
    failure: Failure,
    start_server: ServerFactory,
    client: RemotingClient,
    logs: LogEntries,
) -> None:
    # One worker for every handler: it must survive each failure to serve the echo after.
    lane = Lane("single", workers=1)
    table = ProcessorTable()
    for c, handler in [(TOPIC_MISSING, _topic_missing), (BAD_HEADER, _bad_header), (CRASH, _crash)]:
        table.register(c, handler, lane)
    table.register(ECHO, echo, lane)
    table.register(THREAD_CRASH, _thread_crash, Lane("threads", threads=1))
    server = await start_server(table)

    for attempt in range(3):
        request = RemotingCommand.request(failure.code)
        response = await client.invoke(server.address, request)
        assert (response.code, response.remark) == (failure.response_code, failure.remark)
        assert response.opaque == request.opaque
        echo_req = echo_request(attempt)
        assert_echoed(echo_req, await client.invoke(server.address, echo_req))

    failures = [e for e in logs if e["event"] == "processor_failed"]
    if failure.logged:
        assert len(failures) == 3
        assert all(e["code"] == failure.code and e["exc_info"] for e in failures)
    else:
        assert failures == []
    if failure.code == TOPIC_MISSING:
        assert BrokerError.for_code(response.code, response.remark).__class__ is TopicNotExistError


async def test_handler_returning_none_can_answer_later(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    """The long-polling pattern: keep (conn, request), answer from elsewhere."""
    parked: list[tuple[Connection, RemotingCommand]] = []

    async def park(conn: Connection, request: RemotingCommand) -> None:
        parked.append((conn, request))

    table = ProcessorTable()
    table.register(DEFERRED, park, Lane("park"))
    server = await start_server(table)

    task = asyncio.create_task(
        client.invoke(server.address, RemotingCommand.request(DEFERRED), timeout_s=5.0)
    )
    await wait_until(lambda: len(parked) == 1, "the request to be parked")
    await asyncio.sleep(0.05)
    assert not task.done()
    conn, request = parked[0]
    assert conn.send(response_to(request, ResponseCode.SUCCESS, ext_fields={"woken": "1"}))
    response = await asyncio.wait_for(task, timeout=3.0)
    assert (response.opaque, response.ext_fields) == (request.opaque, {"woken": "1"})


async def test_threaded_lane_runs_blocking_handlers_off_the_loop(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    started: list[str] = []
    release = threading.Event()

    def blocking(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        started.append(threading.current_thread().name)
        release.wait(timeout=5.0)  # blocks this thread, never the loop
        time.sleep(0.05)
        return response_to(request, ResponseCode.SUCCESS, ext_fields={"thread": started[-1]})

    table = echo_table()
    table.register(BLOCKING, blocking, Lane("blocking", threads=2))
    with pytest.raises(TypeError):
        table.register(BLOCKING, echo, Lane("blocking", threads=2))  # async on a thread lane
    server = await start_server(table)

    tasks = [
        asyncio.create_task(client.invoke(server.address, RemotingCommand.request(BLOCKING)))
        for _ in range(2)
    ]
    try:
        # Both threads are inside the handler at once, and the loop still answers.
        await wait_until(lambda: len(started) == 2, "two handler threads")
        for i in range(5):
            request = echo_request(i)
            assert_echoed(request, await client.invoke(server.address, request, timeout_s=1.0))
        assert not any(t.done() for t in tasks)
    finally:
        release.set()
    responses = await asyncio.gather(*tasks)
    assert [r.code for r in responses] == [0, 0]
    assert len(set(started)) == 2
    assert all(name.startswith("lane-blocking") for name in started)
    assert threading.main_thread().name not in started


# ------------------------------------------------------------------------------- RPC hooks


class RecordingHook:
    """Records every call: (stage, remote address, code, ext "signature", response code)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, str | None, int | None]] = []

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.calls.append(
            ("before", remote_addr, request.code, request.ext_fields.get("signature"), None)
        )

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        self.calls.append(
            (
                "after",
                remote_addr,
                request.code,
                request.ext_fields.get("signature"),
                None if response is None else response.code,
            )
        )


class SigningHook:
    """A client hook that adds a field before the request is written, as ACL signing does."""

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        request.ext_fields["signature"] = f"sig-{request.opaque}"

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        pass


class DenyMalloryHook(RecordingHook):
    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        super().before_request(remote_addr, request)
        if request.ext_fields.get("user") == "mallory":
            raise NoPermissionError(f"user mallory may not send code {request.code}")


async def test_rpc_hooks_run_on_server_and_client(
    start_server: ServerFactory, start_client: ClientFactory
) -> None:
    server_hook = RecordingHook()
    client_hook = RecordingHook()
    server = await start_server(echo_table(hooks=[server_hook]))
    client = await start_client(hooks=[SigningHook(), client_hook])

    request = echo_request(1)
    response = await client.invoke(server.address, request)
    signature = f"sig-{request.opaque}"
    assert response.ext_fields["signature"] == signature  # signed before it was written
    client_peer = local_peer_of(await client.connection(server.address))
    assert server_hook.calls == [
        ("before", client_peer, ECHO, signature, None),
        ("after", client_peer, ECHO, signature, 0),
    ]
    assert client_hook.calls == [
        ("before", server.address, ECHO, signature, None),
        ("after", server.address, ECHO, signature, 0),
    ]


def local_peer_of(conn: Connection) -> str:
    assert conn.transport is not None
    host, port = conn.transport.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


async def test_before_request_hook_can_refuse_with_no_permission(
    start_server: ServerFactory, client: RemotingClient
) -> None:
    hook = DenyMalloryHook()
    handled: list[str] = []

    async def handler(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        handled.append(request.ext_fields["user"])
        return response_to(request, ResponseCode.SUCCESS)

    table = ProcessorTable(hooks=[hook])
    table.register(RECORD, handler, Lane("guarded"))
    server = await start_server(table)

    response = await client.invoke(
        server.address, RemotingCommand.request(RECORD, {"user": "mallory"})
    )
    assert response.code == ResponseCode.NO_PERMISSION  # 16
    assert response.remark == f"user mallory may not send code {RECORD}"
    assert handled == []
    assert [c[0] for c in hook.calls] == ["before"]  # no after_response for a refusal

    response = await client.invoke(
        server.address, RemotingCommand.request(RECORD, {"user": "alice"})
    )
    assert response.code == ResponseCode.SUCCESS
    assert handled == ["alice"]


# ------------------------------------------------------------------------ connection life


async def test_close_listeners_get_the_closed_connection(
    server: RemotingServer, client: RemotingClient, logs: LogEntries
) -> None:
    closed: list[Connection] = []

    def broken_listener(conn: Connection) -> None:
        raise RuntimeError("listener bug")

    server.add_close_listener(broken_listener)  # must not stop the next listener
    server.add_close_listener(closed.append)
    await client.invoke(server.address, echo_request(1))
    (server_conn,) = server.connections
    client_conn = await client.connection(server.address)
    assert server_conn.peer == local_peer_of(client_conn)

    client.close_connection(server.address)
    await wait_until(lambda: len(closed) == 1, "the close listener")
    assert closed == [server_conn]
    assert server_conn.closed
    assert server.connections == set()
    assert any(e["event"] == "close_listener_failed" for e in logs)


async def _stalled_count(processed: list[int]) -> int:
    """Let the server run until ``len(processed)`` has not changed for 0.3 s (at most 4 s)."""
    history: list[int] = []
    for _ in range(40):
        history.append(len(processed))
        if len(history) >= 4 and history[-1] == history[-4] and history[-1] > 0:
            break
        await asyncio.sleep(0.1)
    return len(processed)


def _big_table(processed: list[int], body: bytes) -> ProcessorTable:
    async def big(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        processed.append(request.opaque)
        return response_to(request, ResponseCode.SUCCESS, body=body)

    table = ProcessorTable()
    table.register(BIG, big, Lane("big", workers=1))
    return table


async def test_client_that_does_not_read_pauses_reading_until_it_reads(
    start_server: ServerFactory, raw: RawFactory, logs: LogEntries
) -> None:
    """300 requests of 64 KiB (19 MB) with 64 KiB answers, from a client that does not read.

    The server stops reading once its write buffer passes the high-water mark; the requests it
    has not read stay in the socket. When the client reads, every answer arrives in order.
    """
    processed: list[int] = []
    body = bytes(64 * 1024)
    server = await start_server(
        _big_table(processed, body), max_frame_bytes=1 << 20, write_buffer_high_bytes=64 * 1024
    )
    reader, writer = await raw(server)
    requests = [RemotingCommand.request(BIG, {"i": str(i)}, body) for i in range(300)]
    writer.write(b"".join(r.to_bytes() for r in requests))  # buffered client-side

    stalled_at = await _stalled_count(processed)
    (server_conn,) = server.connections
    assert server_conn.transport is not None
    assert not server_conn.transport.is_reading()
    assert 0 < stalled_at < len(requests), f"{stalled_at} processed while the client did not read"

    for request in requests:
        _type, response = await read_frame(reader, timeout_s=10.0)
        assert (response.code, response.opaque) == (0, request.opaque)
        assert len(response.body_bytes) == len(body)
    assert processed == [r.opaque for r in requests]
    assert server_conn.transport.is_reading()
    assert close_reasons_any(logs) == []


async def test_client_that_does_not_read_cannot_make_the_server_buffer_its_answers(
    start_server: ServerFactory, raw: RawFactory
) -> None:
    """1,500 pipelined 110-byte requests with 32 KiB answers (48 MB), never read.

    The socket buffers hold a few MB of answers; beyond the 16 KiB high-water mark the server
    must neither run more requests nor buffer more answers in user space.
    """
    processed: list[int] = []
    body = bytes(32 * 1024)
    server = await start_server(_big_table(processed, body), write_buffer_high_bytes=16 * 1024)
    reader, writer = await raw(server)
    requests = [RemotingCommand.request(BIG, {"i": str(i)}) for i in range(1500)]
    writer.write(b"".join(r.to_bytes() for r in requests))  # 200 KB: one read for the server

    stalled_at = await _stalled_count(processed)
    (server_conn,) = server.connections
    assert server_conn.transport is not None
    buffered = server_conn.transport.get_write_buffer_size()
    assert buffered <= 1 << 20, f"{buffered} bytes of answers buffered in user space"
    assert stalled_at <= len(requests) // 2, f"{stalled_at} of 1500 run while not reading"

    for request in requests:
        _type, response = await read_frame(reader, timeout_s=10.0)
        assert response.opaque == request.opaque
    assert len(processed) == len(requests)


async def test_client_slow_to_read_is_not_closed_as_a_slow_sender(
    start_server: ServerFactory, raw: RawFactory, logs: LogEntries
) -> None:
    """While the server has paused reading (its own back-pressure), the half-read frame in its
    decoder is not the fault of a peer that does read its replies, however slowly:
    frame_read_timeout_s must not close it. (A peer that stops reading its replies is
    closed at the frame deadline: tests/broker/test_in_flight.py.)"""
    processed: list[int] = []
    body = bytes(128 * 1024)
    server = await start_server(
        _big_table(processed, body),
        max_frame_bytes=1 << 20,
        write_buffer_high_bytes=64 * 1024,
        frame_read_timeout_s=0.5,
    )
    reader, writer = await raw(server)
    requests = [RemotingCommand.request(BIG, {"i": str(i)}, bytes(100_000)) for i in range(200)]
    writer.write(b"".join(r.to_bytes() for r in requests))  # 20 MB: more than one read

    # Three frame-read timeouts of slow reading: one reply every 10 ms.
    loop = asyncio.get_running_loop()
    until = loop.time() + 1.5
    read = 0
    while loop.time() < until:
        _type, response = await read_frame(reader, timeout_s=10.0)
        assert response.opaque == requests[read].opaque
        read += 1
        await asyncio.sleep(0.01)
    assert close_reasons_any(logs) == []
    for request in requests[read:]:
        _type, response = await read_frame(reader, timeout_s=10.0)
        assert response.opaque == request.opaque


def close_reasons_any(logs: LogEntries) -> list[str]:
    return [str(e["reason"]) for e in logs if e["event"] == "connection_closed"]


# -------------------------------------------------------------------------------- shutdown


async def test_shutdown_lets_queued_requests_finish_and_is_idempotent(
    start_server: ServerFactory, client: RemotingClient, raw: RawFactory
) -> None:
    started: list[int] = []

    async def slow(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        started.append(request.opaque)
        await asyncio.sleep(0.1)
        return response_to(request, ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))

    table = ProcessorTable()
    table.register(SLOW, slow, Lane("slow", workers=1))
    server = await start_server(table, shutdown_grace_s=3.0)
    requests = [RemotingCommand.request(SLOW, {"i": str(i)}) for i in range(5)]
    tasks = [asyncio.create_task(client.invoke(server.address, r)) for r in requests]
    await wait_until(lambda: len(started) == 1, "the first request to start")

    loop = asyncio.get_running_loop()
    began = loop.time()
    await server.shutdown()
    took = loop.time() - began

    responses = await asyncio.gather(*tasks)
    assert [(r.code, r.ext_fields) for r in responses] == [(0, r.ext_fields) for r in requests]
    assert len(started) == 5
    assert 0.35 <= took < 3.0  # the four queued ones ran (0.1 s each), within the grace
    assert server.connections == set()

    began = loop.time()
    await server.shutdown()  # again: nothing to do
    assert loop.time() - began < 0.1
    with pytest.raises(ConnectError):
        await client.invoke(server.address, RemotingCommand.request(SLOW), timeout_s=1.0)
    with pytest.raises(OSError):
        await raw(server)


async def test_shutdown_cancels_work_past_the_grace_period(
    start_server: ServerFactory, raw: RawFactory
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def stuck(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        entered.set()
        await gate.wait()  # never set
        return response_to(request, ResponseCode.SUCCESS)

    table = ProcessorTable()
    table.register(BLOCKED, stuck, Lane("stuck"))
    server = await start_server(table, shutdown_grace_s=0.3)
    reader, writer = await raw(server)
    writer.write(RemotingCommand.request(BLOCKED).to_bytes())
    await asyncio.wait_for(entered.wait(), timeout=2.0)

    loop = asyncio.get_running_loop()
    began = loop.time()
    await server.shutdown()
    assert 0.25 <= loop.time() - began < 2.0
    assert await read_until_closed(reader, timeout_s=2.0) == b""  # closed, never answered
