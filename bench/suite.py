"""The workloads, the run loop and the report. See bench/README.md for what each workload does."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import BENCH, Environment, median, percentile

# --- sizes ---------------------------------------------------------------------------------------

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 2,
    "warmup": 0.5,
    "duration": 2.0,
    # First guesses of each system's rate (msg/s); the backlog of a processing run is sized from
    # the rate measured in the previous run (x1.5 the window), so a slow machine is not kept busy
    # draining a backlog and a fast one does not run out.
    "guess": {
        "sundial_b100": 8_000,
        "sundial_b1": 1_000,
        "raw_b100": 20_000,
        "raw_b1": 2_000,
        "peer_b100": 10_000,
        "peer_b1": 2_000,
    },
    "wake_samples": 60,
    "backlog": 100_000,
    "filter_backlog": 100_000,
    "exclusive_backlog": 100_000,
    "exclusive_values": 10_000,
    "exclusive_running": 100,
    "delay_messages": 10_000,
    "delay_span": 10.0,
    "soak_seconds": 12.0,
    "soak_rate": 1_000,
    "profile_seconds": 8,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 3,
    "warmup": 2.0,
    "duration": 10.0,
    "guess": {
        "sundial_b100": 15_000,
        "sundial_b1": 1_500,
        "raw_b100": 60_000,
        "raw_b1": 3_000,
        "peer_b100": 20_000,
        "peer_b1": 5_000,
    },
    "wake_samples": 500,
    "backlog": 10_000_000,
    "filter_backlog": 1_000_000,
    "exclusive_backlog": 1_000_000,
    "exclusive_values": 100_000,
    "exclusive_running": 1_000,
    "delay_messages": 100_000,
    "delay_span": 60.0,
    "soak_seconds": 180.0,
    "soak_rate": 2_000,
    "profile_seconds": 20,
}
CLIENTS = 8
WORKLOADS = (
    "enqueue_b100",
    "enqueue_b1",
    "process_b100",
    "process_b1",
    "wake",
    "backlog",
    "filter",
    "exclusive",
    "delays",
    "soak",
)


@dataclass
class Ctx:
    env: Environment
    size: dict[str, Any]
    runs: int
    out: Path
    peer: bool
    profile: bool
    log: Callable[[str], None]
    results: dict[str, Any]
    seq: int = 0
    estimates: dict[str, float] = field(default_factory=dict)

    def backlog_for(self, key: str, seconds: float) -> int:
        """Messages enough for ``seconds`` at the last measured (or guessed) rate, x1.5."""
        rate = self.estimates.get(key) or self.size["guess"][key]
        return max(2_000, int(rate * seconds * 2.5))

    def learn(self, key: str, rate: float | None) -> None:
        if rate:
            self.estimates[key] = rate

    def name(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}-{self.seq}"

    def timed(self, **spec: Any) -> dict[str, Any]:
        return {"warmup": self.size["warmup"], "duration": self.size["duration"], **spec}

    @property
    def dsn_uri(self) -> str:
        """PgQueuer's (asyncpg's) connection URI: through the unix socket, like the server."""
        from sqlalchemy.engine import make_url

        assert self.env.cluster is not None
        url = make_url(self.env.cluster.local_sqlalchemy_url).set(drivername="postgresql")
        return url.render_as_string(hide_password=False)  # asyncpg reads a "+" as a space


# --- preparation in SQL --------------------------------------------------------------------------


def prefill(
    env: Environment,
    queue_id: int,
    n: int,
    *,
    metadata: str = "'{}'::jsonb",
    exclusive: str = "NULL",
    table: str = "messages",
    chunk: int = 1_000_000,
) -> float:
    """Insert ``n`` pending messages in SQL (INSERT … SELECT generate_series, the shape the API
    would create, the filter value of the queue's filter_key included), in chunks, then VACUUM
    ANALYZE; the seconds it took."""
    t0 = time.monotonic()
    with env.connect() as conn:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            conn.execute(
                f"""
                INSERT INTO {table} (queue_id, id, priority, state, payload, metadata,
                                     exclusive_value, filter_value, visible_at)
                SELECT %(q)s, 'p' || g, (extract(epoch FROM now()) * 1000)::bigint, 'pending',
                       jsonb_build_object('i', g), m.md, {exclusive},
                       m.md ->> (SELECT filter_key FROM queues WHERE id = %(q)s), now()
                FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS g,
                     LATERAL (SELECT {metadata} AS md) AS m
                """,
                {"q": queue_id, "start": start + 1, "stop": stop},
            )
        conn.execute(f"VACUUM ANALYZE {table}")
    return time.monotonic() - t0


def setup_raw(env: Environment) -> None:
    """bench_raw_messages: the shape, indexes and storage options of messages, no foreign key."""
    with env.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS bench_raw_messages")
        conn.execute("CREATE TABLE bench_raw_messages (LIKE messages INCLUDING ALL)")
        options = conn.execute(
            "SELECT array_to_string(reloptions, ', ') FROM pg_class WHERE relname = 'messages'"
        ).fetchone()
        if options and options[0]:
            conn.execute(f"ALTER TABLE bench_raw_messages SET ({options[0]})")


def reset_raw(env: Environment) -> None:
    with env.connect() as conn:
        conn.execute("TRUNCATE bench_raw_messages")


def raw_enqueue_rows(batch: int) -> str:
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


def raw_counts(env: Environment) -> dict[str, int]:
    with env.connect() as conn:
        rows = conn.execute(
            "SELECT state::text, count(*) FROM bench_raw_messages GROUP BY 1"
        ).fetchall()
    return {s: int(n) for s, n in rows}


async def _pgq_install(dsn: str) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await conn.close()


async def _pgq_prefill(dsn: str, n: int) -> None:
    """Jobs for PgQueuer's consumers: one through its own enqueue, copied in SQL."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(dsn)
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
    queries = Queries(AsyncpgDriver(conn))
    (template,) = await queries.enqueue("bench", b'{"c": 1}', 0)
    columns = [
        r["column_name"]
        for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'pgqueuer'"
            " AND column_name <> 'id' ORDER BY ordinal_position"
        )
    ]
    cols = ", ".join(columns)
    await conn.execute(
        f"INSERT INTO pgqueuer ({cols}) SELECT {cols} FROM pgqueuer, generate_series(2, $1)"
        " WHERE id = $2",
        n,
        template,
    )
    await conn.execute("VACUUM ANALYZE pgqueuer")
    await conn.close()


