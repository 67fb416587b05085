"""``Registration``: the broker tells every name server what it serves.

RocketMQ counterpart: ``BrokerController.registerBrokerAll`` / ``BrokerOuterAPI``: a
REGISTER_BROKER (103) to each address of ``namesrvAddr`` at start-up, then every
``registerNameServerPeriod`` (30 s; the first tick 10 s after start) and soon after any topic
change; UNREGISTER_BROKER (104) at shutdown. The body carries the topic table and its
DataVersion, with a CRC32 the name server checks. A name server that is down is logged and
retried on the next round; registration never stops the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import Callable

import structlog

from remoting.bodies import RegisterBrokerBody, TopicConfigWrapper
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RocketMQError
from remoting.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader

log = structlog.get_logger(__name__)

REGISTER_TIMEOUT_S = 6.0  # registerBrokerTimeoutMills
FIRST_PERIODIC_DELAY_S = 10.0


class Registration:
    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        *,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: Callable[[], str],
        ha_server_addr: Callable[[], str],
        topics: Callable[[], TopicConfigWrapper],
        period_s: float,
    ) -> None:
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_id = broker_id
        self._broker_addr = broker_addr
        self._ha_server_addr = ha_server_addr
        self._topics = topics
        self.period_s = period_s
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def request(self) -> None:
        """Register again soon (a topic changed); bursts of changes share one round."""
        self._wakeup.set()

    async def register_all(self) -> int:
        """One round to every name server; returns how many accepted."""
        body = RegisterBrokerBody(self._topics()).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self._broker_addr(),
            cluster_name=self.cluster,
            ha_server_addr=self._ha_server_addr(),
            broker_id=self.broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).to_ext_fields()
        results = await asyncio.gather(
            *(self._register_one(addr, header, body) for addr in self.namesrv_addrs)
        )
        return sum(results)

    async def _register_one(self, addr: str, header: dict[str, str], body: bytes) -> bool:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            response = await self.client.invoke(addr, request, REGISTER_TIMEOUT_S)
        except RocketMQError as exc:
            log.warning("register_broker_failed", namesrv=addr, error=str(exc))
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "register_broker_refused", namesrv=addr, code=response.code, remark=response.remark
            )
            return False
        master = response.ext_fields.get("masterAddr")
        if master:
            self.master_addr = master
        ha = response.ext_fields.get("haServerAddr")
        if ha:
            self.master_ha_addr = ha  # where a slave replicates from
        return True

    async def unregister_all(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self._broker_addr(),
            cluster_name=self.cluster,
            broker_id=self.broker_id,
        ).to_ext_fields()
        for addr in self.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
            try:
                await self.client.invoke(addr, request, REGISTER_TIMEOUT_S)
            except RocketMQError as exc:
                log.warning("unregister_broker_failed", namesrv=addr, error=str(exc))

    async def _run(self) -> None:
        delay = FIRST_PERIODIC_DELAY_S
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wakeup.wait()
            self._wakeup.clear()
            delay = self.period_s
            try:
                await self.register_all()
            except Exception:
                log.exception("register_round_failed")

    async def start(self) -> None:
        """Register once now (so routes exist when start returns), then keep registering."""
        if self.namesrv_addrs:
            accepted = await self.register_all()
            log.info(
                "broker_registration",
                namesrv=";".join(self.namesrv_addrs),
                accepted=accepted,
            )
        self._task = asyncio.create_task(self._run(), name="broker-registration")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.namesrv_addrs:
            await self.unregister_all()
