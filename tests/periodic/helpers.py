"""What the periodic-job tests share: a job made through the service, time moved by setting a
job's ``next_run_at`` into the past in SQL (never by waiting), ticks run by hand as the
scheduler's leader runs them, and the messages a job enqueued read from the table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.periodic import MessageTemplate, PeriodicJob, PeriodicSpec
from app.core.service import QueueService
from app.store import maintenance
from tests.helpers import execute, fetch

NS = "ns"


async def make_job(
    service: QueueService,
    name: str = "job",
    *,
    queue: str = "q",
    schedule: str = "* * * * *",
    timezone: str = "UTC",
    **template: Any,
) -> PeriodicJob:
    """Create the periodic job ``name`` of namespace ``ns``; returns it."""
    job, created = await service.put_periodic(
        NS, name, PeriodicSpec(queue, schedule, timezone, MessageTemplate(**template))
    )
    assert created
    return job


async def set_next_run(engine: AsyncEngine, name: str, at: datetime | str) -> None:
    """Move a job's next run to ``at`` (a timestamp, or SQL such as ``now() - interval '1 h'``)."""
    if isinstance(at, str):
        await execute(
            engine, f"UPDATE periodic_jobs SET next_run_at = {at} WHERE name = :n", n=name
        )
    else:
        await execute(
            engine, "UPDATE periodic_jobs SET next_run_at = :at WHERE name = :n", at=at, n=name
        )


async def tick(engine: AsyncEngine) -> int:
    """One scheduler tick on a connection of the test's own; the messages periodic jobs fired."""
    async with engine.connect() as conn:
        return (await maintenance.tick(conn)).fired


async def cron_messages(engine: AsyncEngine, queue: str = "q") -> list[dict[str, Any]]:
    """The messages of ``queue`` whose ids are periodic jobs' (``cron:…``), oldest first."""
    return await fetch(
        engine,
        "SELECT m.id, m.state::text AS state, m.payload, m.metadata, m.priority,"
        " m.max_attempts, m.lease_seconds, m.expires_at, m.enqueued_at"
        " FROM messages m JOIN queues q ON q.id = m.queue_id"
        " WHERE q.name = :queue AND m.id LIKE 'cron:%' ORDER BY m.seq",
        queue=queue,
    )


async def job_row(engine: AsyncEngine, name: str = "job") -> dict[str, Any]:
    [row] = await fetch(engine, "SELECT * FROM periodic_jobs WHERE name = :n", n=name)
    return row
