"""The shared ``ClientInstance`` registry: one instance per name server, instance name and
event loop, and never one that belonged to a loop that has ended."""

from __future__ import annotations

import asyncio
import gc

from client.instance import ClientInstance

NAMESRV = "127.0.0.1:1"  # never dialled: acquiring an instance connects to nothing


async def _grab(name: str) -> ClientInstance:
    return await ClientInstance.acquire(NAMESRV, name)


def test_an_instance_left_behind_by_an_ended_loop_is_not_reused() -> None:
    # Acquired and never released: the loop ends under it (a script that forgot shutdown).
    first = asyncio.run(_grab("registry-leak"))
    gc.collect()
    assert first not in ClientInstance.live()
    second = asyncio.run(_grab("registry-leak"))
    assert second is not first
    assert second not in ClientInstance.live()  # left behind as well: its loop ended too


async def test_one_loop_shares_one_instance_and_release_unregisters_it() -> None:
    a = await _grab("registry-share")
    b = await _grab("registry-share")
    other = await _grab("registry-other")
    try:
        assert a is b
        assert other is not a
        assert a in ClientInstance.live() and other in ClientInstance.live()
    finally:
        await b.release()
        assert a in ClientInstance.live()  # one user left
        await a.release()
        await other.release()
    assert a not in ClientInstance.live()
    assert other not in ClientInstance.live()
