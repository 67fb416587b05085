"""Auto-renewal of the messages a PushConsumer holds: they stay invisible while it works.

RocketMQ counterpart: ``proxy/service/receipt/DefaultReceiptHandleManager`` with
``RenewStrategyPolicy``. A receive with ``auto_renew`` (the 5.x PushConsumer's) pops with
the proxy's default invisible time (60 s) and its messages are tracked here: every 5 s,
one that would become visible within 10 s is made invisible again for 1 min, 3, 5, 10, 30
min, then 1 h each time, for at most 3 h after it was received (then it is released with
its group's retry delay). Ack, dead-lettering or a change of invisible time ends the
tracking; so does its client going (its messages are released within a second, as the
proxy does, so another consumer gets them).

A renewal gives the message a new receipt handle, which its client never sees: its ack
carries the old one, and ``latest`` swaps it for the current one.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from broker.proxy.local import LocalChannel
from broker.proxy.receipts import Handle
from remoting.lifecycle import Periodic

log = structlog.get_logger(__name__)

SCAN_PERIOD_S = 5.0
RENEW_AHEAD_MS = 10_000
RENEW_SCHEDULE_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
MAX_HELD_MS = 3 * 3600 * 1000
RELEASE_MS = 1_000  # a message of a client that went: visible again at once, nearly
MAX_FAILURES = 3

# (group, topic type, queue id, queue offset): one popped message of one group.
Key = tuple[str, str, int, int]
Change = Callable[[LocalChannel, str, str, Handle, int], Awaitable[Handle | None]]


@dataclass(slots=True)
class Held:
    client_id: str
    channel: LocalChannel
    group: str
    topic: str
    handle: Handle
    received_ms: int
    renewals: int = 0
    failures: int = 0
    retry_delay_ms: int = 10_000

    @property
    def visible_at_ms(self) -> int:
        r = self.handle.receipt
        return r.pop_time + r.invisible_time


def key_of(group: str, handle: Handle) -> Key:
    r = handle.receipt
    return group, r.kind, r.queue_id, handle.queue_offset


class Renewals:
    """The messages held by auto-renewing receives, and the loop that renews them.

    Args:
        change: changes a message's invisible time through its client's channel; returns
            the new handle, or None when the broker refused (the message is gone: acked,
            or visible again already).
    """

    def __init__(self, change: Change) -> None:
        self._change = change
        self.held: dict[Key, Held] = {}
        self.loop = Periodic(
            "grpc-renew", self.round, SCAN_PERIOD_S, failure_event="grpc_renew_round_failed"
        )

    def track(self, held: Held) -> None:
        self.held[key_of(held.group, held.handle)] = held

    def latest(self, group: str, handle: Handle) -> Handle:
        """The current handle of the message ``handle`` named when it was received."""
        held = self.held.get(key_of(group, handle))
        return held.handle if held is not None else handle

    def forget(self, group: str, handle: Handle) -> None:
        self.held.pop(key_of(group, handle), None)

    async def round(self) -> None:
        now = int(time.time() * 1000)
        for key, held in list(self.held.items()):
            if self.held.get(key) is not held:
                continue  # acked meanwhile
            if now - held.received_ms >= MAX_HELD_MS:
                self.held.pop(key, None)
                await self._change(
                    held.channel, held.group, held.topic, held.handle, held.retry_delay_ms
                )
                log.info("grpc_renew_gave_up", group=held.group, client_id=held.client_id)
                continue
            if held.visible_at_ms - now > RENEW_AHEAD_MS:
                continue
            invisible = RENEW_SCHEDULE_MS[min(held.renewals, len(RENEW_SCHEDULE_MS) - 1)]
            new = await self._change(held.channel, held.group, held.topic, held.handle, invisible)
            if self.held.get(key) is not held:
                continue
            if new is None:
                held.failures += 1
                if held.failures >= MAX_FAILURES or held.visible_at_ms <= now:
                    self.held.pop(key, None)
                continue
            held.handle = new
            held.renewals += 1
            held.failures = 0

    async def client_gone(self, client_id: str) -> None:
        """Release what ``client_id`` held (visible again within a second)."""
        for key, held in list(self.held.items()):
            if held.client_id == client_id:
                self.held.pop(key, None)
                await self._change(held.channel, held.group, held.topic, held.handle, RELEASE_MS)
