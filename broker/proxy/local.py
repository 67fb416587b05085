"""The in-process channel between the gRPC front end and the broker's processors.

RocketMQ counterpart: the proxy's local mode — ``LocalMessageService`` builds a
``RemotingCommand`` and calls the broker's processor with a ``SimpleChannel`` whose writes
complete a future; ``GrpcClientChannel`` is the channel a gRPC client is registered with,
so that what the broker sends a client (a transaction check) goes out on its Telemetry
stream instead of a socket.

``LocalChannel`` is a ``Connection`` without a transport: a processor sees an ordinary
connection (its peer, its park and in-flight counters), a response it writes at once or
later (a parked pop, a send answered once its topic is routed) resolves the caller's
future, and a request the broker sends (CHECK_TRANSACTION_STATE, …) goes to ``on_command``.
No loopback socket, no frame encoding.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from remoting.command import RemotingCommand
from remoting.connection import SLOT_IN_FLIGHT, Connection, Refusal

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]
CommandSink = Callable[[RemotingCommand], bool]


def _no_request(_conn: Connection, _request: RemotingCommand) -> None:
    """A local channel reads nothing: requests reach processors through ``call``."""


class LocalChannel(Connection):
    """One gRPC client (or one call) as the processors see it.

    Args:
        peer: the client's address, ``host:port`` (BORNHOST of what it sends).
        on_command: takes the requests the broker sends this client; False when it cannot
            (no Telemetry stream open), which the broker's caller sees as a closed channel.
        on_close: called once when the client goes (termination, stream end, expiry).
    """

    def __init__(
        self,
        peer: str,
        on_command: CommandSink | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        super().__init__(_no_request, on_close)
        self.peer = peer
        self.on_command = on_command
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}

    async def call(self, handler: Handler, request: RemotingCommand) -> RemotingCommand:
        """Run ``handler`` on ``request`` and return its response, whether the handler
        returns it or writes it later (``dispatch.send_response``)."""
        request.slot = SLOT_IN_FLIGHT
        self.in_flight += 1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._waiting[request.opaque] = fut
        try:
            response = await handler(self, request)
            if response is not None:
                self.request_done(request)
                return response
            return await fut
        finally:
            self._waiting.pop(request.opaque, None)
            if request.slot:
                self.request_done(request)  # the call was cancelled while parked

    def send(self, cmd: RemotingCommand) -> bool:
        if self.closed:
            return False
        if cmd.is_response:
            fut = self._waiting.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            return True  # a call given up (its client went) takes no answer: dropped
        if self.on_command is None:
            return False
        return self.on_command(cmd)

    def answer(self, response: RemotingCommand) -> None:
        """The client's answer to a request the broker sent it (``invoke``), come back by
        another way than a socket: it resolves the request's future."""
        self._on_response(response)

    def flush(self) -> None:
        """Nothing is corked: responses resolve their futures as they are written."""

    def close(self) -> None:
        if self.closed:
            return
        self.connection_lost(None)

    def abort(self, reason: str, refusal: Refusal | None = None) -> None:
        self.close()