# --- checks --------------------------------------------------------------------------------------


def check(ctx: Ctx, label: str, ok: bool, detail: dict[str, Any]) -> dict[str, Any]:
    entry = {"check": label, "ok": bool(ok), **detail}
    ctx.results.setdefault("checks", []).append(entry)
    if not ok:
        ctx.log(f"  !! correctness check FAILED: {label}: {detail}")
    return entry


def drain(ctx: Ctx, path: str) -> dict[str, Any]:
    """Complete everything left in the queue (batch 100, 8 consumers, until empty)."""
    return ctx.env.loadgen(
        {"mode": "process", "queue_path": path, "clients": CLIENTS, "batch": 100, "drain": True}
    )


# --- workloads -----------------------------------------------------------------------------------


def w_enqueue(ctx: Ctx, batch: int) -> dict[str, Any]:
    env, out = ctx.env, {}
    name = ctx.name(f"enq{batch}")
    qid = env.create_queue(name)
    env.checkpoint()
    r = env.loadgen(
        ctx.timed(mode="enqueue", queue_path=env.queue_path(name), clients=CLIENTS, batch=batch)
    )
    stored = sum(env.counts(qid).values())
    out["check"] = check(
        ctx,
        f"enqueue b{batch}: rows stored == messages acknowledged",
        stored == r["enqueued_total"] and r["errors"] == 0,
        {"stored": stored, "acknowledged": r["enqueued_total"], "errors": r["errors"]},
    )
    env.drop_queue(qid)
    out["sundial"] = r
    # Raw SQL limit: Sundial's INSERT, in pgbench, same clients and batch.
    reset_raw(env)
    env.checkpoint()
    raw = env.pgbench(
        "enqueue.sql",
        clients=CLIENTS,
        seconds=ctx.size["duration"],
        defines={"batch": batch, "rows": raw_enqueue_rows(batch)},
    )
    raw["rate"] = raw["tps"] * batch
    rows = sum(raw_counts(env).values())
    check(
        ctx,
        f"raw enqueue b{batch}: rows == transactions x batch",
        rows == raw["transactions"] * batch,
        {"rows": rows, "expected": raw["transactions"] * batch},
    )
    reset_raw(env)
    out["raw"] = raw
    if ctx.peer:
        asyncio.run(_pgq_prefill(ctx.dsn_uri, 1))
        env.checkpoint()
        out["peer"] = env.loadgen(
            ctx.timed(mode="pgq_enqueue", dsn_uri=ctx.dsn_uri, clients=CLIENTS, batch=batch)
        )
    return out


