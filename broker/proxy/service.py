"""The broker's RocketMQ 5 front end: the MessagingService RPCs and their listener.

RocketMQ counterpart: ``proxy/grpc/v2/GrpcMessagingApplication`` +
``DefaultGrpcMessagingActivity`` with the proxy in local mode
(``ServiceManagerFactory.createForLocalMode``): every RPC is served in the broker's own
process by its own processors. A business refusal is the response's ``status``; an
unexpected failure is logged and answered INTERNAL_SERVER_ERROR, never a dropped call.

Served: QueryRoute, Heartbeat, Telemetry, NotifyClientTermination, SendMessage,
EndTransaction, QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue. The Pull/Offset RPCs (no official 5.x client calls
them) answer NOT_IMPLEMENTED as a status, as does the lite-topic RPC.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog
from google.protobuf.message import Message
from grpc import aio

from broker.acl import PlainAcl
from broker.metrics import bind_error
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from broker.proxy.clients import ClientsBroker, GrpcClients
from broker.proxy.consume import ConsumeBroker, Consuming, change_one
from broker.proxy.context import require_client_id
from broker.proxy.local import LocalChannel
from broker.proxy.produce import ProduceBroker, Producing
from broker.proxy.receipts import Handle
from broker.proxy.renew import Renewals
from broker.proxy.route import RouteBroker, Routing
from broker.proxy.server import GrpcServer, Method
from broker.proxy.status import ProxyError, status
from broker.proxy.tls import h2_context, self_signed
from remoting.lifecycle import TaskGroup
from remoting.tls import TlsMode

log = structlog.get_logger(__name__)

R = TypeVar("R", bound=Message)
Context = aio.ServicerContext[Any, Any]


class ProxyBroker(ClientsBroker, ProduceBroker, ConsumeBroker, RouteBroker, Protocol):
    """Everything the gRPC front end touches of the broker."""

    @property
    def acl(self) -> PlainAcl | None: ...


# Calls answered, by RPC and the status code they were answered with (the metrics'
# rocketmq_grpc_calls_total).
CallCounts = collections.Counter[tuple[str, str]]


def _unary(
    name: str, fn: Callable[[Any, Context], Awaitable[R]], response: type[R], calls: CallCounts
) -> Callable[[Any, Context], Awaitable[R]]:
    async def behaviour(request: Any, context: Context) -> R:
        try:
            answer = await fn(request, context)
        except ProxyError as exc:
            answer = response(status=status(exc.code, exc.message))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("grpc_call_failed", rpc=name)
            answer = response(
                status=status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            )
        calls[name, pb.Code.Name(answer.status.code)] += 1  # type: ignore[attr-defined]
        return answer

    return behaviour


def _counted_receive(
    fn: Callable[[Any, Context], AsyncIterator[rpc.ReceiveMessageResponse]], calls: CallCounts
) -> Callable[[Any, Context], AsyncIterator[rpc.ReceiveMessageResponse]]:
    async def behaviour(
        request: Any, context: Context
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        async for answer in fn(request, context):
            if answer.HasField("status"):
                calls["ReceiveMessage", pb.Code.Name(answer.status.code)] += 1
            yield answer

    return behaviour


def _telemetry(
    fn: Callable[
        [AsyncIterator[rpc.TelemetryCommand], Context], AsyncIterator[rpc.TelemetryCommand]
    ],
) -> Callable[[AsyncIterator[rpc.TelemetryCommand], Context], AsyncIterator[rpc.TelemetryCommand]]:
    async def behaviour(
        requests: AsyncIterator[rpc.TelemetryCommand], context: Context
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        try:
            async for command in fn(requests, context):
                yield command
        except ProxyError as exc:
            yield rpc.TelemetryCommand(status=status(exc.code, exc.message))

    return behaviour


def _identified(method: Method, calls: CallCounts) -> Method:
    """``method`` refusing a call without ``x-mq-client-id`` before anything of it runs, as
    the proxy's ``validateContext`` does for every RPC: CLIENT_ID_REQUIRED, the answer (or a
    stream's one answer) carrying the status."""
    inner = method.behaviour

    def refusal(context: Context) -> Message | None:
        try:
            require_client_id(context)
        except ProxyError as exc:
            calls[method.name, pb.Code.Name(exc.code)] += 1
            return method.response(status=status(exc.code, exc.message))
        return None

    async def unary(request: Any, context: Context) -> Message:
        refused = refusal(context)
        return refused if refused is not None else await inner(request, context)

    async def stream(request: Any, context: Context) -> AsyncIterator[Message]:
        refused = refusal(context)
        if refused is not None:
            yield refused
            return
        async for answer in inner(request, context):
            yield answer

    return dataclasses.replace(method, behaviour=unary if method.kind == "unary" else stream)


