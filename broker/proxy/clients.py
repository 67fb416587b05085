"""5.x clients: their settings, their Telemetry stream, heartbeats and termination.

RocketMQ counterpart: ``proxy/grpc/v2/client/ClientActivity`` (telemetry, heartbeat,
notifyClientTermination), ``common/GrpcClientSettingsManager`` (the settings a client is
sent back, merged with the server's) and ``channel/GrpcClientChannel`` (a client as the
broker's producer and consumer tables see it; what the broker sends it — a transaction
check — is written to its Telemetry stream as a ``RecoverOrphanedTransactionCommand``).

A client opens Telemetry first and sends its ``Settings``: a producer its topics, a
consumer its group and subscriptions. The answer is the same settings merged with the
server's: the producer's retry backoff, max body size and whether message types are
checked; the consumer's batch size, long-polling timeout, FIFO flag and the retry policy of
its group (max attempts = the group's retryMaxTimes + 1, the delays of the delay levels).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from grpc import aio

from broker.acl import PUB, SUB, PlainAcl
from broker.clients import ClientChannel
from broker.facets import Clients, HasConfig, HasStore, Tables
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from broker.proxy.context import (
    CallContext,
    check_access,
    consume_need,
    context_of,
    valid_group,
    valid_topic,
)
from broker.proxy.convert import duration, to_v2
from broker.proxy.local import LocalChannel
from broker.proxy.status import OK_STATUS, ProxyError, status
from codec import decode_records
from codec.view import MessageExt
from remoting.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.headers import CheckTransactionStateRequestHeader, ConsumerRunningInfoRequestHeader
from remoting.lifecycle import TaskGroup
from remoting.route import dumps

log = structlog.get_logger(__name__)

# The proxy's grpcClientProducer* defaults: the producer's own retries of a failed send.
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
RECEIVE_BATCH_SIZE = 32  # grpcClientConsumerLongPollingBatchSize
TELEMETRY_QUEUE = 1024  # commands waiting for a slow client's stream; more are dropped
SETTINGS_WAIT_S = 3.0  # a call that comes before its client's settings waits this long
# A verify command's answer status as ConsumeMessageDirectlyResult's consumeResult.
_VERIFY_RESULTS = {
    pb.OK: "CR_SUCCESS",
    pb.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    pb.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}
RELAY_TIMEOUT_S = 5.0  # grpcProxyRelayRequestTimeoutInSeconds: a client's answer to a command


class ClientsBroker(HasConfig, Tables, Clients, HasStore, Protocol):
    """What the client registry touches: config, groups, the client tables, the store
    (a transaction check's message)."""

    @property
    def acl(self) -> PlainAcl | None: ...


@dataclass(slots=True, eq=False)
class GrpcClient:
    """One 5.x client, by its ``x-mq-client-id``."""

    client_id: str
    channel: LocalChannel
    language: str = ""
    version: str = ""
    settings: pb.Settings | None = None
    settings_known: asyncio.Event = field(default_factory=asyncio.Event)
    last_seen_ms: int = 0
    # The open Telemetry stream's outbox (None while none is open).
    outbox: asyncio.Queue[rpc.TelemetryCommand] | None = None
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # Commands sent with a nonce, waiting for the client's answer on Telemetry.
    waiting: dict[str, asyncio.Future[rpc.TelemetryCommand]] = field(default_factory=dict)

    @property
    def client_type(self) -> int:
        return (
            self.settings.client_type if self.settings is not None else pb.CLIENT_TYPE_UNSPECIFIED
        )

    def push(self, command: rpc.TelemetryCommand) -> bool:
        """Queue a command for the client's Telemetry stream; False when none is open or
        the client does not keep up."""
        if self.outbox is None:
            return False
        try:
            self.outbox.put_nowait(command)
        except asyncio.QueueFull:
            log.warning("grpc_telemetry_dropped", client_id=self.client_id)
            return False
        return True


def _language_code(language: str) -> int:
    try:
        return int(LanguageCode[language.upper()])
    except KeyError:
        return int(LanguageCode.OTHER) if hasattr(LanguageCode, "OTHER") else 0


class GrpcClients:
    """The registry of 5.x clients (``GrpcChannelManager`` + the settings manager)."""

    def __init__(
        self,
        broker: ClientsBroker,
        on_removed: Callable[[str, LocalChannel], None] | None = None,
    ) -> None:
        self.broker = broker
        self.clients: dict[str, GrpcClient] = {}
        self._on_removed = on_removed
        self.tasks = TaskGroup("grpc-clients")  # answers to requests relayed to clients
        self._nonces = itertools.count(1)

    # ------------------------------------------------------------------ registry

    def get_or_create(self, call: CallContext) -> GrpcClient:
        client = self.clients.get(call.client_id)
        if client is None:
            client = GrpcClient(call.client_id, LocalChannel(call.peer))
            client.channel.on_command = functools.partial(self._to_client, client)
            self.clients[call.client_id] = client
        client.language = call.language or client.language
        client.version = call.version or client.version
        client.last_seen_ms = int(time.time() * 1000)
        return client

    async def settings_of(self, call: CallContext) -> pb.Settings:
        """The client's settings as merged for it; a call that overtook its client's
        Telemetry settings (the Python client receives at once) waits for them briefly.

        Raises:
            ProxyError: the client never sent its settings.
        """
        client = self.get_or_create(call)
        if client.settings is None:
            try:
                await asyncio.wait_for(client.settings_known.wait(), SETTINGS_WAIT_S)
            except TimeoutError:
                raise ProxyError(
                    pb.UNRECOGNIZED_CLIENT_TYPE,
                    f"no settings from client {call.client_id}: open Telemetry and send them first",
                ) from None
        assert client.settings is not None
        return self.merged(client.settings)

    def remove(self, client_id: str, reason: str) -> None:
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        # Out of every group its channel is in, as a remoting client whose connection
        # closes (a consumer group's other members are told, to rebalance).
        self.broker.producers.connection_closed(client.channel, reason)
        self.broker.consumers.connection_closed(client.channel, reason)
        client.outbox = None
        log.info("grpc_client_left", client_id=client_id, reason=reason)
        if self._on_removed is not None:
            self._on_removed(client_id, client.channel)
        else:
            client.channel.close()

    def expire(self, now_ms: int, expired_ms: int) -> None:
        """Clients silent longer than ``expired_ms`` (no heartbeat, no stream) leave."""
        for client_id, client in list(self.clients.items()):
            if client.outbox is None and client.last_seen_ms + expired_ms < now_ms:
                self.remove(client_id, "expired")

    # ----------------------------------------------------------------- settings

    def merged(self, settings: pb.Settings) -> pb.Settings:
        """``GrpcClientSettingsManager.getClientSettings``: the client's settings with the
        server's parts put in."""
        out = pb.Settings()
        out.CopyFrom(settings)
        config = self.broker.config
        if settings.HasField("publishing"):
            policy = out.backoff_policy
            policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            policy.exponential_backoff.CopyFrom(
                pb.ExponentialBackoff(
                    initial=duration(PRODUCER_BACKOFF_INITIAL_MS),
                    max=duration(PRODUCER_BACKOFF_MAX_MS),
                    multiplier=PRODUCER_BACKOFF_MULTIPLIER,
                )
            )
            out.publishing.max_body_size = self.broker.store.config.max_message_bytes
            out.publishing.validate_message_type = True
        elif settings.HasField("subscription"):
            sub = out.subscription
            sub.receive_batch_size = RECEIVE_BATCH_SIZE
            sub.long_polling_timeout.CopyFrom(duration(config.grpc_max_long_polling_timeout_ms))
            group = self.broker.subscription_groups.find(sub.group.name)
            retry_max = group.retry_max_times if group is not None else 16
            sub.fifo = group is not None and group.consume_message_orderly
            policy = out.backoff_policy
            policy.max_attempts = retry_max + 1
            # The group's retries wait through the delay levels from the third (10 s), as
            # a 4.x consumer's send-back does (delay level 3 + reconsume times).
            levels = self.broker.store.config.delay_levels_ms
            policy.customized_backoff.CopyFrom(
                pb.CustomizedBackoff(next=[duration(ms) for ms in levels[2:]] or [duration(10_000)])
            )
        out.metric.CopyFrom(pb.Metric(on=False))
        return out

    def _apply(self, client: GrpcClient, call: CallContext, settings: pb.Settings) -> None:
        """Register what the settings name: a producer under each of its topics (its sends'
        producer group, so a transaction check finds it), a consumer in its group."""
        client.settings = settings
        client.settings_known.set()
        now = int(time.time() * 1000)
        channel = ClientChannel(
            client.client_id, _language_code(client.language), 0, now, call.peer
        )
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                self.broker.producers.register(topic.name, client.channel, channel)
        elif settings.HasField("subscription"):
            self._register_consumer(client, settings, channel)

    def _register_consumer(
        self, client: GrpcClient, settings: pb.Settings, channel: ClientChannel
    ) -> None:
        sub = settings.subscription
        group = sub.group.name
        if not group:
            return
        subs = [
            SubscriptionData(
                entry.topic.name,
                entry.expression.expression or "*",
                expression_type="SQL92" if entry.expression.type == pb.SQL else "TAG",
            )
            for entry in sub.subscriptions
        ]
        self.broker.consumers.register(
            group,
            client.channel,
            channel,
            consume_type=ConsumeType.CONSUME_PASSIVELY
            if settings.client_type == pb.PUSH_CONSUMER
            else ConsumeType.CONSUME_ACTIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscriptions=subs,
            notify=False,
        )

    # ---------------------------------------------------------------- the RPCs

    async def heartbeat(
        self,
        request: rpc.HeartbeatRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.HeartbeatResponse:
        call = context_of(context)
        if request.HasField("group") and request.group.name:
            group = valid_group(request.group.name)
            check_access(self.broker.acl, call, consume_need(None, group))
        client = self.get_or_create(call)
        if client.settings is None:
            return rpc.HeartbeatResponse(
                status=status(
                    pb.UNRECOGNIZED_CLIENT_TYPE,
                    "cannot find client settings for this client: send them on Telemetry first",
                )
            )
        now = int(time.time() * 1000)
        tables = [
            *self.broker.producers.groups.values(),
            *(info.channels for info in self.broker.consumers.groups.values()),
        ]
        for channels in tables:
            known = channels.get(client.channel)
            if known is not None:
                known.last_update_ms = now
        return rpc.HeartbeatResponse(status=OK_STATUS)

    async def notify_client_termination(
        self,
        request: rpc.NotifyClientTerminationRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.NotifyClientTerminationResponse:
        call = context_of(context)
        if request.HasField("group"):
            check_access(self.broker.acl, call, consume_need(None, request.group.name))
        self.remove(call.client_id, "terminated")
        return rpc.NotifyClientTerminationResponse(status=OK_STATUS)

    async def telemetry(
        self,
        requests: AsyncIterator[rpc.TelemetryCommand],
        context: aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        """The bidirectional stream: the client's commands in, its settings and the
        server's commands out. Ends when the client ends it (or goes); its outbox goes
        with it."""
        call = context_of(context)
        client = self.get_or_create(call)
        outbox: asyncio.Queue[rpc.TelemetryCommand] = asyncio.Queue(TELEMETRY_QUEUE)
        client.outbox = outbox
        reader = asyncio.ensure_future(self._read_telemetry(client, call, requests, outbox))
        getter: asyncio.Future[rpc.TelemetryCommand] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                    continue
                while not outbox.empty():  # what the reader answered last
                    yield outbox.get_nowait()
                failure = reader.exception()
                if failure is not None:
                    # An unreadable command (the parser aborted the call with INTERNAL
                    # already) or a failure of ours: the call ends with it, not cleanly.
                    raise failure
                return
        finally:
            # Both tasks end with the stream, however it ends (the client's end, a cancel
            # when it went): neither is left pending for the collector to find.
            for task in (reader, getter):
                if task is not None and not task.done():
                    task.cancel()
            if client.outbox is outbox:
                client.outbox = None

    async def _read_telemetry(
        self,
        client: GrpcClient,
        call: CallContext,
        requests: AsyncIterator[rpc.TelemetryCommand],
        outbox: asyncio.Queue[rpc.TelemetryCommand],
    ) -> None:
        """The client's commands: its settings (answered with the merged ones), and the
        results of commands we sent it. A refused command is answered with its status and
        ends the stream, as the proxy does."""
        async for command in requests:
            client.last_seen_ms = int(time.time() * 1000)
            kind = command.WhichOneof("command")
            if kind == "settings":
                try:
                    self._check_settings(call, command.settings)
                except ProxyError as exc:
                    await outbox.put(rpc.TelemetryCommand(status=status(exc.code, exc.message)))
                    return
                self._apply(client, call, command.settings)
                await outbox.put(
                    rpc.TelemetryCommand(status=OK_STATUS, settings=self.merged(command.settings))
                )
            elif kind in ("thread_stack_trace", "verify_message_result"):
                result = getattr(command, kind)
                waiter = client.waiting.pop(result.nonce, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(command)

    def _check_settings(self, call: CallContext, settings: pb.Settings) -> None:
        """Settings a client may register: a known type, legal names, and (ACL on) PUB on
        each topic it publishes to, SUB on its group and the topics it subscribes to.

        Raises:
            ProxyError: the first thing wrong.
        """
        if settings.client_type == pb.CLIENT_TYPE_UNSPECIFIED:
            raise ProxyError(pb.UNRECOGNIZED_CLIENT_TYPE, "client type is not set")
        need: dict[str, int] = {}
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                need[valid_topic(topic.name)] = PUB
        elif settings.HasField("subscription"):
            sub = settings.subscription
            need.update(consume_need(None, valid_group(sub.group.name)))
            for entry in sub.subscriptions:
                need[valid_topic(entry.topic.name)] = SUB
        else:
            raise ProxyError(
                pb.BAD_REQUEST, "there is no publishing or subscription data in settings"
            )
        check_access(self.broker.acl, call, need)

    # ----------------------------------------------------- what the broker sends

    def _to_client(self, client: GrpcClient, cmd: RemotingCommand) -> bool:
        """A remoting request the broker sends this client, as its Telemetry command:
        CHECK_TRANSACTION_STATE becomes RecoverOrphanedTransactionCommand; a rebalance
        notice means nothing to a 5.x client (the server assigns queues)."""
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            header = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
            views = decode_records(cmd.body_bytes, self.broker.config.broker_name, MessageExt)
            if not views:
                return False
            message = to_v2(views[0])
            transaction_id = header.offset_msg_id or header.transaction_id or ""
            return client.push(
                rpc.TelemetryCommand(
                    status=OK_STATUS,
                    recover_orphaned_transaction_command=rpc.RecoverOrphanedTransactionCommand(
                        message=message, transaction_id=transaction_id
                    ),
                )
            )
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not cmd.is_oneway:
            self.tasks.spawn(self._running_info(client, cmd), name="grpc-running-info")
            return True
        if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY and not cmd.is_oneway:
            self.tasks.spawn(self._verify(client, cmd), name="grpc-verify")
            return True
        return cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED

    async def _running_info(self, client: GrpcClient, cmd: RemotingCommand) -> None:
        """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus) for a 5.x consumer: what its
        settings say, and with jstackEnable its threads' stacks, asked for with a
        PrintThreadStackTraceCommand (``GrpcClientChannel``)."""
        header = ConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        settings = client.settings or pb.Settings()
        sub = settings.subscription
        info: dict[str, Any] = {
            "properties": {
                "PROP_CONSUMEORDERLY": str(bool(sub.fifo)).lower(),
                "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"
                if settings.client_type == pb.PUSH_CONSUMER
                else "CONSUME_ACTIVELY",
                "PROP_CONSUMER_START_TIMESTAMP": str(client.started_ms),
                "PROP_CLIENT_VERSION": client.version,
                "messageModel": "CLUSTERING",
                "language": client.language,
                "protocol": "GRPC_V2",
            },
            "subscriptionSet": [
                SubscriptionData(
                    e.topic.name,
                    e.expression.expression or "*",
                    expression_type="SQL92" if e.expression.type == pb.SQL else "TAG",
                ).to_json()
                for e in sub.subscriptions
            ],
            "mqTable": {},
            "statusTable": {},
        }
        if header.jstack_enable:
            answer = await self._ask(
                client,
                rpc.TelemetryCommand(
                    print_thread_stack_trace_command=rpc.PrintThreadStackTraceCommand()
                ),
            )
            if answer is not None and answer.HasField("thread_stack_trace"):
                info["jstack"] = answer.thread_stack_trace.thread_stack_trace
        client.channel.answer(response_to(cmd, ResponseCode.SUCCESS, None, None, dumps(info)))

    async def _verify(self, client: GrpcClient, cmd: RemotingCommand) -> None:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin consumeMessage) for a 5.x consumer: the message
        sent as a VerifyMessageCommand; the status of its answer is the result (OK
        CR_SUCCESS, FAILED_TO_CONSUME_MESSAGE CR_LATER, MESSAGE_CORRUPTED CR_RETURN_NULL)."""
        views = decode_records(cmd.body_bytes, self.broker.config.broker_name, MessageExt)
        if not views:
            client.channel.answer(response_to(cmd, ResponseCode.SYSTEM_ERROR, "no message"))
            return
        started = time.monotonic()
        answer = await self._ask(
            client,
            rpc.TelemetryCommand(
                verify_message_command=rpc.VerifyMessageCommand(message=to_v2(views[0]))
            ),
        )
        if answer is None:
            client.channel.answer(
                response_to(
                    cmd,
                    ResponseCode.SYSTEM_ERROR,
                    f"client {client.client_id} did not answer the verify command",
                )
            )
            return
        result = ConsumeMessageDirectlyResult(
            _VERIFY_RESULTS.get(answer.status.code, "CR_THROW_EXCEPTION"),
            remark=answer.status.message or "from gRPC client",
            spent_ms=int((time.monotonic() - started) * 1000),
        )
        client.channel.answer(response_to(cmd, ResponseCode.SUCCESS, None, None, result.encode()))

    async def _ask(
        self, client: GrpcClient, command: rpc.TelemetryCommand
    ) -> rpc.TelemetryCommand | None:
        """Send ``command`` with a fresh nonce and wait (5 s, the proxy's relay timeout) for
        the client's answer to it; None without one."""
        nonce = str(next(self._nonces))
        kind = command.WhichOneof("command")
        assert kind is not None
        getattr(command, kind).nonce = nonce
        waiter: asyncio.Future[rpc.TelemetryCommand] = asyncio.get_running_loop().create_future()
        client.waiting[nonce] = waiter
        try:
            if not client.push(command):
                return None
            return await asyncio.wait_for(waiter, RELAY_TIMEOUT_S)
        except TimeoutError:
            return None
        finally:
            client.waiting.pop(nonce, None)
