"""``worker``: the worker loop end to end. Sundial's own :class:`app.client.Worker` (concurrency
8, an async no-op handler) drains a prefilled queue through the HTTP API; beside it PgQueuer's
consumer loop (``QueueManager.run`` with its default batch of 10, 8 managers, a no-op
entrypoint) drains its own table in the same database."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.harness import NAMESPACE
from bench.peers import pgqueuer
from bench.prepare import prefill
from bench.sizes import CLIENTS

PEER_BATCH = 10
"""PgQueuer's own default ``batch_size``."""


def measure(ctx: Ctx) -> dict[str, Any]:
    """One run: Sundial's Worker, then PgQueuer's (unless ``--no-peer``)."""
    env, size, out = ctx.env, ctx.size, {}
    name = ctx.name("worker")
    qid = env.create_queue(name)
    n = ctx.backlog_for("sundial_worker", size["warmup"] + size["duration"])
    prefill(env, qid, n)
    env.checkpoint()
    r = env.loadgen({"mode": "worker", "queue": f"{NAMESPACE}/{name}", "concurrency": CLIENTS})
    ctx.learn("sundial_worker", r["rate"])
    counts = env.counts(qid)
    out["check"] = check(
        ctx,
        "worker: every message completed once, none lost or failed",
        counts == {"completed": n} and r["completed_total"] == n and r["lost"] == r["failed"] == 0,
        {"enqueued": n, "counts": counts, "completed_by_worker": r["completed_total"]},
    )
    env.drop_queue(qid)
    out["sundial"] = r
    if ctx.peer:
        out["peer"] = pgqueuer.process(ctx, PEER_BATCH)
    return out
