"""The broker's statistics codes, the ones mqadmin's statsAll, brokerConsumeStats and
exportMetrics (and monitoring tools such as rocketmq-exporter) read.

RocketMQ counterpart: these handlers of ``AdminBrokerProcessor``:

- VIEW_BROKER_STATS_DATA (315): one ``BrokerStatsManager`` statistic (TOPIC_PUT_NUMS of a
  topic, GROUP_GET_NUMS of ``topic@group``, …) over the last minute, hour and day; an unknown
  one is SYSTEM_ERROR "The stats <name> <key> not exist", as RocketMQ answers;
- GET_BROKER_CONSUME_STATS (317): every subscription group's position in every queue of the
  topics it has offsets for (``fetchAllConsumeStatsInBroker``), orderly topics only with
  ``isOrder``;
- QUERY_TOPIC_CONSUME_BY_WHO (300): the groups that consume a topic, online or by offsets;
- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the broker's own topics, which exports leave out.

``consume_stats`` (one group's ``ConsumeStats``) is also GET_CONSUME_STATS's answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from broker.facets import (
    HasConfig,
    HasConsumers,
    HasOffsets,
    HasStats,
    HasStore,
    HasTopics,
    Tables,
)
from remoting.bodies import (
    ConsumeStats,
    GroupList,
    OffsetWrapper,
    TopicList,
    encode_consume_stats_list,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import (
    GetConsumeStatsInBrokerHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from remoting.route import MessageQueue


class Positions(HasConfig, HasTopics, HasOffsets, HasStore, HasStats, Protocol):
    """What a group's positions are read from: topics, offsets, the store's ends, rates."""


class StatsBroker(Positions, Tables, HasConsumers, Protocol):
    """What the statistics read: the counters, the offsets and groups, the store's ends."""

    @property
    def address(self) -> str: ...


def consume_stats(broker: Positions, group: str, topics: Iterable[str]) -> ConsumeStats:
    """``group``'s position in each readable queue of ``topics`` on this broker: the queue's
    end, the committed offset, and when the last consumed message was stored (0: none)."""
    store = broker.store
    table: dict[MessageQueue, OffsetWrapper] = {}
    for topic in topics:
        tc = broker.topics.get(topic)
        if tc is None:
            continue
        for qid in range(tc.read_queue_nums):
            broker_offset = store.get_max_offset(topic, qid)
            consumer_offset = max(0, broker.offsets.query(group, topic, qid))
            last = (
                store.get_message_store_timestamp(topic, qid, consumer_offset - 1)
                if consumer_offset > 0
                else 0
            )
            table[MessageQueue(topic, broker.config.broker_name, qid)] = OffsetWrapper(
                broker_offset, consumer_offset, max(last, 0)
            )
    return ConsumeStats(broker.stats.consume_tps(group), table)


class StatsProcessor:
    def __init__(self, broker: StatsBroker) -> None:
        self.broker = broker

    async def view_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        data = self.broker.stats.view(h.stats_name, h.stats_key)
        if data is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{h.stats_name}> <{h.stats_key}> not exist",
            )
        return response_to(request, ResponseCode.SUCCESS, None, None, data.encode())

    async def broker_consume_stats(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetConsumeStatsInBrokerHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        groups: list[tuple[str, list[ConsumeStats]]] = []
        total = 0
        for group in sorted(broker.subscription_groups.table):
            stats = []
            for topic in sorted(broker.offsets.topics_of_group(group)):
                tc = broker.topics.get(topic)
                if tc is None or (h.is_order and not tc.order):
                    continue
                cs = consume_stats(broker, group, [topic])
                total += cs.total_diff()
                stats.append(cs)
            if stats:
                groups.append((group, stats))
        body = encode_consume_stats_list(broker.address, groups, total)
        return response_to(request, ResponseCode.SUCCESS, None, None, body)

    async def consumed_by(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """The groups online with a subscription to the topic, and those with offsets in
        it (``queryTopicConsumeByWho`` + ``whichGroupByTopic``)."""
        topic = TopicRequestHeader.from_ext_fields(request.ext_fields).topic
        broker = self.broker
        groups = {g for g, info in broker.consumers.groups.items() if topic in info.subscriptions}
        groups |= broker.offsets.groups_of_topic(topic)
        body = GroupList(sorted(groups)).encode()
        return response_to(request, ResponseCode.SUCCESS, None, None, body)

    async def system_topics(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topics = self.broker.topics
        names = sorted(t for t in topics.table if topics.is_system_topic(t))
        body = TopicList(names, self.broker.address).encode()
        return response_to(request, ResponseCode.SUCCESS, None, None, body)
