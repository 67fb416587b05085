"""The pull service: one long-polling pull loop per queue assigned to the push consumer.

RocketMQ counterpart: ``PullMessageService`` with the pulling half of
``DefaultMQPushConsumerImpl.pullMessage`` and ``PullAPIWrapper``: flow control (a queue
holding too many or too large unconsumed messages waits for its listener), the orderly
check that the queue's broker lock is held, the PULL_MESSAGE request (suspended at the
broker up to 15 s, committing the consumed offset on the way), the answer's next offset and
suggested broker, and the hand-over of a pulled batch to the consume service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from client.consume_service import Subscription
from client.consume_stats import ConsumerStats
from client.errors import ClientError
from client.instance import ClientInstance
from client.message import MessageView, decode_messages
from client.offset_store import OffsetStore
from client.process_queue import ProcessQueue
from codec import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET
from remoting.bodies import MessageModel, SubscriptionData
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader

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

PULL_FLAG_COMMIT = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
SUSPEND_TIMEOUT_MS = 15_000  # brokerSuspendMaxTimeMillis
PULL_TIMEOUT_S = 30.0  # consumerTimeoutMillisWhenSuspend
PULL_ERROR_DELAY_S = 3.0  # pullTimeDelayMillsWhenException
FLOW_CONTROL_DELAY_S = 0.05


class PullSettings(Protocol):
    """The settings of the push consumer this service reads, when it uses them (see
    ``PushConsumer``'s Args); the consumer itself is passed."""

    group: str
    message_model: MessageModel
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_error_delay_s: float | None  # None: PULL_ERROR_DELAY_S


class PullMessageService:
    """Starts, runs and stops the pull loops; each loop's task is its ``ProcessQueue.task``.

    Args:
        settings: the push consumer itself (``PullSettings``).
        subscriptions: every topic pulled from, the group's retry topic among them.
        dispatch: hands a pulled batch, already put into its ``ProcessQueue``, to the
            consume service (``PullConsumer`` buffers it for ``poll()`` instead).
        lock_all: orderly consumers only: takes the broker locks of the queues held; a queue
            is pulled only while its lock is live.
    """

    def __init__(
        self,
        settings: PullSettings,
        instance: ClientInstance,
        offsets: OffsetStore,
        subscriptions: Mapping[str, Subscription],
        *,
        dispatch: Callable[[ProcessQueue, list[MessageView]], None],
        lock_all: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.settings = settings
        self._instance = instance
        self._offsets = offsets
        self._subscriptions = subscriptions
        self._dispatch = dispatch
        self._lock_all = lock_all
        self._pulling: set[ProcessQueue] = set()
        self.stats: ConsumerStats | None = None  # a push consumer's figures

    def pull(self, pq: ProcessQueue) -> None:
        """Start pulling ``pq`` from ``pq.next_offset`` (again, after ``PullConsumer.seek``
        stopped its loop)."""
        self._pulling.add(pq)
        mq = pq.mq
        pq.task = asyncio.create_task(
            self._pull_loop(pq, self._subscriptions[mq.topic].data),
            name=f"pull-{mq.topic}-{mq.queue_id}",
        )

    def stop_pulling(self, pq: ProcessQueue) -> None:
        """Stop pulling a released queue (already marked dropped); its loop is not awaited."""
        self._pulling.discard(pq)
        pq.wake.set()
        if pq.task is not None:
            pq.task.cancel()

    async def stop(self) -> None:
        """Cancel every pull loop and wait for them."""
        queues = list(self._pulling)
        self._pulling.clear()
        for pq in queues:
            pq.wake.set()
            if pq.task is not None:
                pq.task.cancel()
        for pq in queues:
            if pq.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await pq.task

    async def _pull_loop(self, pq: ProcessQueue, sub: SubscriptionData) -> None:
        mq = pq.mq
        settings = self.settings
        while not pq.dropped:
            if (
                len(pq.messages) >= settings.pull_threshold_for_queue
                or pq.size_bytes >= settings.pull_threshold_size_for_queue
            ):
                # Flow control: let the listener catch up before pulling more.
                pq.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FLOW_CONTROL_DELAY_S * 20):
                        await pq.wake.wait()
                continue
            if self._lock_all is not None and not pq.lock_live():
                await self._lock_all()
                if not pq.lock_live():
                    await asyncio.sleep(self._error_delay())
                    continue
            try:
                await self._pull_once(pq, sub)
            except asyncio.CancelledError:
                raise
            except (RemotingError, ClientError) as exc:  # a MessageDecodeError is a ClientError
                log.info("pull_failed queue=%s error=%s", mq, exc)
                pq.pull_from_broker_id = 0  # a suggested slave that fails: back to the master
                await asyncio.sleep(self._error_delay())

    def _error_delay(self) -> float:
        delay = self.settings.pull_error_delay_s
        return PULL_ERROR_DELAY_S if delay is None else delay

    async def _pull_once(self, pq: ProcessQueue, sub: SubscriptionData) -> None:
        instance = self._instance
        mq = pq.mq
        found = instance.subscribe_addr(mq.broker_name, pq.pull_from_broker_id)
        if found is None:
            await instance.update_route(mq.topic)
            raise ClientError(f"no broker address for broker group {mq.broker_name}")
        addr, from_slave = found
        request = self._request(pq, sub, from_slave)
        began = time.monotonic()
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
        msgs = (
            decode_messages(response.body_bytes, mq.broker_name)
            if code == ResponseCode.SUCCESS
            else None
        )
        if self.stats is not None:  # incPullRT / incPullTPS
            self.stats.pulled(mq.topic, began, len(msgs) if msgs else 0)
        if msgs is not None:
            self._found(pq, sub, msgs, answer)
        elif code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            pq.next_offset = answer.next_begin_offset
            if not pq.messages:
                self._offsets.update(mq, pq.next_offset, increase_only=True)
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            moved_to = answer.next_begin_offset
            log.warning(
                "pull_offset_moved queue=%s requested=%s moved_to=%s", mq, pq.next_offset, moved_to
            )
            pq.next_offset = moved_to
            self._offsets.update(mq, moved_to)
            await self._offsets.persist([mq])

    def _request(
        self, pq: ProcessQueue, sub: SubscriptionData, from_slave: bool
    ) -> RemotingCommand:
        settings = self.settings
        mq = pq.mq
        clustering = settings.message_model is MessageModel.CLUSTERING
        commit = self._offsets.read(mq) if clustering else -1
        sys_flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION
        if commit > 0 and not from_slave:
            # A slave never stores offsets; they go to the master by themselves.
            sys_flag |= PULL_FLAG_COMMIT
        header = PullMessageRequestHeader(
            consumer_group=settings.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=pq.next_offset,
            max_msg_nums=settings.pull_batch_size,
            sys_flag=sys_flag,
            commit_offset=max(commit, 0),
            suspend_timeout_millis=SUSPEND_TIMEOUT_MS,
            subscription=sub.sub_string,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
        )
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())

    def _found(
        self,
        pq: ProcessQueue,
        sub: SubscriptionData,
        msgs: list[MessageView],
        answer: PullMessageResponseHeader,
    ) -> None:
        """FOUND: keep the messages the subscription wants and hand them on."""
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
        pq.next_offset = answer.next_begin_offset
        if msgs:
            pq.put(msgs)
            self._dispatch(pq, msgs)
        elif not pq.messages:
            self._offsets.update(pq.mq, pq.next_offset, increase_only=True)
