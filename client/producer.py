"""``Producer``: send messages to a topic's queues.

RocketMQ counterpart: ``DefaultMQProducer`` / ``DefaultMQProducerImpl.sendDefaultImpl``: find
the topic's route (falling back to the ``TBW102`` template so the broker auto-creates the
topic), pick a queue with the fault strategy, send SEND_MESSAGE_V2 (310) or
SEND_BATCH_MESSAGE (320), and retry on another broker when a send fails
(``retry_times_when_send_failed``, default 2; never beyond the send timeout). Bodies of
4 KiB or more are zlib-compressed; every message gets a UNIQ_KEY id.

Sends that overlap (many tasks awaiting ``send`` at once) are coalesced, as RocketMQ 5's
``autoBatch`` producer does (``ProduceAccumulator``), but without a linger: while a topic has
``max_in_flight_per_topic`` sends or flushes outstanding, new messages wait, and go as soon
as one of those answers. A lone send never waits. A flush gives each waiting message its
queue by the same round robin (and fault strategy) as a send of its own, one step per
message, and sends one SEND_BATCH_MESSAGE per queue, so queues fill as evenly as with sends
one by one. (Java's accumulator picks one queue per batch; its batches are small, 32 KiB
after at most 10 ms, so that evens out. Ours take whatever waited, a burst of hundreds.)
Each message still gets a result of its own (its id, its queue and offset). Messages with a
delay level or a body big enough to be compressed always go alone (a batch carries
neither); ``auto_batch=False`` turns coalescing off.

Usage::

    async with Producer("demo-producer", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(Message("orders", b"hello", tags="TagA"))
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

from client.errors import (
    ClientError,
    ClientTimeoutError,
    InvalidArgumentError,
    InvalidMessageError,
    NoRouteError,
)
from client.fault import FaultStrategy, TopicPublishInfo
from client.instance import DEFAULT_TOPIC, ClientInstance, TlsOption, namesrv_from_env
from client.message import (
    COMPRESS_OVER_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    UNIQ_IDS,
    Message,
    SendResult,
    SendStatus,
    check_group,
)
from client.service import ClientService
from client.trace import DEFAULT_REGION, MessageType, TraceBean, TraceContext, TraceType
from client.trace_dispatch import TraceDispatcher, inner_group
from codec import COMPRESSED_FLAG, COMPRESSION_ZLIB, compress_body, encode_batch_entry, java_hash
from remoting.acl import SessionCredentials
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BrokerError, RemotingError, RemotingTimeoutError
from remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader
from remoting.route import MessageQueue, TopicRouteData

log = logging.getLogger(__name__)

QueueSelector = Callable[[list[MessageQueue], Message, object], MessageQueue]
SendCallback = Callable[[SendResult | None, BaseException | None], None]

_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
# Broker answers after which Java tries another broker (DefaultMQProducerImpl).
_RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.SYSTEM_BUSY,
    }
)
# Keeps a coalesced request well inside any broker's maxMessageSize (4 MiB by default).
_COALESCED_MAX_BYTES = 1024 * 1024


@dataclass(slots=True, eq=False)
class _Pending:
    """A send waiting for the topic's next coalesced request."""

    entry: bytes  # the message as a batch entry (body and properties)
    body: bytes
    properties: str
    flag: int
    uniq: str
    deadline: float
    timeout_s: float  # the send's whole budget, for the text of its timeout
    future: asyncio.Future[SendResult]


@dataclass(slots=True, eq=False)
class _Accumulator:
    """Per topic: lone sends and flushes outstanding, and the sends queued behind them."""

    in_flight: int = 0
    pending: list[_Pending] = field(default_factory=list)
    pending_bytes: int = 0
    flush_scheduled: bool = False


@dataclass(slots=True, frozen=True)
class _Outgoing:
    """An encoded send: what every attempt of it puts on the wire."""

    code: int
    body: bytes
    sys_flag: int
    properties: str
    flag: int
    msg_id: str  # UNIQ_KEY, comma-joined for a batch
    batch: bool


