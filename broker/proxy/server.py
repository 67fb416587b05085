"""The gRPC listener of RocketMQ 5 clients: ``apache.rocketmq.v2.MessagingService`` served
by grpc.aio on the broker's own event loop.

RocketMQ counterpart: ``proxy/grpc/GrpcServer`` + ``GrpcServerBuilder`` (port
``grpcServerPort``, 8081) with ``GrpcMessagingApplication`` as the service. Each method is
registered by hand (no generated ``_pb2_grpc`` stubs) and parses its own requests: bytes
that are not valid protobuf end that call with ``INTERNAL``, as RocketMQ's proxy answers
them, and never reach the RPC's code.

TLS: with ``direct_tls`` (tlsServerMode enforcing) gRPC serves TLS only, its own. With a
``relay_context`` one port takes TLS and plaintext alike, as the proxy's
``ProxyAndTlsProtocolNegotiator`` does: the remoting listeners' sniffing listener accepts,
ends TLS itself (ALPN h2), and relays each connection's bytes to gRPC's plaintext port on
loopback. gRPC then sees the relay's address as its peer; ``RELAYED_PEERS`` maps that
(the relay's local port) back to the client's, so born hosts and ACL address rules see the
real client.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.protobuf.message import DecodeError, Message
from grpc import aio

from remoting.listener import Listener
from remoting.tls import TlsMode

log = structlog.get_logger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
# What one connection may send at once (the proxy's grpcMaxInboundMessageSize is 130 MB).
MIN_INBOUND_BYTES = 4 << 20
MAX_CONCURRENT_RPCS = 20_000
# The relay's local port on loopback → the client it carries ("host:port").
RELAYED_PEERS: dict[int, str] = {}


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC: its name, shape, message classes and behaviour."""

    name: str
    kind: str  # "unary", "server_stream" or "bidi"
    request: type[Message]
    response: type[Message]
    behaviour: Callable[..., Any]


