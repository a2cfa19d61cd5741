"""Per-queue series of queues that exist, and only those.

The message counters are stored with the hidden label :data:`metrics.QUEUE_ID` (the queue's id).
A scrape first reads the ids of the queues that exist now (one small statement, never cached:
:func:`app.observability.database.read_existing_queues`), then renders the process metrics
through :class:`ExistingQueuesOnly`, which keeps a per-queue series only while its queue exists
and removes the hidden label. Whichever worker answers, and whichever workers counted, the
series of a queue deleted before the scrape was sent are not in it.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable

from prometheus_client import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from app.observability import metrics


def _shown(sample: Sample, existing: Collection[int] | None) -> Sample | None:
    """The sample as a scrape shows it, or None when it belongs to a queue that is gone."""
    queue_id = sample.labels.get(metrics.QUEUE_ID)
    if queue_id is None:
        return sample
    folded = queue_id == ""  # the _other series: several queues, some of them deleted
    if not folded and (existing is None or not queue_id.isdigit() or int(queue_id) not in existing):
        return None
    labels = {k: v for k, v in sample.labels.items() if k != metrics.QUEUE_ID}
    return sample._replace(labels=labels)


class ExistingQueuesOnly(Collector):
    """``source``'s metrics without the series of queues that are not in ``existing`` (None:
    unknown, as when the database does not answer; then every per-queue series is left out)."""

    def __init__(self, source: Collector, existing: Collection[int] | None) -> None:
        self.source = source
        self.existing = existing

    def collect(self) -> Iterable[Metric]:
        """The source's metric families, filtered."""
        for family in self.source.collect():
            if not any(metrics.QUEUE_ID in s.labels for s in family.samples):
                yield family
                continue
            kept = copy.copy(family)
            kept.samples = [
                shown for s in family.samples if (shown := _shown(s, self.existing)) is not None
            ]
            yield kept
