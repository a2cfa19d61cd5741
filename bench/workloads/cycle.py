"""``process_cycle``: 8 consumers, one request per message: ``POST …/ack`` completes the message
each holds and leases the next in the same call (one transaction on the server); beside it
pgbench running the same two statements in one transaction (``bench/pgbench/cycle.sql``)."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check, drain
from bench.peers import raw
from bench.prepare import prefill
from bench.sizes import CLIENTS


def measure(ctx: Ctx) -> dict[str, Any]:
    """One run: Sundial, then the raw SQL limit."""
    env, size, out = ctx.env, ctx.size, {}
    name = ctx.name("cycle")
    qid = env.create_queue(name)
    n = ctx.backlog_for("sundial_cycle", size["warmup"] + size["duration"])
    prefill(env, qid, n)
    env.checkpoint()
    spec = ctx.timed(mode="cycle", queue_path=env.queue_path(name), clients=CLIENTS)
    r = env.loadgen(spec)
    ctx.learn("sundial_cycle", r["rate"])
    if r["ran_out"]:
        ctx.log(f"  note: the backlog of {n} ran out after {r['measured_s']:.1f} s of the window")
    rest = drain(ctx, env.queue_path(name))
    counts = env.counts(qid)
    out["check"] = check(
        ctx,
        "process cycle: completed == enqueued, no duplicates, no errors",
        counts == {"completed": n}
        and r["duplicates"] == 0
        and r["errors"] == 0
        and r["completed_total"] + rest["completed_total"] == n,
        {"enqueued": n, "counts": counts, "errors": r["errors"], "duplicates": r["duplicates"]},
    )
    env.drop_queue(qid)
    out["sundial"] = r
    out["raw"] = raw.cycle(ctx)
    return out
