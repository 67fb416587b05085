"""The name server: broker registry and topic routes.

RocketMQ counterpart: ``org.apache.rocketmq.namesrv``. Imports ``remoting`` only.
"""

from broker.namesrv.server import NameServer

__all__ = ["NameServer"]
