"""How a service starts and stops: declared stages, owned background tasks, periodic rounds.

RocketMQ counterpart: ``ServiceThread`` (``waitForRunning(interval)`` around ``run``), the
``ScheduledExecutorService`` tasks of ``BrokerController`` / ``NamesrvController`` /
``MQClientInstance.startScheduledTask``, and the hand-ordered ``start()`` / ``shutdown()`` of
those controllers. Here the order is data, not code:

- ``Lifecycle`` runs a declared list of ``Stage`` s: ``start()`` in order, ``stop()`` in
  reverse. A start that fails half way stops exactly the stages that had started, newest
  first, and re-raises. The broker, the name server and the SDK's client instance each
  declare theirs (uvicorn's shutdown order falls out of it: stop accepting, drain the
  connections, stop the services, flush the store).
- ``TaskGroup`` holds the background tasks one service spawns (a parked request, a check
  sent to a producer) so that none is left running, unowned, after the service stops.
- ``Periodic`` is the one "every N seconds" loop: the broker's housekeeping, the name
  server's broker scan and the SDK's route refresh and heartbeat all use it.

Lives in ``remoting`` because the SDK and the servers both use it and ``remoting`` is the
lowest package with an event loop in it (``codec`` is sans-IO). Failures are logged through
``logging`` in the servers' ``event key=%s`` convention, as the rest of ``remoting`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


def _nothing() -> None:
    return None


async def _call(step: Callable[[], object]) -> None:
    result = step()
    if inspect.isawaitable(result):
        await result


@dataclass(frozen=True, slots=True)
class Stage:
    """One step of a service's start, with the step that undoes it.

    ``stop`` runs only if ``start`` returned, so each is written for one state: a stage
    whose start can fail half way cleans up after itself before it raises.
    """

    name: str
    start: Callable[[], object] = _nothing  # a plain or a coroutine function
    stop: Callable[[], object] = _nothing


class Lifecycle:
    """Start ``stages`` in order, stop the started ones in reverse.

    ``stop()`` runs every started stage's stop even when one raises (logged as
    ``stage_stop_failed``): one service that cannot stop cleanly must not keep the store
    from being flushed. ``start()`` after ``stop()`` starts again from the first stage.
    """

    def __init__(self, owner: str, stages: Iterable[Stage]) -> None:
        self.owner = owner
        self.stages = tuple(stages)
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"{owner}: stage names repeat: {names}")
        self._started: list[Stage] = []

    @property
    def started(self) -> tuple[str, ...]:
        """The names of the stages running now, in start order."""
        return tuple(s.name for s in self._started)

    async def start(self) -> None:
        """Raises: whatever the failing stage raised, once the started ones are stopped."""
        for stage in self.stages:
            try:
                await _call(stage.start)
            except BaseException:
                log.warning("stage_start_failed owner=%s stage=%s", self.owner, stage.name)
                await self.stop()
                raise
            self._started.append(stage)

    async def stop(self) -> None:
        while self._started:
            stage = self._started.pop()
            try:
                await _call(stage.stop)
            except Exception:
                log.exception("stage_stop_failed owner=%s stage=%s", self.owner, stage.name)


class TaskGroup:
    """The background tasks a service owns.

    Unlike ``asyncio.TaskGroup`` it lives as long as its service rather than one ``async
    with`` block, and a task that fails is logged (``background_task_failed``) without
    cancelling its siblings: one parked request that breaks must not end the others.
    ``close()`` cancels what is running and waits for it; a task spawned later (a request
    still draining) is owned all the same, and ended by the next ``close()``.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` in the background, owned by this group."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error(
                "background_task_failed owner=%s task=%s error=%r",
                self.owner,
                task.get_name(),
                exc,
                exc_info=exc,
            )

    async def close(self, timeout_s: float | None = None) -> None:
        """Cancel every task running and wait until all have ended, or ``timeout_s`` (a
        task that ignores its cancellation, running user code, must not hold a shutdown)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)


class Periodic:
    """A round of work every ``period_s`` until stopped.

    Args:
        name: the task's name.
        round: one round of work (a coroutine function or a plain function).
        period_s: pause between the end of one round and the start of the next.
        first_delay_s: pause before the first round (default: one period).
        failure_event: the log event of a round that raised; the loop goes on, as
            RocketMQ's service threads catch, log and carry on.
    """

    def __init__(
        self,
        name: str,
        round: Callable[[], object],
        period_s: float,
        *,
        first_delay_s: float | None = None,
        failure_event: str = "periodic_round_failed",
    ) -> None:
        self.name = name
        self.round = round
        self.period_s = period_s
        self.first_delay_s = period_s if first_delay_s is None else first_delay_s
        self.failure_event = failure_event
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()

    @property
    def running(self) -> bool:
        return self._task is not None

    def wake(self) -> None:
        """Run the next round now rather than at the end of the pause (``ServiceThread.
        wakeup``); a wake during a round runs one more round right after it."""
        self._woken.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _pause(self, seconds: float) -> None:
        if not self._woken.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._woken.wait()
        self._woken.clear()

    async def _run(self) -> None:
        await self._pause(self.first_delay_s)
        while True:
            try:
                await _call(self.round)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(self.failure_event + " task=%s", self.name)
            await self._pause(self.period_s)


def periodic_stage(name: str, loops: Sequence[Periodic]) -> Stage:
    """One stage that starts ``loops`` and stops them (the housekeeping of a service: a
    ``ScheduledExecutorService`` started and shut down as one)."""

    def start() -> None:
        for loop in loops:
            loop.start()

    async def stop() -> None:
        for loop in reversed(loops):
            await loop.stop()

    return Stage(name, start, stop)
