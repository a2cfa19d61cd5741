"""The database's gauges in ``GET /metrics``: queue depth, oldest pending age and scheduler lag
of this test's database (the pool ``default``), dead tuples from PostgreSQL's statistics, one
read per period however many scrape, and an unreachable database reported as a metric rather
than an error. tests/pools/test_pool_metrics.py has them with two pools."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.observability.database import DatabaseStatsCache
from app.observability.endpoint import render
from tests.observability.helpers import parse, scrape, server_metrics, value


async def test_queue_depth_oldest_pending_age_and_scheduler_lag(alpha, queue, engine):
    # The test app runs no scheduler, so overdue work stays overdue.
    body = {"messages": [{"id": "p1"}, {"id": "p2"}, {"id": "later", "delay_seconds": 3600}]}
    assert (await alpha.post(f"{queue}/messages", json=body)).status_code == 201
    await alpha.post(f"{queue}/dequeue", json={"count": 1})
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE messages SET visible_at = now() - interval '30 seconds' WHERE id = 'later'"
            )
        )
        await conn.execute(
            text(
                "UPDATE messages SET lease_expires_at = now() - interval '20 seconds'"
                " WHERE state = 'running'"
            )
        )
        await conn.execute(
            text(
                "UPDATE messages SET visible_at = now() - interval '40 seconds'"
                " WHERE state = 'pending'"
            )
        )
    samples = await scrape(alpha)
    pool = {"pool": "default"}
    q = {**pool, "namespace": "alpha", "queue": "q"}
    assert value(samples, "sundial_database_up", **pool) == 1
    assert value(samples, "sundial_queue_messages", **q, state="pending") == 1
    assert value(samples, "sundial_queue_messages", **q, state="running") == 1
    assert value(samples, "sundial_queue_messages", **q, state="invisible") == 1
    assert 40 <= value(samples, "sundial_queue_oldest_pending_age_seconds", **q) < 100
    lag = "sundial_scheduler_lag_seconds"
    assert 30 <= value(samples, lag, **pool, work="promotion") < 100
    assert 20 <= value(samples, lag, **pool, work="lease_release") < 100
    assert (lag, frozenset({**pool, "work": "expiry"}.items())) in samples
    assert value(samples, lag, **pool, work="expiry") == 0


async def test_dead_tuples_come_from_the_statistics(alpha, queue, engine):
    body = {"messages": [{"id": f"m{i}"} for i in range(10)]}
    assert (await alpha.post(f"{queue}/messages", json=body)).status_code == 201
    async with engine.connect() as conn:
        await conn.execute(text("DELETE FROM messages WHERE id IN ('m1', 'm2', 'm3', 'm4', 'm5')"))
        await conn.commit()
        # Make this session hand its statistics in now rather than within a second.
        await conn.execute(text("SELECT pg_stat_force_next_flush()"))
        await conn.commit()
    samples = await scrape(alpha)
    assert value(samples, "sundial_table_dead_tuples", pool="default", table="messages") >= 5
    # Live tuples are reported too (their figure depends on when the enqueue's session hands
    # in its statistics, so only its presence is certain here).
    live = frozenset({("pool", "default"), ("table", "messages")})
    assert ("sundial_table_live_tuples", live) in samples


async def test_the_database_is_read_once_per_period_however_many_scrape(alpha, queue, engine):
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "pg_stat_user_tables" in statement:
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        cache = server_metrics(alpha).databases["default"]
        now = [1000.0]
        cache.recent.clock = lambda: now[0]
        await asyncio.gather(*(scrape(alpha) for _ in range(5)))
        await scrape(alpha)
        assert len(statements) == 1
        now[0] += cache.recent.ttl
        await scrape(alpha)
        assert len(statements) == 2
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)


async def test_an_unreachable_database_is_a_metric_not_an_error():
    engine = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        reading = await DatabaseStatsCache(engine, timeout=5).current()
    finally:
        await engine.dispose()
    assert reading.stats is None
    samples = parse(render({"default": reading}).decode())
    assert ("sundial_database_up", frozenset({("pool", "default")})) in samples
    assert value(samples, "sundial_database_up", pool="default") == 0
    assert not any(name == "sundial_queue_messages" for name, _ in samples)
    # Without any pool's reading, a scrape holds the process metrics only.
    assert not any(name == "sundial_database_up" for name, _ in parse(render({}).decode()))


async def test_scrape_answers_while_the_database_is_unreachable(anonymous):
    cache = server_metrics(anonymous).databases["default"]
    cache.engine = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        samples = await scrape(anonymous)
    finally:
        await cache.engine.dispose()
    assert ("sundial_database_up", frozenset({("pool", "default")})) in samples
    assert value(samples, "sundial_database_up", pool="default") == 0
    # Process metrics still there.
    assert ("sundial_db_pool_size", frozenset({("pool", "default")})) in samples
