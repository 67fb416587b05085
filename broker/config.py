"""Broker and name server settings, and the loader for broker.conf / TOML files.

RocketMQ counterpart: ``BrokerConfig``, ``NettyServerConfig``, ``NamesrvConfig`` and
``MixAll.properties2Object``. Keys are RocketMQ's camelCase broker.conf names; one alias
table maps each onto a field of ``BrokerConfig``, its ``StoreConfig`` or ``NamesrvConfig``.
Precedence: defaults < file < ``--set key=value`` < explicit CLI flags. An unknown key or a
value that does not parse is a ``ConfigError`` naming the key, raised before anything starts.

Every key Apache RocketMQ 4.9 and 5.x read (``broker.rocketmq_keys``) is accepted, so their
own broker.conf and namesrv.conf start: the ones that mean something here are applied, some
under another spelling (``BROKER_SYNONYMS``), and the rest are named once, at start, in one
``config_keys_without_effect`` log line.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog

from broker import rocketmq_keys
from broker.topics import check_topic_name
from remoting.connection import DEFAULT_WRITE_BUFFER_HIGH_BYTES
from remoting.errors import ConfigError
from remoting.frame import MAX_HEADER_BYTES
from remoting.server import ServerConfig
from remoting.tls import TlsMode, client_context, server_context
from store.config import StoreConfig

log = structlog.get_logger(__name__)

# The listener limits' defaults are remoting's (ServerConfig explains each).
_LISTENER = ServerConfig()


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The settings of the listeners a name server and a broker open alike."""

    # What connections may hold: maxConnections, maxHeaderBytes, partialFrameBudgetBytes,
    # frameReadTimeoutMillis, maxInFlightRequestsPerConnection (ours), and Apache's
    # writeBufferHighWaterMark (0, Apache's default, means ours) and serverSocketBacklog.
    max_connections: int = _LISTENER.max_connections
    max_header_bytes: int = _LISTENER.max_header_bytes
    partial_frame_budget_bytes: int = _LISTENER.partial_frame_budget_bytes
    frame_read_timeout_ms: int = int(_LISTENER.frame_read_timeout_s * 1000)
    max_in_flight_per_connection: int = _LISTENER.max_in_flight_per_connection
    write_buffer_high_water_mark: int = _LISTENER.write_buffer_high_bytes
    server_socket_backlog: int = _LISTENER.backlog
    tls_server_mode: TlsMode = TlsMode.DISABLED  # tlsServerMode (tls.server.mode)
    tls_server_cert_path: Path | None = None  # tlsServerCertPath: PEM chain
    tls_server_key_path: Path | None = None  # tlsServerKeyPath: PEM key
    tls_server_trust_cert_path: Path | None = None  # tlsServerTrustCertPath: client CAs


