"""The fixed client of the remoting benchmark: a minimal uvloop load generator.

It writes pre-encoded frames straight from one buffer and counts responses by their length
prefix, without decoding them, so its cost per request is the same whichever server answers.
Both servers (the raw echo baseline and Aerolite's ``RemotingServer``) are driven by it, and
the differences between their figures are the servers' own.

Frames come from a ``FrameRing``: request ``i`` of a connection is frame ``i % len(ring)``,
so opaques are unique within any ``len(ring)`` consecutive requests, far more than are ever
in flight. Drivers take the connection's running request index and return how far they got,
so one connection can serve many timed runs.

- ``run_pipelined``: keeps ``window`` requests in flight and sends one more for each
  response, until ``max_requests`` are answered or ``max_s`` has passed (then it stops
  sending and waits for the ones in flight).
- ``run_unpipelined``: one request at a time; the round-trip time of each, in ns, from just
  before the write to the callback that sees the response complete.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass

from remoting import RemotingCommand, SerializeType

_LENGTH = struct.Struct(">I")  # frame length, counting the bytes after this field
assert _LENGTH.size == 4

# How long a run may take beyond its own time budget before it is declared stuck.
_STALL_GRACE_S = 10.0


class FrameRing:
    """Request frames encoded once, back to back in one buffer, used round-robin.

    ``views(i, j)`` covers requests ``i .. j-1`` (``j - i <= len(ring)``) as one or two
    zero-copy views, ready for one ``writelines``.
    """

    __slots__ = ("_view", "blob", "offsets")

    def __init__(self, frames: list[bytes]) -> None:
        self.blob = b"".join(frames)
        self._view = memoryview(self.blob)
        offsets = [0]
        for frame in frames:
            offsets.append(offsets[-1] + len(frame))
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def views(self, start: int, stop: int) -> list[memoryview]:
        size = len(self)
        first = start % size
        end = first + (stop - start)
        offsets = self.offsets
        if end <= size:
            return [self._view[offsets[first] : offsets[end]]]
        return [self._view[offsets[first] :], self._view[: offsets[end - size]]]

    def frame(self, index: int) -> bytes:
        return b"".join(self.views(index, index + 1))

    @classmethod
    def echo_requests(
        cls,
        code: int,
        body: bytes,
        count: int,
        *,
        first_opaque: int = 1,
        serialize_type: int = SerializeType.JSON,
    ) -> FrameRing:
        """``count`` real request frames, opaques ``first_opaque ..`` in order."""
        return cls(
            [
                RemotingCommand(
                    code=code, opaque=first_opaque + i, body=body, serialize_type=serialize_type
                ).to_bytes()
                for i in range(count)
            ]
        )


class CountingProtocol(asyncio.Protocol):
    """Counts complete frames by length prefix; never copies or decodes received data.

    ``on_frames(n)`` runs once per read that completes ``n >= 1`` frames. ``short_frames``
    counts frames whose length field is below ``short_frame_bytes``, which lets a caller
    notice error responses (they lack the echoed body).
    """

    def __init__(self, short_frame_bytes: int = 0) -> None:
        self.transport: asyncio.Transport | None = None
        self.on_frames: Callable[[int], None] = _ignore
        self.short_frame_bytes = short_frame_bytes
        self.short_frames = 0
        self.next_request = 0  # running index of the connection's next request
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._head = b""  # 0-3 bytes of a length field split across reads
        self._skip = 0  # bytes still to come of a frame whose length field was read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast("asyncio.Transport", transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        end = len(data)
        pos = 0
        count = 0
        if self._head:
            take = 4 - len(self._head)
            if end < take:
                self._head += data
                return
            (length,) = _LENGTH.unpack(self._head + data[:take])
            self._head = b""
            if length < self.short_frame_bytes:
                self.short_frames += 1
            pos = take
            self._skip = length
        if self._skip:
            if end - pos < self._skip:
                self._skip -= end - pos
                return
            pos += self._skip
            self._skip = 0
            count = 1
        unpack_from = _LENGTH.unpack_from
        short_frame_bytes = self.short_frame_bytes
        short = 0
        while True:
            if end - pos < 4:
                self._head = data[pos:]
                break
            (length,) = unpack_from(data, pos)
            if length < short_frame_bytes:
                short += 1
            next_pos = pos + 4 + length
            if next_pos > end:
                self._skip = next_pos - end
                break
            pos = next_pos
            count += 1
        self.short_frames += short
        if count:
            self.on_frames(count)


def _ignore(count: int) -> None:
    pass


@dataclass(frozen=True, slots=True)
class PipelinedRun:
    """Outcome of one pipelined run."""

    requests: int
    seconds: float

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


async def connect(
    port: int, host: str = "127.0.0.1", short_frame_bytes: int = 0
) -> CountingProtocol:
    loop = asyncio.get_running_loop()
    _transport, proto = await loop.create_connection(
        lambda: CountingProtocol(short_frame_bytes), host, port
    )
    return proto


async def close(proto: CountingProtocol) -> None:
    if proto.transport is not None:
        proto.transport.close()
    async with asyncio.timeout(5.0):
        await proto.lost


async def _wait(proto: CountingProtocol, done: asyncio.Future[None], max_s: float) -> None:
    try:
        async with asyncio.timeout(max_s + _STALL_GRACE_S):
            await asyncio.wait([done, proto.lost], return_when=asyncio.FIRST_COMPLETED)
    finally:
        proto.on_frames = _ignore
    if not done.done():
        raise RuntimeError("connection lost in the middle of a run")


async def run_pipelined(
    proto: CountingProtocol, ring: FrameRing, *, max_requests: int, window: int, max_s: float
) -> PipelinedRun:
    """Keep ``window`` requests in flight; see the module docstring."""
    loop = asyncio.get_running_loop()
    transport = proto.transport
    assert transport is not None
    window = min(window, len(ring), max_requests)
    start = proto.next_request
    stop = start + max_requests
    sent = start + window
    received = 0
    done: asyncio.Future[None] = loop.create_future()
    deadline = time.perf_counter() + max_s
    last_response = 0.0

    def on_frames(count: int) -> None:
        nonlocal sent, received, last_response, stop
        received += count
        last_response = time.perf_counter()
        if last_response >= deadline:
            stop = sent  # time is up: no more sends, wait for the ones in flight
        if sent < stop:
            upto = min(sent + count, stop)
            transport.writelines(ring.views(sent, upto))
            sent = upto
        elif received >= sent - start and not done.done():
            done.set_result(None)

    proto.on_frames = on_frames
    t0 = time.perf_counter()
    transport.writelines(ring.views(start, sent))
    await _wait(proto, done, max_s)
    proto.next_request = sent
    return PipelinedRun(received, last_response - t0)


async def run_unpipelined(
    proto: CountingProtocol, ring: FrameRing, *, requests: int, max_s: float
) -> list[int]:
    """Send one request at a time; return each round-trip time in ns."""
    loop = asyncio.get_running_loop()
    transport = proto.transport
    assert transport is not None
    stop = proto.next_request + requests
    done: asyncio.Future[None] = loop.create_future()
    latencies: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(max_s * 1e9)
    index = proto.next_request
    sent_at = 0

    def on_frames(count: int) -> None:
        nonlocal index, sent_at
        now = clock()
        latencies.append(now - sent_at)
        index += 1
        if index < stop and now < deadline:
            sent_at = clock()
            transport.writelines(ring.views(index, index + 1))
        elif not done.done():
            done.set_result(None)

    proto.on_frames = on_frames
    sent_at = clock()
    transport.writelines(ring.views(index, index + 1))
    await _wait(proto, done, max_s)
    proto.next_request = index
    return latencies
