"""``Broker``: the broker process's service object.

RocketMQ counterpart: ``BrokerController``. It owns the message store, the topic, offset and
subscription-group tables, the client tables, long polling, registration with name servers,
the remoting server and its processor table.

Start order: load the store (recovery) and the tables, start the store, open the port,
register with the name servers (so routes exist once ``start()`` returns), then the
housekeeping loops. Shutdown runs the other way: stop registering and unregister, answer
parked pulls, stop accepting and drain the lanes, persist the tables, shut the store down.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Self

import structlog
from prometheus_client.registry import Collector

import codec
from broker.acl import PlainAcl
from broker.clients import ConsumerManager, ProducerManager
from broker.config import (
    BrokerConfig,
    BrokerRole,
    client_ssl_context,
    listener_limits,
    server_ssl_context,
    updated_config,
)
from broker.exporter_metrics import ExporterCollector
from broker.locks import QueueLocks
from broker.long_polling import PullHoldService
from broker.metrics import BrokerCollector, MetricsServer, bind_error, registry_of
from broker.offsets import OffsetTable
from broker.persist import try_write_json
from broker.pop import PopService
from broker.processors.admin import AdminProcessor
from broker.processors.clients import ClientProcessor
from broker.processors.end_transaction import EndTransactionProcessor
from broker.processors.ops import OpsProcessor
from broker.processors.pop import PopProcessor
from broker.processors.pull import PullProcessor
from broker.processors.send import SendProcessor
from broker.processors.send_back import SendBackProcessor
from broker.processors.stats import StatsProcessor
from broker.proxy.service import GrpcService
from broker.registration import Registration
from broker.schedule import ScheduleService
from broker.slave_sync import SYNC_PERIOD_S, SlaveSync
from broker.stats import SAMPLE_INTERVAL_S, BrokerStats
from broker.subscriptions import SubscriptionGroupTable
from broker.timer import TimerService
from broker.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, TopicTable
from broker.transaction import TransactionService
from codec import Host, host_of
from remoting.bodies import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigWrapper,
)
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.lifecycle import Lifecycle, Periodic, Stage, periodic_stage
from remoting.listener import Listener, StreamHandler, stream_listener
from remoting.server import RemotingServer, ServerConfig
from store.ha import HAClient, HAService
from store.message_store import MessageStore

log = structlog.get_logger(__name__)

# Dispatch this far behind the commit log means consume queues cannot keep up: refuse sends
# with SYSTEM_BUSY until it catches up rather than let the gap grow.
DISPATCH_BEHIND_BUSY_BYTES = 64 << 20
# How every answer starts while the store recovers (``aerolite ping`` looks for it).
RECOVERING_REMARK = "[RECOVERING]"
ACL_RELOAD_S = 5.0  # how often plain_acl.yml is looked at for changes


class Broker:
    """The broker service: ``start()`` returns once it accepts connections and has
    registered with its name servers."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store = MessageStore(config.store)
        self._init_tables(config)
        self._init_services(config)
        self._init_requests(config)
        self._init_network(config)
        self.lifecycle = Lifecycle("broker", self._stages())
        self._started = False
        self._stopped = False

    def _init_tables(self, config: BrokerConfig) -> None:
        """The broker's own tables, each persisted in the store's ``config`` folder."""
        root = config.store.root_dir
        self.topics = TopicTable(
            root / "config" / "topics.json",
            cluster=config.broker_cluster_name,
            broker_name=config.broker_name,
            broker_permission=config.broker_permission,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            delay_level_count=len(config.store.delay_levels_ms),
            trace_topic=config.msg_trace_topic_name if config.trace_topic_enable else None,
        )
        self.offsets = OffsetTable(root / "config" / "consumerOffset.json")
        # A segment deleted for space is logged with the groups whose messages went.
        self.store.retention.consumer_offsets = self._committed_offsets
        self.subscription_groups = SubscriptionGroupTable(
            root / "config" / "subscriptionGroup.json",
            auto_create=config.auto_create_subscription_group,
        )

    def _init_services(self, config: BrokerConfig) -> None:
        """The services that run beside request handling: delayed, transactional, timed and
        popped messages, replication, client tables, statistics and housekeeping."""
        root = config.store.root_dir
        self.schedule = ScheduleService(
            self,
            root / "config" / "delayOffset.json",
            config.flush_delay_offset_interval_ms / 1000,
        )
        self.transactions = TransactionService(self)
        self.timers = TimerService(self, root)
        self.pop = PopService(self)
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None
        self.ha_port = 0
        self.slave_sync: SlaveSync | None = None
        self.slave_sync_period_s = SYNC_PERIOD_S
        self.consumers = ConsumerManager(lambda conn, req: conn.invoke_oneway(req))
        self.producers = ProducerManager()
        self.locks = QueueLocks(config.rebalance_lock_max_live_ms)
        self.stats = BrokerStats(config.broker_cluster_name)
        self.boot_timestamp_ms = int(time.time() * 1000)
        self.store_host: Host = host_of("127.0.0.1", 0)
        self.housekeeping = [
            Periodic(
                "broker-offsets",
                self._persist_offsets,
                config.flush_consumer_offset_interval_ms / 1000,
                failure_event="housekeeping_failed",
            ),
            Periodic(
                "broker-clients",
                self._scan_clients,
                config.client_scan_interval_ms / 1000,
                failure_event="housekeeping_failed",
            ),
            Periodic(
                "broker-stats",
                self.stats.sample,
                SAMPLE_INTERVAL_S,
                failure_event="housekeeping_failed",
            ),
        ]

    def _init_requests(self, config: BrokerConfig) -> None:
        """The processor table, its lanes and hooks (ACL), and long polling."""
        self.processors = ProcessorTable()
        # True until the broker serves: its ports may answer, its store is still loading.
        self.recovering = True
        self.acl: PlainAcl | None = None
        if config.acl_enable:
            self.acl = PlainAcl(
                config.acl_file_path or config.store.root_dir / "config" / "plain_acl.yml",
                messages=self.store,
            )
            self.processors.hooks.append(self.acl)
            self.housekeeping.append(
                Periodic(
                    "acl-reload",
                    self._reload_acl,
                    ACL_RELOAD_S,
                    failure_event="acl_reload_round_failed",
                )
            )
        self._set_slow_request_threshold()
        # 64 workers so sends waiting for a SYNC_FLUSH share flush rounds; under ASYNC_FLUSH
        # a send never suspends and one worker does all the work.
        self.send_lane = Lane(
            "send",
            workers=64,
            capacity=config.send_lane_capacity,
            max_wait_ms=config.wait_time_mills_in_send_queue,
        )
        self.pull_lane = Lane(
            "pull",
            workers=1,
            capacity=config.pull_lane_capacity,
            max_wait_ms=config.wait_time_mills_in_pull_queue,
        )
        self.pull = PullProcessor(self)
        check_s = (
            config.long_polling_check_interval_ms
            if config.long_polling_enable
            else config.short_polling_time_ms
        ) / 1000
        self.pull_hold = PullHoldService(self.pull.rerun, self.store.get_max_offset, check_s)
        self._register_processors()

    def _init_network(self, config: BrokerConfig) -> None:
        """Listeners (main, VIP, metrics), the outbound client and name-server registration."""
        self.metrics: MetricsServer | None = None
        self.metrics_port = 0
        # More families for this broker's endpoint (standalone adds its name server's).
        self.extra_collectors: list[Collector] = []
        # Every listener (main, VIP, HA, metrics) takes the one TLS mode and certificate;
        # every connection the broker opens (name servers, its master) the client context.
        self.server_ssl_context = server_ssl_context(config)
        self.client_ssl_context = client_ssl_context(config)
        if self.client_ssl_context is not None and not config.tls_client_verifies:
            log.warning(
                "tls_client_unverified",
                reason="tlsClientTrustCertPath is not set (or tlsTestModeEnable is): name "
                "servers' and the master's certificates are not checked",
            )
        self.server = RemotingServer(
            ServerConfig(
                host=config.bind_address,
                port=config.listen_port,
                idle_timeout_s=config.server_channel_max_idle_s,
                tls_mode=config.tls_server_mode,
                ssl_context=self.server_ssl_context,
                **listener_limits(config),
            ),
            self.processors,
            name="broker",
        )
        self.server.add_close_listener(self._on_close)
        self.vip_server: RemotingServer | None = None
        self.client = RemotingClient(ClientConfig(ssl_context=self.client_ssl_context))
        self.registration = Registration(
            self.client,
            config.namesrv_addrs,
            cluster=config.broker_cluster_name,
            broker_name=config.broker_name,
            broker_id=config.broker_id,
            broker_addr=lambda: self.address,
            ha_server_addr=self._ha_server_addr,
            topics=self._registered_topics,
            period_s=config.register_name_server_period_ms / 1000,
        )
        self.topics.on_change = self.registration.topic_changed
        # RocketMQ 5 clients (grpcListenPort), served by this broker's own processors.
        self.grpc = GrpcService(self)

    def _register_processors(self) -> None:
        """The processor table: each request code to its handler and lane
        (``BrokerController.registerProcessor``)."""
        self._register_message_processors()
        self._register_client_processors()
        self._register_admin_processors()
        self._register_ops_processors()

    def _register_message_processors(self) -> None:
        """Sends, pulls and pops: the lanes that carry messages."""
        table = self.processors
        send = SendProcessor(self)
        for code in (
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
        ):
            table.register(code, send.handle, self.send_lane, reject=self._store_busy)
        send_back = SendBackProcessor(self)
        table.register(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            send_back.handle,
            self.send_lane,
            reject=self._store_busy,
        )
        table.register(
            RequestCode.END_TRANSACTION,
            EndTransactionProcessor(self).handle,
            self.send_lane,
            reject=self._store_busy,
        )
        table.register(RequestCode.PULL_MESSAGE, self.pull.handle, self.pull_lane)
        self.pop_processor = PopProcessor(self)
        pop_lane = Lane("pop", workers=4, capacity=50_000)
        table.register(RequestCode.POP_MESSAGE, self.pop_processor.pop, pop_lane)
        table.register(RequestCode.ACK_MESSAGE, self.pop_processor.ack, pop_lane)
        table.register(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            self.pop_processor.change_invisible_time,
            pop_lane,
        )

    def _register_client_processors(self) -> None:
        """Heartbeats and consumer management: client tables and offsets."""
        table = self.processors
        clients = ClientProcessor(self)
        heartbeat_lane = Lane("heartbeat", workers=1, capacity=50_000)
        table.register(RequestCode.HEART_BEAT, clients.heartbeat, heartbeat_lane)
        table.register(RequestCode.UNREGISTER_CLIENT, clients.unregister, heartbeat_lane)
        table.register(RequestCode.CHECK_CLIENT_CONFIG, clients.check_client_config, heartbeat_lane)
        consumer_lane = Lane("consumer_manage", workers=1, capacity=100_000)
        table.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, clients.consumer_list, consumer_lane)
        table.register(RequestCode.QUERY_CONSUMER_OFFSET, clients.query_offset, consumer_lane)
        table.register(RequestCode.UPDATE_CONSUMER_OFFSET, clients.update_offset, consumer_lane)

    def _register_admin_processors(self) -> None:
        """Message queries and the topic, offset and group administration of mqadmin."""
        table = self.processors
        admin = AdminProcessor(self)
        self.query_lane = query_lane = Lane("query", workers=1, capacity=20_000)
        table.register(RequestCode.QUERY_MESSAGE, admin.query_message, query_lane)
        table.register(RequestCode.VIEW_MESSAGE_BY_ID, admin.view_message, query_lane)
        self.admin_lane = Lane("admin", workers=1, capacity=10_000)
        handlers: dict[RequestCode, Callable[..., object]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
            RequestCode.GET_TOPIC_NAME_LIST: admin.topic_names,
            RequestCode.GET_MAX_OFFSET: admin.max_offset,
            RequestCode.GET_MIN_OFFSET: admin.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: admin.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: admin.earliest_msg_storetime,
            RequestCode.GET_TOPIC_STATS_INFO: admin.topic_stats,
            RequestCode.GET_CONSUME_STATS: admin.consume_stats,
            RequestCode.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            RequestCode.GET_ALL_CONSUMER_OFFSET: admin.all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: admin.all_delay_offset,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_subscription_groups,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
            RequestCode.LOCK_BATCH_MQ: admin.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: admin.unlock_batch,
            RequestCode.QUERY_CONSUME_QUEUE: admin.query_consume_queue,
        }
        for code, handler in handlers.items():
            table.register(code, handler, self.admin_lane)  # type: ignore[arg-type]

    def _register_ops_processors(self) -> None:
        """Operations: connections, configuration, offset resets, ACL, disk cleanup and the
        statistics."""
        ops = OpsProcessor(self)
        stats = StatsProcessor(self)
        handlers: dict[RequestCode, Callable[..., object]] = {
            RequestCode.GET_CONSUMER_CONNECTION_LIST: ops.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: ops.producer_connections,
            RequestCode.GET_ALL_PRODUCER_INFO: ops.all_producer_info,
            RequestCode.GET_BROKER_CONFIG: ops.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: ops.update_broker_config,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ops.reset_offset,
            RequestCode.CLONE_GROUP_OFFSET: ops.clone_group_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: ops.consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: ops.consume_message_directly,
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ops.update_acl_config,
            RequestCode.DELETE_ACL_CONFIG: ops.delete_acl_config,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ops.update_global_white_addrs,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ops.acl_info,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ops.acl_config,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: ops.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: ops.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: ops.delete_expired_commit_log,
            RequestCode.VIEW_BROKER_STATS_DATA: stats.view_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: stats.broker_consume_stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: stats.consumed_by,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: stats.system_topics,
        }
        for code, handler in handlers.items():
            self.processors.register(code, handler, self.admin_lane)  # type: ignore[arg-type]

    def apply_config(self, changes: Mapping[str, str], live: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: validate ``changes`` as at start and apply them now.

        Raises:
            ConfigError: an unknown key, a bad value, or a key fixed at start.
        """
        config = updated_config(self.config, changes, live)
        self.config = config
        self.topics.auto_create_topic_enable = config.auto_create_topic_enable
        self.subscription_groups.auto_create = config.auto_create_subscription_group
        self.transactions.check_max = config.transaction_check_max
        self._set_slow_request_threshold()
        if config.auto_create_topic_enable and self.topics.get(AUTO_CREATE_TOPIC_KEY_TOPIC) is None:
            n = config.default_topic_queue_nums
            self.topics.update(
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | PERM_READ | PERM_WRITE
                )
            )
        # A changed permission reaches producers through the routes; the name server takes
        # a registration's topics only when their data version moved.
        self.topics.data_version.bump(int(time.time() * 1000))
        self.registration.request()

    def _set_slow_request_threshold(self) -> None:
        ms = self.config.slow_request_threshold_ms
        self.processors.slow_request_s = ms / 1000 if ms > 0 else None

    def _registered_topics(self) -> TopicConfigWrapper:
        """The topics as registered: with the broker's read or write permission off, every
        topic's is too (``registerBrokerAll``), so routes steer clients away."""
        wrapper = self.topics.wrapper()
        perm = self.config.broker_permission
        if perm & PERM_READ and perm & PERM_WRITE:
            return wrapper
        table = {
            name: dataclasses.replace(tc, perm=tc.perm & perm)
            for name, tc in wrapper.topic_config_table.items()
        }
        return TopicConfigWrapper(table, wrapper.data_version)

    # ------------------------------------------------------------------------ facts

    @property
    def address(self) -> str:
        """The address clients dial: brokerIP1 if set, else the bind address."""
        return f"{self.config.broker_ip1 or self.config.bind_address}:{self.server.port}"

    def _ha_server_addr(self) -> str:
        port = self.ha_port or self.config.ha_listen_port or self.server.port + 1
        config = self.config
        return f"{config.broker_ip2 or config.broker_ip1 or config.bind_address}:{port}"

    def _master_admin_address(self) -> str | None:
        """Where this slave fetches its master's tables: the master's remoting port on the
        host its HA address names. That host is brokerIP2 when the master sets one (in a
        container network, the name its peers know it by while clients dial brokerIP1);
        otherwise it is brokerIP1, the master's registered address, as in RocketMQ."""
        master = self.registration.master_addr
        ha = self._master_ha_address()
        if not master or not ha:
            return master
        return f"{ha.rpartition(':')[0]}:{master.rpartition(':')[2]}"

    def _master_ha_address(self) -> str | None:
        """Where this slave replicates from: haMasterAddress, else what the name server
        said when this slave registered."""
        return self.config.ha_master_address or self.registration.master_ha_addr

    async def _start_replication(self) -> None:
        """A master serves its slaves on haListenPort (listenPort + 1 by default; a free
        port when the listen port itself was chosen freely); a slave follows its master."""
        config = self.config
        if config.broker_role is BrokerRole.SLAVE:
            self.ha_client = HAClient(
                self.store, self._master_ha_address, ssl_context=self.client_ssl_context
            )
            self.slave_sync = SlaveSync(self, self._master_admin_address, self.slave_sync_period_s)
            return
        ha = HAService(self.store, fallbehind_max_bytes=config.ha_slave_fallbehind_max)
        port = config.ha_listen_port or (self.server.port + 1 if config.listen_port else 0)
        try:
            self.ha_port = await ha.start(config.bind_address, port, listen=self._listen_ha)
        except OSError as exc:
            if config.ha_listen_port:  # a port the operator chose: say so rather than move
                raise bind_error("haListenPort", config.bind_address, port, exc) from None
            log.warning("ha_port_taken", port=port, error=str(exc))
            self.ha_port = await ha.start(config.bind_address, 0, listen=self._listen_ha)
        self.store.append_listeners.append(ha.notify_appended)
        if config.broker_role is BrokerRole.SYNC_MASTER:
            self.store.sync_replication = ha
        self.ha = ha

    async def _listen_ha(self, handler: StreamHandler, host: str, port: int) -> Listener:
        """The HA port's listener, under the broker's TLS mode and certificate."""
        listener = stream_listener(
            handler,
            host,
            port,
            tls_mode=self.config.tls_server_mode,
            ssl_context=self.server_ssl_context,
            name="ha",
        )
        await listener.start()
        return listener

    def listening(self) -> dict[str, int]:
        """Every port this broker listens on, by listener: ``main``, ``vip``, ``ha``,
        ``metrics``, ``grpc``, ``grpc-inner`` (those it opened). Each obeys
        ``tlsServerMode`` but ``grpc-inner``, the loopback port behind the gRPC relay."""
        ports = {"main": self.server.port}
        if self.vip_server is not None:
            ports["vip"] = self.vip_server.port
        if self.ha is not None:
            ports["ha"] = self.ha.port
        if self.metrics is not None:
            ports["metrics"] = self.metrics.port
        if self.grpc.port:
            ports["grpc"] = self.grpc.port
        if self.grpc.server is not None and self.grpc.server.inner_port:
            # gRPC's own port behind the TLS relay: loopback only, plaintext (what comes in
            # on it went through the public port's TLS mode already)
            ports["grpc-inner"] = self.grpc.server.inner_port
        return ports

    async def _reload_acl(self) -> None:
        if self.acl is not None:
            self.acl.reload_if_changed()

    async def _start_metrics(self) -> None:
        """The Prometheus endpoint (``metricsPort``). One that cannot bind stops the start
        (an OSError naming the key), as a taken listenPort does: skipped, it would leave the
        operator blind without a word on stdout."""
        if not self.config.metrics_enable:
            return
        exporter = ExporterCollector(self)
        registry = registry_of(BrokerCollector(self), exporter, *self.extra_collectors)
        server = MetricsServer(registry, before_scrape=[exporter.refresh])
        self.metrics_port = await server.start(
            self.config.bind_address,
            self.config.metrics_port,
            tls_mode=self.config.tls_server_mode,
            ssl_context=self.server_ssl_context,
        )
        self.metrics = server

    def _store_busy(self) -> bool:
        return self.store.dispatch_behind_bytes > DISPATCH_BEHIND_BUSY_BYTES

    def earliest_message_time(self) -> int:
        cl = self.store.commit_log
        info = cl.record_info(cl.min_offset) if cl.max_offset > cl.min_offset else None
        return info.store_timestamp if info is not None else -1

    # -------------------------------------------------------------------- lifecycle

    def _on_close(self, conn: Connection) -> None:
        self.consumers.connection_closed(conn)
        self.producers.connection_closed(conn)
        self.pull_hold.drop_connection(conn)

    def _stages(self) -> list[Stage]:
        """The broker's start order; shutdown runs it backwards.

        Read backwards it is uvicorn's shutdown: stop the housekeeping, the slave's
        replication and registration (clients move to other brokers), stop accepting and
        drain the connections (``_drain``), stop the services that write messages (so
        nothing is written after them), close the other listeners, persist the tables and
        flush the store last.
        """
        master = self.config.broker_role is not BrokerRole.SLAVE
        return [
            Stage("acl", self._load_acl),
            # The ports and the metrics come first and answer while the store recovers (a
            # large one takes a while): "recovering", with how far it got, not a refused
            # connection. A taken port fails the start before the recovery, not after.
            Stage("listen", self._bind, self._unbind),
            Stage("metrics", self._start_metrics, self._stop_metrics),
            Stage("recovering", self._serve_recovering),
            Stage("store", self._start_store, self.store.shutdown),
            Stage("tables", self._load_tables, self._persist_tables),
            Stage("client", self.client.start, self.client.shutdown),
            Stage("replication", self._start_replication, self._stop_replication),
            Stage("pull-hold", self.pull_hold.start),
            *(
                [
                    Stage("schedule", self.schedule.start, self.schedule.shutdown),
                    Stage("transactions", self.transactions.start, self.transactions.shutdown),
                    Stage("timers", self.timers.start, self.timers.shutdown),
                    Stage("pop", self.pop.start, self.pop.shutdown),
                ]
                if master
                else []
            ),
            Stage("serve", self._serve, self._drain),
            # After the processors serve (it calls them), before registration (routes name it).
            Stage("grpc", self.grpc.start, self.grpc.stop),
            # Registered once serving, so a route never names a port that refuses.
            Stage("registration", self.registration.start, self.registration.shutdown),
            # A slave follows the master its registration named.
            Stage("followers", self._start_followers, self._stop_followers),
            periodic_stage("housekeeping", self.housekeeping),
        ]

    async def start(self) -> None:
        """Start every stage in order; a stage that fails stops those started and raises.

        Raises:
            OSError: a port the configuration names cannot be bound (the key is named).
            ConfigError, StoreError: the ACL file or the store cannot be loaded.
        """
        if self._started:
            return
        self._started = True
        await self.lifecycle.start()
        log.info(
            "broker_started",
            address=self.address,
            broker_name=self.config.broker_name,
            cluster=self.config.broker_cluster_name,
            namesrv=self.config.namesrv_addr,
            store=str(self.config.store.root_dir),
            # which codec runs: "compiled" speedups or pure Python (and why)
            speedups=codec.SPEEDUPS,
        )

    async def _load_acl(self) -> None:
        if self.acl is not None:
            self.acl.load()  # a missing or broken ACL file stops the start, named

    async def _start_store(self) -> None:
        # On a thread, so the loop answers pings and scrapes meanwhile. A stop that comes
        # during the load waits for it: a store is never shut down half-loaded.
        # to_thread carries the log context (the broker's name on every line) over.
        loading = asyncio.ensure_future(asyncio.to_thread(self.store.load))
        try:
            await asyncio.shield(loading)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await loading
            raise
        try:
            await self.store.start()
        except BaseException:
            await self.store.shutdown()
            raise

    async def _load_tables(self) -> None:
        self.topics.load()
        self.offsets.load()
        self.subscription_groups.load()
        self.schedule.load()
        self.timers.load()
        self.topics.persist()
        self.store.add_arrival_listener(self.pull_hold.on_arrival)
        self.store.add_arrival_listener(self.pop.on_arrival)
        self.pop.load()

    async def _persist_tables(self) -> None:
        await self.topics.file.flush()
        await self.subscription_groups.file.flush()
        self.offsets.persist()
        self.subscription_groups.persist()
        self.topics.persist()

    async def _bind(self) -> None:
        """Take the main and VIP ports without serving yet: the port is known (the store
        host every message carries names it) before the services that write messages
        start, and no request arrives before they have."""
        try:
            await self.server.bind()
        except OSError as exc:
            await self.server.shutdown()
            raise bind_error(
                "listenPort", self.config.bind_address, self.config.listen_port, exc
            ) from None
        await self._bind_vip_server()
        host = self.config.broker_ip1 or self.config.bind_address
        self.store_host = host_of(host, self.server.port)

    async def _unbind(self) -> None:
        # Drained already on a normal stop (``_drain``); this releases the ports when a
        # start fails between binding and serving. Both shutdowns are idempotent.
        if self.vip_server is not None:
            await self.vip_server.shutdown()
        await self.server.shutdown()

    async def _serve_recovering(self) -> None:
        """Accept connections before the store is loaded; every request is answered
        SYSTEM_BUSY ``[RECOVERING]…`` until ``_serve`` (nothing is registered with the name
        servers yet, so only a ping or an operator's tool comes)."""
        self.recovering = True
        self.processors.holding = self._recovering_remark
        await self.server.serve()
        if self.vip_server is not None:
            await self.vip_server.serve()

    def _recovering_remark(self) -> str:
        progress = self.store.recovery
        where = progress.describe() if progress is not None else "loading its tables"
        return f"{RECOVERING_REMARK}broker {self.config.broker_name} is recovering: {where}"

    async def _serve(self) -> None:
        """Serve every request from now on (the ports accept since ``_serve_recovering``)."""
        self.processors.holding = None
        self.recovering = False

    async def _drain(self) -> None:
        """Stop accepting on both ports, answer the parked pulls and pops (their clients
        pull again elsewhere), let the lanes finish what they hold, then close the
        connections: every request taken is answered before a service it needs stops."""
        self.server.stop_accepting()
        if self.vip_server is not None:
            self.vip_server.stop_accepting()
        await self.pull_hold.shutdown()
        await self.pop_processor.shutdown()
        await self.server.shutdown()
        if self.vip_server is not None:
            await self.vip_server.shutdown()

    async def _stop_metrics(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()

    async def _stop_replication(self) -> None:
        if self.ha is not None:
            await self.ha.stop()
            self.store.sync_replication = None
            self.ha = None

    async def _start_followers(self) -> None:
        if self.ha_client is not None:
            self.ha_client.start()  # after registering: the name server names the master
        if self.slave_sync is not None:
            self.slave_sync.start()

    async def _stop_followers(self) -> None:
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.slave_sync is not None:
            await self.slave_sync.stop()

    async def _bind_vip_server(self) -> None:
        """The "VIP channel" on listenPort - 2, serving the same processors.

        Java clients up to 4.4.0 send most requests there by default
        (``com.rocketmq.sendMessageWithVIPChannel``). A port that cannot be bound is logged
        and skipped: every newer client uses the main port.
        """
        port = self.server.port - 2
        if port <= 0:
            return
        # The main port's settings, TLS mode and certificate included: a listener built
        # without them took plaintext requests while the main port enforced TLS.
        vip = RemotingServer(
            dataclasses.replace(self.server.config, port=port),
            self.processors,
            name="broker-vip",
            budget=self.server.budget,  # one broker: its connection and frame limits
        )
        vip.add_close_listener(self._on_close)
        try:
            await vip.bind()
        except OSError as exc:
            # Not vip.shutdown(): that would drain the lanes the main server shares.
            log.warning("vip_port_unavailable", port=port, error=exc.strerror or str(exc))
            return
        self.vip_server = vip

    async def _persist_offsets(self) -> None:
        doc = self.offsets.snapshot()
        if doc is not None and not await asyncio.to_thread(try_write_json, self.offsets.path, doc):
            self.offsets.mark_dirty()  # a full disk, say: written again next time

    def _committed_offsets(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        """Every committed offset as (topic, group, per queue): what retention needs to
        name the groups a forced deletion took unconsumed messages from."""
        for key, per_queue in self.offsets.table.items():
            topic, _, group = key.partition("@")
            if group:
                yield topic, group, per_queue

    def _scan_clients(self) -> None:
        now_ms = int(time.time() * 1000)
        expired = self.config.channel_expired_ms
        self.grpc.clients.expire(now_ms, expired)
        for conn in {
            *self.consumers.expired(now_ms, expired),
            *self.producers.expired(now_ms, expired),
        }:
            log.warning("client_channel_expired", peer=conn.peer)
            self.consumers.connection_closed(conn, reason="expired")
            self.producers.connection_closed(conn, reason="expired")
            conn.close()

    async def shutdown(self) -> None:
        """Stop the started stages in reverse order (see ``_stages``)."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        await self.lifecycle.stop()
        log.info("broker_stopped", address=self.address)

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
