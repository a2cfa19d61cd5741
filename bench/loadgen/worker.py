"""The load generator's ``worker`` mode: what a user runs, Sundial's own
:class:`app.client.Worker` (an async no-op handler, ``concurrency`` handlers, burst mode) draining
a prefilled queue through the HTTP API, at-least-once as always. Its rate is the messages it
completed over the wall time of the drain, start-up included."""

from __future__ import annotations

from typing import Any

from bench.loadgen.measure import now


async def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Drain ``spec["queue"]`` (``namespace/queue``) with one :class:`Worker`."""
    from app.client import AsyncClient, Leased, Worker

    async def no_op(message: Leased) -> None:
        return None

    async with AsyncClient(spec["base"], spec["token"]) as client:
        drain = Worker(
            spec["queue"],
            no_op,
            client=client,
            concurrency=spec["concurrency"],
            burst=True,
        )
        t0 = now()
        stats = await drain.run_async()
        elapsed = now() - t0
    return {
        "messages": stats.completed,
        "rate": stats.completed / elapsed,
        "measured_s": elapsed,
        "completed_total": stats.completed,
        "lost": stats.lost,
        "failed": stats.failed,
    }
