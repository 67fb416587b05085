"""``PushConsumer``: messages delivered to a listener as they arrive.

RocketMQ counterpart: ``DefaultMQPushConsumer`` with ``RebalanceImpl`` (queues allocated among
the group's consumers every 20 s and when a broker says membership changed),
``ProcessQueue`` (the messages pulled and not yet consumed, with flow control),
``PullMessageService`` (one long-polling pull loop per assigned queue),
``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``.

Offsets: only the lowest offset still in flight is committed, so nothing is skipped if the
process dies; a message whose listener fails is sent back to the broker for a delayed retry
(CONSUMER_SEND_MSG_BACK), or retried locally when the broker refuses that.

Usage::

    consumer = PushConsumer("demo-consumer", namesrv="127.0.0.1:9876")

    @consumer.subscribe("orders", "TagA || TagB")
    async def handle(msg: MessageView) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    await consumer.start()
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from client.errors import ClientError, ClientStateError, InvalidArgumentError
from client.instance import ClientInstance, TlsOption, namesrv_from_env
from client.message import ConsumeResult, MessageView, check_group, check_topic, decode_messages
from client.offset_store import (
    LocalOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    default_offset_dir,
)
from client.rebalance import AllocateStrategy, allocate_averagely
from client.service import ClientService
from codec import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, PROPERTY_RETRY_TOPIC, java_hash
from remoting.acl import SessionCredentials
from remoting.bodies import (
    PERM_READ,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    LockBatchBody,
    MessageModel,
    SubscriptionData,
    decode_lock_ok,
    parse_tag_expression,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
)
from remoting.route import MessageQueue, TopicRouteData, dumps

log = logging.getLogger(__name__)

# The codes a pull is answered with (PullAPIWrapper.processPullResponse); others are errors.
_PULL_ANSWERS = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)

Listener = Callable[[MessageView], Awaitable[ConsumeResult | None] | ConsumeResult | None]

RETRY_PREFIX = "%RETRY%"
PULL_FLAG_COMMIT = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
SUSPEND_TIMEOUT_MS = 15_000  # brokerSuspendMaxTimeMillis
PULL_TIMEOUT_S = 30.0  # consumerTimeoutMillisWhenSuspend
PULL_ERROR_DELAY_S = 3.0  # pullTimeDelayMillsWhenException
FLOW_CONTROL_DELAY_S = 0.05
LOCK_MAX_LIVE_S = 30.0  # rocketmq.client.rebalance.lockMaxLiveTime
ORDERLY_SUSPEND_S = 1.0  # suspendCurrentQueueTimeMillis
ORDERLY_HANDOVER_S = 60.0  # how long a released queue waits for its listener to finish
CONSUME_TIMEOUT_S = 15 * 60.0  # consumeTimeout (15 minutes)


@dataclass(slots=True)
class _Subscription:
    data: SubscriptionData
    listener: Listener


@dataclass(slots=True, eq=False)
class ProcessQueue:
    """Messages pulled from one queue and not yet consumed (RocketMQ ``ProcessQueue``)."""

    mq: MessageQueue
    next_offset: int
    messages: dict[int, MessageView] = field(default_factory=dict)  # queue offset → message
    size_bytes: int = 0
    dropped: bool = False
    locked: bool = False
    last_lock_at: float = 0.0
    task: asyncio.Task[None] | None = None
    consuming: asyncio.Lock = field(default_factory=asyncio.Lock)  # orderly: one at a time
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # The broker id the last pull reply suggested (suggestWhichBrokerId): 0 is the master.
    pull_from_broker_id: int = 0
    last_pull_ms: int = 0  # for mqadmin consumerStatus
    # The offsets of ``messages`` in ascending order, plus ones already removed that have not
    # reached the front yet: the lowest in-flight offset without a scan (Java's TreeMap).
    order: deque[int] = field(default_factory=deque)

    def put(self, msgs: list[MessageView]) -> None:
        messages = self.messages
        order = self.order
        resort = False
        for m in msgs:
            offset = m.queue_offset
            if offset not in messages:
                if order and offset <= order[-1]:
                    resort = True  # the position moved back (offset moved, seek)
                messages[offset] = m
                order.append(offset)
                self.size_bytes += len(m.body)
        if resort:
            self.order = deque(sorted(messages))

    def first(self) -> int | None:
        """The lowest offset still in flight."""
        order = self.order
        messages = self.messages
        while order and order[0] not in messages:
            order.popleft()
        return order[0] if order else None

    def remove(self, msg: MessageView) -> int:
        """Drop a consumed message; the offset that is now safe to commit."""
        if self.messages.pop(msg.queue_offset, None) is not None:
            self.size_bytes -= len(msg.body)
        first = self.first()
        return self.next_offset if first is None else first

    def clear(self) -> None:
        self.messages.clear()
        self.order.clear()
        self.size_bytes = 0


@dataclass(slots=True, eq=False)
class _Worker:
    """One of the ``consume_concurrency`` tasks running listeners (Java's consume thread)."""

    task: asyncio.Task[None] | None = None
    msg: MessageView | None = None  # in the listener now
    started: float = 0.0
    timed_out: bool = False


class PushConsumer(ClientService):
    """Consumes the topics it subscribes to; ``async with`` starts and shuts it down.

    Args:
        group: the consumer group; clustering consumers of one group share the queues.
        namesrv: ``host:port[;host:port]``; default ``NAMESRV_ADDR``.
        message_model: CLUSTERING (each message to one consumer of the group) or
            BROADCASTING (to every consumer).
        consume_from_where: where a group without a stored offset starts.
        consume_timestamp_ms: for CONSUME_FROM_TIMESTAMP.
        orderly: one message at a time per queue, in order, with broker queue locks.
        consume_concurrency: listener calls in flight at once (concurrent mode).
        allocate: how queues are shared (``client.rebalance``), averagely by default.
        max_reconsume_times: deliveries before a failing message goes to the DLQ.
        pull_batch_size: messages per pull.
        pull_threshold_for_queue: stop pulling a queue holding this many unconsumed messages.
        pull_threshold_size_for_queue: … or this many bytes.
        local_retry_delay_s: wait before retrying locally when the broker refuses a send-back.
        offset_store_dir: broadcasting offsets (default ``~/.rocketmq_offsets``).
        consume_timeout_s: a concurrent listener still running after this long is cancelled
            and its message retried later (``consumeTimeout``, 15 minutes).
        suspend_current_queue_s: orderly: the pause before a failed message is retried.
        pull_error_delay_s: the pause before pulling again after a failed pull.
    """

    _uses_workers = True  # a PullConsumer hands messages to poll() instead

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        orderly: bool = False,
        consume_concurrency: int = 20,
        allocate: AllocateStrategy = allocate_averagely,
        max_reconsume_times: int = 16,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        local_retry_delay_s: float = 5.0,
        offset_store_dir: Path | None = None,
        instance_name: str | None = None,
        tls: TlsOption = None,
        credentials: SessionCredentials | None = None,
        consume_timeout_s: float | None = None,
        suspend_current_queue_s: float | None = None,
        pull_error_delay_s: float | None = None,
    ) -> None:
        check_group(group, consumer=True)
        if consume_concurrency < 1 or pull_batch_size < 1:
            raise InvalidArgumentError("consume_concurrency and pull_batch_size must be >= 1")
        for name, value in (
            ("consume_timeout_s", consume_timeout_s),
            ("suspend_current_queue_s", suspend_current_queue_s),
            ("pull_error_delay_s", pull_error_delay_s),
        ):
            if value is not None and not value > 0:
                raise InvalidArgumentError(f"{name} must be > 0, not {value}")
        self.group = group
        self.namesrv = namesrv_from_env(namesrv)
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms or int(time.time() * 1000) - 1_800_000
        self.orderly = orderly
        self.consume_concurrency = consume_concurrency
        self.allocate = allocate
        self.max_reconsume_times = max_reconsume_times
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.local_retry_delay_s = local_retry_delay_s
        self.offset_store_dir = offset_store_dir or default_offset_dir()
        self.instance_name = instance_name
        self.tls = tls
        self.credentials = credentials
        # None: the module default, read when used (tests shorten those).
        self.consume_timeout_s = consume_timeout_s
        self.suspend_current_queue_s = suspend_current_queue_s
        self.pull_error_delay_s = pull_error_delay_s
        self.subscriptions: dict[str, _Subscription] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.routes: dict[str, TopicRouteData] = {}
        self.offsets: OffsetStore | None = None
        self._instance: ClientInstance | None = None
        self._consuming: set[asyncio.Task[None]] = set()  # orderly consume tasks
        # Concurrent mode: pulled messages wait in one backlog for a fixed set of workers
        # (a task per message costs more than most listeners do).
        self._backlog: deque[tuple[ProcessQueue, MessageView]] = deque()
        self._workers: list[_Worker] = []
        self._idle: deque[asyncio.Future[None]] = deque()
        self._watchdog: asyncio.Task[None] | None = None
        self._route_waiter: asyncio.Task[None] | None = None
        self._rebalance_lock = asyncio.Lock()
        self._stopping = False
        self._started_ms = 0
        self._subs_cache: dict[str, _Subscription] | None = None
        self._is_async: dict[Listener, bool] = {}

    # ----------------------------------------------------------------- subscription

    def subscribe(
        self, topic: str, expression: str = "*", *, sql: str | None = None
    ) -> Callable[[Listener], Listener]:
        """Register the listener of ``topic`` for messages matching the tag ``expression``
        (``*`` or ``TagA || TagB``), or, with ``sql``, an SQL92 expression over the message
        properties (``"a > 5 AND region = 'eu'"``; the broker needs
        ``enablePropertyFilter=true``). Use as a decorator; call before ``start()``."""
        check_topic(topic)
        if self._instance is not None:
            raise ClientStateError("subscribe before start()")
        if sql is not None and (not isinstance(sql, str) or not sql.strip()):
            raise InvalidArgumentError("an SQL92 subscription needs a non-blank expression")

        def register(listener: Listener) -> Listener:
            if sql is not None:
                data = SubscriptionData(
                    topic, sql.strip(), [], [], int(time.time() * 1000), "SQL92"
                )
                self.subscriptions[topic] = _Subscription(data, listener)
                return listener
            sub_string, tags = parse_tag_expression(expression)
            data = SubscriptionData(
                topic,
                sub_string,
                tags,
                [java_hash(t) for t in tags],
                int(time.time() * 1000),
            )
            self.subscriptions[topic] = _Subscription(data, listener)
            return listener

        return register

    def _all_subscriptions(self) -> dict[str, _Subscription]:
        if self._subs_cache is not None:
            return self._subs_cache  # fixed once started: this runs per message
        subs = dict(self.subscriptions)
        if self.message_model is MessageModel.CLUSTERING and self.subscriptions:
            # Retried messages come back on the group's retry topic; the listener of their
            # original topic (RETRY_TOPIC) handles them.
            retry = RETRY_PREFIX + self.group
            subs[retry] = _Subscription(
                SubscriptionData(retry, "*", [], [], int(time.time() * 1000)),
                next(iter(self.subscriptions.values())).listener,
            )
        return subs

    # -------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._instance is not None:
            return
        if not self.subscriptions:
            raise ClientStateError("subscribe to at least one topic before start()")
        instance = await ClientInstance.acquire(
            self.namesrv, self.instance_name, tls=self.tls, credentials=self.credentials
        )
        try:
            instance.register_consumer(self)
        except ClientError:
            await instance.release()
            raise
        self._instance = instance
        self._started_ms = int(time.time() * 1000)
        self._stopping = False
        self._subs_cache = None
        self._subs_cache = self._all_subscriptions()
        if self.message_model is MessageModel.BROADCASTING:
            self.offsets = LocalOffsetStore(self.offset_store_dir, instance.client_id, self.group)
        else:
            self.offsets = RemoteOffsetStore(instance, self.group)
        if self._uses_workers and not self.orderly:
            self._start_workers()
        for topic in self._all_subscriptions():
            route = await instance.update_route(topic)
            if route is None and not topic.startswith(RETRY_PREFIX):
                log.warning("subscribed_topic_has_no_route topic=%s group=%s", topic, self.group)
        try:
            await self._check_sql_subscriptions(instance)
        except ClientError:
            self._instance = None
            instance.consumers.pop(self.group, None)
            await instance.release()
            raise
        await instance.heartbeat()
        await self.rebalance()
        missing = [t for t in self._all_subscriptions() if t not in self.routes]
        if missing:
            # A new group's retry topic is created by the broker on our first heartbeat;
            # look for it (and any other topic not routed yet) soon, not only at the next
            # 30 s route refresh.
            self._route_waiter = asyncio.create_task(
                self._find_missing_routes(missing), name="consumer-routes"
            )
        log.info(
            "consumer_started group=%s client_id=%s model=%s orderly=%s",
            self.group,
            instance.client_id,
            self.message_model.name,
            self.orderly,
        )

    async def shutdown(self, grace_s: float = 10.0) -> None:
        instance = self._instance
        if instance is None:
            return
        self._stopping = True
        if self._route_waiter is not None:
            self._route_waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._route_waiter
            self._route_waiter = None
        queues = list(self.process_queues.values())
        # Stop pulling first, and let the listeners already running finish (within grace_s)
        # with their queues still live, so what they finish is committed (Java drains the
        # consume executor before it persists offsets and drops the queues).
        for pq in queues:
            pq.wake.set()
            if pq.task is not None:
                pq.task.cancel()
        for pq in queues:
            if pq.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await pq.task
        self._backlog.clear()
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
        running = [w.task for w in self._workers if w.task is not None]
        running.extend(self._consuming)
        if running:
            await asyncio.wait(running, timeout=grace_s)
        for pq in queues:
            pq.dropped = True
        if self._watchdog is not None:
            running.append(self._watchdog)
        for task in running:
            task.cancel()
        if running:
            # A listener that swallows its cancellation is left behind rather than waited
            # for without end.
            await asyncio.wait(running, timeout=1.0)
        self._workers = []
        self._watchdog = None
        await self.persist_offsets()
        if self.orderly:
            await self._unlock([pq.mq for pq in queues])
        self.process_queues.clear()
        self._instance = None
        await instance.unregister(consumer_group=self.group)
        await instance.release()
        log.info("consumer_stopped group=%s", self.group)

    def _describe(self) -> str:
        return f"consumer {self.group}"

    async def _find_missing_routes(self, topics: list[str]) -> None:
        delay = 0.1
        deadline = time.monotonic() + 60.0
        while topics and time.monotonic() < deadline and not self._stopping:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            instance = self._instance
            if instance is None:
                return
            found = False
            for topic in list(topics):
                try:
                    route = await instance.update_route(topic)
                except (RemotingError, ClientError) as exc:
                    log.debug("route_lookup_failed topic=%s error=%s", topic, exc)
                    continue
                if route is not None:
                    topics.remove(topic)
                    found = True
            if found:
                await self.rebalance()

    async def _check_sql_subscriptions(self, instance: ClientInstance) -> None:
        """``checkClientInBroker``: every master of an SQL92-subscribed topic is asked whether
        it takes the expression (CHECK_CLIENT_CONFIG), so a broker without
        ``enablePropertyFilter`` or an expression it cannot parse fails ``start()``."""
        for topic, sub in self.subscriptions.items():
            if sub.data.expression_type != "SQL92":
                continue
            route = instance.routes.get(topic) or await instance.update_route(topic)
            if route is None:
                continue
            body = dumps(
                {
                    "clientId": instance.client_id,
                    "group": self.group,
                    "subscriptionData": sub.data.to_json(),
                }
            )
            for bd in route.broker_datas:
                addr = bd.master_addr
                if addr is None:
                    continue
                request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
                try:
                    response = await instance.invoke_broker(addr, request, 5.0)
                except RemotingError as exc:
                    raise ClientError(f"broker {bd.broker_name} did not answer: {exc}") from exc
                if response.code != ResponseCode.SUCCESS:
                    raise ClientError(
                        f"broker {bd.broker_name} refuses the SQL92 subscription of {topic}: "
                        f"{response.remark}"
                    )

    # ------------------------------------------------------------ ClientInstance API

    def topics(self) -> list[str]:
        return list(self._all_subscriptions())

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=self.message_model,
            consume_from_where=self.consume_from_where,
            subscription_data_set=[s.data for s in self._all_subscriptions().values()],
        )

    def route_updated(self, topic: str, route: TopicRouteData) -> None:
        if topic in self._all_subscriptions():
            self.routes[topic] = route

    async def persist_offsets(self) -> None:
        if self.offsets is not None:
            await self.offsets.persist(list(self.process_queues))

    # -------------------------------------------------------------------- rebalance

    def _readable_queues(self, topic: str) -> list[MessageQueue]:
        route = self.routes.get(topic)
        if route is None:
            return []
        return sorted(
            MessageQueue(topic, qd.broker_name, i)
            for qd in route.queue_datas
            if qd.perm & PERM_READ
            for i in range(qd.read_queue_nums)
        )

    async def rebalance(self) -> None:
        """Work out this consumer's queues and start or stop pulling accordingly."""
        if self._instance is None or self._stopping:
            return
        async with self._rebalance_lock:
            wanted: set[MessageQueue] = set()
            for topic in self._all_subscriptions():
                wanted.update(await self._allocate(topic))
            for mq in [mq for mq in self.process_queues if mq not in wanted]:
                await self._drop(mq)
            for mq in sorted(wanted - set(self.process_queues)):
                await self._add(mq)
            if self.orderly:
                await self._lock_all()

    async def _allocate(self, topic: str) -> list[MessageQueue]:
        instance = self._running()
        mq_all = self._readable_queues(topic)
        if not mq_all:
            return []
        if self.message_model is MessageModel.BROADCASTING:
            return mq_all
        try:
            cid_all = sorted(await instance.consumer_ids(self.group, topic))
        except (RemotingError, ClientError) as exc:
            log.warning("consumer_ids_failed group=%s topic=%s error=%s", self.group, topic, exc)
            return [pq.mq for pq in self.process_queues.values() if pq.mq.topic == topic]
        if instance.client_id not in cid_all:
            return []  # the broker has not seen our heartbeat yet; the next round will
        return self.allocate(self.group, instance.client_id, mq_all, cid_all)

    async def _drop(self, mq: MessageQueue) -> None:
        pq = self.process_queues.pop(mq)
        pq.dropped = True
        pq.wake.set()
        if pq.task is not None:
            pq.task.cancel()
        if self.orderly:
            # The next owner may lock the queue only once the message in our listener is
            # done; otherwise two consumers would hold one key's messages at once.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ORDERLY_HANDOVER_S):
                    await pq.consuming.acquire()
                    pq.consuming.release()
        if self.offsets is not None:
            await self.offsets.persist([mq])
            self.offsets.remove(mq)
        if self.orderly:
            await self._unlock([mq])
        log.info("queue_released group=%s queue=%s", self.group, mq)

    def running_info(self) -> dict[str, Any]:
        """``ConsumerRunningInfo`` for GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus):
        settings, subscriptions, and each queue's offsets and cache."""
        offsets = self.offsets
        mq_table = {}
        for mq, pq in sorted(self.process_queues.items()):
            held = sorted(pq.messages)
            mq_table[mq] = {
                "commitOffset": offsets.read(mq) if offsets is not None else -1,
                "cachedMsgMinOffset": held[0] if held else 0,
                "cachedMsgMaxOffset": held[-1] if held else 0,
                "cachedMsgCount": len(held),
                "cachedMsgSizeInMiB": pq.size_bytes >> 20,
                "locked": pq.locked,
                "droped": pq.dropped,
                "lastPullTimestamp": pq.last_pull_ms,
                "lastLockTimestamp": int(pq.last_lock_at * 1000) if pq.last_lock_at else 0,
            }
        return {
            "properties": {
                "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
                "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
                "PROP_THREADPOOL_CORE_SIZE": str(self.consume_concurrency),
                "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms),
                "messageModel": self.message_model.name,
                "consumeFromWhere": self.consume_from_where.name,
                "pullBatchSize": str(self.pull_batch_size),
                "language": "PYTHON",
            },
            "subscriptionSet": [s.data.to_json() for s in self._all_subscriptions().values()],
            "mqTable": mq_table,
            "statusTable": {},
        }

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker moved this group's offsets (mqadmin resetOffsetByTime): drop what is
        held of those queues, store the new offsets and pull again from them
        (``DefaultMQPushConsumerImpl.resetOffsetByTimeStamp``)."""
        if self._instance is None or self._stopping:
            return
        async with self._rebalance_lock:
            for mq, offset in offsets.items():
                if mq.topic != topic:
                    continue
                pq = self.process_queues.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    pq.wake.set()
                    if pq.task is not None:
                        pq.task.cancel()
                if self.offsets is not None:
                    self.offsets.update(mq, offset)
                    await self.offsets.persist([mq])
                    self.offsets.remove(mq)
        self._running().rebalance_soon()

    async def _add(self, mq: MessageQueue) -> None:
        start = await self._start_offset(mq)
        if start < 0:
            return  # could not read the offset; the next rebalance tries again
        pq = ProcessQueue(mq, start)
        self.process_queues[mq] = pq
        assert self.offsets is not None
        self.offsets.update(mq, start)
        pq.task = asyncio.create_task(self._pull_loop(pq), name=f"pull-{mq.topic}-{mq.queue_id}")
        log.info("queue_assigned group=%s queue=%s offset=%s", self.group, mq, start)

    async def _start_offset(self, mq: MessageQueue) -> int:
        """``computePullFromWhere``."""
        assert self.offsets is not None
        stored = await self.offsets.read_from_store(mq)
        if stored >= 0:
            return stored
        if stored == -2:
            return -1
        where = self.consume_from_where
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or mq.topic.startswith(RETRY_PREFIX):
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            header = SearchOffsetRequestHeader(
                topic=mq.topic, queue_id=mq.queue_id, timestamp=self.consume_timestamp_ms
            )
            return await self._queue_query(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header)
        header2 = QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        return await self._queue_query(mq, RequestCode.GET_MAX_OFFSET, header2)

    async def _queue_query(
        self, mq: MessageQueue, code: int, header: QueueRequestHeader | SearchOffsetRequestHeader
    ) -> int:
        instance = self._running()
        addr = instance.read_addr(mq.broker_name)
        if addr is None:
            return -1
        request = RemotingCommand.request(code, header.to_ext_fields())
        try:
            response = await instance.invoke_broker(addr, request, 5.0)
        except RemotingError as exc:
            log.warning("offset_lookup_failed queue=%s error=%s", mq, exc)
            return -1
        if response.code != ResponseCode.SUCCESS:
            return -1
        return int(response.ext_fields.get("offset", "-1"))

    # -------------------------------------------------------------------- locking

    async def _lock_all(self) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        instance = self._running()
        for broker_name, mqs in by_broker.items():
            addr = instance.master_addr(broker_name)
            if addr is None:
                continue
            body = LockBatchBody(self.group, instance.client_id, mqs).encode()
            request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, body)
            try:
                response = await instance.invoke_broker(addr, request, 5.0)
            except RemotingError as exc:
                log.warning("lock_batch_failed broker=%s error=%s", broker_name, exc)
                continue
            locked = (
                set(decode_lock_ok(response.body_bytes))
                if response.code == ResponseCode.SUCCESS
                else set()
            )
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_at = now
                    pq.wake.set()
                    if pq.messages and not pq.consuming.locked():
                        # Messages left when an earlier lock lapsed: consume them now, not
                        # only when the next pull brings more.
                        self._dispatch(pq, [])

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        instance = self._instance
        if instance is None or not mqs:
            return
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, group_mqs in by_broker.items():
            addr = instance.master_addr(broker_name)
            if addr is None:
                continue
            body = LockBatchBody(self.group, instance.client_id, group_mqs).encode()
            request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, {}, body)
            with contextlib.suppress(RemotingError):
                await instance.invoke_broker(addr, request, 3.0)

    def _pull_error_delay(self) -> float:
        delay = self.pull_error_delay_s
        return PULL_ERROR_DELAY_S if delay is None else delay

    def _lock_live(self, pq: ProcessQueue) -> bool:
        return pq.locked and time.monotonic() - pq.last_lock_at < LOCK_MAX_LIVE_S

    # ------------------------------------------------------------------------ pull

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        sub = self._all_subscriptions()[mq.topic].data
        while not pq.dropped:
            if (
                len(pq.messages) >= self.pull_threshold_for_queue
                or pq.size_bytes >= self.pull_threshold_size_for_queue
            ):
                # Flow control: let the listener catch up before pulling more.
                pq.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FLOW_CONTROL_DELAY_S * 20):
                        await pq.wake.wait()
                continue
            if self.orderly and not self._lock_live(pq):
                await self._lock_all()
                if not self._lock_live(pq):
                    await asyncio.sleep(self._pull_error_delay())
                    continue
            try:
                await self._pull_once(pq, sub)
            except asyncio.CancelledError:
                raise
            except (RemotingError, ClientError) as exc:  # a MessageDecodeError is a ClientError
                log.info("pull_failed queue=%s error=%s", mq, exc)
                pq.pull_from_broker_id = 0  # a suggested slave that fails: back to the master
                await asyncio.sleep(self._pull_error_delay())

    async def _pull_once(self, pq: ProcessQueue, sub: SubscriptionData) -> None:
        instance = self._running()
        mq = pq.mq
        found = instance.subscribe_addr(mq.broker_name, pq.pull_from_broker_id)
        if found is None:
            await instance.update_route(mq.topic)
            raise ClientError(f"no broker address for broker group {mq.broker_name}")
        addr, from_slave = found
        assert self.offsets is not None
        commit = self.offsets.read(mq) if self.message_model is MessageModel.CLUSTERING else -1
        sys_flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION
        if commit > 0 and not from_slave:
            # A slave never stores offsets; they go to the master by themselves.
            sys_flag |= PULL_FLAG_COMMIT
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=pq.next_offset,
            max_msg_nums=self.pull_batch_size,
            sys_flag=sys_flag,
            commit_offset=max(commit, 0),
            suspend_timeout_millis=SUSPEND_TIMEOUT_MS,
            subscription=sub.sub_string,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await instance.invoke_broker(addr, request, PULL_TIMEOUT_S)
        if pq.dropped:
            return
        pq.last_pull_ms = int(time.time() * 1000)
        code = response.code
        if code not in _PULL_ANSWERS:
            raise ClientError(f"pull of {mq} refused: code {code} {response.remark}")
        # Every answer of a pull carries the four fields (Java's client requires them too).
        answer = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        pq.pull_from_broker_id = max(answer.suggest_which_broker_id, 0)
        if code == ResponseCode.SUCCESS:
            msgs = decode_messages(response.body_bytes, mq.broker_name)
            next_offset = answer.next_begin_offset
            if sub.tags_set:
                # The broker filters by hash code only; drop hash collisions here.
                wanted = set(sub.tags_set)
                msgs = [m for m in msgs if m.tags in wanted]
            extra = {
                PROPERTY_MIN_OFFSET: str(answer.min_offset),
                PROPERTY_MAX_OFFSET: str(answer.max_offset),
            }
            for m in msgs:
                m.put_properties(extra)  # added when the listener reads them (lazy decode)
            pq.next_offset = next_offset
            if msgs:
                pq.put(msgs)
                self._dispatch(pq, msgs)
            elif not pq.messages:
                self.offsets.update(mq, next_offset, increase_only=True)
        elif code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            pq.next_offset = answer.next_begin_offset
            if not pq.messages:
                self.offsets.update(mq, pq.next_offset, increase_only=True)
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            moved_to = answer.next_begin_offset
            log.warning(
                "pull_offset_moved queue=%s requested=%s moved_to=%s", mq, pq.next_offset, moved_to
            )
            pq.next_offset = moved_to
            self.offsets.update(mq, moved_to)
            await self.offsets.persist([mq])

    # --------------------------------------------------------------------- consume

    def _dispatch(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        if self.orderly:
            task = asyncio.create_task(self._consume_orderly(pq), name="consume-orderly")
            self._consuming.add(task)
            task.add_done_callback(self._consuming.discard)
            return
        backlog = self._backlog
        for msg in msgs:
            backlog.append((pq, msg))
        self._wake_workers(len(msgs))

    def _wake_workers(self, n: int) -> None:
        idle = self._idle
        while n > 0 and idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    def _start_workers(self) -> None:
        self._workers = [_Worker() for _ in range(self.consume_concurrency)]
        for i, worker in enumerate(self._workers):
            worker.task = asyncio.create_task(self._work(worker), name=f"consume-{i}")
        self._watchdog = asyncio.create_task(self._watch_timeouts(), name="consume-timeout")

    async def _work(self, worker: _Worker) -> None:
        """ConsumeMessageConcurrentlyService's consume thread: take a message, run the
        listener, settle the result; park when the backlog is empty."""
        loop = asyncio.get_running_loop()
        backlog = self._backlog
        while not self._stopping:
            if not backlog:
                waiter = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            pq, msg = backlog.popleft()
            if pq.dropped:
                continue
            listener, view = self._listener_for(msg)
            worker.msg = msg
            worker.started = time.monotonic()
            try:
                if self._is_async.get(listener):
                    # The usual case, inlined: an async listener that returns SUCCESS.
                    try:
                        outcome = await cast("Awaitable[object]", listener(view))
                    except Exception:
                        log.exception(
                            "listener_failed group=%s msg_id=%s topic=%s",
                            self.group,
                            msg.msg_id,
                            msg.topic,
                        )
                        outcome = ConsumeResult.RECONSUME_LATER
                    result = (
                        ConsumeResult.SUCCESS
                        if outcome is None or outcome is ConsumeResult.SUCCESS
                        else self._result_of(outcome)
                    )
                else:
                    result = await self._call(listener, view)
            except asyncio.CancelledError:
                if not worker.timed_out:
                    raise
                result = ConsumeResult.RECONSUME_LATER
            finally:
                worker.msg = None
            if worker.timed_out:
                # Cancelled by the watchdog (or the listener swallowed the cancellation).
                worker.timed_out = False
                task = asyncio.current_task()
                if task is not None:
                    while task.cancelling():
                        task.uncancel()
                log.warning(
                    "consume_timeout group=%s msg_id=%s queue=%s timeout_s=%s",
                    self.group,
                    msg.msg_id,
                    pq.mq,
                    self._consume_timeout(),
                )
                result = ConsumeResult.RECONSUME_LATER
            if result is ConsumeResult.SUCCESS:
                self._consumed(pq, msg)
            else:
                await self._settle_failure(pq, msg)

    async def _settle_failure(self, pq: ProcessQueue, msg: MessageView) -> None:
        if pq.dropped:
            return
        if self.message_model is MessageModel.BROADCASTING:
            # As in RocketMQ: a broadcast message is not retried; it is logged and dropped.
            log.warning(
                "broadcast_consume_failed_dropped group=%s msg_id=%s topic=%s queue_offset=%s",
                self.group,
                msg.msg_id,
                msg.topic,
                msg.queue_offset,
            )
            self._consumed(pq, msg)
            return
        if await self._send_back(msg):
            self._consumed(pq, msg)
            return
        # The broker would not take it back: retry here, later, keeping the offset below it
        # so nothing is skipped meanwhile.
        asyncio.get_running_loop().call_later(
            self.local_retry_delay_s, self._retry_locally, pq, msg
        )

    def _consume_timeout(self) -> float:
        timeout = self.consume_timeout_s
        return CONSUME_TIMEOUT_S if timeout is None else timeout

    async def _watch_timeouts(self) -> None:
        """Cancel listeners that run past ``consume_timeout_s`` (Java checks every 15 min
        for messages consumed longer than ``consumeTimeout`` and sends them back)."""
        while True:
            timeout = self._consume_timeout()
            await asyncio.sleep(min(timeout / 2, 60.0))
            now = time.monotonic()
            for worker in self._workers:
                if (
                    worker.msg is not None
                    and not worker.timed_out
                    and now - worker.started > timeout
                    and worker.task is not None
                ):
                    worker.timed_out = True
                    worker.task.cancel()

    def _listener_for(self, msg: MessageView) -> tuple[Listener, MessageView]:
        """The listener, and the message as the user sees it (retried ones restored)."""
        subs = self._all_subscriptions()
        topic = msg.topic
        if topic.startswith(RETRY_PREFIX):
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if original:
                restored = dataclasses.replace(msg, topic=original)
                sub = self.subscriptions.get(original)
                if sub is not None:
                    return sub.listener, restored
                return subs[topic].listener, restored
        return subs[topic].listener, msg

    async def _call(self, listener: Listener, msg: MessageView) -> ConsumeResult:
        is_async = self._is_async.get(listener)
        if is_async is None:
            is_async = self._is_async[listener] = inspect.iscoroutinefunction(listener)
        result: object
        try:
            if is_async:
                result = await cast("Awaitable[object]", listener(msg))
            else:
                # A plain function may block; keep it off the event loop.
                result = await asyncio.to_thread(
                    cast("Callable[[MessageView], object]", listener), msg
                )
                if inspect.isawaitable(result):
                    result = await result
        except Exception:
            log.exception(
                "listener_failed group=%s msg_id=%s topic=%s", self.group, msg.msg_id, msg.topic
            )
            return ConsumeResult.RECONSUME_LATER
        if result is None or result is ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS
        return self._result_of(result)

    def _result_of(self, result: object) -> ConsumeResult:
        if result is None:
            return ConsumeResult.SUCCESS
        if not isinstance(result, ConsumeResult):
            log.error("listener_bad_result group=%s result=%r", self.group, result)
            return ConsumeResult.RECONSUME_LATER
        return result

    def _retry_locally(self, pq: ProcessQueue, msg: MessageView) -> None:
        if pq.dropped or self._stopping:
            return
        retried = dataclasses.replace(msg, reconsume_times=msg.reconsume_times + 1)
        pq.messages[msg.queue_offset] = retried
        self._backlog.append((pq, retried))
        self._wake_workers(1)

    def _consumed(self, pq: ProcessQueue, msg: MessageView) -> None:
        safe = pq.remove(msg)
        if self.offsets is not None and not pq.dropped:
            self.offsets.update(pq.mq, safe, increase_only=True)
        pq.wake.set()

    async def _send_back(self, msg: MessageView) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker redelivers it later via the retry topic."""
        instance = self._running()
        addr = instance.master_addr(msg.broker_name)
        if addr is None:
            return False
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=self.group,
            delay_level=0,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.properties.get(PROPERTY_RETRY_TOPIC, msg.topic),
            max_reconsume_times=self.max_reconsume_times,
        )
        request = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
        )
        try:
            response = await instance.invoke_broker(addr, request, 5.0)
        except RemotingError:
            return False
        return response.code == ResponseCode.SUCCESS

    async def _consume_orderly(self, pq: ProcessQueue) -> None:
        async with pq.consuming:
            while pq.messages and not pq.dropped and not self._stopping:
                if not self._lock_live(pq):
                    # Renew at once (Java's tryLockLaterAndReconsume); if the broker says no,
                    # the next owner has it, or the pull loop and rebalance try again.
                    await self._lock_all()
                    if not self._lock_live(pq):
                        return
                offset = pq.first()
                if offset is None:
                    return
                msg = pq.messages[offset]
                listener, view = self._listener_for(msg)
                result = await self._call(listener, view)
                if result is ConsumeResult.SUCCESS:
                    self._consumed(pq, msg)
                    continue
                # Orderly: the same message again after a pause; nothing behind it moves.
                pq.messages[offset] = dataclasses.replace(
                    msg, reconsume_times=msg.reconsume_times + 1
                )
                await asyncio.sleep(
                    self.suspend_current_queue_s
                    if self.suspend_current_queue_s is not None
                    else ORDERLY_SUSPEND_S
                )
