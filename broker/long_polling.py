"""``PullHoldService``: pulls that found nothing wait here for a message to arrive.

RocketMQ counterpart: ``PullRequestHoldService`` and ``NotifyMessageArrivingListener``. A
pull with the suspend flag that finds nothing is parked under ``topic@queueId`` for the
client's ``suspendTimeoutMillis`` (or ``shortPollingTimeMills`` when long polling is off).
It is run again (without suspension) as soon as the store dispatches a message for that
queue that passes the request's tag filter (and its SQL92 expression), when its time is up,
or on the periodic re-check (every 5 s; 1 s for short polling) that also catches messages
whose arrival was not signalled. The answer of the re-run is sent on the request's
connection, even if it is PULL_NOT_FOUND again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import send_response
from remoting.lifecycle import Periodic
from store.dispatch import Arrival

log = structlog.get_logger(__name__)

TagFilter = Callable[[int], bool]
PropertiesFilter = Callable[[dict[str, str]], bool]
Rerun = Callable[[Connection, RemotingCommand], None]
MaxOffset = Callable[[str, int], int]


@dataclass(slots=True, eq=False)
class HeldPull:
    conn: Connection
    request: RemotingCommand
    pull_from_offset: int
    deadline: float  # loop time
    tag_filter: TagFilter | None
    props_filter: PropertiesFilter | None = field(default=None)
    timer: asyncio.TimerHandle | None = field(default=None)


def _wakes(pull: HeldPull, arrival: Arrival) -> bool:
    """Whether a message of ``arrival`` at or after the pull's offset passes its tag filter
    and, for an SQL92 pull, its expression (RocketMQ's listener checks isMatchedByCommitLog
    on the dispatched properties; the periodic re-check still wakes it for anything, in case
    it missed an arrival)."""
    first = arrival.first_offset
    start = pull.pull_from_offset - first
    codes = arrival.tags_codes
    if start >= len(codes):
        return False
    start = max(start, 0)
    tag_filter = pull.tag_filter
    props_filter = pull.props_filter
    if tag_filter is None and props_filter is None:
        return True
    for i in range(start, len(codes)):
        if tag_filter is not None and not tag_filter(codes[i]):
            continue
        if props_filter is None or props_filter(arrival.properties(i)):
            return True
    return False


class PullHoldService:
    """Parked pulls by ``topic@queueId``.

    Args:
        rerun: processes a request again without suspension and sends the answer.
        max_offset: the store's max offset of a queue.
        check_interval_s: the periodic re-check.
    """

    def __init__(self, rerun: Rerun, max_offset: MaxOffset, check_interval_s: float) -> None:
        self._rerun = rerun
        self._max_offset = max_offset
        self.check_interval_s = check_interval_s
        self.held: dict[tuple[str, int], list[HeldPull]] = {}
        self._loop = Periodic(
            "pull-hold", self._round, check_interval_s, failure_event="held_pull_check_failed"
        )

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.held.values())

    def hold(
        self,
        conn: Connection,
        request: RemotingCommand,
        *,
        topic: str,
        queue_id: int,
        pull_from_offset: int,
        timeout_ms: int,
        tag_filter: TagFilter | None,
        props_filter: PropertiesFilter | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        pull = HeldPull(conn, request, pull_from_offset, deadline, tag_filter, props_filter)
        key = (topic, queue_id)
        self.held.setdefault(key, []).append(pull)
        # A timer per request answers it on time; a 5 s sweep alone would overshoot the
        # client's own timeout.
        pull.timer = loop.call_at(deadline, self._expire, key, pull)

    def _release(self, key: tuple[str, int], pull: HeldPull) -> bool:
        pulls = self.held.get(key)
        if pulls is None:
            return False
        try:
            pulls.remove(pull)
        except ValueError:
            return False
        if not pulls:
            del self.held[key]
        if pull.timer is not None:
            pull.timer.cancel()
            pull.timer = None
        return True

    def _run_again(self, key: tuple[str, int], pull: HeldPull) -> None:
        if not self._release(key, pull):
            return
        if pull.conn.closed:
            return
        try:
            self._rerun(pull.conn, pull.request)
        except Exception as exc:
            log.exception("held_pull_rerun_failed", topic=key[0], queue_id=key[1])
            # Answered all the same: the client learns at once, and the request leaves its
            # connection's count (an unanswered one would hold its place for good).
            send_response(
                pull.conn,
                pull.request,
                response_to(pull.request, ResponseCode.SYSTEM_ERROR, f"held pull failed: {exc!r}"),
            )

    def _expire(self, key: tuple[str, int], pull: HeldPull) -> None:
        pull.timer = None
        self._run_again(key, pull)

    def on_arrival(self, arrival: Arrival) -> None:
        """Store dispatch listener: wake the pulls these messages satisfy (one call per
        queue and dispatch round, however many messages it entered)."""
        key = (arrival.topic, arrival.queue_id)
        pulls = self.held.get(key)
        if not pulls:
            return
        woken = [p for p in pulls if _wakes(p, arrival)]
        if not woken:
            return
        # Run after dispatch has finished its round, not inside it: the answer then carries
        # every message the round entered.
        loop = asyncio.get_running_loop()
        for p in woken:
            loop.call_soon(self._run_again, key, p)

    def check_all(self) -> None:
        """The periodic re-check: wake every parked pull whose queue has moved past it."""
        for key, pulls in list(self.held.items()):
            newest = self._max_offset(*key)
            for p in list(pulls):
                if newest > p.pull_from_offset:
                    self._run_again(key, p)

    def drop_connection(self, conn: Connection) -> None:
        for key, pulls in list(self.held.items()):
            for p in [p for p in pulls if p.conn is conn]:
                self._release(key, p)

    async def _round(self) -> None:
        self.check_all()

    def start(self) -> None:
        self._loop.start()

    async def shutdown(self) -> None:
        """Answer every parked pull now (clients pull again elsewhere), then stop."""
        await self._loop.stop()
        for key, pulls in list(self.held.items()):
            for p in list(pulls):
                self._run_again(key, p)
