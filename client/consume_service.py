"""What the two consume services share: finding a message's listener and calling it.

RocketMQ counterpart: the ``ConsumeMessageService`` interface that
``ConsumeMessageConcurrentlyService`` (``client.consume_concurrently``) and
``ConsumeMessageOrderlyService`` (``client.consume_orderly``) implement. The push consumer
(``client.push_consumer``) picks one at ``start()``, hands it every pulled batch
(``submit``) and, at shutdown, closes it, lets the running listeners finish within the
grace period (``drain``) and cancels what is left (``stop``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import cast

from client.consume_stats import ConsumerStats
from client.errors import ClientError
from client.message import ConsumeResult, MessageView
from client.process_queue import ProcessQueue
from client.trace import ConsumeReturnType
from client.trace_dispatch import ConsumeTracer
from codec import PROPERTY_RETRY_TOPIC
from remoting.bodies import ConsumeMessageDirectlyResult, SubscriptionData

log = logging.getLogger(__name__)

Listener = Callable[[MessageView], Awaitable[ConsumeResult | None] | ConsumeResult | None]

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


@dataclass(slots=True)
class Subscription:
    data: SubscriptionData
    listener: Listener


class ConsumeMessageService(ABC):
    """Runs listeners on pulled messages and settles their results.

    Args:
        group: the consumer group, for the logs and the broker.
        subscriptions: the topics the application subscribed, with their listeners.
        all_subscriptions: those plus the group's retry topic (fixed once started).
        consumed: the consumer's commit step for one consumed message (removes it from its
            ``ProcessQueue`` and moves the committed offset); shared with ``PullConsumer``.
    """

    ORDERLY = False  # ConsumeMessageDirectlyResult.order

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, Subscription],
        all_subscriptions: Mapping[str, Subscription],
        consumed: Callable[[ProcessQueue, MessageView], None],
    ) -> None:
        self.group = group
        self._subscriptions = subscriptions
        self._all_subscriptions = all_subscriptions
        self._consumed = consumed
        self._is_async: dict[Listener, bool] = {}
        self._stopping = False
        # trace=True: each message's SubBefore and SubAfter records (consumeMessageHook).
        self.tracer: ConsumeTracer | None = None
        self.stats = ConsumerStats()  # the push consumer puts its own in before start()

    @abstractmethod
    def start(self) -> None:
        """Start the service's background tasks."""

    @abstractmethod
    def submit(self, pq: ProcessQueue, msgs: list[MessageView]) -> None:
        """Consume ``msgs``, just put into ``pq`` by the pull service."""

    def close(self) -> None:
        """No listener takes a new message from now on."""
        self._stopping = True

    @abstractmethod
    async def drain(self, grace_s: float) -> None:
        """Wait, at most ``grace_s``, for the listeners running now to finish."""

    @abstractmethod
    async def stop(self) -> None:
        """Cancel the service's tasks (the listeners still running among them)."""

    @staticmethod
    async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        if tasks:
            # A listener that swallows its cancellation is left behind rather than waited
            # for without end.
            await asyncio.wait(tasks, timeout=1.0)

    def _listener_for(self, msg: MessageView) -> tuple[Listener, MessageView]:
        """The listener, and the message as the user sees it (retried ones restored)."""
        subs = self._all_subscriptions
        topic = msg.topic
        if topic.startswith(RETRY_PREFIX):
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if original:
                restored = dataclasses.replace(msg, topic=original)
                sub = self._subscriptions.get(original)
                if sub is not None:
                    return sub.listener, restored
                return subs[topic].listener, restored
        return subs[topic].listener, msg

    async def _invoke(self, listener: Listener, msg: MessageView) -> object:
        """Run ``listener`` on ``msg``: awaited if async, else on a thread (a plain function
        may block); what it returns or raises, as is."""
        is_async = self._is_async.get(listener)
        if is_async is None:
            is_async = self._is_async[listener] = inspect.iscoroutinefunction(listener)
        if is_async:
            return await cast("Awaitable[object]", listener(msg))
        result = await asyncio.to_thread(cast("Callable[[MessageView], object]", listener), msg)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _call(
        self, listener: Listener, msg: MessageView
    ) -> tuple[ConsumeResult, ConsumeReturnType]:
        """The listener's result, and how the consume ended for a trace record: a listener
        that raises asks for the message again."""
        try:
            result = await self._invoke(listener, msg)
        except Exception:
            self._failed(msg)
            return ConsumeResult.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
        if result is None or result is ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS, ConsumeReturnType.SUCCESS
        return self._result_of(result), ConsumeReturnType.FAILED

    async def consume_directly(self, msg: MessageView) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin queryMsgById ``-g -d``, the console's "consume
        on this client"): the listener runs on ``msg`` now, outside the queues, and how it
        ended is the answer (``consumeMessageDirectly`` of both Java services). Nothing is
        committed, sent back or traced: the message was picked by hand, not pulled.

        Raises:
            ClientError: the group subscribes no topic ``msg`` belongs to.
        """
        listener, view = self._direct_listener_for(msg)
        started = time.monotonic()
        remark: str | None = None
        try:
            result = await self._invoke(listener, view)
        except Exception as exc:
            log.warning(
                "consume_directly_failed group=%s msg_id=%s", self.group, msg.msg_id, exc_info=True
            )
            outcome, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
        else:
            if result is None or result is ConsumeResult.SUCCESS:
                outcome = "CR_SUCCESS"
            elif result is ConsumeResult.RECONSUME_LATER:
                outcome = "CR_LATER"
            else:
                outcome, remark = "CR_RETURN_NULL", f"the listener returned {result!r}"
        spent_ms = int((time.monotonic() - started) * 1000)
        return ConsumeMessageDirectlyResult(
            outcome, order=self.ORDERLY, remark=remark, spent_ms=spent_ms
        )

    def _direct_listener_for(self, msg: MessageView) -> tuple[Listener, MessageView]:
        """``_listener_for`` for a message picked by hand, which may also be a dead letter
        (rocketmq-dashboard resends those this way): a retried or dead message goes to the
        listener of the topic it was first sent to (RETRY_TOPIC, which the broker's send-back
        sets before it moves a message to %DLQ%), under that topic."""
        if msg.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            sub = self._subscriptions.get(original) if original else None
            if original and sub is not None:
                return sub.listener, dataclasses.replace(msg, topic=original)
        sub = self._all_subscriptions.get(msg.topic)
        if sub is None:
            raise ClientError(f"consumer group {self.group} does not subscribe topic {msg.topic}")
        return sub.listener, msg

    def _failed(self, msg: MessageView) -> None:
        log.exception(
            "listener_failed group=%s msg_id=%s topic=%s", self.group, msg.msg_id, msg.topic
        )

    def _result_of(self, result: object) -> ConsumeResult:
        """What a listener returned other than None or SUCCESS (its callers settle those)."""
        if not isinstance(result, ConsumeResult):
            log.error("listener_bad_result group=%s result=%r", self.group, result)
            return ConsumeResult.RECONSUME_LATER
        return result
