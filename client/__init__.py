"""The asyncio Python SDK: producers and consumers for RocketMQ 4.x brokers and Aerolite.

RocketMQ counterpart: ``rocketmq-client``. Imports ``remoting`` only; ``client.spark`` is the
optional PySpark connector.

::

    async with Producer("demo-producer", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(Message("orders", b"hello", tags="TagA"))
"""

from client.errors import (
    BrokerError,
    ClientError,
    ClientStateError,
    InvalidMessageError,
    NoRouteError,
    RemotingError,
    RocketMQError,
)
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
