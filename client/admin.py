"""``Admin``: look messages up, by id or by key, across every broker of a topic.

RocketMQ counterpart: ``MQAdminImpl`` as used by ``DefaultMQAdminExt`` and ``mqadmin
queryMsgById / queryMsgByKey / queryMsgByUniqueKey``:

- an *offset message id* (``SendResult.offset_msg_id``; store host + commit-log offset) names
  its broker and position, so it is read with VIEW_MESSAGE_BY_ID (33) from that broker;
- a *unique key* (``SendResult.msg_id``, the UNIQ_KEY a producer gives each message) and a
  business *key* are found through the brokers' index files with QUERY_MESSAGE (12), asking
  the master of every broker that serves the topic. The index keeps hashes only, so answers
  are filtered again here by the key itself, as the Java client does.

Usage::

    async with Admin(namesrv="127.0.0.1:9876") as admin:
        msg = await admin.view_message(result.offset_msg_id)
        same = await admin.query_by_unique_key("orders", result.msg_id)
        found = await admin.query_by_key("orders", "order-1", max_num=32)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import codec
from client.errors import (
    ClientError,
    InvalidArgumentError,
    InvalidMessageError,
    MessageDecodeError,
    NoRouteError,
    ResponseDecodeError,
    reading_answer,
)
from client.instance import DEFAULT_TOPIC, ClientInstance, TlsOption, namesrv_from_env
from client.message import UNIQ_IDS, MessageView, check_topic, decode_messages
from client.service import ClientService
from client.trace import TRACE_TOPIC, TraceView, trace_views
from codec import (
    PROPERTY_KEYS,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    looks_like_offset_msg_id,
)
from codec.hashing import java_hashmap_order
from remoting.acl import SessionCredentials
from remoting.bodies import (
    MALFORMED_BODY,
    AclConfigBody,
    BrokerStatsData,
    ConsumeMessageDirectlyResult,
    ConsumeStats,
    GroupList,
    KVTable,
    OffsetWrapper,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicConfigWrapper,
    TopicList,
    TopicOffset,
    decode_consume_stats,
    decode_consume_stats_list,
    decode_reset_offset_body,
    decode_topic_stats,
    pop_queue_map,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BrokerError, RemotingError, RocketMQError
from remoting.headers import (
    AddWritePermResponseHeader,
    BrokerNameRequestHeader,
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupRequestHeader,
    ConsumerRunningInfoRequestHeader,
    CreateAccessConfigRequestHeader,
    CreateTopicRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigResponseHeader,
    GroupNameRequestHeader,
    KVConfigRequestHeader,
    OffsetResponseHeader,
    ProducerGroupRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueueRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    TopicRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
    WipeWritePermResponseHeader,
)
from remoting.receipt import RETRY_PREFIX
from remoting.route import BrokerData, MessageQueue, TopicRouteData, dumps, loads

log = logging.getLogger(__name__)

_NAMESRV = "the name server"  # who answered a request sent to the name servers
# no name server answered, or its cluster table cannot be read
_CLUSTER_INFO_UNAVAILABLE: tuple[type[Exception], ...] = (RemotingError, *MALFORMED_BODY)

ORDER_NS = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
QUERY_TIMEOUT_S = 5.0
ADMIN_TIMEOUT_S = 10.0
TOOLS_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP: mqadmin's reads
MAX_QUERY_NUM = 64  # the broker caps maxNum here

TimeSide = Literal["first_at_or_after", "first_after"]
"""Which message a search by time lands on (``Admin.offset_for_time``)."""


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(``ip:port`` of the storing broker, commit-log offset) from an offset message id.

    Raises:
        InvalidMessageError: not 32 (IPv4) or 56 (IPv6) hex digits, or no broker position.
    """
    try:
        host, offset = codec.decode_offset_msg_id(msg_id)
    except ValueError as exc:
        raise InvalidMessageError(str(exc)) from None
    if not 0 < host[1] < 65536 or offset < 0:
        raise InvalidMessageError(f"offset message id {msg_id!r} names no broker position")
    return codec.host_text(host), offset


