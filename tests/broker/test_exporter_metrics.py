"""The rocketmq-exporter series on the broker's metrics port, scraped and checked by name,
labels and value after real traffic: what the exporter's two community Grafana boards
(``rocketmq_exporter_overview.json``, Grafana 10477, and ``rocketmq_exporter.json``) and its
alert rules query is there, with the labels their queries filter and join on."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from broker.broker import Broker
from broker.exporter_metrics import RUNTIME_FAMILIES, runtime_value
from broker.namesrv.server import NameServer
from broker.runtime_info import runtime_table
from client import ConsumeFromWhere, Message, Producer, PushConsumer
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from tests.broker.conftest import heartbeat
from tests.broker.test_metrics import http_get
from tests.client.conftest import create_topic
from tests.support import pull, send_ok, wait_until

TOPIC = "TopicExported"
GROUP = "cg-exported"
# What the two dashboards and the alert rules query (rocketmq-exporter's names).
DASHBOARD_FAMILIES = {
    "rocketmq_broker_tps", "rocketmq_broker_qps", "rocketmq_producer_tps",
    "rocketmq_producer_message_size", "rocketmq_producer_offset", "rocketmq_consumer_tps",
    "rocketmq_consumer_message_size", "rocketmq_consumer_offset", "rocketmq_topic_retry_offset",
    "rocketmq_topic_dlq_offset", "rocketmq_group_diff", "rocketmq_group_retrydiff",
    "rocketmq_group_get_latency_by_storetime", "rocketmq_brokeruntime_dispatch_behind_bytes",
    "rocketmq_brokeruntime_msg_put_total_today_now", "rocketmq_brokeruntime_msg_gettotal_today_now",
    "rocketmq_brokeruntime_msg_puttotal_todaymorning",
    "rocketmq_brokeruntime_msg_gettotal_todaymorning",
    "rocketmq_brokeruntime_msg_puttotal_yesterdaymorning",
    "rocketmq_brokeruntime_msg_gettotal_yesterdaymorning",
    "rocketmq_brokeruntime_earliest_message_timestamp",
    "rocketmq_brokeruntime_put_message_size_total",
    "rocketmq_brokeruntime_put_message_average_size",
    "rocketmq_brokeruntime_commitlog_disk_ratio", "rocketmq_brokeruntime_consumequeue_disk_ratio",
    "rocketmq_brokeruntime_commitlogdir_capacity_free",
    "rocketmq_brokeruntime_commitlogdir_capacity_total",
    "rocketmq_brokeruntime_commitlog_maxoffset", "rocketmq_brokeruntime_commitlog_minoffset",
    "rocketmq_brokeruntime_put_tps10", "rocketmq_brokeruntime_getfound_tps10",
    "rocketmq_brokeruntime_gettotal_tps10", "rocketmq_brokeruntime_gettransfered_tps10",
    "rocketmq_brokeruntime_getmiss_tps10",
    "rocketmq_brokeruntime_send_threadpoolqueue_headwait_timemills",
    "rocketmq_brokeruntime_pull_threadpoolqueue_headwait_timemills",
    "rocketmq_brokeruntime_query_threadpoolqueue_headwait_timemills",
    *(f"rocketmq_brokeruntime_pmdt_{s}" for s in (
        "0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s",
        "1to2s", "2to3s", "3to4s", "4to5s", "5to10s", "10stomore",
    )),
}  # fmt: skip
RUNTIME_LABELS = {"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}

Series = dict[str, list[tuple[dict[str, str], float]]]


async def scrape_series(port: int) -> tuple[Series, dict[str, str]]:
    """Every sample by family name, and each family's type."""
    status, body = await http_get(port)
    assert status == 200
    series: Series = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(body):
        types[family.name] = family.type
        for s in family.samples:
            series.setdefault(s.name, []).append((dict(s.labels), s.value))
    return series, types


def one(series: Series, name: str, **labels: str) -> tuple[dict[str, str], float]:
    found = [(ls, v) for ls, v in series.get(name, []) if labels.items() <= ls.items()]
    assert len(found) == 1, (name, labels, series.get(name))
    return found[0]


