"""``client.blocking``: the SDK from plain (non-async) code, against a standalone broker
process; the asyncio clients run on the facade's own loop thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Message, MessageQueue, MessageView, SendStatus
from client.blocking import Producer, PullConsumer, PushConsumer
from tests.processes import start_standalone


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    broker = start_standalone(tmp_path)
    try:
        yield broker.namesrv
    finally:
        broker.stop()


def test_blocking_producer_push_and_pull_consumers(namesrv: str) -> None:
    with Producer("blocking-pg", namesrv=namesrv) as producer:
        results = [producer.send(Message("BlockingT", f"m{i}".encode())) for i in range(8)]
        batch = producer.send_batch([Message("BlockingT", b"b1"), Message("BlockingT", b"b2")])
        producer.send_oneway(Message("BlockingT", b"oneway"))
        ordered = producer.send_orderly(Message("BlockingT", b"o"), "key-7")
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(batch.msg_id.split(",")) == 2
    expected = {f"m{i}".encode() for i in range(8)} | {b"b1", b"b2", b"oneway", b"o"}

    got: set[bytes] = set()
    all_in = threading.Event()
    listener_threads: set[str] = set()
    consumer = PushConsumer("blocking-cg", namesrv=namesrv)

    @consumer.subscribe("BlockingT")
    def handle(msg: MessageView) -> None:
        listener_threads.add(threading.current_thread().name)
        got.add(msg.body)
        if expected <= got:
            all_in.set()

    with consumer:
        assert all_in.wait(30), f"received {sorted(got)}"
    assert got == expected
    # Plain listeners run on worker threads, never on the facade's loop thread.
    assert "aerolite-client-loop" not in listener_threads

    pull = PullConsumer("blocking-pull", namesrv=namesrv, auto_commit=False)
    mq = MessageQueue(
        "BlockingT", ordered.message_queue.broker_name, ordered.message_queue.queue_id
    )
    pull.assign([mq])
    with pull:
        pull.seek(mq, 0)
        polled: list[MessageView] = []
        deadline = time.monotonic() + 30
        while not any(m.body == b"o" for m in polled) and time.monotonic() < deadline:
            polled += pull.poll(1.0)
        pull.commit()
    assert any(m.body == b"o" for m in polled)
    assert {m.queue_id for m in polled} == {mq.queue_id}


def test_blocking_transaction_producer_and_simple_consumer(namesrv: str) -> None:
    from datetime import timedelta

    from client import ConsumeFromWhere, LocalTransactionState, ReceivedMessage
    from client.blocking import SimpleConsumer, TransactionProducer

    threads: set[str] = set()

    def executor(msg: Message, arg: object) -> LocalTransactionState:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)  # a blocking local transaction does not hold up the client loop
        return LocalTransactionState.COMMIT if arg == "yes" else LocalTransactionState.ROLLBACK

    def checker(msg: MessageView) -> LocalTransactionState:
        return LocalTransactionState.ROLLBACK

    with TransactionProducer(
        "pg-blocking-tx", namesrv, executor=executor, checker=checker
    ) as producer:
        kept = producer.send_message_in_transaction(Message("BlockingTx", b"kept"), "yes")
        dropped = producer.send_message_in_transaction(Message("BlockingTx", b"dropped"), "no")
    assert kept.local_state is LocalTransactionState.COMMIT
    assert dropped.local_state is LocalTransactionState.ROLLBACK
    assert "aerolite-client-loop" not in threads

    with SimpleConsumer(
        "cg-blocking-simple",
        namesrv,
        subscriptions={"BlockingTx": "*"},
        await_duration=timedelta(seconds=2),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        got: list[ReceivedMessage] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got = consumer.receive(16, timedelta(seconds=30))
        assert [m.body for m in got] == [b"kept"]
        consumer.change_invisible_duration(got[0], timedelta(seconds=60))
        consumer.ack(got[0])
