"""The series rocketmq-exporter publishes, served by the broker itself, so the Grafana boards
and alert rules written for the exporter work against the metrics port unchanged.

RocketMQ counterpart: apache/rocketmq-exporter's ``RMQMetricsCollector`` and
``MetricsCollectTask``: the same family names, HELP texts (typos kept), label names in the
same order and the same values — read here from the broker's own tables at scrape time where
the exporter asks the broker over the admin API once a minute: group lag per topic
(``rocketmq_group_diff``), topic and group rates from the one-minute statistics window
(VIEW_BROKER_STATS_DATA's), offsets, consume latency by store time, and the 72
``rocketmq_brokeruntime_*`` families parsed from the runtime table the way the exporter
parses GET_BROKER_RUNTIME_INFO. All gauges.

The six ``rocketmq_client_*`` families are each online consumer's own figures: before a
scrape is answered, every consumer connected to this broker is asked for its running info
(GET_CONSUMER_RUNNING_INFO, as the exporter asks through the broker each round), all at once
and for at most ``CLIENT_ASK_S``; a client that does not answer in time is left out of that
scrape. ``rocketmq_broker_commitlog_diff`` is gathered the same way on a master: its slaves'
addresses from the name server's cluster table and each slave's ``commitLogMaxOffset`` from
its runtime info, as the exporter reads them. The exporter itself never fills
``rocketmq_group_dlqdiff``, ``rocketmq_group_consume_tps`` and
``rocketmq_group_consume_total_offset``; neither do we.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.facets import (
    HasConfig,
    HasConsumers,
    HasOffsets,
    HasProducers,
    HasStats,
    HasStore,
    Routed,
    Tables,
)
from broker.runtime_info import RuntimeBroker, runtime_table
from broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from remoting.bodies import MessageModel, pop_queue_map
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import ConsumerRunningInfoRequestHeader

RETRY, DLQ = "%RETRY%", "%DLQ%"
TOPIC_LABELS = ["cluster", "broker", "topic"]
GROUP_LABELS = ["cluster", "broker", "topic", "group"]
LAG_LABELS = ["group", "topic", "countOfOnlineConsumers", "msgModel"]
BROKER_LABELS = ["cluster", "brokerIP", "broker"]
RUNTIME_LABELS = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]

# (family, HELP, runtime key, field): field None for a plain number, an int for the n-th
# value of a rate triplet, "free"/"total" for commitLogDirCapacity, "bucket:<name>" for a
# putMessageDistributeTime bucket. In the exporter's output order.
_PMDT = (
    ("0ms", "PutMessageDistributeTimeMap0ms", "<=0ms"),
    ("0to10ms", "PutMessageDistributeTimeMap0to10ms", "0~10ms"),
    ("10to50ms", "PutMessageDistributeTimeMap10to50ms", "10~50ms"),
    ("50to100ms", "PutMessageDistributeTimeMap50to100ms", "50~100ms"),
    ("100to200ms", "PutMessageDistributeTimeMap100to200ms", "100~200ms"),
    ("200to500ms", "PutMessageDistributeTimeMap200to500ms", "200~500ms"),
    ("500to1s", "PutMessageDistributeTimeMap500to1s", "500ms~1s"),
    ("1to2s", "PutMessageDistributeTimeMap1to2s", "1~2s"),
    ("2to3s", "PutMessageDistributeTimeMap2to3s", "2~3s"),
    ("3to4s", "PutMessageDistributeTimeMap3to4s", "3~4s"),
    ("4to5s", "PutMessageDistributeTimeMap4to5s", "4~5s"),
    ("5to10s", "PutMessageDistributeTimeMap5to10s", "5~10s"),
    ("10stomore", "PutMessageDistributeTimeMap10toMore", "10s~"),
)
RUNTIME_FAMILIES: tuple[tuple[str, str, str, int | str | None], ...] = (
    *((f"pmdt_{suffix}", help_text, "putMessageDistributeTime", f"bucket:{bucket}")
      for suffix, help_text, bucket in _PMDT),
    ("msg_put_total_today_now", "brokerRuntimeMsgPutTotalTodayNow", "msgPutTotalTodayNow", None),
    ("msg_gettotal_today_now", "brokerRuntimeMsgGetTotalTodayNow", "msgGetTotalTodayNow", None),
    ("dispatch_behind_bytes", "brokerRuntimeDispatchBehindBytes", "dispatchBehindBytes", None),
    ("put_message_size_total", "brokerRuntimePutMessageSizeTotal", "putMessageSizeTotal", None),
    ("put_message_average_size", "brokerRuntimePutMessageAverageSize",
     "putMessageAverageSize", None),
    ("query_threadpool_queue_capacity", "brokerRuntimeQueryThreadPoolQueueCapacity",
     "queryThreadPoolQueueCapacity", None),
    ("remain_transientstore_buffer_numbs", "brokerRuntimeRemainTransientStoreBufferNumbs",
     "remainTransientStoreBufferNumbs", None),
    ("earliest_message_timestamp", "brokerRuntimeEarliestMessageTimeStamp",
     "earliestMessageTimeStamp", None),
    ("putmessage_entire_time_max", "brokerRuntimePutMessageEntireTimeMax",
     "putMessageEntireTimeMax", None),
    ("start_accept_sendrequest_time", "brokerRuntimeStartAcceptSendRequestTimeStamp",
     "startAcceptSendRequestTimeStamp", None),
    ("send_threadpool_queue_size", "brokerRuntimeSendThreadPoolQueueSize",
     "sendThreadPoolQueueSize", None),
    ("putmessage_times_total", "brokerRuntimePutMessageTimesTotal", "putMessageTimesTotal", None),
    ("getmessage_entire_time_max", "brokerRuntimeGetMessageEntireTimeMax",
     "getMessageEntireTimeMax", None),
    ("pagecache_lock_time_mills", "brokerRuntimePageCacheLockTimeMills",
     "pageCacheLockTimeMills", None),
    ("commitlog_disk_ratio", "brokerRuntimeCommitLogDiskRatio", "commitLogDiskRatio", None),
    ("consumequeue_disk_ratio", "brokerRuntimeConsumeQueueDiskRatio",
     "consumeQueueDiskRatio", None),
    ("getfound_tps600", "brokerRuntimeGetFoundTps600", "getFoundTps", 2),
    ("getfound_tps60", "brokerRuntimeGetFoundTps60", "getFoundTps", 1),
    ("getfound_tps10", "brokerRuntimeGetFoundTps10", "getFoundTps", 0),
    ("gettotal_tps600", "brokerRuntimeGetTotalTps600", "getTotalTps", 2),
    ("gettotal_tps60", "brokerRuntimeGetTotalTps60", "getTotalTps", 1),
    ("gettotal_tps10", "brokerRuntimeGetTotalTps10", "getTotalTps", 0),
    ("gettransfered_tps600", "brokerRuntimeGetTransferedTps600", "getTransferedTps", 2),
    ("gettransfered_tps60", "brokerRuntimeGetTransferedTps60", "getTransferedTps", 1),
    ("gettransfered_tps10", "brokerRuntimeGetTransferedTps10", "getTransferedTps", 0),
    ("getmiss_tps600", "brokerRuntimeGetMissTps600", "getMissTps", 2),
    ("getmiss_tps60", "brokerRuntimeGetMissTps60", "getMissTps", 1),
    ("getmiss_tps10", "brokerRuntimeGetMissTps10", "getMissTps", 0),
    ("put_tps600", "brokerRuntimePutTps600", "putTps", 2),
    ("put_tps60", "brokerRuntimePutTps60", "putTps", 1),
    ("put_tps10", "brokerRuntimePutTps10", "putTps", 0),
    ("dispatch_maxbuffer", "brokerRuntimeDispatchMaxBuffer", "dispatchMaxBuffer", None),
    ("pull_threadpoolqueue_capacity", "brokerRuntimePullThreadPoolQueueCapacity",
     "pullThreadPoolQueueCapacity", None),
    ("send_threadpoolqueue_capacity", "brokerRuntimeSendThreadPoolQueueCapacity",
     "sendThreadPoolQueueCapacity", None),
    ("pull_threadpoolqueue_size", "brokerRuntimePullThreadPoolQueueSizeF",
     "pullThreadPoolQueueSize", None),
    ("query_threadpoolqueue_size", "brokerRuntimeQueryThreadPoolQueueSize",
     "queryThreadPoolQueueSize", None),
    ("pull_threadpoolqueue_headwait_timemills",
     "brokerRuntimePullThreadPoolQueueHeadWaitTimeMills",
     "pullThreadPoolQueueHeadWaitTimeMills", None),
    ("query_threadpoolqueue_headwait_timemills",
     "brokerRuntimeQueryThreadPoolQueueHeadWaitTimeMills",
     "queryThreadPoolQueueHeadWaitTimeMills", None),
    ("send_threadpoolqueue_headwait_timemills",
     "brokerRuntimeSendThreadPoolQueueHeadWaitTimeMills",
     "sendThreadPoolQueueHeadWaitTimeMills", None),
    ("msg_gettotal_yesterdaymorning", "brokerRuntimeMsgGetTotalYesterdayMorning",
     "msgGetTotalYesterdayMorning", None),
    ("msg_puttotal_yesterdaymorning", "brokerRuntimeMsgPutTotalYesterdayMorning",
     "msgPutTotalYesterdayMorning", None),
    ("msg_gettotal_todaymorning", "brokerRuntimeMsgGetTotalTodayMorning",
     "msgGetTotalTodayMorning", None),
    ("msg_puttotal_todaymorning", "brokerRuntimeMsgPutTotalTodayMorning",
     "msgPutTotalTodayMorning", None),
    ("commitlogdir_capacity_free", "brokerRuntimeCommitLogDirCapacityFree",
     "commitLogDirCapacity", "free"),
    ("commitlogdir_capacity_total", "brokerRuntimeCommitLogDirCapacityTotal",
     "commitLogDirCapacity", "total"),
    ("commitlog_maxoffset", "brokerRuntimeCommitLogMaxOffset", "commitLogMaxOffset", None),
    ("commitlog_minoffset", "brokerRuntimeCommitLogMinOffset", "commitLogMinOffset", None),
    ("remain_howmanydata_toflush", "brokerRuntimeRemainHowManyDataToFlush",
     "remainHowManyDataToFlush", "bytes"),
    ("put_latency_99", "brokerRuntimePutLatency99", "putLatency99", None),
    ("put_latency_999", "brokerRuntimePutLatency999", "putLatency999", None),
)  # fmt: skip

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50, "EiB": 1 << 60}  # fmt: skip


def parse_bytes(text: str) -> float:
    """``1.5 KiB`` -> 1536.0 (the exporter's conversion of humanReadableByteCount)."""
    number, _, unit = text.strip().rstrip(".").partition(" ")
    return float(number) * _UNITS.get(unit.strip(), 1)


def runtime_value(table: dict[str, str], key: str, field: int | str | None) -> float | None:
    """One runtime family's value from the runtime table, parsed as the exporter parses it
    (``BrokerRuntimeStats``); None when the table has no such figure."""
    raw = table.get(key)
    if raw is None:
        return None
    if field is None:
        return float(raw)
    if isinstance(field, int):
        parts = raw.split()
        return float(parts[field]) if field < len(parts) else 0.0
    if field in ("free", "total"):
        # "Total : 1.5 GiB, Free : 500.0 MiB."
        total_text, _, free_text = raw.partition(",")
        part = free_text if field == "free" else total_text
        return parse_bytes(part.split(":", 1)[1])
    if field == "bytes":
        return parse_bytes(raw)  # raw bytes, where the exporter drops the unit
    bucket = field.removeprefix("bucket:")
    for item in raw.split():
        name, _, count = item.rpartition(":")
        if name == f"[{bucket}]":
            return float(count)
    return 0.0


class ExporterBroker(
    RuntimeBroker, HasConfig, Tables, HasOffsets, HasConsumers, HasProducers, HasStore, HasStats,
    Routed, Protocol,
):  # fmt: skip
    """What the exporter's series are read from."""

    @property
    def address(self) -> str: ...

    @property
    def recovering(self) -> bool: ...


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


CLIENT_ASK_S = 2.0  # how long a scrape waits for the consumers' figures
CLIENT_LABELS = ["clientAddr", "clientId", "group", "topic"]
# (family, HELP, ConsumeStatus field), in the exporter's order
CLIENT_FAMILIES = (
    ("rocketmq_client_consume_fail_msg_count", "consumerClientFailedMsgCounts",
     "consumeFailedMsgs"),
    ("rocketmq_client_consume_fail_msg_tps", "consumerClientFailedTPS", "consumeFailedTPS"),
    ("rocketmq_client_consume_ok_msg_tps", "consumerClientOKTPS", "consumeOKTPS"),
    ("rocketmq_client_consume_rt", "consumerClientRT", "consumeRT"),
    ("rocketmq_client_consumer_pull_rt", "consumerClientPullRT", "pullRT"),
    ("rocketmq_client_consumer_pull_tps", "consumerClientPullTPS", "pullTPS"),
)  # fmt: skip
ClientRow = tuple[list[str], dict[str, Any]]  # the labels, one topic's ConsumeStatus


async def _ask(
    send: Callable[[RemotingCommand], Awaitable[RemotingCommand]],
    request: RemotingCommand,
    field: str,
) -> dict[str, Any] | None:
    """The object ``field`` of the JSON answer ``send`` gets for ``request``; None when no
    answer comes within CLIENT_ASK_S (``send``'s own wait), it is a refusal, or it has no
    such object. A running info's ``mqTable`` (fastjson's object keys) is set aside first."""
    try:
        answer = await send(request)
        if answer.code != ResponseCode.SUCCESS:
            return None
        text = bytes(answer.body_bytes).decode()
        if '"mqTable"' in text:
            text = pop_queue_map(text, "mqTable")[0]
        found = json.loads(text).get(field)
    except (RemotingError, TimeoutError, OSError, ValueError, AttributeError):
        return None  # gone, slow, or not one that reports this
    return found if isinstance(found, dict) else None


def _running_info(group: str, client_id: str) -> RemotingCommand:
    header = ConsumerRunningInfoRequestHeader(
        consumer_group=group, client_id=client_id, jstack_enable=False
    )
    return RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields())