async def test_the_exporter_series_after_traffic(broker: Broker, client: RemotingClient) -> None:
    broker.topics.create_internal(TOPIC, 2, 6)
    retry, dlq = f"%RETRY%{GROUP}", f"%DLQ%{GROUP}"
    broker.topics.create_internal(dlq, 1, 6)  # as after a message's last retry
    # A push consumer subscribes to its group's retry topic too.
    await heartbeat(client, broker.address, "10.0.0.9@4242", GROUP, {TOPIC: "*", retry: "*"})
    broker.stats.sample()
    for n in range(8):
        await send_ok(client, broker.address, TOPIC, b"x" * 50, queue_id=n % 2)
    await wait_until(lambda: broker.store.get_max_offset(TOPIC, 1) == 4, "dispatch")
    got = await pull(client, broker.address, TOPIC, queue_id=0, group=GROUP)
    assert got.code == ResponseCode.SUCCESS
    broker.offsets.commit(GROUP, TOPIC, 0, 4)
    broker.offsets.commit(GROUP, TOPIC, 1, 1)
    broker.stats.sample()

    series, types = await scrape_series(broker.metrics_port)
    missing = DASHBOARD_FAMILIES - set(series)
    assert not missing, sorted(missing)
    assert all(types[name] == "gauge" for name in DASHBOARD_FAMILIES)
    node = {"cluster": "DefaultCluster", "broker": "broker-a"}

    labels, lag = one(series, "rocketmq_group_diff", group=GROUP, topic=TOPIC)
    assert labels == {
        "group": GROUP,
        "topic": TOPIC,
        "countOfOnlineConsumers": "1",
        "msgModel": "1",
    }
    assert lag == 3  # queue 1: 4 stored, 1 committed
    labels, online = one(series, "rocketmq_group_count", group=GROUP)
    assert online == 1 and labels["localaddr"] == "10.0.0.9@4242" and ":" in labels["caddr"]
    _, offset = one(series, "rocketmq_consumer_offset", **node, topic=TOPIC, group=GROUP)
    assert offset == 5
    labels, retry_lag = one(series, "rocketmq_group_retrydiff", group=GROUP)
    assert labels["topic"] == retry and retry_lag == 0  # the topic keeps its prefix
    labels, _ = one(series, "rocketmq_topic_dlq_offset", group=GROUP)
    assert labels == {**node, "group": GROUP}  # the group, the prefix taken off
    _, latency = one(series, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=GROUP)
    assert latency >= 0
    _, produced = one(series, "rocketmq_producer_offset", **node, topic=TOPIC)
    assert produced == 8
    _, tps = one(series, "rocketmq_producer_tps", **node, topic=TOPIC)
    assert tps > 0
    _, got_tps = one(series, "rocketmq_consumer_tps", **node, topic=TOPIC, group=GROUP)
    assert got_tps > 0
    labels, broker_tps = one(series, "rocketmq_broker_tps", broker="broker-a")
    assert labels == {"cluster": "DefaultCluster", "brokerIP": broker.address, "broker": "broker-a"}
    assert broker_tps > 0

    labels, puts = one(series, "rocketmq_brokeruntime_msg_put_total_today_now")
    assert set(labels) == RUNTIME_LABELS and labels["brokerIP"] == broker.address
    assert labels["brokerHost"] == "" and int(labels["boottime"]) == broker.boot_timestamp_ms
    assert puts == 8
    _, total = one(series, "rocketmq_brokeruntime_commitlogdir_capacity_total")
    _, free = one(series, "rocketmq_brokeruntime_commitlogdir_capacity_free")
    assert 0 < free <= total
    _, ratio = one(series, "rocketmq_brokeruntime_commitlog_disk_ratio")
    assert 0 < ratio < 1
    buckets = sum(v for name in series if "pmdt_" in name for _l, v in series[name])
    assert buckets == 8  # this minute's puts, one bucket each


async def test_the_runtime_table_has_every_figure_the_exporter_parses(broker: Broker) -> None:
    """rocketmq-exporter publishes no runtime series at all for a broker whose
    GET_BROKER_RUNTIME_INFO lacks a key it parses: every one is there and parses."""
    table = runtime_table(broker)
    for suffix, _doc, key, field in RUNTIME_FAMILIES:
        assert runtime_value(table, key, field) is not None, (suffix, key)
    assert table["commitLogDirCapacity"].startswith("Total : ")
    assert len(table["putTps"].split()) == 3


async def test_each_online_consumers_own_figures_are_scraped(
    namesrv: NameServer, broker: Broker
) -> None:
    """The six ``rocketmq_client_*`` families: the consumer's statusTable, asked for at the
    scrape, one series per (clientAddr, clientId, group, topic), its retry topic included."""
    topic, group = "TopicClientFigures", "cg-client-figures"
    await create_topic(broker, topic, queues=2)
    async with Producer("pg-client-figures", namesrv.address) as producer:
        for n in range(8):
            await producer.send(Message(topic, f"m{n}".encode()))
    seen: list[str] = []
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic)(lambda m: seen.append(m.msg_id))
    async with consumer:
        await wait_until(lambda: len(seen) == 8, "eight consumed")
        (channel,) = broker.consumers.groups[group].channels.values()
        series, types = await scrape_series(broker.metrics_port)
    labels, ok_tps = one(series, "rocketmq_client_consume_ok_msg_tps", group=group, topic=topic)
    assert labels == {
        "clientAddr": channel.peer, "clientId": channel.client_id, "group": group, "topic": topic,
    }  # fmt: skip
    assert ok_tps > 0 and one(series, "rocketmq_client_consumer_pull_tps", topic=topic)[1] > 0
    for name in (
        "rocketmq_client_consume_fail_msg_count", "rocketmq_client_consume_fail_msg_tps",
        "rocketmq_client_consume_rt", "rocketmq_client_consumer_pull_rt",
    ):  # fmt: skip
        assert types[name] == "gauge"
        one(series, name, group=group, topic=f"%RETRY%{group}")
    assert one(series, "rocketmq_client_consume_fail_msg_count", topic=topic)[1] == 0
    # Gone offline, the consumer is no longer asked nor shown.
    series, _ = await scrape_series(broker.metrics_port)
    assert not [s for s in series.get("rocketmq_client_consume_rt", []) if s[0]["group"] == group]
