"""A queue's second indexed filter key (``filter_keys``): its value is copied into
``filter_value_2`` on every path that writes a message's metadata, and a dequeue filtering on it
(and not on the first key) walks ``messages_filter_2_pending_idx``, reading only matches."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import MessageChanges, Queue
from app.core.service import QueueService
from app.store.sql.claim import messages_claim
from tests.helpers import fetch, index_scans, leased_ids, make_queue, tagged
from tests.periodic.helpers import make_job, set_next_run, tick

NS = "ns"
KEYS = ("tenant", "region")


async def stored_values(engine: AsyncEngine, queue: Queue) -> dict[str, tuple[Any, Any]]:
    rows = await fetch(
        engine,
        "SELECT id, filter_value, filter_value_2 FROM messages WHERE queue_id = :q",
        q=queue.id,
    )
    return {row["id"]: (row["filter_value"], row["filter_value_2"]) for row in rows}


async def test_every_write_path_extracts_both_values(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q", filter_keys=KEYS)
    await service.enqueue(NS, "q", [tagged("one", 1, tenant="a", region="eu")])  # one
    await service.enqueue(  # a batch
        NS, "q", [tagged("b", 2, tenant="b"), tagged("r", 3, region="us"), tagged("none", 4)]
    )
    await service.enqueue(  # replaced on re-publish
        NS, "q", [tagged("none", 4, tenant="c", region="ap")], on_conflict="replace"
    )
    await service.update_message(NS, "q", "one", MessageChanges(metadata={"region": "us"}))
    await make_job(service, "job", queue="q", metadata={"tenant": "cron", "region": "eu"})
    await set_next_run(engine, "job", "now() - interval '1 second'")
    assert await tick(engine) == 1

    values = await stored_values(engine, queue)
    [cron] = [key for key in values if key.startswith("cron:")]
    assert values == {
        "one": (None, "us"),
        "b": ("b", None),
        "r": (None, "us"),
        "none": ("c", "ap"),
        cron: ("cron", "eu"),
    }


async def test_a_filter_on_the_second_key_returns_its_matches_in_priority_order(
    service: QueueService,
) -> None:
    await make_queue(service, NS, "q", filter_keys=KEYS)
    await service.enqueue(
        NS,
        "q",
        [
            tagged("eu-late", 30, region="eu"),
            tagged("us-first", 5, region="us"),
            tagged("eu-a", 10, tenant="a", region="eu"),
            tagged("no-region", 1, tenant="a"),
            tagged("eu-b", 20, tenant="b", region="eu"),
            tagged("ap", 25, region="ap"),
        ],
    )

    # Both keys: the first key's index, the second tested on its rows.
    assert await leased_ids(service, NS, "q", 10, tenant="a", region="eu") == ["eu-a"]
    assert await leased_ids(service, NS, "q", 1, region="eu") == ["eu-b"]
    assert await leased_ids(service, NS, "q", 10, region=["ap", "eu"]) == ["ap", "eu-late"]
    assert await leased_ids(service, NS, "q", 10, region="eu") == []
    assert await leased_ids(service, NS, "q", 10) == ["no-region", "us-first"]


async def test_an_exclusive_queue_filtered_on_its_second_key_runs_one_per_value(
    service: QueueService,
) -> None:
    await make_queue(service, NS, "x", kind="exclusive", exclusive_key="project", filter_keys=KEYS)
    await service.enqueue(
        NS,
        "x",
        [
            tagged("p1-1", 1, project="p1", region="eu"),
            tagged("p1-2", 2, project="p1", region="eu"),
            tagged("p2-1", 3, project="p2", region="eu"),
            tagged("p3-1", 4, project="p3", region="us"),
        ],
    )

    assert await leased_ids(service, NS, "x", 10, region="eu") == ["p1-1", "p2-1"]
    assert await leased_ids(service, NS, "x", 10, region=["eu", "us"]) == ["p3-1"]  # p1 runs


async def test_a_filter_on_the_second_key_is_answered_from_its_column(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q", filter_keys=KEYS)
    await service.enqueue(NS, "q", [tagged("m", 1, region="eu")])
    async with engine.begin() as conn:  # what the claim on the second key reads, and only it
        await conn.execute(
            sa.text("UPDATE messages SET filter_value_2 = 'elsewhere' WHERE queue_id = :q"),
            {"q": queue.id},
        )

    assert await leased_ids(service, NS, "q", 1, region="eu") == []
    assert await leased_ids(service, NS, "q", 1, region="elsewhere") == ["m"]


async def test_the_claim_on_the_second_key_reads_only_matching_rows(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "big", filter_keys=KEYS)
    for start in range(0, 5000, 1000):
        batch = [
            tagged(f"m{i}", i, tenant=f"t{i % 7}", region=f"r{i % 50}")
            for i in range(start, start + 1000)
        ]
        await service.enqueue(NS, "big", batch)
    async with engine.begin() as conn:
        await conn.execute(sa.text("ANALYZE messages"))
    params = {
        "queue_id": queue.id,
        "filter_value": "r49",
        "filter_values": ["r48", "r49"],
        "filter": json.dumps({"region": "r49"}),
        "lease_override": None,
        "queue_lease": 30,
        "catalogue_version": None,  # unchecked (no request's lookups)
        "valid_until": None,
    }
    for keyed in (True, "any"):
        claim = messages_claim(count=1, keyed=keyed, second_key=True)
        explain = sa.text(f"EXPLAIN (ANALYZE, FORMAT JSON) {claim.text}")
        async with engine.connect() as conn:  # rolled back: nothing is leased
            (plan,) = (await conn.execute(explain, params)).scalar_one()
            await conn.rollback()
        index = "messages_filter_2_pending_idx"
        walks = [s for s in index_scans(plan["Plan"]) if s["Index Name"] == index]
        # One walk per value, each stopping at its first match, none passing over another row.
        assert [w["Actual Rows"] * w["Actual Loops"] for w in walks] == [1 if keyed is True else 2]
        assert all(w.get("Rows Removed by Filter", 0) == 0 for w in walks)
