"""``filter_or``: ``process_b1`` where each consumer's filter is a list of two values of the
queue's ``filter_key`` (RocketMQ's ``A || B``), over a backlog spread over 100 tenants (each
consumer's two tenants: 2% of it), prepared in SQL; the claim walks the filter index once per
value and merges the walks (app/store/sql/claim.py)."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.explain import explain_claim
from bench.prepare import prefill
from bench.sizes import CLIENTS
from bench.workloads.backlog import process_backlog


def measure(ctx: Ctx) -> dict[str, Any]:
    """Consumer i filters on ``{"tenant": ["t<i>", "t<i+8>"]}`` (disjoint pairs) of a queue
    with ``filter_key = "tenant"``; prepared, explained (count 1 and 100), processed, checked."""
    env, n = ctx.env, ctx.size["filter_backlog"]
    name = ctx.name("filter_or")
    qid = env.create_queue(name, filter_key="tenant")
    ctx.log(f"  preparing {n:,} pending messages over 100 tenants in SQL …")
    prep = prefill(env, qid, n, metadata="jsonb_build_object('tenant', 't' || (g %% 100))")
    ctx.log(f"  prepared in {prep:.1f} s")
    plans = {
        f"count_{c}": explain_claim(env, qid, c, filter_values=["t7", "t15"]) for c in (1, 100)
    }
    filters = [{"tenant": [f"t{i}", f"t{i + CLIENTS}"]} for i in range(CLIENTS)]
    runs = process_backlog(ctx, name, qid, filters=filters)
    counts = env.counts(qid)
    acked = sum(r["completed_total"] for r in runs)
    check(
        ctx,
        "OR filter on filter_key: completed == acknowledged, nothing lost, no duplicate",
        counts.get("completed", 0) == acked
        and sum(counts.values()) == n
        and counts.get("running", 0) == 0
        and all(r["duplicates"] == 0 and r["errors"] == 0 for r in runs),
        {"counts": counts, "acked": acked},
    )
    env.drop_queue(qid)
    return {"prepare_s": prep, "backlog": n, "runs": runs, "explain": plans}
