"""The kept counts stay exact through enqueues that replace waiting messages (an ``INSERT … ON
CONFLICT DO UPDATE``, whose updated rows the statement-level UPDATE trigger counts) and through
leases by id, alone and mixed with every other change, one message or a batch at a time."""

from __future__ import annotations

import contextlib
import random

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import InvalidStateError, NotFoundError
from app.core.models import NewMessage
from app.core.service import QueueService
from app.store import maintenance
from tests.helpers import make_due, make_queue
from tests.store.test_counts_exact import assert_exact, assert_folded


def _message(rng: random.Random, message_id: str, exclusive: bool) -> NewMessage:
    delayed = rng.random() < 0.4
    return NewMessage(
        id=message_id,
        payload=str(rng.randrange(1000)).encode(),
        metadata={"k": rng.choice("ab")} if exclusive else {},
        delay_seconds=3600 if delayed else None,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_counts_stay_exact_through_replaces_and_leases_by_id(
    service: QueueService, engine: AsyncEngine, seed: int
) -> None:
    await make_queue(service, "ns", "plain")
    await make_queue(service, "ns", "excl", kind="exclusive", exclusive_key="k")
    rng = random.Random(seed)
    for _ in range(150):
        name = rng.choice(["plain", "excl"])
        exclusive = name == "excl"
        action = rng.choice(["replace", "replace_many", "keep", "lease", "dequeue", "due"])
        ids = [f"m{rng.randrange(12)}" for _ in range(rng.randint(1, 5))]
        if action in ("replace", "keep"):
            message = _message(rng, ids[0], exclusive)
            conflict = "replace" if action == "replace" else "keep"
            await service.enqueue("ns", name, [message], on_conflict=conflict)
        elif action == "replace_many":
            batch = [_message(rng, i, exclusive) for i in dict.fromkeys(ids)]
            await service.enqueue("ns", name, batch, on_conflict="replace")
        elif action == "lease":
            with contextlib.suppress(InvalidStateError, NotFoundError):  # refused: no change
                await service.lease_message("ns", name, ids[0])
        elif action == "dequeue":
            for leased in await service.dequeue("ns", name, count=2):
                if rng.random() < 0.5:
                    await service.complete("ns", name, leased.id, leased.lease_id)
        else:
            await make_due(engine, ids=ids)
        await assert_exact(engine, service)
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    await assert_folded(engine)
