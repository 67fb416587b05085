"""What the request processors and the broker's services see of the broker: small
``typing.Protocol`` pieces, each broker attribute declared once.

RocketMQ counterpart: the ``BrokerController`` getters a processor or service calls
(``getBrokerConfig()``, ``getMessageStore()``, ``getTopicConfigManager()``, …); there each
holds the whole controller. Here each processor and service module declares, from these
pieces, a protocol naming only what it uses (``PullBroker`` in ``processors/pull.py``,
``TransactionBroker`` in ``transaction.py``, ``MetricsBroker`` in ``metrics.py``, …), so
that none imports ``broker.broker``: the broker builds them and stays the one module above
them, and a reader sees at the top of a module what of the broker it touches. An attribute
only one module reads is declared in that module's protocol; one that two or more read is a
piece here.

Members are read-only properties, so a ``Broker``'s plain attributes satisfy them
(``config`` is replaced by UPDATE_BROKER_CONFIG: a reader reads it when it needs it, never
keeps it). mypy checks the fit where ``broker.py`` hands ``self`` over. A member whose value
is another service is typed by a protocol of the calls made on it (``DelayProgress``), never
by the service's class: this module imports tables, the store and config only, and no
processor or service, so a module importing it cannot close an import cycle.
"""

from __future__ import annotations

from typing import Any, Protocol

from broker.clients import ConsumerManager, ProducerManager
from broker.config import BrokerConfig
from broker.long_polling import PullHoldService
from broker.offsets import OffsetTable
from broker.registration import Registration
from broker.stats import BrokerStats
from broker.subscriptions import SubscriptionGroupTable
from broker.topics import TopicTable
from codec import Host
from store.ha import HAService
from store.message_store import MessageStore

# ------------------------------------------------------------------ configuration


class HasConfig(Protocol):
    """The configuration: permission, role, feature switches, the services' settings."""

    @property
    def config(self) -> BrokerConfig: ...


class BrokerFacts(HasConfig, Protocol):
    """The configuration and the address refusals name."""

    @property
    def address(self) -> str: ...


# ------------------------------------------------------------------------- tables


class HasTopics(Protocol):
    """The topics (``ensure_system_topics`` creates the system ones on first use)."""

    @property
    def topics(self) -> TopicTable: ...


class Tables(HasTopics, Protocol):
    """Topics and subscription groups, as checks and auto-creation read them."""

    @property
    def subscription_groups(self) -> SubscriptionGroupTable: ...


class HasOffsets(Protocol):
    """The groups' consume offsets."""

    @property
    def offsets(self) -> OffsetTable: ...


class HasConsumers(Protocol):
    """The consumers registered by heartbeats, with their subscriptions."""

    @property
    def consumers(self) -> ConsumerManager: ...


class HasProducers(Protocol):
    """The producers registered by heartbeats (a transaction check asks one back)."""

    @property
    def producers(self) -> ProducerManager: ...


class Clients(HasConsumers, HasProducers, HasOffsets, Protocol):
    """The consumers and producers registered by heartbeats, and the groups' offsets."""


# -------------------------------------------------------------------------- store


class HasStore(Protocol):
    """The message store."""

    @property
    def store(self) -> MessageStore: ...


class StoreAccess(HasStore, Protocol):
    """Reads and stores records, stamping the broker's own address (STOREHOST) on what it
    stores (``broker.parked.put_back``, ending a transaction)."""

    @property
    def store_host(self) -> Host: ...


class HasStats(Protocol):
    """The counters of what went in and out."""

    @property
    def stats(self) -> BrokerStats: ...


class Storing(StoreAccess, HasStats, Protocol):
    """Stores messages and counts them."""


class DelayBroker(HasConfig, StoreAccess, Protocol):
    """A service that delivers messages later (the delay-level schedule, the timer wheel;
    the transaction check and pop revive build on it): its settings, and the store it
    delivers through."""


# ------------------------------------------------------------------ other services


class HasPullHold(Protocol):
    """Long polling: the pulls held until a message arrives."""

    @property
    def pull_hold(self) -> PullHoldService: ...


class HasHA(Protocol):
    """A master's replication service (``None`` on a slave or with HA off)."""

    @property
    def ha(self) -> HAService | None: ...


class Routed(Protocol):
    """Registration with the name servers: a reply that created a topic waits for its
    route (``Registration.reply_when_routed``)."""

    @property
    def registration(self) -> Registration: ...


class DelayProgress(Protocol):
    """The delay-level schedule's progress per level, as delayOffset.json holds it: the
    admin reads it out, a slave replaces it with its master's."""

    @property
    def offsets(self) -> dict[int, int]: ...

    def to_json(self) -> dict[str, Any]: ...

    def load_json(self, doc: object) -> None: ...

    def persist(self) -> None: ...


class HasSchedule(Protocol):
    """The delay-level schedule, for its progress."""

    @property
    def schedule(self) -> DelayProgress: ...
