"""Client and consumer management: heartbeats, consumer lists, offsets.

RocketMQ counterpart: ``ClientManageProcessor`` (HEART_BEAT, UNREGISTER_CLIENT,
CHECK_CLIENT_CONFIG) and ``ConsumerManageProcessor`` (GET_CONSUMER_LIST_BY_GROUP,
QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET); protocol.md §7.4, §8.5, §13.2.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from broker.clients import ClientChannel
from broker.facets import Clients, HasConfig, HasStore, Routed, Tables
from broker.filter_sql import SqlFilterError, compile_sql
from broker.offsets import OFFER_TAKEN
from broker.subscriptions import check_group_name, group_refusal
from broker.topics import retry_topic
from remoting.bodies import (
    MALFORMED_BODY,
    PERM_READ,
    PERM_WRITE,
    HeartbeatData,
    SubscriptionData,
    encode_consumer_list,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import (
    ConsumerGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from remoting.route import loads

log = structlog.get_logger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class OffsetRelay(Protocol):
    """A slave's record of offsets its clients committed, offered to the master later."""

    def client_committed(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class ClientBroker(HasConfig, Tables, Clients, HasStore, Routed, Protocol):
    """What client management touches: the client tables and offsets, the groups and their
    retry topics, the SQL92 switch, and a slave's record of commits it took."""

    @property
    def slave_sync(self) -> OffsetRelay | None: ...


class ClientProcessor:
    def __init__(self, broker: ClientBroker) -> None:
        self.broker = broker

    async def heartbeat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Register the client's consumer groups (creating their retry topics) and its
        producer groups; answer once those retry topics are routed."""
        try:
            hb = HeartbeatData.decode(request.body_bytes or b"{}")
        except MALFORMED_BODY as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"heartbeat body is malformed: {exc}"
            )
        broker = self.broker
        channel = ClientChannel(
            hb.client_id, request.language, request.version, _now_ms(), conn.peer
        )
        refused = self._register_consumers(conn, channel, hb)
        for group in hb.producer_data_set:
            broker.producers.register(group, conn, channel)
        if refused:
            log.warning("heartbeat_group_refused", client_id=hb.client_id, reasons=refused)
            response = response_to(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "; ".join(refused)
            )
        else:
            response = response_to(request, ResponseCode.SUCCESS)
        if broker.registration.unsettled:
            # A group's retry topic created by this heartbeat is routed before the consumer
            # hears back: a client that starts by asking for it must not get TOPIC_NOT_EXIST.
            return broker.registration.reply_when_routed(
                conn,
                request,
                response,
                *(
                    retry_topic(data.group_name)
                    for data in hb.consumer_data_set
                    if check_group_name(data.group_name) is None
                ),
            )
        return response

    def _register_consumers(
        self, conn: Connection, channel: ClientChannel, hb: HeartbeatData
    ) -> list[str]:
        """Register each consumer group of the heartbeat, its retry topic created where the
        group exists; the reasons for the groups refused by name."""
        broker = self.broker
        refused: list[str] = []
        for data in hb.consumer_data_set:
            reason = check_group_name(data.group_name)
            if reason is not None:
                # Not registered (RocketMQ 5 skips it too), but the client hears why; the
                # rest of the heartbeat, its producers included, still counts.
                refused.append(reason)
                continue
            group_cfg = broker.subscription_groups.find(data.group_name)
            notify = True
            if group_cfg is not None:
                notify = group_cfg.notify_consumer_ids_changed_enable
                sys_flag = 1 if data.unit_mode else 0
                broker.topics.create_internal(
                    retry_topic(data.group_name),
                    group_cfg.retry_queue_nums,
                    PERM_READ | PERM_WRITE,
                    sys_flag,
                )
            broker.consumers.register(
                data.group_name,
                conn,
                channel,
                consume_type=data.consume_type,
                message_model=data.message_model,
                consume_from_where=data.consume_from_where,
                subscriptions=data.subscription_data_set,
                notify=notify,
            )
        return refused

    async def unregister(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        if h.producer_group:
            broker.producers.unregister(h.producer_group, conn)
        if h.consumer_group:
            cfg = broker.subscription_groups.table.get(h.consumer_group)
            notify = cfg.notify_consumer_ids_changed_enable if cfg is not None else True
            broker.consumers.unregister(h.consumer_group, conn, notify=notify)
        return response_to(request, ResponseCode.SUCCESS)

    async def check_client_config(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        try:
            doc = loads(request.body_bytes or b"{}")
            sub_doc = doc.get("subscriptionData")
            sub = SubscriptionData.from_json(sub_doc) if sub_doc else None
        except MALFORMED_BODY as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"check client body is malformed: {exc}"
            )
        if sub is None or sub.expression_type.upper() == "TAG":
            return response_to(request, ResponseCode.SUCCESS)
        if sub.expression_type.upper() != "SQL92" or not self.broker.config.enable_property_filter:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        try:
            compile_sql(sub.sub_string)
        except SqlFilterError as exc:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"the SQL92 expression {sub.sub_string!r} does not parse: {exc}",
            )
        return response_to(request, ResponseCode.SUCCESS)

    # ---------------------------------------------------------------- consumer manage

    async def consumer_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = ConsumerGroupRequestHeader.from_ext_fields(request.ext_fields)
        info = self.broker.consumers.get(h.consumer_group)
        if info is not None:
            ids = info.client_ids()
            if ids:
                return response_to(
                    request, ResponseCode.SUCCESS, None, body=encode_consumer_list(ids)
                )
        return response_to(
            request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}"
        )

    async def query_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        offset = broker.offsets.query(h.consumer_group, h.topic, h.queue_id)
        if offset < 0:
            # A new group: start at 0 if the queue still starts at 0 and that message is
            # still in memory (RocketMQ's rule; an empty or unknown queue answers 0 too).
            store = broker.store
            if store.get_min_offset(
                h.topic, h.queue_id
            ) <= 0 and not store.check_in_disk_by_consume_offset(h.topic, h.queue_id, 0):
                offset = 0
            else:
                return response_to(
                    request,
                    ResponseCode.QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
        ext = OffsetResponseHeader(offset=offset).to_ext_fields()
        return response_to(request, ResponseCode.SUCCESS, None, ext)

    async def update_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        refusal = group_refusal(request, h.consumer_group)
        if refusal is not None:
            return refusal
        broker = self.broker
        if h.offset_version_timestamp is not None or h.offset_version_counter is not None:
            # A slave offers what a client committed to it while this master was away.
            since = (h.offset_version_timestamp or 0, h.offset_version_counter or 0)
            declined = broker.offsets.take_over(
                h.consumer_group, h.topic, h.queue_id, h.commit_offset, since
            )
            return response_to(request, ResponseCode.SUCCESS, declined or OFFER_TAKEN)
        broker.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if broker.slave_sync is not None:  # a slave: offered to the master when it is back
            broker.slave_sync.client_committed(
                h.consumer_group, h.topic, h.queue_id, h.commit_offset
            )
        return response_to(request, ResponseCode.SUCCESS)
