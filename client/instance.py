"""``ClientInstance``: what producers and consumers of one process share.

RocketMQ counterpart: ``MQClientInstance`` with ``MQClientAPIImpl``. One instance per name
server list (and instance name) in a process: one connection per broker, the route cache
(refreshed every 30 s and on demand), heartbeats to every broker every 30 s, and the
housekeeping of its consumers (offset persistence every 5 s, rebalance every 20 s and when a
broker sends NOTIFY_CONSUMER_IDS_CHANGED). It unregisters its groups from every broker when
the last producer or consumer using it shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import time
import weakref
from typing import Any, ClassVar, Protocol, runtime_checkable

from client.errors import ClientError, MessageDecodeError, NoRouteError, reading_answer
from client.message import MessageView, decode_messages
from remoting.acl import AclClientHook, SessionCredentials
from remoting.bodies import (
    MALFORMED_BODY,
    ConsumeMessageDirectlyResult,
    ConsumerData,
    HeartbeatData,
    KVTable,
    decode_consumer_list,
    decode_reset_offset_body,
    encode_queue_map,
)
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable, RPCHook
from remoting.errors import BrokerError, HeaderError, RemotingError, RemotingTimeoutError
from remoting.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupRequestHeader,
    ConsumerRunningInfoRequestHeader,
    GetRouteInfoRequestHeader,
    ResetOffsetRequestHeader,
    UnregisterClientRequestHeader,
)
from remoting.lifecycle import Lifecycle, Periodic, Stage, periodic_stage
from remoting.route import MASTER_ID, MessageQueue, TopicRouteData, dumps
from remoting.tls import client_context

log = logging.getLogger(__name__)

ROUTE_REFRESH_S = 30.0  # pollNameServerInterval
HEARTBEAT_S = 30.0  # heartbeatBrokerInterval
PERSIST_OFFSETS_S = 5.0  # persistConsumerOffsetInterval
REBALANCE_S = 20.0
NAMESRV_TIMEOUT_S = 3.0
DEFAULT_TOPIC = "TBW102"


def _local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # picks the interface; sends nothing
            ip: str = s.getsockname()[0]
            return ip
    except OSError:
        return "127.0.0.1"


class ProducerMember(Protocol):
    group: str

    def route_updated(self, topic: str, route: TopicRouteData) -> None: ...


@runtime_checkable
class TransactionChecker(Protocol):
    """A producer that answers the broker's transaction checks."""

    def check_transaction_state(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, msg: MessageView
    ) -> None: ...


class ConsumerMember(Protocol):
    group: str

    def consumer_data(self) -> ConsumerData: ...

    def topics(self) -> list[str]: ...

    async def rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    def running_info(self) -> dict[str, Any]: ...

    async def consume_directly(self, msg: MessageView) -> ConsumeMessageDirectlyResult: ...

    def route_updated(self, topic: str, route: TopicRouteData) -> None: ...


# ``tls=`` of the SDK's clients: None or False for plain TCP, True for TLS with the system's
# CAs, or an ``ssl.SSLContext`` (``remoting.tls.client_context`` makes one) for anything else.
TlsOption = bool | ssl.SSLContext | None


def tls_context(tls: TlsOption) -> ssl.SSLContext | None:
    if tls is None or tls is False:
        return None
    if tls is True:
        return client_context()
    return tls


def namesrv_from_env(namesrv: str | None) -> str:
    """The name server list: the argument, else ``NAMESRV_ADDR`` (RocketMQ's convention).

    Raises:
        ClientError: neither is set.
    """
    addr = namesrv or os.environ.get("NAMESRV_ADDR")
    if not addr:
        raise ClientError("no name server address: pass namesrv=… or set NAMESRV_ADDR")
    return addr


