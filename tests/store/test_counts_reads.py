"""The reads of a queue's counts and of its oldest pending message do no work that grows with
the backlog: they touch as many buffers with 50,000 pending messages as with 2,000, and they
reach ``messages`` only through index probes. (The buffers a statement touches, from
``EXPLAIN (ANALYZE, BUFFERS)``, measure its work without timing anything.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store import maintenance
from app.store.sql.insights import MESSAGES_OLDEST_PENDING_AGE_PER_QUEUE
from app.store.sql.reads import MESSAGES_COUNT_BY_STATE, MESSAGES_OLDEST_PENDING_AGE
from app.store.sql.stats import DATABASE_STATS
from app.store.stats import LEADER_FRESH_SECONDS
from tests.helpers import execute, make_queue

# The statements, each with the parameters it takes for the queue ``q`` (id 1).
READS: dict[str, tuple[sa.TextClause, dict[str, Any]]] = {
    "counts": (MESSAGES_COUNT_BY_STATE, {"queue_ids": [1]}),
    "oldest pending": (MESSAGES_OLDEST_PENDING_AGE, {"queue_id": 1}),
    "metrics": (DATABASE_STATS, {"fresh_seconds": LEADER_FRESH_SECONDS}),
    "dashboard oldest pending": (MESSAGES_OLDEST_PENDING_AGE_PER_QUEUE, {"queue_ids": [1]}),
}

# How messages may be read: the first entry of a partial index, never a scan of the table.
INDEX_PROBES = {"Index Scan", "Index Only Scan"}


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


async def explain(engine: AsyncEngine, stmt: sa.TextClause, params: dict[str, Any]) -> dict:
    """The executed plan of ``stmt``, with the buffers it touched."""
    async with engine.connect() as conn:
        explained = sa.text(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {stmt.text}")
        raw = (await conn.execute(explained, params)).scalar_one()
        await conn.rollback()
    [result] = raw if isinstance(raw, list) else json.loads(raw)
    plan: dict[str, Any] = result["Plan"]
    return plan


def buffers(plan: dict[str, Any]) -> int:
    """Buffers the whole statement touched (the top node's counts include its children's)."""
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


async def fill(engine: AsyncEngine, first: int, last: int) -> None:
    """Pending messages ``first``..``last`` in queue 1, as the API would create them."""
    await execute(
        engine,
        "INSERT INTO messages (queue_id, id, priority, state, payload, visible_at) "
        "SELECT 1, 'p' || g, g, 'pending', jsonb_build_object('i', g), "
        "       now() - make_interval(secs => g) "
        "FROM generate_series(CAST(:first AS int), CAST(:last AS int)) AS g",
        first=first,
        last=last,
    )
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(sa.text("VACUUM ANALYZE messages"))
        await maintenance.fold_counts(conn)


@pytest.fixture
async def backlog(service, engine):
    """Queue ``ns/q`` (id 1) with 2,000 pending messages; call it to grow them to 50,000."""
    queue = await make_queue(service, "ns", "q")
    assert queue.id == 1
    await fill(engine, 1, 2000)

    async def grow() -> None:
        await fill(engine, 2001, 50_000)

    return grow


async def test_reads_touch_as_many_buffers_with_a_backlog_25_times_larger(backlog, engine):
    small = {name: await explain(engine, *read) for name, read in READS.items()}
    await backlog()
    large = {name: await explain(engine, *read) for name, read in READS.items()}
    for name in READS:
        # A deeper index may cost a buffer more per probe, never one per message.
        assert buffers(large[name]) <= buffers(small[name]) + 4, name
    # And the answers are those of the large backlog.
    async with engine.connect() as conn:
        counts = (await conn.execute(MESSAGES_COUNT_BY_STATE, {"queue_ids": [1]})).all()
        age = (await conn.execute(MESSAGES_OLDEST_PENDING_AGE, {"queue_id": 1})).scalar_one()
    assert [(row.queue_id, row.state, row.n) for row in counts] == [(1, "pending", 50_000)]
    assert 50_000 <= age < 50_100


async def test_reads_reach_messages_only_through_index_probes(backlog, engine):
    await backlog()
    for name, read in READS.items():
        plan = await explain(engine, *read)
        on_messages = [n for n in nodes(plan) if n.get("Relation Name") == "messages"]
        for node in on_messages:
            assert node["Node Type"] in INDEX_PROBES, (name, node["Node Type"])
            assert int(node["Actual Rows"]) <= 1, (name, node.get("Index Name"))
        if name == "counts":
            assert on_messages == []  # the counts never read a message
        if "oldest pending" in name:
            assert [n["Index Name"] for n in on_messages] == ["messages_pending_visible_idx"]
