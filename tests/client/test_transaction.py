"""TransactionProducer against a real broker: the local transaction decides, or the broker's
check-back asks the checker (protocol.md §13.5). Check rounds run every 100 ms here and a
half message is checked 200 ms after it was born."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ConsumeFromWhere,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageView,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from tests.client.conftest import create_topic, stored
from tests.support import BrokerFactory, wait_until

TOPIC = "TopicTxSdk"
FAST_CHECKS: dict[str, Any] = {"transaction_check_interval_ms": 100, "transaction_timeout_ms": 200}
COMMIT, ROLLBACK, UNKNOWN = (
    LocalTransactionState.COMMIT,
    LocalTransactionState.ROLLBACK,
    LocalTransactionState.UNKNOWN,
)


@pytest.fixture
async def tx_broker(start_broker: BrokerFactory) -> Broker:
    broker = await start_broker(**FAST_CHECKS)
    await create_topic(broker, TOPIC, queues=2)
    return broker


class Checker:
    """Answers checks from a script (then repeats its last answer); records the questions."""

    def __init__(self, *answers: LocalTransactionState) -> None:
        self.answers = list(answers)
        self.asked: list[MessageView] = []

    async def __call__(self, msg: MessageView) -> LocalTransactionState:
        self.asked.append(msg)
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


def deciding(state: LocalTransactionState) -> Any:
    def executor(_msg: Message, _arg: Any) -> LocalTransactionState:
        return state

    return executor


async def delivered(broker: Broker) -> list[bytes]:
    return sorted(m.body for m in await stored(broker, TOPIC, range(2)))


async def test_commit_and_rollback_decided_locally(namesrv: NameServer, tx_broker: Broker) -> None:
    arguments: list[Any] = []

    async def executor(msg: Message, arg: Any) -> LocalTransactionState:
        arguments.append(arg)
        return COMMIT if msg.body == b"yes" else ROLLBACK

    checker = Checker(ROLLBACK)
    async with TransactionProducer(
        "pg-tx-local", namesrv.address, executor=executor, checker=checker
    ) as producer:
        yes = await producer.send_message_in_transaction(
            Message(TOPIC, b"yes", tags="TagY", keys=["k-yes"], properties={"a": "1"}), arg=41
        )
        no = await producer.send_message_in_transaction(Message(TOPIC, b"no"), arg=42)
        assert (yes.send_result.status, yes.local_state) == (SendStatus.SEND_OK, COMMIT)
        assert no.local_state is ROLLBACK
        assert yes.transaction_id == yes.msg_id == yes.send_result.msg_id
        assert arguments == [41, 42]
        await wait_until(
            lambda: sum(tx_broker.store.get_max_offset(TOPIC, q) for q in (0, 1)) == 1,
            "the commit",
        )
        await asyncio.sleep(0.5)  # check rounds go by: nothing to ask about
    assert checker.asked == []
    (msg,) = await stored(tx_broker, TOPIC, range(2))
    assert (msg.body, msg.tags, msg.keys, msg.properties["a"]) == (b"yes", "TagY", ["k-yes"], "1")
    assert msg.msg_id == yes.msg_id


async def test_a_consumer_sees_only_committed_messages_once(
    namesrv: NameServer, tx_broker: Broker
) -> None:
    got: list[bytes] = []

    async def listener(msg: MessageView) -> ConsumeResult:
        got.append(msg.body)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        "cg-tx", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)(listener)
    async with consumer:
        async with TransactionProducer(
            "pg-tx-consumed",
            namesrv.address,
            executor=lambda msg, _arg: COMMIT if msg.body.startswith(b"c") else ROLLBACK,
            checker=Checker(ROLLBACK),
        ) as producer:
            for body in (b"c1", b"r1", b"c2", b"r2"):
                await producer.send_message_in_transaction(Message(TOPIC, body))
        await wait_until(lambda: len(got) == 2, "the committed messages", timeout_s=10)
        await asyncio.sleep(0.5)
    assert sorted(got) == [b"c1", b"c2"]


async def test_unknown_then_the_checker_commits(namesrv: NameServer, tx_broker: Broker) -> None:
    checker = Checker(COMMIT)
    async with TransactionProducer(
        "pg-tx-check", namesrv.address, executor=deciding(UNKNOWN), checker=checker
    ) as producer:
        sent = await producer.send_message_in_transaction(Message(TOPIC, b"later", tags="TagL"))
        assert sent.local_state is UNKNOWN
        await wait_until(lambda: len(checker.asked) == 1, "the check", timeout_s=5)
        asked = checker.asked[0]
        assert (asked.topic, asked.body, asked.tags) == (TOPIC, b"later", "TagL")
        assert asked.msg_id == sent.msg_id
        assert asked.queue_id == sent.send_result.message_queue.queue_id
        await wait_until(
            lambda: tx_broker.store.get_max_offset(TOPIC, asked.queue_id) == 1, "the commit"
        )
        await asyncio.sleep(0.5)  # later rounds: decided, so never asked again
    assert len(checker.asked) == 1
    assert await delivered(tx_broker) == [b"later"]


async def test_an_executor_that_raises_is_unknown_then_rolled_back_by_the_checker(
    namesrv: NameServer, tx_broker: Broker
) -> None:
    def broken(_msg: Message, _arg: Any) -> LocalTransactionState:
        raise RuntimeError("database went away")

    checker = Checker(ROLLBACK)
    async with TransactionProducer(
        "pg-tx-raise", namesrv.address, executor=broken, checker=checker
    ) as producer:
        sent = await producer.send_message_in_transaction(Message(TOPIC, b"broken"))
        assert sent.local_state is UNKNOWN
        await wait_until(lambda: len(checker.asked) == 1, "the check", timeout_s=5)
        await asyncio.sleep(0.5)
    assert len(checker.asked) == 1
    assert await delivered(tx_broker) == []


async def test_never_decided_is_dropped_after_the_max_checks(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    broker = await start_broker(transaction_check_max=3, **FAST_CHECKS)
    await create_topic(broker, TOPIC, queues=2)

    def undecided(_msg: MessageView) -> LocalTransactionState:
        raise RuntimeError("no idea")  # a checker that fails counts as UNKNOWN

    asked: list[int] = []

    def checker(msg: MessageView) -> LocalTransactionState:
        asked.append(int(msg.properties["TRANSACTION_CHECK_TIMES"]))
        return undecided(msg)

    async with TransactionProducer(
        "pg-tx-stuck", namesrv.address, executor=deciding(UNKNOWN), checker=checker
    ) as producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"stuck"))
        await wait_until(
            lambda: broker.store.get_max_offset("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1,
            "the discard",
            timeout_s=8,
        )
        await asyncio.sleep(0.4)
    assert asked == [1, 2, 3]
    assert await delivered(broker) == []


async def test_plain_sends_still_work_on_a_transaction_producer(
    namesrv: NameServer, tx_broker: Broker
) -> None:
    async with TransactionProducer(
        "pg-tx-plain", namesrv.address, executor=deciding(COMMIT), checker=Checker(COMMIT)
    ) as producer:
        result = await producer.send(Message(TOPIC, b"plain"))
        assert result.status is SendStatus.SEND_OK
    assert await delivered(tx_broker) == [b"plain"]