@dataclass(frozen=True, slots=True, kw_only=True)
class NamesrvConfig(ServerSettings):
    """Name server settings."""

    bind_address: str = "127.0.0.1"
    listen_port: int = 9876
    server_channel_max_idle_s: int = 120
    kv_config_path: Path | None = None  # kvConfigPath; None keeps KV config in memory only
    order_message_enable: bool = False  # orderMessageEnable: add orderTopicConf to routes
    broker_channel_expired_ms: int = 120_000  # a broker silent this long is removed
    scan_not_active_broker_interval_ms: int = 10_000  # scanNotActiveBrokerInterval
    metrics_enable: bool = True  # metricsEnable: the Prometheus endpoint
    # metricsPort; 0 picks a free one. Not the broker's 5557: RocketMQ's quick start runs a
    # name server and a broker on one host, and a port that cannot be bound stops the start.
    metrics_port: int = 5558

    def __post_init__(self) -> None:
        _check_port("listenPort", self.listen_port)
        _check_port("metricsPort", self.metrics_port)
        _check_listener_limits(self)
        _check_tls(self.tls_server_mode, self.tls_server_cert_path, self.tls_server_key_path)
        if self.broker_channel_expired_ms <= 0 or self.scan_not_active_broker_interval_ms <= 0:
            raise ValueError("brokerChannelExpiredTime and scanNotActiveBrokerInterval must be > 0")

    @property
    def address(self) -> str:
        return f"{self.bind_address}:{self.listen_port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig(ServerSettings):
    """Broker settings; ``store`` holds the message store's."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    namesrv_addr: str | None = None
    bind_address: str = "127.0.0.1"
    listen_port: int = 10911
    ha_listen_port: int = 0  # 0: listenPort + 1, as RocketMQ derives it
    ha_master_address: str | None = None
    broker_ip1: str | None = None  # advertised address; None: the bind address
    broker_ip2: str | None = None  # the HA address slaves dial; None: brokerIP1
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    long_polling_enable: bool = True
    enable_property_filter: bool = False
    server_channel_max_idle_s: int = 120
    region_id: str = "DefaultRegion"  # regionId: MSG_REGION in send replies
    trace_on: bool = True  # traceOn: TRACE_ON in send replies
    trace_topic_enable: bool = False  # traceTopicEnable: make msgTraceTopicName at start
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"  # msgTraceTopicName
    register_name_server_period_ms: int = 30_000  # registerNameServerPeriod (10 s..60 s)
    flush_consumer_offset_interval_ms: int = 5_000  # flushConsumerOffsetInterval
    flush_delay_offset_interval_ms: int = 10_000  # flushDelayOffsetInterval
    channel_expired_ms: int = 120_000  # a client without heartbeat this long is dropped
    client_scan_interval_ms: int = 10_000  # how often idle client channels are looked for
    long_polling_check_interval_ms: int = 5_000  # re-check of held pulls (RocketMQ: 5 s)
    short_polling_time_ms: int = 1_000  # shortPollingTimeMills
    rebalance_lock_max_live_ms: int = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
    send_lane_capacity: int = 10_000  # sendThreadPoolQueueCapacity
    pull_lane_capacity: int = 100_000  # pullThreadPoolQueueCapacity
    wait_time_mills_in_send_queue: int = 200  # waitTimeMillsInSendQueue
    wait_time_mills_in_pull_queue: int = 5_000  # waitTimeMillsInPullQueue
    reject_transaction_message: bool = False  # rejectTransactionMessage
    transaction_check_interval_ms: int = 60_000  # transactionCheckInterval
    transaction_timeout_ms: int = 6_000  # transactionTimeOut: a half message checked after
    transaction_check_max: int = 15  # transactionCheckMax: then dropped as rolled back
    timer_wheel_enable: bool = True  # timerWheelEnable (RocketMQ 5)
    timer_precision_ms: int = 1_000  # timerPrecisionMs: the wheel's slot
    timer_roll_window_slots: int = 2 * 24 * 3600  # timerRollWindowSlots: the wheel's size
    timer_max_delay_sec: int = 3 * 24 * 3600  # timerMaxDelaySec
    timer_flush_interval_ms: int = 1_000  # timerFlushIntervalMs
    mapped_file_size_timer_log: int = 100 << 20  # mappedFileSizeTimerLog
    revive_queue_num: int = 8  # reviveQueueNum: queues of the pop revive topic
    # initPopOffsetByCheckMsgInMem: a new pop group starts at a queue's first message while
    # it is still in memory (else at its last one), as 5.x does
    init_pop_offset_by_check_msg_in_mem: bool = True
    ha_slave_fallbehind_max: int = 256 << 20  # haSlaveFallbehindMax (SYNC_MASTER)
    slave_read_enable: bool = False  # slaveReadEnable: point slow consumers at a slave
    offset_check_in_slave: bool = False  # offsetCheckInSlave: may a slave move offsets
    slow_request_threshold_ms: int = 1_000  # log a request slower than this; 0: never
    acl_enable: bool = False  # aclEnable: check every request against plain_acl.yml
    acl_file_path: Path | None = None  # aclFilePath; None: <storePathRootDir>/config/plain_acl.yml
    metrics_enable: bool = True  # metricsEnable: the Prometheus endpoint
    metrics_port: int = 5557  # metricsPort (RocketMQ 5's exporter port); 0 picks a free one
    # RocketMQ 5 clients (broker/proxy): the proxy's gRPC port, served in this process as
    # the proxy's "local" mode does. grpcListenPort (grpcServerPort): 0 picks a free one;
    # unset, the proxy's 8081, or a free port when listenPort is 0 (see grpc_port).
    grpc_enable: bool = True  # enableGrpc
    grpc_listen_port: int | None = None
    # The bounds a ReceiveMessage's long polling is clamped to (the proxy's
    # grpcClientConsumerMinLongPollingTimeoutMillis / ...MaxLongPollingTimeoutMillis).
    grpc_min_long_polling_timeout_ms: int = 5_000
    grpc_max_long_polling_timeout_ms: int = 20_000
    # The shortest invisible time a ReceiveMessage may ask (minInvisibleTimeMillsForRecv).
    grpc_min_invisible_ms: int = 10_000
    # The broker as a TLS client: registering with name servers, and a slave's sync and HA
    # stream from its master (RocketMQ's NettyClientConfig.useTLS and TlsSystemConfig).
    tls_enable: bool | None = None  # tlsEnable (tls.enable, useTLS); None: when enforcing
    tls_test_mode_enable: bool = False  # tlsTestModeEnable: check no server certificate
    tls_client_trust_cert_path: Path | None = None  # tlsClientTrustCertPath: server CAs
    tls_client_cert_path: Path | None = None  # tlsClientCertPath: for servers that ask
    tls_client_key_path: Path | None = None  # tlsClientKeyPath
    # The web console (client/dashboard), which `aerolite standalone` runs beside itself.
    dashboard_enable: bool = True  # enableDashboard
    dashboard_port: int = 8080  # dashboardPort; 0 picks a free one
    dashboard_users: str = ""  # dashboardUsers: name:password;… (plain or scrypt$ hashes)
    dashboard_users_file: Path | None = None  # dashboardUsersFile: name=hash lines
    # dashboardAccessKey / dashboardSecretKey: what the console signs its admin requests
    # with when aclEnable=true (an admin account of plain_acl.yml)
    dashboard_access_key: str = ""
    dashboard_secret_key: str = ""
    store: StoreConfig = field(default_factory=StoreConfig)

    def __post_init__(self) -> None:
        self._check_ports()
        _check_listener_limits(self)
        if bool(self.dashboard_access_key) != bool(self.dashboard_secret_key):
            raise ValueError("dashboardAccessKey and dashboardSecretKey go together")
        _check_tls(self.tls_server_mode, self.tls_server_cert_path, self.tls_server_key_path)
        if self.tls_client_key_path is not None and self.tls_client_cert_path is None:
            raise ValueError("tlsClientKeyPath needs tlsClientCertPath")
        if self.broker_id < 0:
            raise ValueError("brokerId must be >= 0")
        if (self.broker_role is BrokerRole.SLAVE) != (self.broker_id > 0):
            raise ValueError("brokerRole SLAVE goes with brokerId > 0, a master with brokerId 0")
        refused = check_topic_name(self.msg_trace_topic_name)
        if refused is not None:
            raise ValueError(f"msgTraceTopicName: {refused}")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ValueError("defaultTopicQueueNums must be within 1..1024")
        if not 10_000 <= self.register_name_server_period_ms <= 60_000:
            raise ValueError("registerNameServerPeriod must be within 10000..60000 ms")
        for name in (
            "flush_consumer_offset_interval_ms",
            "flush_delay_offset_interval_ms",
            "channel_expired_ms",
            "client_scan_interval_ms",
            "long_polling_check_interval_ms",
            "short_polling_time_ms",
            "rebalance_lock_max_live_ms",
            "send_lane_capacity",
            "pull_lane_capacity",
            "wait_time_mills_in_send_queue",
            "wait_time_mills_in_pull_queue",
            "transaction_check_interval_ms",
            "transaction_timeout_ms",
            "transaction_check_max",
            "timer_precision_ms",
            "timer_max_delay_sec",
            "timer_flush_interval_ms",
            "mapped_file_size_timer_log",
            "revive_queue_num",
            "grpc_min_invisible_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.slow_request_threshold_ms < 0:
            raise ValueError("slowRequestThresholdMs must be >= 0 (0 turns the log off)")
        if not 0 < self.grpc_min_long_polling_timeout_ms <= self.grpc_max_long_polling_timeout_ms:
            raise ValueError(
                "grpcClientConsumerMinLongPollingTimeoutMillis must be positive and at most "
                "grpcClientConsumerMaxLongPollingTimeoutMillis"
            )
        if self.timer_roll_window_slots < 2:
            raise ValueError("timerRollWindowSlots must be at least 2")
        if self.broker_permission & ~0xF:
            raise ValueError("brokerPermission takes the bits 1, 2, 4 and 8 only")
        if self.namesrv_addr is not None:
            for addr in self.namesrv_addr.split(";"):
                host, _, port = addr.strip().rpartition(":")
                if not host or not port.isdigit():
                    raise ValueError(f"namesrvAddr entry {addr!r} is not host:port")

    def _check_ports(self) -> None:
        _check_port("listenPort", self.listen_port)
        _check_port("haListenPort", self.ha_listen_port)
        _check_port("metricsPort", self.metrics_port)
        if self.grpc_listen_port is not None:
            _check_port("grpcListenPort", self.grpc_listen_port)
        _check_port("dashboardPort", self.dashboard_port)

    @property
    def grpc_port(self) -> int:
        """The port RocketMQ 5 clients are served on: grpcListenPort if set, else the
        proxy's 8081, or a free one when listenPort is 0 (a broker started on free ports,
        as tests and benchmarks start several, would otherwise fight over 8081)."""
        if self.grpc_listen_port is not None:
            return self.grpc_listen_port
        return DEFAULT_GRPC_PORT if self.listen_port else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def tls_client_verifies(self) -> bool:
        """Whether the broker checks the certificates of the servers it dials: with a trust
        path, unless in test mode (RocketMQ checks nothing unless told to)."""
        return self.tls_client_trust_cert_path is not None and not self.tls_test_mode_enable

    @property
    def tls_client_enabled(self) -> bool:
        """Whether the broker dials name servers and its master with TLS: ``tlsEnable``,
        else whether its own port enforces TLS (RocketMQ's default for ``useTLS``)."""
        if self.tls_enable is not None:
            return self.tls_enable
        return self.tls_server_mode is TlsMode.ENFORCING


def _check_listener_limits(config: BrokerConfig | NamesrvConfig) -> None:
    for key, value in (
        ("maxConnections", config.max_connections),
        ("partialFrameBudgetBytes", config.partial_frame_budget_bytes),
        ("frameReadTimeoutMillis", config.frame_read_timeout_ms),
        ("maxInFlightRequestsPerConnection", config.max_in_flight_per_connection),
        ("serverSocketBacklog", config.server_socket_backlog),
    ):
        if value < 1:
            raise ValueError(f"{key} must be positive")
    if not 1024 <= config.max_header_bytes <= MAX_HEADER_BYTES:
        raise ValueError(f"maxHeaderBytes must be within 1024..{MAX_HEADER_BYTES}")
    if config.write_buffer_high_water_mark < 0:
        raise ValueError("writeBufferHighWaterMark must be >= 0 (0: the default)")


class ListenerLimits(typing.TypedDict):
    """Keyword arguments of ``ServerConfig``, from ``listener_limits``."""

    max_connections: int
    max_header_bytes: int
    partial_frame_budget_bytes: int
    frame_read_timeout_s: float
    max_in_flight_per_connection: int
    write_buffer_high_bytes: int
    backlog: int


def listener_limits(config: BrokerConfig | NamesrvConfig) -> ListenerLimits:
    """The ``ServerConfig`` settings that bound what connections may hold."""
    return ListenerLimits(
        max_connections=config.max_connections,
        max_header_bytes=config.max_header_bytes,
        partial_frame_budget_bytes=config.partial_frame_budget_bytes,
        frame_read_timeout_s=config.frame_read_timeout_ms / 1000,
        max_in_flight_per_connection=config.max_in_flight_per_connection,
        write_buffer_high_bytes=config.write_buffer_high_water_mark
        or DEFAULT_WRITE_BUFFER_HIGH_BYTES,
        backlog=config.server_socket_backlog,
    )


def _check_tls(mode: TlsMode, cert: Path | None, key: Path | None) -> None:
    if mode is not TlsMode.DISABLED and (cert is None or key is None):
        raise ValueError(f"tlsServerMode={mode} needs tlsServerCertPath and tlsServerKeyPath")


def server_ssl_context(
    config: BrokerConfig | NamesrvConfig,
) -> ssl.SSLContext | None:
    """The listener's TLS context, or None when TLS is off.

    Raises:
        ConfigError: a certificate or key that cannot be read or does not match.
    """
    if config.tls_server_mode is TlsMode.DISABLED:
        return None
    assert config.tls_server_cert_path is not None and config.tls_server_key_path is not None
    try:
        return server_context(
            config.tls_server_cert_path,
            config.tls_server_key_path,
            config.tls_server_trust_cert_path,
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tlsServerCertPath/tlsServerKeyPath: cannot load: {exc}") from None


def client_ssl_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context the broker dials name servers and its master with, or None for plain
    TCP. With ``tlsClientTrustCertPath`` (and not ``tlsTestModeEnable``) it checks that the
    server's certificate chains to those CAs and names the address dialled; without, it
    encrypts and checks nothing, as RocketMQ's default test mode does.

    Raises:
        ConfigError: a trust, certificate or key file that cannot be read.
    """
    if not config.tls_client_enabled:
        return None
    try:
        return client_context(
            config.tls_client_trust_cert_path,
            verify=config.tls_client_verifies,
            cert_path=config.tls_client_cert_path,
            key_path=config.tls_client_key_path,
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"tlsClientTrustCertPath/tlsClientCertPath/tlsClientKeyPath: cannot load: {exc}"
        ) from None


DEFAULT_GRPC_PORT = 8081  # the proxy's grpcServerPort


def _check_port(key: str, port: int) -> None:
    if not 0 <= port <= 65535:
        raise ValueError(f"{key} {port} is not within 0..65535")


# camelCase key → (section, field). Section "" is the top-level config, "store" its store.
# ServerSettings' listener limits, the same keys for a broker and a name server.
_LISTENER_KEYS: dict[str, tuple[str, str]] = {
    "maxConnections": ("", "max_connections"),
    "maxHeaderBytes": ("", "max_header_bytes"),
    "partialFrameBudgetBytes": ("", "partial_frame_budget_bytes"),
    "frameReadTimeoutMillis": ("", "frame_read_timeout_ms"),
    "maxInFlightRequestsPerConnection": ("", "max_in_flight_per_connection"),
    "writeBufferHighWaterMark": ("", "write_buffer_high_water_mark"),
    "serverSocketBacklog": ("", "server_socket_backlog"),
}

BROKER_KEYS: dict[str, tuple[str, str]] = {
    "brokerClusterName": ("", "broker_cluster_name"),
    "brokerName": ("", "broker_name"),
    "brokerId": ("", "broker_id"),
    "brokerRole": ("", "broker_role"),
    "namesrvAddr": ("", "namesrv_addr"),
    "bindAddress": ("", "bind_address"),
    "listenPort": ("", "listen_port"),
    "haListenPort": ("", "ha_listen_port"),
    "haMasterAddress": ("", "ha_master_address"),
    "brokerIP1": ("", "broker_ip1"),
    "brokerIP2": ("", "broker_ip2"),
    "brokerPermission": ("", "broker_permission"),
    "autoCreateTopicEnable": ("", "auto_create_topic_enable"),
    "autoCreateSubscriptionGroup": ("", "auto_create_subscription_group"),
    "defaultTopicQueueNums": ("", "default_topic_queue_nums"),
    "longPollingEnable": ("", "long_polling_enable"),
    "enablePropertyFilter": ("", "enable_property_filter"),
    "serverChannelMaxIdleTimeSeconds": ("", "server_channel_max_idle_s"),
    "regionId": ("", "region_id"),
    "traceOn": ("", "trace_on"),
    "traceTopicEnable": ("", "trace_topic_enable"),
    "msgTraceTopicName": ("", "msg_trace_topic_name"),
    "registerNameServerPeriod": ("", "register_name_server_period_ms"),
    "flushConsumerOffsetInterval": ("", "flush_consumer_offset_interval_ms"),
    "flushDelayOffsetInterval": ("", "flush_delay_offset_interval_ms"),
    "channelExpiredTime": ("", "channel_expired_ms"),
    "clientScanInterval": ("", "client_scan_interval_ms"),
    "longPollingCheckInterval": ("", "long_polling_check_interval_ms"),
    "shortPollingTimeMills": ("", "short_polling_time_ms"),
    "rebalanceLockMaxLiveTime": ("", "rebalance_lock_max_live_ms"),
    "sendThreadPoolQueueCapacity": ("", "send_lane_capacity"),
    "pullThreadPoolQueueCapacity": ("", "pull_lane_capacity"),
    "waitTimeMillsInSendQueue": ("", "wait_time_mills_in_send_queue"),
    "waitTimeMillsInPullQueue": ("", "wait_time_mills_in_pull_queue"),
    "rejectTransactionMessage": ("", "reject_transaction_message"),
    "transactionCheckInterval": ("", "transaction_check_interval_ms"),
    "transactionTimeOut": ("", "transaction_timeout_ms"),
    "transactionCheckMax": ("", "transaction_check_max"),
    "timerWheelEnable": ("", "timer_wheel_enable"),
    "timerPrecisionMs": ("", "timer_precision_ms"),
    "timerRollWindowSlots": ("", "timer_roll_window_slots"),
    "timerMaxDelaySec": ("", "timer_max_delay_sec"),
    "timerFlushIntervalMs": ("", "timer_flush_interval_ms"),
    "mappedFileSizeTimerLog": ("", "mapped_file_size_timer_log"),
    "reviveQueueNum": ("", "revive_queue_num"),
    "initPopOffsetByCheckMsgInMem": ("", "init_pop_offset_by_check_msg_in_mem"),
    "haSlaveFallbehindMax": ("", "ha_slave_fallbehind_max"),
    "slaveReadEnable": ("", "slave_read_enable"),
    "offsetCheckInSlave": ("", "offset_check_in_slave"),
    "slowRequestThresholdMs": ("", "slow_request_threshold_ms"),
    "aclEnable": ("", "acl_enable"),
    "aclFilePath": ("", "acl_file_path"),
    "metricsEnable": ("", "metrics_enable"),
    "metricsPort": ("", "metrics_port"),
    "enableGrpc": ("", "grpc_enable"),
    "grpcListenPort": ("", "grpc_listen_port"),
    "grpcClientConsumerMinLongPollingTimeoutMillis": ("", "grpc_min_long_polling_timeout_ms"),
    "grpcClientConsumerMaxLongPollingTimeoutMillis": ("", "grpc_max_long_polling_timeout_ms"),
    "minInvisibleTimeMillsForRecv": ("", "grpc_min_invisible_ms"),
    "enableDashboard": ("", "dashboard_enable"),
    "dashboardPort": ("", "dashboard_port"),
    "dashboardUsers": ("", "dashboard_users"),
    "dashboardUsersFile": ("", "dashboard_users_file"),
    "dashboardAccessKey": ("", "dashboard_access_key"),
    "dashboardSecretKey": ("", "dashboard_secret_key"),
    **_LISTENER_KEYS,
    "tlsServerMode": ("", "tls_server_mode"),
    "tlsServerCertPath": ("", "tls_server_cert_path"),
    "tlsServerKeyPath": ("", "tls_server_key_path"),
    "tlsServerTrustCertPath": ("", "tls_server_trust_cert_path"),
    "tlsEnable": ("", "tls_enable"),
    "tlsTestModeEnable": ("", "tls_test_mode_enable"),
    "tlsClientTrustCertPath": ("", "tls_client_trust_cert_path"),
    "tlsClientCertPath": ("", "tls_client_cert_path"),
    "tlsClientKeyPath": ("", "tls_client_key_path"),
    "accessMessageInMemoryMaxRatio": ("store", "access_message_in_memory_max_ratio"),
    "storePathRootDir": ("store", "root_dir"),
    "mappedFileSizeCommitLog": ("store", "commit_log_file_bytes"),
    "mappedFileSizeConsumeQueue": ("store", "consume_queue_file_bytes"),
    "flushDiskType": ("store", "flush_disk_type"),
    "flushIntervalCommitLog": ("store", "flush_interval_ms"),
    "flushIntervalConsumeQueue": ("store", "flush_interval_consume_queue_ms"),
    "syncFlushTimeout": ("store", "sync_flush_timeout_ms"),
    "maxMessageSize": ("store", "max_message_bytes"),
    "fileReservedTime": ("store", "file_reserved_hours"),
    "deleteWhen": ("store", "delete_when"),
    "diskMaxUsedSpaceRatio": ("store", "disk_max_used_space_ratio"),
    "messageDelayLevel": ("store", "message_delay_level"),
    "flushCommitLogLeastPages": ("store", "flush_commit_log_least_pages"),
    "flushCommitLogThoroughInterval": ("store", "flush_commit_log_thorough_interval_ms"),
    "flushConsumeQueueLeastPages": ("store", "flush_consume_queue_least_pages"),
    "flushConsumeQueueThoroughInterval": ("store", "flush_consume_queue_thorough_interval_ms"),
    "checkCRCOnRecover": ("store", "check_crc_on_recover"),
    "messageIndexEnable": ("store", "message_index_enable"),
    "messageIndexSafe": ("store", "message_index_safe"),
    "maxHashSlotNum": ("store", "max_hash_slot_num"),
    "maxIndexNum": ("store", "max_index_num"),
    "cleanResourceInterval": ("store", "clean_resource_interval_ms"),
    "warmMapedFileEnable": ("store", "warm_mapped_file_enable"),
}

NAMESRV_KEYS: dict[str, tuple[str, str]] = {
    "bindAddress": ("", "bind_address"),
    "listenPort": ("", "listen_port"),
    "serverChannelMaxIdleTimeSeconds": ("", "server_channel_max_idle_s"),
    "kvConfigPath": ("", "kv_config_path"),
    "orderMessageEnable": ("", "order_message_enable"),
    "brokerChannelExpiredTime": ("", "broker_channel_expired_ms"),
    "scanNotActiveBrokerInterval": ("", "scan_not_active_broker_interval_ms"),
    "metricsEnable": ("", "metrics_enable"),
    "metricsPort": ("", "metrics_port"),
    **_LISTENER_KEYS,
    "tlsServerMode": ("", "tls_server_mode"),
    "tlsServerCertPath": ("", "tls_server_cert_path"),
    "tlsServerKeyPath": ("", "tls_server_key_path"),
    "tlsServerTrustCertPath": ("", "tls_server_trust_cert_path"),
}

# RocketMQ keys read as one of the keys above: older spellings, TlsSystemConfig's system
# properties (RocketMQ reads them from -D or tls.properties; a broker.conf that says them
# means them), and RocketMQ 5's Prometheus exporter port.
_TLS_SYNONYMS = {
    "tls.server.mode": "tlsServerMode",
    "tls.server.certPath": "tlsServerCertPath",
    "tls.server.keyPath": "tlsServerKeyPath",
    # Only with tls.server.need.client.auth=require: RocketMQ asks clients for a certificate
    # then alone, and a trust path here always does (see _client_auth).
    "tls.server.trustCertPath": "tlsServerTrustCertPath",
}
BROKER_SYNONYMS: dict[str, str] = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",  # RocketMQ <= 4.4
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
    "metricsPromExporterPort": "metricsPort",
    "grpcServerPort": "grpcListenPort",  # the proxy's rmq-proxy.json name
    **_TLS_SYNONYMS,
    # The broker's client side (a name server dials nothing): TlsSystemConfig's properties
    # and NettyClientConfig's useTLS, which a broker.conf sets in RocketMQ.
    "tls.enable": "tlsEnable",
    "useTLS": "tlsEnable",
    "tls.test.mode.enable": "tlsTestModeEnable",
    "tls.client.trustCertPath": "tlsClientTrustCertPath",
    "tls.client.certPath": "tlsClientCertPath",
    "tls.client.keyPath": "tlsClientKeyPath",
}
NAMESRV_SYNONYMS: dict[str, str] = dict(_TLS_SYNONYMS)

# RocketMQ 5's disk thresholds, in percent, for the store's ratios (0..1).
_PERCENT_KEYS: dict[str, str] = {
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
}

# Where RocketMQ lets a directory of the store live apart from storePathRootDir. The store
# here keeps it at <storePathRootDir>/<name>, so the key is accepted when it says just that
# and refused otherwise: ignoring it would leave the data where the operator does not look.
LOCATION_KEYS: dict[str, str] = {"storePathCommitLog": "commitlog"}

_CLIENT_AUTH_KEY = "tls.server.need.client.auth"
_CLIENT_AUTH_MODES = ("none", "optional", "require")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"{text!r} is not true or false")


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None


def _parser_for(tp: Any) -> Callable[[str], Any]:
    if isinstance(tp, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if tp is bool:
        return _parse_bool
    if tp is int:
        return _parse_int
    if tp is Path:
        return lambda s: Path(s.strip()).expanduser()
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        enum_type = tp

        def parse_enum(s: str) -> Any:
            try:
                return enum_type(s.strip())
            except ValueError:
                names = "|".join(m.value for m in enum_type)
                raise ValueError(f"{s!r} is not one of {names}") from None

        return parse_enum
    return lambda s: s.strip()


def read_config_file(path: Path) -> dict[str, str]:
    """Key/value pairs of a RocketMQ ``.properties`` file or a flat TOML file.

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if path.suffix == ".toml":
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        out: dict[str, str] = {}
        for key, value in doc.items():
            if isinstance(value, dict | list):
                raise ConfigError(f"config file {path}: key {key!r} must be a plain value")
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out
    pairs: dict[str, str] = {}
    comment_from = 0  # the line an open <!-- comment started on
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        # Some of RocketMQ's own sample files open with their licence as an XML comment,
        # which java.util.Properties reads as junk keys and ignores; we skip the block.
        if comment_from or line.startswith("<!--"):
            comment_from = comment_from or lineno
            if line.endswith("-->"):
                comment_from = 0
            continue
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigError(f"config file {path} line {lineno}: expected key=value: {raw!r}")
        pairs[line[:cut].strip()] = line[cut + 1 :].strip()
    if comment_from:
        raise ConfigError(
            f"config file {path} line {comment_from}: an XML comment that never ends (no -->)"
        )
    return pairs


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``--set key=value`` arguments as a dict.

    Raises:
        ConfigError: an item has no ``=``.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


_C = typing.TypeVar("_C", BrokerConfig, NamesrvConfig)


@typing.overload
def load_config(
    cls: type[BrokerConfig], path: Path | None = None, overrides: Mapping[str, str] | None = None
) -> BrokerConfig: ...


@typing.overload
def load_config(
    cls: type[NamesrvConfig], path: Path | None = None, overrides: Mapping[str, str] | None = None
) -> NamesrvConfig: ...


def load_config(
    cls: type[BrokerConfig] | type[NamesrvConfig],
    path: Path | None = None,
    overrides: Mapping[str, str] | None = None,
) -> BrokerConfig | NamesrvConfig:
    """Build a config from defaults, an optional file and overrides.

    Raises:
        ConfigError: unknown key, unparsable value or invalid combination; the message names
            the key.
    """
    broker = cls is BrokerConfig
    table = BROKER_KEYS if broker else NAMESRV_KEYS
    synonyms = BROKER_SYNONYMS if broker else NAMESRV_SYNONYMS
    # Each setting under the name it is applied by, with the spelling the user wrote (errors
    # quote that). The file first, then the overrides, so an override wins whichever
    # spelling either uses.
    values: dict[str, tuple[str, str]] = {}
    sources = [read_config_file(path)] if path is not None else []
    for source in [*sources, dict(overrides or {})]:
        values.update(_by_canonical_key(source, synonyms))
    without_effect = _client_auth(values)

    sections: dict[str, dict[str, Any]] = {"": {}, "store": {}}
    section_types: dict[str, type] = {"": cls, "store": StoreConfig}
    locations: dict[str, str] = {}
    for canonical, (key, text) in values.items():
        target = table.get(canonical)
        if target is None:
            if broker and canonical in _PERCENT_KEYS:
                sections["store"][_PERCENT_KEYS[canonical]] = _parse_percent(key, text)
            elif broker and canonical in LOCATION_KEYS:
                locations[key] = text
            elif canonical in _accepted(cls):
                without_effect.append(key)
            else:
                raise ConfigError(_unknown_key_message(key, cls))
            continue
        section, name = target
        hints = typing.get_type_hints(section_types[section])
        try:
            sections[section][name] = _parser_for(hints[name])(text)
        except ValueError as exc:
            raise ConfigError(f"config key {key}: bad value {text!r}: {exc}") from None
    config: BrokerConfig | NamesrvConfig
    try:
        if broker:
            store = StoreConfig(**sections["store"])
            config = BrokerConfig(**sections[""], store=store)
        else:
            config = NamesrvConfig(**sections[""])
    except ValueError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    if isinstance(config, BrokerConfig):
        _check_locations(config.store, locations)
    _report_without_effect(without_effect)
    return config


def _by_canonical_key(
    pairs: Mapping[str, str], synonyms: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """``pairs`` keyed by the name each is applied under, as (spelling, value).

    Raises:
        ConfigError: two spellings of one key with different values.
    """
    out: dict[str, tuple[str, str]] = {}
    for key, text in pairs.items():
        canonical = synonyms.get(key, key)
        earlier = out.get(canonical)
        if earlier is not None and earlier[1].strip() != text.strip():
            raise ConfigError(
                f"config keys {earlier[0]} and {key} are one setting here and disagree: "
                f"{earlier[1]!r} vs {text!r}"
            )
        out[canonical] = (key, text)
    return out


def _client_auth(values: dict[str, tuple[str, str]]) -> list[str]:
    """Apply ``tls.server.need.client.auth`` to ``values``; the keys left without effect.

    The server asks clients for a certificate exactly when it has a trust path. RocketMQ
    asks only with ``require`` (``optional`` asks without insisting, which we do not do),
    so ``tls.server.trustCertPath`` counts for ``require`` alone.

    Raises:
        ConfigError: a mode other than none|optional|require, or require without a trust path.
    """
    auth = values.pop(_CLIENT_AUTH_KEY, None)
    mode = auth[1].strip().lower() if auth is not None else "none"
    if mode not in _CLIENT_AUTH_MODES:
        raise ConfigError(
            f"config key {_CLIENT_AUTH_KEY}: bad value {mode!r}: not one of "
            + "|".join(_CLIENT_AUTH_MODES)
        )
    trust = values.get("tlsServerTrustCertPath")
    ignored = [auth[0]] if auth is not None and mode != "require" else []
    if mode == "require" and trust is None:
        raise ConfigError(
            f"config key {_CLIENT_AUTH_KEY}=require needs tls.server.trustCertPath "
            "(the CA certificates client certificates must chain to)"
        )
    if trust is not None and trust[0] == "tls.server.trustCertPath" and mode != "require":
        del values["tlsServerTrustCertPath"]
        ignored.append(trust[0])
    return ignored


def applied_keys(cls: type[BrokerConfig] | type[NamesrvConfig]) -> frozenset[str]:
    """The keys whose values are read here (the rest of ``rocketmq_keys`` only accepted)."""
    return _APPLIED_KEYS[cls]


def _accepted(cls: type[BrokerConfig] | type[NamesrvConfig]) -> frozenset[str]:
    """The RocketMQ keys accepted without effect, and ours, for one kind of server."""
    return _ACCEPTED_KEYS[cls]


# Built once: both are asked for every key while a file loads.
_APPLIED_KEYS: dict[type, frozenset[str]] = {
    BrokerConfig: frozenset(
        [*BROKER_KEYS, *BROKER_SYNONYMS, *_PERCENT_KEYS, *LOCATION_KEYS, _CLIENT_AUTH_KEY]
    ),
    NamesrvConfig: frozenset([*NAMESRV_KEYS, *NAMESRV_SYNONYMS, _CLIENT_AUTH_KEY]),
}
_ACCEPTED_KEYS: dict[type, frozenset[str]] = {
    BrokerConfig: rocketmq_keys.BROKER_KEYS | BROKER_KEYS.keys() | BROKER_SYNONYMS.keys(),
    NamesrvConfig: rocketmq_keys.NAMESRV_KEYS | NAMESRV_KEYS.keys() | NAMESRV_SYNONYMS.keys(),
}


def _unknown_key_message(key: str, cls: type[BrokerConfig] | type[NamesrvConfig]) -> str:
    """The unknown-key error, with the nearest key we apply or accept if one is near.

    A key that differs only in case wins outright. Otherwise the highest similarity does,
    and on a tie a key we apply beats one we only accept.
    """
    applied = list(BROKER_KEYS if cls is BrokerConfig else NAMESRV_KEYS)
    candidates = [*applied, *sorted(_accepted(cls) - set(applied))]
    lowered = key.lower()
    best, best_score = None, 0.6  # difflib.get_close_matches' default cutoff
    matcher = difflib.SequenceMatcher(b=lowered)
    for candidate in candidates:
        if candidate.lower() == lowered:
            best = candidate
            break
        matcher.set_seq1(candidate.lower())
        if matcher.real_quick_ratio() > best_score and matcher.quick_ratio() > best_score:
            score = matcher.ratio()
            if score > best_score:
                best, best_score = candidate, score
    hint = f" (did you mean {best}?)" if best else ""
    return f"unknown config key {key!r}{hint}"


def _parse_percent(key: str, text: str) -> float:
    try:
        percent = _parse_int(text)
    except ValueError as exc:
        raise ConfigError(f"config key {key}: bad value {text!r}: {exc}") from None
    if not 0 <= percent <= 100:
        raise ConfigError(f"config key {key}: bad value {text!r}: a percentage is 0..100")
    return percent / 100


def _check_locations(store: StoreConfig, locations: Mapping[str, str]) -> None:
    """Accept a store directory key only where the store really keeps that directory.

    Raises:
        ConfigError: the key names another place.
    """
    for key, text in locations.items():
        here = store.root_dir / LOCATION_KEYS[key]
        if Path(text.strip()).expanduser().resolve() != here.expanduser().resolve():
            raise ConfigError(
                f"config key {key}: {text.strip()!r} is not {here}: the store keeps it under "
                "storePathRootDir; set storePathRootDir, and leave this key out or make it "
                "match"
            )


def _report_without_effect(keys: list[str]) -> None:
    """One log line naming the accepted keys that change nothing here (the CLI loads its
    configuration once; a live update carries only keys that apply)."""
    if keys:
        log.warning(
            "config_keys_without_effect",
            keys=sorted(set(keys)),
            reason="Apache RocketMQ keys accepted for compatibility; Aerolite has no such setting",
        )


def with_changes(config: _C, **changes: Any) -> _C:
    """``dataclasses.replace`` that reports invalid values as ConfigError."""
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


# Keys ``UPDATE_BROKER_CONFIG`` (mqadmin updateBrokerConfig) changes on a running broker: the
# ones every request reads afresh. The rest are fixed when the broker starts (RocketMQ lets
# an operator write them and then ignores them until a restart; we say so instead).
LIVE_BROKER_KEYS = frozenset(
    {
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "longPollingEnable",
        "shortPollingTimeMills",
        "enablePropertyFilter",
        "slaveReadEnable",
        "offsetCheckInSlave",
        "rejectTransactionMessage",
        "transactionCheckMax",
        "regionId",
        "traceOn",
        "slowRequestThresholdMs",
    }
)
LIVE_NAMESRV_KEYS = frozenset({"orderMessageEnable"})


def _render(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, StrEnum):
        return value.value
    return str(value)


# Keys whose values are passwords: accepted, never sent by GET_BROKER_CONFIG.
SECRET_KEYS = frozenset({"dashboardUsers", "dashboardSecretKey"})


def config_properties(config: BrokerConfig | NamesrvConfig) -> dict[str, str]:
    """Every key of the config as broker.conf text values (GET_BROKER_CONFIG,
    GET_NAMESRV_CONFIG), in the key table's order."""
    table = BROKER_KEYS if isinstance(config, BrokerConfig) else NAMESRV_KEYS
    out = {}
    for key, (section, name) in table.items():
        if key in SECRET_KEYS:
            continue  # whoever reaches the broker's port may read its config
        holder = config.store if section == "store" and isinstance(config, BrokerConfig) else config
        out[key] = _render(getattr(holder, name))
    if isinstance(config, BrokerConfig):
        for key, name in _PERCENT_KEYS.items():
            out[key] = str(round(getattr(config.store, name) * 100))
    return out


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (the body of UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG);
    ``#`` comments and blank lines are skipped.

    Raises:
        ConfigError: a line that is not ``key=value``.
    """
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value: {raw!r}")
        out[key.strip()] = value.strip()
    return out


def updated_config(config: _C, changes: Mapping[str, str], live: frozenset[str]) -> _C:
    """``config`` with ``changes`` applied, all validated as at start.

    Raises:
        ConfigError: an unknown key, a bad value, or a key that only takes effect at start
            (named, with the advice to set it in the config file).
    """
    fixed = sorted(k for k in changes if k not in live)
    cls = type(config)
    unknown = [k for k in fixed if k not in _accepted(cls)]
    if unknown:
        raise ConfigError(_unknown_key_message(unknown[0], cls))
    idle = [k for k in fixed if k not in applied_keys(cls)]
    if idle:
        raise ConfigError(
            f"{', '.join(idle)}: accepted for compatibility with Apache RocketMQ, but has no "
            "effect here (see config_keys_without_effect in the log at start)"
        )
    if fixed:
        raise ConfigError(
            f"{', '.join(fixed)} cannot change while running; set it in the config file "
            f"and restart (live keys: {', '.join(sorted(live))})"
        )
    merged = {**config_properties(config), **changes}
    merged = {k: v for k, v in merged.items() if v != ""}  # unset optional keys stay unset
    return load_config(type(config), None, merged)
