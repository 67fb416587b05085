"""Routes: message queues and the topic route a name server hands out.

RocketMQ counterpart: ``MessageQueue``, ``TopicRouteData``, ``BrokerData`` and ``QueueData``
of ``org.apache.rocketmq.common``, plus the JSON conventions of their fastjson encoding
(protocol.md §8): bean keys sorted, nulls omitted, broker-id map keys. We always *write*
standard JSON with quoted keys and no whitespace (the Go client splits ``brokerAddrs`` on
``,`` and ``:`` and breaks on spaces); ``loads`` also *reads* fastjson's bare numeric keys
(``{0:"10.0.0.1:10911"}``), which real brokers and name servers emit and old store files hold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MASTER_ID = 0

# A JSON string literal, or a bare numeric object key preceded by "{" or ",".
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|([{,]\s*)(-?\d+)(\s*:)')


def _quote_bare_keys(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(2) is None:
            return m.group(0)  # a string literal: leave it alone
        return f'{m.group(1)}"{m.group(2)}"{m.group(3)}'

    return _TOKEN.sub(sub, text)


def dumps(obj: Any) -> bytes:
    """Compact standard JSON, as every client parses it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON written by us or by fastjson (bare numeric keys allowed).

    Raises:
        ValueError: not JSON even after quoting bare keys.
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_quote_bare_keys(text))


def _int(value: Any, default: int = 0) -> int:
    # C++ clients send numbers as strings in places; bools never appear where ints do.
    if value is None:
        return default
    return int(value)


# PermName: a topic's (and a broker's) permission bits.
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (RocketMQ ``MessageQueue``)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MessageQueue:
        return cls(str(d["topic"]), str(d["brokerName"]), _int(d["queueId"]))


@dataclass(slots=True)
class QueueData:
    """A topic's queues on one broker name."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            # <= 4.8 and the Go client spell it this way; clients ignore the field.
            "topicSynFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> QueueData:
        return cls(
            broker_name=str(d["brokerName"]),
            read_queue_nums=_int(d.get("readQueueNums")),
            write_queue_nums=_int(d.get("writeQueueNums")),
            perm=_int(d.get("perm")),
            topic_sys_flag=_int(d.get("topicSysFlag", d.get("topicSynFlag"))),
        )


@dataclass(slots=True)
class BrokerData:
    """The addresses of one broker name: broker id (0 = master) → ``host:port``."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (d.get("brokerAddrs") or {}).items()}
        return cls(str(d.get("cluster", "")), str(d["brokerName"]), addrs)


@dataclass(slots=True)
class TopicRouteData:
    """Reply body of GET_ROUTEINFO_BY_TOPIC (105)."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        out["queueDatas"] = [q.to_json() for q in self.queue_datas]
        return out

    def readable_queues(self, topic: str) -> list[MessageQueue]:
        """``topicRouteData2TopicSubscribeInfo``: every queue of ``topic`` on a broker that
        may be read, in route order."""
        return [
            MessageQueue(topic, qd.broker_name, i)
            for qd in self.queue_datas
            if qd.perm & PERM_READ
            for i in range(qd.read_queue_nums)
        ]

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicRouteData:
        return cls(
            queue_datas=[QueueData.from_json(q) for q in d.get("queueDatas") or []],
            broker_datas=[BrokerData.from_json(b) for b in d.get("brokerDatas") or []],
            filter_server_table={
                str(k): list(v) for k, v in (d.get("filterServerTable") or {}).items()
            },
            order_topic_conf=d.get("orderTopicConf"),
        )

    @classmethod
    def decode(cls, body: bytes | memoryview) -> TopicRouteData:
        return cls.from_json(loads(body))
