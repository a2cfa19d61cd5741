"""The process metrics, defined once. Each worker process updates its own; with several workers
(``sundial serve``) prometheus_client keeps them in files of a shared directory and the scrape
adds them up (:mod:`app.observability.multiprocess`).

Label cardinality: message counters carry ``namespace`` and ``queue``, capped per process at
:data:`MAX_QUEUE_SERIES` queues (the rest are counted under ``_other``); every other label takes a
fixed, small set of values (:data:`POOL`, the configured pools' names). Database-wide gauges are
not here: they are computed at scrape time (:mod:`app.observability.database`) so each is
reported once, not once per worker.

Deleted queues: the message counters also carry :data:`QUEUE_ID`, the queue's identity, which a
scrape never shows. A scrape keeps a counter's series only while that queue exists, and strips
the label (:mod:`app.observability.existing`), so the series of a deleted queue (or of every
queue of a deleted namespace) are gone from the next scrape of every worker, and a queue created
again under the same name starts from zero.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from app.core.states import Event

# No *_created series: the multi-process collector never has them, and in the classic text
# format they double the series count for little use.
disable_created_metrics()  # type: ignore[no-untyped-call]

MAX_QUEUE_SERIES: Final = 1000
"""Distinct (namespace, queue) label pairs a process reports before it folds new ones into
``_other``: it bounds series of counters and of the per-queue gauges alike."""

OTHER: Final = "_other"
"""The label value that stands for the queues beyond :data:`MAX_QUEUE_SERIES`."""

QUEUE_LABELS: Final = ("namespace", "queue")
"""The labels per-queue series show."""

QUEUE_ID: Final = "queue_id"
"""The label that ties a stored per-queue series to one queue (its id; ``""`` for ``_other``).
Scrapes use it to leave out the series of queues that no longer exist, and never show it."""

COUNTED_LABELS: Final = (*QUEUE_LABELS, QUEUE_ID)
"""The labels the per-queue counters are stored with."""

ENQUEUED = Counter(
    "sundial_messages_enqueued_total", "Messages created by enqueue.", COUNTED_LABELS
)

# The service's events, one counter each (docs/monitoring.md).
BY_EVENT: Final[dict[Event, Counter]] = {
    Event.DEQUEUE: Counter(
        "sundial_messages_dequeued_total", "Leases granted by dequeue.", COUNTED_LABELS
    ),
    Event.COMPLETE: Counter(
        "sundial_messages_completed_total", "Messages completed by their consumer.", COUNTED_LABELS
    ),
    Event.FAIL: Counter(
        "sundial_messages_failed_total",
        "Attempts failed by their consumer (retried, or errored on the last attempt).",
        COUNTED_LABELS,
    ),
    Event.CANCEL: Counter(
        "sundial_messages_canceled_total", "Messages canceled by a client.", COUNTED_LABELS
    ),
    Event.REQUEUE: Counter(
        "sundial_messages_requeued_total", "Dead letters sent back to their queue.", COUNTED_LABELS
    ),
}

# How long messages wait and are worked on, per queue. Few buckets, as each is a series per
# queue (under the same cap as the counters): 11 buckets, a sum and a count.
DURATION_BUCKETS: Final = (0.01, 0.05, 0.25, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0, 21600.0)
"""Upper bounds (seconds) of the duration histograms' buckets; ``+Inf`` is added."""

WAIT_SECONDS = Histogram(
    "sundial_message_wait_seconds",
    "Seconds a message waited for its first lease, from when it became ready (enqueued, or"
    " visible at the end of its delay) to the lease.",
    COUNTED_LABELS,
    buckets=DURATION_BUCKETS,
)
PROCESSING_SECONDS = Histogram(
    "sundial_message_processing_seconds",
    "Seconds from a lease's grant to its holder's complete or fail (leases that expire are not"
    " counted).",
    COUNTED_LABELS,
    buckets=DURATION_BUCKETS,
)

# The scheduler's work. Its statements report totals, not queues, so these carry no labels.
EXPIRED = Counter(
    "sundial_messages_expired_total",
    "Messages canceled by the scheduler because their expires_at passed.",
)
LEASES_EXPIRED = Counter(
    "sundial_leases_expired_total",
    "Leases the scheduler released because they expired (retried, or errored).",
)
PROMOTED = Counter(
    "sundial_messages_promoted_total",
    "Delayed messages the scheduler made pending when their visible_at came.",
)
REDRIVEN = Counter(
    "sundial_messages_redriven_total",
    "Dead letters the scheduler moved into their queue's dead_letter_queue.",
)
PERIODIC_FIRED = Counter(
    "sundial_periodic_fired_total",
    "Messages enqueued by periodic (cron) jobs' ticks (a trigger by hand is not counted).",
)
SCHEDULER_TICKS = Counter(
    "sundial_scheduler_ticks_total", "Maintenance ticks run while this process led."
)

# What a process holds of each pool (database, docs/scaling.md), labelled by the pool's name.
# The "pool" of sundial_db_pool_* is the connection pool, one per Sundial pool.
POOL: Final = "pool"
"""The label naming the Sundial pool (database) a gauge is about."""

SCHEDULER_LEADER = Gauge(
    "sundial_scheduler_leader",
    "1 while this process's scheduler of the pool is the leader (summed over the server's live"
    " workers).",
    [POOL],
    multiprocess_mode="livesum",
)

LONGPOLL_WAITERS = Gauge(
    "sundial_longpoll_waiters",
    "Dequeue requests parked waiting for a message (long polls), by the pool of their queue.",
    [POOL],
    multiprocess_mode="livesum",
)

POOL_CONNECTIONS = Gauge(
    "sundial_db_pool_connections",
    "Connections of the server's connection pool to each pool's database, by state (in_use, idle).",
    [POOL, "state"],
    multiprocess_mode="livesum",
)
POOL_SIZE = Gauge(
    "sundial_db_pool_size",
    "Configured connection pool size per pool's database (connections kept open); overflow may"
    " add as many again.",
    [POOL],
    multiprocess_mode="livesum",
)
