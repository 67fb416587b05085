"""Name server request handlers.

RocketMQ counterpart: ``DefaultRequestProcessor`` of the name server (and
``ClusterTestRequestProcessor``'s plain behaviour): broker registration, routes, cluster
info, topic lists and the KV config codes (protocol.md §5 "Name server", §7.9, §8.1-8.3).
"""

from __future__ import annotations

import time
import zlib

import structlog

from broker.namesrv.kv_config import ORDER_TOPIC_CONFIG, KVConfig
from broker.namesrv.route_table import RouteTable
from remoting.bodies import DataVersion, KVTable, RegisterBrokerBody, TopicList
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.headers import (
    AddWritePermResponseHeader,
    BrokerNameRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    TopicRequestHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermResponseHeader,
)
from remoting.route import dumps, loads

log = structlog.get_logger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ok(request: RemotingCommand, body: bytes | None = None) -> RemotingCommand:
    return response_to(request, ResponseCode.SUCCESS, None, body=body)


class NamesrvProcessor:
    """Handlers for every code a name server answers."""

    def __init__(self, routes: RouteTable, kv: KVConfig, *, order_message_enable: bool) -> None:
        self.routes = routes
        self.kv = kv
        self.order_message_enable = order_message_enable

    def register(self, table: ProcessorTable) -> None:
        # Java runs these on one "remoting" pool; they only touch memory, so one loop lane.
        lane = Lane("namesrv", workers=1, capacity=50_000)
        handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.unit_topics,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
        }
        for code, handler in handlers.items():
            table.register(code, handler, lane)

    # ---------------------------------------------------------------- registration

    async def register_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body_bytes
        if h.body_crc32 != 0 and zlib.crc32(body) & 0x7FFFFFFF != h.body_crc32:
            log.warning("register_crc_mismatch", broker_addr=h.broker_addr)
            return response_to(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        try:
            reg = RegisterBrokerBody.decode(body, compressed=h.compressed)
        except (ValueError, KeyError, TypeError, zlib.error) as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"register body is malformed: {exc}"
            )
        result = self.routes.register_broker(
            cluster=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
            ha_server_addr=h.ha_server_addr,
            topics=reg.topic_config.topic_config_table,
            data_version=reg.topic_config.data_version,
            filter_servers=reg.filter_server_list,
            peer=conn,
            now_ms=_now_ms(),
        )
        header = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        order = self.kv.namespace(ORDER_TOPIC_CONFIG)
        return response_to(
            request,
            ResponseCode.SUCCESS,
            None,
            header.to_ext_fields(),
            KVTable(order).encode() if order else None,
        )

    async def query_data_version(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        version = DataVersion.from_json(loads(request.body_bytes or b"{}"))
        changed = self.routes.is_version_changed(h.broker_addr, version)
        if not changed:
            self.routes.touch(h.broker_addr, _now_ms())
        header = QueryDataVersionResponseHeader(changed=changed)
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def unregister_broker(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = UnregisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.unregister_broker(
            cluster=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
        )
        return _ok(request)

    # ---------------------------------------------------------------------- routes

    async def get_route(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.routes.pick_topic_route(h.topic)
        if route is None:
            return response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {h.topic}\n"
                "See http://rocketmq.apache.org/docs/faq/ for further details.",
            )
        if self.order_message_enable:
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, h.topic)
        return _ok(request, route.encode())

    async def cluster_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, dumps(self.routes.cluster_info_json()))

    async def all_topics(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, TopicList(self.routes.all_topics()).encode())

    async def topics_by_cluster(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return _ok(request, TopicList(self.routes.topics_of_cluster(h.cluster)).encode())

    async def system_topics(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topics, addr = self.routes.system_topics()
        return _ok(request, TopicList(topics, addr).encode())

    async def unit_topics(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        # Unit (multi-datacenter) topics carry topicSysFlag bits; we list them the same way.
        flag_bits = {
            RequestCode.GET_UNIT_TOPIC_LIST: 0x1,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: 0x2,
        }.get(RequestCode(request.code))
        topics = []
        for topic, per_broker in sorted(self.routes.topic_queue_table.items()):
            flags = [qd.topic_sys_flag for qd in per_broker.values()]
            if flag_bits is None:
                if any(f & 0x2 and not f & 0x1 for f in flags):
                    topics.append(topic)
            elif any(f & flag_bits for f in flags):
                topics.append(topic)
        return _ok(request, TopicList(topics).encode())

    async def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.delete_topic(h.topic, h.cluster_name)
        log.info("topic_deleted_in_namesrv", topic=h.topic, cluster=h.cluster_name)
        return _ok(request)

    async def wipe_write_perm(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerNameRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.change_write_perm(h.broker_name, wipe=True)
        log.info("write_perm_wiped", broker_name=h.broker_name, topics=count)
        header = WipeWritePermResponseHeader(wipe_topic_count=count)
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def add_write_perm(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerNameRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.change_write_perm(h.broker_name, wipe=False)
        log.info("write_perm_added", broker_name=h.broker_name, topics=count)
        header = AddWritePermResponseHeader(add_topic_count=count)
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    # ------------------------------------------------------------------------- KV

    async def put_kv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(request.ext_fields)
        if h.value is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "the custom field <value> is null"
            )
        self.kv.put(h.namespace, h.key, h.value)
        return _ok(request)

    async def get_kv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv.get(h.namespace, h.key)
        if value is None:
            return response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {h.namespace} Key: {h.key}",
            )
        header = GetKVConfigResponseHeader(value=value)
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def delete_kv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.delete(h.namespace, h.key)
        return _ok(request)

    async def kv_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        kv = self.kv.namespace(h.namespace)
        if kv is None:
            return response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {h.namespace}",
            )
        return _ok(request, KVTable(kv).encode())
