"""The scheduler's cleanup forgets the per-token rate counts that mean nothing any more (their
allowance is whole again: ``TOKEN_RATES_FORGET_IDLE``) and keeps the ones still counting."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.scheduler import Scheduler
from tests.helpers import execute, fetch
from tests.scheduler.test_scheduler import TICKS_SPANNING_A_CLEANUP, next_ticks, scheduler

__all__ = ["scheduler"]

IDLE = "00000000-0000-4000-8000-000000000001"
COUNTING = "00000000-0000-4000-8000-000000000002"


async def test_the_cleanup_forgets_idle_token_rates_and_keeps_fresh_ones(
    scheduler: Scheduler, engine: AsyncEngine
) -> None:
    await execute(
        engine,
        "INSERT INTO token_rate_limits (token_id, kind, tat, step, allowed) VALUES"
        " (:idle, 'read', now() - interval '2 minutes', interval '100 seconds', true),"
        " (:counting, 'read', now() + interval '100 seconds', interval '100 seconds', true)",
        idle=IDLE,
        counting=COUNTING,
    )
    await next_ticks(scheduler, TICKS_SPANNING_A_CLEANUP)
    rows = await fetch(engine, "SELECT token_id::text AS token_id FROM token_rate_limits")
    assert [row["token_id"] for row in rows] == [COUNTING]
