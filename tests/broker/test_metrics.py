"""The Prometheus endpoint (``metricsPort``): scraped over HTTP after known traffic, and the
figures checked against it. Also the name server's endpoint, standalone's single endpoint,
``metricsEnable=false``, and the Grafana dashboard's queries."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.broker import Broker
from broker.config import BrokerRole
from broker.exporter_metrics import RUNTIME_FAMILIES
from broker.namesrv.server import NameServer
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from tests.processes import free_port
from tests.support import BrokerFactory, NamesrvFactory, pull, send_ok, wait_until

REPO = Path(__file__).resolve().parents[2]
TOPIC = "TopicMetrics"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def http_get(port: int, path: str = "/metrics") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, body.decode()


def samples_of(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(found) == 1, (name, labels, found)
    return found[0]


async def scrape(port: int) -> Samples:
    status, body = await http_get(port)
    assert status == 200
    return samples_of(body)


async def test_the_broker_exports_what_it_did(broker: Broker, client: RemotingClient) -> None:
    assert broker.metrics is not None and broker.metrics_port > 0
    for n in range(10):
        await send_ok(client, broker.address, TOPIC, b"x" * 100, queue_id=n % 2)
    await wait_until(lambda: broker.store.dispatch_behind_bytes == 0, "dispatch")
    got = await pull(client, broker.address, TOPIC, queue_id=0, group="cg-metrics")
    assert got.code == ResponseCode.SUCCESS
    broker.offsets.commit("cg-metrics", TOPIC, 0, 3)
    broker.offsets.commit("cg-metrics", TOPIC, 1, 5)

    s = await scrape(broker.metrics_port)
    assert value(s, "rocketmq_messages_in_total", topic=TOPIC) == 10
    assert value(s, "rocketmq_throughput_in_total", topic=TOPIC) > 10 * 100
    assert value(s, "rocketmq_messages_out_total", consumer_group="cg-metrics", topic=TOPIC) == 5
    assert value(s, "rocketmq_throughput_out_total", consumer_group="cg-metrics", topic=TOPIC) > 500
    lag0 = value(s, "rocketmq_consumer_lag_messages", consumer_group="cg-metrics", queue_id="0")
    lag1 = value(s, "rocketmq_consumer_lag_messages", consumer_group="cg-metrics", queue_id="1")
    assert (lag0, lag1) == (2, 0)
    assert value(s, "rocketmq_put_latency_seconds_count", node_id="broker-a") == 10
    assert value(s, "rocketmq_put_latency_seconds_bucket", le="+Inf") == 10
    assert value(s, "rocketmq_storage_commitlog_bytes") == broker.store.commit_log.max_offset
    assert value(s, "rocketmq_storage_consumequeue_bytes") >= 10 * 20
    assert 0 < value(s, "rocketmq_storage_disk_ratio") < 1
    assert value(s, "rocketmq_lane_queue_depth", lane="send") == 0
    assert value(s, "rocketmq_lane_rejected_total", lane="send") == 0
    assert value(s, "rocketmq_long_polling_holds") == 0
    assert value(s, "rocketmq_timer_pending") == 0
    assert value(s, "rocketmq_transaction_half_backlog") == 0
    assert value(s, "rocketmq_flush_latency_seconds_count") >= 0
    for _name, labels in s:
        assert dict(labels).get("cluster", "DefaultCluster") == "DefaultCluster"

    status, _ = await http_get(broker.metrics_port, "/nothing")
    assert status == 404


async def test_lane_rejections_are_counted(broker: Broker, client: RemotingClient) -> None:
    broker.send_lane.rejected += 3  # as if the send lane had been full three times
    s = await scrape(broker.metrics_port)
    assert value(s, "rocketmq_lane_rejected_total", lane="send") == 3


async def test_metrics_can_be_turned_off(start_broker: BrokerFactory) -> None:
    broker = await start_broker(metrics_enable=False)
    assert broker.metrics is None and broker.metrics_port == 0


async def test_a_taken_port_stops_the_start_and_names_the_key(
    start_broker: BrokerFactory, start_namesrv: NamesrvFactory, tmp_path: Path
) -> None:
    """Metrics silently missing helps no one: a port that cannot be bound stops the start,
    like any other port, and the error names the key and the address."""
    first = await start_broker()
    with pytest.raises(OSError, match=f"metricsPort 127.0.0.1:{first.metrics_port}"):
        await start_broker(root=tmp_path / "second", metrics_port=first.metrics_port)
    # The failed start let go of its store: a broker on it starts.
    await start_broker(root=tmp_path / "second")

    namesrv = await start_namesrv()
    with pytest.raises(OSError, match=f"metricsPort 127.0.0.1:{namesrv.metrics_port}"):
        await start_namesrv(metrics_port=namesrv.metrics_port)


async def test_replication_shows_on_the_master(
    start_broker: BrokerFactory, client: RemotingClient
) -> None:
    master = await start_broker()
    slave = await start_broker(broker_role=BrokerRole.SLAVE, broker_id=1)
    await wait_until(lambda: master.ha is not None and len(master.ha.slaves) == 1, "the slave", 5)
    s = await scrape(master.metrics_port)
    assert value(s, "rocketmq_ha_slaves") == 1
    assert value(s, "rocketmq_ha_lag_bytes") >= 0
    assert slave.metrics_port != master.metrics_port
    # rocketmq-exporter's view: the slave, by its address, and how far behind it is.
    for _ in range(5):
        await send_ok(client, master.address, TOPIC, b"x" * 100)
    end = master.store.commit_log.max_offset
    await wait_until(lambda: slave.store.commit_log.max_offset == end, "the slave caught up")
    lag = {"cluster": "DefaultCluster", "brokerIP": slave.address, "broker": "broker-a"}
    assert value(await scrape(master.metrics_port), "rocketmq_broker_commitlog_diff", **lag) == 0
    assert not [
        n for n, _ in await scrape(slave.metrics_port) if n == "rocketmq_broker_commitlog_diff"
    ]


async def test_the_name_server_exports_its_routes(
    namesrv: NameServer, start_broker: BrokerFactory, client: RemotingClient
) -> None:
    """Per cluster, as RocketMQ's controller counts its brokers: every family carries the
    ``cluster`` label, as every broker family does."""
    broker = await start_broker(broker_cluster_name="ClusterM")
    await start_broker(broker_cluster_name="ClusterN", broker_name="broker-n")
    await send_ok(client, broker.address, TOPIC)
    await broker.registration.register_all()
    assert namesrv.metrics_port > 0
    s = await scrape(namesrv.metrics_port)
    node = {"node_type": "namesrv", "node_id": namesrv.address}
    assert value(s, "rocketmq_namesrv_brokers", cluster="ClusterM", **node) == 1
    assert value(s, "rocketmq_namesrv_brokers", cluster="ClusterN", **node) == 1
    assert value(s, "rocketmq_namesrv_topics", cluster="ClusterM", **node) >= 1
    for _name, labels in s:
        assert {"cluster", "node_type", "node_id"} <= dict(labels).keys(), (_name, labels)


async def test_every_broker_family_carries_the_node_labels(broker: Broker) -> None:
    """Ours do; rocketmq-exporter's (tests/broker/test_exporter_metrics.py) keep the labels
    its dashboards query instead."""
    s = await scrape(broker.metrics_port)
    assert value(s, "rocketmq_put_tps", cluster="DefaultCluster", node_id="broker-a") == 0
    exporter = {f"rocketmq_brokeruntime_{suffix}" for suffix, *_ in RUNTIME_FAMILIES} | {
        "rocketmq_producer_offset", "rocketmq_topic_retry_offset", "rocketmq_producer_count",
        "rocketmq_group_count", "rocketmq_topic_dlq_offset",
    }  # fmt: skip
    for name, labels in s:
        if name in exporter:
            continue
        assert dict(labels).keys() >= {"cluster", "node_type", "node_id"}, (name, labels)


async def test_standalone_serves_broker_and_namesrv_on_one_port(tmp_path: Path) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "broker",
        "standalone",
        "--store",
        str(tmp_path),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        "--set",
        f"metricsPort={port}",
        "--set",
        "enableDashboard=false",
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            line = (await proc.stdout.readline()).decode()
        assert line.startswith("ready ")
        s = await scrape(port)
        assert value(s, "rocketmq_namesrv_brokers", cluster="DefaultCluster") == 1
        assert value(s, "rocketmq_storage_commitlog_bytes") == 0
    finally:
        proc.terminate()
        async with asyncio.timeout(30):
            assert await proc.wait() == 0


async def test_the_grafana_dashboard_charts_exported_metrics(
    broker: Broker, client: RemotingClient
) -> None:
    dashboard = json.loads((REPO / "docs" / "grafana-dashboard.json").read_text())
    await send_ok(client, broker.address, TOPIC, queue_id=0)
    await wait_until(lambda: broker.store.dispatch_behind_bytes == 0, "dispatch")
    await pull(client, broker.address, TOPIC, queue_id=0, group="cg-dash")  # an "out" sample
    broker.offsets.commit("cg-dash", TOPIC, 0, 0)
    status, text = await http_get(broker.metrics_port)
    assert status == 200
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    exported |= {"rocketmq_namesrv_brokers", "rocketmq_namesrv_topics"}
    exprs = [
        t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", []) if "expr" in t
    ]
    assert len(exprs) >= 10
    for expr in exprs:
        names = set(re.findall(r"\brocketmq_[a-z_]+", expr))
        assert names, expr
        assert names <= exported, (expr, names - exported)


async def test_grpc_calls_and_clients_are_counted(broker: Broker) -> None:
    """rocketmq_grpc_calls_total by RPC and the status code the call was answered with;
    rocketmq_grpc_clients by kind once a client sent its settings."""
    from tests.proxy.grpc_raw import RawClient, producer_settings

    async with RawClient(broker.grpc.port) as five:
        for _ in range(2):
            answer = await five.query_route("NoSuchTopicHere")
            assert answer.status.code == 40402  # TOPIC_NOT_FOUND
        async with five.telemetry(producer_settings("TopicTest")):
            s = await scrape(broker.metrics_port)
    assert value(s, "rocketmq_grpc_calls_total", rpc="QueryRoute", code="TOPIC_NOT_FOUND") == 2
    assert value(s, "rocketmq_grpc_clients", kind="PRODUCER") == 1
