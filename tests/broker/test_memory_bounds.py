"""What a stranger's connections can make a broker hold is bounded (issue 19, item 5).

Each attack runs against a real broker while a well-behaved client sends one message at a
time and times each send: its p99 stays under 50 ms while the attack runs. The bound is read
from the server's own accounting (``RemotingServer.budget``, the connections' counters and
the long-polling table), never from RSS. The limits are scaled down through the broker's
config where the defaults would make an attack too big for CI:

- incomplete frames: a large frame beyond ``partialFrameBudgetBytes`` is refused (closed),
  and one that stays incomplete for ``frameReadTimeoutMillis`` is closed too;
- a header over ``maxHeaderBytes`` (the default) is refused before it is read, while a legal
  send whose properties escape to a 190 KiB JSON header is stored;
- pipelining without reading: sends stop being read at ``maxInFlightRequestsPerConnection``
  and reading resumes as replies go out; long-polling pulls (parked, never answered) leave
  the in-flight count and are parked up to their own limit, the rest answered at once
  (``test_in_flight.py`` has the accounting's corner cases);
- connections beyond ``maxConnections`` get SYSTEM_BUSY with a remark, then are closed,
  with one log line per interval.

``test_flood.py`` (a client that never reads its replies is paused) and
``tests/remoting/test_malformed.py`` (malformed frames) cover the neighbouring cases.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import math
import struct
import time
from collections.abc import Awaitable, Callable

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig, listener_limits, load_config
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import (
    DEFAULT_WRITE_BUFFER_HIGH_BYTES,
    PARKED_PER_IN_FLIGHT,
    SMALL_FRAME_BYTES,
    Connection,
    ReadPause,
    Refusal,
)
from remoting.errors import ConfigError, HeaderTooLargeError
from remoting.frame import DEFAULT_MAX_HEADER_BYTES, FrameDecoder
from remoting.header_codec import encode_json
from tests.broker.test_metrics import scrape, value
from tests.support import (
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    BrokerFactory,
    NamesrvFactory,
    call,
    properties,
    pull_header,
    send_header,
    send_ok,
    wait_until,
)

P99_BOUND_S = 0.050
MEASURE_S = 1.2  # the good client's sends while an attack runs...
MIN_SAMPLES = 100  # ...and at least this many, so the p99 is not just the slowest
BOUND_S = 5.0  # every wait for an attack to be dealt with
GOOD_TOPIC = "TopicGood"

_PREFIX = struct.Struct(
    ">"
    "i"  # frame length
    "I"  # (serialize type << 24) | header length
)
assert _PREFIX.size == 8


# ------------------------------------------------------------------------------ helpers


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[math.ceil(0.99 * len(ordered)) - 1]


async def good_sends(client: RemotingClient, addr: str) -> list[float]:
    """One send at a time for MEASURE_S (and MIN_SAMPLES at least); each one's seconds."""
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    until = loop.time() + MEASURE_S
    for n in range(10_000):
        if loop.time() > until and len(latencies) >= MIN_SAMPLES:
            break
        started = time.perf_counter()
        await send_ok(client, addr, GOOD_TOPIC, f"good-{n}".encode())
        latencies.append(time.perf_counter() - started)
    return latencies


async def attack_and_measure(
    client: RemotingClient, broker: Broker, attack: Callable[[asyncio.Event], Awaitable[None]]
) -> None:
    """Start ``attack(measured)``, time the good client's sends meanwhile, set ``measured``,
    let the attack finish (within BOUND_S), then check the sends' p99."""
    measured = asyncio.Event()
    # What earlier tests left is frozen out of the collector too (conftest freezes the
    # session's heap once collected): a full collection of it would be timed as the broker's.
    # It stays frozen (unfreezing would hand the session's heap back to the collector).
    gc.collect()
    gc.freeze()
    task = asyncio.ensure_future(attack(measured))
    try:
        latencies = await good_sends(client, broker.address)
        measured.set()
        await asyncio.wait_for(asyncio.shield(task), BOUND_S)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert p99(latencies) < P99_BOUND_S, (
        f"p99 {p99(latencies) * 1000:.1f} ms over {len(latencies)} sends, "
        f"max {max(latencies) * 1000:.1f} ms"
    )


