"""``OffsetTable``: committed consumer offsets, persisted to ``config/consumerOffset.json``.

RocketMQ counterpart: ``ConsumerOffsetManager``. Keys are ``topic@group``; values map queue
id → the next queue offset the group will consume. The file is written every
``flushConsumerOffsetInterval`` (5 s) when something changed, and at shutdown, in RocketMQ's
format (``{"offsetTable":{"T@G":{"0":12}}}``; a real broker writes the queue ids unquoted and
we read both).

Every change bumps the table's ``DataVersion`` (RocketMQ 5 keeps one too and sends it with
GET_ALL_CONSUMER_OFFSET), and the version of each queue's last change is remembered while the
broker runs. That is what lets a master take over an offset its slave offers after an outage
(``take_over``, beyond RocketMQ) without undoing a reset made on the master meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from broker.persist import read_json, try_write_json
from remoting.bodies import DataVersion

log = structlog.get_logger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
# The remark of a slave's offer the master took (UPDATE_CONSUMER_OFFSET with a version).
OFFER_TAKEN = "taken over"

Version = tuple[int, int]  # a DataVersion's (timestamp, counter), compared in that order


class OffsetTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self._dirty = False
        # Bumped on every change; its timestamp never goes back, so (timestamp, counter)
        # grows while the broker runs and a restart starts above what it left.
        self.data_version = DataVersion()
        self._changed_at: dict[tuple[str, int], Version] = {}  # since this broker started

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
        """Write the file if anything changed; a failure (logged) leaves the table dirty,
        so the next turn writes it again."""
        doc = self.snapshot()
        if doc is not None and not try_write_json(self.path, doc):
            self.mark_dirty()

    def mark_dirty(self) -> None:
        """A snapshot could not be written: the next ``snapshot`` returns one again."""
        self._dirty = True

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self.key(topic, group)
        per_queue = self.table.setdefault(key, {})
        if per_queue.get(queue_id) != offset:
            per_queue[queue_id] = offset
            self._dirty = True
            version = self.data_version
            version.bump(max(int(time.time() * 1000), version.timestamp))
            self._changed_at[(key, queue_id)] = (version.timestamp, version.counter)

    def take_over(
        self, group: str, topic: str, queue_id: int, offset: int, since: Version
    ) -> str | None:
        """A slave offers ``offset``, committed to it by a client while this master was
        away; ``since`` is the version of this table the slave copied last. Taken when larger
        than ours and the queue has not changed here since: a change after ``since`` (an
        operator's reset, a client back on this master) is newer than the offer.

        Returns:
            None when taken, else why not.
        """
        current = self.query(group, topic, queue_id)
        if offset <= current:
            return f"the master's offset {current} is not smaller"
        changed = self._changed_at.get((self.key(topic, group), queue_id))
        if changed is not None and changed > since:
            return f"the master's offset changed since version {since[0]}:{since[1]}"
        self.commit(group, topic, queue_id, offset)
        log.info(
            "offsets_taken_over",
            group=group,
            topic=topic,
            queue_id=queue_id,
            offset=offset,
            previous=current,
        )
        return None

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group has none for the queue."""
        per_queue = self.table.get(self.key(topic, group))
        if per_queue is None:
            return -1
        return per_queue.get(queue_id, -1)

    def queues_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(topic, group), {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        """The groups with an offset in ``topic`` (``whichGroupByTopic``)."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {k[len(prefix) :] for k in self.table if k.startswith(prefix)}

    def topics_of_group(self, group: str) -> set[str]:
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {k[: -len(suffix)] for k in self.table if k.endswith(suffix)}

    def remove_group(self, group: str) -> None:
        """``ConsumerOffsetManager.removeOffset``: every offset of ``group``, on every topic."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        self._remove(lambda key: key.endswith(suffix))

    def remove_topic(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        self._remove(lambda key: key.startswith(prefix))

    def _remove(self, doomed: Callable[[str], bool]) -> None:
        """Every ``topic@group`` entry ``doomed`` picks, with its change times."""
        for k in [k for k in self.table if doomed(k)]:
            del self.table[k]
            self._dirty = True
        for changed in [c for c in self._changed_at if doomed(c[0])]:
            del self._changed_at[changed]
