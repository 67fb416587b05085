"""The RocketMQ remoting protocol: frames, commands, a server and a client.

RocketMQ counterpart: the ``rocketmq-remoting`` module. This package imports nothing else of
Aerolite's; the broker, the name server and the SDK all sit on it.
"""

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
