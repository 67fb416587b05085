"""The server under test: a ``RemotingServer`` whose one processor echoes the request body.

The processor is ``response_to(request, SUCCESS, body=request.body)`` registered for
``ECHO_CODE``, either as an ``async def`` on a loop lane (``--lane loop``, the default) or as
a plain function on a threaded lane of 2 threads (``--lane threaded``), so the two lane styles
can be compared on the same work.

Run as ``python -m tests.bench.remoting_server [--lane loop|threaded]``: binds 127.0.0.1
port 0 and prints ``PORT <n>``.
"""

from __future__ import annotations

import argparse
import functools

from remoting import (
    Connection,
    Lane,
    ProcessorTable,
    RemotingCommand,
    RemotingServer,
    ResponseCode,
    ServerConfig,
    response_to,
)
from tests.bench.processes import Started, serve_main

ECHO_CODE = 1000  # not a RocketMQ request code, so it cannot collide with a real processor
THREADED_LANE_THREADS = 2


async def echo(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """Loop-lane processor: answer with the request's body."""
    return response_to(request, ResponseCode.SUCCESS, body=request.body)


def echo_blocking(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """Threaded-lane processor: the same work as a plain function."""
    return response_to(request, ResponseCode.SUCCESS, body=request.body)


def echo_table(lane_style: str) -> ProcessorTable:
    """A processor table with the echo processor on a lane of the given style."""
    table = ProcessorTable()
    if lane_style == "loop":
        table.register(ECHO_CODE, echo, Lane("echo"))
    elif lane_style == "threaded":
        table.register(ECHO_CODE, echo_blocking, Lane("echo", threads=THREADED_LANE_THREADS))
    else:
        raise ValueError(f"unknown lane style {lane_style!r}")
    return table


async def start_remoting_server(lane_style: str, host: str = "127.0.0.1") -> Started:
    """Bind and serve; returns (port, shutdown)."""
    server = RemotingServer(
        ServerConfig(host=host, port=0, shutdown_grace_s=1.0),
        echo_table(lane_style),
        name=f"bench-{lane_style}",
    )
    await server.start()
    return server.port, server.shutdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lane", choices=("loop", "threaded"), default="loop")
    args = parser.parse_args()
    serve_main(functools.partial(start_remoting_server, args.lane))


if __name__ == "__main__":
    main()
