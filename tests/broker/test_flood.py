"""Clients that misbehave cannot starve the others, on a real broker: one that floods
requests without reading a single answer, one that sends half a frame and stalls, and one
that connects and sends nothing. Meanwhile a well-behaved client's sends are all answered
(a starvation check with a generous bound, not a speed test)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from broker.broker import Broker
from remoting.client import RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from tests.support import send_ok

FLOOD_REQUESTS = 20_000
BOUND_S = 10.0


async def test_a_flood_a_stall_and_a_silent_client_starve_no_one(
    broker: Broker, client: RemotingClient
) -> None:
    host, port = broker.address.rsplit(":", 1)
    # The flooder asks for every topic's config (an answer of several KiB) over and over
    # and never reads: the broker must stop reading it rather than buffer its answers.
    flood_r, flood_w = await asyncio.open_connection(host, int(port))
    frame = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}).to_bytes()

    async def flood() -> None:
        for _ in range(FLOOD_REQUESTS):
            flood_w.write(frame)
            await flood_w.drain()  # blocks for good once the broker stops reading

    flooding = asyncio.create_task(flood())
    # The staller sends half a frame; the silent one sends nothing.
    stall_r, stall_w = await asyncio.open_connection(host, int(port))
    stall_w.write(frame[: len(frame) // 2])
    await stall_w.drain()
    silent_r, silent_w = await asyncio.open_connection(host, int(port))
    try:
        await asyncio.sleep(0.5)  # let the flood fill every buffer on the way
        started = time.monotonic()
        for n in range(30):
            await send_ok(client, broker.address, "TopicFlood", f"m{n}".encode())
        assert time.monotonic() - started < BOUND_S
        # The flood was contained: the broker stopped reading the flooder (its answers
        # unread) or refused the overflow with SYSTEM_BUSY, rather than queue it all.
        paused = any(c.write_paused for c in broker.server.connections)
        busy = sum(lane.rejected for lane in broker.processors.lanes)
        assert paused or busy > 0, (paused, busy)
    finally:
        flooding.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await flooding
        for w in (flood_w, stall_w, silent_w):
            w.transport.abort()
        del flood_r, stall_r, silent_r
    # After they go, everything is as before.
    await send_ok(client, broker.address, "TopicFlood", b"after")
