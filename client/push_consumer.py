"""``PushConsumer``: messages delivered to a listener as they arrive.

RocketMQ counterpart: ``DefaultMQPushConsumer`` / ``DefaultMQPushConsumerImpl`` with
``RebalancePushImpl`` (queues allocated among the group's consumers every 20 s and when a
broker says membership changed). This module is the public class, its wiring and the
rebalance; the parts it is made of live next to it, as in RocketMQ:

- ``client.process_queue``: ``ProcessQueue``, the messages pulled from one queue and not yet
  consumed, with flow control's counters and the lowest offset still in flight;
- ``client.pull_service``: ``PullMessageService``, one long-polling pull loop per queue;
- ``client.consume_concurrently``: ``ConsumeMessageConcurrentlyService``, the workers, the
  send-back of failures and the consume-timeout watchdog;
- ``client.consume_orderly``: ``ConsumeMessageOrderlyService``, one message at a time per
  queue under a broker queue lock;
- ``client.offset_store``: ``RemoteOffsetStore`` / ``LocalOffsetStore``.

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
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.consume_concurrently import ConsumeMessageConcurrentlyService
from client.consume_orderly import ConsumeMessageOrderlyService
from client.consume_service import RETRY_PREFIX, ConsumeMessageService, Listener, Subscription
from client.consume_stats import ConsumerStats
from client.errors import ClientError, ClientStateError, InvalidArgumentError
from client.instance import ClientInstance, TlsOption, namesrv_from_env
from client.message import MessageView, check_group, check_topic
from client.offset_store import (
    LocalOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    default_offset_dir,
)
from client.process_queue import ProcessQueue
from client.producer import trace_dispatcher
from client.pull_service import PullMessageService
from client.rebalance import AllocateStrategy, allocate_averagely
from client.service import ClientService
from client.trace_dispatch import ConsumeTracer
from codec import java_hash
from remoting.acl import SessionCredentials
from remoting.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    parse_tag_expression,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import HeaderError, RemotingError
from remoting.headers import OffsetResponseHeader, QueueRequestHeader, SearchOffsetRequestHeader
from remoting.route import MessageQueue, TopicRouteData, dumps

# Listener and ProcessQueue were defined here before the split; users (and tests) import
# them from here still.
__all__ = ["Listener", "ProcessQueue", "PushConsumer"]

log = logging.getLogger(__name__)

QUERY_TIMEOUT_S = 5.0  # GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, CHECK_CLIENT_CONFIG


def _check_arguments(
    consume_concurrency: int, pull_batch_size: int, delays: dict[str, float | None]
) -> None:
    if consume_concurrency < 1 or pull_batch_size < 1:
        raise InvalidArgumentError("consume_concurrency and pull_batch_size must be >= 1")
    for name, value in delays.items():
        if value is not None and not value > 0:
            raise InvalidArgumentError(f"{name} must be > 0, not {value}")


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
        trace: write each consume's trace records (Java's ``enableMsgTrace``): a SubBefore
            when the listener gets a message, a SubAfter with its time and outcome, to
            ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), in the background, batched.
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
        trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        # Long because: one line per constructor argument, then the state of a started
        # consumer; split, the list of what a consumer holds would be in two places.
        check_group(group, consumer=True)
        _check_arguments(
            consume_concurrency,
            pull_batch_size,
            {
                "consume_timeout_s": consume_timeout_s,
                "suspend_current_queue_s": suspend_current_queue_s,
                "pull_error_delay_s": pull_error_delay_s,
            },
        )
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
        # None: the module default of the service that uses it, read when used (tests
        # shorten those).
        self.consume_timeout_s = consume_timeout_s
        self.suspend_current_queue_s = suspend_current_queue_s
        self.pull_error_delay_s = pull_error_delay_s
        self.subscriptions: dict[str, Subscription] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.routes: dict[str, TopicRouteData] = {}
        self.offsets: OffsetStore | None = None
        self._instance: ClientInstance | None = None
        # The parts, made by start() and let go by shutdown(); _locks is _consume when
        # orderly (its broker lock calls are the rebalance's too).
        self._pull: PullMessageService | None = None
        self._consume: ConsumeMessageService | None = None
        self._locks: ConsumeMessageOrderlyService | None = None
        self._route_waiter: asyncio.Task[None] | None = None
        self._rebalance_lock = asyncio.Lock()
        self._stopping = False
        self._started_ms = 0
        self._subs_cache: dict[str, Subscription] | None = None
        self.stats = ConsumerStats()  # pull and consume figures, for consumerStatus
        self.tracer = (
            trace_dispatcher(self, "CONSUME", trace_topic) if trace and self._uses_workers else None
        )

    # ----------------------------------------------------------------- subscription

    def subscribe(
        self, topic: str, expression: str = "*", *, sql: str | None = None
    ) -> Callable[[Listener], Listener]:
        """Register the listener of ``topic`` for messages matching the tag ``expression``
        (``*`` or ``TagA || TagB``), or, with ``sql``, an SQL92 expression over the message
        properties (``"a > 5 AND region = 'eu'"``; the broker needs
        ``enablePropertyFilter=true``). Use as a decorator; call before ``start()``."""
        check_topic(topic, to_send=False)
        if self._instance is not None:
            raise ClientStateError("subscribe before start()")
        if sql is not None and (not isinstance(sql, str) or not sql.strip()):
            raise InvalidArgumentError("an SQL92 subscription needs a non-blank expression")

        def register(listener: Listener) -> Listener:
            if sql is not None:
                data = SubscriptionData(
                    topic, sql.strip(), [], [], int(time.time() * 1000), "SQL92"
                )
                self.subscriptions[topic] = Subscription(data, listener)
                return listener
            sub_string, tags = parse_tag_expression(expression)
            data = SubscriptionData(
                topic,
                sub_string,
                tags,
                [java_hash(t) for t in tags],
                int(time.time() * 1000),
            )
            self.subscriptions[topic] = Subscription(data, listener)
            return listener

        return register

    def _all_subscriptions(self) -> dict[str, Subscription]:
        if self._subs_cache is not None:
            return self._subs_cache  # fixed once started
        subs = dict(self.subscriptions)
        if self.message_model is MessageModel.CLUSTERING and self.subscriptions:
            # Retried messages come back on the group's retry topic; the listener of their
            # original topic (RETRY_TOPIC) handles them.
            retry = RETRY_PREFIX + self.group
            subs[retry] = Subscription(
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
        try:
            await self._start_parts(instance)
        except BaseException:
            # Whatever failed (a route lookup, a broker refusing an SQL92 expression, a
            # cancellation), undo what started so that start() can be called again.
            await self._undo_start(instance)
            raise
        log.info(
            "consumer_started group=%s client_id=%s model=%s orderly=%s",
            self.group,
            instance.client_id,
            self.message_model.name,
            self.orderly,
        )

    async def _start_parts(self, instance: ClientInstance) -> None:
        """The offset store and the services first, then routes, heartbeat and the first
        rebalance, which starts pulling."""
        if self.message_model is MessageModel.BROADCASTING:
            self.offsets = LocalOffsetStore(self.offset_store_dir, instance.client_id, self.group)
        else:
            self.offsets = RemoteOffsetStore(instance, self.group)
        self._make_services(instance, self.offsets)
        if self.tracer is not None and self._consume is not None:
            await self.tracer.start()
            self._consume.tracer = ConsumeTracer(self.tracer, self.group)
        for topic in self._all_subscriptions():
            route = await instance.update_route(topic)
            if route is None and not topic.startswith(RETRY_PREFIX):
                log.warning("subscribed_topic_has_no_route topic=%s group=%s", topic, self.group)
        await self._check_sql_subscriptions(instance)
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

    def _make_services(self, instance: ClientInstance, offsets: OffsetStore) -> None:
        subs = self._all_subscriptions()
        consume: ConsumeMessageService | None = None
        if self.orderly:
            consume = self._locks = ConsumeMessageOrderlyService(
                self.group,
                self.subscriptions,
                subs,
                self._consumed,
                instance=instance,
                process_queues=self.process_queues,
                settings=self,
            )
        elif self._uses_workers:
            consume = ConsumeMessageConcurrentlyService(
                self.group,
                self.subscriptions,
                subs,
                self._consumed,
                instance=instance,
                settings=self,
            )
        self._consume = consume
        if consume is not None:
            consume.stats = self.stats
            consume.start()
        self._pull = PullMessageService(
            self,
            instance,
            offsets,
            subs,
            # PullConsumer overrides _dispatch: its batches go to poll()'s buffer.
            dispatch=self._dispatch,
            lock_all=self._locks.lock_all if self._locks is not None else None,
        )
        self._pull.stats = self.stats

    async def shutdown(self, grace_s: float = 10.0) -> None:
        instance = self._instance
        if instance is None:
            return
        self._stopping = True
        if self._consume is not None:
            self._consume.close()
        if self._route_waiter is not None:
            self._route_waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._route_waiter
            self._route_waiter = None
        queues = list(self.process_queues.values())
        await self._stop_services(queues, grace_s)
        if self.tracer is not None:
            await self.tracer.shutdown()  # the consumes' records, written before we go
        await self.persist_offsets()
        if self._locks is not None:
            await self._locks.unlock([pq.mq for pq in queues])
        self.process_queues.clear()
        self._instance = None
        self._pull = self._consume = self._locks = None
        await instance.unregister(consumer_group=self.group)
        await instance.release()
        log.info("consumer_stopped group=%s", self.group)

    async def _stop_services(self, queues: list[ProcessQueue], grace_s: float) -> None:
        """Stop pulling first, and let the listeners already running finish (within
        ``grace_s``) with their queues still live, so what they finish is committed (Java
        drains the consume executor before it persists offsets and drops the queues)."""
        if self._pull is not None:
            await self._pull.stop()
        consume = self._consume
        if consume is not None:
            await consume.drain(grace_s)
        for pq in queues:
            pq.dropped = True
        if consume is not None:
            await consume.stop()

    async def _undo_start(self, instance: ClientInstance) -> None:
        self._stopping = True
        if self._consume is not None:
            self._consume.close()
        await self._stop_services(list(self.process_queues.values()), 0.0)
        if self.tracer is not None:
            await self.tracer.shutdown(timeout_s=0.0)
        self.process_queues.clear()
        self._instance = None
        self._pull = self._consume = self._locks = None
        instance.consumers.pop(self.group, None)
        await instance.release()

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
                    response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
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

    async def consume_directly(self, msg: MessageView) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: ``msg`` to its listener now, and how it ended
        (``client.consume_service``).

        Raises:
            ClientStateError: this is a pull consumer (no listener), or not started.
            ClientError: the group subscribes no topic of ``msg``.
        """
        consume = self._consume
        if consume is None:
            kind = "pull" if not self._uses_workers else "stopped push"
            raise ClientStateError(
                f"the {kind} consumer of group {self.group} has no listener to consume a "
                "message directly"
            )
        return await consume.consume_directly(msg)

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
                "lastLockTimestamp": _epoch_ms(pq.last_lock_at) if pq.last_lock_at else 0,
                "lastConsumeTimestamp": pq.last_consume_ms,
            }
        return {
            "properties": {
                "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
                # CONSUME_ACTIVELY for a PullConsumer, as Java's lite pull consumer says
                "PROP_CONSUME_TYPE": self.consumer_data().consume_type.name,
                "PROP_THREADPOOL_CORE_SIZE": str(self.consume_concurrency),
                "PROP_CONSUMER_START_TIMESTAMP": str(self._started_ms),
                "messageModel": self.message_model.name,
                "consumeFromWhere": self.consume_from_where.name,
                "pullBatchSize": str(self.pull_batch_size),
                "language": "PYTHON",
            },
            "subscriptionSet": [s.data.to_json() for s in self._all_subscriptions().values()],
            "mqTable": mq_table,
            "statusTable": {t: self.stats.status(t) for t in self._all_subscriptions()},
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
                    self._pulls().stop_pulling(pq)
                if self.offsets is not None:
                    self.offsets.update(mq, offset)
                    await self.offsets.persist([mq])
                    self.offsets.remove(mq)
        self._running().rebalance_soon()

    # -------------------------------------------------------------------- rebalance

    def _readable_queues(self, topic: str) -> list[MessageQueue]:
        route = self.routes.get(topic)
        return sorted(route.readable_queues(topic)) if route is not None else []

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
            if self._locks is not None:
                await self._locks.lock_all()

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
        self._pulls().stop_pulling(pq)
        locks = self._locks
        if locks is not None:
            await locks.handed_over(pq)
        if self.offsets is not None:
            await self.offsets.persist([mq])
            self.offsets.remove(mq)
        if locks is not None:
            await locks.unlock([mq])
        log.info("queue_released group=%s queue=%s", self.group, mq)

    async def _add(self, mq: MessageQueue) -> None:
        start = await self._start_offset(mq)
        if start < 0:
            return  # could not read the offset; the next rebalance tries again
        pq = ProcessQueue(mq, start)
        self.process_queues[mq] = pq
        assert self.offsets is not None
        self.offsets.update(mq, start)
        self._pulls().pull(pq)
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
        """An offset of ``mq`` from a broker serving reads of it; -1 when none answers."""
        instance = self._running()
        addr = instance.read_addr(mq.broker_name)
        if addr is None:
            return -1
        request = RemotingCommand.request(code, header.to_ext_fields())
        try:
            response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
            if response.code != ResponseCode.SUCCESS:
                return -1
            return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset
        except (RemotingError, HeaderError) as exc:
            log.warning("offset_lookup_failed queue=%s error=%s", mq, exc)
            return -1

    # ------------------------------------------------------------- the parts' hooks

    def _pulls(self) -> PullMessageService:
        pull = self._pull
        if pull is None:
            raise ClientStateError(f"{self._describe()} is not started")
        return pull

    def _dispatch(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        """A pulled batch, already in ``pq``, goes to the consume service (a PullConsumer
        buffers it for ``poll()`` instead)."""
        consume = self._consume
        if consume is not None:
            consume.submit(pq, msgs)

    def _consumed(self, pq: ProcessQueue, msg: MessageView) -> None:
        """A message is done with: drop it from ``pq`` and commit up to the lowest offset
        still in flight (``processConsumeResult``); wakes a pull loop held by flow control."""
        safe = pq.remove(msg)
        if self.offsets is not None and not pq.dropped:
            self.offsets.update(pq.mq, safe, increase_only=True)
        pq.wake.set()


def _epoch_ms(monotonic_s: float) -> int:
    """A ``time.monotonic()`` instant as epoch milliseconds, as Java's timestamps are."""
    return int((time.time() - (time.monotonic() - monotonic_s)) * 1000)