def _raise_send_failure(
    topic: str, code: int, timeout_s: float, last_error: BaseException | None, failures: int
) -> NoReturn:
    """What a send without a result raises: the last attempt's error, or, for a timeout, one
    that gives the send's whole budget (the last attempt had what the route lookup and the
    attempts before it left), naming the broker, or "any broker" when several were tried."""
    if isinstance(last_error, RemotingTimeoutError):
        if failures == 1:
            addr, opaque = last_error.addr, last_error.opaque
            raise RemotingTimeoutError(addr, code, opaque, timeout_s) from None
        raise ClientTimeoutError(
            code,
            f"any broker of topic {topic}",
            timeout_s,
            outcome=f"no response ({failures} attempts, the last to {last_error.addr})",
        ) from last_error
    if last_error is not None:
        raise last_error
    # No attempt had time left: looking the route up took the whole budget.
    raise ClientTimeoutError(
        code, f"any broker of topic {topic}", timeout_s, outcome="not sent (no route yet)"
    )


def select_by_hash(queues: list[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
    """``SelectMessageQueueByHash``: Java's String.hashCode of the key, so a key lands on the
    same queue whichever language's producer sends it."""
    code = java_hash(str(arg))
    return queues[abs(code % len(queues)) if code >= 0 else abs(code) % len(queues)]


class Traced(Protocol):
    """A client that may write trace records: its group and how it reaches the brokers."""

    group: str
    namesrv: str
    tls: TlsOption
    credentials: SessionCredentials | None


def trace_dispatcher(client: Traced, kind: str, trace_topic: str | None) -> TraceDispatcher:
    """The trace writer of a traced ``client`` (``kind`` PRODUCE or CONSUME): a dispatcher
    over an inner producer of its own, as Java's AsyncTraceDispatcher has."""
    inner = inner_group(client.group, kind)
    sender = Producer(
        inner,
        client.namesrv,
        # an instance of its own: trace sends never queue behind the traced client's calls
        instance_name=f"PID_CLIENT{inner}",
        max_message_bytes=128_000,
        auto_batch=False,
        tls=client.tls,
        credentials=client.credentials,
    )
    return TraceDispatcher(sender, trace_topic=trace_topic)


class Producer(ClientService):
    """Sends messages; ``async with`` starts and shuts it down.

    Args:
        group: the producer group (used by transactions and for broker bookkeeping).
        namesrv: ``host:port[;host:port]``; default ``NAMESRV_ADDR``.
        send_timeout_s: the whole budget of one send, retries included.
        retry_times_when_send_failed: extra attempts, each on another broker when possible.
        send_latency_fault_enable: avoid brokers that were slow or failed for a while
            (RocketMQ's default is off; on here, so a dead broker costs one timeout, not one
            per send).
        max_message_bytes: refuse larger bodies before sending.
        compress_over_bytes: compress bodies of at least this size.
        auto_batch: coalesce sends that overlap into batch requests (see the module doc).
        max_in_flight_per_topic: sends or flushes outstanding per topic before sends are
            coalesced (a flush is one batch request per queue, all sent at once).
        max_batch_messages: the most messages one flush (so one coalesced request) carries.
        trace: write each send's trace record (Java's ``enableMsgTrace``): to
            ``trace_topic``, else ``RMQ_SYS_TRACE_TOPIC``, in the background, batched, never
            failing or slowing a send; ``mqadmin queryMsgTraceById -i <msg_id>`` reads it.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        send_timeout_s: float = 3.0,
        retry_times_when_send_failed: int = 2,
        send_latency_fault_enable: bool = True,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        compress_over_bytes: int = COMPRESS_OVER_BYTES,
        compress_level: int = 5,
        default_topic_queue_nums: int = 4,
        instance_name: str | None = None,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
        auto_batch: bool = True,
        max_in_flight_per_topic: int = 2,
        max_batch_messages: int = 512,
        trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        check_group(group)
        if send_timeout_s <= 0 or retry_times_when_send_failed < 0:
            raise InvalidArgumentError("send_timeout_s must be > 0, retries >= 0")
        if max_in_flight_per_topic < 1 or max_batch_messages < 1:
            raise InvalidArgumentError(
                "max_in_flight_per_topic and max_batch_messages must be >= 1"
            )
        self.group = group
        self.namesrv = namesrv_from_env(namesrv)
        self.send_timeout_s = send_timeout_s
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.max_message_bytes = max_message_bytes
        self.compress_over_bytes = compress_over_bytes
        self.compress_level = compress_level
        self.default_topic_queue_nums = default_topic_queue_nums
        self.instance_name = instance_name
        self.tls = tls
        self.credentials = credentials
        self.auto_batch = auto_batch
        self.max_in_flight_per_topic = max_in_flight_per_topic
        self.max_batch_messages = max_batch_messages
        self.fault = FaultStrategy(enabled=send_latency_fault_enable)
        self.publish_info: dict[str, TopicPublishInfo] = {}
        self._accumulators: dict[str, _Accumulator] = {}
        self._coalescing: set[asyncio.Task[None]] = set()
        # What auto-batching did: requests carrying more than one message, and their messages.
        self.coalesced_requests = 0
        self.coalesced_messages = 0
        self.coalesced_refused = 0  # refused as a batch, then sent one by one
        self._instance: ClientInstance | None = None
        # trace=True: each send's Pub record goes to the trace topic (enableMsgTrace). The
        # traced send replaces ``send`` on this instance only, so an untraced producer's
        # sends pay nothing for it (not even a check or a coroutine more).
        self.tracer = trace_dispatcher(self, "PRODUCE", trace_topic) if trace else None
        if self.tracer is not None:
            self.send = self._traced_send  # type: ignore[method-assign]
            self.send_batch = self._traced_send_batch  # type: ignore[method-assign]
            self.send_orderly = self._traced_send_orderly  # type: ignore[method-assign]

    # -------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._instance is not None:
            return
        instance = await ClientInstance.acquire(
            self.namesrv, self.instance_name, tls=self.tls, credentials=self.credentials
        )
        try:
            instance.register_producer(self)
        except ClientError:
            await instance.release()
            raise
        self._instance = instance
        await instance.heartbeat()
        if self.tracer is not None:
            await self.tracer.start()
        log.info("producer_started group=%s client_id=%s", self.group, instance.client_id)

    async def shutdown(self) -> None:
        if self._instance is None:
            return
        # Coalesced sends already accepted go out (or fail) before the instance goes away.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.send_timeout_s
        while loop.time() < deadline and (
            self._coalescing or any(acc.pending for acc in self._accumulators.values())
        ):
            if self._coalescing:
                await asyncio.wait(list(self._coalescing), timeout=deadline - loop.time())
            else:
                await asyncio.sleep(0)
        if self.tracer is not None:
            await self.tracer.shutdown()  # the sends' records, written before we go
        instance, self._instance = self._instance, None
        if instance is None:
            return
        await instance.unregister(producer_group=self.group)
        await instance.release()
        log.info("producer_stopped group=%s", self.group)

    def _describe(self) -> str:
        return f"producer {self.group}"

    # ------------------------------------------------------------------ ClientInstance

    def route_updated(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.publish_info:
            self.publish_info[topic] = TopicPublishInfo.from_route(topic, route)

    def topics(self) -> list[str]:
        return list(self.publish_info)

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        info = self.publish_info.get(topic)
        if info is not None and info.ok:
            return info
        instance = self._running()
        self.publish_info.setdefault(topic, TopicPublishInfo())
        route = await instance.update_route(topic)
        if route is not None:
            info = self.publish_info[topic] = TopicPublishInfo.from_route(topic, route)
            if info.ok:
                return info
        # Unknown topic: use the template's queues; the broker creates the topic on the
        # first send (autoCreateTopicEnable), and the next route refresh finds it.
        template = await instance.fetch_route(DEFAULT_TOPIC)
        if template is not None:
            for qd in template.queue_datas:
                n = min(self.default_topic_queue_nums, qd.read_queue_nums)
                qd.read_queue_nums = qd.write_queue_nums = n
            for bd in template.broker_datas:
                instance.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
            info = TopicPublishInfo.from_route(topic, template)
            if info.ok:
                self.publish_info[topic] = info
                return info
        raise NoRouteError(
            topic, "the name server does not know it and auto-creation (TBW102) is not offered"
        )

    # ------------------------------------------------------------------------ encode

    def _prepare(self, msg: Message, *, wait: bool = True) -> tuple[bytes, int, str, str]:
        """(body, sysFlag, properties, UNIQ_KEY) for one message."""
        msg.validate(self.max_message_bytes)
        uniq = UNIQ_IDS.next_id()
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.compress_over_bytes:
            body = compress_body(body, self.compress_level)
            sys_flag |= COMPRESSED_FLAG | COMPRESSION_ZLIB
        props = msg.wire_properties_text(uniq, wait=wait)
        return body, sys_flag, props, uniq

    def _header(
        self, topic: str, queue_id: int, sys_flag: int, props: str, flag: int, *, batch: bool
    ) -> dict[str, str]:
        return SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000),
            flag=flag,
            properties=props,
            reconsume_times=0,
            unit_mode=False,
            batch=batch,
        ).to_v2()

    def _batch(self, msgs: Sequence[Message]) -> tuple[bytes, list[str], str]:
        """The SEND_BATCH_MESSAGE body (protocol.md §10), the ids, and the topic."""
        if not msgs:
            raise InvalidMessageError("a batch needs at least one message")
        topic = msgs[0].topic
        parts: list[bytes] = []
        ids: list[str] = []
        for msg in msgs:
            if msg.topic != topic:
                raise InvalidMessageError(
                    f"a batch goes to one topic: {msg.topic!r} differs from {topic!r}"
                )
            if msg.is_timed:
                raise InvalidMessageError(
                    "messages of a batch cannot have a delay level or a timer"
                )
            msg.validate(self.max_message_bytes)
            uniq = UNIQ_IDS.next_id()
            ids.append(uniq)
            props = msg.wire_properties_text(uniq).encode()
            try:
                parts.append(encode_batch_entry(msg.flag, bytes(msg.body), props))
            except struct.error as exc:  # a 16-bit length: over 32 KB fits no batch entry
                raise InvalidMessageError(
                    f"message {len(parts)} of the batch: properties of {len(props)} bytes "
                    "exceed the 32 KB limit"
                ) from exc
        blob = b"".join(parts)
        if len(blob) > self.max_message_bytes:
            raise InvalidMessageError(
                f"the batch of {len(blob)} bytes is over the max value {self.max_message_bytes}"
            )
        return blob, ids, topic

    # -------------------------------------------------------------------------- send

    async def _traced_send(self, msg: Message, *, timeout_s: float | None = None) -> SendResult:
        """``send`` of a producer with ``trace=True``: the send, then its Pub record."""
        started_ms = int(time.time() * 1000)
        result = await Producer.send(self, msg, timeout_s=timeout_s)
        self._trace_sent(msg, result, started_ms)
        return result

    async def _traced_send_batch(
        self, msgs: Sequence[Message], *, timeout_s: float | None = None
    ) -> SendResult:
        """``send_batch`` of a traced producer: a Pub record for each message of the batch
        (Java writes one for the batch, under the joined ids; one each is what lets
        queryMsgTraceById find any of them)."""
        started_ms = int(time.time() * 1000)
        result = await Producer.send_batch(self, msgs, timeout_s=timeout_s)
        ids = result.msg_id.split(",")
        offset_ids = result.offset_msg_id.split(",")
        if len(ids) == len(msgs):
            for i, msg in enumerate(msgs):
                offset_id = offset_ids[i] if len(offset_ids) == len(ids) else result.offset_msg_id
                one = dataclasses.replace(result, msg_id=ids[i], offset_msg_id=offset_id)
                self._trace_sent(msg, one, started_ms)
        return result

    async def _traced_send_orderly(
        self,
        msg: Message,
        sharding_key: str | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: object = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """``send_orderly`` of a traced producer: the send, then its Pub record."""
        started_ms = int(time.time() * 1000)
        result = await Producer.send_orderly(
            self, msg, sharding_key, selector=selector, arg=arg, timeout_s=timeout_s
        )
        self._trace_sent(msg, result, started_ms)
        return result

    def _trace_sent(
        self,
        msg: Message,
        result: SendResult,
        started_ms: int,
        msg_type: MessageType | None = None,
    ) -> None:
        """SendMessageTraceHookImpl: the Pub record of a send the broker took (a failed send
        has none), unless the broker said traceOn=false or it is a trace message itself.
        ``msg_type``: NORMAL or DELAY by the message unless given (a half message's)."""
        tracer = self.tracer
        if tracer is None or not result.trace_on or msg.topic.startswith(tracer.trace_topic):
            return
        keys = msg.keys if isinstance(msg.keys, str) or msg.keys is None else " ".join(msg.keys)
        bean = TraceBean(
            msg_id=result.msg_id,
            topic=msg.topic,
            offset_msg_id=result.offset_msg_id,
            tags=msg.tags,
            keys=keys,
            store_host=self._running().master_addr(result.message_queue.broker_name) or "",
            body_length=len(msg.body),  # Java's is after compression; none of its views show it
            msg_type=msg_type
            if msg_type is not None
            else MessageType.DELAY
            if msg.is_timed
            else MessageType.NORMAL,
        )
        now_ms = int(time.time() * 1000)
        tracer.append(
            TraceContext(
                TraceType.PUB,
                self.group,
                [bean],
                started_ms,
                result.region_id or DEFAULT_REGION,
                cost_ms=now_ms - started_ms,
                success=result.status is SendStatus.SEND_OK,
            )
        )

    async def send(self, msg: Message, *, timeout_s: float | None = None) -> SendResult:
        """Send and wait for the broker's answer, retrying on another broker on failure.

        Raises:
            InvalidMessageError: the message fails validation (nothing is sent).
            NoRouteError: no route for the topic.
            BrokerError: the broker refused the message (e.g. MessageIllegalError, which is
                also what properties over 32 KB get, alone or coalesced).
            RemotingError: no broker answered within the timeout: a RemotingTimeoutError
                naming the broker, or a ClientTimeoutError when several were tried.
        """
        body, sys_flag, props, uniq = self._prepare(msg)
        timeout = timeout_s or self.send_timeout_s
        if not self.auto_batch or sys_flag or msg.is_timed:
            out = _Outgoing(
                RequestCode.SEND_MESSAGE_V2, body, sys_flag, props, msg.flag, uniq, False
            )
            return await self._send_with_retries(msg.topic, out, timeout)
        acc = self._accumulators.get(msg.topic)
        if acc is None:
            self._running()
            acc = self._accumulators[msg.topic] = _Accumulator()
        if acc.in_flight < self.max_in_flight_per_topic and not acc.pending:
            # Nothing queued and room on the wire: this one goes now, alone.
            acc.in_flight += 1
            try:
                out = _Outgoing(
                    RequestCode.SEND_MESSAGE_V2, body, sys_flag, props, msg.flag, uniq, False
                )
                return await self._send_with_retries(msg.topic, out, timeout)
            finally:
                acc.in_flight -= 1
                self._schedule_flush(msg.topic, acc)
        loop = asyncio.get_running_loop()
        props_bytes = props.encode()
        try:
            entry = encode_batch_entry(msg.flag, body, props_bytes)
        except struct.error:
            # Over 32 KB of properties fit no batch entry (a 16-bit length): sent alone, the
            # broker refuses it (MESSAGE_ILLEGAL) as it does when nothing is coalesced.
            out = _Outgoing(
                RequestCode.SEND_MESSAGE_V2, body, sys_flag, props, msg.flag, uniq, False
            )
            return await self._send_with_retries(msg.topic, out, timeout)
        future: asyncio.Future[SendResult] = loop.create_future()
        acc.pending.append(
            _Pending(entry, body, props, msg.flag, uniq, loop.time() + timeout, timeout, future)
        )
        acc.pending_bytes += len(entry)
        self._schedule_flush(msg.topic, acc)
        return await future

    def _schedule_flush(self, topic: str, acc: _Accumulator) -> None:
        # On the next loop turn, so every send made ready by the same answer joins in.
        if acc.pending and not acc.flush_scheduled and acc.in_flight < self.max_in_flight_per_topic:
            acc.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush, topic, acc)

    def _flush(self, topic: str, acc: _Accumulator) -> None:
        acc.flush_scheduled = False
        while acc.pending and acc.in_flight < self.max_in_flight_per_topic:
            # Take what fits one request (the count cap and the broker's size limit); split
            # among queues below, each part is smaller still.
            limit = min(self.max_message_bytes, _COALESCED_MAX_BYTES)
            taken = 0
            size = 0
            for p in acc.pending:
                if taken >= self.max_batch_messages or (taken and size + len(p.entry) > limit):
                    break
                size += len(p.entry)
                taken += 1
            batch = acc.pending[:taken]
            del acc.pending[:taken]
            acc.pending_bytes -= size
            acc.in_flight += 1
            groups = self._by_queue(topic, batch)
            task = asyncio.create_task(self._send_round(topic, acc, groups), name="send-batch")
            self._coalescing.add(task)
            task.add_done_callback(self._coalescing.discard)

    def _by_queue(
        self, topic: str, batch: list[_Pending]
    ) -> list[tuple[MessageQueue | None, list[_Pending]]]:
        """Each message's queue by the selector one-by-one sends use, one step per message,
        and the messages grouped by queue in the order they were sent.

        A batch request lands in one queue, so choosing one queue per request would put a
        whole burst in one queue, and requests of unequal sizes taking turns would skew a
        long fill. One step per message keeps the queues as even as sends one by one.
        """
        info = self.publish_info.get(topic)
        if info is None or not info.ok:
            return [(None, batch)]  # no route yet: the request looks it up and chooses then
        run = self.fault.select_run(info, len(batch))
        if run is not None:
            # every broker available: the round robin's steps cycle through the queues
            step = len(info.queues)
            return [(mq, batch[k::step]) for k, mq in enumerate(run)]
        groups: dict[MessageQueue, list[_Pending]] = {}
        for p in batch:
            groups.setdefault(self.fault.select(info, None), []).append(p)
        return list(groups.items())

    async def _send_round(
        self,
        topic: str,
        acc: _Accumulator,
        groups: list[tuple[MessageQueue | None, list[_Pending]]],
    ) -> None:
        """One flush: a request per queue, all at once; the flush's slot is free again once
        every one of them has its answer."""
        try:
            if len(groups) == 1:
                await self._send_coalesced(topic, *groups[0])
            else:
                await asyncio.gather(*(self._send_coalesced(topic, mq, b) for mq, b in groups))
        finally:
            acc.in_flight -= 1
            self._schedule_flush(topic, acc)

    async def _send_coalesced(
        self, topic: str, mq: MessageQueue | None, batch: list[_Pending]
    ) -> None:
        """Send ``batch`` to ``mq`` (another queue on a retry), settling every caller's
        future; raises nothing but cancellation."""
        try:
            loop = asyncio.get_running_loop()
            remaining = min(p.deadline for p in batch) - loop.time()
            if remaining <= 0:
                first_due = min(batch, key=lambda p: p.deadline)
                batched = len(batch) > 1
                late = ClientTimeoutError(
                    RequestCode.SEND_BATCH_MESSAGE if batched else RequestCode.SEND_MESSAGE_V2,
                    f"any broker of topic {topic}",
                    first_due.timeout_s,
                    outcome="not sent (queued behind earlier sends)",
                )
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(late)
                return
            if len(batch) == 1:
                p = batch[0]
                out = _Outgoing(
                    RequestCode.SEND_MESSAGE_V2, p.body, 0, p.properties, p.flag, p.uniq, False
                )
                result = await self._send_with_retries(topic, out, remaining, first=mq)
                if not p.future.done():
                    p.future.set_result(result)
                return
            await self._send_joint(topic, mq, batch, remaining)
        except Exception as exc:
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
        except BaseException:
            for p in batch:
                p.future.cancel()
            raise

    async def _send_joint(
        self, topic: str, mq: MessageQueue | None, batch: list[_Pending], remaining: float
    ) -> None:
        """Send two or more messages as one SEND_BATCH_MESSAGE and give each caller its own
        result (its queue offset, its offset message id); a batch the broker refuses is sent
        again one by one. Raises what the send raises (the caller settles the futures)."""
        ids = [p.uniq for p in batch]
        out = _Outgoing(
            RequestCode.SEND_BATCH_MESSAGE,
            b"".join([p.entry for p in batch]),
            0,
            "",
            0,
            ",".join(ids),
            True,
        )
        try:
            joint = await self._send_with_retries(topic, out, remaining, first=mq)
        except BrokerError as exc:
            # Refused as a batch (over the broker's size limit, say): each message gets its
            # own verdict, as if it had never been coalesced.
            log.info(
                "coalesced_batch_refused topic=%s messages=%s code=%s error=%s",
                topic,
                len(batch),
                exc.code,
                exc,
            )
            self.coalesced_refused += 1
            await self._send_each(topic, batch)
            return
        self.coalesced_requests += 1
        self.coalesced_messages += len(batch)
        offset_ids = joint.offset_msg_id.split(",")
        if len(offset_ids) != len(batch):
            offset_ids = [joint.offset_msg_id] * len(batch)
        first = joint.queue_offset
        for i, p in enumerate(batch):
            if not p.future.done():
                p.future.set_result(
                    SendResult(
                        joint.status,
                        p.uniq,
                        offset_ids[i],
                        joint.message_queue,
                        first + i if first >= 0 else -1,
                        joint.region_id,
                        joint.trace_on,
                    )
                )

    async def _send_each(self, topic: str, batch: list[_Pending]) -> None:
        loop = asyncio.get_running_loop()

        async def one(p: _Pending) -> None:
            out = _Outgoing(
                RequestCode.SEND_MESSAGE_V2, p.body, 0, p.properties, p.flag, p.uniq, False
            )
            try:
                result = await self._send_with_retries(
                    topic, out, max(p.deadline - loop.time(), 0.001)
                )
            except Exception as exc:
                if not p.future.done():
                    p.future.set_exception(exc)
                return
            if not p.future.done():
                p.future.set_result(result)

        await asyncio.gather(*(one(p) for p in batch))

    async def send_batch(
        self, msgs: Sequence[Message], *, timeout_s: float | None = None
    ) -> SendResult:
        """Send several messages of one topic in one request; they land in one queue with
        consecutive offsets. ``msg_id`` is the ids joined by commas."""
        body, ids, topic = self._batch(msgs)
        out = _Outgoing(RequestCode.SEND_BATCH_MESSAGE, body, 0, "", 0, ",".join(ids), True)
        return await self._send_with_retries(topic, out, timeout_s or self.send_timeout_s)

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for (or getting) an answer; no retries."""
        body, sys_flag, props, _uniq = self._prepare(msg)
        info = await self._publish_info(msg.topic)
        mq = self.fault.select(info, None)
        addr = self._broker_addr(mq)
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2,
            self._header(msg.topic, mq.queue_id, sys_flag, props, msg.flag, batch=False),
            body,
        )
        instance = self._running()
        request.serialize_type = await instance.serialize_type(addr)
        await instance.remoting.invoke_oneway(addr, request, self.send_timeout_s)

    def send_async(
        self, msg: Message, callback: SendCallback, *, timeout_s: float | None = None
    ) -> asyncio.Task[None]:
        """Callback style: ``callback(result, None)`` or ``callback(None, error)`` later.

        Validation errors raise here, at once.
        """
        msg.validate(self.max_message_bytes)

        async def run() -> None:
            try:
                result = await self.send(msg, timeout_s=timeout_s)
            except Exception as exc:  # handed to the callback, which decides
                self._callback(callback, None, exc)
                return
            self._callback(callback, result, None)

        return asyncio.create_task(run(), name=f"send-async-{msg.topic}")

    def _callback(
        self, callback: SendCallback, result: SendResult | None, error: BaseException | None
    ) -> None:
        try:
            callback(result, error)
        except Exception:
            # Nobody awaits the task: a failing callback is reported here or not at all.
            log.exception("send_callback_failed group=%s", self.group)

    async def send_orderly(
        self,
        msg: Message,
        sharding_key: str | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: object = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send to the queue chosen from ``sharding_key`` (Java's hash selector), or by
        ``selector(queues, msg, arg)``: messages with one key keep their order."""
        if (sharding_key is None) == (selector is None):
            raise InvalidMessageError("send_orderly needs a sharding_key or a selector")
        body, sys_flag, props, uniq = self._prepare(msg)
        info = await self._publish_info(msg.topic)
        if selector is None:
            mq = select_by_hash(info.queues, msg, sharding_key)
        else:
            mq = selector(list(info.queues), msg, arg)
            if mq not in info.queues:
                raise InvalidMessageError(f"the selector chose {mq}, not a queue of {msg.topic}")
        out = _Outgoing(RequestCode.SEND_MESSAGE_V2, body, sys_flag, props, msg.flag, uniq, False)
        return await self._send_once(mq, out, timeout_s or self.send_timeout_s)

    # ---------------------------------------------------------------------- internals

    def _broker_addr(self, mq: MessageQueue) -> str:
        addr = self._running().master_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(mq.topic, f"broker {mq.broker_name} has no master address")
        return addr

    async def _send_with_retries(
        self,
        topic: str,
        out: _Outgoing,
        timeout_s: float,
        *,
        first: MessageQueue | None = None,
    ) -> SendResult:
        """``first``: the queue already chosen for the first attempt (coalesced sends choose
        theirs when they are grouped); retries choose as usual."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        info = await self._publish_info(topic)
        attempts = 1 + self.retry_times_when_send_failed
        last_broker: str | None = None
        last_error: BaseException | None = None
        failures = 0
        for attempt in range(attempts):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if attempt == 0 and first is not None and first in info.queues:
                mq = first
            else:
                mq = self.fault.select(info, last_broker)
            last_broker = mq.broker_name
            started = loop.time()
            try:
                return await self._send_once(mq, out, remaining)
            except BrokerError as exc:
                self.fault.update(mq.broker_name, (loop.time() - started) * 1000, isolation=True)
                if exc.code not in _RETRY_CODES:
                    raise
                last_error = exc
            except (RemotingError, NoRouteError) as exc:
                self.fault.update(mq.broker_name, (loop.time() - started) * 1000, isolation=True)
                last_error = exc
            failures += 1
            log.info(
                "send_retry topic=%s broker=%s attempt=%s error=%s",
                topic,
                mq.broker_name,
                attempt + 1,
                last_error,
            )
        _raise_send_failure(topic, out.code, timeout_s, last_error, failures)

    async def _send_once(self, mq: MessageQueue, out: _Outgoing, timeout_s: float) -> SendResult:
        instance = self._running()
        addr = self._broker_addr(mq)
        header = self._header(
            mq.topic, mq.queue_id, out.sys_flag, out.properties, out.flag, batch=out.batch
        )
        request = RemotingCommand.request(out.code, header, out.body)
        started = time.monotonic()
        response = await instance.invoke_broker(addr, request, timeout_s)
        status = _STATUS.get(ResponseCode(response.code)) if response.code in _STATUS else None
        if status is None:
            raise BrokerError.for_code(
                response.code, response.remark, request_code=out.code, addr=addr, topic=mq.topic
            )
        self.fault.update(mq.broker_name, (time.monotonic() - started) * 1000, isolation=False)
        answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        return SendResult(
            status=status,
            msg_id=out.msg_id,
            offset_msg_id=answer.msg_id,
            message_queue=MessageQueue(mq.topic, mq.broker_name, answer.queue_id),
            queue_offset=answer.queue_offset,
            region_id=answer.msg_region,
            trace_on=answer.trace_on != "false",  # as Java's client: off only when "false"
        )
