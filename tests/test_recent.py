"""app.recent, the cache of the dashboard overview and of the metrics' database reading: reused
while young, reloaded once old, one load for concurrent callers."""

from __future__ import annotations

import asyncio

from app.recent import Recent


async def test_a_value_is_reused_while_young_and_reloaded_when_old() -> None:
    now = [100.0]
    recent: Recent[int] = Recent(2.0, clock=lambda: now[0])
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        return loads

    assert await recent.get(load) == 1
    now[0] += 1.9
    assert await recent.get(load) == 1
    now[0] += 0.2
    assert await recent.get(load) == 2


async def test_concurrent_callers_share_one_load() -> None:
    recent: Recent[str] = Recent(60.0)
    started = asyncio.Event()
    release = asyncio.Event()
    loads = 0

    async def load() -> str:
        nonlocal loads
        loads += 1
        started.set()
        await release.wait()
        return "overview"

    first = asyncio.create_task(recent.get(load))
    await started.wait()
    second = asyncio.create_task(recent.get(load))
    release.set()
    assert await asyncio.gather(first, second) == ["overview", "overview"]
    assert loads == 1
