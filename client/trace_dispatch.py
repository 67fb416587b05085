"""Sending trace records: queued by the traced client, written in batches by a producer of
their own, off the traced call's path.

RocketMQ counterpart: ``client/trace/AsyncTraceDispatcher`` (4.9): a bounded queue that drops
what does not fit rather than slow the client down, records gathered for up to half a second
or until a trace message would pass ~118,000 characters, each trace message keyed by the ids
and keys of the messages it tells about (``queryMsgTraceById`` searches those keys), sent by an
inner producer ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>``. A failed trace send is
logged and forgotten: tracing never fails, delays or reorders the traced sends and consumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from client.message import UNIQ_IDS, Message, MessageView
from client.trace import (
    TRACE_TOPIC,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceType,
    encode_trace,
    trace_keys,
)

__all__ = ["ConsumeTracer", "TraceDispatcher", "TraceSender", "inner_group"]

log = logging.getLogger(__name__)

QUEUE_SIZE = 1024  # traceContextQueue
FLUSH_AFTER_S = 0.5  # waitTimeThresholdMil: a record waits at most this long to be sent
MAX_BODY_CHARS = 128_000 - 10_000  # maxMsgSize less the margin Java leaves


class TraceSender(Protocol):
    """What writes the trace messages: a Producer of its own, tracing nothing."""

    group: str

    async def start(self) -> None: ...

    async def send(self, msg: Message) -> object: ...

    async def shutdown(self) -> None: ...


def inner_group(group: str, kind: str) -> str:
    """The inner producer's group and instance name, as RocketMQ names them."""
    return f"_INNER_TRACE_PRODUCER-{group}-{kind}"


class TraceDispatcher:
    """Args:
    sender: the inner producer (``Producer(inner_group(group, kind), namesrv, ...)``, with
        an instance of its own and ``max_message_bytes=128_000``), started and shut down by
        the dispatcher.
    trace_topic: the topic the records go to; RocketMQ's ``RMQ_SYS_TRACE_TOPIC`` by default
        (a broker makes it with ``traceTopicEnable=true``; else it is auto-created like any).
    """

    def __init__(
        self,
        sender: TraceSender,
        *,
        trace_topic: str | None = None,
        queue_size: int = QUEUE_SIZE,
        flush_after_s: float = FLUSH_AFTER_S,
        max_body_chars: int = MAX_BODY_CHARS,
    ) -> None:
        self.trace_topic = trace_topic or TRACE_TOPIC
        self.flush_after_s = flush_after_s
        self.max_body_chars = max_body_chars
        self.producer = sender
        # None, after the last record, tells the writer to send what it holds and stop.
        self.queue: asyncio.Queue[TraceContext | None] = asyncio.Queue(queue_size)
        self.dropped = 0  # records the full queue refused
        self.failed = 0  # trace messages that could not be sent
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is not None:
            return
        await self.producer.start()
        self._task = asyncio.create_task(self._run(), name=f"trace-{self.producer.group}")

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx`` to be written; False (and counted in ``dropped``) when the queue is
        full or the dispatcher is not running. Never blocks, never raises."""
        if self._task is None or not ctx.beans:
            return False
        try:
            self.queue.put_nowait(ctx)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning(
                    "trace_dropped topic=%s dropped=%d: the trace queue is full",
                    self.trace_topic,
                    self.dropped,
                )
            return False
        return True

    async def shutdown(self, timeout_s: float = 3.0) -> None:
        """Write what is queued (for up to ``timeout_s``), then stop."""
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self.queue.put(None)  # after the queued records: the last batch goes now
                await asyncio.shield(task)
        except TimeoutError:
            log.warning(
                "trace_flush_timeout topic=%s queued=%d", self.trace_topic, self.queue.qsize()
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.producer.shutdown()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            if first is None:
                return
            batch, texts = [first], [encode_trace(first)]
            size, last = len(texts[0]), False
            deadline = loop.time() + self.flush_after_s
            while size < self.max_body_chars and not last:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    ctx = await asyncio.wait_for(self.queue.get(), left)
                except TimeoutError:
                    break
                if ctx is None:
                    last = True
                    break
                batch.append(ctx)
                texts.append(encode_trace(ctx))
                size += len(texts[-1])
            await self._send(batch, "".join(texts))
            if last:
                return

    async def _send(self, batch: list[TraceContext], body: str) -> None:
        msg = Message(self.trace_topic, body.encode(), keys=trace_keys(batch))
        try:
            await self.producer.send(msg)
        except Exception as exc:  # a trace is best effort; the traced client goes on
            self.failed += 1
            log.warning(
                "trace_send_failed topic=%s records=%d error=%s", self.trace_topic, len(batch), exc
            )


class ConsumeTracer:
    """A consumer's trace records (``ConsumeMessageTraceHookImpl``): SubBefore when messages
    are handed to the application, SubAfter when it is done with them, the two paired by a
    request id; the SubAfter's cost is the time between, per message.

    A message stored with ``TRACE_ON=false`` is left out, as Java leaves it out.
    """

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    def before(self, msgs: Sequence[MessageView]) -> TraceContext | None:
        """The SubBefore record of ``msgs``, queued; None when none of them is traced."""
        beans: list[TraceBean] = []
        region: str | None = None
        for msg in msgs:
            props = msg.properties
            if props.get("TRACE_ON") == "false":
                continue
            region = props.get("MSG_REGION")  # Java keeps the last one's (null if unset)
            beans.append(
                TraceBean(
                    msg_id=msg.msg_id,
                    topic=msg.topic,
                    tags=msg.tags,
                    keys=props.get("KEYS"),
                    store_host=msg.store_host,
                    body_length=msg.size,
                    retry_times=msg.reconsume_times,
                )
            )
        if not beans:
            return None
        ctx = TraceContext(
            TraceType.SUB_BEFORE,
            self.group,
            beans,
            region_id=region,
            request_id=UNIQ_IDS.next_id(),
        )
        self.dispatcher.append(ctx)
        return ctx

    def after(self, before: TraceContext, code: ConsumeReturnType) -> None:
        """The SubAfter record of the messages ``before`` told of, queued."""
        now_ms = int(time.time() * 1000)
        self.dispatcher.append(
            TraceContext(
                TraceType.SUB_AFTER,
                before.group,
                before.beans,
                now_ms,
                before.region_id,
                cost_ms=(now_ms - before.time_ms) // len(before.beans),
                success=code is ConsumeReturnType.SUCCESS,
                request_id=before.request_id,
                context_code=int(code),
            )
        )