def _handler(method: Method) -> grpc.RpcMethodHandler[Any, Any]:
    """The method's handler: requests arrive as bytes and are parsed here, so that bytes
    that are no such message end the call with INTERNAL, as RocketMQ's proxy (grpc-java)
    answers them (grpc.aio's own deserialiser would answer UNKNOWN)."""
    dump = method.response.SerializeToString
    parse = _parser(method.request)
    behaviour = method.behaviour
    if method.kind == "unary":

        async def unary(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Any:
            return await behaviour(await parse(raw, context), context)

        return grpc.unary_unary_rpc_method_handler(unary, response_serializer=dump)
    if method.kind == "server_stream":

        async def server_stream(
            raw: bytes, context: aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async for answer in behaviour(await parse(raw, context), context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(server_stream, response_serializer=dump)

    async def bidi(
        raws: AsyncIterator[bytes], context: aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        async def requests() -> AsyncIterator[Message]:
            async for raw in raws:
                yield await parse(raw, context)

        async for answer in behaviour(requests(), context):
            yield answer

    return grpc.stream_stream_rpc_method_handler(bidi, response_serializer=dump)


def _parser(
    cls: type[Message],
) -> Callable[[bytes, aio.ServicerContext[Any, Any]], Awaitable[Message]]:
    async def parse(raw: bytes, context: aio.ServicerContext[Any, Any]) -> Message:
        try:
            return cls.FromString(raw)
        except DecodeError as exc:
            await context.abort(
                grpc.StatusCode.INTERNAL, f"not a {cls.DESCRIPTOR.full_name}: {exc}"
            )
            raise  # abort raises; this keeps type checkers sure

    return parse


class GrpcServer:
    """Binds ``host:port`` and serves ``methods``; ``port`` is the real port once started.

    Args:
        direct_tls: (certificate chain, private key, trusted client CAs or None): gRPC's
            own TLS, and nothing else, on the port.
        relay_context: TLS and plaintext on the port, TLS ended with this context.
        neither: plaintext only.
    """

    def __init__(
        self,
        methods: list[Method],
        host: str,
        port: int,
        *,
        max_inbound_bytes: int,
        direct_tls: tuple[bytes, bytes, bytes | None] | None = None,
        relay_context: ssl.SSLContext | None = None,
    ) -> None:
        self._methods = methods
        self.host = host
        self.requested_port = port
        self.port = 0
        self.inner_port = 0  # gRPC's own loopback port behind the relay
        self._max_inbound = max(max_inbound_bytes, MIN_INBOUND_BYTES)
        self._direct_tls = direct_tls
        self._relay_context = relay_context
        self._server: aio.Server | None = None
        self._front: Listener | None = None

    async def start(self) -> int:
        """Bind and serve; the port.

        Raises:
            OSError: the port cannot be bound.
        """
        server = aio.server(
            # Calls at once, parked receives included: past it a call is refused with
            # RESOURCE_EXHAUSTED rather than queued without bound.
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
            options=[
                ("grpc.max_receive_message_length", self._max_inbound),
                ("grpc.max_send_message_length", self._max_inbound),
                ("grpc.so_reuseport", 0),
                # A client that keeps pinging an idle stream is not cut off (the Java
                # client pings every 30 s; grpc's default minimum is 5 min).
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.http2.max_ping_strikes", 0),
                # Calls the core queues until our loop takes them: past gRPC's defaults
                # (1,000 soft, 3,000 hard) it cancels some at random, which a burst of a
                # few thousand async sends reached; the bound is maximum_concurrent_rpcs.
                ("grpc.server.max_pending_requests", MAX_CONCURRENT_RPCS),
                ("grpc.server.max_pending_requests_hard_limit", 2 * MAX_CONCURRENT_RPCS),
            ],
        )
        handlers = {m.name: _handler(m) for m in self._methods}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self._server = server
        try:
            self.port = await self._bind(server)
            await server.start()
        except RuntimeError as exc:  # grpc's "Failed to bind to address"
            await self.stop()
            raise OSError(errno.EADDRINUSE, str(exc)) from None
        except BaseException:
            await self.stop()
            raise
        log.info(
            "grpc_listening",
            address=f"{self.host}:{self.port}",
            tls="relay" if self._relay_context else "direct" if self._direct_tls else "none",
        )
        return self.port

    async def _bind(self, server: aio.Server) -> int:
        address = f"{_host(self.host)}:{self.requested_port}"
        if self._direct_tls is not None:
            chain, key, trust = self._direct_tls
            creds = grpc.ssl_server_credentials(
                [(key, chain)], root_certificates=trust, require_client_auth=trust is not None
            )
            return _bound(server.add_secure_port(address, creds), self)
        if self._relay_context is None:
            return _bound(server.add_insecure_port(address), self)
        # The public port first: a taken one must fail before gRPC binds anything (an
        # aio server never started keeps what it bound).
        inner = _InnerPort()
        front = Listener(
            lambda: _ClientSide(inner.port),
            self.host,
            self.requested_port,
            tls_mode=TlsMode.PERMISSIVE,
            ssl_context=self._relay_context,
            name="grpc",
        )
        port = await front.start(serve=False)
        self._front = front
        self.inner_port = inner.port = _bound(server.add_insecure_port("127.0.0.1:0"), self)
        await front.serve()
        return port

    async def stop(self, grace_s: float | None = 1.0) -> None:
        """Stop accepting, give calls in progress ``grace_s`` to end, then cancel them."""
        if self._front is not None:
            self._front.close()
            await self._front.wait_closed()
            self._front = None
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bound(port: int, server: GrpcServer) -> int:
    if port == 0:  # grpc says "could not bind" by returning 0, or raising RuntimeError
        raise OSError(errno.EADDRINUSE, f"cannot bind {server.host}:{server.requested_port}")
    return port


def _address(peer: Any) -> str:
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _InnerPort:
    """gRPC's loopback port, known once bound (after the relay's listener is)."""

    port = 0


class _ClientSide(asyncio.Protocol):
    """A client's connection on the relayed port (TLS already ended by the listener): its
    bytes go to gRPC's loopback port and back, each side's backpressure pausing the
    other's reading."""

    def __init__(self, inner_port: int) -> None:
        self._inner_port = inner_port
        self.transport: asyncio.Transport | None = None
        self.grpc_side: asyncio.Transport | None = None
        self._local_port = 0
        self._closed = False
        # Bytes that came before gRPC's side was connected (a transport may deliver what
        # it read with the connection, pause or not).
        self._early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer = _address(transport.get_extra_info("peername") or ("?", 0))
        transport.pause_reading()  # type: ignore[attr-defined]
        asyncio.get_running_loop().create_task(self._connect(), name="grpc-relay-connect")

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_connection(
                lambda: _GrpcSide(self), "127.0.0.1", self._inner_port
            )
        except OSError:
            self.close()
            return
        if self._closed:
            transport.close()
            return
        self.grpc_side = transport
        self._local_port = int(transport.get_extra_info("sockname")[1])
        RELAYED_PEERS[self._local_port] = self.peer
        if self._early:
            transport.writelines(self._early)
            self._early = []
        assert self.transport is not None
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.grpc_side is not None:
            self.grpc_side.write(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool | None:
        if self.grpc_side is not None and self.grpc_side.can_write_eof():
            self.grpc_side.write_eof()
            return True
        return None

    def pause_writing(self) -> None:
        if self.grpc_side is not None:
            self.grpc_side.pause_reading()

    def resume_writing(self) -> None:
        if self.grpc_side is not None:
            self.grpc_side.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        RELAYED_PEERS.pop(self._local_port, None)
        for transport in (self.transport, self.grpc_side):
            if transport is not None:
                transport.close()


class _GrpcSide(asyncio.Protocol):
    """The relay's connection to gRPC's loopback port, for one client."""

    def __init__(self, client: _ClientSide) -> None:
        self._client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._client.transport is not None:
            self._client.transport.write(data)

    def pause_writing(self) -> None:
        if self._client.transport is not None:
            self._client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._client.transport is not None:
            self._client.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._client.close()
