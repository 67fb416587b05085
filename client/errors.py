"""Errors the SDK raises.

RocketMQ counterpart: ``MQClientException`` (client-side failures) next to
``MQBrokerException`` (here ``remoting.errors.BrokerError`` and its per-code subclasses)::

    RocketMQError
    ├── RemotingError …                 (remoting.errors) no answer from the peer
    ├── BrokerError …                   (remoting.errors) the broker answered with an error code
    └── ClientError                     the SDK refused or could not proceed
        ├── InvalidMessageError         a message or argument fails validation before sending
        ├── NoRouteError                no name server knows the topic, or no queue is writable
        └── ClientStateError            used before start() or after shutdown()
"""

from __future__ import annotations

from remoting.errors import (
    BrokerError,
    ConnectError,
    MessageIllegalError,
    RemotingError,
    RemotingTimeoutError,
    RocketMQError,
    TopicNotExistError,
)

__all__ = [
    "BrokerError",
    "ClientError",
    "ClientStateError",
    "ConnectError",
    "InvalidMessageError",
    "MessageIllegalError",
    "NoRouteError",
    "RemotingError",
    "RemotingTimeoutError",
    "RocketMQError",
    "TopicNotExistError",
]


class ClientError(RocketMQError):
    """The SDK could not do what was asked (RocketMQ ``MQClientException``)."""


class InvalidMessageError(ClientError, ValueError):
    """A message, topic, group or argument is invalid; nothing was sent."""


class NoRouteError(ClientError):
    """No route for ``topic``: no name server knows it, or none of its queues is writable."""

    def __init__(self, topic: str, detail: str) -> None:
        super().__init__(f"no route info of topic {topic}: {detail}")
        self.topic = topic


class ClientStateError(ClientError):
    """The producer or consumer is not running (not started yet, or shut down)."""
