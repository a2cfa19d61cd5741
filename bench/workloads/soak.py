"""``soak``: producers at a fixed rate and consumers together for a while, on a queue with
``retention_seconds 0``; every second each worker's RSS and the hot table's size and tuples."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.context import Ctx, check


def measure(ctx: Ctx) -> dict[str, Any]:
    """Producers and consumers together; RSS of each worker and the hot table's size sampled."""
    env = ctx.env
    assert env.server is not None
    name = ctx.name("soak")
    with env.connect() as conn:
        # The soak measures a steady state: the rows earlier workloads deleted (the full run's
        # 10,000,000-message backlog) are vacuumed first, so that autovacuum does not catch up
        # on them during the soak (one full run started it with 1.3 million dead tuples and
        # fell 15 % behind its rate for the first minute).
        conn.execute("VACUUM messages")
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
