"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message its listener failed on.

RocketMQ counterpart: ``SendMessageProcessor.asyncConsumerSendMsgBack`` (4.9, protocol.md
§13.3). The broker finds the original record by its commit-log offset and stores a copy for
the group's retry topic ``%RETRY%<group>``, delayed by level ``3 + reconsumeTimes`` (10 s,
30 s, 1 m, 2 m … with the default levels) unless the consumer asked for a level; once it has
been reconsumed ``maxReconsumeTimes`` times (the consumer's value, else the group's
``retryMaxTimes``, 16), or the consumer asks with a negative level, it goes to the group's
dead-letter topic ``%DLQ%<group>`` instead, undelayed. The copy keeps body, flag, sysFlag,
born time and host; gains RETRY_TOPIC (the original topic, set once), ORIGIN_MESSAGE_ID
(the first delivery's offset msg id, kept across retries) and WAIT=false; its reconsume
times grow by one.
"""

from __future__ import annotations

import random

import structlog

from broker.processors.send import DLQ_QUEUE_NUMS, SendBroker
from broker.subscriptions import group_refusal
from broker.topics import DLQ_GROUP_TOPIC_PREFIX, retry_topic
from codec import (
    BORNHOST_V6_FLAG,
    PROPERTY_DELAY,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT,
    STOREHOSTADDRESS_V6_FLAG,
    MessageInner,
    RecordError,
    decode_properties,
    encode_properties,
    inner_from_record,
    offset_msg_id,
)
from remoting.bodies import PERM_READ, PERM_WRITE, SubscriptionGroupConfig
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import ConsumerSendMsgBackRequestHeader

log = structlog.get_logger(__name__)

FIRST_RETRY_LEVEL = 3  # 10 s with the default messageDelayLevel


class SendBackProcessor:
    def __init__(self, broker: SendBroker) -> None:
        self.broker = broker

    async def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Check the group and permission, read the original, route its copy (the retry
        topic, delayed; or the dead-letter topic), store it, answer; each step returns the
        refusal it finds."""
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        sgc = self._check(request, header.group)
        if isinstance(sgc, RemotingCommand):
            return sgc  # refused
        if sgc.retry_queue_nums <= 0:
            return response_to(request, ResponseCode.SUCCESS)  # the group wants no retries
        retry = retry_topic(header.group)
        queue_id = random.randrange(sgc.retry_queue_nums)  # noqa: S311 - load spread
        tc = self.broker.topics.create_internal(retry, sgc.retry_queue_nums, PERM_READ | PERM_WRITE)
        if not tc.perm & PERM_WRITE:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{retry}] sending message is forbidden",
            )
        copy = self._copy_of(request, header.offset)
        if isinstance(copy, RemotingCommand):
            return copy
        reconsume_times, msg, props = copy
        msg.topic, msg.queue_id = retry, queue_id
        self._route(header, sgc, msg, props, reconsume_times=reconsume_times)
        # SNDBCK_PUT_NUMS is counted by the message's own topic (``originTopic``)
        self.broker.stats.on_send_back(header.group, header.origin_topic or "")
        return await self._store(conn, request, msg, retry=retry)

    def _check(
        self, request: RemotingCommand, group: str
    ) -> SubscriptionGroupConfig | RemotingCommand:
        """The group's config when it may send back to this broker, else the refusal."""
        broker = self.broker
        # Before anything is created for it: %RETRY%<group> must be a topic the store takes,
        # or the delayed copy would stop its delay level (see broker/schedule.py).
        refusal = group_refusal(request, group)
        if refusal is not None:
            return refusal
        sgc = broker.subscription_groups.find(group)
        if sgc is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}",
            )
        if not broker.config.broker_permission & PERM_WRITE:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.address}] sending message is forbidden",
            )
        return sgc

    def _copy_of(
        self, request: RemotingCommand, offset: int
    ) -> tuple[int, MessageInner, dict[str, str]] | RemotingCommand:
        """The original's reconsume times, and its copy to store with its properties (it
        gains RETRY_TOPIC and ORIGIN_MESSAGE_ID where it has none, and WAIT=false); the
        refusal when no record is at ``offset``."""
        record = self.broker.store.look_message_by_offset(offset)
        if record is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        try:
            info, msg = inner_from_record(record)
        except RecordError as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"the message at {offset}: {exc}"
            )
        props = decode_properties(msg.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, info.topic)
        props[PROPERTY_WAIT] = "false"
        props.setdefault(
            PROPERTY_ORIGIN_MESSAGE_ID,
            offset_msg_id(record_store_host(record, info.sys_flag), info.commit_log_offset),
        )
        return info.reconsume_times, msg, props

    def _route(
        self,
        header: ConsumerSendMsgBackRequestHeader,
        sgc: SubscriptionGroupConfig,
        msg: MessageInner,
        props: dict[str, str],
        *,
        reconsume_times: int,
    ) -> None:
        """The copy delayed in its retry topic, or, reconsumed ``maxReconsumeTimes`` times
        (or asked with a negative level), in the group's dead-letter topic, undelayed."""
        max_times = (
            header.max_reconsume_times
            if header.max_reconsume_times is not None
            else sgc.retry_max_times
        )
        delay_level = header.delay_level
        if reconsume_times >= max_times or delay_level < 0:
            msg.topic = DLQ_GROUP_TOPIC_PREFIX + header.group
            msg.queue_id = random.randrange(DLQ_QUEUE_NUMS)  # noqa: S311
            self.broker.topics.create_internal(msg.topic, DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE)
            delay_level = 0
            props.pop(PROPERTY_DELAY, None)  # a dead letter is not delayed again
            log.info(
                "message_to_dlq",
                group=header.group,
                offset=header.offset,
                reconsume_times=reconsume_times,
            )
        else:
            if delay_level == 0:
                delay_level = FIRST_RETRY_LEVEL + reconsume_times
            props[PROPERTY_DELAY] = str(delay_level)
        msg.properties = encode_properties(props)
        msg.store_host = self.broker.store_host
        msg.reconsume_times = reconsume_times + 1
        msg.wait_store_msg_ok = False
        msg.delay_level = delay_level

    async def _store(
        self, conn: Connection, request: RemotingCommand, msg: MessageInner, *, retry: str
    ) -> RemotingCommand | None:
        """Store the copy and answer: once the name servers have the route when this created
        the ``retry`` or dead-letter topic."""
        broker = self.broker
        put = await broker.store.put_message(msg)
        if not put.status.stored:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"send back failed: {put.status.name} {put.remark}".strip(),
            )
        broker.stats.on_put(1)
        response = response_to(request, ResponseCode.SUCCESS)
        if broker.registration.unsettled:
            # A retry or dead-letter topic created here reaches the name servers before the
            # consumer hears back (createTopicInSendMessageBackMethod registers at once).
            return broker.registration.reply_when_routed(conn, request, response, retry, msg.topic)
        return response


def record_store_host(record: bytes, sys_flag: int) -> tuple[bytes, int]:
    """STOREHOST of a stored record (after BORNHOST and STORETIMESTAMP)."""
    pos = 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8
    addr_len = 16 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 4
    port = int.from_bytes(record[pos + addr_len : pos + addr_len + 4], "big", signed=True)
    return record[pos : pos + addr_len], port
