"""``RouteTable``: which brokers serve which topics, and which brokers are alive.

RocketMQ counterpart: ``RouteInfoManager`` (topicQueueTable, brokerAddrTable,
clusterAddrTable, brokerLiveTable, filterServerTable) with its registration rules
(protocol.md §7.9): only a master (id 0) updates a topic's queue data, and only when its
DataVersion changed or it registers for the first time; an address re-registered under a new
id loses the old id; a broker that goes silent, or whose connection closes, is removed with
everything that only it provided.

The table is touched only from the event loop, so it needs no lock (Java's read-write lock
guards against its Netty worker threads).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from remoting.bodies import PERM_WRITE, DataVersion, TopicConfig
from remoting.route import MASTER_ID, BrokerData, QueueData, TopicRouteData

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class BrokerLive:
    """What the name server remembers of a registered broker address."""

    last_update_ms: int
    data_version: DataVersion
    peer: object  # the connection it registered on (identity only)
    ha_server_addr: str
    cluster: str
    broker_name: str


@dataclass(slots=True)
class RegisterResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class RouteTable:
    """The name server's routing state."""

    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLive] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    # ---------------------------------------------------------------- registration

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: dict[str, TopicConfig],
        data_version: DataVersion,
        filter_servers: list[str],
        peer: object,
        now_ms: int,
    ) -> RegisterResult:
        """REGISTER_BROKER: the address under its name and id, the master's topics (when its
        DataVersion moved or it is new), the broker alive as of ``now_ms``; a slave learns
        its master's addresses."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        bd, first = self._add_address(cluster, broker_name, broker_id, broker_addr)
        if broker_id == MASTER_ID:
            prev = self.broker_live_table.get(broker_addr)
            changed = prev is None or (
                prev.data_version.counter,
                prev.data_version.timestamp,
            ) != (data_version.counter, data_version.timestamp)
            if changed or first:
                self._take_topics(broker_name, topics)
        if broker_addr not in self.broker_live_table:
            log.info(
                "broker_registered",
                broker_addr=broker_addr,
                broker_name=broker_name,
                broker_id=broker_id,
                cluster=cluster,
            )
        self.broker_live_table[broker_addr] = BrokerLive(
            now_ms, data_version, peer, ha_server_addr, cluster, broker_name
        )
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)
        return self._master_of(bd) if broker_id != MASTER_ID else RegisterResult()

    def _add_address(
        self, cluster: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> tuple[BrokerData, bool]:
        """The broker's address under its name and id; whether the name or the id is new."""
        first = broker_name not in self.broker_addr_table
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            bd = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
        # The same address under another id (a slave promoted, say): the old id goes.
        for bid, addr in list(bd.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del bd.broker_addrs[bid]
        old_addr = bd.broker_addrs.get(broker_id)
        bd.broker_addrs[broker_id] = broker_addr
        return bd, first or old_addr is None

    def _take_topics(self, broker_name: str, topics: dict[str, TopicConfig]) -> None:
        """A master's topics become its queue data in the routes."""
        for tc in topics.values():
            self._update_queue_data(broker_name, tc)
        # Topics the master no longer has leave the route too (Java leaves them until
        # deleted; a route to a queue the broker refuses helps nobody).
        for topic, per_broker in list(self.topic_queue_table.items()):
            if topic not in topics and broker_name in per_broker:
                del per_broker[broker_name]
                if not per_broker:
                    del self.topic_queue_table[topic]

    def _master_of(self, bd: BrokerData) -> RegisterResult:
        """What a slave is answered: its master's HA and remoting addresses, if it is alive."""
        result = RegisterResult()
        master = bd.broker_addrs.get(MASTER_ID)
        if master is not None:
            live = self.broker_live_table.get(master)
            if live is not None:
                result.ha_server_addr = live.ha_server_addr
                result.master_addr = master
        return result

    def _update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(
            broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag
        )
        per_broker = self.topic_queue_table.setdefault(tc.topic_name, {})
        if per_broker.get(broker_name) != qd:
            if broker_name in per_broker:
                log.info("topic_queue_data_changed", topic=tc.topic_name, broker_name=broker_name)
            per_broker[broker_name] = qd

    def is_version_changed(self, broker_addr: str, version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or (live.data_version.counter, live.data_version.timestamp) != (
            version.counter,
            version.timestamp,
        )

    def touch(self, broker_addr: str, now_ms: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = now_ms

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        bd = self.broker_addr_table.get(broker_name)
        name_gone = False
        if bd is not None and bd.broker_addrs.get(broker_id) == broker_addr:
            del bd.broker_addrs[broker_id]
            if not bd.broker_addrs:
                del self.broker_addr_table[broker_name]
                name_gone = True
        if name_gone:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of(broker_name)
        log.info(
            "broker_unregistered",
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
            cluster=cluster,
        )

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic, per_broker in list(self.topic_queue_table.items()):
            if per_broker.pop(broker_name, None) is not None and not per_broker:
                del self.topic_queue_table[topic]

    def _forget_addr(self, broker_addr: str, reason: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return
        broker_id = next(
            (
                bid
                for bid, addr in self.broker_addr_table.get(
                    live.broker_name, BrokerData("", "")
                ).broker_addrs.items()
                if addr == broker_addr
            ),
            -1,
        )
        log.warning("broker_removed", broker_addr=broker_addr, reason=reason)
        self.unregister_broker(
            cluster=live.cluster,
            broker_addr=broker_addr,
            broker_name=live.broker_name,
            broker_id=broker_id,
        )

    def scan_not_active(self, now_ms: int, expired_ms: int) -> list[str]:
        """Remove brokers not heard from for ``expired_ms``; returns their addresses."""
        gone = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + expired_ms < now_ms
        ]
        for addr in gone:
            self._forget_addr(addr, "expired")
        return gone

    def on_connection_closed(self, peer: object) -> list[str]:
        """Remove the brokers that registered on a connection that closed."""
        gone = [addr for addr, live in self.broker_live_table.items() if live.peer is peer]
        for addr in gone:
            self._forget_addr(addr, "connection_closed")
        return gone

    # ----------------------------------------------------------------------- queries

    def pick_topic_route(self, topic: str) -> TopicRouteData | None:
        per_broker = self.topic_queue_table.get(topic)
        if not per_broker:
            return None
        route = TopicRouteData()
        for broker_name in sorted(per_broker):
            qd = per_broker[broker_name]
            route.queue_datas.append(
                QueueData(
                    qd.broker_name,
                    qd.read_queue_nums,
                    qd.write_queue_nums,
                    qd.perm,
                    qd.topic_sys_flag,
                )
            )
            bd = self.broker_addr_table.get(broker_name)
            if bd is None:
                continue
            route.broker_datas.append(BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs)))
            for addr in bd.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    route.filter_server_table[addr] = list(servers)
        if not route.broker_datas:
            return None
        return route

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(
            topic
            for topic, per_broker in self.topic_queue_table.items()
            if any(name in per_broker for name in names)
        )

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (each is a topic), and one master address."""
        topics: list[str] = []
        addr: str | None = None
        for cluster, names in sorted(self.cluster_addr_table.items()):
            topics.append(cluster)
            for name in sorted(names):
                topics.append(name)
                bd = self.broker_addr_table.get(name)
                if addr is None and bd is not None and bd.broker_addrs:
                    addr = bd.master_addr or next(iter(bd.broker_addrs.values()))
        return topics, addr

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        per_broker = self.topic_queue_table.get(topic)
        if per_broker is None:
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            per_broker.pop(name, None)
        if not per_broker:
            del self.topic_queue_table[topic]

    def change_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        """WIPE_/ADD_WRITE_PERM_OF_BROKER: returns how many topics changed."""
        count = 0
        for per_broker in self.topic_queue_table.values():
            qd = per_broker.get(broker_name)
            if qd is None:
                continue
            qd.perm = qd.perm & ~PERM_WRITE if wipe else qd.perm | PERM_WRITE
            count += 1
        return count

    def cluster_info_json(self) -> dict[str, object]:
        return {
            "brokerAddrTable": {
                name: bd.to_json() for name, bd in sorted(self.broker_addr_table.items())
            },
            "clusterAddrTable": {
                cluster: sorted(names) for cluster, names in sorted(self.cluster_addr_table.items())
            },
        }
