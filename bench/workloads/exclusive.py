"""``exclusive``: ``process_b1`` on an exclusive queue whose backlog spreads over many values,
some of them with a running message (pre-leased for an hour); compared with ``process_b1``."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.explain import explain_claim
from bench.prepare import prefill
from bench.workloads.backlog import process_backlog


def measure(ctx: Ctx) -> dict[str, Any]:
    """Prepare the backlog, lease some values' first message, explain, process, check."""
    env, size = ctx.env, ctx.size
    n, values, running = (
        size["exclusive_backlog"],
        size["exclusive_values"],
        size["exclusive_running"],
    )
    name = ctx.name("excl")
    qid = env.create_queue(name, kind="exclusive", exclusive_key="project")
    prep = prefill(
        env,
        qid,
        n,
        metadata=f"jsonb_build_object('project', 'v' || (g %% {values}))",
        exclusive=f"'v' || (g %% {values})",
    )
    with env.connect() as conn:
        conn.execute(
            """
            UPDATE messages SET state = 'running', attempts = 1, lease_id = gen_random_uuid(),
                   lease_expires_at = now() + interval '1 hour', leased_at = now(),
                   first_leased_at = now()
            WHERE queue_id = %s AND id IN (SELECT 'p' || g FROM generate_series(1, %s) g)
            """,
            (qid, running),
        )
        conn.execute("VACUUM ANALYZE messages")
    plan = explain_claim(env, qid, 1, exclusive=True)
    runs = process_backlog(ctx, name, qid)
    counts = env.counts(qid)
    acked = sum(r["completed_total"] for r in runs)
    check(
        ctx,
        "exclusive: completed == acknowledged, the pre-leased stay running, nothing lost",
        counts.get("completed", 0) == acked
        and counts.get("running", 0) == running
        and sum(counts.values()) == n,
        {"counts": counts, "acked": acked},
    )
    env.drop_queue(qid)
    return {
        "prepare_s": prep,
        "backlog": n,
        "values": values,
        "running_values": running,
        "runs": runs,
        "explain": {"count_1": plan},
    }