async def open_raw(broker: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = broker.address.rsplit(":", 1)
    return await asyncio.wait_for(asyncio.open_connection(host, int(port)), BOUND_S)


async def closed_by_server(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """True once the server closes the connection (EOF or reset) within ``timeout_s``;
    anything it sends first is read and dropped."""
    try:
        async with asyncio.timeout(timeout_s):
            for _ in range(100_000):
                if not await reader.read(65536):
                    return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def server_side(broker: Broker, writer: asyncio.StreamWriter) -> Connection:
    """The broker's connection object for a raw client connection."""
    host, port = writer.get_extra_info("sockname")[:2]
    peer = f"{host}:{port}"
    (conn,) = [c for c in broker.server.connections if c.peer == peer]
    return conn


def remoting_events(caplog: pytest.LogCaptureFixture, event: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("remoting") and r.getMessage().startswith(event + " ")
    ]


# ------------------------------------------------------------------- incomplete frames


async def test_incomplete_frames_stay_within_the_budget_and_the_deadline(
    start_broker: BrokerFactory, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="remoting")
    budget_bytes = 4 << 20
    broker = await start_broker(partial_frame_budget_bytes=budget_bytes, frame_read_timeout_ms=1000)
    await send_ok(client, broker.address, GOOD_TOPIC, b"warm-up")
    budget = broker.server.budget
    attackers = 12
    # Each announces about 1 MB and sends a quarter of it, then trickles. Four fit the budget
    # with room for the good client's small frames, which are counted but never refused.
    announced = 1_000_000
    assert announced > SMALL_FRAME_BYTES
    closed_after: list[float] = []

    async def hold_a_frame() -> None:
        reader, writer = await open_raw(broker)
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer.write(_PREFIX.pack(announced - 4, 64) + bytes(announced // 4))
        try:
            for _ in range(int(BOUND_S / 0.1)):
                if await closed_by_server(reader, 0.1):
                    closed_after.append(loop.time() - started)
                    return
                writer.write(b"\0")  # one byte every 0.1 s: never idle, never complete
        finally:
            writer.transport.abort()

    async def attack(_measured: asyncio.Event) -> None:
        await asyncio.gather(*(hold_a_frame() for _ in range(attackers)))

    await attack_and_measure(client, broker, attack)

    # The server's accounting never went past the budget, and holds nothing now.
    assert budget.peak_partial_frame_bytes <= budget_bytes
    assert budget.peak_partial_frame_bytes >= announced  # some frames were admitted
    assert budget.partial_frame_bytes == 0
    # Every attacker was closed: beyond the budget at once, the admitted ones at the deadline.
    assert len(closed_after) == attackers, closed_after
    refused = budget.refusals[Refusal.PARTIAL_FRAME_BUDGET]
    timed_out = budget.refusals[Refusal.FRAME_TIMEOUT]
    assert refused >= attackers - budget_bytes // announced
    assert refused + timed_out == attackers
    assert sorted(closed_after)[refused - 1] < 0.9, "refusals wait for nothing"
    assert max(closed_after) < 2.0, "the frame deadline is 1 s (swept every 0.25 s)"
    reasons = remoting_events(caplog, "connection_closed")
    assert sum("refused: incomplete frames already hold" in r for r in reasons) == refused
    assert sum("frame not completed within 1 s" in r for r in reasons) == timed_out
    samples = await scrape(broker.metrics_port)
    assert value(samples, "rocketmq_remoting_refusals_total", reason="partial_frame_budget") == (
        refused
    )
    assert value(samples, "rocketmq_remoting_partial_frame_bytes") == 0
    await send_ok(client, broker.address, GOOD_TOPIC, b"after")


# ---------------------------------------------------------------------- large headers


async def test_a_header_over_the_limit_is_refused_before_it_is_read(
    broker: Broker, client: RemotingClient
) -> None:
    """With the default limit: a 14 MB header (the one that stalled the loop 321 ms) is
    refused from its 8-byte prefix, while the largest legal header is served."""
    await send_ok(client, broker.address, GOOD_TOPIC, b"warm-up")
    header_len = 14_000_000
    attackers = 8

    async def announce_a_huge_header() -> bool:
        reader, writer = await open_raw(broker)
        try:
            writer.write(_PREFIX.pack(4 + header_len + 100, header_len) + b"{" * 65536)
            return await closed_by_server(reader, 1.0)
        finally:
            writer.transport.abort()

    results: list[bool] = []

    async def attack(_measured: asyncio.Event) -> None:
        results.extend(await asyncio.gather(*(announce_a_huge_header() for _ in range(attackers))))

    await attack_and_measure(client, broker, attack)
    assert results == [True] * attackers, "each huge header closes its connection within 1 s"
    budget = broker.server.budget
    assert budget.refusals[Refusal.HEADER_TOO_LARGE] == attackers
    assert budget.peak_partial_frame_bytes < 1 << 20, "the announced frames were never charged"

    # The largest legal header: 32 KiB of properties, every byte a control character that
    # JSON writes as a 6-byte escape. Stored, not refused.
    extra = {"X": "\x03" * 32_600}
    header = send_header(GOOD_TOPIC, props=properties(**extra))
    wire = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2())
    assert 190_000 < len(encode_json(wire)) <= DEFAULT_MAX_HEADER_BYTES
    await send_ok(client, broker.address, GOOD_TOPIC, b"big header", extra=extra)


def test_the_decoder_refuses_a_long_header_from_its_prefix_fed_byte_by_byte() -> None:
    """Sans-IO: the refusal comes with the 8th byte, however the prefix is split, and the
    incomplete frame's size is known (for the budget) from the 4th."""
    decoder = FrameDecoder(max_header_bytes=1024)
    prefix = _PREFIX.pack(4 + 2048 + 10, 2048)
    for i, byte in enumerate(prefix[:7]):
        assert decoder.feed(bytes([byte])) == []
        assert decoder.pending_frame_bytes == (i + 1 if i < 3 else 4 + 4 + 2048 + 10)
    with pytest.raises(HeaderTooLargeError, match="header of 2048 bytes exceeds the limit"):
        decoder.feed(prefix[7:])
    assert decoder.pending_frame_bytes == decoder.buffered_bytes == 0
    # A header at the limit passes, and a complete frame leaves nothing pending.
    ok = _PREFIX.pack(4 + 1024, 1024) + b"h" * 1024
    assert [bytes(f) for f in decoder.feed(ok)] == [ok[4:]]
    assert decoder.pending_frame_bytes == 0


# ----------------------------------------------------------------------- pipelining


async def test_pipelined_long_polls_are_parked_to_their_own_limit(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    """A client pipelines long-polling pulls that park and are never answered. Parked pulls
    leave the in-flight count (so they never stop the connection being read); at most
    PARKED_PER_IN_FLIGHT times the in-flight limit are parked, the rest are answered
    PULL_NOT_FOUND at once."""
    broker = await start_broker(max_in_flight_per_connection=64)
    await send_ok(client, broker.address, GOOD_TOPIC, b"warm-up")
    await send_ok(client, broker.address, "TopicParked", b"m0", queue_id=0)
    limit = PARKED_PER_IN_FLIGHT * 64
    pulls = 2 * limit
    header = pull_header(
        "TopicParked",
        queue_id=1,
        group="cg-parked",
        sys_flag=PULL_SUBSCRIPTION | PULL_SUSPEND,
        suspend_ms=20_000,
    )
    frames = b"".join(
        RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(header)).to_bytes()
        for _ in range(pulls)
    )
    reader, writer = await open_raw(broker)
    try:
        writer.write(frames)  # and never read
        await wait_until(lambda: broker.pull_hold.count >= limit, "parked pulls", BOUND_S)
        conn = server_side(broker, writer)

        async def attack(_measured: asyncio.Event) -> None:
            pass  # under way already: the pulls are parked, the rest answered

        await attack_and_measure(client, broker, attack)
        # Bounded: the rest of the pulls were answered at once, none is left in flight.
        await wait_until(lambda: conn.in_flight == 0, "the surplus answered", BOUND_S)
        assert broker.pull_hold.count == limit
        assert conn.parked == limit

        # A message for the parked pulls answers them; reading resumes, every pull is
        # answered, and nothing is left counted in flight.
        await send_ok(client, broker.address, "TopicParked", b"wake", queue_id=1)
        answered = 0
        async with asyncio.timeout(BOUND_S):
            while answered < pulls:
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(length)
                answered += 1
        await wait_until(lambda: conn.parked == 0, "parked count back to 0", BOUND_S)
        assert conn.in_flight == 0
        assert not conn.reading_paused
        assert broker.pull_hold.count == 0
    finally:
        writer.transport.abort()


async def test_pipelined_sends_of_clients_that_never_read_are_held_to_the_limit(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    """Four clients each pipeline sends without reading a reply (the 446 ms p99 attack).
    Each stops being read at ``maxInFlightRequestsPerConnection`` sends in the broker, and
    the good client is served in turn with them (the send lane takes connections in turn,
    and the loop hands on a few frames of each per turn), not behind all they sent."""
    limit = 64
    broker = await start_broker(
        max_in_flight_per_connection=limit, store={"commit_log_file_bytes": 8 << 20}
    )
    await send_ok(client, broker.address, GOOD_TOPIC, b"warm-up")
    await send_ok(client, broker.address, "TopicFlood", b"create")
    h = send_header("TopicFlood", props=properties(WAIT="false"))
    frame = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2(), b"x" * 64).to_bytes()
    flooders = [await open_raw(broker) for _ in range(4)]
    conns = [server_side(broker, w) for _r, w in flooders]
    most_in_flight = 0
    deepest_lane = 0

    async def flood(measured: asyncio.Event) -> None:
        nonlocal most_in_flight, deepest_lane
        for _r, w in flooders:
            w.write(frame * 3000)  # and never read
        while not measured.is_set():
            most_in_flight = max(most_in_flight, *(c.in_flight for c in conns))
            deepest_lane = max(deepest_lane, broker.send_lane.depth)
            await asyncio.sleep(0.002)

    try:
        await attack_and_measure(client, broker, flood)
        # Sampled every 2 ms, so a reply may land between the limit and the sample; the
        # read pauses below prove the limit was reached, this that none went past it. Not
        # every flooder need reach it: while the lane drains one as fast as its turns hand
        # frames on (a slow loop's case, seen in CI), it stays under the limit.
        assert limit // 2 < most_in_flight <= limit
        assert deepest_lane <= len(conns) * limit + 1
        assert broker.server.budget.read_pauses[ReadPause.IN_FLIGHT] >= 1
    finally:
        for _r, w in flooders:
            w.transport.abort()
    await send_ok(client, broker.address, GOOD_TOPIC, b"after")


# ---------------------------------------------------------------------- connections


async def test_connections_beyond_max_connections_get_a_clear_refusal(
    start_broker: BrokerFactory, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="remoting")
    broker = await start_broker(max_connections=4)
    await send_ok(client, broker.address, GOOD_TOPIC, b"warm-up")  # connection 1
    budget = broker.server.budget
    idle = [await open_raw(broker) for _ in range(3)]  # connections 2..4
    await wait_until(lambda: budget.connections == 4, "four connections", BOUND_S)

    # The fifth: its first request is answered SYSTEM_BUSY with the reason, then it is closed.
    reader, writer = await open_raw(broker)
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    writer.write(request.to_bytes())
    async with asyncio.timeout(BOUND_S):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        data = await reader.readexactly(length)
    header = json.loads(data[4 : 4 + (struct.unpack(">I", data[:4])[0] & 0xFFFFFF)])
    assert header["code"] == ResponseCode.SYSTEM_BUSY
    assert header["opaque"] == request.opaque
    assert "maxConnections" in header["remark"]
    assert await closed_by_server(reader, BOUND_S)
    writer.transport.abort()

    # A hundred more at once: all turned away, the good client unhurt, one log line.
    most_served = 0

    async def knock() -> None:
        r, w = await open_raw(broker)
        try:
            w.write(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}).to_bytes())
            assert await closed_by_server(r, BOUND_S)
        finally:
            w.transport.abort()

    async def attack(_measured: asyncio.Event) -> None:
        nonlocal most_served
        tasks = [asyncio.ensure_future(knock()) for _ in range(100)]
        while not all(t.done() for t in tasks):
            most_served = max(most_served, budget.connections, len(broker.server.connections))
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)

    await attack_and_measure(client, broker, attack)
    assert most_served == 4
    assert budget.refusals[Refusal.MAX_CONNECTIONS] == 101
    assert len(remoting_events(caplog, "connection_refused")) == 1, "rate-limited"
    samples = await scrape(broker.metrics_port)
    assert value(samples, "rocketmq_remoting_refusals_total", reason="max_connections") == 101
    assert value(samples, "rocketmq_remoting_connections") == 4

    # Room again once some go.
    for _r, w in idle:
        w.transport.abort()
    await wait_until(lambda: budget.connections == 1, "idle connections gone", BOUND_S)
    other = RemotingClient(client.config)
    async with other:
        response = await call(other, broker.address, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert response.code == ResponseCode.SUCCESS


# --------------------------------------------------------------------------- config


LIMIT_FIELDS = (
    "max_connections",
    "max_header_bytes",
    "partial_frame_budget_bytes",
    "frame_read_timeout_ms",
    "max_in_flight_per_connection",
    "write_buffer_high_water_mark",
    "server_socket_backlog",
)


async def test_the_limits_are_config_keys_of_the_broker_and_the_name_server(
    start_namesrv: NamesrvFactory,
) -> None:
    keys = {
        "maxConnections": "7",
        "maxHeaderBytes": "65536",
        "partialFrameBudgetBytes": "1048576",
        "frameReadTimeoutMillis": "2500",
        "maxInFlightRequestsPerConnection": "300",
        "writeBufferHighWaterMark": "524288",
        "serverSocketBacklog": "128",
    }
    broker_cfg = load_config(BrokerConfig, None, keys)
    namesrv_cfg = load_config(NamesrvConfig, None, keys)
    for name in LIMIT_FIELDS:
        assert getattr(broker_cfg, name) == getattr(namesrv_cfg, name)
    namesrv = await start_namesrv(**{name: getattr(namesrv_cfg, name) for name in LIMIT_FIELDS})
    server = namesrv.server.config
    assert (
        server.max_connections,
        server.max_header_bytes,
        server.partial_frame_budget_bytes,
        server.frame_read_timeout_s,
        server.max_in_flight_per_connection,
        server.write_buffer_high_bytes,
        server.backlog,
    ) == (7, 65536, 1048576, 2.5, 300, 524288, 128)
    assert namesrv.server.budget.max_connections == 7
    # Apache's writeBufferHighWaterMark=0 means the transport's default: ours here.
    zero = load_config(BrokerConfig, None, {"writeBufferHighWaterMark": "0"})
    assert listener_limits(zero)["write_buffer_high_bytes"] == DEFAULT_WRITE_BUFFER_HIGH_BYTES
    for key, bad in (("maxConnections", "0"), ("maxHeaderBytes", "100")):
        with pytest.raises(ConfigError, match=key):
            load_config(BrokerConfig, None, {key: bad})
