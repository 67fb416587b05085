"""A slave copies its master's topics, consumer and delay offsets and subscription groups.

RocketMQ counterpart: ``SlaveSynchronize`` (4.9), run every 10 s on a slave: GET_ALL_TOPIC_CONFIG
(21), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) over the master's
normal remoting port (its address comes from REGISTER_BROKER's answer). With them a consumer
that moves to the slave when the master is gone resumes from its committed offsets, and the
slave serves the master's topics. What arrives replaces the slave's tables and is persisted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from broker.periodic import Periodic
from remoting.bodies import SubscriptionGroupConfig, TopicConfigWrapper
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RocketMQError
from remoting.route import loads

if TYPE_CHECKING:
    from broker.broker import Broker

log = structlog.get_logger(__name__)

SYNC_PERIOD_S = 10.0
TIMEOUT_S = 3.0


class SlaveSync:
    def __init__(
        self, broker: Broker, master_addr: Callable[[], str | None], period_s: float = SYNC_PERIOD_S
    ) -> None:
        self.broker = broker
        self.master_addr = master_addr
        self.rounds = 0
        self._loop = Periodic(
            "slave-sync",
            self.sync_all,
            period_s,
            first_delay_s=0.0,
            failure_event="slave_sync_failed",
        )

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _fetch(self, addr: str, code: RequestCode) -> object | None:
        request = RemotingCommand.request(code, {})
        try:
            response = await self.broker.client.invoke(addr, request, TIMEOUT_S)
        except RocketMQError as exc:
            log.info("slave_sync_unreachable", master=addr, code=int(code), error=str(exc))
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("slave_sync_refused", master=addr, code=int(code), remark=response.remark)
            return None
        doc: object = loads(response.body_bytes)
        return doc

    async def sync_all(self) -> None:
        addr = self.master_addr()
        if not addr:
            return
        broker = self.broker
        topics = await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        if isinstance(topics, dict):
            wrapper = TopicConfigWrapper.from_json(topics)
            broker.topics.table = dict(wrapper.topic_config_table)
            broker.topics.persist()
        offsets = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        if isinstance(offsets, dict):
            table = offsets.get("offsetTable") or {}
            broker.offsets.table = {
                str(k): {int(q): int(o) for q, o in per_queue.items()}
                for k, per_queue in table.items()
            }
            broker.offsets.persist()
        delays = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        if isinstance(delays, dict):
            broker.schedule.offsets.clear()
            broker.schedule.load_json(delays)
            broker.schedule.persist()
        groups = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if isinstance(groups, dict):
            table = groups.get("subscriptionGroupTable") or {}
            broker.subscription_groups.table = {
                str(name): SubscriptionGroupConfig.from_json(cfg) for name, cfg in table.items()
            }
            broker.subscription_groups.persist()
        self.rounds += 1
