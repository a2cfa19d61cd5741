"""A queue's ``filter_key``: the value of that metadata key is copied into ``filter_value`` on
every path that writes metadata, and a dequeue filtering on it takes
``messages_filter_pending_idx`` instead of testing the queue's messages one by one."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import MessageChanges, Queue
from app.core.service import QueueService
from app.store.sql.claim import messages_claim
from tests.helpers import fetch, index_scans, leased_ids, make_queue, tagged

NS = "ns"


async def stored_filter_values(engine: AsyncEngine, queue: Queue) -> dict[str, str | None]:
    rows = await fetch(
        engine, "SELECT id, filter_value FROM messages WHERE queue_id = :q", q=queue.id
    )
    return {row["id"]: row["filter_value"] for row in rows}


async def test_enqueue_extracts_the_filter_value_on_every_path(
    service: QueueService, engine: AsyncEngine
) -> None:
    keyed = await make_queue(service, NS, "keyed", filter_keys=("tenant",))
    plain = await make_queue(service, NS, "plain")
    await service.enqueue(NS, "keyed", [tagged("one", 1, tenant="a", region="eu")])
    await service.enqueue(
        NS, "keyed", [tagged("b1", 2, tenant="b"), tagged("none", 3, region="eu")]
    )
    await service.enqueue(NS, "plain", [tagged("p", 1, tenant="a")])

    assert await stored_filter_values(engine, keyed) == {"one": "a", "b1": "b", "none": None}
    assert await stored_filter_values(engine, plain) == {"p": None}


async def test_filtered_dequeue_on_the_key_returns_only_matches_in_priority_order(
    service: QueueService,
) -> None:
    await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(
        NS,
        "q",
        [
            tagged("a-late", 30, tenant="a"),
            tagged("b-first", 5, tenant="b"),
            tagged("a-first", 10, tenant="a", region="eu"),
            tagged("keyless", 1, region="eu"),
            tagged("a-us", 20, tenant="a", region="us"),
        ],
    )

    assert await leased_ids(service, NS, "q", 1, tenant="a", region="eu") == ["a-first"]
    assert await leased_ids(service, NS, "q", 10, tenant="a") == ["a-us", "a-late"]
    assert await leased_ids(service, NS, "q", 10, tenant="a") == []
    assert await leased_ids(service, NS, "q", 10, tenant="zzz") == []
    # A filter without the key takes the general path and still sees keyless messages.
    assert await leased_ids(service, NS, "q", 10, region="eu") == ["keyless"]
    assert await leased_ids(service, NS, "q", 10) == ["b-first"]


async def test_a_filter_on_the_key_is_answered_from_the_indexed_column(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(NS, "q", [tagged("m", 1, tenant="a")])
    async with engine.begin() as conn:  # what the keyed claim reads, and only it
        await conn.execute(
            sa.text("UPDATE messages SET filter_value = 'elsewhere' WHERE queue_id = :q"),
            {"q": queue.id},
        )

    assert await leased_ids(service, NS, "q", 1, tenant="a") == []
    assert await leased_ids(service, NS, "q", 1) == ["m"]  # still there for the general path


async def test_patching_metadata_moves_the_message_to_its_new_value(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q", filter_keys=("tenant",))
    await service.enqueue(NS, "q", [tagged("m", 1, tenant="a"), tagged("n", 2, tenant="a")])

    await service.update_message(NS, "q", "m", MessageChanges(metadata={"tenant": "b"}))
    await service.update_message(NS, "q", "n", MessageChanges(metadata={"other": "x"}))
    await service.update_message(NS, "q", "n", MessageChanges(priority=0))  # metadata kept

    assert await stored_filter_values(engine, queue) == {"m": "b", "n": None}
    assert await leased_ids(service, NS, "q", 10, tenant="a") == []
    assert await leased_ids(service, NS, "q", 10, tenant="b") == ["m"]


async def test_exclusive_queue_with_a_filter_key_still_runs_one_per_value(
    service: QueueService,
) -> None:
    await make_queue(
        service, NS, "x", kind="exclusive", exclusive_key="project", filter_keys=("tenant",)
    )
    await service.enqueue(
        NS,
        "x",
        [
            tagged("p1-a", 1, project="p1", tenant="a"),
            tagged("p1-b", 2, project="p1", tenant="a"),
            tagged("p2-a", 3, project="p2", tenant="a"),
            tagged("p3-b", 4, project="p3", tenant="b"),
        ],
    )

    assert await leased_ids(service, NS, "x", 10, tenant="a") == ["p1-a", "p2-a"]
    assert await leased_ids(service, NS, "x", 10, tenant="a") == []  # p1 is running


async def _explain_claim(engine: AsyncEngine, statement: sa.TextClause, queue: Queue) -> Any:
    params = {
        "queue_id": queue.id,
        "filter": json.dumps({"tenant": "t49"}),
        "filter_value": "t49",
        "lease_override": None,
        "queue_lease": 30,
        "catalogue_version": None,  # unchecked (no request's lookups)
        "valid_until": None,
    }
    explain = sa.text(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement.text}")
    async with engine.connect() as conn:  # rolled back: nothing is leased
        (plan,) = (await conn.execute(explain, params)).scalar_one()
        await conn.rollback()
    return plan["Plan"]


async def test_the_keyed_claim_reads_only_matching_rows(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "big", filter_keys=("tenant",))
    for start in range(0, 5000, 1000):
        batch = [tagged(f"m{i}", i, tenant=f"t{i % 50}") for i in range(start, start + 1000)]
        await service.enqueue(NS, "big", batch)
    async with engine.begin() as conn:
        await conn.execute(sa.text("ANALYZE messages"))

    keyed_claim = messages_claim(count=1, keyed=True)
    walking_claim = messages_claim(count=1, filtered=True)
    keyed = index_scans(await _explain_claim(engine, keyed_claim, queue))
    walk = index_scans(await _explain_claim(engine, walking_claim, queue))

    [ready] = [s for s in keyed if s["Index Name"] == "messages_filter_pending_idx"]
    assert ready["Actual Rows"] == 1
    assert ready.get("Rows Removed by Filter", 0) == 0
    # Without the key the claim tests the 49 messages of other tenants ahead of the first match.
    [walked] = [s for s in walk if s["Index Name"] == "messages_pending_idx"]
    assert walked["Rows Removed by Filter"] == 49
