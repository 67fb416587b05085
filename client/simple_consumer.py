"""SimpleConsumer: receive messages, then ack each one, or let it come back.

RocketMQ counterpart: RocketMQ 5's ``SimpleConsumer`` (``receive`` / ``ack`` /
``changeInvisibleDuration``), here over the remoting protocol's pop codes, as the 5.x Java
client's ``MQClientAPIImpl.popMessageAsync`` / ``ackMessageAsync`` / ``changeInvisibleTimeAsync``
do (protocol.md §14).

``receive`` pops up to ``max_messages`` from one broker serving the next subscribed topic,
waiting up to ``await_duration`` for any to arrive. Each message is invisible to every
consumer of the group for ``invisible_duration``; ``ack`` ends it, and a message not acked in
time comes back (from the group's pop retry topic) with ``delivery_attempt`` one higher, until
the group's retry limit sends it to the dead-letter queue. ``change_invisible_duration`` gives
a message more (or less) time and renews its receipt; the receipt it replaced can no longer be
used. The receipt handle is 5.x's ``extraInfo`` string.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from client.errors import ClientError, InvalidArgumentError, NoRouteError, reading_answer
from client.instance import ClientInstance, TlsOption, namesrv_from_env
from client.message import (
    TOPIC_MAX_LENGTH,
    MessageView,
    check_group,
    check_topic,
    decode_messages,
)
from client.producer import trace_dispatcher
from client.service import ClientService
from client.trace import ConsumeReturnType, TraceContext
from client.trace_dispatch import ConsumeTracer
from remoting.acl import SessionCredentials
from remoting.bodies import PERM_READ, ConsumeFromWhere
from remoting.codes import POLLING_TIMEOUT, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BrokerError
from remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from remoting.receipt import NORMAL, Receipt, parse_offset_info, popped_receipt

log = logging.getLogger(__name__)

MAX_RECEIVE = 32
INIT_MIN, INIT_MAX = 0, 1  # ConsumeInitMode


@dataclass  # no slots=True: slots named as MessageView's fields would shadow its lazy ones
class ReceivedMessage(MessageView):
    """A message from ``receive``: a ``MessageView`` with its receipt handle."""

    receipt_handle: str = ""
    delivery_attempt: int = 1  # 1 the first time; one more each time it comes back
    invisible_until: float = 0.0  # epoch seconds, as the receipt says
    # A traced consumer's SubBefore record of this delivery; ``ack`` writes its SubAfter.
    trace_context: TraceContext | None = field(default=None, repr=False, compare=False)


class SimpleConsumer(ClientService):
    """Args:
    group: the consumer group; its members share the messages.
    namesrv: ``host:port[;host:port]``; default ``NAMESRV_ADDR``.
    subscriptions: ``{topic: tag expression}`` (or call ``subscribe``).
    await_duration: how long ``receive`` waits for messages to arrive.
    consume_from_where: where a new group starts: the first message, or (RocketMQ 5's
        default) the last one.
    trace: write trace records (Java's ``enableMsgTrace``): a SubBefore for each message
        received, a SubAfter when it is acked (its cost: the time from receive to ack), to
        ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), in the background, batched. A
        message never acked has no SubAfter: it was not consumed.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        subscriptions: Mapping[str, str] | None = None,
        await_duration: timedelta = timedelta(seconds=20),
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        request_timeout_s: float = 3.0,
        instance_name: str | None = None,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
        trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        check_group(group, consumer=True)
        if await_duration < timedelta(0):
            raise InvalidArgumentError(f"await_duration {await_duration} is negative")
        self.group = group
        self.namesrv = namesrv_from_env(namesrv)
        self.subscriptions: dict[str, str] = {}
        self._sql_topics: set[str] = set()  # those whose expression is SQL92
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)
        self.await_duration = await_duration
        self.init_mode = (
            INIT_MIN
            if consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            else INIT_MAX
        )
        self.request_timeout_s = request_timeout_s
        self.instance_name = instance_name
        self.tls = tls
        self.credentials = credentials
        self._instance: ClientInstance | None = None
        self._topic_turn = 0
        self._broker_turn = 0
        self.tracer = trace_dispatcher(self, "CONSUME", trace_topic) if trace else None
        self._trace = ConsumeTracer(self.tracer, group) if self.tracer is not None else None

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        """Receive the messages of ``topic`` matching the tag ``expression`` (``*`` or
        ``TagA || TagB``), or, with ``sql``, an SQL92 expression over the message properties
        (``"a > 5 AND region = 'eu'"``, filtered by the broker as it pops)."""
        check_topic(topic)
        retry = f"%RETRY%{self.group}_{topic}"  # where the broker revives what is not acked
        if len(retry) > TOPIC_MAX_LENGTH:
            raise InvalidArgumentError(
                f"group {self.group} cannot subscribe to {topic}: their retry topic would be "
                f"{len(retry)} characters, over the topic max length {TOPIC_MAX_LENGTH}"
            )
        if sql is not None:
            if not isinstance(sql, str) or not sql.strip():
                raise InvalidArgumentError("an SQL92 subscription needs a non-blank expression")
            self.subscriptions[topic] = sql.strip()
            self._sql_topics.add(topic)
            return
        if not expression.strip():
            raise InvalidArgumentError("the tag expression must be non-blank ('*' for all)")
        self.subscriptions[topic] = expression.strip()
        self._sql_topics.discard(topic)

    async def start(self) -> None:
        if self._instance is not None:
            return
        instance = await ClientInstance.acquire(
            self.namesrv, self.instance_name, tls=self.tls, credentials=self.credentials
        )
        self._instance = instance
        if self.tracer is not None:
            await self.tracer.start()
        for topic in self.subscriptions:
            await instance.update_route(topic)
        log.info(
            "simple_consumer_started group=%s topics=%s", self.group, sorted(self.subscriptions)
        )

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            if self.tracer is not None:
                await self.tracer.shutdown()
            await instance.release()
            log.info("simple_consumer_stopped group=%s", self.group)

    def _describe(self) -> str:
        return f"simple consumer {self.group}"

    # ---------------------------------------------------------------------- receive

    async def _broker_for(self, topic: str) -> tuple[str, str]:
        instance = self._running()
        route = instance.routes.get(topic) or await instance.update_route(topic)
        if route is None:
            raise NoRouteError(topic, "the name server does not know it")
        names = sorted(
            qd.broker_name
            for qd in route.queue_datas
            if qd.perm & PERM_READ and qd.read_queue_nums > 0
        )
        for _ in range(len(names)):
            self._broker_turn += 1
            name = names[self._broker_turn % len(names)]
            addr = instance.master_addr(name)
            if addr is not None:
                return name, addr
        raise NoRouteError(topic, "no readable queue on a broker with a master")

    async def receive(
        self, max_messages: int = 16, invisible_duration: timedelta = timedelta(seconds=30)
    ) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages (1..32), each invisible to the group for
        ``invisible_duration``; an empty list when none came within ``await_duration``.

        Raises:
            ClientStateError: not started, or nothing subscribed.
            BrokerError: the broker refused (e.g. unknown topic).
            RemotingTimeoutError: no answer within ``await_duration`` plus
                ``request_timeout_s`` (the text names POP_MESSAGE, the broker and the wait).
            ResponseDecodeError: the answer cannot be read.
        """
        if not 1 <= max_messages <= MAX_RECEIVE:
            raise InvalidArgumentError(
                f"max_messages {max_messages} is not within 1..{MAX_RECEIVE}"
            )
        invisible_ms = invisible_duration // timedelta(milliseconds=1)
        if invisible_ms < 10:
            raise InvalidArgumentError(f"invisible_duration {invisible_duration} is under 10 ms")
        if not self.subscriptions:
            raise ClientError(f"{self._describe()} has no subscription")
        instance = self._running()
        topics = sorted(self.subscriptions)
        self._topic_turn += 1
        topic = topics[self._topic_turn % len(topics)]
        broker_name, addr = await self._broker_for(topic)
        poll_ms = self.await_duration // timedelta(milliseconds=1)
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            init_mode=self.init_mode,
            exp_type="SQL92" if topic in self._sql_topics else "TAG",
            exp=self.subscriptions[topic],
        )
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        response = await instance.invoke_broker(
            addr, request, poll_ms / 1000 + self.request_timeout_s
        )
        if response.code in (POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return []
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(
                response.code, response.remark, request_code=request.code, addr=addr, topic=topic
            )
        with reading_answer(request.code, addr):
            return self._received(response, broker_name)

    def _received(self, response: RemotingCommand, broker_name: str) -> list[ReceivedMessage]:
        """``processPopResponse``: each message's receipt from the response header."""
        header = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        pop_time = header.pop_time
        invisible = header.invisible_time
        revive_qid = header.revive_qid
        starts = parse_offset_info(header.start_offset_info)
        # The views are ReceivedMessages from the start: their fields stay lazy, decoded
        # when the caller reads them, not copied here.
        messages = decode_messages(response.body_bytes, broker_name, ReceivedMessage)
        until = (pop_time + invisible) / 1000
        for msg in messages:
            receipt = popped_receipt(
                starts,
                pop_time=pop_time,
                invisible_time=invisible,
                revive_qid=revive_qid,
                broker_name=broker_name,
                topic=msg.topic,
                queue_id=msg.queue_id,
                queue_offset=msg.queue_offset,
            )
            if receipt.kind != NORMAL:
                # A message back from the group's retry topic shows its own topic.
                msg.topic = msg.properties.get("RETRY_TOPIC", msg.topic)
            msg.receipt_handle = str(receipt)
            msg.delivery_attempt = msg.reconsume_times + 1
            msg.invisible_until = until
            if self._trace is not None:
                msg.trace_context = self._trace.before((msg,))
        return messages

    # ------------------------------------------------------------- ack and change

    def _target(self, msg: ReceivedMessage) -> tuple[Receipt, str]:
        try:
            receipt = Receipt.parse(msg.receipt_handle)
        except ValueError as exc:
            raise InvalidArgumentError(f"bad receipt handle: {exc}") from None
        addr = self._running().master_addr(receipt.broker_name)
        if addr is None:
            raise NoRouteError(msg.topic, f"broker {receipt.broker_name} has no master address")
        return receipt, addr

    async def ack(self, msg: ReceivedMessage) -> None:
        """Done with ``msg``: it will not come back.

        Raises:
            BrokerError: the receipt has expired (past its invisible time, or replaced by
                ``change_invisible_duration``), or the broker refused.
        """
        receipt, addr = self._target(msg)
        header = AckMessageRequestHeader(
            consumer_group=self.group,
            topic=msg.topic,
            queue_id=receipt.queue_id,
            extra_info=msg.receipt_handle,
            offset=msg.queue_offset,
        )
        request = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
        response = await self._running().invoke_broker(addr, request, self.request_timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(
                response.code,
                response.remark,
                request_code=request.code,
                addr=addr,
                topic=msg.topic,
            )
        traced, msg.trace_context = msg.trace_context, None
        if traced is not None and self._trace is not None:
            self._trace.after(traced, ConsumeReturnType.SUCCESS)

    async def change_invisible_duration(self, msg: ReceivedMessage, duration: timedelta) -> None:
        """Keep ``msg`` invisible for ``duration`` from now (longer or shorter than before);
        its receipt handle is renewed in place.

        Raises:
            BrokerError: the receipt has expired, or the broker refused.
        """
        invisible_ms = duration // timedelta(milliseconds=1)
        if invisible_ms < 10:
            raise InvalidArgumentError(f"invisible duration {duration} is under 10 ms")
        receipt, addr = self._target(msg)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group,
            topic=msg.topic,
            queue_id=receipt.queue_id,
            extra_info=msg.receipt_handle,
            offset=msg.queue_offset,
            invisible_time=invisible_ms,
        )
        request = RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
        )
        response = await self._running().invoke_broker(addr, request, self.request_timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError.for_code(
                response.code,
                response.remark,
                request_code=request.code,
                addr=addr,
                topic=msg.topic,
            )
        answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        renewed = dataclasses.replace(
            receipt,
            ck_queue_offset=msg.queue_offset,
            pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
            revive_qid=answer.revive_qid,
            queue_offset=msg.queue_offset,
        )
        msg.receipt_handle = str(renewed)
        msg.invisible_until = (renewed.pop_time + renewed.invisible_time) / 1000
