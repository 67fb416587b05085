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
    │       └── HeaderTooLargeError        a header over the limit, refused before it is read
    ├── HeaderError                        a custom header field is missing or has a bad value
    ├── BrokerError                        the peer answered with a non-success response code
    │   ├── BrokerSystemError 1            SystemBusyError 2
    │   ├── RequestCodeNotSupportedError 3 MessageIllegalError 13
    │   ├── ServiceNotAvailableError 14    NoPermissionError 16
    │   ├── TopicNotExistError 17          TopicExistAlreadyError 18
    │   ├── QueryNotFoundError 22          SubscriptionGroupNotExistError 26 …
    └── ConfigError                        a configuration key or value is wrong

The SDK adds ``ClientError`` and its subclasses under the same root (``client.errors``, which
re-exports all of this: the one place an application imports errors from). This package
imports nothing of ours, so the root stays here.

Every class carries ``code``, the RocketMQ response code where there is one (None for
failures no peer answered, such as a timeout), and ``retriable``, whether trying again (later,
or on another broker) can help.

``BrokerError`` subclasses register their response code; ``BrokerError.for_code(code, remark)``
builds the matching exception so a client can ``except TopicNotExistError``. Codes without a
subclass give a plain ``BrokerError`` that still carries the code. A client passes what it
knows of the request (code, address, topic) so the text says which call was refused; on the
broker a ``BrokerError`` carries none of that and reads as its bare remark, which is what goes
back to the peer.
"""

from __future__ import annotations

from typing import ClassVar

from remoting.codes import RequestCode, ResponseCode


def request_name(code: int) -> str:
    """``GET_ROUTEINFO_BY_TOPIC (105)``, or ``request code 31999`` for one we have no name for."""
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"request code {code}"


def seconds(timeout_s: float) -> str:
    """``3.0 s``, ``0.25 s``: a wait as a timeout's text gives it (to the millisecond, so
    what a deadline left of a budget does not print as 0.9989999999961583)."""
    return f"{round(float(timeout_s), 3)} s"


def _response_name(code: int) -> str:
    try:
        return f"{ResponseCode(code).name} ({code})"
    except ValueError:
        return f"response code {code}"


class RocketMQError(Exception):
    """Base of every error Aerolite raises on purpose.

    Attributes:
        code: the RocketMQ response code behind the error, None when there is none.
        retriable: whether the same call may succeed if tried again.
    """

    code: int | None = None
    retriable: bool = False


class RemotingError(RocketMQError):
    """The transport failed."""

    retriable = True


class ConnectError(RemotingError):
    """Could not connect to ``addr``, or the connection closed while a request was in flight."""

    def __init__(self, addr: str, reason: str) -> None:
        super().__init__(f"connect to {addr} failed: {reason}")
        self.addr = addr
        self.reason = reason


class RemotingTimeoutError(RemotingError):
    """No response to the request (``request_code``, ``opaque``) within ``timeout_s``.

    The text names the request, the peer and the wait:
    ``GET_ROUTEINFO_BY_TOPIC (105) to 127.0.0.1:9876: no response after 3.0 s``.
    ``except RemotingTimeoutError`` catches every timeout of the SDK: the ones it measures
    over several requests (``client.errors.ClientTimeoutError``) derive from this class.
    """

    addr: str  # a peer's host:port; for a ClientTimeoutError also "any broker of topic T"
    request_code: int | None  # None only for a ClientTimeoutError that is no one request
    opaque: int | None  # None where no single request was on the wire
    timeout_s: float

    def __init__(
        self,
        addr: str,
        request: int | str,
        opaque: int | None,
        timeout_s: float,
        *,
        outcome: str = "no response",
    ) -> None:
        """``request``: the request code, or the name of a call made of several requests
        (``Admin.topic_stats``); ``outcome``: what happened in that time."""
        name = request if isinstance(request, str) else request_name(request)
        super().__init__(f"{name} to {addr}: {outcome} after {seconds(timeout_s)}")
        self.addr = addr
        self.request_code = None if isinstance(request, str) else request
        self.opaque = opaque
        self.timeout_s = timeout_s


class TooManyRequestsError(RemotingError):
    """All in-flight permits of the client stayed taken for the whole timeout."""


class FrameError(RemotingError):
    """A frame or header could not be decoded; the connection that sent it is closed."""

    retriable = False


class HeaderTooLargeError(FrameError):
    """A frame announced a header of ``header_bytes``, more than ``limit_bytes``."""

    def __init__(self, header_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"header of {header_bytes} bytes exceeds the limit of {limit_bytes}")
        self.header_bytes = header_bytes
        self.limit_bytes = limit_bytes


class HeaderError(RocketMQError):
    """A custom header field (``ext_fields``) is missing or cannot be parsed.

    Java answers this case (``RemotingCommandException``) with SYSTEM_ERROR and the message.
    """


class ConfigError(RocketMQError):
    """A configuration key is unknown or its value is invalid; the message names the key."""


class BrokerError(RocketMQError):
    """A response with a non-success code. ``code`` is the RocketMQ response code.

    Args:
        remark: the response's remark, as the peer wrote it.
        response_code: the code, for a plain BrokerError (a subclass knows its own).
        request_code: the refused request's code, where the refusal was received.
        addr: the peer that refused.
        topic: the topic the request was about, where there is one.
    """

    code: int = -1
    _by_code: ClassVar[dict[int, type[BrokerError]]] = {}

    def __init__(
        self,
        remark: str = "",
        *,
        response_code: int | None = None,
        request_code: int | None = None,
        addr: str | None = None,
        topic: str | None = None,
    ) -> None:
        super().__init__(remark)
        self.remark = remark
        if response_code is not None:
            self.code = response_code
        self.request_code = request_code
        self.addr = addr
        self.topic = topic

    @property
    def response_code(self) -> int:
        """``code`` (always set here), by the name the broker's dispatch reads."""
        return self.code

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code >= 0:
            BrokerError._by_code[cls.code] = cls

    def __str__(self) -> str:
        if self.request_code is None and self.addr is None:
            # The broker's own refusal: this text is the remark sent back to the peer.
            return self.remark or f"response code {self.response_code}"
        where = request_name(self.request_code) if self.request_code is not None else "request"
        if self.addr is not None:
            where += f" to {self.addr}"
        if self.topic:
            where += f", topic {self.topic}"
        refusal = f"{where}: refused with {_response_name(self.response_code)}"
        return f"{refusal}: {self.remark}" if self.remark else refusal

    @staticmethod
    def for_code(
        code: int,
        remark: str | None,
        *,
        request_code: int | None = None,
        addr: str | None = None,
        topic: str | None = None,
    ) -> BrokerError:
        """The exception for a response ``code``; a plain BrokerError when none is registered.

        ``request_code``, ``addr`` and ``topic`` say what was refused (a client knows them).
        """
        cls = BrokerError._by_code.get(code, BrokerError)
        return cls(
            remark or "", response_code=code, request_code=request_code, addr=addr, topic=topic
        )


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
