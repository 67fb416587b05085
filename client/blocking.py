"""A blocking facade over the asyncio SDK, for code that is not async.

No RocketMQ counterpart (the Java client is blocking already). The asyncio clients run on
one event loop in a daemon thread per process; each blocking call submits a coroutine there
and waits for it. Listeners of a blocking ``PushConsumer`` are plain functions, run in a
worker thread so they may block.

Usage (a script, a Flask view)::

    from client.blocking import Producer
    from client import Message

    with Producer("demo-producer", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message("orders", b"hello"))

The callbacks of a blocking ``TransactionProducer`` are plain functions too, run in a worker
thread for the same reason.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from client.message import ConsumeResult, Message, MessageView, SendResult
from client.producer import Producer as AsyncProducer
from client.producer import QueueSelector
from client.pull_consumer import PullConsumer as AsyncPullConsumer
from client.push_consumer import PushConsumer as AsyncPushConsumer
from client.service import ClientService
from client.simple_consumer import ReceivedMessage
from client.simple_consumer import SimpleConsumer as AsyncSimpleConsumer
from client.transaction_producer import LocalTransactionState, TransactionSendResult
from client.transaction_producer import TransactionProducer as AsyncTransactionProducer
from remoting.route import MessageQueue

T = TypeVar("T")
BlockingListener = Callable[[MessageView], ConsumeResult | None]


class _LoopThread:
    """One event loop in a daemon thread, started on first use."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                try:
                    import uvloop  # noqa: PLC0415 - optional, absent on Windows

                    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
                except ImportError:
                    loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="aerolite-client-loop", daemon=True
                )
                thread.start()
                cls._loop = loop
                atexit.register(loop.call_soon_threadsafe, loop.stop)
            return cls._loop


def _run(coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    loop = _LoopThread.loop()
    future: Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
    return future.result(timeout_s)


class _Blocking:
    """start/shutdown and ``with`` for a wrapped asyncio client."""

    _target: ClientService

    def start(self) -> None:
        _run(self._target.start())

    def shutdown(self) -> None:
        _run(self._target.shutdown())

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


class Producer(_Blocking):
    """``client.Producer`` with blocking methods; same arguments."""

    def __init__(self, group: str, namesrv: str | None = None, **kwargs: Any) -> None:
        self._producer = self._target = AsyncProducer(group, namesrv, **kwargs)

    def send(self, msg: Message, *, timeout_s: float | None = None) -> SendResult:
        return _run(self._producer.send(msg, timeout_s=timeout_s))

    def send_oneway(self, msg: Message) -> None:
        _run(self._producer.send_oneway(msg))

    def send_batch(self, msgs: Sequence[Message], *, timeout_s: float | None = None) -> SendResult:
        return _run(self._producer.send_batch(msgs, timeout_s=timeout_s))

    def send_orderly(
        self,
        msg: Message,
        sharding_key: str | None = None,
        *,
        selector: QueueSelector | None = None,
        arg: object = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        return _run(
            self._producer.send_orderly(
                msg, sharding_key, selector=selector, arg=arg, timeout_s=timeout_s
            )
        )


class PushConsumer(_Blocking):
    """``client.PushConsumer`` with blocking start/shutdown and plain-function listeners."""

    def __init__(self, group: str, namesrv: str | None = None, **kwargs: Any) -> None:
        self._consumer = self._target = AsyncPushConsumer(group, namesrv, **kwargs)

    def subscribe(
        self, topic: str, expression: str = "*", *, sql: str | None = None
    ) -> Callable[[BlockingListener], BlockingListener]:
        register = self._consumer.subscribe(topic, expression, sql=sql)

        def decorate(listener: BlockingListener) -> BlockingListener:
            register(listener)  # plain functions run in a worker thread
            return listener

        return decorate


class PullConsumer(_Blocking):
    """``client.pull_consumer.PullConsumer`` with blocking methods."""

    def __init__(self, group: str, namesrv: str | None = None, **kwargs: Any) -> None:
        self._pull = self._target = AsyncPullConsumer(group, namesrv, **kwargs)

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        self._pull.subscribe(topic, expression, sql=sql)

    def assign(self, queues: list[MessageQueue]) -> None:
        self._pull.assign(queues)

    def poll(self, timeout_s: float = 5.0) -> list[MessageView]:
        return _run(self._pull.poll(timeout_s))

    def commit(self) -> None:
        _run(self._pull.commit())

    def seek(self, mq: MessageQueue, offset: int) -> None:
        _run(self._pull.seek(mq, offset))


class TransactionProducer(Producer):
    """``client.TransactionProducer`` with blocking methods; ``executor`` and ``checker`` are
    plain functions, run in a worker thread."""

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        executor: Callable[[Message, Any], LocalTransactionState],
        checker: Callable[[MessageView], LocalTransactionState],
        **kwargs: Any,
    ) -> None:
        async def run_executor(msg: Message, arg: Any) -> LocalTransactionState:
            return await asyncio.to_thread(executor, msg, arg)

        async def run_checker(msg: MessageView) -> LocalTransactionState:
            return await asyncio.to_thread(checker, msg)

        self._tx = AsyncTransactionProducer(
            group, namesrv, executor=run_executor, checker=run_checker, **kwargs
        )
        self._producer = self._target = self._tx

    def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout_s: float | None = None
    ) -> TransactionSendResult:
        return _run(self._tx.send_message_in_transaction(msg, arg, timeout_s=timeout_s))


class SimpleConsumer(_Blocking):
    """``client.SimpleConsumer`` with blocking methods; same arguments."""

    def __init__(self, group: str, namesrv: str | None = None, **kwargs: Any) -> None:
        self._simple = self._target = AsyncSimpleConsumer(group, namesrv, **kwargs)

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        self._simple.subscribe(topic, expression, sql=sql)

    def receive(
        self, max_messages: int = 16, invisible_duration: timedelta = timedelta(seconds=30)
    ) -> list[ReceivedMessage]:
        return _run(self._simple.receive(max_messages, invisible_duration))

    def ack(self, msg: ReceivedMessage) -> None:
        _run(self._simple.ack(msg))

    def change_invisible_duration(self, msg: ReceivedMessage, duration: timedelta) -> None:
        _run(self._simple.change_invisible_duration(msg, duration))
