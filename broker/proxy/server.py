"""The gRPC listener of RocketMQ 5 clients: ``apache.rocketmq.v2.MessagingService`` served
by grpc.aio on the broker's own event loop.

RocketMQ counterpart: ``proxy/grpc/GrpcServer`` + ``GrpcServerBuilder`` (port
``grpcServerPort``, 8081) with ``GrpcMessagingApplication`` as the service. Each method is
registered by hand with the generated message classes' parsers (no generated ``_pb2_grpc``
stubs): a request that is not valid protobuf fails in grpc's own deserialisation, with
``INTERNAL`` for that call only, and never reaches our code.

TLS follows ``tlsServerMode``: DISABLED serves plaintext; ENFORCING serves TLS only, with
the broker's certificate (and client certificates when a trust path is set); PERMISSIVE
(both on one port, as the proxy's ``TlsModeHandler`` does) puts the remoting listeners'
sniffing listener in front and relays each connection, TLS terminated by it, to gRPC on a
Unix socket of its own. (gRPC then sees no client address: a message's born host is the
client's own word, and ACL's whiteRemoteAddress cannot apply to those calls.)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.protobuf.message import Message
from grpc import aio

from remoting.listener import Listener, stream_listener
from remoting.tls import TlsMode

log = structlog.get_logger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
# What one connection may send at once (the proxy's grpcMaxInboundMessageSize is 130 MB).
MIN_INBOUND_BYTES = 4 << 20
RELAY_CHUNK = 256 << 10


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC: its name, shape, message classes and behaviour."""

    name: str
    kind: str  # "unary", "server_stream" or "bidi"
    request: type[Message]
    response: type[Message]
    behaviour: Callable[..., Any]


def _handler(method: Method) -> grpc.RpcMethodHandler[Any, Any]:
    parse = method.request.FromString
    dump = method.response.SerializeToString
    if method.kind == "unary":
        return grpc.unary_unary_rpc_method_handler(
            method.behaviour, request_deserializer=parse, response_serializer=dump
        )
    if method.kind == "server_stream":
        return grpc.unary_stream_rpc_method_handler(
            method.behaviour, request_deserializer=parse, response_serializer=dump
        )
    return grpc.stream_stream_rpc_method_handler(
        method.behaviour, request_deserializer=parse, response_serializer=dump
    )


class GrpcServer:
    """Binds ``host:port`` and serves ``methods``; ``port`` is the real port once started."""

    def __init__(
        self,
        methods: list[Method],
        host: str,
        port: int,
        *,
        max_inbound_bytes: int,
        tls_mode: TlsMode = TlsMode.DISABLED,
        cert_chain: bytes | None = None,
        private_key: bytes | None = None,
        trust_certs: bytes | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._methods = methods
        self.host = host
        self.requested_port = port
        self.port = 0
        self._max_inbound = max(max_inbound_bytes, MIN_INBOUND_BYTES)
        self._tls_mode = tls_mode
        self._cert_chain = cert_chain
        self._private_key = private_key
        self._trust_certs = trust_certs
        self._ssl_context = ssl_context
        self._server: aio.Server | None = None
        self._front: Listener | None = None
        self._inner_dir: str | None = None
        self._inner_path = ""

    async def start(self) -> int:
        """Bind and serve; the port.

        Raises:
            OSError: the port cannot be bound.
        """
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_inbound),
                ("grpc.max_send_message_length", self._max_inbound),
                ("grpc.so_reuseport", 0),
                # A client that keeps pinging an idle stream is not cut off (the Java
                # client pings every 30 s; grpc's default minimum is 5 min).
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.http2.max_ping_strikes", 0),
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
        log.info("grpc_listening", address=f"{self.host}:{self.port}", tls=str(self._tls_mode))
        return self.port

    async def _bind(self, server: aio.Server) -> int:
        mode = self._tls_mode
        if mode is TlsMode.ENFORCING:
            assert self._cert_chain is not None and self._private_key is not None
            creds = grpc.ssl_server_credentials(
                [(self._private_key, self._cert_chain)],
                root_certificates=self._trust_certs,
                require_client_auth=self._trust_certs is not None,
            )
            return _bound(
                server.add_secure_port(f"{_host(self.host)}:{self.requested_port}", creds), self
            )
        if mode is TlsMode.PERMISSIVE:
            # gRPC serves plaintext on a Unix socket of its own (no second TCP port to
            # guard); the sniffing listener is the public one and relays there.
            self._inner_dir = tempfile.mkdtemp(prefix="aerolite-grpc-")
            self._inner_path = os.path.join(self._inner_dir, "grpc.sock")
            _bound(server.add_insecure_port(f"unix:{self._inner_path}"), self)
            front = stream_listener(
                self._relay,
                self.host,
                self.requested_port,
                tls_mode=mode,
                ssl_context=self._ssl_context,
                name="grpc",
            )
            port = await front.start()
            self._front = front
            return port
        return _bound(server.add_insecure_port(f"{_host(self.host)}:{self.requested_port}"), self)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection of the permissive port, carried to the gRPC port."""
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self._inner_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    async def stop(self, grace_s: float | None = 1.0) -> None:
        """Stop accepting, give calls in progress ``grace_s`` to end, then cancel them."""
        if self._front is not None:
            self._front.close()
            await self._front.wait_closed()
            self._front = None
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
        if self._inner_dir is not None:
            shutil.rmtree(self._inner_dir, ignore_errors=True)
            self._inner_dir = None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bound(port: int, server: GrpcServer) -> int:
    if port == 0:  # grpc says "could not bind" by returning 0, or raising RuntimeError
        raise OSError(errno.EADDRINUSE, f"cannot bind {server.host}:{server.requested_port}")
    return port


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
