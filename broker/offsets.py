"""``OffsetTable``: committed consumer offsets, persisted to ``config/consumerOffset.json``.

RocketMQ counterpart: ``ConsumerOffsetManager``. Keys are ``topic@group``; values map queue
id → the next queue offset the group will consume. The file is written every
``flushConsumerOffsetInterval`` (5 s) when something changed, and at shutdown, in RocketMQ's
format (``{"offsetTable":{"T@G":{"0":12}}}``; a real broker writes the queue ids unquoted and
we read both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from broker.persist import read_json, write_json

log = structlog.get_logger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


class OffsetTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self._dirty = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def load(self) -> None:
        doc = read_json(self.path)
        if doc is None:
            return
        table = doc.get("offsetTable") or {}
        self.table = {
            str(k): {int(q): int(o) for q, o in per_queue.items()} for k, per_queue in table.items()
        }
        log.info("consumer_offsets_loaded", path=str(self.path), entries=len(self.table))

    def snapshot(self) -> dict[str, Any] | None:
        """The file's document if anything changed since the last snapshot, else None."""
        if not self._dirty:
            return None
        self._dirty = False
        return {
            "offsetTable": {
                k: {str(q): o for q, o in sorted(per_queue.items())}
                for k, per_queue in self.table.items()
            }
        }

    def persist(self) -> None:
        doc = self.snapshot()
        if doc is not None:
            write_json(self.path, doc)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        per_queue = self.table.setdefault(self.key(topic, group), {})
        if per_queue.get(queue_id) != offset:
            per_queue[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group has none for the queue."""
        per_queue = self.table.get(self.key(topic, group))
        if per_queue is None:
            return -1
        return per_queue.get(queue_id, -1)

    def queues_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(topic, group), {}))

    def topics_of_group(self, group: str) -> set[str]:
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {k[: -len(suffix)] for k in self.table if k.endswith(suffix)}

    def remove_topic(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        for k in [k for k in self.table if k.startswith(prefix)]:
            del self.table[k]
            self._dirty = True
