"""``TopicTable``: the broker's topics, persisted to ``config/topics.json``.

RocketMQ counterpart: ``TopicConfigManager`` (system topics at start, auto-creation through the
``TBW102`` template on first send, retry and dead-letter topics on demand, a DataVersion bumped
on each change) and ``TopicValidator`` (name rules, reserved and forbidden topics;
protocol.md §9.6). ``on_change(topic)`` runs after every change; the broker announces the
topic to its name servers there, and a request that created a topic answers once that
announcement is over (``Registration.settled``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from broker.persist import JsonFile, read_json
from remoting.bodies import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SYSTEM_TOPICS,
    DataVersion,
    TopicConfig,
    TopicConfigWrapper,
)

log = structlog.get_logger(__name__)

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # RocketMQ 5's timer messages wait here
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

TOPIC_MAX_LENGTH = 127
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")

# Sending to these is refused with NO_PERMISSION: TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
# plus the timer topic and TBW102; every ``rmq_sys_`` topic as well (send_forbidden).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TIMER_TOPIC,
    }
)


def check_topic_name(topic: str) -> str | None:
    """Why ``topic`` is not a valid name (TopicValidator.validateTopic), or None."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not _VALID_NAME.fullmatch(topic):
        return (
            f"The specified topic[{topic}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


# RocketMQ 5's topic attribute for the message types a topic takes (TopicAttributes
# .TOPIC_MESSAGE_TYPE_ATTRIBUTE); the only attribute served here.
MESSAGE_TYPE_ATTRIBUTE = "message.type"
TOPIC_MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


def altered_attributes(current: dict[str, str], alter: str | None) -> dict[str, str]:
    """``current`` changed as an UPDATE_AND_CREATE_TOPIC's ``attributes`` says
    (``+key=value`` sets, ``-key`` removes, comma-separated; None or empty: unchanged).

    Raises:
        ValueError: an entry that is neither form, a key other than message.type, or a
            message type RocketMQ does not know (named).
    """
    out = dict(current)
    for raw in (alter or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        sign, body = entry[0], entry[1:]
        key, eq, value = body.partition("=")
        if sign not in "+-" or not key or (sign == "+" and not eq) or (sign == "-" and eq):
            raise ValueError(f"attribute {entry!r} is neither +key=value nor -key")
        if key != MESSAGE_TYPE_ATTRIBUTE:
            raise ValueError(f"unsupported attribute key {key!r}: only {MESSAGE_TYPE_ATTRIBUTE}")
        if sign == "-":
            out.pop(key, None)
        elif value.upper() not in TOPIC_MESSAGE_TYPES:
            raise ValueError(
                f"{MESSAGE_TYPE_ATTRIBUTE} {value!r} is none of {', '.join(TOPIC_MESSAGE_TYPES)}"
            )
        else:
            out[key] = value.upper()
    return out


def send_forbidden(topic: str) -> bool:
    """Whether a client may not send to ``topic`` (``TopicValidator.isNotAllowedSendTopic``).

    Stricter than RocketMQ, which stores a raw send to TBW102 and to the ``rmq_sys_`` topics:
    the first is only a template for auto-creation, and the others (pop revive, timer wheel)
    are read by the broker's own services, which take whatever they find there for a record
    they wrote. The system topics clients do send to stay open: RMQ_SYS_TRACE_TOPIC (message
    traces; the prefix is case-sensitive), BenchmarkTest, the cluster and broker name topics
    (``mqadmin clusterRT`` and ``sendMsgStatus``) and ``<cluster>_REPLY_TOPIC``.
    """
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


class TopicTable:
    """Topic name → TopicConfig for one broker.

    Args:
        path: ``config/topics.json``.
        on_change: called with the topic's name after it is created, updated or deleted.
    """

    def __init__(
        self,
        path: Path,
        *,
        cluster: str,
        broker_name: str,
        broker_permission: int,
        auto_create_topic_enable: bool,
        default_topic_queue_nums: int,
        delay_level_count: int,
        trace_topic: str | None = None,
    ) -> None:
        self.path = path
        self.file = JsonFile(path)
        self.cluster = cluster
        self.broker_name = broker_name
        self.auto_create_topic_enable = auto_create_topic_enable
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.on_change: Callable[[str], None] | None = None
        self._system: set[str] = set(SYSTEM_TOPICS) | {
            cluster,
            broker_name,
            f"{cluster}_REPLY_TOPIC",
        }
        # System topics exist before anything is loaded, as in TopicConfigManager's
        # constructor; a loaded file may override their settings.
        builtins = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(cluster, 16, 16, broker_permission | PERM_INHERIT),
            TopicConfig(broker_name, 1, 1, broker_permission | PERM_INHERIT),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, delay_level_count, delay_level_count),
            TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1),
        ]
        if trace_topic:
            # traceTopicEnable: the topic traced clients write to, one queue, a system topic
            # whatever its name (msgTraceTopicName), as TopicConfigManager makes it.
            builtins.append(TopicConfig(trace_topic, 1, 1))
            self._system.add(trace_topic)
        if auto_create_topic_enable:
            builtins.insert(
                0,
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC,
                    default_topic_queue_nums,
                    default_topic_queue_nums,
                    PERM_INHERIT | PERM_READ | PERM_WRITE,
                ),
            )
        for tc in builtins:
            self.table[tc.topic_name] = tc

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        doc = read_json(self.path)
        if doc is None:
            return
        wrapper = TopicConfigWrapper.from_json(doc)
        self.table.update(wrapper.topic_config_table)
        if not self.auto_create_topic_enable:
            # A TBW102 left in the file by an earlier run must not keep auto-creation on.
            tbw = self.table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
            if tbw is not None:
                tbw.perm &= ~PERM_INHERIT
        self.data_version = wrapper.data_version
        log.info("topics_loaded", path=str(self.path), topics=len(self.table))

    def persist(self) -> None:
        self.file.save_now(self.wrapper().to_json())

    def wrapper(self) -> TopicConfigWrapper:
        return TopicConfigWrapper(dict(self.table), self.data_version)

    def _changed(self, topic: str) -> None:
        self.data_version.bump(int(time.time() * 1000))
        # Off the event loop: a topic created on first send must not stall every other send
        # for an fsync.
        self.file.save_soon(self.wrapper().to_json())
        if self.on_change is not None:
            self.on_change(topic)

    # ----------------------------------------------------------------------- lookups

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self._system or topic.startswith(SYSTEM_TOPIC_PREFIX)

    # ---------------------------------------------------------------------- creation

    def create_for_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: create ``topic`` from its template, if allowed."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning(
                "topic_not_created", topic=topic, reason="template missing", template=default_topic
            )
            return None
        perm = template.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            log.warning(
                "topic_not_created",
                topic=topic,
                reason="template not inheritable",
                template=default_topic,
            )
            return None
        queue_nums = max(0, min(client_queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic,
            queue_nums,
            queue_nums,
            perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
        )
        self.table[topic] = tc
        log.info("topic_auto_created", topic=topic, queue_nums=queue_nums, template=default_topic)
        self._changed(topic)
        return tc

    def create_internal(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: retry and dead-letter topics."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = tc
        log.info("topic_created", topic=topic, queue_nums=queue_nums)
        self._changed(topic)
        return tc

    def update(self, tc: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC: create or replace."""
        old = self.table.get(tc.topic_name)
        self.table[tc.topic_name] = tc
        log.info(
            "topic_updated" if old is not None else "topic_created",
            topic=tc.topic_name,
            read_queue_nums=tc.read_queue_nums,
            write_queue_nums=tc.write_queue_nums,
            perm=tc.perm,
        )
        self._changed(tc.topic_name)

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        log.info("topic_deleted", topic=topic)
        self._changed(topic)
        return True
