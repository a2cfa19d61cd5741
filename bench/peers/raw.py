"""The raw SQL limit: Sundial's own statements run by pgbench (``bench/pgbench/*.sql``) against
``bench_raw_messages``, a table of the shape and storage options of ``messages``, and PostgreSQL's
own LISTEN/NOTIFY for the wake-up. No HTTP, no Python: what the database alone can do with the
same SQL and the same commits per message."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check
from bench.harness import Environment
from bench.prepare import prefill
from bench.sizes import CLIENTS


def setup(env: Environment) -> None:
    """bench_raw_messages: the shape, indexes, storage options and count triggers of messages,
    no foreign key."""
    with env.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS bench_raw_messages")
        conn.execute("CREATE TABLE bench_raw_messages (LIKE messages INCLUDING ALL)")
        options = conn.execute(
            "SELECT array_to_string(reloptions, ', ') FROM pg_class WHERE relname = 'messages'"
        ).fetchone()
        if options and options[0]:
            conn.execute(f"ALTER TABLE bench_raw_messages SET ({options[0]})")
        _copy_count_triggers(conn)


# The count triggers of messages (migration 0010), copied onto bench_raw_messages so that the
# raw limit pays for them as the server's statements do; their deltas go to a table of the
# bench's own, so that they never reach the counts of a real queue.
_COUNT_TRIGGERS = ("inserted", "deleted", "updated", "truncated")


def _copy_count_triggers(conn: Any) -> None:
    conn.execute("DROP TABLE IF EXISTS bench_raw_count_deltas")
    if conn.execute("SELECT to_regproc('sundial_counts_inserted')").fetchone()[0] is None:
        return  # a schema before migration 0010 (a before/after run of older code)
    conn.execute(
        "CREATE TABLE bench_raw_count_deltas (LIKE queue_state_count_deltas INCLUDING ALL)"
    )
    for event in _COUNT_TRIGGERS:
        source = conn.execute(
            "SELECT pg_get_functiondef(%s::regproc)", (f"sundial_counts_{event}",)
        ).fetchone()[0]
        body = (
            source.replace(f"sundial_counts_{event}", f"bench_raw_counts_{event}")
            .replace("queue_state_count_deltas", "bench_raw_count_deltas")
            .replace("queue_state_counts", "bench_raw_count_deltas")
        )
        conn.execute(body)
    triggers = conn.execute(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger"
        " WHERE tgrelid = 'messages'::regclass AND tgname LIKE 'messages_counts_%'"
    ).fetchall()
    for (definition,) in triggers:
        conn.execute(
            definition.replace("ON public.messages", "ON public.bench_raw_messages")
            .replace("TRIGGER messages_counts_", "TRIGGER bench_raw_counts_")
            .replace("sundial_counts_", "bench_raw_counts_")
        )


def reset(env: Environment) -> None:
    """Empty bench_raw_messages (and the deltas of its count triggers)."""
    with env.connect() as conn:
        conn.execute("TRUNCATE bench_raw_messages")


def enqueue_rows(batch: int) -> str:
    """The ``rows`` document the server binds for a batch of the load generator's messages (its
    own encoder, uuid7 ids, the small payload, queue defaults), for the raw enqueue script."""
    from uuid_utils import uuid7

    from app.core.ports import NewRow
    from app.store.batches import enqueue_rows

    return enqueue_rows(
        [
            NewRow(
                id=str(uuid7()),
                priority=None,
                payload=b'{"c":1,"i":%d}' % k,
                metadata={},
                exclusive_value=None,
                max_attempts=None,
                lease_seconds=None,
                delay_seconds=0,
                visible_at=None,
                ttl_seconds=None,
                expires_at=None,
            )
            for k in range(batch)
        ]
    )


def counts(env: Environment) -> dict[str, int]:
    """Rows of bench_raw_messages by state."""
    with env.connect() as conn:
        rows = conn.execute(
            "SELECT state::text, count(*) FROM bench_raw_messages GROUP BY 1"
        ).fetchall()
    return {s: int(n) for s, n in rows}


def enqueue(ctx: Ctx, batch: int) -> dict[str, Any]:
    """Sundial's INSERT, in pgbench, same clients and batch, for the window's duration."""
    env = ctx.env
    reset(env)
    env.checkpoint()
    raw = env.pgbench(
        "enqueue.sql",
        clients=CLIENTS,
        seconds=ctx.size["duration"],
        defines={"batch": batch, "rows": enqueue_rows(batch)},
    )
    raw["rate"] = raw["tps"] * batch
    rows = sum(counts(env).values())
    check(
        ctx,
        f"raw enqueue b{batch}: rows == transactions x batch",
        rows == raw["transactions"] * batch,
        {"rows": rows, "expected": raw["transactions"] * batch},
    )
    reset(env)
    return raw


def process(ctx: Ctx, batch: int) -> dict[str, Any]:
    """Sundial's claim + batch ack, in pgbench, same clients and batch."""
    env, size = ctx.env, ctx.size
    reset(env)
    # pgbench -t: each client claims its share of a backlog sized for ~duration seconds.
    per_client = max(1, ctx.backlog_for(f"raw_b{batch}", size["duration"]) // (CLIENTS * batch))
    prefill(env, 1, per_client * CLIENTS * batch, table="bench_raw_messages")
    env.checkpoint()
    raw = env.pgbench(
        "process.sql", clients=CLIENTS, transactions=per_client, defines={"batch": batch}
    )
    by_state = counts(env)
    done = by_state.get("completed", 0)
    raw["rate"] = raw["tps"] * batch
    raw["completed_rows"] = done
    ctx.learn(f"raw_b{batch}", raw["rate"])
    check(
        ctx,
        f"raw process b{batch}: completed rows == transactions x batch, none left running",
        done == raw["transactions"] * batch and by_state.get("running", 0) == 0,
        {"counts": by_state, "expected_completed": raw["transactions"] * batch},
    )
    reset(env)
    return raw


def cycle(ctx: Ctx) -> dict[str, Any]:
    """Sundial's worker cycle in one transaction (complete the last, claim the next), in
    pgbench, same clients."""
    env, size = ctx.env, ctx.size
    reset(env)
    per_client = max(2, ctx.backlog_for("raw_cycle", size["duration"]) // CLIENTS)
    prefill(env, 1, per_client * CLIENTS, table="bench_raw_messages")
    env.checkpoint()
    raw = env.pgbench(
        "cycle.sql",
        clients=CLIENTS,
        transactions=per_client,
        defines={"batch": 1, "items": "[]"},
    )
    by_state = counts(env)
    # Each transaction completes the message the one before claimed: a client's first
    # completes nothing and its last claim is left running.
    expected = raw["transactions"] - CLIENTS
    raw["rate"] = raw["tps"]
    ctx.learn("raw_cycle", raw["rate"])
    check(
        ctx,
        "raw cycle: each transaction completed the last one's claim, one left running per client",
        by_state.get("completed", 0) == expected and by_state.get("running", 0) == CLIENTS,
        {"counts": by_state, "expected_completed": expected},
    )
    reset(env)
    return raw


def wake(ctx: Ctx) -> dict[str, Any]:
    """LISTEN on one connection, NOTIFY + commit on another: commit → callback."""
    return ctx.env.loadgen(
        {"mode": "notify_wake", "dsn_uri": ctx.dsn_uri, "samples": ctx.size["wake_samples"]}
    )
