"""The claim is planned once per connection, not on every dequeue.

With ``LIMIT $n`` PostgreSQL never keeps a generic plan of the claim (it estimates the LIMIT at a
tenth of the table) and plans it again on every execution, which cost more database CPU than
running it. The count is therefore written into the statement and a claim without a filter has
no filter condition; these tests fail if such a prepared claim stops reusing its plan, or stops
walking the index in order."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from app.store.dequeue import claim_sql
from app.store.sql.claim import Match
from tests.helpers import execute, make_queue

NS = "ns"
BACKLOG = 3000


async def _fill(service: QueueService, engine: AsyncEngine, name: str, **config: Any) -> int:
    queue = await make_queue(service, NS, name, **config)
    for start in range(0, BACKLOG, 1000):
        batch = [
            NewMessage(id=f"m{i}", priority=i, metadata={"tenant": f"t{i % 10}", "p": f"p{i}"})
            for i in range(start, start + 1000)
        ]
        await service.enqueue(NS, name, batch)
    await execute(engine, "ANALYZE messages")
    return queue.id


@pytest.mark.parametrize("count", [1, 10])
@pytest.mark.parametrize(
    ("keyed", "second_key", "due"),
    [
        (False, False, False),
        (True, False, False),
        ("any", False, False),
        (True, True, False),
        ("any", True, False),
        (False, False, True),
    ],
    ids=[
        "unfiltered",
        "on-filter-key",
        "any-of-filter-key",
        "on-second-filter-key",
        "any-of-second-filter-key",
        "due-ordered",
    ],
)
@pytest.mark.parametrize("exclusive", [False, True], ids=["simple", "exclusive"])
async def test_a_prepared_claim_keeps_its_generic_plan(
    service: QueueService,
    engine: AsyncEngine,
    postgres: Any,
    database_url: str,
    count: int,
    keyed: Match,
    second_key: bool,
    due: bool,
    exclusive: bool,
) -> None:
    # The filter is on "tenant": the queue's first indexed key, or its second.
    keys = ("p", "tenant") if second_key else ("tenant",)
    config: dict[str, Any] = {"filter_keys": keys, "ordering": "due" if due else "priority"}
    if exclusive:
        config.update(kind="exclusive", exclusive_key="p")
    queue_id = await _fill(service, engine, "q", **config)
    statement = claim_sql(
        count, exclusive=exclusive, keyed=keyed, filtered=False, due=due, second_key=second_key
    )
    params = {
        "queue_id": queue_id,
        "filter_value": "t3" if keyed is True else None,
        "filter_values": ["t3", "t5", "t7"] if keyed == "any" else None,
        "lease_override": None,
        "queue_lease": 30,
        "catalogue_version": None,  # unchecked (no request's lookups)
        "valid_until": None,
    }
    dsn = postgres.dsn(make_url(database_url).database)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        leased = 0
        for _ in range(12):  # PostgreSQL weighs generic against custom after 5 custom plans
            cursor = await conn.execute(statement, params, prepare=True)
            leased += len(await cursor.fetchall())
        plans = await conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements")
        [(generic, custom)] = await plans.fetchall()
        walk = await conn.execute(f"EXPLAIN {statement}", params)
        plan = "\n".join(row[0] for row in await walk.fetchall())

    assert leased == 12 * count
    assert custom <= 5, f"replanned on every claim: {generic=}, {custom=}"
    assert generic >= 7
    keyed_index = "messages_filter_2_pending_idx" if second_key else "messages_filter_pending_idx"
    index = (
        keyed_index if keyed else "messages_pending_visible_idx" if due else "messages_pending_idx"
    )
    assert f"Index Scan using {index} on messages" in plan
    assert "Seq Scan" not in plan
    if keyed == "any":  # one walk of the index per value, each in order: nothing sorts them
        assert "Nested Loop" in plan
        assert "Function Scan on unnest wanted" in plan
        walk = plan[plan.index("Function Scan on unnest wanted") :]
        walk = walk[: walk.index(f"Index Scan using {keyed_index}")]
        assert "Sort" not in walk, plan
