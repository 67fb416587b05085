"""A slave copies its master's topics, consumer and delay offsets and subscription groups.

RocketMQ counterpart: ``SlaveSynchronize`` (4.9), run every 10 s on a slave: GET_ALL_TOPIC_CONFIG
(21), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) over the master's
normal remoting port (its address comes from REGISTER_BROKER's answer). With them a consumer
that moves to the slave when the master is gone resumes from its committed offsets, and the
slave serves the master's topics. What arrives replaces the slave's tables and is persisted.

Beyond RocketMQ, the way back: offsets clients commit to the slave (they do only while the
master is missing from their route) would be overwritten by the master's older ones at the
first sync after the master returns, and consumers that load their offsets then would replay
what they had consumed. So the slave keeps each such commit and, at the start of every round,
offers it to the master before copying the master's table: an UPDATE_CONSUMER_OFFSET carrying
the DataVersion of the master's table the slave copied last. The master takes the offset
when it is larger than its own and the queue has not changed there since that version
(``OffsetTable.take_over``), so an operator's reset on the master after its return, or a
client that already committed there, wins over the offer. A master that sends no DataVersion
(not ours) is offered nothing. Offers live in memory: a slave restarted during the outage has
none to make.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from broker.facets import HasOffsets, HasSchedule, Tables
from broker.offsets import OFFER_TAKEN, TOPIC_GROUP_SEPARATOR, Version
from remoting.bodies import DataVersion, SubscriptionGroupConfig, TopicConfigWrapper
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RocketMQError
from remoting.headers import UpdateConsumerOffsetRequestHeader
from remoting.lifecycle import Periodic
from remoting.route import loads

log = structlog.get_logger(__name__)

SYNC_PERIOD_S = 10.0
TIMEOUT_S = 3.0


class SlaveSyncBroker(Tables, HasOffsets, HasSchedule, Protocol):
    """A slave copying its master's tables: the client it asks with and the tables it
    replaces."""

    @property
    def client(self) -> RemotingClient: ...


class SlaveSync:
    def __init__(
        self,
        broker: SlaveSyncBroker,
        master_addr: Callable[[], str | None],
        period_s: float = SYNC_PERIOD_S,
    ) -> None:
        self.broker = broker
        self.master_addr = master_addr
        self.rounds = 0
        # (topic@group, queue id) → the offset a client committed here, not yet offered
        self.offers: dict[tuple[str, int], int] = {}
        # the DataVersion of the master's offset table copied last; None: never copied
        self.master_offsets_version: Version | None = None
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

    def client_committed(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A client committed ``offset`` to this slave: offer it to the master."""
        self.offers[(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", queue_id)] = offset

    async def _offer_offsets(self, addr: str) -> bool:
        """Offer the master the offsets clients committed here; False when it cannot be
        reached (the offers not made yet stay for the next round)."""
        since = self.master_offsets_version
        if since is None:
            # Never copied its table: learn whether the master versions it at all.
            doc = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
            if not isinstance(doc, dict):
                return False
            if doc.get("dataVersion") is None:
                log.warning(
                    "slave_sync_offsets_not_offered",
                    master=addr,
                    offers=len(self.offers),
                    reason="the master sends no DataVersion with its consumer offsets",
                )
                self.offers.clear()
                return True
            since = (0, 0)  # only queues the master has not changed since it started
        offered = taken = 0
        for (key, queue_id), offset in list(self.offers.items()):
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            header = UpdateConsumerOffsetRequestHeader(
                consumer_group=group,
                topic=topic,
                queue_id=queue_id,
                commit_offset=offset,
                offset_version_timestamp=since[0],
                offset_version_counter=since[1],
            )
            request = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields()
            )
            try:
                response = await self.broker.client.invoke(addr, request, TIMEOUT_S)
            except RocketMQError as exc:
                log.info(
                    "slave_sync_unreachable", master=addr, offers=len(self.offers), error=str(exc)
                )
                return False
            if self.offers.get((key, queue_id)) == offset:  # not committed again meanwhile
                del self.offers[(key, queue_id)]
            offered += 1
            if response.code != ResponseCode.SUCCESS:
                log.warning(
                    "slave_sync_offer_refused",
                    master=addr,
                    group=group,
                    topic=topic,
                    queue_id=queue_id,
                    remark=response.remark,
                )
            elif response.remark == OFFER_TAKEN:
                taken += 1
        if offered:
            log.info("slave_sync_offsets_offered", master=addr, offered=offered, taken=taken)
        return True

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
        # Offers first: the master's table copied next has the ones it took.
        reached = not self.offers or await self._offer_offsets(addr)
        offsets = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET) if reached else None
        if isinstance(offsets, dict):
            table = offsets.get("offsetTable") or {}
            copied = {
                str(k): {int(q): int(o) for q, o in per_queue.items()}
                for k, per_queue in table.items()
            }
            # Commits clients made here while the offers went out stay, for the next round.
            for (key, queue_id), offset in self.offers.items():
                copied.setdefault(key, {})[queue_id] = offset
            broker.offsets.table = copied
            version = offsets.get("dataVersion")
            if isinstance(version, dict):
                dv = DataVersion.from_json(version)
                self.master_offsets_version = (dv.timestamp, dv.counter)
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