class Admin(ClientService):
    """Message lookups; ``async with`` starts and shuts it down."""

    def __init__(
        self,
        namesrv: str | None = None,
        *,
        instance_name: str | None = None,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv = namesrv_from_env(namesrv)
        self.instance_name = instance_name
        self.tls = tls
        self.credentials = credentials
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        if self._instance is None:
            self._instance = await ClientInstance.acquire(
                self.namesrv, self.instance_name, tls=self.tls, credentials=self.credentials
            )

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.release()

    def _describe(self) -> str:
        return "the admin client"

    # ------------------------------------------------------------------------ lookups

    async def view_message(self, offset_msg_id: str) -> MessageView:
        """The message an offset message id names.

        Raises:
            InvalidMessageError: the id is malformed.
            BrokerError: the broker has no message there (its remark says so).
            RemotingError: the broker could not be reached (a timeout names it and the wait).
            ResponseDecodeError: it answered without a readable message.
        """
        addr, offset = decode_offset_msg_id(offset_msg_id)
        instance = self._running()
        request = RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset).to_ext_fields()
        )
        response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(
                response.code, response.remark, request_code=request.code, addr=addr
            )
        msgs = decode_messages(response.body_bytes, await self.broker_name_of(addr))
        if not msgs:
            raise ResponseDecodeError(
                f"no message {offset_msg_id} in the answer", request_code=request.code, addr=addr
            )
        return msgs[0]

    async def query_by_unique_key(self, topic: str, msg_id: str) -> MessageView | None:
        """The message of ``topic`` whose client id (UNIQ_KEY, ``SendResult.msg_id``) is
        ``msg_id``; None when no broker has it. Of several copies (a message sent twice by a
        retrying producer), the first stored."""
        found = await self._query(topic, msg_id, MAX_QUERY_NUM, 0, 2**63 - 1, unique=True)
        matches = [m for m in found if m.msg_id == msg_id]
        if not matches:
            return None
        return min(matches, key=lambda m: m.store_timestamp)

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageView]:
        """Messages of ``topic`` carrying business key ``key`` stored within
        [``begin_ms``, ``end_ms``] (epoch ms; default all time), at most ``max_num`` per
        broker (the broker's cap is 64), oldest first."""
        if not key or " " in key:
            raise InvalidMessageError(f"key {key!r} must be a non-empty string without spaces")
        if not 1 <= max_num <= MAX_QUERY_NUM:
            raise InvalidMessageError(f"max_num must be within 1..{MAX_QUERY_NUM}, not {max_num}")
        end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        if begin_ms > end:
            raise InvalidMessageError(f"begin_ms {begin_ms} is after end_ms {end}")
        found = await self._query(topic, key, max_num, begin_ms, end, unique=False)
        return sorted(
            (m for m in found if key in m.keys), key=lambda m: (m.store_timestamp, m.msg_id)
        )

    async def query_trace(
        self,
        msg_id: str,
        trace_topic: str = TRACE_TOPIC,
        *,
        max_num: int = MAX_QUERY_NUM,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[TraceView]:
        """The trace of message ``msg_id`` (the id its producer gave it): the records traced
        clients wrote about it to ``trace_topic`` — its sends, each consume's start and end,
        its transaction's end — oldest trace message first (``queryMsgTraceById``)."""
        found = await self.query_by_key(
            trace_topic, msg_id, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
        )
        return trace_views(
            msg_id, ((m.body.decode("utf-8", "replace"), m.born_host) for m in found)
        )

    async def message_tracks(self, m: MessageView) -> list[MessageTrack]:
        """``messageTrackDetail``: for each group that reads the message's topic (in Java's
        HashMap order, as mqadmin prints them), whether it consumed the message, has not
        yet, is not online, or pulls (and so cannot be told)."""
        tracks = []
        for group in java_hashmap_order(await self.topic_consumed_by(m.topic)):
            kind, why = "UNKNOWN", "null"
            try:
                kind = await self._track_type(m, group)
            except BrokerError as exc:
                if exc.response_code == ResponseCode.CONSUMER_NOT_ONLINE:
                    kind = "NOT_ONLINE"
                why = f"CODE:{exc.response_code} DESC:{exc.remark}"
            except RocketMQError as exc:
                why = str(exc)
            tracks.append(MessageTrack(group, kind, why))
        return tracks

    async def redrive(self, m: MessageView, group: str) -> str:
        """Send a copy of ``m`` to ``group`` alone, as a consumer's send-back does: to
        ``%RETRY%<group>`` with its first topic in RETRY_TOPIC (the group's consumers hand it
        to that topic's listener) and the first one's offset id in ORIGIN_MESSAGE_ID; other groups
        never see it. How a dead letter goes back to its group once the cause is fixed; it
        needs no consumer online. The copy's id.

        Raises:
            NoRouteError: the group has no retry topic (none of its consumers ever ran).
            BrokerError, RemotingError: the broker refused the copy or did not answer.
        """
        retry = f"{RETRY_PREFIX}{group}"
        route = await self.topic_route(retry)
        masters = [
            (bd.master_addr, qd.write_queue_nums)
            for bd in route.broker_datas
            for qd in route.queue_datas
            if qd.broker_name == bd.broker_name and bd.master_addr and qd.write_queue_nums
        ]
        if not masters:
            raise NoRouteError(retry, "no master takes writes for it")
        addr, queues = masters[0]
        uniq = UNIQ_IDS.next_id()
        props = {**m.user_properties, PROPERTY_UNIQ_KEY: uniq, PROPERTY_WAIT: "true"}
        if m.tags:
            props[PROPERTY_TAGS] = m.tags
        if m.keys:
            props[PROPERTY_KEYS] = " ".join(m.keys)
        props[PROPERTY_RETRY_TOPIC] = m.properties.get(PROPERTY_RETRY_TOPIC) or m.topic
        # the broker's send-back keeps the first one, else the original's offset id
        props[PROPERTY_ORIGIN_MESSAGE_ID] = m.properties.get(
            PROPERTY_ORIGIN_MESSAGE_ID, m.offset_msg_id
        )
        header = SendMessageRequestHeader(
            producer_group=TOOLS_GROUP,
            topic=retry,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=queues,
            queue_id=random.randrange(queues),  # noqa: S311 - spreading load, not a secret
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=m.flag,
            properties=codec.encode_properties(props),
            reconsume_times=0,
        )
        await self._call(
            addr,
            RequestCode.SEND_MESSAGE_V2,
            header.to_v2(),
            bytes(m.body),
            what=f"resend {m.msg_id} to {group}",
        )
        return uniq

    async def _track_type(self, m: MessageView, group: str) -> str:
        conns = await self.consumer_connection(group)
        if conns.get("consumeType") == "CONSUME_ACTIVELY":
            return "PULL"
        mq = MessageQueue(m.topic, m.broker_name, m.queue_id)
        if await self.consumer_offset(mq, group) <= m.queue_offset:
            return "NOT_CONSUME_YET"
        sub = (conns.get("subscriptionTable") or {}).get(m.topic) or {}
        tags = set(sub.get("tagsSet") or [])
        filtered = bool(tags) and "*" not in tags and m.tags not in tags
        return "CONSUMED_BUT_FILTERED" if filtered else "CONSUMED"

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique: bool
    ) -> list[MessageView]:
        check_topic(topic, to_send=False)
        instance = self._running()
        route = await instance.update_route(topic)
        if route is None:
            raise NoRouteError(topic, "the name server does not know it")
        targets = [(bd.broker_name, bd.master_addr) for bd in route.broker_datas]
        if not any(addr for _name, addr in targets):
            raise NoRouteError(topic, "no master broker serves it")

        async def ask(broker_name: str, addr: str) -> list[MessageView]:
            header = QueryMessageRequestHeader(
                topic=topic,
                key=key,
                max_num=max_num,
                begin_timestamp=begin_ms,
                end_timestamp=end_ms,
                unique_key_query=unique,
            )
            request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
            try:
                response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("query_broker_failed broker=%s error=%s", broker_name, exc)
                return []
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            if response.code != ResponseCode.SUCCESS:
                raise BrokerError.for_code(
                    response.code,
                    response.remark,
                    request_code=RequestCode.QUERY_MESSAGE,
                    addr=addr,
                    topic=topic,
                )
            try:
                return decode_messages(response.body_bytes, broker_name)
            except MessageDecodeError as exc:
                log.warning("query_answer_undecodable broker=%s error=%s", broker_name, exc)
                return []

        answers = await asyncio.gather(*(ask(name, addr) for name, addr in targets if addr))
        return [m for answer in answers for m in answer if m.topic == topic]

    async def broker_name_of(self, addr: str) -> str:
        """The broker name serving ``addr``: from known routes, else the name server's
        cluster table; "" when neither knows it."""
        instance = self._running()
        for name, addrs in instance.broker_addrs.items():
            if addr in addrs.values():
                return name
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        try:
            response = await instance.invoke_namesrv(request)
            table = loads(response.body_bytes).get("brokerAddrTable", {})
        except _CLUSTER_INFO_UNAVAILABLE as exc:
            log.info("cluster_info_unavailable error=%s", exc)
            return ""
        for name, data in table.items():
            try:
                if addr in BrokerData.from_json(data).broker_addrs.values():
                    return str(name)
            except MALFORMED_BODY:
                continue  # an entry we cannot read names no broker we can match
        return ""

    # ------------------------------------------------------------- operations (mqadmin)

    async def _call(
        self,
        addr: str | None,
        code: RequestCode,
        ext: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        what: str,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to ``addr`` (a broker) or, with None, to the name servers.

        Raises:
            BrokerError: the answer's code is not in ``ok`` (the class of that code, naming
                the request and the address; ``what`` is logged).
            RemotingError: no answer (a timeout names the request, the address and the wait).
        """
        instance = self._running()
        request = RemotingCommand.request(code, ext or {}, body)
        if addr is None:
            response = await instance.invoke_namesrv(request)
        else:
            response = await instance.invoke_broker(addr, request, ADMIN_TIMEOUT_S)
        if response.code not in ok:
            log.info("admin_call_refused what=%s addr=%s code=%s", what, addr, response.code)
            raise BrokerError.for_code(
                response.code, response.remark, request_code=code, addr=addr or _NAMESRV
            )
        return response

    async def _each_namesrv(
        self, code: RequestCode, ext: dict[str, str], body: bytes | None, what: str
    ) -> dict[str, RemotingCommand]:
        """The same request to every name server (they do not share state)."""
        instance = self._running()
        out = {}
        for addr in instance.namesrv_addrs:
            request = RemotingCommand.request(code, dict(ext), body)
            response = await instance.remoting.invoke(addr, request, ADMIN_TIMEOUT_S)
            if response.code != ResponseCode.SUCCESS:
                log.info("admin_call_refused what=%s addr=%s code=%s", what, addr, response.code)
                raise BrokerError.for_code(
                    response.code, response.remark, request_code=code, addr=addr
                )
            out[addr] = response
        return out

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker group and the cluster it belongs to."""
        response = await self._call(None, RequestCode.GET_BROKER_CLUSTER_INFO, what="cluster info")
        with reading_answer(RequestCode.GET_BROKER_CLUSTER_INFO, _NAMESRV):
            doc = loads(response.body_bytes)
            brokers = {
                str(name): BrokerData.from_json(data)
                for name, data in (doc.get("brokerAddrTable") or {}).items()
            }
            clusters = {
                str(c): sorted(str(n) for n in names)
                for c, names in (doc.get("clusterAddrTable") or {}).items()
            }
        return ClusterInfo(brokers, clusters)

    async def masters(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Broker addresses a command runs on: ``broker_addr`` alone, or every master of
        ``cluster`` (mqadmin's ``-b`` / ``-c``).

        Raises:
            ClientError: neither given, or the cluster is unknown or has no master.
        """
        if broker_addr:
            return [broker_addr]
        if not cluster:
            raise ClientError("name a broker address (-b) or a cluster (-c)")
        info = await self.cluster_info()
        require_cluster(info, cluster)
        addrs = [
            info.brokers[n].master_addr
            for n in info.clusters[cluster]
            if n in info.brokers and info.brokers[n].master_addr
        ]
        if not addrs:
            raise ClientError(f"cluster {cluster!r} has no master broker")
        return sorted(a for a in addrs if a)

    async def topic_list(self) -> list[str]:
        response = await self._call(
            None, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, what="topic list"
        )
        with reading_answer(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, _NAMESRV):
            return sorted(TopicList.decode(response.body_bytes).topic_list)

    async def topic_route(self, topic: str) -> TopicRouteData:
        check_topic(topic, to_send=False)
        route = await self._running().update_route(topic)
        if route is None:
            raise NoRouteError(topic, "the name server has no route for it")
        return route

    async def create_topic(
        self, addr: str, config: TopicConfig, *, attributes: str | None = None
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC; ``attributes`` as RocketMQ 5's ``-a`` takes them
        (``+message.type=FIFO``; None leaves a topic's attributes as they are)."""
        header = CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic="TBW102",
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            attributes=attributes,
        )
        await self._call(
            addr,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            header.to_ext_fields(),
            what=f"create topic {config.topic_name}",
        )

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """Delete ``topic`` from every master of ``cluster`` and from every name server."""
        addrs = await self.masters(cluster=cluster)
        header = TopicRequestHeader(topic=topic)
        for addr in addrs:
            await self._call(
                addr,
                RequestCode.DELETE_TOPIC_IN_BROKER,
                header.to_ext_fields(),
                what=f"delete topic {topic}",
            )
        await self._each_namesrv(
            RequestCode.DELETE_TOPIC_IN_NAMESRV,
            header.to_ext_fields(),
            None,
            f"delete topic {topic}",
        )
        return addrs

    async def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Min and max offset and last update time of every queue of ``topic``."""
        route = await self.topic_route(topic)
        out: dict[MessageQueue, TopicOffset] = {}
        for bd in route.broker_datas:
            if not bd.master_addr:
                continue
            response = await self._call(
                bd.master_addr,
                RequestCode.GET_TOPIC_STATS_INFO,
                TopicRequestHeader(topic=topic).to_ext_fields(),
                what=f"stats of topic {topic}",
            )
            with reading_answer(RequestCode.GET_TOPIC_STATS_INFO, bd.master_addr):
                out.update(decode_topic_stats(response.body_bytes))
        return dict(sorted(out.items()))

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        await self._call(
            addr,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            {},
            dumps(config.to_json()),
            what=f"create subscription group {config.group_name}",
        )

    async def delete_subscription_group(
        self, addr: str, group: str, *, remove_offset: bool = False
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP; ``remove_offset`` drops the group's offsets too."""
        await self._call(
            addr,
            RequestCode.DELETE_SUBSCRIPTIONGROUP,
            GroupNameRequestHeader(group_name=group, remove_offset=remove_offset).to_ext_fields(),
            what=f"delete subscription group {group}",
        )

    async def subscription_groups(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        response = await self._call(
            addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, what="subscription groups"
        )
        with reading_answer(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, addr):
            table = loads(response.body_bytes).get("subscriptionGroupTable") or {}
            return {str(k): SubscriptionGroupConfig.from_json(v) for k, v in table.items()}

    async def all_masters(self) -> list[str]:
        info = await self.cluster_info()
        return sorted(b.master_addr for b in info.brokers.values() if b.master_addr)

    async def consume_stats(
        self, group: str, topic: str | None = None
    ) -> tuple[float, dict[MessageQueue, OffsetWrapper]]:
        """Per queue: the broker's max offset, the group's offset, and the store time of the
        last consumed message, from every master (mqadmin consumerProgress)."""
        tps = 0.0
        table: dict[MessageQueue, OffsetWrapper] = {}
        ext = GetConsumeStatsRequestHeader(
            consumer_group=group, topic=topic or None
        ).to_ext_fields()
        for addr in await self.all_masters():
            response = await self._call(
                addr, RequestCode.GET_CONSUME_STATS, ext, what=f"progress of group {group}"
            )
            with reading_answer(RequestCode.GET_CONSUME_STATS, addr):
                part_tps, part = decode_consume_stats(response.body_bytes)
            tps += part_tps
            table.update(part)
        return tps, dict(sorted(table.items()))

    async def all_producer_info(self, addr: str) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO (RocketMQ 4.9.4+): every producer group's instances on a
        broker, as it listed them (clientId, remoteIP, language, version,
        lastUpdateTimestamp)."""
        response = await self._call(
            addr, RequestCode.GET_ALL_PRODUCER_INFO, what="producer instances"
        )
        doc = _json_object(response.body_bytes, RequestCode.GET_ALL_PRODUCER_INFO, addr)
        data = doc.get("data") or {}
        return {str(g): list(v or []) for g, v in data.items()} if isinstance(data, dict) else {}

    async def consume_stats_at(self, addr: str, group: str) -> dict[MessageQueue, OffsetWrapper]:
        """GET_CONSUME_STATS of every topic of ``group`` on one broker, in the order it
        answered."""
        ext = GetConsumeStatsRequestHeader(consumer_group=group, topic=None).to_ext_fields()
        response = await self._call(
            addr, RequestCode.GET_CONSUME_STATS, ext, what=f"progress of group {group}"
        )
        with reading_answer(RequestCode.GET_CONSUME_STATS, addr):
            return decode_consume_stats(response.body_bytes)[1]

    async def consumer_connection(self, group: str) -> dict[str, Any]:
        """The group's online clients and subscriptions, from the first master that has
        them (mqadmin consumerConnection).

        Raises:
            BrokerError: CONSUMER_NOT_ONLINE, no broker has the group online (the remark is
                the last broker's: "the consumer group[<group>] not online").
            ClientError: there is no master to ask.
        """
        code = RequestCode.GET_CONSUMER_CONNECTION_LIST
        refusal: RemotingCommand | None = None
        addr = ""
        for addr in await self.all_masters():
            response = await self._call(
                addr,
                code,
                ConsumerGroupRequestHeader(consumer_group=group).to_ext_fields(),
                what=f"connections of consumer group {group}",
                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code == ResponseCode.SUCCESS:
                return _json_object(response.body_bytes, code, addr)
            refusal = response
        if refusal is None:
            raise ClientError(f"consumer group {group}: no master broker to ask")
        raise BrokerError.for_code(refusal.code, refusal.remark, request_code=code, addr=addr)

    async def consumer_running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """One online consumer's own account of itself: settings, subscriptions and each
        queue's offsets and cache (``ConsumerRunningInfo``; mqadmin consumerStatus). The
        ``mqTable`` comes back as a list of objects with ``topic``/``brokerName``/
        ``queueId`` added.

        Raises:
            RocketMQError: the client is not online (the last master's refusal, a
                BrokerError), or no master answered (a RemotingError); a ClientError when
                there is no master to ask.
        """
        ext = ConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=False
        ).to_ext_fields()
        last: RocketMQError | None = None
        for addr in await self.all_masters():
            try:
                response = await self._call(
                    addr,
                    RequestCode.GET_CONSUMER_RUNNING_INFO,
                    ext,
                    what=f"status of consumer {client_id}",
                )
            except RocketMQError as exc:  # refused or unreachable there: ask the next master
                last = exc
                continue
            with reading_answer(RequestCode.GET_CONSUMER_RUNNING_INFO, addr):
                rest, table = pop_queue_map(bytes(response.body_bytes).decode(), "mqTable")
                doc: dict[str, Any] = loads(rest)
                doc["mqTable"] = [
                    {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, **v}
                    for mq, v in sorted(table.items())
                ]
            return doc
        raise last or ClientError(f"consumer {client_id} of {group}: no broker to ask")

    async def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> ConsumeMessageDirectlyResult:
        """Hand one stored message to one online consumer of ``group`` to consume now, and
        say how its listener took it (mqadmin queryMsgById ``-g -d``; the console's
        "consume on a client"). Nothing is committed: the message stays where it is.

        ``msg_id`` is an offset message id, or, with ``topic``, either kind (as
        ``DefaultMQAdminExt.consumeMessageDirectly``): a unique id is looked up first.

        Raises:
            InvalidMessageError: ``msg_id`` is no offset id and no topic was given.
            ClientError: no message of ``topic`` has that unique id.
            BrokerError: the client is not online, is not of the group, or could not
                consume it (the remark, from the broker or the client, says which).
            RemotingError: the broker could not be reached.
        """
        offset_id = msg_id
        if topic is not None and not looks_like_offset_msg_id(msg_id):
            found = await self.query_by_unique_key(topic, msg_id)
            if found is None:
                raise ClientError(f"no message {msg_id} in topic {topic} on any broker")
            offset_id = found.offset_msg_id
        addr, _offset = decode_offset_msg_id(offset_id)
        ext = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=offset_id, topic=topic
        ).to_ext_fields()
        response = await self._call(
            addr,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            ext,
            what=f"consume {offset_id} on {client_id}",
        )
        with reading_answer(RequestCode.CONSUME_MESSAGE_DIRECTLY, addr):
            return ConsumeMessageDirectlyResult.decode(response.body_bytes)

    async def producer_connection(self, group: str, topic: str) -> list[dict[str, Any]]:
        """The group's producer connections on the brokers of ``topic``."""
        route = await self.topic_route(topic)
        seen: dict[str, dict[str, Any]] = {}
        for bd in route.broker_datas:
            if not bd.master_addr:
                continue
            response = await self._call(
                bd.master_addr,
                RequestCode.GET_PRODUCER_CONNECTION_LIST,
                ProducerGroupRequestHeader(producer_group=group).to_ext_fields(),
                what=f"connections of producer group {group}",
                ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if response.code == ResponseCode.SUCCESS:
                with reading_answer(RequestCode.GET_PRODUCER_CONNECTION_LIST, bd.master_addr):
                    for c in loads(response.body_bytes).get("connectionSet") or []:
                        seen[str(c.get("clientId"))] = c
        if not seen:
            raise ClientError(f"producer group {group} has no connection on the brokers of {topic}")
        return [seen[k] for k in sorted(seen)]

    # ------------------------------------------------------------------- statistics

    async def broker_stats(self, addr: str, name: str, key: str) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: statistic ``name`` (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``
        …) of ``key`` (a topic, ``topic@group``) over the last minute, hour and day; None
        when the broker has none (it answers SYSTEM_ERROR "The stats … not exist")."""
        response = await self._call(
            addr,
            RequestCode.VIEW_BROKER_STATS_DATA,
            ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key).to_ext_fields(),
            what=f"stats {name} {key}",
            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        with reading_answer(RequestCode.VIEW_BROKER_STATS_DATA, addr):
            return BrokerStatsData.decode(response.body_bytes)

    async def broker_consume_stats(
        self, addr: str, *, is_order: bool = False
    ) -> tuple[list[tuple[str, list[ConsumeStats]]], int]:
        """GET_BROKER_CONSUME_STATS: every group's positions on the broker at ``addr``
        (orderly topics only with ``is_order``), and their total diff."""
        response = await self._call(
            addr,
            RequestCode.GET_BROKER_CONSUME_STATS,
            GetConsumeStatsInBrokerHeader(is_order=is_order).to_ext_fields(),
            what="broker consume stats",
        )
        with reading_answer(RequestCode.GET_BROKER_CONSUME_STATS, addr):
            _addr, groups, total = decode_consume_stats_list(response.body_bytes)
        return groups, total

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on the first broker of the topic's route, as mqadmin
        asks it: the groups online with a subscription to it or with offsets in it."""
        route = await self.topic_route(topic)
        for bd in route.broker_datas:
            addr = bd.master_addr or next(iter(bd.broker_addrs.values()), None)
            if addr is None:
                continue
            response = await self._call(
                addr,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                TopicRequestHeader(topic=topic).to_ext_fields(),
                what=f"groups of {topic}",
            )
            with reading_answer(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, addr):
                return GroupList.decode(response.body_bytes).groups
        return []

    async def system_topics(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's own topics."""
        response = await self._call(
            addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, what="system topics"
        )
        with reading_answer(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, addr):
            return TopicList.decode(response.body_bytes).topic_list

    async def clean_unused_topic(self, addr: str) -> None:
        """CLEAN_UNUSED_TOPIC: the broker drops consume queues of topics it no longer has."""
        await self._call(addr, RequestCode.CLEAN_UNUSED_TOPIC, what="clean unused topics")

    async def acl_config(self, addr: str) -> AclConfigBody:
        """GET_BROKER_CLUSTER_ACL_CONFIG: the ACL file's accounts and global white list (an
        admin's read: secret keys included)."""
        response = await self._call(
            addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, what="acl config"
        )
        with reading_answer(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, addr):
            return AclConfigBody.decode(response.body_bytes)

    async def runtime_info(self, addr: str) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, what="broker status")
        with reading_answer(RequestCode.GET_BROKER_RUNTIME_INFO, addr):
            return KVTable.decode(response.body_bytes).table

    async def broker_config(self, addr: str) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_CONFIG, what="broker config")
        return _properties(response.body_bytes)

    async def update_broker_config(self, addr: str, changes: dict[str, str]) -> None:
        await self._call(
            addr,
            RequestCode.UPDATE_BROKER_CONFIG,
            {},
            "".join(f"{k}={v}\n" for k, v in changes.items()).encode(),
            what="update broker config",
        )

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        answers = await self._each_namesrv(
            RequestCode.GET_NAMESRV_CONFIG, {}, None, "name server config"
        )
        return {addr: _properties(r.body_bytes) for addr, r in answers.items()}

    async def update_namesrv_config(self, changes: dict[str, str]) -> list[str]:
        body = "".join(f"{k}={v}\n" for k, v in changes.items()).encode()
        answers = await self._each_namesrv(
            RequestCode.UPDATE_NAMESRV_CONFIG, {}, body, "update name server config"
        )
        return sorted(answers)

    async def write_perm(self, broker_name: str, *, wipe: bool) -> dict[str, int]:
        """Wipe (or give back) ``broker_name``'s write permission on every name server;
        per name server, how many topics it changed."""
        code = (
            RequestCode.WIPE_WRITE_PERM_OF_BROKER if wipe else RequestCode.ADD_WRITE_PERM_OF_BROKER
        )
        ext = BrokerNameRequestHeader(broker_name=broker_name).to_ext_fields()
        answers = await self._each_namesrv(code, ext, None, f"write permission of {broker_name}")
        if wipe:
            return {
                addr: WipeWritePermResponseHeader.from_ext_fields(r.ext_fields).wipe_topic_count
                for addr, r in answers.items()
            }
        return {
            addr: AddWritePermResponseHeader.from_ext_fields(r.ext_fields).add_topic_count
            for addr, r in answers.items()
        }

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (the end of a queue where none is), or with -1 to the end of every
        queue, on every broker of the topic; online consumers are told and pull from there.
        Without ``force`` a queue is only moved back, never forward. Returns where each
        queue now is.

        -1 is mqadmin's ``-s now`` as RocketMQ 4.9's tool sends it: the brokers take their
        max offsets. A time goes to each broker once, which resets every queue of the topic
        and tells the group's online consumers once: an Aerolite broker (and RocketMQ 5)
        to the first message at or after it, a RocketMQ 4.9 broker to the nearest message.
        What each broker answers is what is returned, in the order of the answers (the
        route's brokers, each broker's queues as it listed them)."""
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        header = ResetOffsetRequestHeader(
            topic=topic, group=group, timestamp=timestamp_ms, is_force=force
        )
        for bd in route.broker_datas:
            if not bd.master_addr:
                continue
            response = await self._call(
                bd.master_addr,
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                header.to_ext_fields(),
                what=f"reset offsets of {group} on {topic}",
            )
            with reading_answer(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, bd.master_addr):
                out.update(decode_reset_offset_body(response.body_bytes))
        return out

    async def clone_group_offset(self, src: str, dest: str, topic: str) -> list[str]:
        route = await self.topic_route(topic)
        done = []
        for bd in route.broker_datas:
            if not bd.master_addr:
                continue
            header = CloneGroupOffsetRequestHeader(src_group=src, dest_group=dest, topic=topic)
            await self._call(
                bd.master_addr,
                RequestCode.CLONE_GROUP_OFFSET,
                header.to_ext_fields(),
                what=f"clone offsets of {src} to {dest}",
            )
            done.append(bd.broker_name)
        return done

    async def clean_expired_consume_queue(self, addr: str) -> None:
        await self._call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, what="clean expired CQ")

    async def delete_expired_commit_log(self, addr: str) -> None:
        await self._call(
            addr, RequestCode.DELETE_EXPIRED_COMMITLOG, what="delete expired commit log"
        )

    async def queue_offset(self, mq: MessageQueue, code: RequestCode, timestamp_ms: int = 0) -> int:
        """GET_MAX_OFFSET, GET_MIN_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP of one queue."""
        addr = await self._addr_of(mq)
        header: QueueRequestHeader | SearchOffsetRequestHeader
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            header = SearchOffsetRequestHeader(
                topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms
            )
        else:
            header = QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, code, header.to_ext_fields(), what=f"offset of {mq}")
        # GetMaxOffset-, GetMinOffset- and SearchOffsetResponseHeader: the one field, alike
        return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def offset_for_time(
        self, mq: MessageQueue, timestamp_ms: int, *, side: TimeSide = "first_at_or_after"
    ) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms``
        (``side="first_after"``: stored strictly after it), or the queue's max offset when
        no message is; so a time later than every message gives the end of the queue.

        Used by mqadmin's printMsg (begin: first at or after; end: first after, so the end
        is inclusive) and the Spark connector's ``startingTimestamp`` /
        ``endingTimestamp``. (A PushConsumer's CONSUME_FROM_TIMESTAMP takes the broker's
        answer as it is, as RocketMQ's Java client does.)

        The broker's SEARCH_OFFSET_BY_TIMESTAMP is only a hint. RocketMQ 4.9's
        ``ConsumeQueue.getOffsetInQueueByTime`` (and our broker, which answers as it does)
        returns a message whose store time equals the time if there is one (4.9: any of a run
        of equal times; ours: the first), otherwise the *nearer* of the two neighbours in
        time, ties to the earlier, and the *last* message when every message is older: "now"
        gives max - 1, one message short of the end. RocketMQ 5's ``BoundaryType.LOWER``
        answers first-at-or-after. So the answer is checked against the store times of the
        message it names and the one before (one pull of two), and when it is off, the right
        offset is found by galloping then bisecting over store times, which needs only
        that they do not decrease along a queue. Records retention already removed count as
        older than any time.

        Raises:
            InvalidArgumentError: ``side`` is neither of the two (a ValueError too).
            RemotingError, BrokerError: the queue's broker could not be asked, or refused.
        """
        if side not in ("first_at_or_after", "first_after"):
            raise InvalidArgumentError(
                f"side must be 'first_at_or_after' or 'first_after', not {side!r}"
            )
        # store times are whole milliseconds: "after t" is "at or after t + 1"
        ts = timestamp_ms + 1 if side == "first_after" else timestamp_ms
        guess = await self.queue_offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ts)
        return await _StoreTimeSearch(self, mq, ts).run(guess)

    async def _master_of(self, mq: MessageQueue) -> str:
        """The master of ``mq``'s broker (consumer offsets live there), from the route."""
        addr = self._running().master_addr(mq.broker_name)
        if addr is None:
            await self.topic_route(mq.topic)
            addr = self._running().master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"broker {mq.broker_name} has no master in the route of {mq.topic}")
        return addr

    async def _addr_of(self, mq: MessageQueue) -> str:
        instance = self._running()
        addr = instance.read_addr(mq.broker_name)
        if addr is None:
            await self.topic_route(mq.topic)
            addr = instance.read_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"broker {mq.broker_name} is not in the route of {mq.topic}")
        return addr

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        group: str = TOOLS_GROUP,
        *,
        expression: str = "*",
        expression_type: str = "TAG",
    ) -> tuple[list[MessageView], int, int]:
        """Messages of one queue from ``offset`` (no suspension): (messages, next offset,
        the queue's max offset)."""
        got = await self.pull_batch(
            mq, offset, max_nums, group, expression=expression, expression_type=expression_type
        )
        return got.messages, got.next_offset, got.max_offset

    async def pull_batch(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        group: str = TOOLS_GROUP,
        *,
        expression: str = "*",
        expression_type: str = "TAG",
    ) -> PulledBatch:
        """One pull of ``mq`` at ``offset`` with the broker's whole answer. ``expression``
        filters at the broker (a tag expression, or SQL92 with ``expression_type="SQL92"``);
        the next offset then skips what it dropped. An offset below the queue's minimum
        (retention deleted it) answers ``moved`` with the minimum as the next offset."""
        addr = await self._addr_of(mq)
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=0x4,  # the subscription travels with the request
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription=expression,
            sub_version=0,
            expression_type=expression_type,
        )
        response = await self._call(
            addr,
            RequestCode.PULL_MESSAGE,
            header.to_ext_fields(),
            what=f"read {mq} at {offset}",
            ok=(
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED,
            ),
        )
        answer = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        messages = (
            decode_messages(response.body_bytes, mq.broker_name)
            if response.code == ResponseCode.SUCCESS
            else []
        )
        return PulledBatch(
            messages,
            answer.next_begin_offset,
            answer.min_offset,
            answer.max_offset,
            _PULL_STATUS[response.code],
        )

    async def consumer_offset(self, mq: MessageQueue, group: str) -> int:
        """``group``'s committed offset in ``mq`` on its master, -1 when it has none."""
        addr = await self._master_of(mq)
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id
        )
        response = await self._call(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            header.to_ext_fields(),
            what=f"offset of {group} in {mq}",
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return -1
        return QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def commit_consumer_offset(self, mq: MessageQueue, group: str, offset: int) -> None:
        """Store ``offset`` (the next to consume) as ``group``'s position in ``mq``, as a
        consumer's periodic UPDATE_CONSUMER_OFFSET does; lag tools read it from there."""
        addr = await self._master_of(mq)
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        await self._call(
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            header.to_ext_fields(),
            what=f"commit offset {offset} of {group} in {mq}",
        )

    async def put_kv(self, namespace: str, key: str, value: str) -> list[str]:
        header = KVConfigRequestHeader(namespace=namespace, key=key, value=value)
        answers = await self._each_namesrv(
            RequestCode.PUT_KV_CONFIG, header.to_ext_fields(), None, f"put {namespace}/{key}"
        )
        return sorted(answers)

    async def delete_kv(self, namespace: str, key: str) -> list[str]:
        header = KVConfigRequestHeader(namespace=namespace, key=key)
        answers = await self._each_namesrv(
            RequestCode.DELETE_KV_CONFIG, header.to_ext_fields(), None, f"delete {namespace}/{key}"
        )
        return sorted(answers)

    async def get_kv(self, namespace: str, key: str) -> str | None:
        header = KVConfigRequestHeader(namespace=namespace, key=key)
        response = await self._call(
            None,
            RequestCode.GET_KV_CONFIG,
            header.to_ext_fields(),
            what=f"get {namespace}/{key}",
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(response.ext_fields).value

    async def merge_order_conf(self, topic: str, entries: Mapping[str, str]) -> None:
        """``createOrUpdateOrderConf(isCluster=false)``: ``brokerName → "name:queues"``
        merged into the topic's ORDER_TOPIC_CONFIG on the name servers, the other brokers'
        entries kept, in Java's HashMap order (as mqadmin updateTopic -o writes it)."""
        old = await self.get_kv(ORDER_NS, topic)
        merged = {e.split(":")[0]: e for e in (old or "").split(";") if e.strip()}
        merged.update(entries)
        await self.put_kv(ORDER_NS, topic, ";".join(merged[b] for b in java_hashmap_order(merged)))

    async def topic_configs(self, addr: str) -> dict[str, TopicConfig]:
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG, what="topic configs")
        with reading_answer(RequestCode.GET_ALL_TOPIC_CONFIG, addr):
            wrapper = TopicConfigWrapper.from_json(loads(response.body_bytes))
        return dict(wrapper.topic_config_table)

    async def query_consume_queue(
        self,
        mq: MessageQueue,
        index: int,
        count: int,
        group: str | None = None,
        *,
        addr: str | None = None,
    ) -> dict[str, Any]:
        """Raw ConsumeQueue entries of one queue (mqadmin queryCq), from ``addr`` or the
        queue's broker."""
        addr = addr or await self._addr_of(mq)
        header = QueryConsumeQueueRequestHeader(
            topic=mq.topic, queue_id=mq.queue_id, index=index, count=count, consumer_group=group
        )
        response = await self._call(
            addr, RequestCode.QUERY_CONSUME_QUEUE, header.to_ext_fields(), what=f"entries of {mq}"
        )
        return _json_object(response.body_bytes, RequestCode.QUERY_CONSUME_QUEUE, addr)

    async def update_acl_config(self, addr: str, fields: dict[str, str]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: one plain_acl.yml account (accessKey, secretKey,
        whiteRemoteAddress, defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms,
        admin; the perms lists comma-separated): ``CreateAccessConfigRequestHeader``'s
        ``to_ext_fields()``, or the same names in a dict of one's own."""
        account = CreateAccessConfigRequestHeader.from_ext_fields(fields).access_key
        await self._call(
            addr,
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            fields,
            what=f"update ACL account {account}",
        )

    async def delete_acl_config(self, addr: str, access_key: str) -> None:
        await self._call(
            addr,
            RequestCode.DELETE_ACL_CONFIG,
            DeleteAccessConfigRequestHeader(access_key=access_key).to_ext_fields(),
            what=f"delete ACL account {access_key}",
        )

    async def update_global_white_addrs(self, addr: str, addresses: str) -> None:
        await self._call(
            addr,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs=addresses).to_ext_fields(),
            what="update the global whitelist",
        )

    async def acl_info(self, addr: str) -> dict[str, str]:
        response = await self._call(
            addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, what="ACL file version"
        )
        return dict(response.ext_fields)


def require_cluster(info: ClusterInfo, cluster: str) -> None:
    """Raises:
    ClientError: ``cluster`` is not in the name server's table (the message names the
        clusters it has)."""
    if cluster not in info.clusters:
        known = ", ".join(sorted(info.clusters)) or "none"
        raise ClientError(f"cluster {cluster!r} is not known to the name server (known: {known})")


def _properties(body: bytes | memoryview) -> dict[str, str]:
    out = {}
    for line in bytes(body).decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _json_object(body: bytes | memoryview, code: RequestCode, addr: str) -> dict[str, Any]:
    """An answer's body that must be a JSON object."""
    with reading_answer(code, addr):
        doc = loads(body)
    if not isinstance(doc, dict):
        raise ResponseDecodeError(
            f"a JSON {type(doc).__name__} where an object belongs", request_code=code, addr=addr
        )
    return doc


_PULL_STATUS: dict[int, str] = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}


