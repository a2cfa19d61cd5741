"""``enqueue_b100`` / ``enqueue_b1``: 8 clients POST batches of ``batch`` messages back to back;
beside them pgbench running Sundial's INSERT and PgQueuer's batch enqueue."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.peers import pgqueuer, raw
from bench.sizes import CLIENTS


def measure(ctx: Ctx, batch: int) -> dict[str, Any]:
    """One run: Sundial, then the raw SQL limit, then PgQueuer (unless ``--no-peer``)."""
    env, out = ctx.env, {}
    name = ctx.name(f"enq{batch}")
    qid = env.create_queue(name)
    env.checkpoint()
    r = env.loadgen(
        ctx.timed(mode="enqueue", queue_path=env.queue_path(name), clients=CLIENTS, batch=batch)
    )
    stored = sum(env.counts(qid).values())
    out["check"] = check(
        ctx,
        f"enqueue b{batch}: rows stored == messages acknowledged",
        stored == r["enqueued_total"] and r["errors"] == 0,
        {"stored": stored, "acknowledged": r["enqueued_total"], "errors": r["errors"]},
    )
    env.drop_queue(qid)
    out["sundial"] = r
    out["raw"] = raw.enqueue(ctx, batch)
    if ctx.peer:
        out["peer"] = pgqueuer.enqueue(ctx, batch)
    return out
