"""A periodic job moves with its namespace to another pool, its next run kept; it fires there,
and no more on the pool it left."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import QueueConfig
from app.core.periodic import PeriodicSpec
from app.core.service import QueueService
from app.store.moves import NamespaceMover
from tests.helpers import fetch
from tests.periodic.helpers import set_next_run, tick


async def test_a_job_moves_with_its_namespace_and_fires_on_its_new_pool(
    pooled: QueueService,
    engine: AsyncEngine,
    engine_b: AsyncEngine,
    database_url: str,
    pool_b_url: str,
) -> None:
    await pooled.create_namespace("ns", "to be moved", pool="default")
    await pooled.put_queue("ns", "q", QueueConfig())
    job, _ = await pooled.put_periodic("ns", "job", PeriodicSpec("q", "@hourly", "Asia/Tokyo"))

    report = await NamespaceMover({"default": database_url, "b": pool_b_url}).move("ns", "b")
    assert report is not None

    moved = await pooled.get_periodic("ns", "job")
    assert moved.spec == job.spec
    assert moved.next_run_at == job.next_run_at
    assert await fetch(engine, "SELECT name FROM periodic_jobs") == []
    await set_next_run(engine_b, "job", "now() - interval '1 second'")
    assert await tick(engine) == 0
    assert await tick(engine_b) == 1
    [message] = await fetch(engine_b, "SELECT id FROM messages")
    assert message["id"].startswith("cron:job:")
