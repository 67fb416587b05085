"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053).

RocketMQ counterpart (5.x): ``PopMessageProcessor``, ``AckMessageProcessor`` and
``ChangeInvisibleTimeProcessor`` over the remoting protocol (protocol.md §14); the state they
share is ``broker.pop.PopService``. A pop that finds nothing waits up to its pollTime for a
message on the topic (or the group's pop retry topic) without holding a lane worker, then
answers POLLING_TIMEOUT as 5.x does. A receipt that names no open checkpoint (acked already,
revived after its invisible time, or replaced by a change of invisible time) is refused with
NO_MESSAGE, so a client learns its ack came too late.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import structlog

from broker.clients import normalize_subscription
from broker.config import BrokerRole
from broker.facets import BrokerFacts, Tables
from broker.filter_sql import SqlFilterError
from broker.long_polling import TagFilter
from broker.pop import Checkpoint, PopError, PopService
from broker.pop_order import ORDER_REVIVE_QID
from broker.processors.pull import consuming_group, sql_record_filter, tag_filter_of
from broker.subscriptions import group_refusal
from broker.topics import TOPIC_MAX_LENGTH
from remoting.bodies import PERM_READ, SubscriptionData
from remoting.codes import POLLING_TIMEOUT, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import SLOT_PARKED, Connection
from remoting.dispatch import send_response
from remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from remoting.lifecycle import TaskGroup
from remoting.receipt import Receipt, join_offset_info, pop_retry_topic, real_topic
from store.message_store import RecordFilter

log = structlog.get_logger(__name__)

MAX_POP_NUMS = 32
MIN_INVISIBLE_MS = 10  # anything shorter is a client bug, not a wish
MAX_POLL_MS = 60_000


def pop_filters(
    exp_type: str | None, exp: str | None
) -> tuple[TagFilter | None, RecordFilter | None]:
    """A pop's filters, as PopMessageProcessor builds its ExpressionMessageFilter: none for
    a blank expression, the tag codes for TAG, the compiled expression run on each record's
    properties for SQL92. Unlike a pull, a pop does not ask for ``enablePropertyFilter``
    (RocketMQ 5's brokers serve 5.x clients' SQL92 receives without it).

    Raises:
        SqlFilterError: an SQL92 expression that does not parse, or another type.
    """
    if exp is None or not exp.strip():
        return None, None
    kind = (exp_type or "TAG").upper()
    if kind == "TAG":
        return tag_filter_of(normalize_subscription(SubscriptionData("", exp))), None
    if kind == "SQL92":
        return None, sql_record_filter(exp)
    raise SqlFilterError(f"the expression type {exp_type} is neither TAG nor SQL92")


class PopBroker(BrokerFacts, Tables, Protocol):
    """What pop, ack and change of invisible time touch: the checks' tables, and the pop
    service that holds the checkpoints."""

    @property
    def pop(self) -> PopService: ...


class PopProcessor:
    def __init__(self, broker: PopBroker) -> None:
        self.broker = broker
        self._polls = TaskGroup("pop-polls")  # long-polling pops, parked until a deadline

    # ------------------------------------------------------------------------ pop

    async def pop(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        h = PopMessageRequestHeader.from_ext_fields(request.ext_fields)
        refused = self._check_pop(request, h)
        if refused is not None:
            return refused
        response = await self._pop_once(request, h)
        if (
            response.code == POLLING_TIMEOUT
            and h.poll_time > 0
            # Never for a oneway pop (nobody waits for it), nor past the connection's parked
            # limit: then the answer is "nothing" at once.
            and not request.is_oneway
            and conn.park(request)
        ):
            # Nothing now: answer when a message comes or the poll time is up, off the lane.
            deadline = asyncio.get_running_loop().time() + min(h.poll_time, MAX_POLL_MS) / 1000
            self._polls.spawn(self._poll(conn, request, h, deadline), name="pop-poll")
            return None
        return response

    def _check_pop(
        self, request: RemotingCommand, h: PopMessageRequestHeader
    ) -> RemotingCommand | None:
        """The refusal of a pop this broker does not serve, in RocketMQ's order: the request
        itself, its topic and queue, its group; None to go on."""
        refusal = self._check_request(request, h)
        if refusal is None:
            refusal = self._check_topic(request, h)
        if refusal is None:
            refusal = self._check_group(request, h)
        return refusal

    def _check_request(
        self, request: RemotingCommand, h: PopMessageRequestHeader
    ) -> RemotingCommand | None:
        """Read permission, and a message count and invisible time within bounds."""
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.address}] pop message is forbidden",
            )
        if not 0 < h.max_msg_nums <= MAX_POP_NUMS:
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{broker.address}] pop message's num {h.max_msg_nums} is not "
                f"within 1..{MAX_POP_NUMS}",
            )
        if h.invisible_time < MIN_INVISIBLE_MS:
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {h.invisible_time} ms is too short (at least {MIN_INVISIBLE_MS})",
            )
        return None

    def _check_topic(
        self, request: RemotingCommand, h: PopMessageRequestHeader
    ) -> RemotingCommand | None:
        """The topic exists and is readable, and the queue id is within its read queues."""
        tc = self.broker.topics.get(h.topic)
        if tc is None:
            return response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{h.topic}] not exist, apply first please!",
            )
        if not tc.perm & PERM_READ:
            return response_to(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{h.topic}] peeking message is forbidden",
            )
        if h.queue_id >= tc.read_queue_nums:
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        return None

    def _check_group(
        self, request: RemotingCommand, h: PopMessageRequestHeader
    ) -> RemotingCommand | None:
        """A group that may consume, whose pop retry topic the store can hold."""
        refusal = group_refusal(request, h.consumer_group)
        if refusal is not None:
            return refusal
        retry = pop_retry_topic(h.consumer_group, h.topic)
        if len(retry.encode()) > TOPIC_MAX_LENGTH:
            # 5.x allows 255 here (its records carry long topics); our store holds a topic
            # to 127 bytes, so the messages of this pop could never be revived for a retry.
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"group [{h.consumer_group}] cannot pop topic [{h.topic}]: their retry topic "
                f"{retry} would be {len(retry)} characters, longer than the topic max length "
                f"{TOPIC_MAX_LENGTH}; use a shorter group or topic name",
            )
        found = consuming_group(self.broker.subscription_groups, request, h.consumer_group)
        if isinstance(found, RemotingCommand):
            return found
        return None

    async def _pop_once(
        self, request: RemotingCommand, h: PopMessageRequestHeader
    ) -> RemotingCommand:
        broker = self.broker
        tc = broker.topics.get(h.topic)
        if tc is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        try:
            tag_filter, record_filter = pop_filters(h.exp_type, h.exp)
        except SqlFilterError as exc:
            return response_to(
                request,
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription failed: {exc}",
            )
        try:
            args: dict[str, Any] = {
                "group": h.consumer_group,
                "topic": h.topic,
                "queue_id": h.queue_id,
                "max_nums": h.max_msg_nums,
                "invisible_time": h.invisible_time,
                "init_mode": h.init_mode,
                "tag_filter": tag_filter,
                "record_filter": record_filter,
                "read_queue_nums": tc.read_queue_nums,
            }
            # A FIFO group's pop hands out each queue in order (broker/pop_order.py).
            result = broker.pop.pop_in_order(**args) if h.order else await broker.pop.pop(**args)
        except PopError as exc:
            return response_to(request, exc.code, exc.remark)
        header = PopMessageResponseHeader(
            pop_time=result.pop_time,
            invisible_time=h.invisible_time,
            revive_qid=result.revive_qid,
            rest_num=result.rest_num,
            start_offset_info=join_offset_info(result.start_offsets),
            msg_offset_info=join_offset_info(result.msg_offsets),
        )
        if not result.records:
            return response_to(
                request, POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", header.to_ext_fields()
            )
        response = response_to(request, ResponseCode.SUCCESS, "FOUND", header.to_ext_fields())
        response.body = b"".join(result.records)
        return response

    async def _poll(
        self,
        conn: Connection,
        request: RemotingCommand,
        h: PopMessageRequestHeader,
        deadline: float,
    ) -> None:
        loop = asyncio.get_running_loop()
        pop = self.broker.pop
        try:
            while True:
                left = deadline - loop.time()
                await pop.wait_for_messages(h.topic, max(left, 0.0))
                if conn.closed or request.slot != SLOT_PARKED:
                    # Its connection went, or (an in-process caller, a 5.x client's receive)
                    # the caller gave up: popping now would hide messages nobody receives.
                    return
                response = await self._pop_once(request, h)
                if response.code != POLLING_TIMEOUT or loop.time() >= deadline:
                    send_response(conn, request, response)
                    return
        except Exception as exc:
            log.exception("pop_poll_failed", group=h.consumer_group, topic=h.topic)
            # Answered all the same: the client is not left waiting for its timeout.
            send_response(
                conn,
                request,
                response_to(request, ResponseCode.SYSTEM_ERROR, f"pop poll failed: {exc!r}"),
            )

    # ---------------------------------------------------------------- ack, change

    def _checkpoint(
        self,
        request: RemotingCommand,
        h: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader,
    ) -> Checkpoint | RemotingCommand:
        group, topic, queue_id, offset = h.consumer_group, h.topic, h.queue_id, h.offset
        if self.broker.config.broker_role is BrokerRole.SLAVE:
            return response_to(request, ResponseCode.SLAVE_NOT_AVAILABLE, "ack on a slave")
        try:
            receipt = Receipt.parse(h.extra_info)
            stored_in = real_topic(receipt.kind, topic, group)
        except ValueError as exc:
            return response_to(request, ResponseCode.INVALID_PARAMETER, str(exc))
        if self.broker.topics.get(topic) is None:
            return response_to(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if receipt.queue_id != queue_id:
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId {queue_id} differs from the receipt's {receipt.queue_id}",
            )
        ck = self.broker.pop.find(
            group, stored_in, queue_id, ck_offset=receipt.ck_queue_offset, pop_time=receipt.pop_time
        )
        if ck is None or offset not in ck.offsets or ck.acked & (1 << ck.offsets.index(offset)):
            return response_to(
                request,
                ResponseCode.NO_MESSAGE,
                f"the receipt of offset {offset} in {stored_in}:{queue_id} is expired or "
                "unknown (acked, past its invisible time, or changed since)",
            )
        return ck

    async def ack(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext_fields(request.ext_fields)
        ordered = self._in_order(request, h)
        if ordered is not None:
            return ordered
        ck = self._checkpoint(request, h)
        if isinstance(ck, RemotingCommand):
            return ck
        await self.broker.pop.ack(ck, h.offset)
        return response_to(request, ResponseCode.SUCCESS)

    async def change_invisible_time(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext_fields(request.ext_fields)
        if h.invisible_time < MIN_INVISIBLE_MS:
            return response_to(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {h.invisible_time} ms is too short (at least {MIN_INVISIBLE_MS})",
            )
        ordered = self._in_order(request, h)
        if ordered is not None:
            return ordered
        ck = self._checkpoint(request, h)
        if isinstance(ck, RemotingCommand):
            return ck
        try:
            new = await self.broker.pop.change_invisible_time(ck, h.offset, h.invisible_time)
        except PopError as exc:
            return response_to(request, exc.code, exc.remark)
        header = ChangeInvisibleTimeResponseHeader(
            pop_time=new.pop_time, invisible_time=new.invisible_time, revive_qid=new.revive_qid
        )
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    def _in_order(
        self,
        request: RemotingCommand,
        h: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader,
    ) -> RemotingCommand | None:
        """An ack or change of an orderly pop's message (its receipt names revive queue
        999): done on the queue's batch in flight; None for any other receipt."""
        try:
            receipt = Receipt.parse(h.extra_info)
        except ValueError:
            return None  # refused with its reason by _checkpoint
        if receipt.revive_qid != ORDER_REVIVE_QID:
            return None
        pop = self.broker.pop
        group, topic, queue_id = h.consumer_group, h.topic, h.queue_id
        expired = response_to(
            request,
            ResponseCode.NO_MESSAGE,
            f"the orderly receipt of offset {h.offset} in {topic}:{queue_id} is expired or "
            "unknown (acked, or handed out again since)",
        )
        if isinstance(h, AckMessageRequestHeader):
            ok = pop.ack_in_order(group, topic, queue_id, h.offset, receipt.pop_time)
            return response_to(request, ResponseCode.SUCCESS) if ok else expired
        new_time = pop.ordered.change(
            (group, topic, queue_id), h.offset, receipt.pop_time, h.invisible_time
        )
        if new_time is None:
            return expired
        header = ChangeInvisibleTimeResponseHeader(
            pop_time=new_time, invisible_time=h.invisible_time, revive_qid=ORDER_REVIVE_QID
        )
        return response_to(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def shutdown(self) -> None:
        await self._polls.close(timeout_s=2.0)