def _not_served(name: str, response: type[R]) -> Callable[[Any, Context], Awaitable[R]]:
    async def behaviour(request: Any, context: Context) -> R:
        return response(status=status(pb.NOT_IMPLEMENTED, f"{name} is not served by this broker"))

    return behaviour


# No official 5.x client calls these (the Pull/Offset RPCs; lite topics are newer than
# every client release): a status says so.
NOT_SERVED = ("UpdateOffset", "GetOffset", "QueryOffset", "RecallMessage", "SyncLiteSubscription")


def _response_of(name: str) -> type[Message]:
    response: type[Message] = getattr(rpc, f"{name}Response")
    return response


class GrpcService:
    """The front end as one broker stage: ``start`` binds ``grpcListenPort``."""

    def __init__(self, broker: ProxyBroker) -> None:
        self.broker = broker
        self.clients = GrpcClients(broker, on_removed=self._client_removed)
        self.renewals = Renewals(self._change)
        self.producing = Producing(broker, self.clients, self.renewals)
        self.consuming = Consuming(broker, self.clients, self.renewals)
        self._tasks = TaskGroup("grpc")
        self.routing = Routing(broker, lambda: self.port)
        self.server: GrpcServer | None = None
        self.calls: CallCounts = collections.Counter()

    @property
    def port(self) -> int:
        """The port served (0 while not serving)."""
        return self.server.port if self.server is not None else 0

    def client_kinds(self) -> dict[str, int]:
        """How many clients of each kind (PRODUCER, SIMPLE_CONSUMER, …) are known."""
        kinds = collections.Counter(
            pb.ClientType.Name(c.client_type) for c in self.clients.clients.values()
        )
        return dict(kinds)

    async def _change(
        self, channel: LocalChannel, group: str, topic: str, handle: Handle, invisible_ms: int
    ) -> Handle | None:
        changed = await change_one(
            self.broker, channel, group, topic, handle, invisible_ms=invisible_ms
        )
        return changed if isinstance(changed, Handle) else None

    def _client_removed(self, client_id: str, channel: LocalChannel) -> None:
        """A client went: release what it held for renewal (another consumer gets it),
        then close its channel (its parked receives end)."""

        async def release() -> None:
            try:
                await self.renewals.client_gone(client_id)
            finally:
                channel.close()

        self._tasks.spawn(release(), name="grpc-release")

    def methods(self) -> list[Method]:
        """Every RPC of MessagingService with what serves it."""
        c, p, q, r = self.clients, self.producing, self.consuming, self.routing
        unary: list[tuple[str, Callable[[Any, Context], Awaitable[Any]], type[Message]]] = [
            ("QueryRoute", r.query_route, rpc.QueryRouteRequest),
            ("Heartbeat", c.heartbeat, rpc.HeartbeatRequest),
            ("SendMessage", p.send_message, rpc.SendMessageRequest),
            ("QueryAssignment", r.query_assignment, rpc.QueryAssignmentRequest),
            ("AckMessage", q.ack_message, rpc.AckMessageRequest),
            (
                "ForwardMessageToDeadLetterQueue",
                p.forward_to_dlq,
                rpc.ForwardMessageToDeadLetterQueueRequest,
            ),
            ("EndTransaction", p.end_transaction, rpc.EndTransactionRequest),
            (
                "NotifyClientTermination",
                c.notify_client_termination,
                rpc.NotifyClientTerminationRequest,
            ),
            (
                "ChangeInvisibleDuration",
                q.change_invisible_duration,
                rpc.ChangeInvisibleDurationRequest,
            ),
        ]
        methods = [
            Method(
                name,
                "unary",
                req,
                _response_of(name),
                _unary(name, fn, _response_of(name), self.calls),
            )
            for name, fn, req in unary
        ]
        methods.append(
            Method(
                "ReceiveMessage",
                "server_stream",
                rpc.ReceiveMessageRequest,
                rpc.ReceiveMessageResponse,
                _counted_receive(q.receive_message, self.calls),
            )
        )
        methods.append(
            Method(
                "Telemetry",
                "bidi",
                rpc.TelemetryCommand,
                rpc.TelemetryCommand,
                _telemetry(c.telemetry),
            )
        )
        methods = [_identified(m, self.calls) for m in methods]
        # Not served: the same answer to anyone.
        for name in NOT_SERVED:
            request, response = getattr(rpc, f"{name}Request"), _response_of(name)
            methods.append(Method(name, "unary", request, response, _not_served(name, response)))
        return methods

    async def start(self) -> None:
        config = self.broker.config
        if not config.grpc_enable:
            return
        server = GrpcServer(
            self.methods(),
            config.bind_address,
            config.grpc_port,
            max_inbound_bytes=4 * self.broker.store.config.max_message_bytes + (1 << 20),
            **self._tls(),
        )
        try:
            await server.start()
        except BaseException as exc:
            if isinstance(exc, OSError):
                raise bind_error(
                    "grpcListenPort", config.bind_address, config.grpc_port, exc
                ) from None
            raise
        self.server = server
        self.renewals.loop.start()

    def _tls(self) -> dict[str, Any]:
        """The port's TLS, by tlsServerMode: enforcing is gRPC's own TLS with the broker's
        certificate; permissive takes both with it; disabled takes both too, with a
        certificate made now, because 5.x clients (Java, Go, C#, Node) turn TLS on by
        default and RocketMQ's proxy answers them so."""
        config = self.broker.config
        mode = config.tls_server_mode
        if mode is TlsMode.ENFORCING:
            assert config.tls_server_cert_path is not None
            assert config.tls_server_key_path is not None
            trust = config.tls_server_trust_cert_path
            return {
                "direct_tls": (
                    config.tls_server_cert_path.read_bytes(),
                    config.tls_server_key_path.read_bytes(),
                    trust.read_bytes() if trust is not None else None,
                )
            }
        if mode is TlsMode.PERMISSIVE:
            assert config.tls_server_cert_path is not None
            assert config.tls_server_key_path is not None
            context = h2_context(
                config.tls_server_cert_path,
                config.tls_server_key_path,
                config.tls_server_trust_cert_path,
            )
            return {"relay_context": context}
        hosts = ["localhost", "127.0.0.1", config.bind_address]
        if config.broker_ip1:
            hosts.append(config.broker_ip1)
        # The context holds the key once loaded, so the files go at once: a broker killed
        # with -9 leaves no key (nor a directory) behind in the temp dir.
        with tempfile.TemporaryDirectory(prefix="aerolite-grpc-") as directory:
            files = self_signed(Path(directory), hosts)
            return {"relay_context": h2_context(files.cert, files.key)}

    async def stop(self) -> None:
        """Stop accepting calls (those in progress get a second), stop renewing, forget the
        clients. What they held becomes visible when its invisible time is up."""
        if self.server is not None:
            await self.server.stop(grace_s=1.0)
            self.server = None
        await self.renewals.loop.stop()
        self.renewals.held.clear()
        for client_id in list(self.clients.clients):
            self.clients.remove(client_id, "broker_stopping")
        await self._tasks.close(timeout_s=2.0)
        await self.clients.tasks.close(timeout_s=2.0)
