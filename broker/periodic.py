"""A broker housekeeping loop: run a round every period until stopped.

RocketMQ counterpart: ``ServiceThread`` (``waitForRunning(interval)`` around ``run``) and the
``ScheduledExecutorService`` tasks of ``BrokerController``. A round that raises is logged
under the owner's event name and the loop goes on, as RocketMQ's threads catch and log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)


class Periodic:
    """Args:
    name: the task's name.
    round: one round of work.
    period_s: pause between the end of one round and the start of the next.
    first_delay_s: pause before the first round (default: one period).
    failure_event: the log event of a round that raised.
    """

    def __init__(
        self,
        name: str,
        round: Callable[[], Awaitable[object]],
        period_s: float,
        *,
        first_delay_s: float | None = None,
        failure_event: str,
    ) -> None:
        self.name = name
        self.round = round
        self.period_s = period_s
        self.first_delay_s = period_s if first_delay_s is None else first_delay_s
        self.failure_event = failure_event
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        await asyncio.sleep(self.first_delay_s)
        while True:
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(self.failure_event)
            await asyncio.sleep(self.period_s)
