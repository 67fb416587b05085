"""What each broker service sees of the broker (and the metrics of the name server).

RocketMQ counterpart: the ``BrokerController`` getters a service calls
(``getMessageStore()``, ``getTopicConfigManager()``, ``getConsumerOffsetManager()``, …);
there every service holds the whole controller. Here each service names, as a
``typing.Protocol``, only the broker attributes it reads, so that it does not import
``broker.broker`` and the broker, which builds the services, stays the one module above them.

Members are read-only properties: a ``Broker``'s plain attributes satisfy them, and mypy
checks that where ``broker.py`` hands ``self`` to a service. A member whose value is another
service is typed by a protocol too (``DelayOffsets``, ``SetAsideCounter``), never by the
service's class: this module imports tables, the store and config only, and no service, so a
service importing it cannot close an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker.clients import ProducerManager
from broker.config import BrokerConfig
from broker.long_polling import PullHoldService
from broker.offsets import OffsetTable
from broker.stats import BrokerStats
from broker.subscriptions import SubscriptionGroupTable
from broker.topics import TopicTable
from codec import Host
from remoting.client import RemotingClient
from remoting.dispatch import ProcessorTable
from remoting.server import RemotingServer
from store.ha import HAService
from store.message_store import MessageStore

if TYPE_CHECKING:
    # Only for the annotation: importing ``broker.namesrv`` at run time runs its
    # ``__init__``, which imports the name server, which imports ``broker.metrics``, which
    # imports this module.
    from broker.namesrv.route_table import RouteTable


class HasTopics(Protocol):
    """Creates system topics on first use (``ensure_system_topics``)."""

    @property
    def topics(self) -> TopicTable: ...


class StoreAccess(Protocol):
    """Puts a parked message back (``broker.parked.put_back``): reads and stores records and
    stamps the broker's own address on what it stores."""

    @property
    def store(self) -> MessageStore: ...

    @property
    def store_host(self) -> Host: ...


class DelayBroker(StoreAccess, Protocol):
    """The delay-level schedule (``ScheduleService``) and the timer wheel (``TimerService``):
    their settings, and the store they deliver through."""

    @property
    def config(self) -> BrokerConfig: ...


class TransactionBroker(DelayBroker, HasTopics, Protocol):
    """The transaction check (``TransactionService``): the half and op queues' offsets, and
    the producers it asks back."""

    @property
    def offsets(self) -> OffsetTable: ...

    @property
    def producers(self) -> ProducerManager: ...


class PopBroker(DelayBroker, HasTopics, Protocol):
    """Pop consumption and its revive service (``PopService``): the groups' offsets and their
    retryMaxTimes."""

    @property
    def offsets(self) -> OffsetTable: ...

    @property
    def subscription_groups(self) -> SubscriptionGroupTable: ...


class DelayOffsets(Protocol):
    """The schedule's progress per delay level, which a slave copies from its master."""

    @property
    def offsets(self) -> dict[int, int]: ...

    def load_json(self, doc: object) -> None: ...

    def persist(self) -> None: ...


class SlaveSyncBroker(HasTopics, Protocol):
    """A slave copying its master's tables (``SlaveSync``): the client it asks with and the
    tables it replaces."""

    @property
    def client(self) -> RemotingClient: ...

    @property
    def offsets(self) -> OffsetTable: ...

    @property
    def subscription_groups(self) -> SubscriptionGroupTable: ...

    @property
    def schedule(self) -> DelayOffsets: ...


class SetAsideCounter(Protocol):
    """A loop that moves past messages it can never deliver (broker/parked.py)."""

    @property
    def set_aside(self) -> int: ...


class TimerGauges(SetAsideCounter, Protocol):
    @property
    def pending(self) -> int: ...


class MetricsBroker(Protocol):
    """What ``BrokerCollector`` reads at scrape time."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def store(self) -> MessageStore: ...

    @property
    def offsets(self) -> OffsetTable: ...

    @property
    def pull_hold(self) -> PullHoldService: ...

    @property
    def processors(self) -> ProcessorTable: ...

    @property
    def server(self) -> RemotingServer: ...

    @property
    def ha(self) -> HAService | None: ...

    @property
    def timers(self) -> TimerGauges: ...

    @property
    def schedule(self) -> SetAsideCounter: ...

    @property
    def transactions(self) -> SetAsideCounter: ...

    @property
    def pop(self) -> SetAsideCounter: ...


class MetricsNamesrv(Protocol):
    """What ``NamesrvCollector`` reads at scrape time."""

    @property
    def routes(self) -> RouteTable: ...

    @property
    def address(self) -> str: ...
