"""The queue service's metrics hook: counts what each operation committed, by queue.

Counting in the service rather than in HTTP handlers means every caller (API, dashboard, CLI)
is counted, and only changes that happened: an idempotent repeat of a complete, or an ack item
refused for a stale lease, counts nothing.
"""

from __future__ import annotations

from app.core.models import Queue
from app.core.states import Event
from app.observability import metrics


class QueueLabels:
    """The (namespace, queue) label values of a queue, for at most ``limit`` queues.

    The first ``limit`` distinct queues a process reports keep their names; later ones are
    reported as ``(_other, _other)``, so a tenant creating queue after queue cannot make the
    number of series grow without bound. Totals over all queues stay exact.
    """

    def __init__(self, limit: int = metrics.MAX_QUEUE_SERIES) -> None:
        self.limit = limit
        self._admitted: set[tuple[str, str]] = set()

    def of(self, namespace: str, queue: str) -> tuple[str, str]:
        """The label values to report ``namespace/queue`` under."""
        key = (namespace, queue)
        if key in self._admitted:
            return key
        if len(self._admitted) < self.limit:
            self._admitted.add(key)
            return key
        return (metrics.OTHER, metrics.OTHER)


class MetricsObserver:
    """Implements :class:`app.core.service.Observer` with Prometheus counters."""

    def __init__(self, labels: QueueLabels | None = None) -> None:
        self.labels = labels or QueueLabels()

    def enqueued(self, queue: Queue, count: int) -> None:
        """Count created messages."""
        if count > 0:
            metrics.ENQUEUED.labels(*self.labels.of(queue.namespace, queue.name)).inc(count)

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        """Count an event's state changes (events without a counter are ignored)."""
        counter = metrics.BY_EVENT.get(event)
        if counter is not None and count > 0:
            counter.labels(*self.labels.of(queue.namespace, queue.name)).inc(count)
