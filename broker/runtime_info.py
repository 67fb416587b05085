"""The broker's runtime figures: GET_BROKER_RUNTIME_INFO's table, which mqadmin brokerStatus
and clusterList show and rocketmq-exporter turns into its ``rocketmq_brokeruntime_*`` series.

RocketMQ counterpart: ``AdminBrokerProcessor.prepareRuntimeInfo`` with
``StoreStatsService.getRuntimeInfo`` and ``MixAll.humanReadableByteCount``: the same keys and
the same value formats (rate triplets ``"<10 s> <60 s> <600 s>"``, ``Total : 1.5 GiB, Free :
500.0 MiB.``, the put-latency distribution ``[<=0ms]:N … [10s~]:N``), because the exporter
parses every one and publishes nothing for a broker that lacks one.
"""

from __future__ import annotations

import math
import shutil
from typing import Protocol

from broker.facets import HasConfig, HasHA, HasPullHold, HasStats, HasStore
from remoting.codes import PROTOCOL_VERSION
from remoting.dispatch import Lane
from store.ha import HAClient

BROKER_VERSION_DESC = "V4_9_8 (Aerolite)"
NO_TRANSIENT_POOL = 2**31 - 1  # remainTransientStoreBufferNumbs without a transient pool


class RuntimeBroker(HasConfig, HasStore, HasStats, HasPullHold, HasHA, Protocol):
    """What the runtime table reads: the store, the counters, the lanes and replication."""

    @property
    def boot_timestamp_ms(self) -> int: ...

    @property
    def send_lane(self) -> Lane: ...

    @property
    def pull_lane(self) -> Lane: ...

    @property
    def query_lane(self) -> Lane: ...

    @property
    def ha_client(self) -> HAClient | None: ...

    def earliest_message_time(self) -> int: ...


def human_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(n, false)``: ``512 B``, ``1.5 KiB``, ``2.0 GiB``."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _lane_figures(name: str, lane: Lane) -> dict[str, str]:
    return {
        f"{name}ThreadPoolQueueSize": str(lane.depth),
        f"{name}ThreadPoolQueueCapacity": str(lane.capacity),
        f"{name}ThreadPoolQueueHeadWaitTimeMills": str(int(lane.head_wait_s() * 1000)),
    }


def _store_figures(broker: RuntimeBroker) -> dict[str, str]:
    """The commit log, its disk, dispatch and flushing."""
    store = broker.store
    cl = store.commit_log
    usage = shutil.disk_usage(store.root)
    used_ratio = (usage.total - usage.free) / usage.total if usage.total else 0.0
    return {
        "commitLogMinOffset": str(cl.min_offset),
        "commitLogMaxOffset": str(cl.max_offset),
        "commitLogDirCapacity": (
            f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        ),
        # The commit log and the consume queues share the store's disk here.
        "commitLogDiskRatio": str(used_ratio),
        "consumeQueueDiskRatio": str(used_ratio),
        "remainHowManyDataToFlush": human_bytes(cl.max_offset - cl.flushed_offset),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes),
        "dispatchMaxBuffer": "0",
        # RocketMQ's runningFlags: "OK", or why consume queues and index stopped growing.
        "dispatchStatus": (
            "OK"
            if store.dispatch.healthy
            else f"FAILED at {store.dispatch.error_offset}: {store.dispatch.error}"
        ),
        "dispatchFailures": str(store.dispatch.failures),
        "pageCacheLockTimeMills": "0",  # appends never hold a lock across a wait here
        "remainTransientStoreBufferNumbs": str(NO_TRANSIENT_POOL),
        "earliestMessageTimeStamp": str(broker.earliest_message_time()),
    }


def _traffic_figures(broker: RuntimeBroker) -> dict[str, str]:
    """Messages in and out: totals, midnight snapshots, rates and put latencies."""
    stats = broker.stats
    sizes = sum(stats.topic_put_bytes.values())
    return {
        "msgPutTotalTodayNow": str(stats.put_total),
        "msgGetTotalTodayNow": str(stats.get_total),
        "msgPutTotalTodayMorning": str(stats.put_today_morning),
        "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
        "msgGetTotalTodayMorning": str(stats.get_today_morning),
        "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
        "putMessageTimesTotal": str(max(stats.put_total, 1)),
        "putMessageSizeTotal": str(sizes),
        "putMessageAverageSize": str(sizes / max(stats.put_total, 1)),
        "putMessageEntireTimeMax": str(int(stats.put_max_s * 1000)),
        "getMessageEntireTimeMax": str(int(stats.get_max_ms)),
        "putMessageDistributeTime": stats.put_distribution_text(),
        "putLatency99": f"{stats.put_latency_quantile_ms(0.99):.2f}",
        "putLatency999": f"{stats.put_latency_quantile_ms(0.999):.2f}",
        "putTps": stats.tps_triplet(1),
        "getFoundTps": stats.tps_triplet(2),
        "getMissTps": stats.tps_triplet(3),
        "getTransferedTps": stats.tps_triplet(4),
        "getTotalTps": stats.tps_triplet(5),
    }


def runtime_table(broker: RuntimeBroker) -> dict[str, str]:
    """The runtime table, every value a string as RocketMQ sends it."""
    table = {
        "brokerVersion": str(PROTOCOL_VERSION),
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "bootTimestamp": str(broker.boot_timestamp_ms),
        "runtime": broker.stats.runtime_text(),
        **_store_figures(broker),
        **_traffic_figures(broker),
        "startAcceptSendRequestTimeStamp": "0",
        **_lane_figures("send", broker.send_lane),
        **_lane_figures("pull", broker.pull_lane),
        **_lane_figures("query", broker.query_lane),
        "heldPullRequests": str(broker.pull_hold.count),
    }
    # Replication, where an operator looks for it: a master's connected slaves and how far
    # its log is ahead of what a slave confirmed; a slave's master.
    if broker.ha is not None:
        ha = broker.ha
        table["haConnectionNum"] = str(len(ha.slaves))
        table["haSlaveAckOffset"] = str(ha.acked_offset)
        lead = broker.store.commit_log.max_offset - ha.acked_offset
        table["haSlaveFallBehindBytes"] = str(max(0, lead))
    if broker.ha_client is not None:
        table["haMasterAddress"] = broker.ha_client.connected_to or ""
    return table
