"""Where a consumer group has got to in each queue.

RocketMQ counterpart: ``OffsetStore`` with ``RemoteBrokerOffsetStore`` (clustering: the broker
keeps the group's offsets; QUERY_CONSUMER_OFFSET on assignment, UPDATE_CONSUMER_OFFSET every
5 s and at shutdown) and ``LocalFileOffsetStore`` (broadcasting: every consumer keeps its own,
in a file under ``~/.rocketmq_offsets/<clientId>/<group>/offsets.json``).

An offset is the next queue offset to consume. The push consumer only ever stores the
lowest offset still in flight, so a crash redelivers rather than skips.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from remoting.route import MessageQueue

if TYPE_CHECKING:
    from client.instance import ClientInstance

log = logging.getLogger(__name__)

OFFSET_TIMEOUT_S = 5.0


class OffsetStore(Protocol):
    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None: ...

    def read(self, mq: MessageQueue) -> int:
        """The cached offset, -1 when none."""
        ...

    async def read_from_store(self, mq: MessageQueue) -> int:
        """The stored offset: -1 when the group has none, -2 when it could not be read."""
        ...

    async def persist(self, queues: list[MessageQueue]) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...


class RemoteOffsetStore:
    """Offsets kept by the broker that owns each queue."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.table: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def read(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def read_from_store(self, mq: MessageQueue) -> int:
        addr = self.instance.read_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(mq.topic)
            addr = self.instance.read_addr(mq.broker_name)
        if addr is None:
            return -2
        request = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(
                consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id
            ).to_ext_fields(),
        )
        try:
            response = await self.instance.invoke_broker(addr, request, OFFSET_TIMEOUT_S)
        except RemotingError as exc:
            log.warning("query_consumer_offset_failed queue=%s error=%s", mq, exc)
            return -2
        if response.code != ResponseCode.SUCCESS:
            return -1  # QUERY_NOT_FOUND and any other refusal mean "no offset", as in Java
        offset = QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset
        self.table[mq] = offset
        self._persisted[mq] = offset
        return offset

    async def persist(self, queues: list[MessageQueue]) -> None:
        for mq in queues:
            offset = self.table.get(mq)
            if offset is None or self._persisted.get(mq) == offset:
                continue
            addr = self.instance.read_addr(mq.broker_name)
            if addr is None:
                continue
            request = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader(
                    consumer_group=self.group,
                    topic=mq.topic,
                    queue_id=mq.queue_id,
                    commit_offset=offset,
                ).to_ext_fields(),
            )
            try:
                response = await self.instance.invoke_broker(addr, request, OFFSET_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("update_consumer_offset_failed queue=%s error=%s", mq, exc)
                continue
            if response.code == ResponseCode.SUCCESS:
                self._persisted[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)
        self._persisted.pop(mq, None)


def default_offset_dir() -> Path:
    return Path.home() / ".rocketmq_offsets"


class LocalOffsetStore:
    """Offsets in a local file, one per client and group (broadcasting)."""

    def __init__(self, directory: Path, client_id: str, group: str) -> None:
        safe_client = client_id.replace("/", "_").replace(":", "_")
        self.path = directory / safe_client / group / "offsets.json"
        self.table: dict[MessageQueue, int] = {}
        self._load()

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("local_offsets_unreadable path=%s error=%s", self.path, exc)
            return
        for item in doc.get("offsetTable", []):
            mq = MessageQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"]))
            self.table[mq] = int(item["offset"])

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def read(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def read_from_store(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def persist(self, queues: list[MessageQueue]) -> None:
        doc = {
            "offsetTable": [
                {**mq.to_json(), "offset": offset} for mq, offset in sorted(self.table.items())
            ]
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.path)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)
