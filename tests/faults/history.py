"""What a campaign records: every answer the clients saw, every fault, the watcher's samples.

The workload (:mod:`tests.faults.workload`), the injector (:mod:`tests.faults.injector`) and the
watcher (:mod:`tests.faults.database`) write into one :class:`History`; at the end the messages as
the database holds them are read into :class:`DbRow` s, and the checks
(:mod:`tests.faults.checks`) judge the one against the other.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.config import CRASH_FAULTS

Crash = tuple[float, float]
"""(start, end) wall-clock times of a database crash (``pg_restart_immediate``), or of a change of
primary (``kill_primary``, ``switchover``: until the new primary accepts writes)."""


@dataclass
class AckAttempt:
    """One complete or fail request for one lease, and what came back."""

    kind: str  # "complete" | "fail"
    sent: float
    received: float | None
    status: int | None  # None: no answer (transport error, timeout): outcome unknown
    code: str | None = None  # the error code of a non-2xx answer
    server: str = ""
    via: str = "message"  # "message" (POST …/{id}/complete) or "batch" (POST …/ack)

    @property
    def ok(self) -> bool:
        """Acknowledged: the change is committed."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def unknown(self) -> bool:
        """No answer or a 5xx: the change may or may not have been committed."""
        return self.status is None or self.status >= 500

    @property
    def maybe_applied(self) -> bool:
        return self.ok or self.unknown


@dataclass
class Delivery:
    """One lease as a consumer received it, and every ack it tried with it."""

    queue: str
    id: str
    lease_id: str
    attempt: int
    server: str
    requested: float
    received: float
    lease_expires_at: float
    lease_seconds: int
    exclusive_value: str | None = None
    intent: str = "complete"  # complete | fail | die | stall | drain
    acks: list[AckAttempt] = field(default_factory=list)

    @property
    def granted_at(self) -> float:
        """The server's grant time (its ``now()``): lease_expires_at - lease_seconds."""
        return self.lease_expires_at - self.lease_seconds

    def lease_end(self, crashes: Sequence[Crash] = ()) -> float:
        """When the lease expires, or when a database crash may have forgotten it.

        Claims commit without waiting for their WAL flush (``app/store/sql/``): a crash
        may forget a lease that was already handed out. A lease granted before a crash ended
        (the crash window is the injector's: it starts a little before PostgreSQL dies) and
        expiring after it began is certainly valid only until the crash began, or its grant.
        """
        end = self.lease_expires_at
        for start, finish in crashes:
            if self.granted_at < finish and start < self.lease_expires_at:
                end = min(end, max(start, self.granted_at))
        return end

    def may_be_forgotten(self, crashes: Sequence[Crash], before: float) -> bool:
        """Whether a database crash between this lease's grant and ``before`` may forget it."""
        return any(self.granted_at < finish and start < before for start, finish in crashes)

    def valid_until(self, crashes: Sequence[Crash] = ()) -> float:
        """A lower bound of when this lease stopped being valid (see :mod:`tests.faults.checks`)."""
        end = self.lease_end(crashes)
        for ack in self.acks:
            if ack.maybe_applied:
                end = min(end, ack.sent)
        return end

    def valid_interval(self, crashes: Sequence[Crash] = ()) -> tuple[float, float] | None:
        """[received, valid_until), or None when the lease was already dead on arrival."""
        end = self.valid_until(crashes)
        return (self.received, end) if self.received < end else None

    def acked(self, kind: str) -> bool:
        return any(a.kind == kind and a.ok for a in self.acks)


@dataclass
class EnqueueAck:
    """One id in a 2xx answer to enqueue."""

    queue: str
    id: str
    created: bool
    state: str
    server: str
    at: float


@dataclass
class FaultEvent:
    """One injected fault."""

    name: str
    started: float
    ended: float
    detail: str
    crash: Crash | None = None
    """For a fault of :data:`CRASH_FAULTS`, the part of it in which leases may be forgotten, when
    the injector knows it (from the fault's start until a new primary accepts writes)."""
    outage: float | None = None
    """Seconds of the longest stretch without an acknowledged enqueue overlapping the fault
    (:func:`tests.faults.report.write_outage`); None when nothing was acknowledged after it."""

    @property
    def crash_window(self) -> Crash | None:
        """The crash the checks must allow for: :attr:`crash`, else the whole fault."""
        if self.name not in CRASH_FAULTS:
            return None
        return self.crash or (self.started, self.ended)


@dataclass
class WatcherHit:
    """The live watcher saw ``count`` running messages of one exclusive value."""

    at: float
    queue_id: int
    value: str
    count: int


@dataclass
class History:
    """Everything the clients saw, and what the faults and the watcher observed."""

    attempted: dict[tuple[str, str], float] = field(default_factory=dict)
    enqueues: list[EnqueueAck] = field(default_factory=list)
    unacknowledged: set[tuple[str, str]] = field(default_factory=set)
    rejected: list[str] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)
    fault_violations: list[str] = field(default_factory=list)
    watcher_hits: list[WatcherHit] = field(default_factory=list)
    watcher_samples: int = 0
    watcher_errors: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    """Every 5xx answer other than 503 (docs/api.md: never 500), with its body."""
    started: float = field(default_factory=time.time)

    def acknowledged_ids(self) -> set[tuple[str, str]]:
        return {(e.queue, e.id) for e in self.enqueues}

    def save(self, path: Path) -> None:
        """Write the whole history as JSON, for the post-mortem of a failed campaign."""
        data = dataclasses.asdict(self)
        data["attempted"] = [[q, i, t] for (q, i), t in self.attempted.items()]
        data["unacknowledged"] = sorted(self.unacknowledged)
        data["statuses"] = dict(self.statuses)  # asdict() mangles a Counter
        path.write_text(json.dumps(data))


@dataclass(frozen=True)
class DbRow:
    """A message as the database holds it at the end (``messages`` or ``message_history``)."""

    state: str
    attempts: int
    lease_id: str | None
    archived: bool = False
