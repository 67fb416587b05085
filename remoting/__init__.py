"""The RocketMQ remoting protocol: frames, commands, a server and a client.

RocketMQ counterpart: the ``rocketmq-remoting`` module. This package imports nothing else of
Aerolite's; the broker, the name server and the SDK all sit on it.

It logs through the standard ``logging`` module (``remoting.client``, ``remoting.connection``,
…), as the SDK does (see ``client``'s docstring for the message convention): the broker's
``configure_logging`` renders those records with its own, and an SDK application decides for
itself.
"""

import logging

from remoting.client import ClientConfig, RemotingClient
from remoting.codes import (
    PROTOCOL_VERSION,
    CommandFlag,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from remoting.command import RemotingCommand, decode_command, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable, RPCHook
from remoting.errors import (
    BrokerError,
    ConnectError,
    FrameError,
    HeaderError,
    RemotingError,
    RemotingTimeoutError,
    RocketMQError,
)
from remoting.frame import FrameDecoder
from remoting.server import RemotingServer, ServerConfig

__all__ = [
    "PROTOCOL_VERSION",
    "BrokerError",
    "ClientConfig",
    "CommandFlag",
    "ConnectError",
    "Connection",
    "FrameDecoder",
    "FrameError",
    "HeaderError",
    "Lane",
    "LanguageCode",
    "ProcessorTable",
    "RPCHook",
    "RemotingClient",
    "RemotingCommand",
    "RemotingError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RequestCode",
    "ResponseCode",
    "RocketMQError",
    "SerializeType",
    "ServerConfig",
    "decode_command",
    "response_to",
]

# A library's loggers get a NullHandler only: nothing shows until the application (or the
# broker's configure_logging) sets logging up.
logging.getLogger(__name__).addHandler(logging.NullHandler())
