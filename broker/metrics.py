"""Prometheus metrics of a broker and a name server, served on ``metricsPort``.

RocketMQ counterpart: RocketMQ 5's ``BrokerMetricsManager`` (OpenTelemetry, exported for
Prometheus on port 5557) and the rocketmq-exporter of 4.x. Names follow RocketMQ 5's
(``rocketmq_messages_in_total``, ``rocketmq_consumer_lag_messages``, …) with the labels
``cluster``, ``node_type``, ``node_id``, plus ``topic``, ``consumer_group`` and ``queue_id``
where they apply.

Everything is read from the broker's own state when Prometheus scrapes: the counters the
request path keeps anyway (``BrokerStats``, the lanes, the flusher), the store's offsets, the
consumer offset table. Recording costs the hot path no more than a dict update, and a scrape
costs one walk over the queues. The endpoint is a small asyncio HTTP server on the broker's
own loop, not prometheus-client's threaded one: a scrape then reads tables that nothing
mutates underneath it, and there is no thread to outlive the broker.

A port that cannot be bound stops the start, as a taken ``listenPort`` does: metrics that are
silently missing are found out only when they are needed. ``metricsPort=0`` picks a free
port, which the ``ready`` line names (``metrics=HOST:PORT``).

The endpoint obeys the process's ``tlsServerMode`` with the server certificate, as every
listener does (``remoting.listener``): HTTPS only when enforcing, HTTP and HTTPS on the one
port when permissive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import structlog
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from broker.facets import HasConfig, HasHA, HasOffsets, HasPullHold, HasStats, HasStore
from broker.stats import PUT_LATENCY_BUCKETS_S
from broker.topics import TRANS_HALF_TOPIC
from broker.transaction import CHECK_GROUP, HALF_QUEUE_ID
from remoting.connection import ServerBudget
from remoting.dispatch import ProcessorTable
from remoting.listener import Listener, stream_listener
from remoting.server import RemotingServer
from remoting.tls import TlsMode

if TYPE_CHECKING:
    # Only for the annotation: importing ``broker.namesrv`` at run time runs its
    # ``__init__``, which imports the name server, which imports this module.
    from broker.namesrv.route_table import RouteTable

log = structlog.get_logger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REQUEST_LIMIT_BYTES = 8192
_READ_TIMEOUT_S = 10.0


class SetAsideCounter(Protocol):
    """A loop that moves past messages it can never deliver (broker/parked.py)."""

    @property
    def set_aside(self) -> int: ...


class TimerGauges(SetAsideCounter, Protocol):
    @property
    def pending(self) -> int: ...


class MetricsBroker(HasConfig, HasStats, HasStore, HasOffsets, HasPullHold, HasHA, Protocol):
    """What ``BrokerCollector`` reads at scrape time."""

    @property
    def processors(self) -> ProcessorTable: ...

    @property
    def server(self) -> RemotingServer: ...

    @property
    def recovering(self) -> bool: ...

    @property
    def timers(self) -> TimerGauges: ...

    @property
    def schedule(self) -> SetAsideCounter: ...

    @property
    def transactions(self) -> SetAsideCounter: ...

    @property
    def pop(self) -> SetAsideCounter: ...

    @property
    def grpc(self) -> GrpcFigures: ...


class GrpcFigures(Protocol):
    """The gRPC front end's counts (``broker.proxy.service.GrpcService``)."""

    @property
    def calls(self) -> Mapping[tuple[str, str], int]: ...

    def client_kinds(self) -> dict[str, int]: ...


class MetricsNamesrv(Protocol):
    """What ``NamesrvCollector`` reads at scrape time."""

    @property
    def routes(self) -> RouteTable: ...

    @property
    def address(self) -> str: ...


