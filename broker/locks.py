"""``QueueLocks``: which client of a consumer group may consume a queue, for orderly consumers.

RocketMQ counterpart: ``RebalanceLockManager``. A lock is per (group, queue); it is granted
when free, already held by the same client, or expired (not renewed for
``rocketmq.broker.rebalance.lockMaxLiveTime``, 60 s). Clients renew every 20 s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from remoting.route import MessageQueue

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class QueueLocks:
    def __init__(self, max_live_ms: int) -> None:
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, _Lock]] = {}

    def _live(self, lock: _Lock | None, now_ms: int) -> bool:
        return lock is not None and now_ms - lock.last_update_ms <= self.max_live_ms

    def try_lock(
        self, group: str, queues: Iterable[MessageQueue], client_id: str, now_ms: int
    ) -> list[MessageQueue]:
        """Lock what can be locked; returns every queue the client now holds."""
        held = self.table.setdefault(group, {})
        granted = []
        for mq in queues:
            lock = held.get(mq)
            if lock is not None and lock.client_id == client_id:
                lock.last_update_ms = now_ms
                granted.append(mq)
            elif not self._live(lock, now_ms):
                if lock is not None:
                    log.info(
                        "queue_lock_expired",
                        group=group,
                        queue=str(mq),
                        old_client_id=lock.client_id,
                        client_id=client_id,
                    )
                held[mq] = _Lock(client_id, now_ms)
                granted.append(mq)
        return granted

    def unlock(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        held = self.table.get(group)
        if held is None:
            return
        for mq in queues:
            lock = held.get(mq)
            if lock is not None and lock.client_id == client_id:
                del held[mq]
        if not held:
            del self.table[group]
