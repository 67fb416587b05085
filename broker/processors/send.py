"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

RocketMQ counterpart: ``SendMessageProcessor`` with ``AbstractSendMessageProcessor.msgCheck``:
topic name rules (SYSTEM_ERROR), forbidden topics (NO_PERMISSION), existence or
auto-creation through the ``defaultTopic`` template, the queue id range, then the store, whose
status becomes the response code (protocol.md §7.1, §10, §13.1). A send that created a topic
(or found one still being announced) answers once the name servers have it.

``SendProcessor.handle`` runs it as steps, each returning the refusal it finds: check
(permission, topic), place (retry and dead-letter topics; the timer, half or schedule topic
a message waits in), store, answer. The send is the hottest request: the steps pass the
``MessageInner`` the store takes along and change it in place, so placing a message costs
a few calls and no allocation of its own.

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
from typing import Protocol

import structlog

from broker.config import BrokerRole
from broker.facets import BrokerFacts, Routed, Storing, Tables
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
from remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader
from store.results import PutMessageStatus, PutResult

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


class SendBroker(BrokerFacts, Tables, Storing, Routed, Protocol):
    """What a send (and a consumer's send-back) touches of the broker: its checks' tables,
    the store, and the routes of the topics it creates."""


class SendProcessor:
    def __init__(self, broker: SendBroker) -> None:
        self.broker = broker
        config = broker.config
        self._cluster = config.broker_cluster_name
        self._region = config.region_id
        self._trace_on = "true" if config.trace_on else "false"

    async def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Check permission and the topic, then store one message or a batch and answer;
        each step returns the refusal it finds."""
        ext = request.ext_fields
        v2 = request.code != RequestCode.SEND_MESSAGE
        if v2:
            header = SendMessageRequestHeader.from_v2(ext)
        else:
            header = SendMessageRequestHeader.from_ext_fields(ext)
        tc = self._check(conn, request, header)
        if isinstance(tc, RemotingCommand):
            return tc  # refused
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))  # noqa: S311 - load spread
        props = decode_properties(header.properties or "")
        sys_flag = header.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        wait = props.get("WAIT", "true").lower() != "false"
        body = request.body if request.body is not None else b""
        if SendMessageRequestHeader.batch_flag(ext, v2=v2):
            batch = MessageBatch(
                topic=header.topic,
                queue_id=queue_id,
                body=body,
                sys_flag=sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=_born_host(conn.peer),
                store_host=self.broker.store_host,
                wait_store_msg_ok=wait,
            )
            return await self._send_batch(conn, request, props, batch)
        msg = MessageInner(
            topic=header.topic,
            queue_id=queue_id,
            body=body,
            flag=header.flag,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=_born_host(conn.peer),
            store_host=self.broker.store_host,
            reconsume_times=header.reconsume_times or 0,
            wait_store_msg_ok=wait,
            delay_level=delay_level_of(props),
        )
        placed = self._place(request, header, props, msg)
        if isinstance(placed, RemotingCommand):
            return placed  # refused
        started = time.perf_counter()
        put = await self.broker.store.put_message(msg)
        return self._answer(
            conn, request, put, placed, topic=header.topic, stored_in=msg.topic, started=started
        )

    # ------------------------------------------------------------ check permission

    def _check(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | TopicConfig:
        """The topic's config when the send may go ahead (the topic created from its
        ``defaultTopic`` template where it is missing), else the refusal to answer."""
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
            tc = self._create_topic(header)
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

    def _create_topic(self, header: SendMessageRequestHeader) -> TopicConfig | None:
        """A missing topic created for a send: from its template when the broker auto-creates
        topics; a retry topic (a client's own send-back) in any case."""
        topics = self.broker.topics
        sys_flag = 1 if header.unit_mode else 0
        tc = topics.create_for_send(
            header.topic, header.default_topic, header.default_topic_queue_nums, sys_flag
        )
        if tc is None and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            tc = topics.create_internal(header.topic, 1, PERM_READ | PERM_WRITE, sys_flag)
        return tc

    # ------------------------------------------------------------------ place, store

    def _place(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        props: dict[str, str],
        msg: MessageInner,
    ) -> int | RemotingCommand:
        """Place one message: its group's dead-letter topic once retried enough; the timer,
        half or schedule topic while it waits. The queue id to answer (the message's own,
        whatever queue it waits in), or the refusal."""
        half = is_half(header.sys_flag, props)
        if half and self.broker.config.reject_transaction_message:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.address}] sending transaction message is forbidden",
            )
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            refusal = self._retry_or_dlq(request, header, msg)
            if refusal is not None:
                return refusal
        queue_id = msg.queue_id
        if half:
            self._park_half(props, msg)
        else:
            # Where a message waits until it is due, its real topic and queue kept in its
            # properties: the timer topic (a timer message) or the schedule topic (a delay
            # level).
            if has_trigger(props):
                refusal = self._park_timer(request, props, msg)
                if refusal is not None:
                    return refusal
            if msg.delay_level <= 0:
                # A delayed message keeps WAIT in its stored properties (protocol.md §13.6:
                # 4.9 re-serialises them, WAIT included, when it parks the message); so does
                # a half message, whose property string the commit stores unchanged.
                props.pop("WAIT", None)
            elif msg.sys_flag & TRANSACTION_TYPE_MASK in (
                TRANSACTION_NOT_TYPE,
                TRANSACTION_COMMIT_TYPE,
            ):
                # Parked in the schedule topic here, on the dict parsed above, so the
                # properties are parsed once and encoded once (the store would parse them
                # again to do it).
                msg.topic, msg.queue_id, _level = self.broker.store.schedule_properties(
                    props, msg.topic, msg.queue_id, msg.delay_level
                )
                msg.delay_level = 0
        props["CLUSTER"] = self._cluster
        msg.properties = encode_properties(props)
        return queue_id

    async def _send_batch(
        self,
        conn: Connection,
        request: RemotingCommand,
        props: dict[str, str],
        batch: MessageBatch,
    ) -> RemotingCommand | None:
        """Store a batch as it came (no retry, timer, half or delay handling), answer."""
        if has_trigger(props):
            return response_to(
                request, ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be a timer message"
            )
        props.pop("WAIT", None)
        # The batch-level properties go to every inner message (the store joins them).
        props["CLUSTER"] = self._cluster
        batch.properties = encode_properties(props)
        started = time.perf_counter()
        put = await self.broker.store.put_messages(batch)
        return self._answer(
            conn,
            request,
            put,
            batch.queue_id,
            topic=batch.topic,
            stored_in=batch.topic,
            started=started,
        )

    def _retry_or_dlq(
        self, request: RemotingCommand, header: SendMessageRequestHeader, msg: MessageInner
    ) -> RemotingCommand | None:
        """``handleRetryAndDLQ``: a message sent to a retry topic (a client's own send-back)
        goes to the group's dead-letter topic once it has been reconsumed enough times."""
        group = msg.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
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
        msg.topic, msg.queue_id, msg.delay_level = dlq, 0, 0
        return None

    def _park_half(self, props: dict[str, str], msg: MessageInner) -> None:
        """``parseHalfMessageInner``: parked in the half queue until its transaction ends,
        its target kept in properties; a client's DELAY waits for the commit."""
        ensure_system_topics(self.broker)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
        msg.sys_flag &= ~TRANSACTION_TYPE_MASK
        msg.delay_level = 0

    def _park_timer(
        self, request: RemotingCommand, props: dict[str, str], msg: MessageInner
    ) -> RemotingCommand | None:
        """RocketMQ 5's timer message: parked in the timer topic until it is due (stored as
        it is when due already); the refusal of a bad or disabled one."""
        config = self.broker.config
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
        self.broker.topics.create_internal(TIMER_TOPIC, 1, PERM_READ | PERM_WRITE)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props[PROPERTY_TIMER_OUT_MS] = str(deliver)
        msg.topic, msg.queue_id, msg.delay_level = TIMER_TOPIC, 0, 0
        return None

    # ------------------------------------------------------------------------ answer

    def _answer(
        self,
        conn: Connection,
        request: RemotingCommand,
        put: PutResult,
        queue_id: int,
        *,
        topic: str,
        stored_in: str,
        started: float,
    ) -> RemotingCommand | None:
        """The store's status as a response code, with the message's id and offset; sent
        once the name servers have the route when this send created ``topic`` or the topic
        it was ``stored_in`` (None: the answer goes out then)."""
        code, remark = STATUS_CODES[put.status]
        append = put.append
        if append is None or not put.status.stored:
            if put.remark:
                remark = f"{remark} {put.remark}" if remark else put.remark
            log.debug("send_refused", status=put.status.name, remark=put.remark)
            response = response_to(request, code, remark)
        else:
            self.broker.stats.on_put(
                append.msg_num, topic, append.wrote_bytes, time.perf_counter() - started
            )
            ext = SendMessageResponseHeader.ext_fields_of(
                append.msg_id, queue_id, append.queue_offset, self._region, self._trace_on
            )
            response = response_to(request, code, remark, ext)
        registration = self.broker.registration
        if registration.unsettled:
            # A topic this send created, or one a concurrent send created a moment ago, is on
            # its way to the name servers: answer once it is there (msgCheck registers before
            # replying), so the client's next route query finds it.
            return registration.reply_when_routed(conn, request, response, topic, stored_in)
        return response