class BrokerCollector(Collector):
    """The broker's families, built at scrape time, in a fixed order: traffic, storage,
    dispatch and retention, consumer lag, serving, replication, the broker's own loops."""

    def __init__(self, broker: MetricsBroker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        config = self.broker.config
        base = ["cluster", "node_type", "node_id"]
        node = [config.broker_cluster_name, "broker", config.broker_name]
        yield from self._recovery(base, node)
        if self.broker.recovering:
            return  # the store is being loaded on another thread: nothing else to read yet
        yield from self._traffic(base, node)
        yield from self._put_latency(base, node)
        yield from self._storage(base, node)
        yield from self._dispatch_and_retention(base, node)
        yield from self._lag(base, node)
        yield from self._serving(base, node)
        yield from self._replication(base, node)
        yield from self._loops(base, node)

    def _recovery(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """1 while the broker recovers its store (its ports answer, it serves nothing yet),
        with how far the recovery got."""
        broker = self.broker
        yield _gauge(
            "rocketmq_broker_recovering",
            "1 while the broker recovers its store and serves nothing yet, else 0",
            base,
            [(node, 1 if broker.recovering else 0)],
        )
        progress = broker.store.recovery
        if broker.recovering and progress is not None:
            yield _gauge(
                "rocketmq_broker_recovery_percent",
                "How far the store's recovery got through the commit log, in its phase",
                [*base, "phase"],
                [([*node, progress.phase], progress.percent)],
            )
            yield _gauge(
                "rocketmq_broker_recovery_records",
                "Records re-dispatched to the consume queues and index by the recovery",
                base,
                [(node, progress.records)],
            )

    def _traffic(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """Messages and bytes in by topic, out by group and topic, and the rates."""
        stats = self.broker.stats
        msgs_in = CounterMetricFamily(
            "rocketmq_messages_in", "Messages stored, by topic", labels=[*base, "topic"]
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in", "Bytes stored, by topic", labels=[*base, "topic"]
        )
        for topic, count in sorted(stats.topic_put.items()):
            msgs_in.add_metric([*node, topic], count)
            bytes_in.add_metric([*node, topic], stats.topic_put_bytes.get(topic, 0))
        yield msgs_in
        yield bytes_in

        labels_out = [*base, "consumer_group", "topic"]
        msgs_out = CounterMetricFamily(
            "rocketmq_messages_out", "Messages pulled, by group and topic", labels=labels_out
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out", "Bytes pulled, by group and topic", labels=labels_out
        )
        for (group, topic), count in sorted(stats.group_topic_get.items()):
            msgs_out.add_metric([*node, group, topic], count)
            bytes_out.add_metric([*node, group, topic], stats.group_topic_get_bytes[(group, topic)])
        yield msgs_out
        yield bytes_out

        yield _gauge(
            "rocketmq_put_tps",
            "Messages stored per second (10 s window)",
            base,
            [(node, stats.put_tps())],
        )
        yield _gauge(
            "rocketmq_get_tps",
            "Messages pulled per second (10 s window)",
            base,
            [(node, stats.get_tps())],
        )

    def _put_latency(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        stats = self.broker.stats
        latency = HistogramMetricFamily(
            "rocketmq_put_latency_seconds", "Time to store a send, store and flush", labels=base
        )
        cumulative = 0
        buckets = []
        for bound, n in zip(
            [*(str(b) for b in PUT_LATENCY_BUCKETS_S), "+Inf"],
            stats.put_latency_counts,
            strict=True,
        ):
            cumulative += n
            buckets.append((bound, cumulative))
        latency.add_metric(node, buckets, stats.put_latency_sum_s)
        yield latency

    def _storage(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """Flushes, what the commit log and the consume queues hold, and the disk."""
        store = self.broker.store
        flusher = store.commit_log_flusher
        flush = SummaryMetricFamily(
            "rocketmq_flush_latency_seconds", "Commit-log flushes and their time", labels=base
        )
        if flusher is not None:
            flush.add_metric(node, flusher.flushes, flusher.flush_seconds)
        yield flush

        cl = store.commit_log
        yield _gauge(
            "rocketmq_storage_commitlog_bytes",
            "Commit-log bytes held (max minus min offset)",
            base,
            [(node, cl.max_offset - cl.min_offset)],
        )
        cq_bytes = sum(cq.max_offset - cq.min_offset for cq in store.queues) * 20
        yield _gauge(
            "rocketmq_storage_consumequeue_bytes",
            "ConsumeQueue bytes held (20 per entry)",
            base,
            [(node, cq_bytes)],
        )
        with contextlib.suppress(OSError):
            usage = shutil.disk_usage(store.root)
            yield _gauge(
                "rocketmq_storage_disk_ratio",
                "Used fraction of the store's disk",
                base,
                [(node, usage.used / usage.total if usage.total else 0.0)],
            )
        yield _gauge(
            "rocketmq_storage_disk_full",
            "1 while writes are refused because the store's disk is used above "
            "diskSpaceWarningLevelRatio (checked before the commit log takes more disk)",
            base,
            [(node, 1 if store.retention.disk_full else 0)],
        )

    def _dispatch_and_retention(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """How far dispatch is behind and whether it fails; what retention took early."""
        store = self.broker.store
        yield _gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "Commit-log bytes not yet in ConsumeQueue and index",
            base,
            [(node, store.dispatch_behind_bytes)],
        )
        yield _gauge(
            "rocketmq_storage_dispatch_healthy",
            "1 while dispatch keeps ConsumeQueue and index up with the commit log, "
            "0 after a failure until a retry gets past it (writes are refused meanwhile)",
            base,
            [(node, 1 if store.dispatch.healthy else 0)],
        )
        failures = CounterMetricFamily(
            "rocketmq_storage_dispatch_failures",
            "Failed dispatch attempts (the first failure and each failed retry)",
            labels=base,
        )
        failures.add_metric(node, store.dispatch.failures)
        yield failures
        retention = store.retention
        forced = CounterMetricFamily(
            "rocketmq_storage_forced_deletions",
            "Commit-log segments deleted for disk space before their retention time",
            labels=base,
        )
        forced.add_metric(node, retention.forced_deletions)
        yield forced
        unconsumed = CounterMetricFamily(
            "rocketmq_storage_forced_deletion_unconsumed_messages",
            "Messages a group had not consumed yet when a forced deletion took them",
            labels=[*base, "consumer_group", "topic"],
        )
        for (topic, group), count in sorted(retention.unconsumed_deleted.items()):
            unconsumed.add_metric([*node, group, topic], count)
        yield unconsumed

    def _lag(self, base: list[str], node: list[str]) -> Iterable[Metric]:
        """Lag per group, topic and queue: the queue's end minus the group's committed
        offset, from the tables the broker keeps anyway."""
        broker = self.broker
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages a group has not consumed, per queue",
            labels=[*base, "consumer_group", "topic", "queue_id"],
        )
        for key, per_queue in sorted(broker.offsets.table.items()):
            topic, _, group = key.partition("@")
            if not group:
                continue
            for qid, offset in sorted(per_queue.items()):
                end = broker.store.get_max_offset(topic, qid)
                lag.add_metric([*node, group, topic, str(qid)], max(0, end - offset))
        yield lag

    def _serving(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """Parked pulls, the lanes' queues and refusals, the listeners' budget."""
        broker = self.broker
        yield _gauge(
            "rocketmq_long_polling_holds",
            "Pull requests parked by long polling",
            base,
            [(node, broker.pull_hold.count)],
        )
        depth = GaugeMetricFamily(
            "rocketmq_lane_queue_depth", "Requests waiting for a lane", labels=[*base, "lane"]
        )
        busy = CounterMetricFamily(
            "rocketmq_lane_rejected",
            "Requests answered SYSTEM_BUSY (lane full or waited too long)",
            labels=[*base, "lane"],
        )
        for lane in broker.processors.lanes:
            depth.add_metric([*node, lane.name], lane.depth)
            busy.add_metric([*node, lane.name], lane.rejected + lane.expired)
        yield depth
        yield busy
        yield from listener_families(base, node, broker.server.budget)
        yield from self._grpc(base, node)

    def _grpc(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """RocketMQ 5 clients on the gRPC port: how many of each kind, and the calls they
        made by RPC and the status each was answered with."""
        grpc = self.broker.grpc
        clients = GaugeMetricFamily(
            "rocketmq_grpc_clients", "RocketMQ 5 clients known by kind", labels=[*base, "kind"]
        )
        for kind, count in sorted(grpc.client_kinds().items()):
            clients.add_metric([*node, kind], count)
        calls = CounterMetricFamily(
            "rocketmq_grpc_calls",
            "gRPC calls answered, by RPC and status code",
            labels=[*base, "rpc", "code"],
        )
        for (name, code), count in sorted(grpc.calls.items()):
            calls.add_metric([*node, name, code], count)
        yield clients
        yield calls

    def _replication(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """A master's slaves and how far behind they are; nothing on a slave."""
        ha = self.broker.ha
        if ha is None:
            return
        cl = self.broker.store.commit_log
        yield _gauge(
            "rocketmq_ha_slaves",
            "Slaves connected to this master",
            base,
            [(node, len(ha.slaves))],
        )
        yield _gauge(
            "rocketmq_ha_lag_bytes",
            "Commit-log bytes no slave has confirmed yet",
            base,
            [(node, max(0, cl.max_offset - ha.acked_offset) if ha.slaves else 0)],
        )

    def _loops(self, base: list[str], node: list[str]) -> Iterator[Metric]:
        """The broker's own loops: timers pending, messages set aside, the half backlog."""
        broker = self.broker
        yield _gauge(
            "rocketmq_timer_pending",
            "Timer messages waiting in the timing wheel",
            base,
            [(node, broker.timers.pending)],
        )
        aside = CounterMetricFamily(
            "rocketmq_messages_set_aside",
            "Messages a broker loop could never deliver and moved past (left readable)",
            labels=[*base, "service"],
        )
        for service, count in (
            ("schedule", broker.schedule.set_aside),
            ("timer", broker.timers.set_aside),
            ("transaction_check", broker.transactions.set_aside),
            ("pop_revive", broker.pop.set_aside),
        ):
            aside.add_metric([*node, service], count)
        yield aside
        half_end = broker.store.get_max_offset(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        checked = max(0, broker.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        yield _gauge(
            "rocketmq_transaction_half_backlog",
            "Half messages the transaction check has not walked past yet",
            base,
            [(node, max(0, half_end - checked))],
        )


class NamesrvCollector(Collector):
    """The name server's families, one sample per cluster that has brokers registered (as
    RocketMQ's controller counts its active brokers by cluster), so that they carry the
    ``cluster`` label every broker family has. A name server serves any number of clusters;
    with no broker registered there is nothing to count and no sample."""

    def __init__(self, namesrv: MetricsNamesrv) -> None:
        self.namesrv = namesrv

    def collect(self) -> Iterator[Metric]:
        routes = self.namesrv.routes
        node_id = self.namesrv.address
        labels = ["cluster", "node_type", "node_id"]
        brokers: dict[str, int] = {}
        for bd in routes.broker_addr_table.values():
            brokers[bd.cluster] = brokers.get(bd.cluster, 0) + len(bd.broker_addrs)
        yield _gauge(
            "rocketmq_namesrv_brokers",
            "Broker addresses registered with this name server, by cluster",
            labels,
            [([c, "namesrv", node_id], n) for c, n in sorted(brokers.items())],
        )
        yield _gauge(
            "rocketmq_namesrv_topics",
            "Topics with a route to the cluster on this name server",
            labels,
            [([c, "namesrv", node_id], len(routes.topics_of_cluster(c))) for c in sorted(brokers)],
        )


def listener_families(labels: list[str], node: list[str], budget: ServerBudget) -> Iterator[Metric]:
    """What the server's connections hold and what was refused (``remoting.ServerBudget``,
    shared by the broker's main and VIP ports)."""
    yield _gauge(
        "rocketmq_remoting_connections",
        "Connections served (refused ones not counted)",
        labels,
        [(node, budget.connections)],
    )
    yield _gauge(
        "rocketmq_remoting_partial_frame_bytes",
        "Bytes charged to incomplete frames (their announced sizes), against "
        "partialFrameBudgetBytes",
        labels,
        [(node, budget.partial_frame_bytes)],
    )
    refusals = CounterMetricFamily(
        "rocketmq_remoting_refusals",
        "Connections refused or closed to bound memory, by reason",
        labels=[*labels, "reason"],
    )
    for reason, count in budget.refusals.items():
        refusals.add_metric([*node, reason.value], count)
    yield refusals
    pauses = CounterMetricFamily(
        "rocketmq_remoting_read_pauses",
        "Times a connection stopped reading: requests in flight at the limit, or replies "
        "over the write buffer's high-water mark",
        labels=[*labels, "reason"],
    )
    for why, count in budget.read_pauses.items():
        pauses.add_metric([*node, why.value], count)
    yield pauses


def _gauge(
    name: str, doc: str, labels: list[str], samples: list[tuple[list[str], float]]
) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        g.add_metric(values, value)
    return g


class MetricsServer:
    """``GET /metrics`` on the event loop (and ``GET /`` for a pointer to it)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        before_scrape: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.registry = registry
        # Gathered before each scrape is answered (what a collector cannot read at once,
        # e.g. the consumers' own figures); each bounds its own time and never raises.
        self.before_scrape = tuple(before_scrape)
        self.listener: Listener | None = None
        self.port = 0

    async def start(
        self,
        host: str,
        port: int,
        *,
        tls_mode: TlsMode = TlsMode.DISABLED,
        ssl_context: ssl.SSLContext | None = None,
    ) -> int:
        """Bind and serve, under ``tls_mode`` (the server's ``tlsServerMode``); returns the
        port (the one chosen when ``port`` is 0).

        Raises:
            OSError: the address cannot be bound; the message names ``metricsPort`` and
                the address, ready for the one line a start error prints.
        """
        # The reader's limit bounds a request head: a longer one fails readuntil.
        listener = stream_listener(
            self._serve,
            host,
            port,
            limit=_REQUEST_LIMIT_BYTES,
            tls_mode=tls_mode,
            ssl_context=ssl_context,
            name="metrics",
        )
        try:
            self.port = await listener.start()
        except OSError as exc:
            raise bind_error("metricsPort", host, port, exc) from None
        self.listener = listener
        log.info("metrics_listening", address=f"{host}:{self.port}", tls=str(tls_mode))
        return self.port

    async def stop(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
            await listener.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if method != "GET":
                self._respond(writer, 405, b"only GET\n", "text/plain")
            elif path.split("?", 1)[0] == "/metrics":
                for gather in self.before_scrape:
                    await gather()
                self._respond(writer, 200, generate_latest(self.registry), CONTENT_TYPE)
            elif path == "/":
                self._respond(writer, 200, b'<a href="/metrics">/metrics</a>\n', "text/html")
            else:
                self._respond(writer, 404, b"not found; try /metrics\n", "text/plain")
            await writer.drain()
        except (
            TimeoutError,
            ValueError,
            ConnectionError,
            ssl.SSLError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass  # a scraper that went away or spoke nonsense: nothing to answer
        finally:
            writer.close()

    @staticmethod
    def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        )
        writer.write(body)


def bind_error(key: str, host: str, port: int, exc: OSError) -> OSError:
    """``exc`` restated as the one line a start error prints: the config key, the address
    it could not bind and why (``metricsPort 127.0.0.1:5557: address already in use``)."""
    reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return OSError(exc.errno, f"{key} {host}:{port}: {reason}")


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A registry of its own (never the global one: several brokers share a test process)."""
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return registry
