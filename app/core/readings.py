"""What the server reads about the database for its metrics, in one statement per scrape: live
messages per queue and state, the scheduler's lags and leaders, and the tables' tuple counts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """One queue's live messages per state, and how long its oldest pending one has waited."""

    namespace: str
    queue: str
    invisible: int
    pending: int
    running: int
    oldest_pending_age: float | None
    """Seconds since the oldest pending message became visible; None when none is pending."""
    queue_id: int | None = None
    """The queue's id (its identity: a queue recreated under the same name has a new one);
    None for a row that stands for several queues."""
    errored: int = 0
    """Its dead letters: errored messages still in the live table (until its retention)."""


@dataclass(frozen=True, slots=True)
class TableTuples:
    """Tuple counts of one table, from the statistics collector (approximate)."""

    table: str
    dead: int
    live: int


@dataclass(frozen=True, slots=True)
class DatabaseStats:
    """What one scrape shows about the database."""

    queues: list[QueueDepth]
    promotion_lag: float
    lease_release_lag: float
    expiry_lag: float
    leaders: int
    tables: list[TableTuples]
