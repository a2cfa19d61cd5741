"""The queue service's metrics hook: counts what each operation committed, by queue, and
observes how long messages waited for their first lease and how long leases were held.

Counting in the service rather than in HTTP handlers means every caller (API, dashboard, CLI)
is counted, and only changes that happened: an idempotent repeat of a complete, or an ack item
refused for a stale lease, counts nothing.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from prometheus_client import Histogram

from app.core.models import Queue
from app.core.states import Event
from app.observability import metrics, multiprocess

Labels = tuple[str, str, str]
"""Label values of a per-queue counter: namespace, queue, queue id (:data:`metrics.QUEUE_ID`)."""

OTHER_LABELS: Labels = (metrics.OTHER, metrics.OTHER, "")
"""Where the queues beyond the cap are counted."""


class QueueLabels:
    """The label values of a queue, for at most ``limit`` queues at a time.

    The first ``limit`` queues a process reports keep their names; later ones are reported as
    ``(_other, _other)``, so a tenant creating queue after queue cannot make the number of
    series grow without bound. Totals over all queues stay exact. A queue is known by its id, so
    one deleted and created again under the same name is a new queue; :meth:`forget` frees the
    places of queues that no longer exist.
    """

    def __init__(self, limit: int = metrics.MAX_QUEUE_SERIES) -> None:
        self.limit = limit
        self._admitted: dict[int, Labels] = {}
        self.refused = False
        """Whether a queue was counted under ``_other`` since :meth:`forget` last freed a
        place."""

    def of(self, queue_id: int, namespace: str, name: str) -> Labels:
        """The label values to report the queue ``queue_id`` (``namespace/name``) under."""
        labels = self._admitted.get(queue_id)
        if labels is not None:
            return labels
        if len(self._admitted) < self.limit:
            labels = self._admitted[queue_id] = (namespace, name, str(queue_id))
            return labels
        self.refused = True
        return OTHER_LABELS

    def forget(self, existing: Collection[int]) -> list[Labels]:
        """Forget the queues whose ids are not in ``existing``; returns their label values."""
        gone = [queue_id for queue_id in self._admitted if queue_id not in existing]
        if gone:
            self.refused = False
        return [self._admitted.pop(queue_id) for queue_id in gone]


class MetricsObserver:
    """Implements :class:`app.core.service.observer.Observer` with Prometheus counters."""

    def __init__(self, labels: QueueLabels | None = None) -> None:
        self.labels = labels or QueueLabels()

    def enqueued(self, queue: Queue, count: int) -> None:
        """Count created messages."""
        if count > 0:
            metrics.ENQUEUED.labels(*self._labels(queue)).inc(count)

    def transitioned(self, queue: Queue, event: Event, count: int) -> None:
        """Count an event's state changes (events without a counter are ignored)."""
        counter = metrics.BY_EVENT.get(event)
        if counter is not None and count > 0:
            counter.labels(*self._labels(queue)).inc(count)

    def waited(self, queue: Queue, seconds: Sequence[float]) -> None:
        """Observe first leases' waits."""
        self._observe(metrics.WAIT_SECONDS, queue, seconds)

    def processed(self, queue: Queue, seconds: Sequence[float]) -> None:
        """Observe how long ended leases were held."""
        self._observe(metrics.PROCESSING_SECONDS, queue, seconds)

    def _observe(self, family: Histogram, queue: Queue, seconds: Sequence[float]) -> None:
        """Observe ``seconds`` in the queue's series of the histogram ``family``."""
        if seconds:
            histogram = family.labels(*self._labels(queue))
            for value in seconds:
                histogram.observe(value)

    def _labels(self, queue: Queue) -> Labels:
        return self.labels.of(queue.id, queue.namespace, queue.name)

    def forget(self, existing: Collection[int]) -> None:
        """Drop what this process holds for queues that no longer exist (their ids are not in
        ``existing``). Scrapes leave such series out in any case; this frees their places under
        the cap and, in a single process, their memory. (With several workers prometheus_client
        cannot remove a series from the shared files: a deleted queue's values stay there, a
        few bytes each, until the server restarts, and are never shown.)"""
        gone = self.labels.forget(existing)
        if not gone or os.environ.get(multiprocess.ENV):
            return
        per_queue = (
            metrics.ENQUEUED,
            *metrics.BY_EVENT.values(),
            metrics.WAIT_SECONDS,
            metrics.PROCESSING_SECONDS,
        )
        for family in per_queue:
            for labels in gone:
                family.remove(*labels)