def w_process(ctx: Ctx, batch: int, *, profile: bool = False) -> dict[str, Any]:
    env, size, out = ctx.env, ctx.size, {}
    name = ctx.name(f"proc{batch}")
    qid = env.create_queue(name)
    n = ctx.backlog_for(f"sundial_b{batch}", size["warmup"] + size["duration"])
    if profile:
        n = ctx.backlog_for(f"sundial_b{batch}", size["profile_seconds"] + 2)
    prefill(env, qid, n)
    env.checkpoint()
    spec = ctx.timed(mode="process", queue_path=env.queue_path(name), clients=CLIENTS, batch=batch)
    profiler = None
    if profile:
        spec["warmup"] = 1.0
        spec["duration"] = size["profile_seconds"] + 1
        profiler = Profiler(ctx, f"process_b{batch}", size["profile_seconds"])
        profiler.start(delay=1.0)
    r = env.loadgen(spec)
    if profiler is not None:
        out["profile"] = profiler.finish()
    ctx.learn(f"sundial_b{batch}", r["rate"])
    if r["ran_out"]:
        ctx.log(f"  note: the backlog of {n} ran out after {r['measured_s']:.1f} s of the window")
    rest = drain(ctx, env.queue_path(name))
    counts = env.counts(qid)
    out["check"] = check(
        ctx,
        f"process b{batch}: completed == enqueued, no duplicates, no errors",
        counts == {"completed": n}
        and r["duplicates"] == 0
        and r["errors"] == 0
        and r["completed_total"] + rest["completed_total"] == n,
        {
            "enqueued": n,
            "counts": counts,
            "acked_by_client": r["completed_total"] + rest["completed_total"],
            "duplicates": r["duplicates"] + rest["duplicates"],
            "errors": r["errors"] + rest["errors"],
        },
    )
    env.drop_queue(qid)
    out["sundial"] = r
    if profile:
        return out
    # Raw SQL limit: Sundial's claim + batch ack, in pgbench, same clients and batch.
    reset_raw(env)
    # pgbench -t: each client claims its share of a backlog sized for ~duration seconds.
    per_client = max(1, ctx.backlog_for(f"raw_b{batch}", size["duration"]) // (CLIENTS * batch))
    prefill(env, 1, per_client * CLIENTS * batch, table="bench_raw_messages")
    env.checkpoint()
    raw = env.pgbench(
        "process.sql", clients=CLIENTS, transactions=per_client, defines={"batch": batch}
    )
    counts = raw_counts(env)
    done = counts.get("completed", 0)
    raw["rate"] = raw["tps"] * batch
    raw["completed_rows"] = done
    ctx.learn(f"raw_b{batch}", raw["rate"])
    check(
        ctx,
        f"raw process b{batch}: completed rows == transactions x batch, none left running",
        done == raw["transactions"] * batch and counts.get("running", 0) == 0,
        {"counts": counts, "expected_completed": raw["transactions"] * batch},
    )
    reset_raw(env)
    out["raw"] = raw
    if ctx.peer:
        n_peer = ctx.backlog_for(f"peer_b{batch}", max(1.0, size["warmup"]) + size["duration"])
        asyncio.run(_pgq_prefill(ctx.dsn_uri, n_peer))
        env.checkpoint()
        out["peer"] = env.loadgen(
            {
                "mode": "pgq_process",
                "dsn_uri": ctx.dsn_uri,
                "clients": CLIENTS,
                "batch": batch,
                "warmup": max(1.0, size["warmup"]),
                "duration": size["duration"],
            }
        )
        ctx.learn(f"peer_b{batch}", out["peer"]["rate"])
        if out["peer"]["ran_out"]:
            ctx.log(f"  note: PgQueuer's backlog ran out after {out['peer']['measured_s']:.1f} s")
    return out


def w_wake(ctx: Ctx) -> dict[str, Any]:
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
    out["raw"] = env.loadgen(
        {"mode": "notify_wake", "dsn_uri": ctx.dsn_uri, "samples": ctx.size["wake_samples"]}
    )
    if ctx.peer:
        asyncio.run(_pgq_prefill(ctx.dsn_uri, 1))
        with env.connect() as conn:
            conn.execute("TRUNCATE pgqueuer")
        out["peer"] = env.loadgen(
            {"mode": "pgq_wake", "dsn_uri": ctx.dsn_uri, "samples": ctx.size["wake_samples"]}
        )
    return out


def explain_claim(
    env: Environment,
    queue_id: int,
    count: int,
    *,
    exclusive: bool = False,
    filt: str = "{}",
    filter_value: str | None = None,
) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of Sundial's own claim statement, rolled back (the keyed form
    when ``filter_value`` is given, as the store runs it for a filter on the queue's
    filter_key)."""
    from app.store import queries

    keyed = filter_value is not None
    filtered = filt != "{}" and not keyed  # a filter of the key alone is the keyed form
    sql = queries.messages_dequeue(
        count=count, exclusive=exclusive, keyed=keyed, filtered=filtered
    ).text
    binds = {
        "queue_id": str(queue_id),
        "filter": f"'{filt}'",
        "filter_value": f"'{filter_value}'" if filter_value is not None else "NULL",
        "lease_override": "NULL",
        "queue_lease": "30",
        "catalogue_version": "NULL",
        "valid_until": "NULL",
    }
    sql = re.sub(r"(?<!:):(\w+)", lambda m: binds[m.group(1)], sql)
    with env.connect(autocommit=False) as conn:
        rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}").fetchall()
        conn.rollback()
    plan = "\n".join(r[0] for r in rows)
    ms = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return {"execution_ms": float(ms.group(1)) if ms else None, "plan": plan}


def _backlog_process(
    ctx: Ctx, name: str, qid: int, *, filters: list[dict[str, str]] | None = None
) -> list[dict[str, Any]]:
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


def w_backlog(ctx: Ctx) -> dict[str, Any]:
    env, n = ctx.env, ctx.size["backlog"]
    name = ctx.name("backlog")
    qid = env.create_queue(name)
    ctx.log(f"  preparing {n:,} pending messages in SQL …")
    prep = prefill(env, qid, n)
    ctx.log(f"  prepared in {prep:.1f} s")
    plans = {f"count_{c}": explain_claim(env, qid, c) for c in (1, 100)}
    runs = _backlog_process(ctx, name, qid)
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


def w_filter(ctx: Ctx) -> dict[str, Any]:
    """Each consumer filters on its own tenant, 1% of the backlog. Measured twice: on a queue
    with ``filter_key = "tenant"`` (the index of that key's values; the figure for target 6b),
    and on a queue without one, where the claim tests messages one by one in priority order."""
    keyed = _filter_run(ctx, "filter", filter_key="tenant")
    general = _filter_run(ctx, "filter_general", filter_key=None)
    return {**keyed, "general": general}


def _filter_run(ctx: Ctx, label: str, *, filter_key: str | None) -> dict[str, Any]:
    env, n = ctx.env, ctx.size["filter_backlog"]
    name = ctx.name(label)
    qid = env.create_queue(name, **({"filter_key": filter_key} if filter_key else {}))
    prep = prefill(env, qid, n, metadata="jsonb_build_object('tenant', 't' || (g %% 100))")
    plan = explain_claim(
        env, qid, 1, filt='{"tenant": "t7"}', filter_value="t7" if filter_key else None
    )
    filters = [{"tenant": f"t{i}"} for i in range(CLIENTS)]
    runs = _backlog_process(ctx, name, qid, filters=filters)
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


def w_exclusive(ctx: Ctx) -> dict[str, Any]:
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
    runs = _backlog_process(ctx, name, qid)
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


def w_delays(ctx: Ctx) -> dict[str, Any]:
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


def w_soak(ctx: Ctx) -> dict[str, Any]:
    """Producers and consumers together; RSS of each worker and the hot table's size sampled."""
    env = ctx.env
    assert env.server is not None
    name = ctx.name("soak")
    qid = env.create_queue(name, retention_seconds=0)
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {}

    def run() -> None:
        result.update(
            env.loadgen(
                {
                    "mode": "soak",
                    "queue_path": env.queue_path(name),
                    "clients": 4,
                    "rate": ctx.size["soak_rate"],
                    "duration": ctx.size["soak_seconds"],
                }
            )
        )

    thread = threading.Thread(target=run)
    t0 = time.monotonic()
    thread.start()
    with env.connect() as conn:
        while thread.is_alive():
            size = conn.execute(
                "SELECT pg_total_relation_size('messages'), n_live_tup, n_dead_tup"
                " FROM pg_stat_user_tables WHERE relname = 'messages'"
            ).fetchone()
            assert size is not None
            samples.append(
                {
                    "t": round(time.monotonic() - t0, 1),
                    "rss_mb": {str(k): round(v, 1) for k, v in env.server.rss_mb().items()},
                    "messages_bytes": int(size[0]),
                    "live": int(size[1]),
                    "dead": int(size[2]),
                }
            )
            time.sleep(1.0)
    thread.join()
    counts = env.counts(qid)
    check(
        ctx,
        "soak: completed (incl. moved to history) == enqueued",
        result.get("completed_total") == result.get("enqueued_total")
        and counts.get("pending", 0) == 0
        and counts.get("running", 0) == 0,
        {
            "enqueued": result.get("enqueued_total"),
            "completed": result.get("completed_total"),
            "counts": counts,
        },
    )
    env.drop_queue(qid)
    return {"loadgen": result, "samples": samples}


# --- profiling -----------------------------------------------------------------------------------


class Profiler:
    """py-spy record (raw collapsed stacks, non-blocking) on every server worker."""

    def __init__(self, ctx: Ctx, label: str, seconds: int) -> None:
        self.ctx, self.label, self.seconds = ctx, label, seconds
        self.procs: list[tuple[int, Path, subprocess.Popen[bytes]]] = []

    def start(self, delay: float) -> None:
        pyspy = shutil.which("py-spy") or str(Path(os.sys.executable).parent / "py-spy")  # type: ignore[attr-defined]
        assert self.ctx.env.server is not None
        workers = [p.pid for p in self.ctx.env.server.worker_processes()]

        def launch() -> None:
            time.sleep(delay)
            for pid in workers:
                path = self.ctx.out / f"profile-{self.label}-{pid}.txt"
                proc = subprocess.Popen(
                    [
                        pyspy,
                        "record",
                        "--nonblocking",
                        "-r",
                        "100",
                        "-d",
                        str(self.seconds),
                        "--format",
                        "raw",
                        "-o",
                        str(path),
                        "-p",
                        str(pid),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                self.procs.append((pid, path, proc))

        self.thread = threading.Thread(target=launch)
        self.thread.start()

    def finish(self) -> dict[str, Any]:
        self.thread.join()
        summary: dict[str, Any] = {}
        for pid, path, proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            if path.exists():
                summary[str(pid)] = summarize_stacks(path, self.seconds * 100)
        return summary


CATEGORIES = (
    ("postgres driver (psycopg)", ("psycopg",)),
    ("SQLAlchemy", ("sqlalchemy",)),
    ("Litestar (routing, DI, request/response)", ("litestar",)),
    ("uvicorn / httptools", ("uvicorn", "httptools")),
    ("msgspec (JSON)", ("msgspec",)),
    ("pydantic", ("pydantic",)),
    ("asyncio / event loop", ("asyncio", "uvloop", "selectors")),
    ("Sundial app/", ("/app/",)),
)


def _category(frame: str) -> str:
    for name, needles in CATEGORIES:
        if any(n in frame for n in needles):
            return name
    return "other (stdlib, …)"


def summarize_stacks(path: Path, expected: int) -> dict[str, Any]:
    """Self and inclusive share of the top functions; self share by library."""
    self_counts: dict[str, int] = {}
    incl: dict[str, int] = {}
    cats: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [
            f
            for f in stack.split(";")
            if not f.startswith("process ") and not f.startswith("thread ")
        ]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        self_counts[leaf] = self_counts.get(leaf, 0) + count
        # The library a sample is attributed to: the innermost frame of a known library.
        cat = next(
            (c for f in reversed(frames) if (c := _category(f)) != "other (stdlib, …)"), None
        )
        cat = cat or "other (stdlib, …)"
        cats[cat] = cats.get(cat, 0) + count
        for f in {re.sub(r":\d+\)$", ")", f) for f in frames}:
            incl[f] = incl.get(f, 0) + count

    def top(d: dict[str, int], k: int) -> list[tuple[str, float]]:
        return [
            (f, round(100 * c / total, 1)) for f, c in sorted(d.items(), key=lambda x: -x[1])[:k]
        ]

    return {
        "samples": total,
        "busy_share": round(total / expected, 2) if expected else None,
        "by_library_pct": top(cats, 12),
        "top_self_pct": top(self_counts, 20),
        "top_inclusive_pct": top(incl, 30),
    }


# --- the summary table ---------------------------------------------------------------------------


def _dequeue_latency_row(
    workload: str, runs: list[dict[str, Any]], target: str, met: bool
) -> dict[str, Any]:
    """A table row for a backlog workload: its dequeue latency, rate and target."""
    p99 = _med(runs, "latency_ms", "dequeue", "p99")
    return {
        "workload": workload,
        "unit": "ms p99",
        "sundial": p99,
        "raw": None,
        "peer": None,
        "vs_raw": None,
        "vs_peer": None,
        "p50_ms": _med(runs, "latency_ms", "dequeue", "p50"),
        "p99_ms": p99,
        "target": target,
        "met": met,
        "rate": _med(runs, "rate"),
    }


def _med(runs: list[dict[str, Any]], *path: str) -> float | None:
    vals = []
    for r in runs:
        x: Any = r
        for p in path:
            x = x.get(p) if isinstance(x, dict) else None
        if isinstance(x, int | float):
            vals.append(float(x))
    return median(vals)


def _ratio_med(runs: list[dict[str, Any]], a: tuple[str, ...], b: tuple[str, ...]) -> float | None:
    ratios = []
    for r in runs:
        x, y = _med([r], *a), _med([r], *b)
        if x is not None and y:
            ratios.append(x / y)
    return median(ratios)


def build_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    w = res.get("workloads", {})

    def tput(
        key: str,
        label: str,
        target: float,
        raw_share: float | None = None,
        p99_max: float | None = None,
    ) -> None:
        runs = w.get(key)
        if not runs:
            return
        lat_key = "enqueue" if key.startswith("enqueue") else "dequeue"
        s = _med(runs, "sundial", "rate")
        raw = _med(runs, "raw", "rate")
        peer = _med(runs, "peer", "rate")
        p50 = _med(runs, "sundial", "latency_ms", lat_key, "p50")
        p99 = _med(runs, "sundial", "latency_ms", lat_key, "p99")
        vs_raw = _ratio_med(runs, ("sundial", "rate"), ("raw", "rate"))
        met = s is not None and s >= target
        tgt = f">= {target:,.0f} msg/s"
        if raw_share is not None:
            met = met and vs_raw is not None and vs_raw >= raw_share
            tgt += f", >= {raw_share:.0%} raw"
        if p99_max is not None:
            met = met and p99 is not None and p99 <= p99_max
            tgt += f", p99 <= {p99_max:g} ms"
        rows.append(
            {
                "workload": label,
                "unit": "msg/s",
                "sundial": s,
                "raw": raw,
                "peer": peer,
                "vs_raw": vs_raw,
                "vs_peer": _ratio_med(runs, ("sundial", "rate"), ("peer", "rate")),
                "p50_ms": p50,
                "p99_ms": p99,
                "target": tgt,
                "met": met,
            }
        )

    tput("enqueue_b100", "1. enqueue, 100/request, 8 clients", 40_000)
    tput("enqueue_b1", "2. enqueue, 1/request, 8 clients", 3_000, p99_max=20)
    tput("process_b100", "3. dequeue 100 + ack 100, 8 consumers", 20_000, raw_share=0.40)
    tput("process_b1", "4. dequeue 1 + complete 1, 8 consumers", 1_500)

    if w.get("wake"):
        runs = w["wake"]
        p50 = _med(runs, "sundial", "latency_ms", "wake", "p50")
        p99 = _med(runs, "sundial", "latency_ms", "wake", "p99")
        rows.append(
            {
                "workload": "5. long-poll wake, commit -> response",
                "unit": "ms p50/p99",
                "sundial": (p50, p99),
                "raw": (
                    _med(runs, "raw", "latency_ms", "wake", "p50"),
                    _med(runs, "raw", "latency_ms", "wake", "p99"),
                ),
                "peer": (
                    _med(runs, "peer", "latency_ms", "wake", "p50"),
                    _med(runs, "peer", "latency_ms", "wake", "p99"),
                ),
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": p50,
                "p99_ms": p99,
                "target": "p50 <= 5, p99 <= 10 ms",
                "met": p50 is not None and p99 is not None and p50 <= 5 and p99 <= 10,
            }
        )

    base_p99 = _med(w.get("process_b1", []), "sundial", "latency_ms", "dequeue", "p99")
    base_rate = _med(w.get("process_b1", []), "sundial", "rate")
    if w.get("backlog"):
        b = w["backlog"][0]
        p99 = _med(b["runs"], "latency_ms", "dequeue", "p99")
        ratio = p99 / base_p99 if p99 and base_p99 else None
        rows.append(
            _dequeue_latency_row(
                f"6a. dequeue 1 + complete 1, {b['backlog']:,} pending",
                b["runs"],
                f"p99 <= 2x small-backlog p99 ({base_p99 or 0:.1f} ms): x{ratio or 0:.2f}",
                ratio is not None and ratio <= 2,
            )
        )
    if w.get("filter"):
        b = w["filter"][0]
        for runs, what in (
            (b["runs"], "queue filter_key"),
            (b.get("general", {}).get("runs", []), "no filter_key, tested row by row"),
        ):
            p99 = _med(runs, "latency_ms", "dequeue", "p99")
            if p99 is not None:
                rows.append(
                    _dequeue_latency_row(
                        f"6b. metadata-filtered dequeue, {b['backlog']:,} pending ({what})",
                        runs,
                        "p99 <= 20 ms",
                        p99 <= 20,
                    )
                )
    if w.get("exclusive"):
        b = w["exclusive"][0]
        p99 = _med(b["runs"], "latency_ms", "dequeue", "p99")
        rate = _med(b["runs"], "rate")
        share = rate / base_rate if rate and base_rate else None
        rows.append(
            _dequeue_latency_row(
                f"6c. exclusive, {b['backlog']:,} msgs / {b['values']:,} values, "
                f"{b['running_values']:,} running",
                b["runs"],
                f"p99 <= 20 ms, rate >= 0.5x simple ({rate or 0:,.0f} = x{share or 0:.2f})",
                p99 is not None and p99 <= 20 and share is not None and share >= 0.5,
            )
        )
    if w.get("delays"):
        d = w["delays"][0]
        lat = d["sundial"]["latency_ms"]["lateness"]
        rows.append(
            {
                "workload": f"7. {d['messages']:,} delayed msgs due within {d['span_s']:g} s",
                "unit": "ms late p99",
                "sundial": lat["p99"],
                "raw": None,
                "peer": None,
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": lat["p50"],
                "p99_ms": lat["p99"],
                "target": "lateness p99 <= 100 ms",
                "met": lat["p99"] is not None and lat["p99"] <= 100,
            }
        )
    if w.get("soak"):
        s = w["soak"][0]
        samples = s["samples"]
        rss_max = max((v for x in samples for v in x["rss_mb"].values()), default=None)
        rss_first = max(samples[0]["rss_mb"].values()) if samples else None
        rss_last = max(samples[-1]["rss_mb"].values()) if samples else None
        sizes = [x["messages_bytes"] for x in samples]
        rows.append(
            {
                "workload": "8. worker RSS (max over soak), hot table size",
                "unit": "MB",
                "sundial": rss_max,
                "raw": None,
                "peer": None,
                "vs_raw": None,
                "vs_peer": None,
                "p50_ms": None,
                "p99_ms": None,
                "target": (
                    f"RSS <= 150 MB ({rss_first}->{rss_last}); table "
                    f"{sizes[0] / 2**20 if sizes else 0:.1f}->{max(sizes, default=0) / 2**20:.1f}"
                    f"->{sizes[-1] / 2**20 if sizes else 0:.1f} MB (start/max/end)"
                ),
                "met": rss_max is not None and rss_max <= 150,
            }
        )
    return rows


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, tuple | list):
        return "/".join(_fmt(v) for v in x)
    if isinstance(x, float) and abs(x) < 100:
        return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:,.0f}"


def render_table(rows: list[dict[str, Any]]) -> str:
    head = [
        "workload",
        "unit",
        "Sundial",
        "raw SQL",
        "PgQueuer",
        "S/raw",
        "S/peer",
        "p50 ms",
        "p99 ms",
        "target",
        "met?",
    ]
    body = [
        [
            r["workload"],
            r["unit"],
            _fmt(r["sundial"]),
            _fmt(r["raw"]),
            _fmt(r["peer"]),
            _fmt(r["vs_raw"]),
            _fmt(r["vs_peer"]),
            _fmt(r["p50_ms"]),
            _fmt(r["p99_ms"]),
            r["target"],
            "yes" if r["met"] else "NO",
        ]
        for r in rows
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def cpu_table(res: dict[str, Any]) -> str:
    """Per-workload median CPU seconds of every process, for the reader to see who saturated."""
    lines = [
        "| workload | system | wall s | server workers CPU s | PostgreSQL CPU s"
        " | generator CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for key, runs in res.get("workloads", {}).items():
        if key not in ("enqueue_b100", "enqueue_b1", "process_b100", "process_b1", "wake"):
            continue
        for system in ("sundial", "raw", "peer"):
            cpu = [r[system]["cpu"] for r in runs if system in r]
            if not cpu:
                continue
            gen = (
                "pgbench_cpu_s"
                if system == "raw" and "pgbench_cpu_s" in cpu[0]
                else "loadgen_cpu_s"
            )
            lines.append(
                f"| {key} | {system} | {_fmt(median([c['wall_s'] for c in cpu]))} | "
                f"{_fmt(median([c['server_cpu_s'] for c in cpu]))} | "
                f"{_fmt(median([c['postgres_cpu_s'] for c in cpu]))} | "
                f"{_fmt(median([c.get(gen, 0.0) for c in cpu]))} |"
            )
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short runs, small backlogs (default)")
    mode.add_argument("--full", action="store_true", help="the issue's real sizes (10M backlog)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=(*WORKLOADS, "failover"),
        help="run only these workloads (failover runs only when named: bench/failover.py)",
    )
    parser.add_argument("--runs", type=int, help="repetitions per workload (median is reported)")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where results go")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument("--no-peer", action="store_true", help="skip PgQueuer")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    parser.add_argument(
        "--taskset", help="CPU list for the load generator and pgbench, e.g. 1 (taskset -c)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (database, logs)")
    parser.add_argument("--soak-seconds", type=float, help="length of the soak (default by mode)")
    parser.add_argument("--soak-rate", type=int, help="messages per second in the soak")
    args = parser.parse_args(argv)
    size = dict(FULL if args.full else QUICK)
    if args.soak_seconds is not None:
        size["soak_seconds"] = args.soak_seconds
    if args.soak_rate is not None:
        size["soak_rate"] = args.soak_rate
    runs = args.runs or size["runs"]
    selected = args.only or list(WORKLOADS)
    args.out.mkdir(parents=True, exist_ok=True)
    failover_status = 0
    if "failover" in selected:
        # Its own servers and databases (a single node and a formation).
        from bench.failover import run as run_failover

        failover_status = run_failover(
            full=args.full, runs=args.runs, workers=args.workers, out=args.out, keep=args.keep
        )
        selected = [name for name in selected if name != "failover"]
        if not selected:
            return failover_status
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    env = Environment(workers=args.workers, taskset=args.taskset, keep=args.keep)
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": size,
        "runs": runs,
        "workloads": {},
    }
    ctx = Ctx(env, size, runs, args.out, not args.no_peer, not args.no_profile, log, results)
    load_before = os.getloadavg()
    try:
        log(f"starting PostgreSQL and `sundial serve` ({args.workers} workers) in {env.root}")
        server = env.start()
        setup_raw(env)
        if ctx.peer:
            asyncio.run(_pgq_install(ctx.dsn_uri))
        rss_start = server.rss_mb()
        results["machine"] = machine_facts(env)
        snap0 = server.snapshot()
        w = results["workloads"]
        throughput = [
            ("enqueue_b100", lambda: w_enqueue(ctx, 100)),
            ("enqueue_b1", lambda: w_enqueue(ctx, 1)),
            ("process_b100", lambda: w_process(ctx, 100)),
            ("process_b1", lambda: w_process(ctx, 1)),
            ("wake", lambda: w_wake(ctx)),
        ]
        for run in range(runs):
            for key, fn in throughput:
                if key in selected:
                    log(f"run {run + 1}/{runs}: {key}")
                    w.setdefault(key, []).append(fn())
                    _progress(log, key, w[key][-1])
        for key, fn in (
            ("backlog", w_backlog),
            ("filter", w_filter),
            ("exclusive", w_exclusive),
            ("delays", w_delays),
            ("soak", w_soak),
        ):
            if key in selected:
                log(key)
                w[key] = [fn(ctx)]
        if ctx.profile and ("process_b100" in selected or "process_b1" in selected):
            for batch in (100, 1):
                log(f"profiling the server workers during process b{batch} (py-spy, not counted)")
                results.setdefault("profiles", {})[f"process_b{batch}"] = w_process(
                    ctx, batch, profile=True
                )
        results["server_cpu_total"] = _cpu_total(snap0, server.snapshot())
        results["rss_mb"] = {"start": rss_start, "end": server.rss_mb()}
    finally:
        results["loadavg_before"] = load_before
        results["loadavg_after"] = os.getloadavg()
        results["elapsed_s"] = round(time.monotonic() - started, 1)
        env.stop()
        rows = build_rows(results)
        results["table"] = rows
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = args.out / f"results-{size['mode']}-{stamp}.json"
        path.write_text(json.dumps(results, indent=1, default=str))
        (args.out / f"latest-{size['mode']}.json").write_text(path.read_text())
        report = render_report(results, rows)
        (args.out / f"report-{size['mode']}.md").write_text(report)
        print()
        print(report)
        log(f"results in {path}")
    failed = [c for c in results.get("checks", []) if not c["ok"]]
    return 1 if failed or failover_status else 0


def _cpu_total(a: Any, b: Any) -> dict[str, Any]:
    from bench.harness import cpu_delta

    return cpu_delta(a, b)


def _progress(log: Callable[[str], None], key: str, r: dict[str, Any]) -> None:
    parts = []
    for system in ("sundial", "raw", "peer"):
        if system in r:
            x = r[system]
            if "rate" in x:
                parts.append(f"{system} {x['rate']:,.0f}/s")
            elif "latency_ms" in x and "wake" in x["latency_ms"]:
                lat = x["latency_ms"]["wake"]
                parts.append(f"{system} {_fmt(lat['p50'])}/{_fmt(lat['p99'])} ms")
    log("  " + ", ".join(parts))


def machine_facts(env: Environment) -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": env.pg_version,
        "postgresql_settings": getattr(env, "pg_settings", {}),
        "server_workers": env.workers,
        "taskset": env.taskset,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def soak_timeline(soak: dict[str, Any], every_s: float = 60.0) -> str:
    """The soak's throughput and latencies, and its samples about once a minute: RSS of each
    worker, the hot table's size, live and dead tuples."""
    load = soak.get("loadgen", {})
    samples = soak.get("samples", [])
    span = samples[-1]["t"] if samples else 0
    rate = load.get("completed_total", 0) / span if span else 0
    lines = [
        f"Soak: {load.get('enqueued_total')} enqueued, {load.get('completed_total')} completed"
        f" in {span:.0f} s ({rate:.0f} msg/s). Request latency p50/p99 ms: enqueue of 10 "
        f"{load.get('enqueue_p50_ms')}/{load.get('enqueue_p99_ms')}, dequeue of up to 10 "
        f"{load.get('dequeue_p50_ms')}/{load.get('dequeue_p99_ms')}, ack "
        f"{load.get('ack_p50_ms')}/{load.get('ack_p99_ms')}.",
        "",
        "| t s | worker RSS MB | messages table MB | live tuples | dead tuples |",
        "|---|---|---|---|---|",
    ]
    next_t = 0.0
    for sample in samples:
        if sample["t"] + 1e-9 < next_t and sample is not samples[-1]:
            continue
        rss = ", ".join(f"{v:.0f}" for v in sample["rss_mb"].values())
        lines.append(
            f"| {sample['t']:.0f} | {rss} | {sample['messages_bytes'] / 2**20:.1f} "
            f"| {sample['live']} | {sample['dead']} |"
        )
        next_t = sample["t"] + every_s
    return "\n".join(lines)


def render_report(res: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    m = res.get("machine", {})
    out = [
        f"## Sundial bench — {res['mode']} mode, {res['runs']} run(s) per workload "
        f"(medians), {res.get('elapsed_s')} s",
        "",
        render_table(rows),
        "",
        f"Machine: {m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB, "
        f"PostgreSQL {m.get('postgresql')} (fsync/synchronous_commit on), Python "
        f"{m.get('python')}, {m.get('server_workers')} server workers, "
        f"taskset {m.get('taskset') or 'none'}.",
        f"Load average before/after: {_fmt(list(res.get('loadavg_before', [])))} → "
        f"{_fmt(list(res.get('loadavg_after', [])))}.",
        "",
        "CPU seconds per process during each measurement (median over runs):",
        "",
        cpu_table(res),
    ]
    soak = res.get("workloads", {}).get("soak")
    if soak:
        out += ["", soak_timeline(soak[0])]
    checks = res.get("checks", [])
    bad = [c for c in checks if not c["ok"]]
    out += ["", f"Correctness checks: {len(checks) - len(bad)}/{len(checks)} passed."]
    out += [f"- FAILED: {c['check']}: {c}" for c in bad]
    for label, prof in res.get("profiles", {}).items():
        for pid, s in prof.get("profile", {}).items():
            out += [
                "",
                f"Profile of worker {pid} during {label} ({s['samples']} samples, "
                f"busy {s['busy_share']}):",
                "",
            ]
            out += [f"- {name}: {pct}%" for name, pct in s["by_library_pct"]]
            out += ["", "  top self:"]
            out += [f"  - {pct}% {name}" for name, pct in s["top_self_pct"][:12]]
    return "\n".join(out) + "\n"


__all__ = ["main", "percentile"]
