"""The asyncio Python SDK: producers and consumers for RocketMQ 4.x brokers and Aerolite.

RocketMQ counterpart: ``rocketmq-client``. Imports ``remoting`` only; ``client.spark`` is the
optional PySpark connector.

::

    async with Producer("demo-producer", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(Message("orders", b"hello", tags="TagA"))

Errors: everything the SDK raises on purpose derives from ``RocketMQError`` (``code``: the
RocketMQ response code or None; ``retriable``) and is importable from here; the tree is drawn
in ``client.errors``.

Logging: the SDK is a library. It logs through the standard ``logging`` module under its
modules' names (``client.producer``, ``client.push_consumer``, ``remoting.client``,
``remoting.connection``, …), adds no handler but a ``NullHandler`` on ``client`` and
``remoting``, and never writes to stdout: nothing shows until the application configures
logging, and then the application's levels and handlers decide. Each message starts with a
stable snake_case event name followed by ``key=value`` pairs, formatted lazily by ``logging``
(``log.debug("connected addr=%s", addr)`` prints ``connected addr=127.0.0.1:9876``), so a
line can be grepped by event and parsed by key. Debug is for connections and dropped late
replies, info for lifecycle steps and failures the SDK recovers from by itself (started, a
queue assigned, a pull or send retried), warning for what needs attention. To see the SDK
at work::

    logging.basicConfig(level=logging.DEBUG)    # the SDK's lines on stderr, connections too
    for name in ("client", "remoting"):         # …and later warnings only again
        logging.getLogger(name).setLevel(logging.WARNING)
"""

import logging

from client import errors as _errors
from client.errors import *  # noqa: F403 - the error tree, listed once in client.errors
from client.message import ConsumeResult, Message, MessageView, SendResult, SendStatus
from client.producer import Producer
from client.pull_consumer import PullConsumer
from client.push_consumer import PushConsumer
from client.simple_consumer import ReceivedMessage, SimpleConsumer
from client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from remoting.acl import SessionCredentials
from remoting.bodies import ConsumeFromWhere, MessageModel
from remoting.route import MessageQueue

__all__ = [
    "ConsumeFromWhere",
    "ConsumeResult",
    "LocalTransactionState",
    "Message",
    "MessageModel",
    "MessageQueue",
    "MessageView",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "ReceivedMessage",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "SimpleConsumer",
    "TransactionProducer",
    "TransactionSendResult",
]
__all__ += _errors.__all__

# A library adds no handler but this one (the logging HOWTO, "Configuring Logging for a
# Library"): without it, Python's last-resort handler would print the SDK's warnings to the
# stderr of an application that has not configured logging.
logging.getLogger(__name__).addHandler(logging.NullHandler())