class ExporterCollector(Collector):
    """rocketmq-exporter's families for this broker, built at scrape time (the consumers'
    figures gathered just before it by ``refresh``)."""

    def __init__(self, broker: ExporterBroker) -> None:
        self.broker = broker
        self._client_rows: list[ClientRow] = []
        self._slave_rows: list[tuple[str, int]] = []

    async def refresh(self) -> None:
        """Ask every online consumer for its figures, at once, for at most CLIENT_ASK_S."""
        if self.broker.recovering:
            return
        asked = [
            (group, channel.peer, channel.client_id, conn)
            for group, info in list(self.broker.consumers.groups.items())
            for conn, channel in list(info.channels.items())
        ]
        tables = await asyncio.gather(
            *(
                _ask(
                    functools.partial(conn.invoke, timeout_s=CLIENT_ASK_S),
                    _running_info(group, cid),
                    "statusTable",
                )
                for group, _peer, cid, conn in asked
            )
        )
        self._client_rows = [
            ([peer, cid, group, str(topic)], status)
            for (group, peer, cid, _conn), table in zip(asked, tables, strict=True)
            if table is not None
            for topic, status in sorted(table.items())
            if isinstance(status, dict)
        ]
        self._slave_rows = await self._slave_lag()

    async def _slave_lag(self) -> list[tuple[str, int]]:
        """(slave address, bytes of commit log it is behind) for each slave of this master
        that the name servers list and that answers within CLIENT_ASK_S."""
        reg = self.broker.registration
        if reg.broker_id != 0:
            return []
        slaves: list[str] = []
        for namesrv in reg.namesrv_addrs:
            table = await _ask(
                functools.partial(reg.client.invoke, namesrv, timeout_s=CLIENT_ASK_S),
                RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {}),
                "brokerAddrTable",
            )
            if table is not None:
                addrs = (table.get(reg.broker_name) or {}).get("brokerAddrs") or {}
                slaves = [str(a) for bid, a in sorted(addrs.items()) if str(bid) != "0"]
                break
        if not slaves:
            return []
        own = self.broker.store.commit_log.max_offset
        tables = await asyncio.gather(
            *(
                _ask(
                    functools.partial(reg.client.invoke, addr, timeout_s=CLIENT_ASK_S),
                    RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}),
                    "table",
                )
                for addr in slaves
            )
        )
        rows = []
        for addr, table in zip(slaves, tables, strict=True):
            figure = (table or {}).get("commitLogMaxOffset")
            with contextlib.suppress(ValueError):  # not a number: that slave is left out
                if figure is not None:
                    rows.append((addr, own - int(str(figure))))
        return rows

    def collect(self) -> Iterator[Metric]:
        if self.broker.recovering:
            return  # the store is loading on another thread: nothing to read yet
        lag, positions = self._groups()
        yield from lag
        yield from self._clients()
        yield from self._slaves()
        yield from self._producers()
        yield from self._topic_offsets()
        yield from self._topic_rates()
        yield from self._group_rates(*positions)
        yield from self._broker_rates()
        yield from self._runtime()

    # ---------------------------------------------------------------- groups' lag

    def _queues(self, topic: str) -> int:
        tc = self.broker.topics.get(topic)
        return tc.read_queue_nums if tc is not None else 0

    def _consumed_topics(self) -> list[tuple[str, str]]:
        """Every (topic, group) pair the exporter visits: a group online with a subscription
        to the topic or with offsets in it; dead-letter topics left out."""
        broker = self.broker
        pairs = {(t, g) for g, info in broker.consumers.groups.items() for t in info.subscriptions}
        for key in broker.offsets.table:
            topic, _, group = key.rpartition("@")
            pairs.add((topic, group))
        return sorted(p for p in pairs if not p[0].startswith(DLQ) and p[0] in broker.topics.table)

    def _groups(self) -> tuple[list[Metric], tuple[Metric, Metric]]:
        """The lag and online-consumer families, and the offset and latency ones (which
        the exporter writes with the group rates)."""
        broker = self.broker
        diff = _gauge("rocketmq_group_diff", "GroupDiff", LAG_LABELS)
        retry = _gauge("rocketmq_group_retrydiff", "GroupRetryDiff", LAG_LABELS)
        count = _gauge("rocketmq_group_count", "GroupCount", ["caddr", "localaddr", "group"])
        offset = _gauge("rocketmq_consumer_offset", "GroupBrokerTotalOffset", GROUP_LABELS)
        latency = _gauge(
            "rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", GROUP_LABELS
        )
        cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
        store = broker.store
        now_ms = int(time.time() * 1000)
        counted: set[str] = set()
        for topic, group in self._consumed_topics():
            info = broker.consumers.get(group)
            channels = list(info.channels.values()) if info is not None else []
            model = info.message_model if info is not None else MessageModel.CLUSTERING
            clustering = model is MessageModel.CLUSTERING
            if group not in counted:
                counted.add(group)
                count.add_metric(
                    [
                        ",".join(c.peer for c in channels),
                        ",".join(c.client_id for c in channels),
                        group,
                    ],
                    len(channels),
                )
            total_lag = total_offset = 0
            worst = 0
            for qid in range(self._queues(topic)):
                end = store.get_max_offset(topic, qid)
                committed = max(0, broker.offsets.query(group, topic, qid))
                total_lag += end - committed
                total_offset += committed
                if committed < end:
                    stored = store.get_message_store_timestamp(topic, qid, committed)
                    if stored > 0:
                        worst = max(worst, now_ms - stored)
            labels = [group, topic, str(len(channels)), "1" if clustering else "0"]
            if clustering:
                (retry if topic.startswith(RETRY) else diff).add_metric(labels, total_lag)
                latency.add_metric([cluster, name, topic, group], worst)
            offset.add_metric([cluster, name, topic, group], total_offset)
        return [diff, retry, count], (offset, latency)

    def _clients(self) -> Iterator[Metric]:
        for name, doc, field in CLIENT_FAMILIES:
            family = _gauge(name, doc, CLIENT_LABELS)
            for labels, status in self._client_rows:
                try:
                    family.add_metric(labels, float(status.get(field) or 0))
                except (TypeError, ValueError):
                    continue  # a figure that is not a number: that row is left out
            yield family

    def _slaves(self) -> Iterator[Metric]:
        family = _gauge(
            "rocketmq_broker_commitlog_diff",
            "brokerCommitLogDiffGauge",
            ["cluster", "brokerIP", "broker"],
        )
        config = self.broker.config
        for addr, behind in self._slave_rows:
            family.add_metric([config.broker_cluster_name, addr, config.broker_name], behind)
        yield family

    def _producers(self) -> Iterator[Metric]:
        broker = self.broker
        family = _gauge(
            "rocketmq_producer_count", "producer instance counter", ["cluster", "broker", "group"]
        )
        for group, channels in sorted(broker.producers.groups.items()):
            family.add_metric(
                [broker.config.broker_cluster_name, broker.config.broker_name, group],
                len(channels),
            )
        yield family

    # ------------------------------------------------------------------- topics

    def _topic_offsets(self) -> Iterator[Metric]:
        broker = self.broker
        produced = _gauge("rocketmq_producer_offset", "TopicOffset", TOPIC_LABELS)
        retry = _gauge("rocketmq_topic_retry_offset", "TopicRetryOffset", TOPIC_LABELS)
        dlq = _gauge(
            "rocketmq_topic_dlq_offset", "TopicRetryOffset", ["cluster", "broker", "group"]
        )
        cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
        for topic in sorted(broker.topics.table):
            total = sum(broker.store.get_max_offset(topic, q) for q in range(self._queues(topic)))
            if topic.startswith(RETRY):
                retry.add_metric([cluster, name, topic], total)
            elif topic.startswith(DLQ):
                dlq.add_metric([cluster, name, topic.replace(DLQ, "")], total)
            else:
                produced.add_metric([cluster, name, topic], total)
        yield produced
        yield retry
        yield dlq

    def _topic_rates(self) -> Iterator[Metric]:
        broker = self.broker
        tps = _gauge("rocketmq_producer_tps", "TopicPutNums", TOPIC_LABELS)
        size = _gauge("rocketmq_producer_message_size", "TopicPutMessageSize", TOPIC_LABELS)
        cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
        for topic in sorted(broker.stats.topic_put):
            if topic.startswith((RETRY, DLQ)):
                continue
            for family, stat in ((tps, TOPIC_PUT_NUMS), (size, TOPIC_PUT_SIZE)):
                data = broker.stats.view(stat, topic)
                if data is not None:  # as the exporter: only what has a statistic
                    family.add_metric([cluster, name, topic], round(data.minute.tps, 2))
        yield tps
        yield size

    def _group_rates(self, offset: Metric, latency: Metric) -> Iterator[Metric]:
        broker = self.broker
        tps = _gauge("rocketmq_consumer_tps", "GroupGetNums", GROUP_LABELS)
        size = _gauge("rocketmq_consumer_message_size", "GroupGetMessageSize", GROUP_LABELS)
        back = _gauge("rocketmq_send_back_nums", "SendBackNums", GROUP_LABELS)
        cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
        stats = broker.stats
        keys = sorted(set(stats.group_topic_get) | set(stats.group_topic_send_back))
        for group, topic in keys:
            if topic.startswith((RETRY, DLQ)):
                continue
            labels = [cluster, name, topic, group]
            key = f"{topic}@{group}"
            for family, stat in ((tps, GROUP_GET_NUMS), (size, GROUP_GET_SIZE)):
                data = stats.view(stat, key)
                if data is not None:
                    family.add_metric(labels, round(data.minute.tps, 2))
            sent_back = stats.view(SNDBCK_PUT_NUMS, key)
            if sent_back is not None:
                back.add_metric(labels, sent_back.minute.sum)  # a count, not a rate
        yield tps
        yield offset
        yield size
        yield back
        yield latency

    # ------------------------------------------------------------------- broker

    def _broker_rates(self) -> Iterator[Metric]:
        broker = self.broker
        cluster = broker.config.broker_cluster_name
        labels = [cluster, broker.address, broker.config.broker_name]
        for family_name, doc, stat in (
            ("rocketmq_broker_tps", "BrokerPutNums", BROKER_PUT_NUMS),
            ("rocketmq_broker_qps", "BrokerGetNums", BROKER_GET_NUMS),
        ):
            family = _gauge(family_name, doc, BROKER_LABELS)
            data = broker.stats.view(stat, cluster)
            if data is not None:
                family.add_metric(labels, round(data.minute.tps, 2))
            yield family

    def _runtime(self) -> Iterator[Metric]:
        broker = self.broker
        table = runtime_table(broker)
        labels = [
            broker.config.broker_cluster_name,
            broker.address,
            "",  # brokerHost: always empty in the exporter's series
            table["brokerVersionDesc"],
            table["bootTimestamp"],
            table["brokerVersion"],
        ]
        for suffix, doc, key, field in RUNTIME_FAMILIES:
            family = _gauge(f"rocketmq_brokeruntime_{suffix}", doc, RUNTIME_LABELS)
            value = runtime_value(table, key, field)
            if value is not None:
                family.add_metric(labels, value)
            yield family
