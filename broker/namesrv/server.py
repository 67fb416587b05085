"""``NameServer``: the name server process's service object.

RocketMQ counterpart: ``NamesrvController``. It owns the remoting server, the route table,
the KV config and the liveness scan: a broker not heard from for
``brokerChannelExpiredTime`` (120 s) is removed, checked every
``scanNotActiveBrokerInterval`` (10 s), and a broker whose connection closes is removed at
once.

A port that cannot be bound, ``listenPort`` or ``metricsPort``, stops the start with an
``OSError`` whose message names the key and the address. Both listeners obey
``tlsServerMode`` with the one certificate.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

import structlog

from broker.config import (
    LIVE_NAMESRV_KEYS,
    NamesrvConfig,
    config_properties,
    listener_limits,
    parse_properties_text,
    server_ssl_context,
    updated_config,
)
from broker.metrics import MetricsServer, NamesrvCollector, bind_error, registry_of
from broker.namesrv.kv_config import KVConfig
from broker.namesrv.processor import NamesrvProcessor
from broker.namesrv.route_table import RouteTable
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.errors import ConfigError
from remoting.lifecycle import Lifecycle, Periodic, Stage
from remoting.server import RemotingServer, ServerConfig

log = structlog.get_logger(__name__)


class NameServer:
    """The name server service: ``start()`` returns once it accepts connections."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.routes = RouteTable()
        self.kv = KVConfig(config.kv_config_path)
        self.processors = ProcessorTable()
        self.metrics: MetricsServer | None = None
        # Where this name server's families are served: its own endpoint, or (standalone)
        # the broker's, which then sets this. 0 when nowhere. GET_NAMESRV_CONFIG reports it.
        self.metrics_port = 0
        self.processor = NamesrvProcessor(
            self.routes, self.kv, order_message_enable=config.order_message_enable
        )
        self.processor.register(self.processors)
        config_lane = Lane("namesrv-config", workers=1, capacity=1_000)
        self.processors.register(RequestCode.GET_NAMESRV_CONFIG, self._get_config, config_lane)
        self.processors.register(
            RequestCode.UPDATE_NAMESRV_CONFIG, self._update_config, config_lane
        )
        self.server_ssl_context = server_ssl_context(config)
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
            name="namesrv",
        )
        self.server.add_close_listener(self._on_close)
        self._scanner = Periodic(
            "namesrv-scan",
            self._scan,
            config.scan_not_active_broker_interval_ms / 1000,
            failure_event="scan_not_active_broker_failed",
        )
        self.lifecycle = Lifecycle(
            "namesrv",
            [
                Stage("kv", self.kv.load),
                Stage("listen", self._start_server, self.server.shutdown),
                Stage("metrics", self._start_metrics, self._stop_metrics),
                Stage("scan", self._scanner.start, self._scanner.stop),
            ],
        )

    @property
    def address(self) -> str:
        return self.server.address

    def listening(self) -> dict[str, int]:
        """Every port this name server listens on, by listener: ``main``, ``metrics`` (when
        it serves its own). Each obeys ``tlsServerMode``."""
        ports = {"main": self.server.port}
        if self.metrics is not None:
            ports["metrics"] = self.metrics.port
        return ports

    def _on_close(self, conn: Connection) -> None:
        self.routes.on_connection_closed(conn)

    def _scan(self) -> None:
        self.routes.scan_not_active(int(time.time() * 1000), self.config.broker_channel_expired_ms)

    async def _get_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): the configuration as properties text, with the metrics
        endpoint as served (the chosen port for metricsPort=0; standalone's shared one)."""
        values = config_properties(self.config)
        if self.metrics_port:
            values["metricsEnable"] = "true"
            values["metricsPort"] = str(self.metrics_port)
        text = "".join(f"{k}={v}\n" for k, v in values.items())
        return response_to(request, ResponseCode.SUCCESS, None, None, text.encode())

    async def _update_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318): live keys only; the rest need a restart."""
        try:
            changes = parse_properties_text(request.body_bytes.decode("utf-8"))
            config = updated_config(self.config, changes, LIVE_NAMESRV_KEYS)
        except (ConfigError, UnicodeDecodeError) as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if not changes:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "no key=value lines in the request body"
            )
        self.config = config
        self.processor.order_message_enable = config.order_message_enable
        log.info("namesrv_config_updated", peer=conn.peer, changes=changes)
        return response_to(request, ResponseCode.SUCCESS)

    async def start(self) -> None:
        """Start every stage in order; a stage that fails stops those started and raises.

        Raises:
            OSError: a port the configuration names cannot be bound (the key is named).
        """
        await self.lifecycle.start()
        log.info("namesrv_started", address=self.address)

    async def _start_server(self) -> None:
        try:
            await self.server.start()
        except OSError as exc:
            await self.server.shutdown()  # the lanes it started
            config = self.config
            raise bind_error("listenPort", config.bind_address, config.listen_port, exc) from None

    async def _start_metrics(self) -> None:
        if self.config.metrics_enable:
            server = MetricsServer(registry_of(NamesrvCollector(self)))
            self.metrics_port = await server.start(
                self.config.bind_address,
                self.config.metrics_port,
                tls_mode=self.config.tls_server_mode,
                ssl_context=self.server_ssl_context,
            )
            self.metrics = server

    async def _stop_metrics(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
            self.metrics = None

    async def shutdown(self) -> None:
        """Stop the started stages in reverse order: the scan, metrics, then the port."""
        await self.lifecycle.stop()

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
