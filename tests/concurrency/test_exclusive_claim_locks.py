"""An exclusive claim locks only the values it leases, so concurrent claimers share the idle values.

A claim takes a non-blocking advisory lock per exclusive value so that a concurrent claim skips
a value being leased instead of queueing behind it on the unique index. Claimer A's claim is
held open in a transaction (as if it had not committed yet) while claimer B claims through the
service: nothing here waits by sleeping, the interleaving is forced.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, Queue
from app.core.service import QueueService
from app.store.postgres import PostgresStore
from tests.helpers import make_queue, states_of

NS = "ns"
VALUES, PER_VALUE = 8, 3

ADVISORY_LOCKS = """
    SELECT count(*) FROM pg_locks
    WHERE locktype = 'advisory' AND pid = %(pid)s AND granted
"""


async def _interleaved_queue(service: QueueService) -> Queue:
    """VALUES idle values with PER_VALUE messages each; in priority order every value's first
    message comes before any value's second: ``v0-0, v1-0, ..., v7-0, v0-1, ...``."""
    queue = await make_queue(
        service, NS, "ex", kind="exclusive", exclusive_key="project", lease_seconds=600
    )
    messages = [
        NewMessage(id=f"v{v}-{k}", priority=k * VALUES + v, metadata={"project": f"p{v}"})
        for k in range(PER_VALUE)
        for v in range(VALUES)
    ]
    assert all(o.created for o in await service.enqueue(NS, "ex", messages))
    return queue


async def test_a_claim_in_flight_leaves_the_values_it_does_not_lease_to_others(
    service: QueueService, engine: AsyncEngine, postgres: Any, database_url: str
) -> None:
    queue = await _interleaved_queue(service)
    store = service.store
    assert isinstance(store, PostgresStore)
    statement, params = store._claim(queue, 2, None, {})
    dsn = postgres.dsn(make_url(database_url).database)
    async with await psycopg.AsyncConnection.connect(dsn) as first:
        # Claimer A: the very claim the store runs, left uncommitted.
        cursor = first.cursor(row_factory=dict_row)
        await cursor.execute(statement, params)
        first_leased = sorted(row["id"] for row in await cursor.fetchall())
        locks = await first.execute(ADVISORY_LOCKS, {"pid": first.info.backend_pid})
        first_locks = (await locks.fetchone() or [None])[0]

        # Claimer B, meanwhile: 6 values are idle, it must get 2 of them.
        second = await service.dequeue(NS, "ex", count=2)
        await first.commit()

    assert first_leased == ["v0-0", "v1-0"]
    assert first_locks == 2  # one per leased value, not one per value it looked at
    # B takes the next values' first messages: never a later message of a value whose first
    # message waits, and never a value A holds.
    assert [m.id for m in second] == ["v2-0", "v3-0"]
    running = {i for i, state in (await states_of(engine, queue)).items() if state == "running"}
    assert running == {"v0-0", "v1-0", "v2-0", "v3-0"}


async def test_claims_in_flight_together_take_every_idle_value_once(
    service: QueueService, engine: AsyncEngine, postgres: Any, database_url: str
) -> None:
    """Four claims of two, each held open while the next runs: the eight values are shared out,
    one head message each, and a fifth claim finds nothing (every value is running)."""
    queue = await _interleaved_queue(service)
    store = service.store
    assert isinstance(store, PostgresStore)
    statement, params = store._claim(queue, 2, None, {})
    dsn = postgres.dsn(make_url(database_url).database)
    held: list[psycopg.AsyncConnection[Any]] = []
    leased: list[list[str]] = []
    try:
        for _ in range(4):
            conn = await psycopg.AsyncConnection.connect(dsn)
            held.append(conn)
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(statement, params)
            leased.append(sorted(row["id"] for row in await cursor.fetchall()))
        for conn in held:
            await conn.commit()
    finally:
        for conn in held:
            await conn.close()

    assert leased == [["v0-0", "v1-0"], ["v2-0", "v3-0"], ["v4-0", "v5-0"], ["v6-0", "v7-0"]]
    assert await service.dequeue(NS, "ex", count=2) == []
