"""Errors the SDK raises, all importable from here (and from ``client``).

RocketMQ counterpart: ``MQClientException`` (client-side failures) next to
``MQBrokerException`` and ``RemotingException`` (here ``remoting.errors``, re-exported so an
application catches everything from one place)::

    RocketMQError                       .code (response code or None), .retriable
    ├── RemotingError                   no answer from the peer (retriable)
    │   ├── ConnectError                could not connect, or the connection closed
    │   ├── RemotingTimeoutError        no response in time: names request, address and wait
    │   ├── TooManyRequestsError        no in-flight permit within the timeout
    │   └── FrameError                  the peer sent an undecodable frame
    │       └── HeaderTooLargeError     …with a header over the limit
    ├── BrokerError                     the broker or name server answered with an error code
    │   └── SystemBusyError 2, MessageIllegalError 13, NoPermissionError 16,
    │       TopicNotExistError 17, SubscriptionGroupNotExistError 26, …  (one per code)
    ├── HeaderError                     a header from the peer is missing a field or malformed
    ├── ConfigError                     a configuration key or value is wrong
    └── ClientError                     the SDK refused or could not proceed
        ├── InvalidArgumentError        a group, topic, option or other argument is invalid
        │   └── InvalidMessageError     a message fails validation before sending
        ├── MessageDecodeError          a body from the broker is not stored records
        ├── NoRouteError                no name server knows the topic, or no queue is writable
        └── ClientStateError            used before start() or after shutdown()

``InvalidArgumentError`` is also a ``ValueError``. A refusal's text says which request, to
which address and (where known) about which topic was refused, then the code and remark::

    SEND_MESSAGE_V2 (310) to 127.0.0.1:10911, topic Orders: refused with
    TOPIC_NOT_EXIST (17): topic[Orders] not exist, apply first please!
"""

from __future__ import annotations

from remoting.errors import (
    BrokerError,
    BrokerSystemError,
    ConfigError,
    ConnectError,
    ConsumerNotOnlineError,
    FrameError,
    HeaderError,
    HeaderTooLargeError,
    MessageIllegalError,
    NoBuyerIdError,
    NoPermissionError,
    NotInCurrentUnitError,
    QueryNotFoundError,
    RemotingError,
    RemotingTimeoutError,
    RequestCodeNotSupportedError,
    RocketMQError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SubscriptionParseFailedError,
    SystemBusyError,
    TooManyRequestsError,
    TopicExistAlreadyError,
    TopicNotExistError,
    VersionNotSupportedError,
)

__all__ = [
    "BrokerError",
    "BrokerSystemError",
    "ClientError",
    "ClientStateError",
    "ConfigError",
    "ConnectError",
    "ConsumerNotOnlineError",
    "FrameError",
    "HeaderError",
    "HeaderTooLargeError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "MessageDecodeError",
    "MessageIllegalError",
    "NoBuyerIdError",
    "NoPermissionError",
    "NoRouteError",
    "NotInCurrentUnitError",
    "QueryNotFoundError",
    "RemotingError",
    "RemotingTimeoutError",
    "RequestCodeNotSupportedError",
    "RocketMQError",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SystemBusyError",
    "TooManyRequestsError",
    "TopicExistAlreadyError",
    "TopicNotExistError",
    "VersionNotSupportedError",
]


class ClientError(RocketMQError):
    """The SDK could not do what was asked (RocketMQ ``MQClientException``)."""


class InvalidArgumentError(ClientError, ValueError):
    """A group, topic, option or other argument is invalid; nothing was sent."""


class InvalidMessageError(InvalidArgumentError):
    """A message fails validation (topic, body, tags, keys, properties); nothing was sent."""


class MessageDecodeError(ClientError, ValueError):
    """A pull or query body is not a sequence of stored records."""


class NoRouteError(ClientError):
    """No route for ``topic``: no name server knows it, or none of its queues is writable.

    Retriable: the topic may be created, or its broker come back, meanwhile.
    """

    retriable = True

    def __init__(self, topic: str, detail: str) -> None:
        super().__init__(f"no route info of topic {topic}: {detail}")
        self.topic = topic


class ClientStateError(ClientError):
    """The producer or consumer is not running (not started yet, or shut down)."""
