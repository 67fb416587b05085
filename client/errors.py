"""Errors the SDK raises, all importable from here (and from ``client``).

RocketMQ counterpart: ``MQClientException`` (client-side failures) next to
``MQBrokerException`` and ``RemotingException`` (here ``remoting.errors``, re-exported so an
application catches everything from one place); aiokafka's ``errors.py`` is the model of one
base class with a ``retriable`` flag::

    RocketMQError                       .code (response code or None), .retriable
    ├── RemotingError                   no answer from the peer (retriable)
    │   ├── ConnectError                could not connect, or the connection closed
    │   ├── RemotingTimeoutError        no response in time: names request, address and wait
    │   │   └── ClientTimeoutError      …of a call over several requests (also a ClientError)
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
        │   └── InvalidMessageError 13  a message fails validation before sending
        ├── ResponseDecodeError         an answer's body or header cannot be read
        │   └── MessageDecodeError      …a pull or query body that is not stored records
        ├── NoRouteError                no name server knows the topic, or no queue is writable
        ├── ClientStateError            used before start() or after shutdown()
        └── ClientTimeoutError          (see above: a ClientError and a RemotingTimeoutError)

``InvalidArgumentError`` and ``MessageDecodeError`` are also ``ValueError``s.
``InvalidMessageError`` carries code 13 (MESSAGE_ILLEGAL), as Java's ``Validators`` do, so a
message refused before sending and one the broker refused share ``code``. The Spark
connector's errors (``client.spark``: ``SparkOptionError`` and ``WriteSchemaError``, both
``InvalidArgumentError``s; ``DataLossError``, a ``ClientError`` and ``RuntimeError``) and the
admin CLI's ``UsageError`` (an ``InvalidArgumentError`` that never leaves ``main``) derive from
this tree too. Failures the SDK meets in ``codec`` (a record that does not parse, properties
over 32 KB) reach the application as ``MessageDecodeError`` and ``InvalidMessageError``;
``store.errors`` are the broker's own and never reach a client.

A refusal's text says which request, to which address and (where known) about which topic
was refused, then the code and remark::

    SEND_MESSAGE_V2 (310) to 127.0.0.1:10911, topic Orders: refused with
    TOPIC_NOT_EXIST (17): topic[Orders] not exist, apply first please!

A timeout's text names the request, the address (or "any broker of topic T") and the wait::

    POP_MESSAGE (200050) to 127.0.0.1:10911: no response after 23.0 s
    SEND_MESSAGE_V2 (310) to any broker of topic Orders: no response after 3.0 s
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from remoting.bodies import MALFORMED_BODY
from remoting.codes import ResponseCode
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
    request_name,
)

__all__ = [
    "BrokerError",
    "BrokerSystemError",
    "ClientError",
    "ClientStateError",
    "ClientTimeoutError",
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
    "ResponseDecodeError",
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
    """A message fails validation (topic, body, tags, keys, properties); nothing was sent.

    ``code`` is MESSAGE_ILLEGAL (13), what Java's ``Validators.checkMessage`` throws with and
    what a broker answers a message it refuses.
    """

    code = ResponseCode.MESSAGE_ILLEGAL.value


class ResponseDecodeError(ClientError):
    """An answer of a broker or name server whose body or header cannot be read.

    Args:
        detail: what is wrong with it.
        request_code: the request answered, where known.
        addr: who answered, where known.
    """

    def __init__(
        self, detail: str, *, request_code: int | None = None, addr: str | None = None
    ) -> None:
        if request_code is not None and addr is not None:
            super().__init__(f"{request_name(request_code)} to {addr}: unreadable answer: {detail}")
        else:
            super().__init__(detail)
        self.detail = detail
        self.request_code = request_code
        self.addr = addr


class MessageDecodeError(ResponseDecodeError, ValueError):
    """A pull or query body is not a sequence of stored records."""


@contextlib.contextmanager
def reading_answer(request_code: int, addr: str, what: str = "") -> Iterator[None]:
    """Around the reading of an answer's body or header: what a malformed one raises
    (``remoting.bodies.MALFORMED_BODY``) becomes a ResponseDecodeError naming the request
    and who answered, ``what`` it should have been leading the detail; errors of the tree
    (a MessageDecodeError, a HeaderError) pass as they are."""
    try:
        yield
    except RocketMQError:
        raise
    except MALFORMED_BODY as exc:
        detail = f"{what}: {exc!r}" if what else repr(exc)
        raise ResponseDecodeError(detail, request_code=request_code, addr=addr) from exc


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


class ClientTimeoutError(ClientError, RemotingTimeoutError):
    """A call the SDK times itself, over several requests or none yet, ran out of time.

    A send retried across brokers, or waiting for its turn in a coalesced request, has no one
    peer: ``addr`` says where it was going (``any broker of topic Orders``). Both a
    ``ClientError`` (what the SDK gave up on) and a ``RemotingTimeoutError``, so that
    ``except RemotingTimeoutError`` catches every timeout. Retriable.

    Args:
        request: the request code, or the name of the call (``Admin.topic_stats``).
        addr: the address, or a description of the peers (``any broker of topic T``).
        timeout_s: the time waited.
        outcome: what happened in that time (default ``no response``).
    """

    def __init__(
        self, request: int | str, addr: str, timeout_s: float, *, outcome: str = "no response"
    ) -> None:
        # No one request was on the wire: no opaque.
        super().__init__(addr, request, None, timeout_s, outcome=outcome)
