"""``filter``: ``process_b1`` with metadata filters over a backlog spread over 100 tenants, each
consumer on its own tenant (1% of the backlog); on a queue whose first indexed key is the tenant,
on one whose second is (its first: a region, 4 values), and on one indexing neither."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.explain import explain_claim
from bench.prepare import prefill
from bench.sizes import CLIENTS
from bench.workloads.backlog import process_backlog


def measure(ctx: Ctx) -> dict[str, Any]:
    """Each consumer filters on its own tenant, 1% of the backlog. Measured three times: on a
    queue with ``filter_keys = ["tenant"]`` (the index of that key's values; the figure for
    target 6b), on one with ``filter_keys = ["region", "tenant"]`` (the second key's index), and
    on one without, where the claim tests messages one by one in priority order."""
    keyed = _filter_run(ctx, "filter", filter_keys=["tenant"])
    second = _filter_run(ctx, "filter_second", filter_keys=["region", "tenant"])
    general = _filter_run(ctx, "filter_general", filter_keys=[])
    return {**keyed, "second_key": second, "general": general}


def _filter_run(ctx: Ctx, label: str, *, filter_keys: list[str]) -> dict[str, Any]:
    """One queue (indexing ``filter_keys``): prepared, explained, processed, checked."""
    env, n = ctx.env, ctx.size["filter_backlog"]
    name = ctx.name(label)
    qid = env.create_queue(name, filter_keys=filter_keys)
    metadata = "jsonb_build_object('tenant', 't' || (g %% 100), 'region', 'r' || (g %% 4))"
    prep = prefill(env, qid, n, metadata=metadata)
    indexed = "tenant" in filter_keys
    plan = explain_claim(
        env,
        qid,
        1,
        filt='{"tenant": "t7"}',
        filter_value="t7" if indexed else None,
        second_key=filter_keys[1:] == ["tenant"],
    )
    filters = [{"tenant": f"t{i}"} for i in range(CLIENTS)]
    runs = process_backlog(ctx, name, qid, filters=filters)
    counts = env.counts(qid)
    acked = sum(r["completed_total"] for r in runs)
    check(
        ctx,
        f"metadata filter (indexing {filter_keys or 'no key'}):"
        " completed == acknowledged, nothing lost",
        counts.get("completed", 0) == acked
        and sum(counts.values()) == n
        and counts.get("running", 0) == 0,
        {"counts": counts, "acked": acked},
    )
    env.drop_queue(qid)
    return {"prepare_s": prep, "backlog": n, "runs": runs, "explain": {"count_1": plan}}
