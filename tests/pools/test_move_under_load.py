"""A namespace moves between pools under load: producers and consumers of a simple and an
exclusive queue keep running through the whole move, and afterwards every acknowledged
enqueue is there exactly once and was completed exactly once, no message was completed under
two leases, and no exclusive value ran twice at once."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from dataclasses import dataclass, field

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import UnavailableError
from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.store.moves import NamespaceMover
from tests.helpers import fetch, scalar

pytestmark = pytest.mark.slow

VALUES = 4
"""Exclusive values in use: few, so that consumers contend for them."""
LOAD_SECONDS = 0.6
"""Traffic before the move begins and after it ends."""
DRAIN_SECONDS = 60.0


@dataclass
class Ledger:
    """What the clients saw."""

    acknowledged: set[str] = field(default_factory=set)
    completions: Counter[str] = field(default_factory=Counter)
    holders: dict[str, str] = field(default_factory=dict)
    """Exclusive value -> the message a consumer holds it for."""
    violations: list[str] = field(default_factory=list)
    retried: int = 0


async def _retrying(ledger: Ledger, call):  # type: ignore[no-untyped-def]
    """A client's retry of a 503 (the move's freeze, a changed catalogue)."""
    while True:
        try:
            return await call()
        except UnavailableError:
            ledger.retried += 1
            await asyncio.sleep(0.01)


async def _produce(
    service: QueueService, ledger: Ledger, queue: str, name: str, stop: asyncio.Event
) -> None:
    for n in itertools.count():
        if stop.is_set():
            return
        batch = [
            NewMessage(id=f"{name}-{n}-{i}", metadata={"k": f"v{(n + i) % VALUES}"})
            for i in range(1 + n % 3)
        ]
        await _retrying(ledger, lambda b=batch: service.enqueue("ns", queue, b))
        ledger.acknowledged.update(m.id for m in batch if m.id)


async def _consume(service: QueueService, ledger: Ledger, queue: str, done: asyncio.Event) -> None:
    while True:
        leased = await _retrying(ledger, lambda: service.dequeue("ns", queue, count=2))
        if not leased:
            if done.is_set():
                return
            await asyncio.sleep(0.005)
            continue
        for message in leased:
            value = message.metadata.get("k") if queue == "x" else None
            if value is not None:
                if value in ledger.holders:
                    ledger.violations.append(
                        f"{value} leased for {message.id} while {ledger.holders[value]} runs"
                    )
                ledger.holders[value] = message.id
            await asyncio.sleep(0.001)  # the work
            if value is not None:
                del ledger.holders[value]
            done_message = await _retrying(
                ledger,
                lambda m=message: service.complete("ns", queue, m.id, m.lease_id),
            )
            if done_message.lease_id == message.lease_id:
                ledger.completions[message.id] += 1


async def test_a_move_under_load_loses_nothing_and_runs_nothing_twice(
    pooled: QueueService,
    database_url: str,
    pool_b_url: str,
    engine: AsyncEngine,
    engine_b: AsyncEngine,
) -> None:
    await pooled.create_namespace("ns", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig(lease_seconds=300))
    await pooled.put_queue("ns", "x", QueueConfig(kind="exclusive", exclusive_key="k"))
    ledger = Ledger()
    stop_producing, producers_done = asyncio.Event(), asyncio.Event()
    producers = [
        asyncio.create_task(_produce(pooled, ledger, queue, f"{queue}{i}", stop_producing))
        for queue in ("q", "x")
        for i in range(2)
    ]
    consumers = [
        asyncio.create_task(_consume(pooled, ledger, queue, producers_done))
        for queue in ("q", "x")
        for _ in range(3)
    ]
    await asyncio.sleep(LOAD_SECONDS)  # traffic before the move
    report = await NamespaceMover({"default": database_url, "b": pool_b_url}).move("ns", "b")
    await asyncio.sleep(LOAD_SECONDS)  # and after it
    stop_producing.set()
    await asyncio.gather(*producers)
    producers_done.set()
    await asyncio.wait_for(asyncio.gather(*consumers), DRAIN_SECONDS)

    assert report is not None
    assert report.copied > 0
    assert ledger.violations == []
    assert ledger.acknowledged, "no traffic"
    twice = {m: n for m, n in ledger.completions.items() if n > 1}
    assert twice == {}
    assert set(ledger.completions) == ledger.acknowledged
    rows = await fetch(engine_b, "SELECT id, state::text FROM messages")
    assert Counter(r["id"] for r in rows) == Counter(ledger.acknowledged)
    assert {r["state"] for r in rows} == {"completed"}
    assert await scalar(engine, "SELECT count(*) FROM messages") == 0