class ClientInstance:
    """Shared transport, routes and heartbeats. Use ``acquire``/``release``."""

    # Per event loop too: an instance's connections and tasks belong to one loop. The loop's
    # id is only a hint (ids are reused once a loop is gone); the weak reference each
    # instance keeps to its loop decides, so a new loop never inherits a dead instance.
    _instances: ClassVar[dict[tuple[str, str, int, int], ClientInstance]] = {}

    def __init__(
        self,
        namesrv: str,
        instance_name: str,
        *,
        prefer_msgpack: bool = True,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ClientError(f"name server list {namesrv!r} has no address")
        self.instance_name = instance_name
        self.client_id = f"{_local_ip()}@{instance_name}"
        table = self._callbacks()
        # With ACL credentials every request is signed (AclClientRPCHook).
        hooks: list[RPCHook] = [AclClientHook(credentials)] if credentials is not None else []
        self.remoting = RemotingClient(
            ClientConfig(ssl_context=tls_context(tls)), table, hooks=hooks
        )
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self._namesrv_index = 0
        self.prefer_msgpack = prefer_msgpack
        self._serialize: dict[str, int] = {}
        self._users = 0
        self._key: tuple[str, str, int, int] = ("", "", 0, 0)
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self.lifecycle = self._lifecycle()
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def _callbacks(self) -> ProcessorTable:
        """The requests brokers send this client (ClientRemotingProcessor), each on a lane
        of its own so a slow listener cannot hold up a rebalance notice."""
        table = ProcessorTable()
        table.register(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            self._on_ids_changed,
            Lane("client-callbacks", workers=1, capacity=10_000),
        )
        table.register(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            self._on_reset_offset,
            Lane("offset-resets", workers=1, capacity=1_000),
        )
        table.register(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            self._on_running_info,
            Lane("running-info", workers=1, capacity=100),
        )
        table.register(
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            self._on_consume_directly,
            # One at a time: each runs a listener the operator picked a message for.
            Lane("consume-directly", workers=1, capacity=100),
        )
        table.register(
            RequestCode.CHECK_TRANSACTION_STATE,
            self._on_check_transaction,
            Lane("transaction-checks", workers=1, capacity=2_000),
        )
        return table

    def _lifecycle(self) -> Lifecycle:
        """MQClientInstance.start: the remoting client, then the scheduled tasks."""
        self._rebalancer = Periodic(
            "rebalance", self._rebalance_all, REBALANCE_S, failure_event="rebalance_failed"
        )
        self.housekeeping = (
            Periodic(
                "routes",
                self.refresh_routes,
                ROUTE_REFRESH_S,
                failure_event="client_housekeeping_failed",
            ),
            Periodic(
                "heartbeat", self.heartbeat, HEARTBEAT_S, failure_event="client_housekeeping_failed"
            ),
            Periodic(
                "offsets",
                self._persist_offsets,
                PERSIST_OFFSETS_S,
                failure_event="client_housekeeping_failed",
            ),
            self._rebalancer,  # every 20 s, and at once when a consumer asks
        )
        return Lifecycle(
            "client",
            [
                Stage("remoting", self.remoting.start, self.remoting.shutdown),
                periodic_stage("housekeeping", self.housekeeping),
            ],
        )

    @classmethod
    async def acquire(
        cls,
        namesrv: str,
        instance_name: str | None = None,
        *,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
    ) -> ClientInstance:
        name = instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
        loop = asyncio.get_running_loop()
        # A TLS client and a plain one, or two accounts, never share connections.
        key = (
            namesrv,
            instance_name or "DEFAULT",
            id(loop),
            hash((id(tls) if tls else 0, credentials)),
        )
        inst = cls._instances.get(key)
        if inst is None or inst._loop is None or inst._loop() is not loop:
            # None yet, or one left behind by a loop that ended without releasing it.
            inst = cls._instances[key] = cls(namesrv, name, tls=tls, credentials=credentials)
            inst._key = key
            inst._loop = weakref.ref(loop)
        inst._users += 1
        if not inst._started:
            await inst._start()
        return inst

    async def release(self) -> None:
        self._users -= 1
        if self._users > 0:
            return
        if self._instances.get(self._key) is self:
            del self._instances[self._key]
        await self._shutdown()

    @classmethod
    def live(cls) -> list[ClientInstance]:
        """Every registered instance whose event loop is still open."""
        out = []
        for inst in cls._instances.values():
            loop = inst._loop() if inst._loop is not None else None
            if loop is not None and not loop.is_closed():
                out.append(inst)
        return out

    async def _start(self) -> None:
        self._started = True
        await self.lifecycle.start()
        log.info("client_started client_id=%s namesrv=%s", self.client_id, self.namesrv_addrs)

    async def _shutdown(self) -> None:
        await self.lifecycle.stop()
        self._started = False
        log.info("client_stopped client_id=%s", self.client_id)

    # --------------------------------------------------------------------- members

    def register_producer(self, member: ProducerMember) -> None:
        if member.group in self.producers:
            raise ClientError(f"producer group {member.group} is already started in this process")
        self.producers[member.group] = member

    def register_consumer(self, member: ConsumerMember) -> None:
        if member.group in self.consumers:
            raise ClientError(f"consumer group {member.group} is already started in this process")
        self.consumers[member.group] = member

    async def unregister(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        """Forget a group here and tell every broker (UNREGISTER_CLIENT)."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
        header = UnregisterClientRequestHeader(
            client_id=self.client_id,
            producer_group=producer_group,
            consumer_group=consumer_group,
        ).to_ext_fields()
        for addrs in list(self.broker_addrs.values()):
            for addr in addrs.values():
                request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, dict(header))
                try:
                    await self.invoke_broker(addr, request, NAMESRV_TIMEOUT_S)
                except RemotingError as exc:
                    log.info("unregister_client_failed broker=%s error=%s", addr, exc)

    # ---------------------------------------------------------------- serialization

    async def serialize_type(self, addr: str, timeout_s: float = NAMESRV_TIMEOUT_S) -> int:
        """The header serialization for a broker: msgpack for Aerolite, JSON otherwise.

        Found once per broker with GET_BROKER_RUNTIME_INFO (JSON, which every broker reads):
        Aerolite names itself in ``brokerVersionDesc``. A broker that cannot be asked gets
        JSON for now and is asked again next time.
        """
        known = self._serialize.get(addr)
        if known is not None:
            return known
        if not self.prefer_msgpack:
            self._serialize[addr] = SerializeType.JSON
            return SerializeType.JSON
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            response = await self.remoting.invoke(addr, request, min(timeout_s, NAMESRV_TIMEOUT_S))
        except RemotingError:
            return SerializeType.JSON
        kind = SerializeType.JSON
        if response.code == ResponseCode.SUCCESS:
            # an answer of the wrong shape is a broker that is not ours: JSON
            with contextlib.suppress(*MALFORMED_BODY):
                desc = KVTable.decode(response.body_bytes).table.get("brokerVersionDesc", "")
                if "Aerolite" in desc:
                    kind = SerializeType.MSGPACK
        self._serialize[addr] = kind
        log.info("broker_serialization broker=%s serialize_type=%s", addr, kind.name)
        return kind

    async def invoke_broker(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """A request to a broker, in the serialization it reads best."""
        kind = self._serialize.get(addr)
        if kind is None:
            return await self._first_invoke(addr, request, timeout_s)
        request.serialize_type = kind
        return await self.remoting.invoke(addr, request, timeout_s)

    async def _first_invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """A request to a broker whose serialization is not known yet: the probe and the
        request share the caller's budget, and a timeout reports that budget, so a broker that
        does not answer costs ``timeout_s``, not the probe's 3 s on top."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        request.serialize_type = await self.serialize_type(addr, timeout_s)
        remaining = deadline - loop.time()
        if remaining > 0:
            try:
                return await self.remoting.invoke(addr, request, remaining)
            except RemotingTimeoutError:
                pass  # reported below with the whole budget, not what the probe left of it
        raise RemotingTimeoutError(addr, request.code, request.opaque, timeout_s)

    # ----------------------------------------------------------------------- routes

    async def invoke_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        """Send to the current name server, moving on to the next when one fails."""
        return (await self._namesrv_answer(request))[1]

    async def _namesrv_answer(self, request: RemotingCommand) -> tuple[str, RemotingCommand]:
        """``invoke_namesrv``, with the address of the name server that answered."""
        last: Exception | None = None
        for _ in range(len(self.namesrv_addrs)):
            addr = self.namesrv_addrs[self._namesrv_index % len(self.namesrv_addrs)]
            try:
                return addr, await self.remoting.invoke(addr, request, NAMESRV_TIMEOUT_S)
            except RemotingError as exc:
                last = exc
                self._namesrv_index += 1
                request = RemotingCommand.request(
                    request.code, dict(request.ext_fields), request.body
                )
        assert last is not None
        raise last

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The name server's route for ``topic``; None when it does not know the topic."""
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic=topic).to_ext_fields(),
        )
        addr, response = await self._namesrv_answer(request)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(
                response.code, response.remark, request_code=request.code, topic=topic
            )
        with reading_answer(request.code, addr, f"not a route of topic {topic}"):
            return TopicRouteData.decode(response.body_bytes)

    async def update_route(self, topic: str) -> TopicRouteData | None:
        route = await self.fetch_route(topic)
        if route is None:
            return None
        self.routes[topic] = route
        for bd in route.broker_datas:
            self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        for member in (*self.producers.values(), *self.consumers.values()):
            member.route_updated(topic, route)
        return route

    async def refresh_routes(self) -> None:
        topics: set[str] = set(self.routes)
        for consumer in self.consumers.values():
            topics.update(consumer.topics())
        for topic in sorted(topics):
            try:
                await self.update_route(topic)
            except (RemotingError, BrokerError) as exc:
                log.warning("route_refresh_failed topic=%s error=%s", topic, exc)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def read_addr(self, broker_name: str) -> str | None:
        """Where to pull and keep offsets (``findBrokerAddressInSubscribe`` /
        ``findBrokerAddressInAdmin``): the master, or a slave of the group when the master
        has left the route, so consumers go on reading from the slave."""
        addrs = self.broker_addrs.get(broker_name, {})
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[min(addrs)] if addrs else None

    def subscribe_addr(self, broker_name: str, broker_id: int) -> tuple[str, bool] | None:
        """Where to pull from (``findBrokerAddressInSubscribe``): the broker id the last pull
        reply suggested, else the master, else a slave; and whether that is a slave."""
        addrs = self.broker_addrs.get(broker_name, {})
        addr = addrs.get(broker_id)
        if addr is None:
            if not addrs:
                return None
            broker_id = MASTER_ID if MASTER_ID in addrs else min(addrs)
            addr = addrs[broker_id]
        return addr, broker_id != MASTER_ID

    async def find_broker_for_topic(self, topic: str) -> str:
        """A broker serving ``topic`` (for consumer-list and offset calls): a master, or a
        slave when no master is left (``findBrokerAddrByTopic``)."""
        route = self.routes.get(topic) or await self.update_route(topic)
        if route is not None:
            for bd in route.broker_datas:
                if bd.master_addr:
                    return bd.master_addr
            for bd in route.broker_datas:
                if bd.broker_addrs:
                    return bd.broker_addrs[min(bd.broker_addrs)]
        raise NoRouteError(topic, "no broker serves it")

    # -------------------------------------------------------------------- heartbeat

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=[*self.producers, "CLIENT_INNER_PRODUCER"] if self.producers else [],
            consumer_data_set=[c.consumer_data() for c in self.consumers.values()],
        )

    async def heartbeat(self) -> None:
        """HEART_BEAT to every broker: masters always, slaves too when consumers exist."""
        if not self.producers and not self.consumers:
            return
        body = self.heartbeat_data().encode()
        for addrs in list(self.broker_addrs.values()):
            for broker_id, addr in addrs.items():
                if broker_id != MASTER_ID and not self.consumers:
                    continue
                await self.heartbeat_broker(addr, body)

    async def heartbeat_broker(self, addr: str, body: bytes | None = None) -> bool:
        """HEART_BEAT to one broker (e.g. one a producer just found, so that it can reach
        the producer for transaction checks before the next round); whether it took it."""
        if body is None:
            body = self.heartbeat_data().encode()
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        try:
            response = await self.invoke_broker(addr, request, NAMESRV_TIMEOUT_S)
        except RemotingError as exc:
            log.info("heartbeat_failed broker=%s error=%s", addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning("heartbeat_refused broker=%s remark=%s", addr, response.remark)
            return False
        return True

    # ------------------------------------------------------------------- consumers

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP from one broker of ``topic``."""
        addr = await self.find_broker_for_topic(topic)
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            ConsumerGroupRequestHeader(consumer_group=group).to_ext_fields(),
        )
        response = await self.invoke_broker(addr, request, NAMESRV_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            return []
        with reading_answer(request.code, addr, "not a consumer list"):
            return decode_consumer_list(response.body_bytes)

    def rebalance_soon(self) -> None:
        self._rebalancer.wake()

    async def _rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rebalance_failed group=%s", consumer.group)

    async def _persist_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_offsets()

    async def _on_reset_offset(self, conn: Connection, request: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (mqadmin resetOffsetByTime): the group's consumer
        drops what it holds of those queues and goes on from the new offsets
        (``ClientRemotingProcessor.resetOffset``); nothing is answered (one way)."""
        try:
            header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
            offsets = decode_reset_offset_body(request.body_bytes)
        except (HeaderError, ValueError, TypeError) as exc:
            log.warning("reset_offset_unreadable broker=%s error=%s", conn.peer, exc)
            return
        consumer = self.consumers.get(header.group)
        if consumer is None:
            log.info("reset_offset_no_consumer group=%s", header.group)
            return
        log.info(
            "reset_offset group=%s topic=%s queues=%s", header.group, header.topic, len(offsets)
        )
        await consumer.reset_offsets(header.topic, offsets)

    async def _on_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: this client's consumer of the group describes itself
        (``ClientRemotingProcessor.getConsumerRunningInfo``)."""
        try:
            header = ConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or header.client_id != self.client_id:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        info = consumer.running_info()
        mq_table = info.pop("mqTable")
        body = dumps(info)[:-1] + b',"mqTable":' + encode_queue_map(mq_table).encode() + b"}"
        return response_to(request, ResponseCode.SUCCESS, None, None, body)

    async def _on_consume_directly(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: the stored message in the body goes to this client's
        consumer of the group, whose listener's outcome is the answer
        (``ClientRemotingProcessor.consumeMessageDirectly``)."""
        try:
            header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
            msgs = decode_messages(request.body_bytes, header.broker_name or "")
        except (HeaderError, MessageDecodeError) as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"unreadable request: {exc}")
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or header.client_id not in (None, self.client_id):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        if not msgs:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "the request carries no message")
        try:
            result = await consumer.consume_directly(msgs[0])
        except ClientError as exc:  # no listener, or no subscription to the message's topic
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.info(
            "consumed_directly group=%s msg_id=%s result=%s",
            header.consumer_group,
            header.msg_id,
            result.consume_result,
        )
        return response_to(request, ResponseCode.SUCCESS, None, None, result.encode())

    async def _on_check_transaction(self, conn: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE: hand the message to the producer of its group
        (``ClientRemotingProcessor.checkTransactionState``); nothing is answered here."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            msgs = decode_messages(request.body_bytes, "")
        except (HeaderError, MessageDecodeError) as exc:
            log.warning("transaction_check_unreadable broker=%s error=%s", conn.peer, exc)
            return
        if not msgs:
            log.warning("transaction_check_without_message broker=%s", conn.peer)
            return
        msg = msgs[0]
        group = msg.properties.get("PGROUP", "")
        producer = self.producers.get(group)
        if not isinstance(producer, TransactionChecker):
            log.warning("transaction_check_for_unknown_group group=%s broker=%s", group, conn.peer)
            return
        producer.check_transaction_state(conn, header, msg)

    async def _on_ids_changed(self, conn: Connection, request: RemotingCommand) -> None:
        try:
            group: str | None = ConsumerGroupRequestHeader.from_ext_fields(
                request.ext_fields
            ).consumer_group
        except HeaderError:
            group = None  # the group is only logged: every group rebalances all the same
        log.info("consumer_ids_changed group=%s broker=%s", group, conn.peer)
        self.rebalance_soon()
