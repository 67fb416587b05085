"""The SDK's public names (contract.md): removing or renaming one breaks users' imports."""

from __future__ import annotations

import client


def test_client_all_is_pinned() -> None:
    assert sorted(client.__all__) == [
        "BrokerError",
        "ClientError",
        "ClientStateError",
        "ConsumeFromWhere",
        "ConsumeResult",
        "InvalidMessageError",
        "LocalTransactionState",
        "Message",
        "MessageModel",
        "MessageQueue",
        "MessageView",
        "NoRouteError",
        "Producer",
        "PullConsumer",
        "PushConsumer",
        "ReceivedMessage",
        "RemotingError",
        "RocketMQError",
        "SendResult",
        "SendStatus",
        "SessionCredentials",
        "SimpleConsumer",
        "TransactionProducer",
        "TransactionSendResult",
    ]
    for name in client.__all__:
        assert getattr(client, name) is not None


def test_contract_example_names_exist() -> None:
    from client import ConsumeResult, Message, MessageView, Producer, PushConsumer, SendStatus

    assert ConsumeResult.SUCCESS.name == "SUCCESS"
    assert ConsumeResult.RECONSUME_LATER.name == "RECONSUME_LATER"
    assert SendStatus.SEND_OK.name == "SEND_OK"
    msg = Message("orders", b"hello", tags="TagA", keys=["order-1"], properties={"k": "v"})
    msg.validate()
    fields = set(MessageView.__dataclass_fields__)
    assert {
        "topic",
        "body",
        "tags",
        "keys",
        "properties",
        "msg_id",
        "queue_id",
        "queue_offset",
        "born_timestamp",
        "store_timestamp",
        "reconsume_times",
    } <= fields
    assert callable(Producer) and callable(PushConsumer)
