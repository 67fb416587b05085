"""ReceiveMessage, AckMessage and ChangeInvisibleDuration of 5.x consumers.

RocketMQ counterpart: ``proxy/grpc/v2/consumer/ReceiveMessageActivity`` (+
``ReceiveMessageResponseStreamWriter``), ``AckMessageActivity`` and
``ChangeInvisibleDurationActivity``; in local mode each calls the broker's POP_MESSAGE,
ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME processors through the client's channel.

A receive is a pop of every queue of the topic on this broker (queue id -1), held for the
long-polling time when nothing is there. Its stream carries exactly one status (OK before
the messages, or the reason there are none), the messages, then the delivery timestamp,
and ends. A message whose attempts are used up (the group's max attempts, from its retry
policy) is not delivered: it goes to the group's dead-letter queue and is acked, as the
proxy's ``PopMessageResultFilterImpl`` does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import structlog
from grpc import aio

from broker.acl import PlainAcl
from broker.facets import BrokerFacts, HasStore, Tables
from broker.filter_sql import SqlFilterError
from broker.pop import PopService
from broker.pop_order import ORDER_REVIVE_QID
from broker.processors.pop import pop_filters
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from broker.proxy.clients import GrpcClients
from broker.proxy.context import (
    CallContext,
    check_access,
    consume_need,
    context_of,
    valid_group,
    valid_topic,
)
from broker.proxy.convert import duration_ms, timestamp, to_v2
from broker.proxy.local import LocalChannel
from broker.proxy.receipts import Handle, parse_handle
from broker.proxy.renew import Held, Renewals
from broker.proxy.status import OK_STATUS, ProxyError, from_remoting, status
from codec import decode_records
from codec.view import MessageExt
from remoting.codes import POLLING_TIMEOUT, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.dispatch import ProcessorTable
from remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from remoting.receipt import Receipt, parse_offset_info, popped_receipt

log = structlog.get_logger(__name__)

INIT_MODE_MAX = 1  # ConsumeInitMode.MAX: a new group starts at the end, as the proxy asks
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # maxInvisibleTimeMills
AUTO_RENEW_INVISIBLE_MS = 60_000  # defaultInvisibleTimeMills, for auto-renewed receives
MAX_BATCH = 32


class HasProcessors(Protocol):
    """The broker's processor table (the requests a receive, ack or change is made of)."""

    @property
    def processors(self) -> ProcessorTable: ...


class ConsumeBroker(BrokerFacts, Tables, HasStore, HasProcessors, Protocol):
    @property
    def pop(self) -> PopService: ...

    @property
    def acl(self) -> PlainAcl | None: ...


async def ack_one(
    broker: HasProcessors, channel: LocalChannel, group: str, topic: str, handle: Handle
) -> RemotingCommand:
    """ACK_MESSAGE for one received message."""
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=handle.receipt.queue_id,
        extra_info=str(handle.receipt),
        offset=handle.queue_offset,
    )
    command = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    return await channel.call(broker.processors.async_handler(RequestCode.ACK_MESSAGE), command)


async def dead_letter(
    broker: HasProcessors,
    channel: LocalChannel,
    group: str,
    topic: str,
    handle: Handle,
    *,
    message_id: str,
    max_reconsume_times: int,
) -> RemotingCommand:
    """One received message to its group's dead-letter queue (CONSUMER_SEND_MSG_BACK with
    delay level -1, which the broker takes as "straight to %DLQ%"), then acked; the
    send-back's answer (nothing is acked when it is refused)."""
    header = ConsumerSendMsgBackRequestHeader(
        offset=handle.commit_log_offset,
        group=group,
        delay_level=-1,
        origin_msg_id=message_id,
        origin_topic=topic,
        unit_mode=False,
        max_reconsume_times=max_reconsume_times,
    )
    command = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    response = await channel.call(
        broker.processors.async_handler(RequestCode.CONSUMER_SEND_MSG_BACK), command
    )
    if response.code == ResponseCode.SUCCESS:
        await ack_one(broker, channel, group, topic, handle)
    return response


