"""PgQueuer 1.6 in the same database: installed once, its jobs prepared in SQL, and its batch
enqueue API, its own consumer loop and its wake-up measured by the load generator."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.context import Ctx
from bench.sizes import CLIENTS


async def install(dsn: str) -> None:
    """PgQueuer's tables, unless they are there."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await conn.close()


async def prefill(dsn: str, n: int) -> None:
    """Jobs for PgQueuer's consumers: one through its own enqueue, copied in SQL."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(dsn)
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
    queries = Queries(AsyncpgDriver(conn))
    (template,) = await queries.enqueue("bench", b'{"c": 1}', 0)
    columns = [
        r["column_name"]
        for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'pgqueuer'"
            " AND column_name <> 'id' ORDER BY ordinal_position"
        )
    ]
    cols = ", ".join(columns)
    await conn.execute(
        f"INSERT INTO pgqueuer ({cols}) SELECT {cols} FROM pgqueuer, generate_series(2, $1)"
        " WHERE id = $2",
        n,
        template,
    )
    await conn.execute("VACUUM ANALYZE pgqueuer")
    await conn.close()


def enqueue(ctx: Ctx, batch: int) -> dict[str, Any]:
    """PgQueuer's enqueue, ``batch`` jobs per call, same clients and window."""
    asyncio.run(prefill(ctx.dsn_uri, 1))
    ctx.env.checkpoint()
    return ctx.env.loadgen(
        ctx.timed(mode="pgq_enqueue", dsn_uri=ctx.dsn_uri, clients=CLIENTS, batch=batch)
    )


def process(ctx: Ctx, batch: int) -> dict[str, Any]:
    """``QueueManager.run(batch_size=batch)`` x 8 over a backlog sized from the last rate."""
    size = ctx.size
    n_peer = ctx.backlog_for(f"peer_b{batch}", max(1.0, size["warmup"]) + size["duration"])
    asyncio.run(prefill(ctx.dsn_uri, n_peer))
    ctx.env.checkpoint()
    peer = ctx.env.loadgen(
        {
            "mode": "pgq_process",
            "dsn_uri": ctx.dsn_uri,
            "clients": CLIENTS,
            "batch": batch,
            "warmup": max(1.0, size["warmup"]),
            "duration": size["duration"],
        }
    )
    ctx.learn(f"peer_b{batch}", peer["rate"])
    if peer["ran_out"]:
        ctx.log(f"  note: PgQueuer's backlog ran out after {peer['measured_s']:.1f} s")
    return peer


def wake(ctx: Ctx) -> dict[str, Any]:
    """PgQueuer's enqueue returned → its entrypoint started (1 manager, batch 1)."""
    asyncio.run(prefill(ctx.dsn_uri, 1))
    with ctx.env.connect() as conn:
        conn.execute("TRUNCATE pgqueuer")
    return ctx.env.loadgen(
        {"mode": "pgq_wake", "dsn_uri": ctx.dsn_uri, "samples": ctx.size["wake_samples"]}
    )
