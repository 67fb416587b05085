"""The baseline servers: raw uvloop length-prefixed echo servers.

Each frame is a 4-byte big-endian length and that many bytes; every complete frame is written
back exactly as it came. Frames are found by their length fields, but nothing is decoded,
allocated per frame or scheduled. Two ways to write the echoes:

- **batched** (the default, the baseline of the remoting benchmark): the complete frames of
  one read are contiguous, so they go back in one write. This is the floor any framed
  request/response server over uvloop can reach in Python.
- **per frame** (``--per-frame``): one ``transport.write`` per frame, the shape of a naive
  request handler. uvloop sends a write at once when its buffer is empty, so this costs a
  ``write`` syscall per frame (strace shows one per request); the gap between the two rows
  is the price of not coalescing responses.

Run as ``python -m tests.bench.echo_server [--per-frame]``: binds 127.0.0.1 port 0 and
prints ``PORT <n>``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import socket
import struct
import typing

from tests.bench.processes import Started, serve_main

_LENGTH = struct.Struct(">I")  # the frame length, counting the bytes after this field
assert _LENGTH.size == 4


class EchoProtocol(asyncio.Protocol):
    """Echoes complete frames; keeps at most one partial frame between reads.

    Args:
        per_frame: one write per frame instead of one per read.
    """

    __slots__ = ("_partial", "per_frame", "transport")

    def __init__(self, per_frame: bool = False) -> None:
        self.transport: asyncio.Transport | None = None
        self.per_frame = per_frame
        self._partial = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast("asyncio.Transport", transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        assert transport is not None
        end = len(data)
        pos = 0
        out: list[bytes | memoryview] = []
        if self._partial:
            # Finish the frame begun in an earlier read, copying only that frame (joining
            # the whole read onto it would copy every byte once more).
            partial = self._partial
            if len(partial) < 4:
                pos = min(4 - len(partial), end)
                partial += data[:pos]
                if len(partial) < 4:
                    self._partial = partial
                    return
            (length,) = _LENGTH.unpack_from(partial, 0)
            take = 4 + length - len(partial)
            if end - pos < take:
                self._partial = partial + data[pos:]
                return
            out.append(partial + data[pos : pos + take])
            pos += take
            self._partial = b""
        start = pos
        unpack_from = _LENGTH.unpack_from
        if self.per_frame:
            view = memoryview(data)
            write = transport.write
            for frame in out:
                write(frame)
            while end - pos >= 4:
                (length,) = unpack_from(data, pos)
                frame_end = pos + 4 + length
                if frame_end > end:
                    break
                write(view[pos:frame_end])
                pos = frame_end
        else:
            while end - pos >= 4:
                (length,) = unpack_from(data, pos)
                frame_end = pos + 4 + length
                if frame_end > end:
                    break
                pos = frame_end
            if pos > start:
                out.append(data if start == 0 and pos == end else memoryview(data)[start:pos])
            if out:
                transport.writelines(out)
        if pos < end:
            self._partial = data[pos:]


async def start_echo_server(
    host: str = "127.0.0.1", port: int = 0, *, per_frame: bool = False
) -> Started:
    """Bind and serve; returns (port, shutdown)."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        functools.partial(EchoProtocol, per_frame), host, port, backlog=1024
    )
    bound = server.sockets[0].getsockname()[1]

    async def shutdown() -> None:
        server.close()
        await server.wait_closed()

    return bound, shutdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-frame", action="store_true", help="one write per frame")
    args = parser.parse_args()
    serve_main(functools.partial(start_echo_server, per_frame=args.per_frame))


if __name__ == "__main__":
    main()
