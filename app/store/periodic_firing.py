"""The scheduler's firing of periodic jobs (docs/concepts.md, "Periodic jobs"): each due job in a
transaction of its own, exactly once per tick however many schedulers run (see
:mod:`app.store.sql.periodic`)."""

from __future__ import annotations

import logging

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core import periodic
from app.store.sql import periodic as sql

log = logging.getLogger("sundial.scheduler")

JOBS_PER_TICK = 500
"""Due jobs one tick fires at most; the rest wait for the next tick (a tenth of a second)."""


async def fire_due(conn: AsyncConnection) -> int:
    """Fire the periodic jobs whose ``next_run_at`` has come; returns the messages enqueued.

    Each job: lock it (a job another scheduler holds is skipped), compute from the
    transaction's ``now()`` the tick it fires for (the catch-up rule:
    :func:`app.core.periodic.due_tick`) and its next run, then one guarded statement advances it
    and enqueues the tick's message; commit.
    """
    fired = 0
    failed: list[str] = []
    for _ in range(JOBS_PER_TICK):
        job = (await conn.execute(sql.PERIODIC_JOB_LOCK_IF_DUE, {"failed": failed})).first()
        if job is None:
            await conn.commit()
            return fired
        try:
            firing = periodic.due_tick(job.schedule, job.timezone, job.next_run_at, job.now)
        except Exception as error:  # noqa: BLE001 - a schedule that cannot be evaluated
            # Stored schedules were checked when written; only the system's tz database can
            # make one fail later (a zone removed). Pause the job rather than fail every tick.
            log.warning("periodic job %s/%s paused: %s", job.namespace, job.name, error)
            params = {"namespace": job.namespace, "name": job.name, "was": job.next_run_at}
            await conn.execute(sql.PERIODIC_JOB_PAUSE_BROKEN, {**params, "error": str(error)})
            await conn.commit()
            continue
        params = {
            "namespace": job.namespace,
            "name": job.name,
            "was": job.next_run_at,
            "tick": firing.tick,
            "next_run_at": firing.next_run_at,
            "message_id": periodic.tick_message_id(job.name, firing.tick),
        }
        try:
            result = (await conn.execute(sql.PERIODIC_JOB_FIRE, params)).one()
            await conn.commit()
        except sa_exc.DBAPIError as error:
            if error.connection_invalidated:
                raise
            # Nothing of this firing was applied: the job stays due and is tried again at the
            # next tick; the other due jobs go on meanwhile.
            await conn.rollback()
            log.warning("periodic job %s/%s not fired yet: %s", job.namespace, job.name, error)
            failed.append(f"{job.namespace}/{job.name}")
            continue
        fired += result.inserted
        if firing.skipped:
            log.info(
                "periodic job %s/%s fired for %s, skipping %s missed tick(s)",
                job.namespace,
                job.name,
                firing.tick.isoformat(),
                f"{firing.skipped}+"
                if firing.skipped >= periodic.COUNT_SKIPPED_UP_TO
                else firing.skipped,
            )
        if result.refusal is not None:
            log.info(
                "periodic job %s/%s skipped a tick: %s", job.namespace, job.name, result.refusal
            )
    await conn.commit()
    return fired
