"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

RocketMQ counterpart: ``SendMessageProcessor`` with ``AbstractSendMessageProcessor.msgCheck``:
topic name rules (SYSTEM_ERROR), forbidden topics (NO_PERMISSION), existence or
auto-creation through the ``defaultTopic`` template, the queue id range, then the store, whose
status becomes the response code (protocol.md §7.1, §10, §13.1). A send that created a topic
(or found one still being announced) answers once the name servers have it.

The batch path is chosen by the header's batch flag (``m``/``batch``), not by the code. Java
parses it with ``Boolean.parseBoolean``; the C++ client 1.2 sends ``"1"``, which we also take
as true so its batches arrive as separate messages, as its users expect.

Stored properties: the client's, minus ``WAIT`` (which only tells us whether to wait for the
flush), plus ``CLUSTER`` (the broker's cluster name), as a 4.9 broker stores them.
"""

from __future__ import annotations

import functools
import random
import time
from typing import TYPE_CHECKING

import structlog

from broker.config import BrokerRole
from broker.timer import TimerPropertyError, deliver_time_ms, has_trigger
from broker.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    check_topic_name,
    send_forbidden,
)
from broker.transaction import ensure_system_topics, is_half
from codec import (
    MULTI_TAGS_FLAG,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_OUT_MS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageBatch,
    MessageInner,
    decode_properties,
    encode_properties,
    host_of,
)
from remoting.bodies import PERM_READ, PERM_WRITE, TopicConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import SendMessageRequestHeader
from store.results import PutMessageStatus, PutResult

if TYPE_CHECKING:
    from broker.broker import Broker

log = structlog.get_logger(__name__)

_UNKNOWN_HOST: Host = (bytes(4), 0)
DLQ_QUEUE_NUMS = 1  # DLQ_NUMS_PER_GROUP
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

STATUS_CODES: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched.",
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched.",
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full, messages are put to the slave, message store has been "
        "shut down, etc.",
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


@functools.lru_cache(maxsize=4096)
def _born_host(peer: str) -> Host:
    """A peer's ``ip:port`` as a record's BORNHOST (cached: one parse per client)."""
    host, _, port = peer.rpartition(":")
    try:
        return host_of(host.strip("[]"), int(port))
    except (ValueError, OSError):
        return _UNKNOWN_HOST


def delay_level_of(props: dict[str, str]) -> int:
    """The DELAY property as a level; 0 (no delay) when absent or not a positive number."""
    text = props.get("DELAY")
    if not text:
        return 0
    try:
        return max(int(text), 0)
    except ValueError:
        return 0


def _batch_flag(ext: dict[str, str], key: str) -> bool:
    return ext.get(key, "").strip().lower() in ("true", "1")


class SendProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self._cluster = config.broker_cluster_name
        self._region = config.region_id
        self._trace_on = "true" if config.trace_on else "false"

    async def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields
        if request.code == RequestCode.SEND_MESSAGE:
            header = SendMessageRequestHeader.from_ext_fields(ext)
            batch = _batch_flag(ext, "batch")
        else:
            header = SendMessageRequestHeader.from_v2(ext)
            batch = _batch_flag(ext, "m")
        tc = self._check(conn, request, header)
        if isinstance(tc, RemotingCommand):
            return tc  # refused
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))  # noqa: S311 - load spread
        props_text = header.properties or ""
        props = decode_properties(props_text)
        half = not batch and is_half(header.sys_flag, props)
        if half and self.broker.config.reject_transaction_message:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.address}] sending transaction message is forbidden",
            )
        wait = props.get("WAIT", "true").lower() != "false"
        topic = header.topic
        delay_level = delay_level_of(props)
        if not batch and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            routed = self._retry_or_dlq(request, header, topic)
            if isinstance(routed, RemotingCommand):
                return routed
            if routed is not None:
                topic, queue_id = routed
                delay_level = 0
        store_queue_id = queue_id
        sys_flag = header.sys_flag
        if has_trigger(props) and not half:
            timed = self._timer(request, props, batch=batch)
            if isinstance(timed, RemotingCommand):
                return timed
            if timed is not None:
                # RocketMQ 5's timer message: parked in the timer topic until it is due.
                self.broker.topics.create_internal(TIMER_TOPIC, 1, PERM_READ | PERM_WRITE)
                props[PROPERTY_REAL_TOPIC] = topic
                props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
                props[PROPERTY_TIMER_OUT_MS] = str(timed)
                topic, store_queue_id = TIMER_TOPIC, 0
                delay_level = 0
        if half:
            # parseHalfMessageInner: parked in the half queue, its target kept in properties;
            # a client's DELAY waits for the commit.
            ensure_system_topics(self.broker)
            props[PROPERTY_REAL_TOPIC] = topic
            props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
            topic, store_queue_id = TRANS_HALF_TOPIC, 0
            sys_flag &= ~TRANSACTION_TYPE_MASK
            delay_level = 0
        elif batch or delay_level <= 0:
            # A delayed message keeps WAIT in its stored properties (protocol.md §13.6: 4.9
            # re-serialises them, WAIT included, when it parks the message); so does a half
            # message, whose property string the commit stores unchanged.
            props.pop("WAIT", None)
        elif sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            # Parked in the schedule topic here, on the dict parsed above, so the properties
            # are parsed once and encoded once (the store would parse them again to do it).
            topic, store_queue_id, _level = self.broker.store.schedule_properties(
                props, topic, store_queue_id, delay_level
            )
            delay_level = 0
        born_host = _born_host(conn.peer)
        store_host = self.broker.store_host
        body = request.body if request.body is not None else b""
        store = self.broker.store
        started = time.perf_counter()
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        if batch:
            # The batch-level properties go to every inner message (the store joins them).
            props["CLUSTER"] = self._cluster
            put = await store.put_messages(
                MessageBatch(
                    topic=header.topic,
                    queue_id=queue_id,
                    body=body,
                    properties=encode_properties(props),
                    sys_flag=sys_flag,
                    born_timestamp=header.born_timestamp,
                    born_host=born_host,
                    store_host=store_host,
                    wait_store_msg_ok=wait,
                )
            )
        else:
            props["CLUSTER"] = self._cluster
            put = await store.put_message(
                MessageInner(
                    topic=topic,
                    queue_id=store_queue_id,
                    body=body,
                    properties=encode_properties(props),
                    flag=header.flag,
                    sys_flag=sys_flag,
                    born_timestamp=header.born_timestamp,
                    born_host=born_host,
                    store_host=store_host,
                    reconsume_times=header.reconsume_times or 0,
                    wait_store_msg_ok=wait,
                    delay_level=delay_level,
                )
            )
        response = self._response(
            request, put, queue_id, header.topic, time.perf_counter() - started
        )
        registration = self.broker.registration
        if registration.unsettled:
            # A topic this send created, or one a concurrent send created a moment ago, is on
            # its way to the name servers: answer once it is there (msgCheck registers before
            # replying), so the client's next route query finds it.
            return registration.reply_when_routed(conn, request, response, header.topic, topic)
        return response

    def _timer(
        self, request: RemotingCommand, props: dict[str, str], *, batch: bool
    ) -> RemotingCommand | int | None:
        """The deliver time of a timer message (None when it is due already), or the
        refusal of a bad one."""
        config = self.broker.config
        if batch:
            return response_to(
                request, ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be a timer message"
            )
        now = int(time.time() * 1000)
        try:
            deliver = deliver_time_ms(props, now, config.timer_max_delay_sec * 1000)
        except TimerPropertyError as exc:
            return response_to(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if deliver is None or deliver <= now:
            return None
        if not config.timer_wheel_enable:
            return response_to(
                request,
                ResponseCode.MESSAGE_ILLEGAL,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        return deliver

    def _retry_or_dlq(
        self, request: RemotingCommand, header: SendMessageRequestHeader, topic: str
    ) -> RemotingCommand | tuple[str, int] | None:
        """``handleRetryAndDLQ``: a message sent to a retry topic (a client's own send-back)
        goes to the group's dead-letter topic once it has been reconsumed enough times."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sgc = self.broker.subscription_groups.find(group)
        if sgc is None:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}{_FAQ}",
            )
        max_times = sgc.retry_max_times
        if header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times  # clients since 3.4.9 send their own
        if (header.reconsume_times or 0) < max_times:
            return None
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        self.broker.topics.create_internal(dlq, DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE)
        log.info("message_to_dlq", group=group, topic=dlq, reconsume_times=header.reconsume_times)
        return dlq, 0

    def _check(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | TopicConfig:
        """The topic's config when the send may go ahead, else the refusal to answer."""
        broker = self.broker
        topic = header.topic
        if broker.config.broker_role is BrokerRole.SLAVE:
            return response_to(
                request,
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: "
                "messages are put to the slave.",
            )
        if not broker.config.broker_permission & PERM_WRITE:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.address}] sending message is forbidden",
            )
        why = check_topic_name(topic)
        if why is not None:
            return response_to(request, ResponseCode.SYSTEM_ERROR, why)
        if send_forbidden(topic):
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"Sending message to topic[{topic}] is forbidden.",
            )
        tc = broker.topics.get(topic)
        if tc is None:
            sys_flag = 1 if header.unit_mode else 0
            tc = broker.topics.create_for_send(
                topic, header.default_topic, header.default_topic_queue_nums, sys_flag
            )
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = broker.topics.create_internal(topic, 1, PERM_READ | PERM_WRITE, sys_flag)
            if tc is None:
                return response_to(
                    request,
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{_FAQ}",
                )
        if not tc.perm & PERM_WRITE:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{topic}] sending message is forbidden",
            )
        limit = max(tc.write_queue_nums, tc.read_queue_nums)
        if header.queue_id >= limit:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.writeQueueNums:[{tc.write_queue_nums}] consumer:[{conn.peer}]",
            )
        return tc

    def _response(
        self,
        request: RemotingCommand,
        put: PutResult,
        queue_id: int,
        topic: str,
        latency_s: float,
    ) -> RemotingCommand:
        code, remark = STATUS_CODES[put.status]
        append = put.append
        if append is None or not put.status.stored:
            if put.remark:
                remark = f"{remark} {put.remark}" if remark else put.remark
            log.debug("send_refused", status=put.status.name, remark=put.remark)
            return response_to(request, code, remark)
        self.broker.stats.on_put(append.msg_num, topic, append.wrote_bytes, latency_s)
        return response_to(
            request,
            code,
            remark,
            {
                "msgId": append.msg_id,
                "queueId": str(queue_id),
                "queueOffset": str(append.queue_offset),
                "MSG_REGION": self._region,
                "TRACE_ON": self._trace_on,
            },
        )
