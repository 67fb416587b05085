"""A raw RocketMQ 5 client for protocol tests: ``apache.rocketmq.v2.MessagingService``
driven with grpc.aio and the broker's own generated message classes, nothing else.

Every call carries the metadata a real 5.x client sends (``x-mq-client-id``,
``x-mq-language``, ``x-mq-protocol``, ``x-mq-client-version``, ``x-mq-date-time``, and
``authorization`` when the client has credentials), so what a test changes is only what it
means to change. ``RawClient.telemetry`` opens the Telemetry stream, sends the client's
settings and reads the reply; leaving it half-closes the stream and reads it to its end, as
a client that shuts down cleanly does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from grpc import aio

from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc

SERVICE = "apache.rocketmq.v2.MessagingService"
LANGUAGE = "PYTHON"
PROTOCOL = "GRPC_V2"
CLIENT_VERSION = "5.0.3"
ALGORITHM = "MQv2-HMAC-SHA1"
CALL_TIMEOUT_S = 10.0

# The end of a stream's reads (missing from grpc-stubs 1.53).
EOF: object = aio.EOF  # type: ignore[attr-defined]

R = TypeVar("R", bound=Message)
Metadata = tuple[tuple[str, str], ...]


def path(method: str) -> str:
    return f"/{SERVICE}/{method}"


def date_time() -> str:
    """``x-mq-date-time`` as the clients write it: ``yyyyMMdd'T'HHmmss'Z'``."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def signature(secret: str, date: str) -> str:
    """The clients' signature: upper-case hex HMAC-SHA1 of the date under the secret key."""
    return hmac.new(secret.encode(), date.encode(), hashlib.sha1).hexdigest().upper()


def authorization(access_key: str, sig: str) -> str:
    return f"{ALGORITHM} Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={sig}"


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key: str
    secret_key: str


def millis_ts(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def seconds(s: float) -> Duration:
    whole = int(s)
    return Duration(seconds=whole, nanos=round((s - whole) * 1e9))


def new_message_id() -> str:
    return uuid.uuid4().hex.upper()


def message(
    topic: str,
    body: bytes,
    *,
    tag: str | None = None,
    keys: Sequence[str] = (),
    message_id: str | None = None,
    properties: Mapping[str, str] | None = None,
) -> pb.Message:
    """A NORMAL message as a 5.x producer builds it."""
    sp = pb.SystemProperties(
        message_id=new_message_id() if message_id is None else message_id,
        body_encoding=pb.IDENTITY,
        message_type=pb.NORMAL,
        born_timestamp=millis_ts(int(time.time() * 1000)),
        born_host="127.0.0.1",
        keys=list(keys),
    )
    if tag is not None:
        sp.tag = tag
    return pb.Message(
        topic=pb.Resource(name=topic),
        user_properties=dict(properties or {}),
        system_properties=sp,
        body=body,
    )


def producer_settings(*topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.PRODUCER,
        request_timeout=seconds(3),
        user_agent=pb.UA(
            language=pb.PYTHON, version=CLIENT_VERSION, platform="linux", hostname="t"
        ),
        publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]),
    )


def consumer_settings(group: str, *topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.SIMPLE_CONSUMER,
        request_timeout=seconds(3),
        user_agent=pb.UA(
            language=pb.PYTHON, version=CLIENT_VERSION, platform="linux", hostname="t"
        ),
        subscription=pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name=t),
                    expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                )
                for t in topics
            ],
        ),
    )


def receive_request(
    group: str,
    topic: str,
    *,
    invisible_s: float = 10,
    polling_s: float | None = 5,
    batch: int = 32,
) -> rpc.ReceiveMessageRequest:
    request = rpc.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=seconds(invisible_s),
        auto_renew=False,
    )
    if polling_s is not None:
        request.long_polling_timeout.CopyFrom(seconds(polling_s))
    return request


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _identity(data: bytes) -> bytes:
    return data


