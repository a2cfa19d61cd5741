"""Small JSON endpoints the pages poll to refresh their numbers and charts."""

from __future__ import annotations

from typing import Any

from litestar import get

from app.core.insights import (
    ExclusiveActivity,
    PoolSummary,
    QueueSummary,
    Throughput,
    WaitTimes,
)
from app.dashboard.common import insights, queue_path
from app.dashboard.common import overview as cached_overview
from app.dashboard.format import STATE_ORDER, duration, epoch
from app.web.runtime import AnyRequest, PathStr


def _summary(summary: QueueSummary) -> dict[str, Any]:
    queue = summary.queue
    return {
        "key": f"{queue.namespace}/{queue.name}",
        "namespace": queue.namespace,
        "name": queue.name,
        "pool": queue.pool,
        "url": queue_path(queue.namespace, queue.name),
        "counts": {str(s): summary.counts.get(s, 0) for s in STATE_ORDER},
        "oldest_pending_age_seconds": summary.oldest_pending_age_seconds,
        "oldest_pending_age": duration(summary.oldest_pending_age_seconds),
        "enqueue_paused": queue.config.enqueue_paused,
        "dequeue_paused": queue.config.dequeue_paused,
    }


def _pool(pool: PoolSummary) -> dict[str, Any]:
    return {
        "name": pool.name,
        "available": pool.available,
        "namespaces": pool.namespaces,
        "unavailable_namespaces": pool.unavailable_namespaces,
        "waiting": pool.waiting,
        "running": pool.running,
    }


def _throughput(series: Throughput) -> dict[str, Any]:
    return {
        "start": epoch(series.start),
        "step": series.step_seconds,
        "enqueued": series.enqueued,
        "completed": series.completed,
        "errored": series.errored,
        "canceled": series.canceled,
        "totals": {
            "enqueued": series.total("enqueued"),
            "completed": series.total("completed"),
            "errored": series.total("errored"),
        },
    }


def _wait_times(series: WaitTimes) -> dict[str, Any]:
    return {
        "start": epoch(series.start),
        "step": series.step_seconds,
        "count": series.count,
        "p50": series.p50_seconds,
        "p95": series.p95_seconds,
        "max": series.max_seconds,
    }


def _exclusive(activity: ExclusiveActivity | None) -> dict[str, Any] | None:
    if activity is None:
        return None
    return {
        "scanned": activity.scanned,
        "scan_limit": activity.scan_limit,
        "blocked": activity.blocked,
        "running": [
            {
                "value": r.value,
                "message_id": r.message_id,
                "running": duration(r.running_seconds),
                "lease_left": duration(r.lease_left_seconds),
                "attempts": r.attempts,
                "blocked": r.blocked,
            }
            for r in activity.running
        ],
    }


@get("/overview")
async def overview_data(request: AnyRequest) -> dict[str, Any]:
    """Every queue's counts and oldest pending age, the last hour's throughput, and every
    pool's state and load (as the overview page shows them)."""
    found = await cached_overview(request)
    return {
        "queues": [_summary(s) for s in found.queues],
        "throughput": _throughput(found.throughput),
        "pools": [_pool(p) for p in found.pools],
    }


@get("/queues/{ns:str}/{queue:str}")
async def queue_data(request: AnyRequest, ns: PathStr, queue: PathStr) -> dict[str, Any]:
    """A queue's counts, switches, throughput, wait times and exclusive values."""
    activity = await insights(request).queue_activity(ns, queue)
    detail = activity.detail
    return {
        "queue": _summary(
            QueueSummary(detail.queue, detail.stats.counts, detail.stats.oldest_pending_age_seconds)
        ),
        "throughput": _throughput(activity.throughput),
        "wait_times": _wait_times(activity.wait_times),
        "exclusive": _exclusive(activity.exclusive),
    }


HANDLERS = [overview_data, queue_data]