async def change_one(
    broker: HasProcessors,
    channel: LocalChannel,
    group: str,
    topic: str,
    handle: Handle,
    *,
    invisible_ms: int,
) -> Handle | RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME for one received message: its new handle, or the
    broker's refusal."""
    receipt = handle.receipt
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=receipt.queue_id,
        extra_info=str(receipt),
        offset=handle.queue_offset,
        invisible_time=max(invisible_ms, 10),
    )
    command = RemotingCommand.request(
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
    )
    response = await channel.call(
        broker.processors.async_handler(RequestCode.CHANGE_MESSAGE_INVISIBLETIME), command
    )
    if response.code != ResponseCode.SUCCESS:
        return response
    answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
    new = Receipt(
        # The changed message is checkpointed on its own: its offset starts the batch.
        ck_queue_offset=handle.queue_offset,
        pop_time=answer.pop_time,
        invisible_time=answer.invisible_time,
        revive_qid=answer.revive_qid,
        kind=receipt.kind,
        broker_name=receipt.broker_name,
        queue_id=receipt.queue_id,
        queue_offset=handle.queue_offset,
    )
    return Handle(new, handle.commit_log_offset)


class Consuming:
    """The consume RPCs."""

    def __init__(self, broker: ConsumeBroker, clients: GrpcClients, renewals: Renewals) -> None:
        self.broker = broker
        self.clients = clients
        self.renewals = renewals

    # --------------------------------------------------------------- receive

    async def receive_message(
        self,
        request: rpc.ReceiveMessageRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        call = context_of(context)
        try:
            found = await self._receive(call, request, context.time_remaining())
        except ProxyError as exc:
            yield rpc.ReceiveMessageResponse(status=status(exc.code, exc.message))
        except Exception as exc:
            log.exception("grpc_receive_failed", client_id=call.client_id)
            yield rpc.ReceiveMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            )
        else:
            if found:
                yield rpc.ReceiveMessageResponse(status=OK_STATUS)
                for message in found:
                    yield rpc.ReceiveMessageResponse(message=message)
            else:
                yield rpc.ReceiveMessageResponse(
                    status=status(pb.MESSAGE_NOT_FOUND, "no new message")
                )
        yield rpc.ReceiveMessageResponse(delivery_timestamp=timestamp(int(time.time() * 1000)))

    def _polling_ms(
        self, request: rpc.ReceiveMessageRequest, settings: pb.Settings, remaining_s: float | None
    ) -> int:
        """``ReceiveMessageActivity``'s polling time: the client's, else what its deadline
        leaves after half a request timeout; within the configured bounds and the deadline.
        """
        config = self.broker.config
        low, high = config.grpc_min_long_polling_timeout_ms, config.grpc_max_long_polling_timeout_ms
        remaining_ms = int(remaining_s * 1000) if remaining_s is not None else high + 10_000
        if request.HasField("long_polling_timeout"):
            polling = duration_ms(request.long_polling_timeout)
        else:
            polling = remaining_ms - duration_ms(settings.request_timeout) // 2
        polling = min(max(polling, low), high)
        if polling > remaining_ms:
            if remaining_ms < low:
                raise ProxyError(
                    pb.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check "
                    "network condition",
                )
            polling = remaining_ms
        return polling

    async def _receive(
        self, call: CallContext, request: rpc.ReceiveMessageRequest, remaining_s: float | None
    ) -> list[pb.Message]:
        settings = await self.clients.settings_of(call)
        group = valid_group(request.group.name)
        topic = valid_topic(request.message_queue.topic.name)
        check_access(self.broker.acl, call, consume_need(topic, group))
        header = self._pop_header(request, settings, remaining_s)
        command = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        channel = self.clients.get_or_create(call).channel
        response = await channel.call(
            self.broker.processors.async_handler(RequestCode.POP_MESSAGE), command
        )
        if response.code in (POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return []
        if response.code != ResponseCode.SUCCESS:
            st = from_remoting(response.code, response.remark)
            raise ProxyError(st.code, st.message)
        max_attempts = settings.backoff_policy.max_attempts or 17
        return await self._deliverable(
            channel,
            response=response,
            group=group,
            topic=topic,
            invisible=header.invisible_time,
            max_attempts=max_attempts,
            renew_for=call.client_id if request.auto_renew else None,
        )

    def _pop_header(
        self, request: rpc.ReceiveMessageRequest, settings: pb.Settings, remaining_s: float | None
    ) -> PopMessageRequestHeader:
        """The POP_MESSAGE a receive is: every queue of the topic here, its polling time,
        invisible time, batch size and filter (TAG or SQL92) checked as the proxy checks them."""
        polling = self._polling_ms(request, settings, remaining_s)
        if request.auto_renew:
            invisible = AUTO_RENEW_INVISIBLE_MS
        else:
            invisible = duration_ms(request.invisible_duration)
            shortest = self.broker.config.grpc_min_invisible_ms
            if not shortest <= invisible <= MAX_INVISIBLE_MS:
                raise ProxyError(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"the invisible time {invisible} ms is not within "
                    f"{shortest}..{MAX_INVISIBLE_MS} ms (minInvisibleTimeMillsForRecv)",
                )
        expression = request.filter_expression
        exp_type = "SQL92" if expression.type == pb.SQL else "TAG"
        if exp_type == "SQL92" and not expression.expression.strip():
            raise ProxyError(pb.ILLEGAL_FILTER_EXPRESSION, "an SQL92 filter expression is blank")
        try:
            pop_filters(exp_type, expression.expression)  # compiled once, cached by its text
        except SqlFilterError as exc:
            raise ProxyError(
                pb.ILLEGAL_FILTER_EXPRESSION,
                f"the {exp_type} filter expression {expression.expression!r} does not parse: {exc}",
            ) from None
        # The proxy caps a batch at 32 without a word; so does a pop.
        batch = request.batch_size or settings.subscription.receive_batch_size or MAX_BATCH
        batch = min(max(batch, 1), MAX_BATCH)
        return PopMessageRequestHeader(
            consumer_group=request.group.name,
            topic=request.message_queue.topic.name,
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible,
            poll_time=polling,
            born_time=int(time.time() * 1000),
            init_mode=INIT_MODE_MAX,
            exp_type=exp_type,
            exp=expression.expression or "*",
            order=settings.subscription.fifo,
            attempt_id=request.attempt_id or None,
        )

    async def _deliverable(
        self,
        channel: LocalChannel,
        *,
        response: RemotingCommand,
        group: str,
        topic: str,
        invisible: int,
        max_attempts: int,
        renew_for: str | None,
    ) -> list[pb.Message]:
        """The popped messages as v2 messages with their receipt handles; those past their
        attempts go to the dead-letter queue instead. With ``renew_for`` (the client id of
        an auto-renewing receive) each delivered one is kept invisible until acked."""
        header = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        starts = parse_offset_info(header.start_offset_info)
        broker_name = self.broker.config.broker_name
        out: list[pb.Message] = []
        for view in decode_records(response.body_bytes, broker_name, MessageExt):
            handle = _handle_of(view, header, starts, broker_name)
            receipt = handle.receipt
            if receipt.revive_qid == ORDER_REVIVE_QID:
                # An orderly pop's message never goes through a retry topic: its attempts
                # are the times its batch was handed out.
                view.reconsume_times = (
                    self.broker.pop.ordered.attempts(
                        (group, view.topic, view.queue_id), view.queue_offset
                    )
                    - 1
                )
            if view.reconsume_times >= max_attempts:
                await self._to_dlq(
                    channel,
                    group=group,
                    topic=topic,
                    view=view,
                    handle=handle,
                    max_attempts=max_attempts,
                )
                continue
            out.append(to_v2(view, topic=topic, receipt_handle=str(handle), invisible_ms=invisible))
            if renew_for is not None:
                self.renewals.track(
                    Held(
                        renew_for,
                        channel,
                        group,
                        topic,
                        handle,
                        received_ms=int(time.time() * 1000),
                        retry_delay_ms=self._retry_delay_ms(view.reconsume_times),
                    )
                )
        return out

    def _retry_delay_ms(self, reconsume_times: int) -> int:
        """When a message held too long is released: its group's next retry delay (the
        delay levels from the third, as the settings' customized backoff says)."""
        levels = self.broker.store.config.delay_levels_ms[2:] or (10_000,)
        return levels[min(reconsume_times, len(levels) - 1)]

    async def _to_dlq(
        self,
        channel: LocalChannel,
        *,
        group: str,
        topic: str,
        view: MessageExt,
        handle: Handle,
        max_attempts: int,
    ) -> None:
        response = await dead_letter(
            self.broker,
            channel,
            group,
            topic,
            handle,
            message_id=view.msg_id,
            max_reconsume_times=max_attempts - 1,
        )
        if response.code == ResponseCode.SUCCESS:
            log.info("grpc_message_to_dlq", group=group, topic=topic, msg_id=view.msg_id)

    # ------------------------------------------------------------------- ack

    async def ack_message(
        self,
        request: rpc.AckMessageRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.AckMessageResponse:
        call = context_of(context)
        group, topic = valid_group(request.group.name), valid_topic(request.topic.name)
        check_access(self.broker.acl, call, consume_need(topic, group))
        channel = self.clients.get_or_create(call).channel
        entries = []
        for entry in request.entries:
            try:
                handle = self.renewals.latest(group, parse_handle(entry.receipt_handle))
                response = await ack_one(self.broker, channel, group, topic, handle)
                if response.code == ResponseCode.SUCCESS:
                    self.renewals.forget(group, handle)
                st = (
                    OK_STATUS
                    if response.code == ResponseCode.SUCCESS
                    else _receipt_status(response)
                )
            except ProxyError as exc:
                st = status(exc.code, exc.message)
            entries.append(
                rpc.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=st
                )
            )
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            overall = entries[0].status
        elif not codes:
            overall = status(pb.BAD_REQUEST, "no entry to ack")
        else:
            overall = status(pb.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
        return rpc.AckMessageResponse(status=overall, entries=entries)

    # ----------------------------------------------------------------- change

    async def change_invisible_duration(
        self,
        request: rpc.ChangeInvisibleDurationRequest,
        context: aio.ServicerContext[Any, Any],
    ) -> rpc.ChangeInvisibleDurationResponse:
        call = context_of(context)
        group, topic = valid_group(request.group.name), valid_topic(request.topic.name)
        # 5.x checks SUB on the group only here (the topic is the receipt's).
        check_access(self.broker.acl, call, consume_need(None, group))
        invisible = duration_ms(request.invisible_duration)
        if not 0 <= invisible <= MAX_INVISIBLE_MS:
            raise ProxyError(
                pb.ILLEGAL_INVISIBLE_TIME,
                f"the invisible time {invisible} ms is not within 0..{MAX_INVISIBLE_MS} ms",
            )
        handle = self.renewals.latest(group, parse_handle(request.receipt_handle))
        channel = self.clients.get_or_create(call).channel
        changed = await change_one(
            self.broker, channel, group, topic, handle, invisible_ms=invisible
        )
        if isinstance(changed, RemotingCommand):
            return rpc.ChangeInvisibleDurationResponse(status=_receipt_status(changed))
        self.renewals.forget(group, handle)  # the client decides its invisible time now
        return rpc.ChangeInvisibleDurationResponse(status=OK_STATUS, receipt_handle=str(changed))


def _handle_of(
    view: MessageExt,
    header: PopMessageResponseHeader,
    starts: dict[tuple[str, int], str],
    broker_name: str,
) -> Handle:
    """A popped message's receipt handle, from its pop's answer (``createHandle``)."""
    receipt = popped_receipt(
        starts,
        pop_time=header.pop_time,
        invisible_time=header.invisible_time,
        revive_qid=header.revive_qid,
        broker_name=broker_name,
        topic=view.topic,
        queue_id=view.queue_id,
        queue_offset=view.queue_offset,
    )
    return Handle(receipt, view.commit_log_offset)


def _receipt_status(response: RemotingCommand) -> pb.Status:
    """An ack or change refused: an unknown or expired receipt is INVALID_RECEIPT_HANDLE,
    as the 5.x clients expect."""
    if response.code in (ResponseCode.NO_MESSAGE, ResponseCode.INVALID_PARAMETER):
        return status(pb.INVALID_RECEIPT_HANDLE, response.remark or "receipt handle is invalid")
    return from_remoting(response.code, response.remark)
