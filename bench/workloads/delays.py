"""``delays``: messages prefilled as invisible, due over a span of seconds; consumers long-poll
and acknowledge; lateness = response time - ``visible_at`` (carried in the payload)."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.sizes import CLIENTS


def measure(ctx: Ctx) -> dict[str, Any]:
    """Prefill the delayed messages, consume them as they come due, check none came early."""
    env, n, span = ctx.env, ctx.size["delay_messages"], ctx.size["delay_span"]
    name = ctx.name("delays")
    qid = env.create_queue(name)
    lead = 3.0
    with env.connect() as conn:
        conn.execute(
            """
            INSERT INTO messages (queue_id, id, priority, state, payload, visible_at)
            SELECT %(q)s, 'd' || g, 0, 'invisible',
                   jsonb_build_object('due', extract(epoch FROM v)), v
            FROM (SELECT g,
                         clock_timestamp() + make_interval(secs => %(lead)s + g * %(span)s / %(n)s)
                         AS v
                  FROM generate_series(1, %(n)s) AS g) AS s
            """,
            {"q": qid, "lead": lead, "span": span, "n": n},
        )
    r = env.loadgen(
        {
            "mode": "delays",
            "queue_path": env.queue_path(name),
            "clients": CLIENTS,
            "expected": n,
            "timeout": lead + span + 15,
        }
    )
    counts = env.counts(qid)
    check(
        ctx,
        "delays: every delayed message delivered once, on time or late, never early",
        counts == {"completed": n} and r["early"] == 0 and r["messages"] == n,
        {"counts": counts, "received": r["messages"], "early": r["early"]},
    )
    env.drop_queue(qid)
    return {"sundial": r, "messages": n, "span_s": span}
