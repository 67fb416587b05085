"""The SDK's public names (``client.__all__``): removing or renaming one breaks users' imports."""

from __future__ import annotations

import inspect

import client
import client.errors
import remoting.errors


def test_client_all_is_pinned() -> None:
    assert sorted(client.__all__) == [
        "BrokerError",
        "BrokerSystemError",
        "ClientError",
        "ClientStateError",
        "ClientTimeoutError",
        "ConfigError",
        "ConnectError",
        "ConsumeFromWhere",
        "ConsumeResult",
        "ConsumerNotOnlineError",
        "FrameError",
        "HeaderError",
        "HeaderTooLargeError",
        "InvalidArgumentError",
        "InvalidMessageError",
        "LocalTransactionState",
        "Message",
        "MessageDecodeError",
        "MessageIllegalError",
        "MessageModel",
        "MessageQueue",
        "MessageView",
        "NoBuyerIdError",
        "NoPermissionError",
        "NoRouteError",
        "NotInCurrentUnitError",
        "Producer",
        "PullConsumer",
        "PushConsumer",
        "QueryNotFoundError",
        "ReceivedMessage",
        "RemotingError",
        "RemotingTimeoutError",
        "RequestCodeNotSupportedError",
        "ResponseDecodeError",
        "RocketMQError",
        "SendResult",
        "SendStatus",
        "ServiceNotAvailableError",
        "SessionCredentials",
        "SimpleConsumer",
        "SubscriptionGroupNotExistError",
        "SubscriptionNotExistError",
        "SubscriptionNotLatestError",
        "SubscriptionParseFailedError",
        "SystemBusyError",
        "TooManyRequestsError",
        "TopicExistAlreadyError",
        "TopicNotExistError",
        "TransactionProducer",
        "TransactionSendResult",
        "VersionNotSupportedError",
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


def test_every_error_the_sdk_raises_is_importable_from_client() -> None:
    """One place to catch from: the broker's per-code errors and the transport's too."""
    defined = [
        cls
        for module in (remoting.errors, client.errors)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, remoting.errors.RocketMQError) and cls.__module__ == module.__name__
    ]
    assert len(defined) > 25
    for cls in defined:
        assert getattr(client, cls.__name__) is cls, cls
        assert getattr(client.errors, cls.__name__) is cls, cls
        assert cls.__name__ in client.__all__ and cls.__name__ in client.errors.__all__
    # retriable says whether the same call may succeed later: the transport and a busy
    # broker, yes; a refused argument or message, no.
    for transient in (client.ConnectError, client.RemotingTimeoutError, client.SystemBusyError):
        assert transient.retriable, transient
    for final in (client.InvalidArgumentError, client.MessageIllegalError):
        assert not final.retriable, final
    assert issubclass(client.InvalidMessageError, client.InvalidArgumentError)
    assert issubclass(client.InvalidArgumentError, client.ClientError)
    assert issubclass(client.InvalidArgumentError, ValueError)