class Telemetry:
    """An open Telemetry stream and the settings reply it got."""

    def __init__(self, call: aio.StreamStreamCall[Any, Any], reply: rpc.TelemetryCommand) -> None:
        self.call = call
        self.reply = reply

    async def read(self, timeout_s: float = 5.0) -> rpc.TelemetryCommand | None:
        """The next command from the server; None at the stream's end."""
        async with asyncio.timeout(timeout_s):
            got = await self.call.read()
        if got is EOF:
            return None
        assert isinstance(got, rpc.TelemetryCommand)
        return got


class RawClient:
    """One 5.x client (one ``x-mq-client-id``) on its own channel to ``127.0.0.1:port``."""

    def __init__(
        self,
        port: int,
        client_id: str | None = None,
        *,
        credentials: Credentials | None = None,
    ) -> None:
        self.port = port
        self.client_id = client_id or f"raw-{uuid.uuid4().hex[:12]}"
        self.credentials = credentials
        self.channel = aio.insecure_channel(f"127.0.0.1:{port}")

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close(None)

    def metadata(self, *, sign: bool = True, **replace: str) -> Metadata:
        """The headers of one call: the client's own, signed if it has credentials
        (``sign=False``: no ``authorization``); ``replace`` sets any of them by name
        (``x_mq_client_id="…"``, ``authorization="…"``)."""
        date = date_time()
        out = {
            "x-mq-client-id": self.client_id,
            "x-mq-language": LANGUAGE,
            "x-mq-protocol": PROTOCOL,
            "x-mq-client-version": CLIENT_VERSION,
            "x-mq-date-time": date,
            "x-mq-request-id": uuid.uuid4().hex,
        }
        if sign and self.credentials is not None:
            out["authorization"] = authorization(
                self.credentials.access_key, signature(self.credentials.secret_key, date)
            )
        for key, value in replace.items():
            out[key.replace("_", "-")] = value
        return tuple(out.items())

    # ------------------------------------------------------------------ calls

    async def unary(
        self,
        method: str,
        request: Message,
        response: type[R],
        *,
        metadata: Metadata | None = None,
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> R:
        call = self.channel.unary_unary(
            path(method),
            request_serializer=_serialize,
            response_deserializer=response.FromString,
        )
        answer = await call(
            request,
            metadata=metadata if metadata is not None else self.metadata(),
            timeout=timeout_s,
        )
        assert isinstance(answer, response)
        return answer

    async def raw_unary(
        self, method: str, payload: bytes, *, timeout_s: float = CALL_TIMEOUT_S
    ) -> bytes:
        """``payload`` as the request, bytes as they are (no serialiser on either side)."""
        call = self.channel.unary_unary(
            path(method), request_serializer=_identity, response_deserializer=_identity
        )
        answer = await call(payload, metadata=self.metadata(), timeout=timeout_s)
        assert isinstance(answer, bytes)
        return answer

    async def query_route(self, topic: str, **kw: Any) -> rpc.QueryRouteResponse:
        request = rpc.QueryRouteRequest(
            topic=pb.Resource(name=topic),
            endpoints=pb.Endpoints(
                scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=self.port)]
            ),
        )
        return await self.unary("QueryRoute", request, rpc.QueryRouteResponse, **kw)

    async def send(self, *messages: pb.Message, **kw: Any) -> rpc.SendMessageResponse:
        request = rpc.SendMessageRequest(messages=list(messages))
        return await self.unary("SendMessage", request, rpc.SendMessageResponse, **kw)

    async def heartbeat(self, group: str | None = None, **kw: Any) -> rpc.HeartbeatResponse:
        request = rpc.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER)
        if group is not None:
            request.group.name = group
        return await self.unary("Heartbeat", request, rpc.HeartbeatResponse, **kw)

    async def ack(
        self, group: str, topic: str, handles: Iterable[tuple[str, str]], **kw: Any
    ) -> rpc.AckMessageResponse:
        """Ack (message id, receipt handle) pairs."""
        request = rpc.AckMessageRequest(
            group=pb.Resource(name=group),
            topic=pb.Resource(name=topic),
            entries=[
                rpc.AckMessageEntry(message_id=mid, receipt_handle=handle)
                for mid, handle in handles
            ],
        )
        return await self.unary("AckMessage", request, rpc.AckMessageResponse, **kw)

    async def change_invisible(
        self, group: str, topic: str, msg: pb.Message, handle: str, invisible_s: float
    ) -> rpc.ChangeInvisibleDurationResponse:
        request = rpc.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=group),
            topic=pb.Resource(name=topic),
            receipt_handle=handle,
            invisible_duration=seconds(invisible_s),
            message_id=msg.system_properties.message_id,
        )
        return await self.unary(
            "ChangeInvisibleDuration", request, rpc.ChangeInvisibleDurationResponse
        )

    async def terminate(self, group: str | None = None) -> rpc.NotifyClientTerminationResponse:
        request = rpc.NotifyClientTerminationRequest()
        if group is not None:
            request.group.name = group
        return await self.unary(
            "NotifyClientTermination", request, rpc.NotifyClientTerminationResponse
        )

    def receive_call(
        self, request: rpc.ReceiveMessageRequest, *, timeout_s: float = 30.0
    ) -> aio.UnaryStreamCall[Any, Any]:
        call = self.channel.unary_stream(
            path("ReceiveMessage"),
            request_serializer=_serialize,
            response_deserializer=rpc.ReceiveMessageResponse.FromString,
        )
        return call(request, metadata=self.metadata(), timeout=timeout_s)

    async def receive(
        self, request: rpc.ReceiveMessageRequest, *, timeout_s: float = 30.0
    ) -> list[rpc.ReceiveMessageResponse]:
        """Every response of one ReceiveMessage, to the stream's end."""
        out: list[rpc.ReceiveMessageResponse] = []
        async for answer in self.receive_call(request, timeout_s=timeout_s):
            assert isinstance(answer, rpc.ReceiveMessageResponse)
            out.append(answer)
        return out

    def open_stream(
        self,
        method: str,
        serialize: Callable[[Any], bytes] = _serialize,
        deserialize: Callable[[bytes], Any] = rpc.TelemetryCommand.FromString,
        *,
        timeout_s: float | None = None,
    ) -> aio.StreamStreamCall[Any, Any]:
        """A bidirectional call of ``method`` (Telemetry), written to with ``write``."""
        # Any: grpc-stubs wants a request iterator, which grpc.aio makes optional.
        multi: Any = self.channel.stream_stream(
            path(method), request_serializer=serialize, response_deserializer=deserialize
        )
        call: aio.StreamStreamCall[Any, Any] = multi(metadata=self.metadata(), timeout=timeout_s)
        return call

    def telemetry_call(self) -> aio.StreamStreamCall[Any, Any]:
        return self.open_stream("Telemetry")

    @contextlib.asynccontextmanager
    async def telemetry(self, settings: pb.Settings) -> AsyncIterator[Telemetry]:
        """Telemetry opened with ``settings`` sent and the server's reply read; on leaving,
        the stream half-closed and read to its end."""
        call = self.telemetry_call()
        try:
            await call.write(rpc.TelemetryCommand(settings=settings))
            stream = Telemetry(call, rpc.TelemetryCommand())
            reply = await stream.read()
            assert reply is not None, "the Telemetry stream ended without a settings reply"
            stream.reply = reply
            yield stream
            await call.done_writing()
            for _ in range(100):
                if await stream.read() is None:
                    break
        finally:
            call.cancel()


def statuses(answers: Sequence[rpc.ReceiveMessageResponse]) -> list[str]:
    """What kind each response of a receive is: the status's code name, ``message`` or
    ``delivery_timestamp``."""
    out = []
    for answer in answers:
        kind = answer.WhichOneof("content")
        out.append(pb.Code.Name(answer.status.code) if kind == "status" else str(kind))
    return out


def messages_of(answers: Sequence[rpc.ReceiveMessageResponse]) -> list[pb.Message]:
    return [a.message for a in answers if a.WhichOneof("content") == "message"]
