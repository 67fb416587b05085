"""PULL_MESSAGE (11), with long polling.

RocketMQ counterpart: ``PullMessageProcessor``. ``PullProcessor.process`` runs its steps in
order, each returning the refusal it finds: check permission (broker and topic read
permission, subscription group, queue id range), resolve the subscription (from the request
when flag 0x4 is set, else the one registered by the consumer's heartbeat) and its filters
(tag hash codes we computed from the tag strings, never the client's), read the store, and
answer: the store status mapped to a response code and next/min/max offsets (protocol.md
§7.2, §9.4, §12). A pull that finds nothing and may suspend is parked in ``PullHoldService``
and answered later.

The reply body is the stored records' bytes as they are. The records are views of the mapped
commit log; they are joined once into the reply (the one copy) and the segments released at
once, so a slow reader never pins a segment that retention wants to delete.
"""

from __future__ import annotations

import functools
import time
from typing import Protocol

import structlog

from broker.clients import normalize_subscription
from broker.config import BrokerRole
from broker.facets import (
    BrokerFacts,
    HasConsumers,
    HasOffsets,
    HasPullHold,
    HasStats,
    HasStore,
    Tables,
)
from broker.filter_sql import SqlFilterError, compile_sql
from broker.long_polling import PropertiesFilter, TagFilter
from broker.subscriptions import SubscriptionGroupTable, group_refusal
from codec import RecordError, decode_properties, decode_record
from remoting.bodies import PERM_READ, MessageModel, SubscriptionData, SubscriptionGroupConfig
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import send_response
from remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader
from store.message_store import RecordFilter
from store.results import GetMessageStatus, GetResult

log = structlog.get_logger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8

# The longest a pull is parked, whatever suspendTimeoutMillis asks (RocketMQ caps nothing).
# Java clients ask 15 s (push), 20 s (lite pull, pull with block); one asking more is
# answered "no new message" at this point and pulls again.
MAX_SUSPEND_MS = 60_000

_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_COMMA_FAQ = "," + _FAQ  # the missing group's remark has it

_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
# No such queue, or nothing in it: the offset moved, unless the consumer starts at 0.
_NO_QUEUE = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)

# Store results whose next offset a master corrects and a slave keeps (nextOffsetCorrection).
_OFFSET_CORRECTED = frozenset(
    {
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    }
)

# A pull's filters: on the consume queue's tag codes; for SQL92, on the properties of what
# arrives for a parked pull, and on each stored record.
Filters = tuple[TagFilter | None, PropertiesFilter | None, RecordFilter | None]
_NO_FILTERS: Filters = (None, None, None)


@functools.lru_cache(maxsize=4096)
def sql_record_filter(expression: str) -> RecordFilter:
    """``ExpressionMessageFilter.isMatchedByCommitLog`` for an SQL92 subscription: the
    expression compiled once (cached by its text) and run on each record's properties.

    Raises:
        SqlFilterError: the expression does not parse.
    """
    compiled = compile_sql(expression)

    def matches(record: memoryview) -> bool:
        try:
            props = decode_properties(decode_record(record, 0).properties)
        except RecordError:
            return False
        return compiled.matches(props)

    return matches


@functools.lru_cache(maxsize=4096)
def sql_filters(expression: str) -> Filters:
    """An SQL92 subscription's filters, built once per expression.

    Raises:
        SqlFilterError: the expression does not parse.
    """
    return (None, compile_sql(expression).matches, sql_record_filter(expression))


def tag_filter_of(sub: SubscriptionData | None) -> TagFilter | None:
    """``ExpressionMessageFilter.isMatchedByConsumeQueue`` for TAG subscriptions."""
    if sub is None or sub.class_filter_mode or sub.sub_string == "*":
        return None
    codes = frozenset(sub.code_set)
    return codes.__contains__


def consuming_group(
    groups: SubscriptionGroupTable, request: RemotingCommand, group: str, more: str = ""
) -> SubscriptionGroupConfig | RemotingCommand:
    """The group's config when it exists and may consume (a pull, a pop), else the
    refusal (``more`` ends the remark of a missing group)."""
    config = groups.find(group)
    if config is None:
        return response_to(
            request,
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{group}] does not exist{more}",
        )
    if not config.consume_enable:
        return response_to(
            request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
        )
    return config


class PullBroker(
    BrokerFacts, Tables, HasConsumers, HasOffsets, HasStore, HasStats, HasPullHold, Protocol
):
    """What a pull reads of the broker: its checks' tables, the consumers' registered
    subscriptions and offsets, the store, and long polling."""


