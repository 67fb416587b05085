"""``NameServer``: the name server process's service object.

RocketMQ counterpart: ``NamesrvController``. It owns the remoting server and the processor
table; the route table and its processors (REGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, …) are
registered here as they are built. Until a code has a processor the server answers it
REQUEST_CODE_NOT_SUPPORTED, as a real name server does for codes it does not know.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import structlog

from broker.config import NamesrvConfig
from remoting.dispatch import ProcessorTable
from remoting.server import RemotingServer, ServerConfig

log = structlog.get_logger(__name__)


class NameServer:
    """The name server service: ``start()`` returns once it accepts connections."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.processors = ProcessorTable()
        self.server = RemotingServer(
            ServerConfig(
                host=config.bind_address,
                port=config.listen_port,
                idle_timeout_s=config.server_channel_max_idle_s,
            ),
            self.processors,
            name="namesrv",
        )

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        await self.server.start()
        log.info("namesrv_started", address=self.address)

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
