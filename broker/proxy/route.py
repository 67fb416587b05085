"""QueryRoute and QueryAssignment: where a 5.x client sends and receives.

RocketMQ counterpart: ``proxy/grpc/v2/route/RouteActivity`` over the local mode's
``LocalTopicRouteService``: the name server's route of the topic, each broker's queues
given the gRPC endpoint of that broker (its advertised host, brokerIP1, with the gRPC port;
for another broker the same port, as a local-mode proxy assumes every broker serves on
one), their permission, and the message types the topic accepts. A PushConsumer's
assignment is one queue per readable broker (queue id -1: the broker pops across its
queues).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any, Protocol

from grpc import aio

from broker.acl import ANY, PlainAcl
from broker.facets import HasConfig, Tables
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from broker.proxy.context import (
    check_access,
    consume_need,
    context_of,
    valid_group,
    valid_topic,
)
from broker.proxy.status import OK_STATUS, ProxyError
from broker.topics import MESSAGE_TYPE_ATTRIBUTE
from remoting.bodies import PERM_READ, PERM_WRITE
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import GetRouteInfoRequestHeader
from remoting.route import MASTER_ID, QueueData, TopicRouteData

ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
_ACCEPTED = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
    "MIXED": ALL_TYPES,
    "UNSPECIFIED": (pb.MESSAGE_TYPE_UNSPECIFIED,),
}


def accepted_types(attributes: dict[str, str]) -> tuple[int, ...]:
    """The message types a topic takes: its ``message.type`` attribute's (RocketMQ 5's
    ``TopicMessageType``); a topic without one (every 4.x topic) takes them all, as it
    does from 4.x clients."""
    kind = attributes.get(MESSAGE_TYPE_ATTRIBUTE)
    return _ACCEPTED.get(kind, ALL_TYPES) if kind else ALL_TYPES


class RouteBroker(HasConfig, Tables, Protocol):
    @property
    def client(self) -> RemotingClient: ...

    @property
    def acl(self) -> PlainAcl | None: ...

    @property
    def address(self) -> str: ...


def endpoints(host: str, port: int) -> pb.Endpoints:
    try:
        scheme = pb.IPv6 if ipaddress.ip_address(host).version == 6 else pb.IPv4
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def queues_of(
    topic: str, qd: QueueData, broker: pb.Broker, accepted: tuple[int, ...] = ALL_TYPES
) -> list[pb.MessageQueue]:
    """``genMessageQueueFromQueueData``: read-write queues first, then the read-only or
    write-only rest; a broker that neither reads nor writes gets one NONE queue."""
    readable, writable = bool(qd.perm & PERM_READ), bool(qd.perm & PERM_WRITE)
    reads = qd.read_queue_nums if readable else 0
    writes = qd.write_queue_nums if writable else 0
    both = min(reads, writes)
    out = []

    def add(queue_id: int, permission: int) -> None:
        out.append(
            pb.MessageQueue(
                topic=pb.Resource(name=topic),
                id=queue_id,
                permission=permission,  # type: ignore[arg-type]
                broker=broker,
                accept_message_types=accepted,  # type: ignore[arg-type]
            )
        )

    for i in range(both):
        add(i, pb.READ_WRITE)
    for i in range(both, reads):
        add(i, pb.READ)
    for i in range(both, writes):
        add(i, pb.WRITE)
    if not out:
        add(0, pb.NONE)
    return out


class Routing:
    """The route RPCs."""

    def __init__(self, broker: RouteBroker, grpc_port: Callable[[], int]) -> None:
        self.broker = broker
        self._grpc_port = grpc_port

    async def _route(self, topic: str) -> TopicRouteData:
        """The name servers' route of ``topic``.

        Raises:
            ProxyError: TOPIC_NOT_FOUND, or INTERNAL_SERVER_ERROR when no name server answers.
        """
        header = GetRouteInfoRequestHeader(topic=topic).to_ext_fields()
        last = "no name server configured"
        for addr in self.broker.config.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(header))
            try:
                response = await self.broker.client.invoke(addr, request, 3.0)
            except RemotingError as exc:
                last = f"{addr}: {exc}"
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ProxyError(pb.TOPIC_NOT_FOUND, f"topic[{topic}] not exist")
            if response.code != ResponseCode.SUCCESS:
                last = f"{addr}: {response.remark}"
                continue
            try:
                return TopicRouteData.decode(response.body_bytes)
            except (ValueError, KeyError, TypeError) as exc:
                last = f"{addr}: unreadable route: {exc}"
        raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"no route for topic {topic}: {last}")

    def _brokers(self, route: TopicRouteData) -> dict[str, pb.Broker]:
        """Each broker name of the route with its master's gRPC endpoint."""
        port = self._grpc_port()
        out = {}
        for bd in route.broker_datas:
            master = bd.broker_addrs.get(MASTER_ID)
            if master is None:
                continue
            host = master.rpartition(":")[0].strip("[]")
            out[bd.broker_name] = pb.Broker(
                name=bd.broker_name, id=MASTER_ID, endpoints=endpoints(host, port)
            )
        return out

    async def query_route(
        self,
        request: rpc.QueryRouteRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.QueryRouteResponse:
        call = context_of(context)
        topic = valid_topic(request.topic.name)
        check_access(self.broker.acl, call, {topic: ANY})
        route = await self._route(topic)
        brokers = self._brokers(route)
        # The attributes are per broker; a cluster's topic is created with the same ones
        # everywhere (mqadmin updateTopic -c), so this broker's copy speaks for all.
        tc = self.broker.topics.get(topic)
        accepted = accepted_types(tc.attributes) if tc is not None else ALL_TYPES
        queues = []
        for qd in route.queue_datas:
            broker = brokers.get(qd.broker_name)
            if broker is not None:
                queues += queues_of(topic, qd, broker, accepted)
        return rpc.QueryRouteResponse(status=OK_STATUS, message_queues=queues)

    async def query_assignment(
        self,
        request: rpc.QueryAssignmentRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.QueryAssignmentResponse:
        call = context_of(context)
        topic, group = valid_topic(request.topic.name), valid_group(request.group.name)
        check_access(self.broker.acl, call, consume_need(topic, group))
        route = await self._route(topic)
        brokers = self._brokers(route)
        sgc = self.broker.subscription_groups.find(group)
        fifo = sgc is not None and sgc.consume_message_orderly
        assignments = []
        for qd in route.queue_datas:
            broker = brokers.get(qd.broker_name)
            if broker is None or not qd.perm & PERM_READ or qd.read_queue_nums <= 0:
                continue
            # A FIFO group is assigned each queue (a broker's pop goes across them all
            # otherwise, queue id -1), as the proxy's RouteActivity does.
            for queue_id in range(qd.read_queue_nums) if fifo else (-1,):
                queue = pb.MessageQueue(
                    topic=pb.Resource(name=topic),
                    id=queue_id,
                    permission=pb.READ_WRITE,
                    broker=broker,
                    accept_message_types=ALL_TYPES,
                )
                assignments.append(pb.Assignment(message_queue=queue))
        if not assignments:
            raise ProxyError(pb.FORBIDDEN, "no readable queue")
        return rpc.QueryAssignmentResponse(status=OK_STATUS, assignments=assignments)
