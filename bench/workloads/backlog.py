"""``backlog``: ``process_b1`` over a queue with a big pending backlog (100k quick, 10M full),
prepared in SQL, with the plan of the claim; its dequeue p99 is compared with ``process_b1``'s.
The filter and exclusive workloads process their own backlogs the same way."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.explain import explain_claim
from bench.prepare import prefill
from bench.sizes import CLIENTS


def process_backlog(
    ctx: Ctx, name: str, qid: int, *, filters: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``process_b1`` (each consumer with its filter, if any) over the prepared queue, once per
    run (``--runs``), a CHECKPOINT before each."""
    runs = []
    for _ in range(ctx.runs):
        ctx.env.checkpoint()
        runs.append(
            ctx.env.loadgen(
                ctx.timed(
                    mode="process",
                    queue_path=ctx.env.queue_path(name),
                    clients=CLIENTS,
                    batch=1,
                    filters=filters,
                )
            )
        )
    return runs


def measure(ctx: Ctx) -> dict[str, Any]:
    """Prepare the backlog, explain the claim (count 1 and 100), process it ``--runs`` times."""
    env, n = ctx.env, ctx.size["backlog"]
    name = ctx.name("backlog")
    qid = env.create_queue(name)
    ctx.log(f"  preparing {n:,} pending messages in SQL …")
    prep = prefill(env, qid, n)
    ctx.log(f"  prepared in {prep:.1f} s")
    plans = {f"count_{c}": explain_claim(env, qid, c) for c in (1, 100)}
    runs = process_backlog(ctx, name, qid)
    counts = env.counts(qid)
    acked = sum(r["completed_total"] for r in runs)
    check(
        ctx,
        "backlog: completed == acknowledged, nothing left running, nothing lost",
        counts.get("completed", 0) == acked
        and counts.get("running", 0) == 0
        and sum(counts.values()) == n
        and all(r["duplicates"] == 0 and r["errors"] == 0 for r in runs),
        {"counts": counts, "acked": acked},
    )
    env.drop_queue(qid)
    return {"prepare_s": prep, "backlog": n, "runs": runs, "explain": plans}
