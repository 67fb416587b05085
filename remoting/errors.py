"""Exception tree shared by the broker, the name server and the SDK.

RocketMQ counterpart: ``RemotingException`` and its subclasses, ``MQBrokerException`` and
``MQClientException`` (``org.apache.rocketmq.remoting.exception``, ``client.exception``).

::

    RocketMQError
    ├── RemotingError                      the transport failed; no answer from the peer
    │   ├── ConnectError                   could not connect, or the connection closed
    │   ├── RemotingTimeoutError           no response within the timeout
    │   ├── TooManyRequestsError           the in-flight permit did not come within the timeout
    │   └── FrameError                     malformed or oversized frame; connection closed
    ├── HeaderError                        a custom header field is missing or has a bad value
    ├── BrokerError                        the peer answered with a non-success response code
    │   ├── BrokerSystemError 1            SystemBusyError 2
    │   ├── RequestCodeNotSupportedError 3 MessageIllegalError 13
    │   ├── ServiceNotAvailableError 14    NoPermissionError 16
    │   ├── TopicNotExistError 17          TopicExistAlreadyError 18
    │   ├── QueryNotFoundError 22          SubscriptionGroupNotExistError 26 …
    └── ConfigError                        a configuration key or value is wrong

``BrokerError`` subclasses register their response code; ``BrokerError.for_code(code, remark)``
builds the matching exception so a client can ``except TopicNotExistError``. Codes without a
subclass give a plain ``BrokerError`` that still carries the code.
"""

from __future__ import annotations

from typing import ClassVar


class RocketMQError(Exception):
    """Base of every error Aerolite raises on purpose."""


class RemotingError(RocketMQError):
    """The transport failed."""

    retriable: ClassVar[bool] = True


class ConnectError(RemotingError):
    """Could not connect to ``addr``, or the connection closed while a request was in flight."""

    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"connect to {addr} failed: {reason}")
        self.addr = addr
        self.reason = reason


class RemotingTimeoutError(RemotingError):
    """No response to the request with ``opaque`` within ``timeout_s``."""

    def __init__(self, addr: str, code: int, opaque: int, timeout_s: float) -> None:
        super().__init__(
            f"wait response from {addr} timeout ({timeout_s:g} s), code={code} opaque={opaque}"
        )
        self.addr = addr
        self.code = code
        self.opaque = opaque
        self.timeout_s = timeout_s


class TooManyRequestsError(RemotingError):
    """All in-flight permits of the client stayed taken for the whole timeout."""


class FrameError(RemotingError):
    """A frame or header could not be decoded; the connection that sent it is closed."""

    retriable = False


class HeaderError(RocketMQError):
    """A custom header field (``ext_fields``) is missing or cannot be parsed.

    Java answers this case (``RemotingCommandException``) with SYSTEM_ERROR and the message.
    """


class ConfigError(RocketMQError):
    """A configuration key is unknown or its value is invalid; the message names the key."""


class BrokerError(RocketMQError):
    """A response with a non-success code. ``code`` is the RocketMQ response code."""

    code: ClassVar[int] = -1
    retriable: ClassVar[bool] = False
    _by_code: ClassVar[dict[int, type[BrokerError]]] = {}

    def __init__(self, remark: str = "", *, response_code: int | None = None) -> None:
        super().__init__(remark)
        self.remark = remark
        self.response_code = self.code if response_code is None else response_code

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code >= 0:
            BrokerError._by_code[cls.code] = cls

    def __str__(self) -> str:
        return self.remark or f"response code {self.response_code}"

    @staticmethod
    def for_code(code: int, remark: str | None) -> BrokerError:
        """The exception for a response ``code``; a plain BrokerError when none is registered."""
        cls = BrokerError._by_code.get(code)
        if cls is None:
            return BrokerError(remark or "", response_code=code)
        return cls(remark or "")


class BrokerSystemError(BrokerError):
    code = 1
    retriable = True


class SystemBusyError(BrokerError):
    code = 2
    retriable = True


class RequestCodeNotSupportedError(BrokerError):
    code = 3


class MessageIllegalError(BrokerError):
    code = 13


class ServiceNotAvailableError(BrokerError):
    code = 14
    retriable = True


class VersionNotSupportedError(BrokerError):
    code = 15


class NoPermissionError(BrokerError):
    code = 16
    retriable = True


class TopicNotExistError(BrokerError):
    code = 17
    retriable = True


class TopicExistAlreadyError(BrokerError):
    code = 18


class QueryNotFoundError(BrokerError):
    code = 22


class SubscriptionParseFailedError(BrokerError):
    code = 23


class SubscriptionNotExistError(BrokerError):
    code = 24


class SubscriptionNotLatestError(BrokerError):
    code = 25


class SubscriptionGroupNotExistError(BrokerError):
    code = 26


class NoBuyerIdError(BrokerError):
    code = 204
    retriable = True


class NotInCurrentUnitError(BrokerError):
    code = 205
    retriable = True


class ConsumerNotOnlineError(BrokerError):
    code = 206
