"""The lifecycle every SDK client shares: start, shut down, ``async with``, and the check
that a call is made while started.

RocketMQ counterpart: the ``ServiceState`` checks (``makeSureStateOK``) of
``DefaultMQProducerImpl`` / ``DefaultMQPushConsumerImpl`` and the ``MQAdmin`` start/shutdown
contract; here the state is simply whether the client holds its ``ClientInstance``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from client.errors import ClientStateError
from client.instance import ClientInstance


class ClientService(ABC):
    """Base of Producer, PushConsumer (and PullConsumer) and Admin."""

    _instance: ClientInstance | None

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def shutdown(self) -> None: ...

    @abstractmethod
    def _describe(self) -> str:
        """Who this client is, for error messages ("producer pg-1")."""

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

    def _running(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError(f"{self._describe()} is not started")
        return self._instance
