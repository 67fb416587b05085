"""SendMessage, EndTransaction and ForwardMessageToDeadLetterQueue of 5.x clients.

RocketMQ counterpart: ``proxy/grpc/v2/producer/SendMessageActivity`` (validation, the
queue a message goes to, the per-message result entries), ``transaction/
EndTransactionActivity`` and ``consumer/ForwardMessageToDLQActivity``; in local mode each
calls the broker's own processor (SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, END_TRANSACTION,
CONSUMER_SEND_MSG_BACK) through the client's ``LocalChannel``.

The producer group of a 5.x send is its topic (the proxy's choice: a 5.x producer has no
group, and a transaction check must find a producer of the topic). A transaction's id is
the half message's offset message id (store host + commit-log offset): EndTransaction
finds the half message from it alone, as a 4.x END_TRANSACTION does from its offsets.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Protocol

from grpc import aio

from broker.acl import PUB, PlainAcl
from broker.facets import BrokerFacts, HasStore, Tables
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from broker.proxy.clients import GrpcClients
from broker.proxy.consume import dead_letter
from broker.proxy.context import (
    check_access,
    consume_need,
    context_of,
    valid_group,
    valid_topic,
)
from broker.proxy.convert import millis, send_properties
from broker.proxy.receipts import parse_handle
from broker.proxy.renew import Renewals
from broker.proxy.status import OK_STATUS, ProxyError, from_remoting, status
from broker.topics import MESSAGE_TYPE_ATTRIBUTE
from codec import (
    PROPERTY_PRODUCER_GROUP,
    SYSTEM_PROPERTIES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RecordError,
    decode_offset_msg_id,
    decode_properties,
    encode_batch_entry,
    encode_properties,
    inner_from_record,
    java_hash,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.dispatch import ProcessorTable
from remoting.headers import (
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

MAX_USER_PROPERTIES = 128  # userPropertyMaxNum
MAX_USER_PROPERTY_BYTES = 16 * 1024  # maxUserPropertySize
MAX_MESSAGE_GROUP_BYTES = 64  # maxMessageGroupSize
MAX_TRANSACTION_RECOVERY_S = 3600  # maxTransactionRecoverySecond


class ProduceBroker(BrokerFacts, Tables, HasStore, Protocol):
    """What sending through gRPC touches: the processors it calls, topics, the store."""

    @property
    def processors(self) -> ProcessorTable: ...

    @property
    def acl(self) -> PlainAcl | None: ...


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash``, the proxy's FIFO queue for a message group:
    the same group lands on the same queue as on Apache's proxy."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        # Java: ((double) ((int) (state >>> 33) + 1)) / 2^31, the int sum wrapping
        plus_one = (state >> 33) + 1
        if plus_one == 1 << 31:
            plus_one = -(1 << 31)
        nxt = int((candidate + 1) / (plus_one / 2**31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def _type_of(message: pb.Message) -> str:
    """``TopicMessageType.parseFromMessageProperty``: a transaction, else a delayed
    message, else a FIFO one (a message group), else normal."""
    sp = message.system_properties
    if sp.message_type == pb.TRANSACTION:
        return "TRANSACTION"
    if sp.HasField("delivery_timestamp"):
        return "DELAY"
    if sp.message_group:
        return "FIFO"
    return "NORMAL"


def _check_type(topic: str, expected: str | None, first: pb.Message) -> None:
    """``DefaultTopicMessageTypeValidator``: a topic with a message type takes that type
    only (MIXED any); retry and dead-letter topics are not checked.

    Raises:
        ProxyError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
    """
    if not expected or expected == "MIXED" or topic.startswith(("%RETRY%", "%DLQ%")):
        return
    actual = _type_of(first)
    if actual != expected:
        raise ProxyError(
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {expected}, "
            f"but actual type is {actual}",
        )


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


class Producing:
    """The produce RPCs."""

    def __init__(self, broker: ProduceBroker, clients: GrpcClients, renewals: Renewals) -> None:
        self.broker = broker
        self.clients = clients
        self.renewals = renewals
        self._round_robin = itertools.count()

    # ------------------------------------------------------------------ send

    async def send_message(
        self,
        request: rpc.SendMessageRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.SendMessageResponse:
        call = context_of(context)
        messages = list(request.messages)
        if not messages:
            raise ProxyError(pb.MESSAGE_CORRUPTED, "no message to send")
        topic = valid_topic(messages[0].topic.name)
        check_access(self.broker.acl, call, {topic: PUB})
        for message in messages:
            if message.topic.name != topic:
                raise ProxyError(pb.MESSAGE_CORRUPTED, "topic in message is not same")
            self._validate(message)
        tc = self.broker.topics.get(topic)
        if tc is None:
            raise ProxyError(pb.TOPIC_NOT_FOUND, f"topic[{topic}] not exist")
        _check_type(topic, tc.attributes.get(MESSAGE_TYPE_ATTRIBUTE), messages[0])
        queue_id = self._queue_of(messages, max(tc.write_queue_nums, 1))
        channel = self.clients.get_or_create(call).channel
        if len(messages) == 1:
            response = await channel.call(
                self.broker.processors.async_handler(RequestCode.SEND_MESSAGE_V2),
                self._single(messages[0], topic, queue_id),
            )
        else:
            response = await channel.call(
                self.broker.processors.async_handler(RequestCode.SEND_BATCH_MESSAGE),
                self._batch(messages, topic, queue_id),
            )
        return self._result(messages, response)

    def _validate(self, message: pb.Message) -> None:
        """``SendMessageActivity``'s checks, in its order, with its codes: the body, the
        user properties, then the system properties."""
        body = message.body
        if not body:
            raise ProxyError(pb.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        limit = self.broker.store.config.max_message_bytes
        if len(body) > limit:
            raise ProxyError(
                pb.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}"
            )
        user = message.user_properties
        if len(user) > MAX_USER_PROPERTIES:
            raise ProxyError(
                pb.MESSAGE_PROPERTIES_TOO_LARGE,
                f"too many user properties, max is {MAX_USER_PROPERTIES}",
            )
        size = 0
        for key, value in user.items():
            if key in SYSTEM_PROPERTIES:
                raise ProxyError(
                    pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}"
                )
            if _has_control(key) or _has_control(value):
                raise ProxyError(
                    pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                    "the key or value of a property cannot contain control characters",
                )
            size += len(key.encode()) + len(value.encode())
        self._validate_system(message.system_properties, size)

    def _validate_system(self, sp: pb.SystemProperties, size: int) -> None:
        """The system properties: tag, keys (``size`` bytes of properties so far), id,
        message group, delivery time, transaction recovery time."""
        tag = sp.tag
        if tag and (not tag.strip() or "|" in tag or _has_control(tag)):
            raise ProxyError(
                pb.ILLEGAL_MESSAGE_TAG,
                "tag cannot be whitespace only, contain '|' or control characters",
            )
        size += len(tag.encode())
        for key in sp.keys:
            if key and (not key.strip() or _has_control(key)):
                raise ProxyError(
                    pb.ILLEGAL_MESSAGE_KEY,
                    "key cannot be whitespace only or contain control characters",
                )
            size += len(key.encode())
        if size > MAX_USER_PROPERTY_BYTES:
            raise ProxyError(
                pb.MESSAGE_PROPERTIES_TOO_LARGE,
                f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}",
            )
        if not sp.message_id.strip():
            raise ProxyError(pb.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        group = sp.message_group
        if group and (
            not group.strip()
            or len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES
            or _has_control(group)
        ):
            raise ProxyError(
                pb.ILLEGAL_MESSAGE_GROUP,
                f"message group must be under {MAX_MESSAGE_GROUP_BYTES} bytes, not blank, "
                "without control characters",
            )
        if sp.HasField("delivery_timestamp"):
            max_delay_ms = self.broker.config.timer_max_delay_sec * 1000
            if millis(sp.delivery_timestamp) - int(time.time() * 1000) > max_delay_ms:
                raise ProxyError(
                    pb.ILLEGAL_DELIVERY_TIME,
                    f"the max delay time of message is too large, max is {max_delay_ms}",
                )
        if (
            sp.message_type == pb.TRANSACTION
            and sp.HasField("orphaned_transaction_recovery_duration")
            and sp.orphaned_transaction_recovery_duration.seconds > MAX_TRANSACTION_RECOVERY_S
        ):
            raise ProxyError(
                pb.BAD_REQUEST,
                "the max transaction recovery time of message is too large, max is "
                f"{MAX_TRANSACTION_RECOVERY_S}",
            )

    def _queue_of(self, messages: list[pb.Message], queues: int) -> int:
        """A lone message of a message group: the group's queue (consistent hash, as the
        proxy picks it); anything else: the next queue in turn."""
        group = messages[0].system_properties.message_group if len(messages) == 1 else ""
        if group:
            return consistent_hash(java_hash(group), queues)
        return next(self._round_robin) % queues

    @staticmethod
    def _header(
        topic: str, queue_id: int, sys_flag: int, first: pb.Message, **more: Any
    ) -> SendMessageRequestHeader:
        """``buildSendMessageRequestHeader``: the topic is the producer group."""
        return SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=millis(first.system_properties.born_timestamp)
            or int(time.time() * 1000),
            flag=0,
            **more,
        )

    def _single(self, message: pb.Message, topic: str, queue_id: int) -> RemotingCommand:
        props, sys_flag = send_properties(message, topic)
        header = self._header(
            topic,
            queue_id,
            sys_flag,
            message,
            properties=encode_properties(props),
            reconsume_times=message.system_properties.delivery_attempt,
        )
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2(), message.body)

    def _batch(self, messages: list[pb.Message], topic: str, queue_id: int) -> RemotingCommand:
        parts = []
        sys_flag = 0
        for message in messages:
            props, flag = send_properties(message, topic)
            sys_flag |= flag
            parts.append(encode_batch_entry(0, message.body, encode_properties(props).encode()))
        header = self._header(topic, queue_id, sys_flag, messages[0], properties="", batch=True)
        return RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, header.to_v2(), b"".join(parts)
        )

    @staticmethod
    def _result(messages: list[pb.Message], response: RemotingCommand) -> rpc.SendMessageResponse:
        """``convertToSendMessageResponse``: one entry per message; the response's status is
        the entries' one code (MULTIPLE_RESULTS if they differ)."""
        if response.code != ResponseCode.SUCCESS:
            st = from_remoting(response.code, response.remark)
            return rpc.SendMessageResponse(
                status=st, entries=[rpc.SendResultEntry(status=st) for _ in messages]
            )
        answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        offset = answer.queue_offset
        offset_ids = answer.msg_id.split(",")
        entries = []
        for i, message in enumerate(messages):
            sp = message.system_properties
            transaction_id = ""
            if sp.message_type == pb.TRANSACTION:
                transaction_id = offset_ids[i] if i < len(offset_ids) else ""
            entries.append(
                rpc.SendResultEntry(
                    status=OK_STATUS,
                    message_id=sp.message_id,
                    transaction_id=transaction_id,
                    offset=offset + i,
                )
            )
        return rpc.SendMessageResponse(status=OK_STATUS, entries=entries)

    # ----------------------------------------------------------- transactions

    async def end_transaction(
        self,
        request: rpc.EndTransactionRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.EndTransactionResponse:
        call = context_of(context)
        topic = valid_topic(request.topic.name)
        check_access(self.broker.acl, call, {topic: PUB})
        if not request.transaction_id.strip():
            raise ProxyError(pb.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        resolution = request.resolution
        if resolution not in (pb.COMMIT, pb.ROLLBACK):
            # UNSPECIFIED: the client does not know yet; the broker checks back later.
            return rpc.EndTransactionResponse(status=OK_STATUS)
        try:
            _host, commit_log_offset = decode_offset_msg_id(request.transaction_id)
        except ValueError:
            raise ProxyError(
                pb.INVALID_TRANSACTION_ID, f"transaction id {request.transaction_id!r} is not ours"
            ) from None
        record = self.broker.store.look_message_by_offset(commit_log_offset)
        try:
            info, _inner = inner_from_record(record) if record is not None else (None, None)
        except RecordError:
            info = None
        if info is None:
            raise ProxyError(
                pb.INVALID_TRANSACTION_ID,
                f"no half message for transaction id {request.transaction_id}",
            )
        props = decode_properties(info.properties)
        header = EndTransactionRequestHeader(
            producer_group=props.get(PROPERTY_PRODUCER_GROUP, topic),
            tran_state_table_offset=info.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=TRANSACTION_COMMIT_TYPE
            if resolution == pb.COMMIT
            else TRANSACTION_ROLLBACK_TYPE,
            from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        command = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        channel = self.clients.get_or_create(call).channel
        response = await channel.call(
            self.broker.processors.async_handler(RequestCode.END_TRANSACTION), command
        )
        if response.code != ResponseCode.SUCCESS:
            st = from_remoting(response.code, response.remark)
            if response.code == ResponseCode.SYSTEM_ERROR:
                st = status(pb.INVALID_TRANSACTION_ID, response.remark or "transaction not found")
            return rpc.EndTransactionResponse(status=st)
        return rpc.EndTransactionResponse(status=OK_STATUS)

    # ------------------------------------------------------------- dead letters

    async def forward_to_dlq(
        self,
        request: rpc.ForwardMessageToDeadLetterQueueRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        """The PushConsumer gave up on a message: send it back with its attempts used up
        (the broker puts it in ``%DLQ%<group>``), then ack it."""
        call = context_of(context)
        group, topic = valid_group(request.group.name), valid_topic(request.topic.name)
        check_access(self.broker.acl, call, consume_need(topic, group))
        handle = self.renewals.latest(group, parse_handle(request.receipt_handle))
        channel = self.clients.get_or_create(call).channel
        response = await dead_letter(
            self.broker,
            channel,
            group,
            topic,
            handle,
            message_id=request.message_id,
            max_reconsume_times=0,
        )
        if response.code != ResponseCode.SUCCESS:
            return rpc.ForwardMessageToDeadLetterQueueResponse(
                status=from_remoting(response.code, response.remark)
            )
        self.renewals.forget(group, handle)
        return rpc.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)
