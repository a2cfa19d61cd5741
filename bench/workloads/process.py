"""``process_b100`` / ``process_b1``: 8 consumers dequeue ``batch`` and acknowledge them, back to
back, over a prefilled backlog; beside them pgbench running Sundial's claim + batch ack and
PgQueuer's consumer loop. Also the extra, uncounted run during which the workers are profiled."""

from __future__ import annotations

from typing import Any

from bench.context import Ctx, check, drain
from bench.peers import pgqueuer, raw
from bench.prepare import prefill
from bench.profiling import Profiler
from bench.sizes import CLIENTS


def measure(ctx: Ctx, batch: int, *, profile: bool = False) -> dict[str, Any]:
    """One run: Sundial, then the raw SQL limit, then PgQueuer (unless ``--no-peer``); with
    ``profile``, Sundial alone under py-spy."""
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
    out["raw"] = raw.process(ctx, batch)
    if ctx.peer:
        out["peer"] = pgqueuer.process(ctx, batch)
    return out
