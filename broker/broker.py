"""``Broker``: the broker process's service object.

RocketMQ counterpart: ``BrokerController``. It owns the remoting server and processor table
(and, as they are built, the message store, topic/offset/subscription tables and
registration with name servers). Until a code has a processor the broker answers it
REQUEST_CODE_NOT_SUPPORTED, as a real broker's admin processor does for unknown codes.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import structlog

from broker.config import BrokerConfig
from remoting.dispatch import ProcessorTable
from remoting.server import RemotingServer, ServerConfig

log = structlog.get_logger(__name__)


class Broker:
    """The broker service: ``start()`` returns once it accepts connections."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.processors = ProcessorTable()
        self.server = RemotingServer(
            ServerConfig(
                host=config.bind_address,
                port=config.listen_port,
                idle_timeout_s=config.server_channel_max_idle_s,
            ),
            self.processors,
            name="broker",
        )

    @property
    def address(self) -> str:
        """The address clients dial: brokerIP1 if set, else the bind address."""
        return f"{self.config.broker_ip1 or self.config.bind_address}:{self.server.port}"

    async def start(self) -> None:
        await self.server.start()
        log.info(
            "broker_started",
            address=self.address,
            broker_name=self.config.broker_name,
            cluster=self.config.broker_cluster_name,
        )

    async def shutdown(self) -> None:
        await self.server.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
