"""Who is connected: producer and consumer groups, their channels and subscriptions.

RocketMQ counterpart: ``ConsumerManager`` with ``ConsumerGroupInfo``, ``ProducerManager`` and
``ClientHousekeepingService``. A heartbeat registers a client's channel (its connection) in
each of its groups; a consumer group also keeps the subscriptions its consumers reported.
When the set of channels or subscriptions of a consumer group changes, every consumer of the
group is told with NOTIFY_CONSUMER_IDS_CHANGED (oneway) so it rebalances at once. Channels
leave on UNREGISTER_CLIENT, when their connection closes, or after ``channelExpiredTime``
(120 s) without a heartbeat.

Tag hash codes are always recomputed here from the tag strings: the C++ client sends
``atoi(tag)`` in ``codeSet`` (protocol.md §8.5), which would filter out every message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from codec import java_hash
from remoting.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.headers import ConsumerGroupRequestHeader

log = structlog.get_logger(__name__)


def normalize_subscription(sub: SubscriptionData) -> SubscriptionData:
    """The subscription with its tag set and hash codes rebuilt from the expression."""
    if sub.expression_type.upper() != "TAG":
        return sub
    text = sub.sub_string.strip() if sub.sub_string else "*"
    if text in ("", "*"):
        return SubscriptionData(
            sub.topic, "*", [], [], sub.sub_version, "TAG", sub.class_filter_mode
        )
    tags = [t.strip() for t in text.split("||") if t.strip()]
    return SubscriptionData(
        sub.topic,
        text,
        tags,
        [java_hash(t) for t in tags],
        sub.sub_version,
        "TAG",
        sub.class_filter_mode,
    )


@dataclass(slots=True)
class ClientChannel:
    client_id: str
    language: int
    version: int
    last_update_ms: int
    peer: str


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channels: dict[Connection, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})

    def update_channel(self, conn: Connection, info: ClientChannel) -> bool:
        old = self.channels.get(conn)
        self.channels[conn] = info
        return old is None or old.client_id != info.client_id

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """RocketMQ's rules: a newer subVersion replaces a subscription; only added or
        removed topics count as a change (and so notify the group)."""
        changed = False
        seen = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


Notifier = Callable[[Connection, RemotingCommand], None]


class ConsumerManager:
    """Consumer groups on this broker.

    Args:
        notify: sends a oneway request on a client's connection.
    """

    def __init__(self, notify: Notifier) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._notify = notify

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def register(
        self,
        group: str,
        conn: Connection,
        channel: ClientChannel,
        *,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: list[SubscriptionData],
        notify: bool,
    ) -> bool:
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where
            )
            log.info("consumer_group_registered", group=group, message_model=message_model.name)
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        new_channel = info.update_channel(conn, channel)
        if new_channel:
            log.info("consumer_joined", group=group, client_id=channel.client_id, peer=channel.peer)
        changed_subs = info.update_subscriptions(normalize_subscription(s) for s in subscriptions)
        changed = new_channel or changed_subs
        if changed and notify:
            self.notify_ids_changed(group)
        return changed

    def unregister(self, group: str, conn: Connection, *, notify: bool) -> None:
        info = self.groups.get(group)
        if info is None:
            return
        channel = info.channels.pop(conn, None)
        if channel is None:
            return
        log.info("consumer_left", group=group, client_id=channel.client_id, reason="unregister")
        if not info.channels:
            del self.groups[group]
            log.info("consumer_group_removed", group=group)
        elif notify:
            self.notify_ids_changed(group)

    def connection_closed(self, conn: Connection, reason: str = "connection_closed") -> None:
        for group, info in list(self.groups.items()):
            channel = info.channels.pop(conn, None)
            if channel is None:
                continue
            log.info("consumer_left", group=group, client_id=channel.client_id, reason=reason)
            if not info.channels:
                del self.groups[group]
                log.info("consumer_group_removed", group=group)
            else:
                self.notify_ids_changed(group)

    def expired(self, now_ms: int, expired_ms: int) -> list[Connection]:
        """Connections of consumers that sent no heartbeat for ``expired_ms``."""
        return [
            conn
            for info in self.groups.values()
            for conn, ch in info.channels.items()
            if ch.last_update_ms + expired_ms < now_ms
        ]

    def notify_ids_changed(self, group: str) -> None:
        info = self.groups.get(group)
        if info is None:
            return
        header = ConsumerGroupRequestHeader(consumer_group=group).to_ext_fields()
        for conn in list(info.channels):
            request = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(header), oneway=True
            )
            try:
                self._notify(conn, request)
            except Exception:  # a closing connection must not stop the others' notice
                log.exception("notify_consumer_ids_changed_failed", group=group)


class ProducerManager:
    """Producer groups on this broker (needed to reach a producer for transaction checks)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[Connection, ClientChannel]] = {}

    def register(self, group: str, conn: Connection, channel: ClientChannel) -> None:
        channels = self.groups.setdefault(group, {})
        if conn not in channels:
            log.info("producer_joined", group=group, client_id=channel.client_id, peer=channel.peer)
        channels[conn] = channel

    def unregister(self, group: str, conn: Connection) -> None:
        channels = self.groups.get(group)
        if channels is None or channels.pop(conn, None) is None:
            return
        log.info("producer_left", group=group, reason="unregister")
        if not channels:
            del self.groups[group]

    def connection_closed(self, conn: Connection, reason: str = "connection_closed") -> None:
        for group, channels in list(self.groups.items()):
            if channels.pop(conn, None) is not None:
                log.info("producer_left", group=group, reason=reason)
                if not channels:
                    del self.groups[group]

    def expired(self, now_ms: int, expired_ms: int) -> list[Connection]:
        return [
            conn
            for channels in self.groups.values()
            for conn, ch in channels.items()
            if ch.last_update_ms + expired_ms < now_ms
        ]
