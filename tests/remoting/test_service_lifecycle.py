"""remoting.lifecycle: declared stages start in order and stop in reverse, a failed start
undoes exactly what started, background tasks end with their owner, periodic rounds go on
after a failure."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

import pytest

from remoting.lifecycle import Lifecycle, Periodic, Stage, TaskGroup, periodic_stage
from tests.support import wait_until


def _recording(events: list[str], name: str, *, fail_start: bool = False) -> Stage:
    async def start() -> None:
        if fail_start:
            raise OSError(f"{name} cannot start")
        events.append(f"start {name}")

    def stop() -> None:  # plain functions are stages too
        events.append(f"stop {name}")

    return Stage(name, start, stop)


async def test_stages_start_in_order_and_stop_in_reverse() -> None:
    events: list[str] = []
    life = Lifecycle("t", [_recording(events, n) for n in ("store", "listen", "serve")])
    await life.start()
    assert life.started == ("store", "listen", "serve")
    await life.stop()
    assert events == [
        "start store",
        "start listen",
        "start serve",
        "stop serve",
        "stop listen",
        "stop store",
    ]
    assert not life.started
    await life.stop()  # nothing left to stop
    assert len(events) == 6


async def test_a_failed_start_stops_exactly_what_started(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []
    stages = [
        _recording(events, "store"),
        _recording(events, "listen"),
        _recording(events, "metrics", fail_start=True),
        _recording(events, "serve"),
    ]
    life = Lifecycle("t", stages)
    with caplog.at_level(logging.WARNING), pytest.raises(OSError, match="metrics cannot start"):
        await life.start()
    assert events == ["start store", "start listen", "stop listen", "stop store"]
    assert life.started == ()
    assert "stage_start_failed owner=t stage=metrics" in caplog.text


async def test_a_cancelled_start_is_undone_too() -> None:
    events: list[str] = []
    blocked = asyncio.Event()

    async def hang() -> None:
        blocked.set()
        await asyncio.Event().wait()

    life = Lifecycle("t", [_recording(events, "store"), Stage("slow", hang)])
    task = asyncio.create_task(life.start())
    await blocked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events == ["start store", "stop store"]


async def test_one_failing_stop_does_not_keep_the_others_from_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []

    def broken() -> None:
        raise RuntimeError("cannot stop")

    life = Lifecycle(
        "t", [_recording(events, "store"), Stage("broken", stop=broken), _recording(events, "x")]
    )
    await life.start()
    with caplog.at_level(logging.ERROR):
        await life.stop()
    assert events == ["start store", "start x", "stop x", "stop store"]
    assert "stage_stop_failed owner=t stage=broken" in caplog.text


def test_stage_names_must_not_repeat() -> None:
    with pytest.raises(ValueError, match="repeat"):
        Lifecycle("t", [Stage("a"), Stage("a")])


async def test_a_task_group_cancels_and_awaits_what_is_left() -> None:
    group = TaskGroup("svc")
    ended: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    group.spawn(forever("a"), name="a")
    group.spawn(forever("b"), name="b")
    done = group.spawn(asyncio.sleep(0), name="quick")
    await done
    assert len(group) == 2  # a finished task leaves the group by itself
    await group.close()
    assert sorted(ended) == ["a", "b"] and len(group) == 0
    late = group.spawn(forever("late"), name="late")  # e.g. a request still draining
    assert len(group) == 1
    await group.close()
    assert late.cancelled() and len(group) == 0


async def test_closing_a_task_group_waits_no_longer_than_asked() -> None:
    group = TaskGroup("svc")
    release = asyncio.Event()

    async def stubborn() -> None:  # user code that swallows its cancellation
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    task = group.spawn(stubborn())
    await asyncio.sleep(0)
    await group.close(timeout_s=0.05)
    assert not task.done()  # the close gave up waiting, as asked
    release.set()
    await task


async def test_a_failing_background_task_is_logged_and_leaves_its_siblings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = TaskGroup("svc")

    async def boom() -> None:
        raise ValueError("broken parked request")

    sibling = group.spawn(asyncio.sleep(10), name="sibling")
    failed = group.spawn(boom(), name="boom")
    with caplog.at_level(logging.ERROR):
        await asyncio.gather(failed, return_exceptions=True)
        await asyncio.sleep(0)
    assert not sibling.done()
    assert "background_task_failed owner=svc task=boom" in caplog.text
    await group.close()
    assert sibling.cancelled()


async def test_periodic_rounds_go_on_after_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    rounds: list[int] = []
    enough = asyncio.Event()

    def one_round() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("first round fails")
        if len(rounds) == 3:
            enough.set()

    loop = Periodic("every", one_round, 0.001, first_delay_s=0, failure_event="every_failed")
    with caplog.at_level(logging.ERROR):
        loop.start()
        assert loop.running
        await asyncio.wait_for(enough.wait(), 5)
        await loop.stop()
    assert not loop.running
    assert "every_failed task=every" in caplog.text
    count = len(rounds)
    await asyncio.sleep(0.01)
    assert len(rounds) == count  # stopped means no more rounds


async def test_periodic_awaits_a_coroutine_round_and_waits_its_first_delay() -> None:
    calls: list[float] = []

    async def one_round() -> None:
        calls.append(asyncio.get_running_loop().time())

    loop = Periodic("slow", one_round, 0.001, first_delay_s=10)
    loop.start()
    await asyncio.sleep(0.05)
    await loop.stop()
    assert calls == []


async def test_a_periodic_stage_starts_its_loops_together_and_stops_them_all() -> None:
    ran: list[str] = []
    loops = [
        Periodic(name, functools.partial(ran.append, name), 10, first_delay_s=0)
        for name in ("offsets", "clients", "stats")
    ]
    life = Lifecycle("t", [periodic_stage("housekeeping", loops)])
    await life.start()
    assert all(loop.running for loop in loops)
    await wait_until(lambda: sorted(set(ran)) == ["clients", "offsets", "stats"], "first rounds")
    await life.stop()
    assert not any(loop.running for loop in loops)
