"""Admin, offsets-by-queue, locks and queries.

RocketMQ counterpart: ``AdminBrokerProcessor`` (topics, subscription groups, offsets and
time lookups, topic and consume stats, runtime info, LOCK/UNLOCK_BATCH_MQ) and
``QueryMessageProcessor`` (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID); protocol.md §7.3, §7.7, §7.8,
§8.4, §8.6. Codes the broker has no handler for are answered REQUEST_CODE_NOT_SUPPORTED by
the processor table, as the Java admin processor does for codes it does not know.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from broker.acl import owner_topic
from broker.facets import (
    HasConsumers,
    HasOffsets,
    HasSchedule,
    Routed,
    Tables,
)
from broker.locks import QueueLocks
from broker.processors.stats import consume_stats
from broker.runtime_info import RuntimeBroker, runtime_table
from broker.subscriptions import check_group_name
from broker.topics import altered_attributes, check_topic_name
from codec import RecordError, decode_properties, decode_record
from remoting.bodies import (
    MALFORMED_BODY,
    KVTable,
    LockBatchBody,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicList,
    TopicOffset,
    encode_consume_stats,
    encode_lock_ok,
    encode_topic_stats,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import (
    CreateTopicRequestHeader,
    EarliestMsgStoretimeResponseHeader,
    GetConsumeStatsRequestHeader,
    GroupNameRequestHeader,
    OffsetResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    TopicRequestHeader,
    ViewMessageRequestHeader,
)
from remoting.route import MessageQueue, dumps, loads

log = structlog.get_logger(__name__)

DEFAULT_QUERY_MAX_NUM = 32  # defaultQueryMaxNum, used for unique-key queries
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _answers_query(record: bytes, topic: str, key: str) -> bool:
    """Whether a record the index found for ``topic#key`` is one: of ``topic`` (stored under
    it, or its real topic while parked) with ``key`` among its KEYS or as its UNIQ_KEY.

    The index compares 32-bit Java hash codes of ``topic#key`` only, so a record of another
    topic whose key collides comes back too; RocketMQ leaves this check to the client
    (``MQAdminImpl.queryMessage``), which let any account allowed to query one topic read
    another with a crafted key.
    """
    try:
        info = decode_record(record, 0)
    except RecordError:
        return False
    if topic not in (info.topic, owner_topic(info)):
        return False
    props = decode_properties(info.properties)
    return props.get("UNIQ_KEY") == key or key in props.get("KEYS", "").split(" ")


def _ok(
    request: RemotingCommand, ext: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    return response_to(request, ResponseCode.SUCCESS, None, ext, body)


class AdminBroker(
    RuntimeBroker,
    Tables,
    HasOffsets,
    HasConsumers,
    HasSchedule,
    Routed,
    Protocol,
):
    """What the admin and query codes read and change: the tables, offsets, locks and
    consumers, the store, and the figures of the runtime info (``RuntimeBroker``)."""

    @property
    def locks(self) -> QueueLocks: ...


class AdminProcessor:
    def __init__(self, broker: AdminBroker) -> None:
        self.broker = broker

    # ------------------------------------------------------------------------ topics

    async def create_topic(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand | None:
        h = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        why = check_topic_name(h.topic)
        if why is not None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, why)
        if broker.topics.is_system_topic(h.topic):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The topic[{h.topic}] is conflict with system topic.",
            )
        if h.topic_filter_type not in _FILTER_TYPES:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"topicFilterType {h.topic_filter_type!r} is not SINGLE_TAG or MULTI_TAG",
            )
        if not (0 < h.read_queue_nums <= 1024 and 0 < h.write_queue_nums <= 1024):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                "readQueueNums and writeQueueNums must be within 1..1024",
            )
        if h.perm & ~0xF:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"perm {h.perm} has bits other than 1|2|4|8"
            )
        existing = broker.topics.get(h.topic)
        try:
            attributes = altered_attributes(
                existing.attributes if existing is not None else {}, h.attributes
            )
        except ValueError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        broker.topics.update(
            TopicConfig(
                h.topic,
                h.read_queue_nums,
                h.write_queue_nums,
                h.perm,
                h.topic_filter_type,
                h.topic_sys_flag or 0,
                h.order,
                attributes,
            )
        )
        # registerIncrementBrokerData: the route is on the name servers when admin hears back.
        return broker.registration.reply_when_routed(conn, request, _ok(request), h.topic)

    async def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        if not h.topic.strip():
            return response_to(request, ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        # The name becomes a directory to remove: one no topic could have (too long, a path
        # separator, "..") never reaches the file system. Found by the processor fuzzer.
        why = check_topic_name(h.topic)
        if why is not None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, why)
        if broker.topics.is_system_topic(h.topic):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The topic[{h.topic}] is conflict with system topic.",
            )
        broker.topics.delete(h.topic)
        broker.offsets.remove_topic(h.topic)
        broker.store.delete_topic(h.topic)
        return _ok(request)

    async def all_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, body=dumps(self.broker.topics.wrapper().to_json()))

    async def topic_names(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, body=TopicList(sorted(self.broker.topics.table)).encode())

    # ----------------------------------------------------------------- queue offsets

    async def max_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_max_offset(h.topic, h.queue_id)
        return _ok(request, OffsetResponseHeader(offset=offset).to_ext_fields())

    async def min_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_min_offset(h.topic, h.queue_id)
        return _ok(request, OffsetResponseHeader(offset=offset).to_ext_fields())

    async def search_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.broker.store.get_offset_by_time(h.topic, h.queue_id, h.timestamp)
        return _ok(request, OffsetResponseHeader(offset=offset).to_ext_fields())

    async def earliest_msg_storetime(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = QueueRequestHeader.from_ext_fields(request.ext_fields)
        ts = self.broker.store.get_earliest_message_time(h.topic, h.queue_id)
        return _ok(request, EarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields())

    # ------------------------------------------------------------------------ stats

    async def topic_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        tc = broker.topics.get(h.topic)
        if tc is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = broker.store
        table = {}
        for qid in range(tc.write_queue_nums):
            max_offset = store.get_max_offset(h.topic, qid)
            last = (
                store.get_message_store_timestamp(h.topic, qid, max_offset - 1)
                if max_offset > 0
                else 0
            )
            table[MessageQueue(h.topic, broker.config.broker_name, qid)] = TopicOffset(
                store.get_min_offset(h.topic, qid), max_offset, max(last, 0)
            )
        return _ok(request, body=encode_topic_stats(table))

    async def consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        topics = [h.topic] if h.topic else sorted(broker.offsets.topics_of_group(h.consumer_group))
        cs = consume_stats(broker, h.consumer_group, topics)
        return _ok(request, body=encode_consume_stats(cs.offset_table, cs.consume_tps))

    async def runtime_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, body=KVTable(runtime_table(self.broker)).encode())

    # ---------------------------------------------------------- offsets and groups

    async def all_consumer_offset(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET (43): the table with its DataVersion, as RocketMQ 5's
        ConsumerOffsetSerializeWrapper (a slave offers what it took against that version)."""
        offsets = self.broker.offsets
        table = {
            k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(offsets.table.items())
        }
        doc = {"offsetTable": table, "dataVersion": offsets.data_version.to_json()}
        return _ok(request, body=dumps(doc))

    async def all_delay_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (45): the schedule service's progress per delay level, as
        delayOffset.json holds it (a slave copies it)."""
        return _ok(request, body=dumps(self.broker.schedule.to_json()))

    async def all_subscription_groups(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        return _ok(request, body=dumps(self.broker.subscription_groups.to_json()))

    async def update_subscription_group(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        try:
            cfg = SubscriptionGroupConfig.from_json(loads(request.body_bytes))
        except MALFORMED_BODY as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"subscription group body is malformed: {exc}"
            )
        reason = check_group_name(cfg.group_name)
        if reason is not None:
            return response_to(request, ResponseCode.INVALID_PARAMETER, reason)  # as 5.x
        self.broker.subscription_groups.update(cfg)
        return _ok(request)

    async def delete_subscription_group(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GroupNameRequestHeader.from_ext_fields(request.ext_fields)
        self.broker.subscription_groups.delete(h.group_name)
        # Unless asked, the offsets stay, as in RocketMQ 4.9: re-creating the group resumes them.
        if h.remove_offset:
            self.broker.offsets.remove_group(h.group_name)
        return _ok(request)

    # ------------------------------------------------------------------------- locks

    async def lock_batch(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        try:
            body = LockBatchBody.decode(request.body_bytes)
        except MALFORMED_BODY as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"lock body is malformed: {exc}")
        locked = self.broker.locks.try_lock(
            body.consumer_group, body.mq_set, body.client_id, _now_ms()
        )
        return _ok(request, body=encode_lock_ok(locked))

    async def unlock_batch(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        try:
            body = LockBatchBody.decode(request.body_bytes)
        except MALFORMED_BODY as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"unlock body is malformed: {exc}"
            )
        self.broker.locks.unlock(body.consumer_group, body.mq_set, body.client_id)
        return _ok(request)

    # ------------------------------------------------------------------------ query

    async def query_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_num = DEFAULT_QUERY_MAX_NUM if h.unique_key_query else h.max_num
        found = self.broker.store.query_message(
            h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp
        )
        records = [r for r in found.records if h.key and _answers_query(r, h.topic, h.key)]
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=found.index_last_update_timestamp,
            index_last_update_phyoffset=found.index_last_update_phy_offset,
        ).to_ext_fields()
        if not records:
            return response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return _ok(request, ext, b"".join(records))

    async def view_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        # verify: the offset is the client's word; bytes inside a message body can look like
        # a record of any topic
        record = self.broker.store.look_message_by_offset(h.offset, verify=True)
        if record is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {h.offset}",
            )
        return _ok(request, body=record)

    async def query_consume_queue(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = QueryConsumeQueueRequestHeader.from_ext_fields(request.ext_fields)
        store = self.broker.store
        cq = store.queues.get(h.topic, h.queue_id)
        if cq is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"{h.topic}:{h.queue_id} is not exist!",
            )
        doc: dict[str, object] = {
            "maxQueueIndex": cq.max_offset,
            "minQueueIndex": cq.min_offset,
        }
        if h.consumer_group:
            sub = self.broker.consumers.subscription(h.consumer_group, h.topic)
            if sub is None:
                return response_to(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"{h.consumer_group} has no subscription for {h.topic}",
                )
            doc["subscriptionData"] = sub.to_json()
        count = max(0, min(h.count, 10_000))
        doc["queueData"] = [
            {
                "eval": False,
                "physicOffset": offset,
                "physicSize": size,
                "tagsCode": tags,
            }
            for _k, (offset, size, tags) in cq.entries(max(h.index, cq.min_offset), count)
        ]
        return _ok(request, body=dumps(doc))