class MessageTrack(NamedTuple):
    """One group's relation to a message (RocketMQ ``MessageTrack``): ``track_type`` is
    CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, NOT_ONLINE, PULL or UNKNOWN."""

    group: str
    track_type: str
    exception_desc: str  # why it could not be told, or "null"


class PulledBatch(NamedTuple):
    """One pull's answer: the messages, where the next pull starts, the queue's bounds, and
    the Java client's PullStatus: FOUND, NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_ILLEGAL."""

    messages: list[MessageView]
    next_offset: int
    min_offset: int
    max_offset: int
    status: str = "FOUND"

    @property
    def moved(self) -> bool:
        """The broker moved the offset (it was below the minimum or past the end)."""
        return self.status == "OFFSET_ILLEGAL"


class _StoreTimeSearch:
    """``Admin.offset_for_time``'s search: the first offset of a queue whose message was
    stored at or after ``ts``, from the broker's hint, by the store times of the messages
    read (each offset read once), galloping then bisecting."""

    def __init__(self, admin: Admin, mq: MessageQueue, ts: int) -> None:
        self._admin = admin
        self._mq = mq
        self._ts = ts
        # queue offset -> store time, -1 where nothing is readable
        self._times: dict[int, int] = {}

    async def run(self, guess: int) -> int:
        """The offset, starting from the broker's answer ``guess``."""
        first = await self._read(max(guess - 1, 0), 2)
        low, high = first.min_offset, first.max_offset
        if high <= low:
            return high
        g = min(max(guess, low), high)
        if g < high and await self._older(g):
            return await self._gallop_right(g, high)
        if g > low and not await self._older(g - 1):
            return await self._gallop_left(g, low)
        return g

    async def _gallop_right(self, g: int, high: int) -> int:
        """From ``g``, older than ``ts``, right to the first message that is not (or ``high``)."""
        step, lo = 1, g + 1
        while lo < high:  # gallop right until a message not older than ts
            probe = g + step
            if probe >= high:
                break
            if not await self._older(probe):
                return await self._first_not_older(lo, probe)
            lo, step = probe + 1, step * 2
        return await self._first_not_older(lo, high)

    async def _gallop_left(self, g: int, low: int) -> int:
        """From ``g - 1``, not older than ``ts``, left to the first message that is not (from
        ``low``)."""
        step, hi = 2, g - 1
        while True:  # gallop left until an older message
            probe = g - step
            if probe < low:
                return await self._first_not_older(low, hi)
            if await self._older(probe):
                return await self._first_not_older(probe + 1, hi)
            hi, step = probe, step * 2

    async def _first_not_older(self, lo: int, hi: int) -> int:
        """Bisect [lo, hi]; ``hi`` is known not older, or is the end."""
        while lo < hi:
            mid = (lo + hi) // 2
            if await self._older(mid):
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def _older(self, offset: int) -> bool:
        """Whether the message at ``offset`` was stored before ``ts`` (read if not known)."""
        times = self._times
        if offset not in times:
            await self._read(offset, 1)
        if offset not in times:
            mq = self._mq
            raise ClientError(
                f"offset {offset} of {mq.topic} queue {mq.queue_id} on {mq.broker_name} "
                "could not be read to compare its store time"
            )
        return times[offset] < self._ts

    async def _read(self, offset: int, count: int) -> PulledBatch:
        """Pull ``count`` messages from ``offset`` and note their store times."""
        got = await self._admin.pull_batch(self._mq, offset, count)
        times = self._times
        for m in got.messages:
            times[m.queue_offset] = m.store_timestamp
        if got.messages:
            # entries before the first readable message point at removed records
            for k in range(offset, got.messages[0].queue_offset):
                times.setdefault(k, -1)
        else:
            # only what lies below the queue's minimum is gone; an offset at or above it
            # that gave nothing is not known to be older
            for k in range(offset, min(offset + count, got.min_offset)):
                times.setdefault(k, -1)
        return got


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: broker groups by name, and clusters' group names."""

    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]
