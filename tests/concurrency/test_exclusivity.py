"""Exclusivity under real concurrency: an exclusive queue never runs two messages of one value,
the detector catches it when the index and the claim's guard are removed, the unique index is the
guard between two transactions, and a claim that loses the race on it retries.

Nothing here waits by sleeping: the watcher polls the database in a loop, and the forced
interleavings wait until a backend waits for a lock."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from psycopg import errors as pg_errors
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from app.store.sql.claim import messages_claim
from tests.concurrency.exclusive_run import (
    Claimed,
    exclusive_setup,
    run_exclusive_consumers,
    service_claim,
    service_complete,
)
from tests.concurrency.helpers import NS, wait_for_lock_wait
from tests.helpers import make_queue, scalar, states_of


async def test_exclusive_queue_never_runs_two_messages_of_one_value(
    service: QueueService, engine: AsyncEngine
):
    queue, ids = await exclusive_setup(service, values=50, per_value=5)
    run = await run_exclusive_consumers(
        engine, queue, len(ids), service_claim(service), service_complete(service)
    )
    assert run.db_duplicates == []
    assert run.overlaps() == []
    assert run.polls > 0
    assert run.claims > 0
    assert sorted(run.leases) == sorted(ids)
    assert set(run.leases.values()) == {1}
    assert set(run.intervals) == {f"p{v:02}" for v in range(50)}
    assert set((await states_of(engine, queue)).values()) == {"completed"}
    assert (
        await scalar(
            engine,
            "SELECT count(*) FROM messages WHERE queue_id = :q AND attempts <> 1",
            q=queue.id,
        )
        == 0
    )


async def test_detector_finds_overlaps_without_index_and_guard(
    service: QueueService, engine: AsyncEngine
):
    """The same run, with both protections removed, must be caught by the same detector."""
    queue, ids = await exclusive_setup(service, values=50, per_value=5)
    async with engine.begin() as conn:
        await conn.execute(sa.text("DROP INDEX messages_running_exclusive_uidx"))

    async def unguarded_claim(count: int) -> list[Claimed]:
        # The simple-queue dequeue: no NOT EXISTS, no one-per-value, on the exclusive queue.
        params = {
            "queue_id": queue.id,
            "lease_override": None,
            "queue_lease": 600,
            "catalogue_version": None,  # unchecked (no request's lookups)
            "valid_until": None,
        }
        async with engine.begin() as conn:
            rows = (await conn.execute(messages_claim(count=count), params)).all()
        return [Claimed(r.id, r.lease_id, r.metadata["project"]) for r in rows]

    run = await run_exclusive_consumers(
        engine, queue, len(ids), unguarded_claim, service_complete(service)
    )
    assert run.overlaps() != []
    assert run.db_duplicates != []
    assert all(n > 1 for _, n in run.db_duplicates)
    # Nothing else went wrong: every message was still leased once and completed.
    assert sorted(run.leases) == sorted(ids)
    assert set((await states_of(engine, queue)).values()) == {"completed"}


@pytest.mark.parametrize("first_outcome", ["commit", "rollback"])
async def test_the_unique_index_is_the_guard(
    service: QueueService, engine: AsyncEngine, first_outcome: str
):
    """Two transactions force two messages of one value to running: the second waits for the
    first and is refused if it commits (and proceeds if it rolls back)."""
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [NewMessage(id=i, metadata={"project": "same"}) for i in ("one", "two")],
    )
    to_running = sa.text(
        "UPDATE messages SET state = 'running', attempts = attempts + 1, "
        "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
        "WHERE queue_id = :q AND id = :id"
    )
    async with engine.connect() as first, engine.connect() as second:
        pid = (await second.execute(sa.text("SELECT pg_backend_pid()"))).scalar()
        await second.commit()
        await first.execute(to_running, {"q": queue.id, "id": "one"})  # open transaction
        racing = asyncio.create_task(second.execute(to_running, {"q": queue.id, "id": "two"}))
        await wait_for_lock_wait(engine, pid)
        assert not racing.done()
        if first_outcome == "commit":
            await first.commit()
            with pytest.raises(sa_exc.IntegrityError) as info:
                await racing
            assert isinstance(info.value.orig, pg_errors.UniqueViolation)
            assert info.value.orig.diag.constraint_name == "messages_running_exclusive_uidx"
            await second.rollback()
            expected = {"one": "running", "two": "pending"}
        else:
            await first.rollback()
            await racing
            await second.commit()
            expected = {"one": "pending", "two": "running"}
    assert await states_of(engine, queue) == expected


async def test_exclusive_dequeue_race_is_retried_not_refused(
    service: QueueService, engine: AsyncEngine
):
    """While x1 is made running by an uncommitted transaction that the claim cannot see (x1 was
    not ready in its snapshot, and no claim holds value x), a dequeue that picked another X
    message loses on the index and retries: it gets the next value instead of an error."""
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [
            NewMessage(id="x1", priority=1, metadata={"project": "x"}, delay_seconds=3600),
            NewMessage(id="x2", priority=2, metadata={"project": "x"}),
            NewMessage(id="y1", priority=3, metadata={"project": "y"}),
        ],
    )
    async with engine.connect() as holder:
        # Hold x1 running in an open transaction, as a concurrent grant would.
        await holder.execute(
            sa.text(
                "UPDATE messages SET state = 'running', attempts = 1, "
                "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
                "WHERE queue_id = :q AND id = 'x1'"
            ),
            {"q": queue.id},
        )
        racing = asyncio.create_task(service.dequeue(NS, "ex", count=1))
        await wait_for_lock_wait(engine)
        await holder.commit()
        leased = await racing
    assert [m.id for m in leased] == ["y1"]
    assert await states_of(engine, queue) == {"x1": "running", "x2": "pending", "y1": "running"}
