"""``wake``: 4 consumers long-poll an empty queue while one message at a time is committed with
Sundial's enqueue SQL shape; latency = COMMIT returned → first response carrying it. Beside it
PostgreSQL's own LISTEN/NOTIFY and PgQueuer's enqueue → entrypoint."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.peers import pgqueuer, raw


def measure(ctx: Ctx) -> dict[str, Any]:
    """One run: Sundial, then raw LISTEN/NOTIFY, then PgQueuer (unless ``--no-peer``)."""
    env, out = ctx.env, {}
    name = ctx.name("wake")
    qid = env.create_queue(name)
    r = env.loadgen(
        {
            "mode": "wake",
            "queue_path": env.queue_path(name),
            "queue_id": qid,
            "clients": 4,
            "samples": ctx.size["wake_samples"],
        }
    )
    counts = env.counts(qid)
    out["check"] = check(
        ctx,
        "wake: every message delivered and completed",
        r["missing"] == 0 and counts == {"completed": ctx.size["wake_samples"]},
        {"missing": r["missing"], "counts": counts},
    )
    env.drop_queue(qid)
    out["sundial"] = r
    out["raw"] = raw.wake(ctx)
    if ctx.peer:
        out["peer"] = pgqueuer.wake(ctx)
    return out