class PullProcessor:
    def __init__(self, broker: PullBroker) -> None:
        self.broker = broker

    async def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(conn, request, allow_suspend=True)

    def rerun(self, conn: Connection, request: RemotingCommand) -> None:
        """Answer a parked pull: run it once more, without suspension."""
        response = self.process(conn, request, allow_suspend=False)
        if response is not None:
            send_response(conn, request, response)

    def process(
        self, conn: Connection, request: RemotingCommand, *, allow_suspend: bool
    ) -> RemotingCommand | None:
        """Check permission, resolve the subscription, read, answer: each step returns the
        refusal it finds. None when the pull is parked (answered later by ``rerun``)."""
        h = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        group_cfg = self._check_group(request, h)
        if isinstance(group_cfg, RemotingCommand):
            return group_cfg  # refused
        refusal = self._check_queue(conn, request, h)
        if refusal is not None:
            return refusal
        sub = self._resolve_subscription(request, h, group_cfg)
        if isinstance(sub, RemotingCommand):
            return sub
        filters = self._filters(request, sub)
        if isinstance(filters, RemotingCommand):
            return filters
        got, code, body = self._read(h, filters)
        if allow_suspend and h.sys_flag & FLAG_COMMIT_OFFSET and self._is_master:
            self.broker.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if (
            code == ResponseCode.PULL_NOT_FOUND
            and allow_suspend
            and self._suspend(conn, request, h, filters)
        ):
            return None
        return self._answer(request, h, group_cfg, got, code=code, body=body)

    # ------------------------------------------------------------ check permission

    def _check_group(
        self, request: RemotingCommand, h: PullMessageRequestHeader
    ) -> SubscriptionGroupConfig | RemotingCommand:
        """The consumer group's config when the broker serves pulls and the group may
        consume, else the refusal."""
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.address}] pulling message is forbidden",
            )
        refusal = group_refusal(request, h.consumer_group)
        if refusal is not None:
            return refusal
        return consuming_group(broker.subscription_groups, request, h.consumer_group, _COMMA_FAQ)

    def _check_queue(
        self, conn: Connection, request: RemotingCommand, h: PullMessageRequestHeader
    ) -> RemotingCommand | None:
        """The refusal of a topic that is not there or not readable, a queue id out of its
        range, or a filter type this broker does not run; None to go on."""
        tc = self.broker.topics.get(h.topic)
        if tc is None and self._is_master:
            log.warning("pull_topic_not_exist", topic=h.topic, peer=conn.peer)
            return response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{h.topic}] not exist, apply first please!{_FAQ}",
            )
        # A slave learns its master's topics every 10 s; a topic created since has its
        # messages replicated all the same. When the master dies in between, the slave
        # serves what its store holds rather than refusing the topic (RocketMQ 4.9 refuses,
        # and a consumer then loses the last seconds' messages until the master returns).
        if tc is not None and not tc.perm & PERM_READ:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{h.topic}] pulling message is forbidden",
            )
        if h.queue_id < 0 or (tc is not None and h.queue_id >= tc.read_queue_nums):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums if tc else 0}] "
                f"consumer:[{conn.peer}]",
            )
        expression_type = (h.expression_type or "TAG").upper()
        if expression_type not in ("TAG", "SQL92") or (
            expression_type == "SQL92" and not self.broker.config.enable_property_filter
        ):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type}",
            )
        return None

    # ------------------------------------------------------- resolve subscription

    def _resolve_subscription(
        self,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        group_cfg: SubscriptionGroupConfig,
    ) -> SubscriptionData | RemotingCommand:
        """The request's own subscription (flag 0x4), else the one the consumer's heartbeat
        registered, or the refusal when that is missing, stale or not allowed."""
        if h.sys_flag & FLAG_SUBSCRIPTION:
            return normalize_subscription(
                SubscriptionData(
                    h.topic,
                    h.subscription or "*",
                    sub_version=h.sub_version,
                    expression_type=(h.expression_type or "TAG").upper(),
                )
            )
        info = self.broker.consumers.get(h.consumer_group)
        if info is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist{_FAQ}",
            )
        if (
            not group_cfg.consume_broadcast_enable
            and info.message_model is MessageModel.BROADCASTING
        ):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{h.consumer_group}] can not consume by broadcast way",
            )
        sub = info.subscriptions.get(h.topic)
        if sub is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist{_FAQ}",
            )
        if sub.sub_version < h.sub_version:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                "the consumer's subscription not latest",
            )
        return sub

    @staticmethod
    def _filters(request: RemotingCommand, sub: SubscriptionData) -> Filters | RemotingCommand:
        """The subscription's filters, or the refusal of an SQL92 expression that does not
        parse."""
        if sub.expression_type.upper() != "SQL92":
            tag_filter = tag_filter_of(sub)
            return _NO_FILTERS if tag_filter is None else (tag_filter, None, None)
        try:
            return sql_filters(sub.sub_string)
        except SqlFilterError as exc:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription failed: {exc}",
            )

    # ------------------------------------------------------------------- read

    def _read(
        self, h: PullMessageRequestHeader, filters: Filters
    ) -> tuple[GetResult, int, bytes | None]:
        """The store's answer, its response code and (when found) the records joined into
        the reply's body: the one copy, after which the segments are released at once."""
        broker = self.broker
        started = time.perf_counter()
        got = broker.store.get_messages(
            h.topic,
            h.queue_id,
            h.queue_offset,
            h.max_msg_nums,
            filters[0],
            record_filter=filters[2],
        )
        try:
            status = got.status
            if status in _NO_QUEUE:
                code = (
                    ResponseCode.PULL_OFFSET_MOVED
                    if h.queue_offset != 0
                    else ResponseCode.PULL_NOT_FOUND
                )
            else:
                code = _STATUS_CODES[status]
            body = None
            if code == ResponseCode.SUCCESS:
                body = got.to_bytes()
                broker.stats.on_get(h.consumer_group, got.message_count, h.topic, len(body))
            else:
                broker.stats.on_get_miss()
        finally:
            got.release()
        broker.stats.on_get_time(time.perf_counter() - started)
        return got, code, body

    def _suspend(
        self,
        conn: Connection,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        filters: Filters,
    ) -> bool:
        """Park a pull that found nothing, when it asks to (flag 0x2): answered by
        ``PullHoldService`` when a message arrives or its time is up."""
        if (
            not h.sys_flag & FLAG_SUSPEND
            # A oneway pull is never parked: nobody waits for its answer, and parked oneway
            # requests would cost nothing to pile up. Past the connection's parked limit the
            # pull is answered "no new message" at once.
            or request.is_oneway
            or not conn.park(request)
        ):
            return False
        config = self.broker.config
        timeout_ms = (
            min(max(h.suspend_timeout_millis, 0), MAX_SUSPEND_MS)
            if config.long_polling_enable
            else config.short_polling_time_ms
        )
        self.broker.pull_hold.hold(
            conn,
            request,
            topic=h.topic,
            queue_id=h.queue_id,
            pull_from_offset=h.queue_offset,
            timeout_ms=timeout_ms,
            tag_filter=filters[0],
            props_filter=filters[1],
        )
        return True

    # ------------------------------------------------------------------ answer

    def _answer(
        self,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        group_cfg: SubscriptionGroupConfig,
        got: GetResult,
        *,
        code: int,
        body: bytes | None,
    ) -> RemotingCommand:
        """The response: code, next/min/max offsets and the broker to pull from next."""
        config = self.broker.config
        next_begin = got.next_begin_offset
        if not self._is_master and not config.offset_check_in_slave:
            # A slave may simply not have the master's latest bytes yet: it never moves a
            # consumer's offset, it asks for a retry from the same place.
            if got.status in _OFFSET_CORRECTED:
                next_begin = h.queue_offset
            if code == ResponseCode.PULL_OFFSET_MOVED:
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if config.slave_read_enable:
            # A consumer far behind (its data no longer in memory) is sent to a slave so the
            # master's page cache serves the consumers that keep up.
            suggest = (
                group_cfg.which_broker_when_consume_slowly
                if got.suggest_pulling_from_slave
                else group_cfg.broker_id
            )
        else:
            suggest = 0
        ext = PullMessageResponseHeader.ext_fields_of(
            suggest, next_begin, got.min_offset, got.max_offset
        )
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.warning(
                "pull_offset_moved",
                group=h.consumer_group,
                topic=h.topic,
                queue_id=h.queue_id,
                request_offset=h.queue_offset,
                suggest_offset=next_begin,
            )
        return response_to(request, code, got.status.name, ext, body)

    @property
    def _is_master(self) -> bool:
        return self.broker.config.broker_role is not BrokerRole.SLAVE
