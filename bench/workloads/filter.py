"""``filter``: ``process_b1`` with metadata filters over a backlog spread over 100 tenants, each
consumer on its own tenant (1% of the backlog); on a queue with ``filter_key`` and on one
without."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.explain import explain_claim
from bench.prepare import prefill
from bench.sizes import CLIENTS
from bench.workloads.backlog import process_backlog


def measure(ctx: Ctx) -> dict[str, Any]:
    """Each consumer filters on its own tenant, 1% of the backlog. Measured twice: on a queue
    with ``filter_key = "tenant"`` (the index of that key's values; the figure for target 6b),
    and on a queue without one, where the claim tests messages one by one in priority order."""
    keyed = _filter_run(ctx, "filter", filter_key="tenant")
    general = _filter_run(ctx, "filter_general", filter_key=None)
    return {**keyed, "general": general}


def _filter_run(ctx: Ctx, label: str, *, filter_key: str | None) -> dict[str, Any]:
    """One queue (with ``filter_key`` or without): prepared, explained, processed, checked."""
    env, n = ctx.env, ctx.size["filter_backlog"]
    name = ctx.name(label)
    qid = env.create_queue(name, **({"filter_key": filter_key} if filter_key else {}))
    prep = prefill(env, qid, n, metadata="jsonb_build_object('tenant', 't' || (g %% 100))")
    plan = explain_claim(
        env, qid, 1, filt='{"tenant": "t7"}', filter_value="t7" if filter_key else None
    )
    filters = [{"tenant": f"t{i}"} for i in range(CLIENTS)]
    runs = process_backlog(ctx, name, qid, filters=filters)
    counts = env.counts(qid)
    acked = sum(r["completed_total"] for r in runs)
    check(
        ctx,
        f"metadata filter ({'filter_key' if filter_key else 'no filter_key'}):"
        " completed == acknowledged, nothing lost",
        counts.get("completed", 0) == acked
        and sum(counts.values()) == n
        and counts.get("running", 0) == 0,
        {"counts": counts, "acked": acked},
    )
    env.drop_queue(qid)
    return {"prepare_s": prep, "backlog": n, "runs": runs, "explain": {"count_1": plan}}
