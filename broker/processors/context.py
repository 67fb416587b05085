"""What the request processors see of the broker: small ``typing.Protocol`` pieces.

RocketMQ counterpart: the ``BrokerController`` getters a processor calls
(``getBrokerConfig()``, ``getMessageStore()``, ``getTopicConfigManager()``, …); there every
processor holds the whole controller. Here each processor module declares, from these pieces,
a protocol naming only what it uses (``PullBroker`` in ``pull.py``, ``SendBroker`` in
``send.py``, …), so that no processor imports ``broker.broker``: the broker builds the
processors and stays the one module above them, and a reader sees at the top of a processor
what of the broker it touches.

Members are read-only properties, so a ``Broker``'s plain attributes satisfy them
(``config`` is replaced by UPDATE_BROKER_CONFIG: a processor reads it at each request, never
keeps it). mypy checks the fit where ``broker.py`` hands ``self`` to a processor. A member
that is another service is typed by a protocol of the calls made on it, never by the
service's class, so this module imports tables, the store and config only.
"""

from __future__ import annotations

from typing import Any, Protocol

from broker.clients import ConsumerManager, ProducerManager
from broker.config import BrokerConfig
from broker.offsets import OffsetTable
from broker.registration import Registration
from broker.stats import BrokerStats
from broker.subscriptions import SubscriptionGroupTable
from broker.topics import TopicTable
from codec import Host, RecordInfo
from store.message_store import MessageStore


class BrokerFacts(Protocol):
    """The configuration (permission, role, feature switches) and the address refusals
    name."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def address(self) -> str: ...


class Tables(Protocol):
    """Topics and subscription groups, as checks and auto-creation read them."""

    @property
    def topics(self) -> TopicTable: ...

    @property
    def subscription_groups(self) -> SubscriptionGroupTable: ...


class Clients(Protocol):
    """The consumers and producers registered by heartbeats, and the groups' offsets."""

    @property
    def consumers(self) -> ConsumerManager: ...

    @property
    def producers(self) -> ProducerManager: ...

    @property
    def offsets(self) -> OffsetTable: ...


class Storing(Protocol):
    """Stores messages: the store, the address stamped on them as STOREHOST, and the
    counters of what went in and out."""

    @property
    def store(self) -> MessageStore: ...

    @property
    def store_host(self) -> Host: ...

    @property
    def stats(self) -> BrokerStats: ...


class Routed(Protocol):
    """Registration with the name servers: a reply that created a topic waits for its
    route (``Registration.reply_when_routed``)."""

    @property
    def registration(self) -> Registration: ...


class HalfOps(Protocol):
    """The transaction service's op queue: a half message's end is written there."""

    async def write_op(self, half: RecordInfo) -> bool: ...


class OffsetRelay(Protocol):
    """A slave's record of offsets its clients committed, offered to the master later."""

    def client_committed(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class DelayProgress(Protocol):
    """The delay-level schedule's progress, as delayOffset.json holds it."""

    def to_json(self) -> dict[str, Any]: ...
