"""The fault-injection harness: Jepsen's method on one machine, with real processes.

A campaign starts a private PostgreSQL cluster (:class:`app.embedded.LocalCluster`, migrated), the
TCP fault proxy in front of it (:mod:`tests.faults.proxy`; one proxy per server, so that one server
can be cut off alone) and two ``sundial serve`` processes that reach the database through them.
While producers and consumers run against both servers it injects faults one after another, then
lets the system drain and checks the history it recorded against what the database holds:

========================  ===================================================================
check                     guarantee (docs/concepts.md, "Guarantees")
========================  ===================================================================
``lost``                  1 durability, 2 at-least-once: every acknowledged enqueue id is in
                          ``messages`` or ``message_history``; none is left live after the
                          drain; no id is created twice. (A 500 is reported, not counted.)
``fencing``               2 one valid lease: every acknowledged complete was made with the
                          lease that the database shows completed the message; every
                          complete/fail sent after its lease expired was refused with 409
                          ``lease_mismatch``; one lease never both completes and fails.
``exclusivity``           3: the recorded intervals of valid leases never overlap for one
                          exclusive value, and the live watcher never saw two running
                          messages of one value.
``duplicates``            2: a message is delivered again only after its previous lease ended
                          by a nack or by expiry (a fault: consumer death, stall, kill, lost
                          answer), never after an acknowledged complete, never while the
                          previous lease was still valid. Duplicates are counted by cause.
``faults``                the faults themselves: another scheduler leads within 5 s of the
                          leader's death; a batch cut by a kill is all-or-nothing.
========================  ===================================================================

Times. Every time in the history is wall-clock (``time.time()``), the same clock PostgreSQL's
``now()`` reads on this machine, so they compare with ``lease_expires_at``. A lease is counted
valid from the moment its dequeue answer was *received* (the grant has certainly committed then)
until the earlier of its ``lease_expires_at`` (the server's fact) and the moment the first
complete/fail that may have ended it was *sent*. That interval is always inside the lease's true
validity, so an overlap is a real violation, never an artefact of clocks or latency.

Crashes. Dequeue commits its claim without waiting for the WAL flush (durability is promised for
enqueue, complete, fail and cancel, not for a lease: ``app/store/sql/``), so a database
crash may forget a lease that a consumer already holds; the message is then leased again, with
the same attempt number, while the first lease still looks unexpired to its consumer. The checks
count a lease granted before a crash as valid only until the crash, and report separately what
such forgotten leases did: ``leases forgotten by a database crash`` and the exclusive-value
overlaps that only they make (the consumer's view: two consumers on one value at once).

Faults (:data:`FAULTS`): ``proxy_latency`` (+50 ms each way for a few seconds), ``kill_server``
(kill -9 and restart), ``terminate_backends`` (``pg_terminate_backend`` of every server
connection), ``leader_loss`` (kill -9 of the process whose scheduler leads, found through
``scheduler_nodes``), ``proxy_cut`` (reset every database connection), ``kill_mid_batch``
(kill -9 while a 400-message enqueue is in flight), ``pg_restart_immediate``
(``pg_ctl restart -m immediate``), ``proxy_stall`` (nothing flows for longer than a lease) and
``pause_server`` (SIGSTOP of a server that does not lead for longer than a lease, then SIGCONT),
``leader_partition`` (the leading server alone is cut off from the database, its connections left
open) and ``leader_pause`` (SIGSTOP of the leading server for ``partition_seconds``); after the
last three another node must lead within the takeover limit (it fences the stalled leader).

High availability (``CampaignConfig.ha``, ``python -m tests.faults --ha``). The database is a
pg_auto_failover formation (:class:`app.embedded.formation.Formation`: a monitor, a primary and
its synchronous standby) instead of one cluster; both servers get its multi-host URL directly (no
proxies, so no proxy faults) and the harness's own connections follow the primary and wait out a
failover. The formation faults (:data:`HA_FAULTS`): ``switchover`` (planned: the standby takes
over), ``kill_primary`` (SIGKILL of the primary's keeper and PostgreSQL; the standby is promoted,
then the killed node is started again and must rejoin as the standby) and ``stop_standby`` (the
standby stops cleanly; the primary serves alone, without synchronous replication, for a few
seconds; the standby comes back). After each the formation must be healthy again (a primary and
a caught-up standby) before the next fault. The server faults that do not need a proxy run too
(:data:`HA_CAMPAIGN_FAULTS`); ``terminate_backends`` hits the current primary (the harness's
connections reach only the node that accepts writes); ``pg_restart_immediate`` is left out: a
``pg_ctl restart`` behind a keeper's back races the keeper, and ``kill_primary`` is the crash of
a formation. A kill of the primary and a switchover both count as database crashes for the
checks (see Crashes), to be safe: a claim's commit waits for the standby like any other, so the
new primary knows every lease the old one granted, and ``leases forgotten by a database crash``
must stay at zero; a non-zero count would be a regression to investigate.

Write outage. For every fault the report gives the longest stretch without an acknowledged
enqueue that overlaps the fault (:func:`write_outage`): from the last 2xx enqueue answer before
it to the next one. It includes up to one ordinary interval between answers (~0.1-0.2 s here),
and it is a figure, not a check.

Use :func:`run_campaign` (``tests/faults/test_faults.py``, ``python -m tests.faults``); the checkers
are plain functions over :class:`History` and database rows, so they can be fed synthetic broken
histories (``tests/faults/test_checks_detect_breakage.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import httpx
import psycopg

from app.embedded import LocalCluster
from app.embedded.formation import NODE_NAMES, Formation, FormationError, NodeState
from app.store import migrate
from tests.faults.proxy import FaultProxy
from tests.processes import ROOT, SUNDIAL, free_port

# --- configuration --------------------------------------------------------------------------

FAULTS: tuple[str, ...] = (
    "kill_server",
    "proxy_latency",
    "terminate_backends",
    "proxy_cut",
    "pause_server",
    "leader_partition",
    "pg_restart_immediate",
    "leader_loss",
    "proxy_stall",
    "leader_pause",
    "kill_mid_batch",
)
"""Every fault type, in the order the CI campaign injects them (a killed server restarts in the
background, ~5-20 s: the faults that need every server up come after others)."""
HA_FAULTS: tuple[str, ...] = ("switchover", "kill_primary", "stop_standby")
"""The faults of a pg_auto_failover formation (``CampaignConfig.ha`` only)."""
HA_CAMPAIGN_FAULTS: tuple[str, ...] = (
    "switchover",
    "kill_server",
    "terminate_backends",
    "pause_server",
    "kill_primary",
    "leader_loss",
    "stop_standby",
    "leader_pause",
    "kill_mid_batch",
)
"""Every fault of an HA campaign, in the order a campaign without ``repeat`` injects them: the
formation faults and the server faults that need no proxy."""
NEEDS_ALL_UP = frozenset(
    {"kill_server", "leader_loss", "kill_mid_batch", "leader_partition", "leader_pause"}
) | frozenset(HA_FAULTS)
"""Faults that wait until every server is up: a formation fault too, so that its write outage
is the database's alone (and a server restarting meanwhile does not exhaust its start tries)."""

PROXY_FAULTS = frozenset({"proxy_latency", "proxy_cut", "proxy_stall", "leader_partition"})
NOT_IN_HA = PROXY_FAULTS | {"pg_restart_immediate"}
"""Left out of an HA campaign: there are no proxies, and a ``pg_ctl restart`` behind a keeper's
back races the keeper (``kill_primary`` is the crash of a formation)."""
CRASH_FAULTS = frozenset({"pg_restart_immediate", "kill_primary", "switchover"})
"""Faults after which the database may have forgotten a lease (see the module docstring)."""
LIVE_STATES = frozenset({"invisible", "pending", "running"})
TERMINAL_STATES = frozenset({"completed", "canceled", "errored"})
Crash = tuple[float, float]
"""(start, end) wall-clock times of a database crash (``pg_restart_immediate``), or of a change of
primary (``kill_primary``, ``switchover``: until the new primary accepts writes)."""
NAMESPACE = "faults"
SIMPLE = "simple"
EXCLUSIVE = "exclusive"
EXCLUSIVE_KEY = "project"
ADMIN_TOKEN = "faults-admin-token-32-characters-ok"  # a throwaway test cluster's token
HARNESS_APP = "faults-harness"
CLOCK_EPSILON = 0.02
"""Seconds of slack when comparing a client send time with a server lease expiry."""


@dataclass
class CampaignConfig:
    """How big and how long a campaign is. The defaults are the CI-sized run."""

    duration: float = 45.0
    """Seconds of traffic with faults (the schedule runs inside it, then traffic continues)."""
    seed: int = 1
    faults: Sequence[str] | None = None
    """Faults to inject, in order; with ``repeat``, shuffled rounds of them until ``duration``.
    None: every fault that applies (:data:`FAULTS`, or :data:`HA_CAMPAIGN_FAULTS` with ``ha``)."""
    repeat: bool = False
    gap: float = 1.5
    """Seconds of undisturbed traffic before each fault."""
    use_proxy: bool = True
    ha: bool = False
    """Run on a pg_auto_failover formation, with its faults (see the module docstring)."""
    lease_seconds: int = 2
    simple_producers: int = 2
    exclusive_producers: int = 1
    simple_consumers: int = 3
    exclusive_consumers: int = 2
    exclusive_values: int = 6
    produce_interval: float = 0.5
    batch_max: int = 8
    drain_timeout: float = 40.0
    leader_takeover_limit: float = 5.0
    partition_seconds: float = 8.0
    latency: float = 0.05
    latency_seconds: float = 4.0
    stall_seconds: float = 2.5
    server_start_timeout: float = 60.0
    failover_timeout: float = 60.0
    """HA: seconds for a new primary to accept writes (a switchover, a killed primary), and for a
    primary whose standby stopped to run alone."""
    rejoin_timeout: float = 90.0
    """HA: seconds for a killed or stopped node to be back as a caught-up standby."""
    lone_primary_seconds: float = 3.0
    """HA: seconds of traffic on a primary alone (``stop_standby``) before the standby returns."""
    database_patience: float = 30.0
    """HA: seconds the harness's own queries keep retrying (longer than a failover)."""
    simple_retention_seconds: int = 20
    """Short, so that the scheduler moves finished messages into history during the run."""
    workdir: Path | None = None
    keep_workdir: bool = False
    verbose: bool = False

    @property
    def proxied(self) -> bool:
        """Whether the servers reach the database through the fault proxies."""
        return self.use_proxy and not self.ha


class HarnessError(RuntimeError):
    """The harness itself could not do its job (a server would not start, ...)."""


# --- the history ------------------------------------------------------------------------------


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
        """A lower bound of when this lease stopped being valid (see the module docstring)."""
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
    (:func:`write_outage`); None when nothing was acknowledged after it."""

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


# --- the checkers -----------------------------------------------------------------------------


@dataclass
class CheckResult:
    """What one checker found: violations (empty = the guarantee held) and figures."""

    name: str
    violations: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


def check_lost(
    enqueues: Iterable[EnqueueAck],
    db: Mapping[tuple[str, str], DbRow],
    duplicated_rows: Iterable[tuple[str, str]] = (),
) -> CheckResult:
    """Every acknowledged enqueue id must be in the database, terminal or still live.

    Violations: an acknowledged id missing from ``messages`` and ``message_history`` (lost), an id
    reported ``created: true`` twice or present twice in the database (duplicated by enqueue).
    Live ids are counted (``live``); after a complete drain there should be none.
    """
    result = CheckResult("lost")
    created: Counter[tuple[str, str]] = Counter()
    ids: set[tuple[str, str]] = set()
    for ack in enqueues:
        ids.add((ack.queue, ack.id))
        if ack.created:
            created[(ack.queue, ack.id)] += 1
    lost = sorted(key for key in ids if key not in db)
    result.violations += [f"acknowledged enqueue {q}/{i} is in no table: lost" for q, i in lost]
    result.violations += [
        f"{q}/{i} was reported created {n} times" for (q, i), n in created.items() if n > 1
    ]
    result.violations += [f"{q}/{i} is in the database twice" for q, i in duplicated_rows]
    live = [key for key in ids if key in db and db[key].state in LIVE_STATES]
    result.counts = {
        "acknowledged": len(ids),
        "lost": len(lost),
        "live": len(live),
        "terminal": sum(1 for k in ids if k in db and db[k].state in TERMINAL_STATES),
        "archived": sum(1 for k in ids if k in db and db[k].archived),
    }
    return result


def check_fencing(
    deliveries: Iterable[Delivery],
    db: Mapping[tuple[str, str], DbRow],
    epsilon: float = CLOCK_EPSILON,
) -> CheckResult:
    """No completion (or failure) is accepted from a stale lease.

    - every 2xx complete: the database shows the message completed *by that lease* (same
      ``lease_id``; for a message already moved to history, whose lease is not kept, the same
      attempt number — the completing lease is the last one granted);
    - every complete/fail *sent* after its lease expired got 409 ``lease_mismatch``, except a
      2xx that repeats an earlier attempt with the same lease that was sent in time and whose
      answer was lost (the idempotent retry the API promises);
    - one lease never both completes and fails; one id is completed by one lease only.
    """
    result = CheckResult("fencing")
    refused_late = accepted_late_retry = unknown_late = completes_ok = 0
    completed_by: dict[tuple[str, str], list[str]] = defaultdict(list)
    for d in deliveries:
        key = (d.queue, d.id)
        if d.acked("complete") and d.acked("fail"):
            result.violations.append(f"{d.queue}/{d.id} lease {d.lease_id} completed AND failed")
        if d.acked("complete"):
            completes_ok += 1
            completed_by[key].append(d.lease_id)
            row = db.get(key)
            if row is None:
                result.violations.append(f"{d.queue}/{d.id} completed (200) but gone")
            elif row.state != "completed":
                result.violations.append(
                    f"{d.queue}/{d.id} completed (200) with lease {d.lease_id} "
                    f"but the database shows {row.state}"
                )
            elif row.lease_id is not None and row.lease_id != d.lease_id:
                result.violations.append(
                    f"{d.queue}/{d.id} completed (200) with lease {d.lease_id} "
                    f"but the database shows it completed by lease {row.lease_id}"
                )
            elif row.lease_id is None and row.attempts != d.attempt:
                result.violations.append(
                    f"{d.queue}/{d.id} completed (200) on attempt {d.attempt} "
                    f"but history shows attempt {row.attempts} completed it"
                )
        for ack in d.acks:
            if ack.sent <= d.lease_expires_at + epsilon:
                continue
            if ack.status == 409 and ack.code == "lease_mismatch":
                refused_late += 1
            elif ack.ok:
                retried = any(
                    other.kind == ack.kind
                    and other.maybe_applied
                    and other.sent < ack.sent
                    and other.sent <= d.lease_expires_at
                    for other in d.acks
                    if other is not ack
                )
                if retried:
                    accepted_late_retry += 1
                else:
                    late = ack.sent - d.lease_expires_at
                    result.violations.append(
                        f"{d.queue}/{d.id}: {ack.kind} with lease {d.lease_id} sent {late:.3f} s "
                        f"after the lease expired was accepted ({ack.status}, via {ack.via})"
                    )
            elif ack.unknown or ack.status == 429:  # no answer, or rate-limited: not judged
                unknown_late += 1
            else:
                result.violations.append(
                    f"{d.queue}/{d.id}: late {ack.kind} answered {ack.status} {ack.code}, "
                    "expected 409 lease_mismatch"
                )
    for (queue, message_id), leases in completed_by.items():
        if len(set(leases)) > 1:
            result.violations.append(
                f"{queue}/{message_id} completed (200) by {len(set(leases))} different leases"
            )
    result.counts = {
        "completes_acknowledged": completes_ok,
        "stale_refused": refused_late,
        "stale_accepted": sum(
            "after the lease expired was accepted" in v for v in result.violations
        ),
        "late_idempotent_retries": accepted_late_retry,
        "late_unknown": unknown_late,
    }
    return result


def _overlaps(deliveries: Iterable[Delivery], crashes: Sequence[Crash]) -> tuple[int, list[str]]:
    """Intervals checked, and every overlap of two valid leases of one exclusive value."""
    by_value: dict[tuple[str, str], list[tuple[float, float, Delivery]]] = defaultdict(list)
    checked = 0
    for d in deliveries:
        if d.exclusive_value is None:
            continue
        interval = d.valid_interval(crashes)
        if interval is None:
            continue
        checked += 1
        by_value[(d.queue, d.exclusive_value)].append((*interval, d))
    found = []
    for (queue, value), intervals in by_value.items():
        intervals.sort(key=lambda item: item[0])
        holder: tuple[float, float, Delivery] | None = None
        for start, end, d in intervals:
            if holder is not None and start < holder[1]:
                other = holder[2]
                found.append(
                    f"{queue} value {value!r}: {d.id} (lease {d.lease_id[:8]}, {d.server}) "
                    f"valid from {start - other.received:+.3f} s while {other.id} (lease "
                    f"{other.lease_id[:8]}, {other.server}) was valid "
                    f"for {holder[1] - start:.3f} s more"
                )
            if holder is None or end > holder[1]:
                holder = (start, end, d)
    return checked, found


def check_exclusivity(
    deliveries: Iterable[Delivery],
    watcher_hits: Iterable[WatcherHit] = (),
    crashes: Sequence[Crash] = (),
) -> CheckResult:
    """At most one valid lease per exclusive value at any instant.

    Intervals are [received, valid_until) (see :meth:`Delivery.valid_interval`): only the time a
    lease was certainly valid, so any overlap is a real violation. Every sample of the live
    watcher that saw two running messages of one value is a violation too.

    A lease granted before a database crash counts only until the crash (the crash may have
    forgotten it). The overlaps that only such a lease makes are counted apart
    (``overlaps_through_forgotten_leases``): the database held one lease at a time, but a
    consumer holding a forgotten, unexpired lease worked on the value alongside another.
    """
    result = CheckResult("exclusivity")
    items = list(deliveries)
    checked, found = _overlaps(items, crashes)
    result.violations += found
    consumer_view = len(_overlaps(items, ())[1]) if crashes else len(found)
    hits = list(watcher_hits)
    result.violations += [
        f"watcher: {h.count} running messages of value {h.value!r} in queue {h.queue_id}"
        for h in hits
    ]
    result.counts = {
        "intervals": checked,
        "overlaps": len(found),
        "overlaps_through_forgotten_leases": max(0, consumer_view - len(found)),
        "watcher_hits": len(hits),
    }
    return result


def check_duplicates(
    deliveries: Iterable[Delivery],
    epsilon: float = CLOCK_EPSILON,
    crashes: Sequence[Crash] = (),
) -> CheckResult:
    """Count redeliveries and make sure each one followed the end of the previous lease.

    For consecutive deliveries ``a`` then ``b`` of one id, in the order the server granted them
    (the attempt number; not the order the answers arrived, which a paused server can invert):

    - ``a`` acknowledged a complete: violation (a completed message was delivered again);
    - ``a`` acknowledged (or may have made) a fail: a retry after a nack, not a duplicate;
    - otherwise ``a``'s lease ended by a fault (it expired: the consumer died or stalled, the
      server was killed, the answer was lost; or a database crash forgot it): a duplicate,
      allowed — unless ``b`` arrived while ``a`` was still valid (two valid leases at once).

    Every lease has its own attempt number, unless a database crash forgot the first lease
    (counted as ``forgotten_leases``); a gap means a lease whose answer never arrived.
    """
    result = CheckResult("duplicates")
    by_id: dict[tuple[str, str], list[Delivery]] = defaultdict(list)
    for d in deliveries:
        by_id[(d.queue, d.id)].append(d)
    causes: Counter[str] = Counter()
    retries = unseen = ids_duplicated = forgotten = 0
    for (queue, message_id), items in by_id.items():
        items.sort(key=lambda d: (d.attempt, d.received))
        unseen += items[0].attempt - 1
        duplicated = False
        for a, b in itertools.pairwise(items):
            unseen += max(0, b.attempt - a.attempt - 1)
            if b.attempt == a.attempt:
                if a.may_be_forgotten(crashes, before=b.granted_at):
                    forgotten += 1
                else:
                    result.violations.append(
                        f"{queue}/{message_id}: two leases ({a.lease_id}, {b.lease_id}) "
                        f"for attempt {a.attempt}"
                    )
            if a.acked("complete"):
                result.violations.append(
                    f"{queue}/{message_id} delivered again (attempt {b.attempt}) after lease "
                    f"{a.lease_id} completed it"
                )
                continue
            nacked = any(
                ack.kind == "fail" and ack.maybe_applied and ack.sent <= b.received
                for ack in a.acks
            )
            if nacked:
                retries += 1
                continue
            end = a.lease_end(crashes)
            if b.received < end - epsilon:
                result.violations.append(
                    f"{queue}/{message_id}: lease {b.lease_id} received while lease "
                    f"{a.lease_id} was valid for {end - b.received:.3f} s more"
                )
                continue
            duplicated = True
            causes["db_crash" if end < a.lease_expires_at else _expiry_cause(a)] += 1
        ids_duplicated += duplicated
    result.counts = {
        "deliveries": sum(len(v) for v in by_id.values()),
        "delivered_ids": len(by_id),
        "duplicated": sum(causes.values()),
        "ids_duplicated": ids_duplicated,
        "retries_after_nack": retries,
        "unseen_leases": unseen,
        "forgotten_leases": forgotten,
        **{f"duplicated_after_{cause}": n for cause, n in sorted(causes.items())},
    }
    return result


def _expiry_cause(d: Delivery) -> str:
    if d.intent in ("die", "stall"):
        return f"consumer_{d.intent}"
    if any(a.unknown for a in d.acks):
        return "lost_ack"
    if any(a.status == 409 for a in d.acks):
        return "late_ack"
    return "expiry"


# --- write outages ----------------------------------------------------------------------------


def write_outage(
    acknowledged: Iterable[float], start: float, end: float, origin: float
) -> float | None:
    """The longest stretch between consecutive acknowledged enqueues that overlaps [start, end].

    ``acknowledged`` are the times 2xx enqueue answers arrived; ``origin`` stands for the last one
    when none came before ``start``. None when no answer arrived at or after ``end``: the outage
    did not end (within the history).
    """
    times = sorted(set(acknowledged))
    first_after = bisect.bisect_right(times, start)
    previous = times[first_after - 1] if first_after else origin
    longest = 0.0
    for at in times[first_after:]:
        longest = max(longest, at - previous)
        if at >= end:
            return longest
        previous = at
    return None


def measure_outages(history: History) -> None:
    """Set :attr:`FaultEvent.outage` of every fault from the history's enqueue answers."""
    acknowledged = [e.at for e in history.enqueues]
    for fault in history.faults:
        fault.outage = write_outage(acknowledged, fault.started, fault.ended, history.started)


# --- the report -------------------------------------------------------------------------------


@dataclass
class Report:
    """The outcome of a campaign: checks, figures, faults, and where its files are."""

    config: CampaignConfig
    history: History
    checks: list[CheckResult]
    traffic_seconds: float
    total_seconds: float
    workdir: Path
    drained: bool
    server_log_errors: int = 0
    failed_starts: int = 0
    unexpected_errors: list[str] = field(default_factory=list)
    """500 answers the servers logged: docs/api.md promises none (reported, not a violation)."""

    @property
    def needs_post_mortem(self) -> bool:
        return not self.ok or bool(self.unexpected_errors) or self.figures()["HTTP 500 answers"] > 0

    @property
    def violations(self) -> list[str]:
        found = [f"[{c.name}] {v}" for c in self.checks for v in c.violations]
        found += [f"[faults] {v}" for v in self.history.fault_violations]
        if not self.drained:
            found.append("[lost] the system did not drain: live messages remain")
        return found

    @property
    def ok(self) -> bool:
        return not self.violations

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def fault_counts(self) -> Counter[str]:
        return Counter(f.name for f in self.history.faults)

    def outages(self) -> dict[str, dict[str, float | int | None]]:
        """Write outage per fault type (:attr:`FaultEvent.outage`): ``count`` of faults, ``median``
        and ``max`` seconds over those after which an enqueue was acknowledged, and ``unended``:
        how many had none after them."""
        by_name: dict[str, list[float | None]] = defaultdict(list)
        for fault in self.history.faults:
            by_name[fault.name].append(fault.outage)
        summary: dict[str, dict[str, float | int | None]] = {}
        for name, outages in sorted(by_name.items()):
            ended = [o for o in outages if o is not None]
            summary[name] = {
                "count": len(outages),
                "median": statistics.median(ended) if ended else None,
                "max": max(ended) if ended else None,
                "unended": len(outages) - len(ended),
            }
        return summary

    def figures(self) -> dict[str, Any]:
        lost, fencing = self.check("lost"), self.check("fencing")
        exclusive, dup = self.check("exclusivity"), self.check("duplicates")
        status_5xx = Counter(
            key.split()[-1]
            for key in self.history.statuses.elements()
            if key.split()[-1].isdigit() and int(key.split()[-1]) >= 500
        )
        return {
            "faults injected": len(self.history.faults),
            "messages (ids enqueued)": len(self.history.attempted),
            "acknowledged": lost.counts["acknowledged"],
            "unacknowledged (gave up)": len(self.history.unacknowledged),
            "delivered (distinct ids)": dup.counts["delivered_ids"],
            "deliveries": dup.counts["deliveries"],
            "completes acknowledged": fencing.counts["completes_acknowledged"],
            "moved to history": lost.counts["archived"],
            "lost": lost.counts["lost"],
            "live after drain": lost.counts["live"],
            "duplicated deliveries (after a fault)": dup.counts["duplicated"],
            "ids delivered more than once (after a fault)": dup.counts["ids_duplicated"],
            "retries after nack": dup.counts["retries_after_nack"],
            "leases never seen (answer lost)": dup.counts["unseen_leases"],
            "leases forgotten by a database crash": dup.counts["forgotten_leases"],
            "stale-complete attempts refused (409)": fencing.counts["stale_refused"],
            "stale completions accepted": fencing.counts["stale_accepted"],
            "exclusivity: intervals checked": exclusive.counts["intervals"],
            "exclusivity: overlaps": exclusive.counts["overlaps"],
            "exclusivity: overlaps via a lease a crash forgot (consumer view)": exclusive.counts[
                "overlaps_through_forgotten_leases"
            ],
            "exclusivity: watcher samples": self.history.watcher_samples,
            "exclusivity: watcher hits": exclusive.counts["watcher_hits"],
            "exclusivity: watcher errors (database away)": self.history.watcher_errors,
            "HTTP 5xx answers": sum(status_5xx.values()),
            "HTTP 500 answers": status_5xx.get("500", 0),
            "server log tracebacks": self.server_log_errors,
            "server starts that failed (database away)": self.failed_starts,
            "violations": len(self.violations),
        }

    def format(self) -> str:
        database = "pg_auto_failover formation" if self.config.ha else "one PostgreSQL"
        lines = [
            f"Sundial fault campaign: seed {self.config.seed}, "
            f"{self.traffic_seconds:.1f} s of traffic, {self.total_seconds:.1f} s in all, "
            f"{database}, proxy {'on' if self.config.proxied else 'off'}",
            f"workdir: {self.workdir}",
            "",
            "faults injected: "
            + ", ".join(f"{name} x{n}" for name, n in sorted(self.fault_counts().items())),
            "  (start, duration, longest gap between acknowledged enqueues overlapping it, fault)",
        ]
        lines += [
            f"  +{fault.started - self.history.started:6.1f}s "
            f"{fault.ended - fault.started:5.1f}s "
            f"{_seconds(fault.outage):>6}  {fault.name:<22} {fault.detail}"
            for fault in self.history.faults
        ]
        lines += [
            "",
            "write outage per fault type (the longest gap between acknowledged enqueues that",
            "overlaps the fault; s):",
            "",
            "| fault | count | median | max | no enqueue acknowledged after it |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {row['count']} | {_seconds(row['median'])} | {_seconds(row['max'])} "
            f"| {row['unended']} |"
            for name, row in self.outages().items()
        ]
        lines += ["", "| metric | value |", "|---|---:|"]
        lines += [f"| {name} | {value} |" for name, value in self.figures().items()]
        status = Counter(self.history.statuses)
        lines += ["", "answers: " + ", ".join(f"{k} x{n}" for k, n in sorted(status.items()))]
        if self.history.server_errors or self.unexpected_errors:
            lines += ["", f"500 ANSWERS (docs/api.md: never): {len(self.history.server_errors)}"]
            lines += [f"  {e}" for e in self.history.server_errors[:20]]
            lines += [f"  logged by {e}" for e in self.unexpected_errors[:20]]
        violations = self.violations
        lines.append("")
        lines.append(f"VIOLATIONS: {len(violations)}" if violations else "no violations")
        lines += [f"  {v}" for v in violations[:50]]
        if len(violations) > 50:
            lines.append(f"  ... and {len(violations) - 50} more")
        return "\n".join(lines)


def _seconds(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def run_checks(
    history: History,
    db: Mapping[tuple[str, str], DbRow],
    duplicated_rows: Iterable[tuple[str, str]] = (),
) -> list[CheckResult]:
    """Every check over a finished history and the final database state."""
    crashes = [window for f in history.faults if (window := f.crash_window) is not None]
    return [
        check_lost(history.enqueues, db, duplicated_rows),
        check_fencing(history.deliveries, db),
        check_exclusivity(history.deliveries, history.watcher_hits, crashes),
        check_duplicates(history.deliveries, crashes=crashes),
    ]


# --- processes and the database ---------------------------------------------------------------


def _log(config: CampaignConfig, message: str) -> None:
    if config.verbose:
        print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)


class ServerExited(Exception):
    """The server process ended while it was starting."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exited with {code}")
        self.code = code


class ServerProcess:
    """One ``sundial serve`` process (one worker) that can be killed and started again."""

    def __init__(self, name: str, port: int, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.port = port
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.up = False
        self.starts = 0
        self.failed_starts: list[int] = []
        """Exit codes of starts that ended before the server was ready."""
        self.base = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self, ready_within: float) -> float:
        """Start the process and wait (bounded) until /readyz answers 200; returns seconds.

        ``sundial serve`` exits when the database is away while it starts (its migration step
        cannot connect); like a supervisor, start it again (at most 5 times).
        """
        began = time.monotonic()
        for _ in range(5):
            try:
                await self._start_once(began + ready_within)
            except ServerExited as exited:
                self.failed_starts.append(exited.code)
                await asyncio.sleep(1.0)
                continue
            return time.monotonic() - began
        raise HarnessError(f"server {self.name} would not start:\n{self.log_tail()}")

    async def _start_once(self, deadline: float) -> None:
        with self.log_path.open("ab") as out:
            out.write(f"\n--- start #{self.starts + 1} at {time.ctime()} ---\n".encode())
            out.flush()
            self.process = await asyncio.to_thread(
                subprocess.Popen,
                [str(SUNDIAL), "serve"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=out,
            )
        self.starts += 1
        last = "no answer yet"
        async with httpx.AsyncClient(timeout=3.0) as probe:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServerExited(self.process.returncode)
                try:
                    answer = await probe.get(f"{self.base}/readyz")
                except httpx.HTTPError as error:
                    last = repr(error)
                else:
                    if answer.status_code == 200:
                        self.up = True
                        return
                    last = f"{answer.status_code} {answer.text[:300]}"
                await asyncio.sleep(0.1)
        raise HarnessError(
            f"server {self.name} not ready in time (last /readyz: {last}):\n{self.log_tail()}"
        )

    def kill(self) -> int:
        """kill -9; returns the pid that was killed."""
        assert self.process is not None
        self.up = False
        pid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        return pid

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        self.up = False
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.process.wait, 15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def tracebacks(self) -> int:
        try:
            return self.log_path.read_text(errors="replace").count("Traceback (most recent call")
        except OSError:
            return 0

    def unexpected_errors(self) -> list[str]:
        """The 500s this server logged ("unexpected error on …"), each with its exception."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for n, line in enumerate(lines):
            if "unexpected error on" not in line:
                continue
            exception = next(
                (
                    later
                    for later in lines[n + 1 : n + 200]
                    if later and not later.startswith((" ", "Traceback", "The above", "During"))
                ),
                "?",
            )
            found.append(f"{self.name}: {line.split(': ', 1)[-1]}: {exception[:300]}")
        return found


class DatabaseTarget(Protocol):
    """Where the campaign's database is: a :class:`LocalCluster` or a :class:`Formation`."""

    @property
    def libpq_dsn(self) -> str:
        """For the harness's own connections (a formation's: to the node accepting writes)."""
        ...

    @property
    def sqlalchemy_url(self) -> str:
        """For the servers and the migration."""
        ...


class Database:
    """Direct connections to the database (never through the proxy), for the harness only.

    Args:
        target: The cluster or formation.
        patience: Seconds :meth:`fetch` keeps retrying at least (beyond its ``tries``): longer
            than a failover for a formation.
    """

    def __init__(self, target: DatabaseTarget, *, patience: float = 0.0) -> None:
        self.target = target
        self.patience = patience

    @property
    def dsn(self) -> str:
        return (
            f"{self.target.libpq_dsn} application_name={HARNESS_APP} connect_timeout=3 "
            "options='-c statement_timeout=5000'"
        )

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def fetch(self, query: str, params: Sequence[Any] = (), tries: int = 20) -> list[Any]:
        """Run a query, retrying (bounded: ``tries`` times and ``patience`` seconds at least)
        while the database is restarting or failing over."""
        give_up = time.monotonic() + self.patience
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(10):
                    conn = await self.connect()
                    async with conn:
                        cursor = await conn.execute(query, params)
                        return await cursor.fetchall() if cursor.description else []
            except (psycopg.OperationalError, OSError, TimeoutError):
                if attempt >= tries and time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(0.25)

    async def live_count(self) -> int:
        rows = await self.fetch(
            "SELECT count(*) FROM messages m JOIN queues q ON q.id = m.queue_id "
            "WHERE q.namespace = %s AND m.state IN ('invisible', 'pending', 'running')",
            (NAMESPACE,),
        )
        return int(rows[0][0])

    async def final_state(
        self,
    ) -> tuple[dict[tuple[str, str], DbRow], list[tuple[str, str]]]:
        rows = await self.fetch(
            """
            SELECT q.name, m.id, m.state::text, m.attempts, m.lease_id::text, false
            FROM messages m JOIN queues q ON q.id = m.queue_id WHERE q.namespace = %s
            UNION ALL
            SELECT h.queue, h.id, h.state::text, h.attempts, NULL, true
            FROM message_history h WHERE h.namespace = %s
            """,
            (NAMESPACE, NAMESPACE),
        )
        db: dict[tuple[str, str], DbRow] = {}
        twice: list[tuple[str, str]] = []
        for queue, message_id, state, attempts, lease_id, archived in rows:
            key = (queue, message_id)
            if key in db:
                twice.append(key)
            db[key] = DbRow(state, attempts, lease_id, archived)
        return db, twice


class ExclusivityWatcher:
    """Polls the cluster directly for two running messages of one exclusive value."""

    QUERY = """
        SELECT queue_id, exclusive_value, count(*) FROM messages
        WHERE state = 'running' AND exclusive_value IS NOT NULL
        GROUP BY queue_id, exclusive_value HAVING count(*) > 1
    """

    def __init__(self, database: Database, history: History, interval: float = 0.05) -> None:
        self.database = database
        self.history = history
        self.interval = interval

    async def run(self, stop: asyncio.Event, deadline: float) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    async with asyncio.timeout(5):
                        if conn is None or conn.closed:
                            conn = await self.database.connect()
                        rows = await (await conn.execute(self.QUERY)).fetchall()
                    self.history.watcher_samples += 1
                    now = time.time()
                    self.history.watcher_hits += [
                        WatcherHit(now, queue_id, value, count) for queue_id, value, count in rows
                    ]
                except (psycopg.Error, OSError, TimeoutError):
                    self.history.watcher_errors += 1
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            await conn.close()
                    conn = None
                    await asyncio.sleep(0.2)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


# --- the workload -----------------------------------------------------------------------------


class Workload:
    """Producers and consumers against both servers, recording everything into the history."""

    def __init__(
        self,
        config: CampaignConfig,
        servers: list[ServerProcess],
        history: History,
        token: str,
        deadline: float,
    ) -> None:
        self.config = config
        self.servers = servers
        self.history = history
        self.rng = random.Random(config.seed)
        self.deadline = deadline
        self.clients = {
            s.name: httpx.AsyncClient(
                base_url=f"{s.base}/v1/namespaces/{NAMESPACE}/queues",
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(5.0, connect=1.0),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            )
            for s in servers
        }
        self.stop_producing = asyncio.Event()
        self.stop_consuming = asyncio.Event()
        self.draining = False
        self.stall_tasks: set[asyncio.Task[None]] = set()
        self._next = 0
        self._serial = 0
        self._tasks: list[asyncio.Task[None]] = []

    # --- plumbing

    def pick(self, avoid: str | None = None) -> ServerProcess | None:
        up = [s for s in self.servers if s.up and s.name != avoid] or [
            s for s in self.servers if s.up
        ]
        if not up:
            return None
        self._next += 1
        return up[self._next % len(up)]

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    async def request(
        self, server: ServerProcess, endpoint: str, path: str, body: dict[str, Any]
    ) -> tuple[int | None, Any, float, float]:
        """POST and record the answer's status; (None, None, …) when no answer came."""
        sent = time.time()
        try:
            answer = await self.clients[server.name].post(path, json=body)
        except httpx.HTTPError as error:
            self.history.statuses[f"{endpoint} {type(error).__name__}"] += 1
            return None, None, sent, time.time()
        received = time.time()
        self.history.statuses[f"{endpoint} {answer.status_code}"] += 1
        if answer.status_code >= 500 and answer.status_code != 503:
            self.history.server_errors.append(
                f"{time.strftime('%H:%M:%S')} {endpoint} on {server.name}: "
                f"{answer.status_code} {answer.text[:300]}"
            )
        try:
            data = answer.json()
        except ValueError:
            data = None
        return answer.status_code, data, sent, received

    def start(self) -> None:
        config = self.config
        for n in range(config.simple_producers):
            self._spawn(self.producer(SIMPLE, f"s{n}"))
        for n in range(config.exclusive_producers):
            self._spawn(self.producer(EXCLUSIVE, f"x{n}"))
        for _ in range(config.simple_consumers):
            self._spawn(self.consumer(SIMPLE))
        for _ in range(config.exclusive_consumers):
            self._spawn(self.consumer(EXCLUSIVE))

    def _spawn(self, coro: Any) -> None:
        self._tasks.append(asyncio.create_task(coro))

    async def stop(self) -> None:
        self.stop_producing.set()
        self.stop_consuming.set()
        tasks = [*self._tasks, *self.stall_tasks]
        _, pending = await asyncio.wait(tasks, timeout=20) if tasks else (set(), set())
        for task in pending:
            task.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise HarnessError("a workload task failed") from task.exception()
        for client in self.clients.values():
            await client.aclose()

    async def stop_producers(self) -> None:
        self.stop_producing.set()
        producers = [t for t in self._tasks if t.get_name().startswith("producer")]
        if producers:
            await asyncio.wait(producers, timeout=20)

    # --- producers

    def new_messages(self, queue: str, prefix: str, count: int) -> list[dict[str, Any]]:
        messages = []
        for _ in range(count):
            self._serial += 1
            message: dict[str, Any] = {
                "id": f"{prefix}-{self._serial}",
                "payload": {"n": self._serial},
                "priority": self.rng.randrange(1000),
            }
            if self.rng.random() < 0.1:
                message["delay_seconds"] = 1
            if queue == EXCLUSIVE:
                value = f"v{self.rng.randrange(self.config.exclusive_values)}"
                message["metadata"] = {EXCLUSIVE_KEY: value}
            messages.append(message)
        return messages

    async def producer(self, queue: str, prefix: str) -> None:
        asyncio.current_task().set_name(f"producer {prefix}")  # type: ignore[union-attr]
        while not self.stop_producing.is_set() and not self.expired():
            batch = self.new_messages(queue, prefix, self.rng.randint(1, self.config.batch_max))
            await self.enqueue(queue, batch)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.stop_producing.wait(),
                    self.rng.uniform(0.5, 1.5) * self.config.produce_interval,
                )

    async def enqueue(
        self,
        queue: str,
        messages: list[dict[str, Any]],
        first: ServerProcess | None = None,
        first_retry_delay: float = 0.0,
    ) -> list[str]:
        """Enqueue a batch, retrying with the same ids until a 2xx (bounded: 10 s, 40 tries).

        ``first`` is the server of the first attempt; ``first_retry_delay`` holds back the first
        retry. Returns the outcome of every attempt (``201``, ``503``, ``ReadError``, ...).
        """
        now = time.time()
        keys = [(queue, m["id"]) for m in messages]
        for key in keys:
            self.history.attempted.setdefault(key, now)
        outcomes: list[str] = []
        give_up = time.monotonic() + 10
        server = first
        for _ in range(40):
            if time.monotonic() > give_up or self.expired():
                break
            server = server or self.pick()
            if server is None:
                await asyncio.sleep(0.1)
                continue
            status, data, _, received = await self.request(
                server, "enqueue", f"/{queue}/messages", {"messages": messages}
            )
            outcomes.append(str(status) if status is not None else "no answer")
            if status is not None and 200 <= status < 300:
                for item in data["messages"]:
                    self.history.enqueues.append(
                        EnqueueAck(
                            queue, item["id"], item["created"], item["state"], server.name, received
                        )
                    )
                return outcomes
            if status is not None and status < 500 and status != 429:
                self.history.rejected.append(f"enqueue {queue}: {status} {data}")
                break
            server = self.pick(avoid=server.name)
            await asyncio.sleep(self.rng.uniform(0.05, 0.2) + first_retry_delay)
            first_retry_delay = 0.0
        self.history.unacknowledged.update(keys)
        return outcomes

    # --- consumers

    async def consumer(self, queue: str) -> None:
        lease = self.config.lease_seconds
        while not self.stop_consuming.is_set() and not self.expired():
            server = self.pick()
            if server is None:
                await asyncio.sleep(0.1)
                continue
            count = 20 if self.draining else self.rng.randint(1, 5)
            body = {"count": count, "lease_seconds": lease, "wait_seconds": 1}
            status, data, sent, received = await self.request(
                server, "dequeue", f"/{queue}/dequeue", body
            )
            if status != 200:
                await asyncio.sleep(self.rng.uniform(0.05, 0.2))
                continue
            deliveries = [
                Delivery(
                    queue=queue,
                    id=m["id"],
                    lease_id=m["lease_id"],
                    attempt=m["attempt"],
                    server=server.name,
                    requested=sent,
                    received=received,
                    lease_expires_at=_timestamp(m["lease_expires_at"]),
                    lease_seconds=lease,
                    exclusive_value=m["metadata"].get(EXCLUSIVE_KEY)
                    if queue == EXCLUSIVE
                    else None,
                )
                for m in data["messages"]
            ]
            self.history.deliveries += deliveries
            await self.process(queue, deliveries)

    def intent(self) -> str:
        if self.draining:
            return "drain"
        roll = self.rng.random()
        if roll < 0.08:
            return "fail"
        if roll < 0.12:
            return "die"
        if roll < 0.16 and len(self.stall_tasks) < 8:
            return "stall"
        return "complete"

    async def process(self, queue: str, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            d.intent = self.intent()
        for d in deliveries:
            if d.intent == "stall":
                task = asyncio.create_task(self.stall(queue, d))
                self.stall_tasks.add(task)
                task.add_done_callback(self.stall_tasks.discard)
        todo = [d for d in deliveries if d.intent in ("complete", "fail", "drain")]
        if not todo:
            return
        if self.draining:
            batch = True  # the drain only needs throughput
        else:
            batch = len(todo) > 1 and self.rng.random() < 0.25
            for _ in todo:
                await asyncio.sleep(self.rng.uniform(0.0, 0.08))  # the work
        if batch:
            todo = await self.ack_batch(queue, todo)
        for d in todo:
            await self.ack(queue, d, "fail" if d.intent == "fail" else "complete")

    async def stall(self, queue: str, d: Delivery) -> None:
        """A consumer that pauses past its lease (GC, swap...), then tries to complete."""
        await asyncio.sleep(max(0.0, d.lease_expires_at - time.time()) + self.rng.uniform(0.2, 0.6))
        await self.ack(queue, d, "complete")

    async def ack(self, queue: str, d: Delivery, kind: str) -> None:
        """Complete or fail one lease; retry only while the outcome is unknown (bounded)."""
        give_up = d.lease_expires_at + 1.0
        avoid = None
        for attempt in range(5):
            server = self.pick(avoid=avoid)
            if server is None:
                await asyncio.sleep(0.1)
                continue
            body: dict[str, Any] = {"lease_id": d.lease_id}
            if kind == "fail":
                body["error"] = "harness nack"
            status, data, sent, received = await self.request(
                server, kind, f"/{queue}/messages/{d.id}/{kind}", body
            )
            code = data.get("error", {}).get("code") if isinstance(data, dict) else None
            d.acks.append(
                AckAttempt(kind, sent, received if status else None, status, code, server.name)
            )
            if status is not None and status < 500 and status != 429:
                return
            if time.time() > give_up or self.expired():
                return
            avoid = server.name
            await asyncio.sleep(0.1 * (attempt + 1))

    async def ack_batch(self, queue: str, todo: list[Delivery]) -> list[Delivery]:
        """POST …/ack for all of them; returns those whose outcome stayed unknown."""
        server = self.pick()
        if server is None:
            return todo
        body = {
            "complete": [{"id": d.id, "lease_id": d.lease_id} for d in todo if d.intent != "fail"],
            "fail": [
                {"id": d.id, "lease_id": d.lease_id, "error": "harness nack"}
                for d in todo
                if d.intent == "fail"
            ],
        }
        status, data, sent, received = await self.request(server, "ack", f"/{queue}/ack", body)
        if status != 200:
            for d in todo:
                kind = "fail" if d.intent == "fail" else "complete"
                d.acks.append(AckAttempt(kind, sent, None, status, None, server.name, "batch"))
            return todo if status is None or status >= 500 else []
        results = data["results"]
        items = [d for d in todo if d.intent != "fail"] + [d for d in todo if d.intent == "fail"]
        for d, item in zip(items, results, strict=True):
            kind = "fail" if d.intent == "fail" else "complete"
            assert item["id"] == d.id
            status_code = 200 if item["ok"] else 409 if item["error"] == "lease_mismatch" else 404
            d.acks.append(
                AckAttempt(
                    kind, sent, received, status_code, item.get("error"), server.name, "batch"
                )
            )
        return []


# --- the faults -------------------------------------------------------------------------------


class Injector:
    """Injects the faults of :data:`FAULTS` and :data:`HA_FAULTS` into the running system.

    ``cluster`` is needed by ``pg_restart_immediate`` only, ``formation`` by the faults of
    :data:`HA_FAULTS` only; every other fault reaches the database through ``database``.
    """

    def __init__(
        self,
        config: CampaignConfig,
        database: Database,
        proxies: dict[str, FaultProxy],
        servers: list[ServerProcess],
        workload: Workload | None,
        history: History,
        *,
        cluster: LocalCluster | None = None,
        formation: Formation | None = None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.formation = formation
        self.database = database
        self.proxies = proxies
        self.servers = servers
        self.workload = workload
        self.history = history
        self.rng = random.Random(config.seed + 1)
        self.queue_ids: dict[str, int] = {}
        self.restarts: dict[str, asyncio.Task[None]] = {}
        self.event: FaultEvent | None = None
        self.formation_broken = False
        """A formation fault failed: the formation faults that follow are skipped."""

    async def inject(self, name: str) -> FaultEvent:
        if name in NEEDS_ALL_UP:
            await self.all_up()
        started = time.time()
        _log(self.config, f"fault {name} ...")
        self.event = event = FaultEvent(name, started, started, "")
        self.history.faults.append(event)
        try:
            event.detail = await getattr(self, name)()
        except FormationError as error:  # it did not recover: the campaign has failed
            self.formation_broken = True
            self.history.fault_violations.append(f"{name}: {error}")
            event.detail = f"FAILED: {str(error).splitlines()[0]}"
        event.ended = time.time()
        _log(self.config, f"fault {name}: {event.detail}")
        return event

    def server_by_pid(self, pid: int) -> ServerProcess | None:
        return next((s for s in self.servers if s.pid == pid and s.up), None)

    def restart_later(self, server: ServerProcess) -> None:
        """Start a killed server again in the background; the fault's detail gets its time."""
        event = self.event

        async def restart() -> None:
            await asyncio.sleep(0.3)
            ready = await server.start(self.config.server_start_timeout)
            if event is not None:
                event.detail += f"; {server.name} ready again in {ready:.1f} s"
            _log(self.config, f"server {server.name} ready again in {ready:.1f} s")

        self.restarts[server.name] = asyncio.create_task(restart())

    async def all_up(self) -> None:
        """Wait for the servers being restarted (bounded by their start timeout)."""
        tasks, self.restarts = list(self.restarts.values()), {}
        if tasks:
            await asyncio.gather(*tasks)

    # --- process faults

    async def kill_server(self) -> str:
        server = self.rng.choice([s for s in self.servers if s.up])
        pid = server.kill()
        self.restart_later(server)
        return f"kill -9 {server.name} (pid {pid})"

    async def kill_mid_batch(self) -> str:
        assert self.workload is not None, "kill_mid_batch needs the workload"
        server = self.rng.choice([s for s in self.servers if s.up])
        messages = self.workload.new_messages(SIMPLE, "mid", 400)
        ids = [m["id"] for m in messages]
        # The retry waits until the probe below is done, so that what the probe sees is the
        # killed request's doing only.
        batch = asyncio.create_task(
            self.workload.enqueue(SIMPLE, messages, first=server, first_retry_delay=1.0)
        )
        await asyncio.sleep(self.rng.uniform(0.005, 0.04))
        pid = server.kill()
        # All or nothing (guarantee 6): at any instant none or all of the batch is visible.
        seen = set()
        for _ in range(5):
            rows = await self.database.fetch(
                "SELECT count(*) FROM messages WHERE queue_id = %s AND id = ANY(%s)",
                (self.queue_ids[SIMPLE], ids),
            )
            seen.add(int(rows[0][0]))
            await asyncio.sleep(0.1)
        partial = seen - {0, len(ids)}
        if partial:
            self.history.fault_violations.append(
                f"kill_mid_batch: a 400-message batch was partially visible: {sorted(seen)}"
            )
        self.restart_later(server)
        outcomes = await asyncio.wait_for(batch, 30)
        created = sum(
            1 for e in self.history.enqueues if e.queue == SIMPLE and e.id in set(ids) and e.created
        )
        return (
            f"kill -9 {server.name} (pid {pid}) during a 400-message enqueue; attempts "
            f"{outcomes}; visible after the kill: {sorted(seen)}; created by the retry: {created}"
        )

    async def find_leader(self) -> tuple[ServerProcess, str] | None:
        """The server whose scheduler leads now (``scheduler_nodes``: is_leader, recent
        heartbeat; the node id holds the pid), waiting up to 10 s for one."""
        limit = time.monotonic() + 10
        while time.monotonic() < limit:
            rows = await self.database.fetch(
                "SELECT node_id FROM scheduler_nodes WHERE is_leader "
                "AND heartbeat_at > now() - interval '2.5 seconds' ORDER BY heartbeat_at DESC"
            )
            for (node_id,) in rows:
                server = self.server_by_pid(int(node_id.split(":")[-2]))
                if server is not None:
                    return server, node_id
            await asyncio.sleep(0.2)
        return None

    async def wait_for_successor(self, node: str, since: datetime) -> tuple[Any, float]:
        """Another node that led (heartbeat as leader) after ``since``; and the seconds waited."""
        began = time.monotonic()
        while time.monotonic() - began < max(10.0, self.config.leader_takeover_limit * 2):
            rows = await self.database.fetch(
                "SELECT node_id, heartbeat_at FROM scheduler_nodes WHERE is_leader "
                "AND node_id <> %s AND heartbeat_at >= %s ORDER BY heartbeat_at LIMIT 1",
                (node, since),
            )
            if rows:
                return rows[0], time.monotonic() - began
            await asyncio.sleep(0.1)
        return None, time.monotonic() - began

    def judge_takeover(self, fault: str, node: str, successor: Any, observed: float) -> str:
        if successor is None or observed > self.config.leader_takeover_limit:
            self.history.fault_violations.append(
                f"{fault}: no other scheduler led within {self.config.leader_takeover_limit} s"
                f" of losing {node} (observed {observed:.1f} s, successor {successor})"
            )
        if successor is None:
            return f"NO successor within {observed:.1f} s"
        return f"{successor[0]} led, seen after {observed:.2f} s"

    async def leader_loss(self) -> str:
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_loss: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        killed_at = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        pid = leader.kill()
        successor, observed = await self.wait_for_successor(node, killed_at)
        self.restart_later(leader)
        verdict = self.judge_takeover("leader_loss", node, successor, observed)
        return f"kill -9 leader {leader.name} (pid {pid}); {verdict}"

    async def pause_server(self) -> str:
        """Freeze a server that does not lead (a long GC pause, a frozen VM) past its leases."""
        for _ in range(2):
            found = await self.find_leader()
            leader = found[0] if found is not None else None
            candidates = [s for s in self.servers if s.up and s is not leader]
            if candidates:
                break
            await self.all_up()
        else:
            return "no server to pause"
        server = self.rng.choice(candidates)
        assert server.process is not None
        seconds = self.config.stall_seconds + 0.5
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        return f"SIGSTOP {server.name} (pid {server.process.pid}) for {seconds:.1f} s, then SIGCONT"

    async def leader_pause(self) -> str:
        """Freeze the leading server (SIGSTOP): its connections stay open. Another node must
        lead within the limit."""
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_pause: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        assert leader.process is not None
        since = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        os.kill(leader.process.pid, signal.SIGSTOP)
        try:
            successor, observed = await self.wait_for_successor(node, since)
            rest = self.config.partition_seconds - observed
            if rest > 0:
                await asyncio.sleep(rest)
        finally:
            os.kill(leader.process.pid, signal.SIGCONT)
        verdict = self.judge_takeover("leader_pause", node, successor, observed)
        return f"SIGSTOP of leader {leader.name} (pid {leader.process.pid}); {verdict}"

    async def leader_partition(self) -> str:
        """Cut the leading server alone off from the database: nothing flows between them, but
        the connections stay open, as in a network partition. Another node must lead."""
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_partition: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        proxy = self.proxies[leader.name]
        since = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        await asyncio.to_thread(proxy.stall)
        try:
            successor, observed = await self.wait_for_successor(node, since)
            rest = self.config.partition_seconds - observed
            if rest > 0:
                await asyncio.sleep(rest)
        finally:
            await asyncio.to_thread(proxy.resume)
        verdict = self.judge_takeover("leader_partition", node, successor, observed)
        return f"partitioned leader {leader.name} from the database; {verdict}"

    # --- database faults

    async def pg_restart_immediate(self) -> str:
        assert self.cluster is not None, "pg_restart_immediate needs the cluster"
        began = time.monotonic()
        await asyncio.to_thread(self.cluster.restart, "immediate")
        return f"pg_ctl restart -m immediate took {time.monotonic() - began:.1f} s"

    async def terminate_backends(self) -> str:
        """``pg_terminate_backend`` of every server connection (on a formation: the primary's).
        The servers connect over TCP; a formation's keeper holds a local (socket) one."""
        rows = await self.database.fetch(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend' AND application_name NOT LIKE 'faults-%%' "
            "AND client_addr IS NOT NULL"
        )
        return f"pg_terminate_backend of {rows[0][0]} server connections"

    # --- formation faults (``ha``)

    async def _healthy_formation(self) -> tuple[Formation, NodeState, NodeState]:
        """The formation once it is healthy (bounded), its primary and its standby."""
        assert self.formation is not None, "a formation fault needs the formation (ha=True)"
        nodes = await asyncio.to_thread(
            self.formation.wait_until,
            formation_healthy,
            self.config.rejoin_timeout,
            "a primary and a caught-up standby",
        )
        primary = next(n for n in nodes if n.reported == "primary")
        standby = next(n for n in nodes if n.reported == "secondary")
        return self.formation, primary, standby

    async def _rejoin(self, formation: Formation, name: str) -> float:
        """Start a stopped or killed node; seconds until it is a caught-up standby again.

        Raises:
            FormationError: not within ``rejoin_timeout`` (with the keepers' log tails).
        """
        began = time.monotonic()
        await asyncio.to_thread(formation.start_node, name)
        await asyncio.to_thread(
            formation.wait_until,
            formation_healthy,
            self.config.rejoin_timeout,
            f"{name} back as a caught-up standby",
        )
        return time.monotonic() - began

    async def _wait_writable(self, formation: Formation, began: float) -> float:
        """Wait until a node accepts writes again; ends the event's crash window there, and
        returns the seconds since ``began`` (a monotonic time)."""
        await asyncio.to_thread(formation.wait_writable, self.config.failover_timeout)
        if self.event is not None:
            self.event.crash = (self.event.started, time.time())
        return time.monotonic() - began

    async def switchover(self) -> str:
        """A planned switchover: the standby takes over, the primary follows it."""
        if self.formation_broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, standby = await self._healthy_formation()
        began = time.monotonic()

        async def promoted() -> float:
            await asyncio.to_thread(
                formation.wait_until,
                lambda nodes: any(n.writable and n.name == standby.name for n in nodes),
                self.config.failover_timeout,
                f"{standby.name} promoted",
            )
            return await self._wait_writable(formation, began)

        # The monitor is watched while pg_autoctl waits for the whole switchover: the crash
        # window ends as soon as the new primary accepts writes.
        _, writable = await asyncio.gather(
            asyncio.to_thread(formation.switchover, self.config.failover_timeout), promoted()
        )
        switched = time.monotonic() - began
        await self._healthy_formation()
        return (
            f"{primary.name} -> {standby.name}: {standby.name} accepts writes after "
            f"{writable:.1f} s; switchover complete after {switched:.1f} s"
        )

    async def kill_primary(self) -> str:
        """SIGKILL of the primary's keeper and PostgreSQL (the machine is lost); the standby must
        be promoted, and the killed node must rejoin as the standby once started again."""
        if self.formation_broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, _ = await self._healthy_formation()
        began = time.monotonic()
        await asyncio.to_thread(formation.kill_node, primary.name)
        nodes = await asyncio.to_thread(
            formation.wait_until,
            lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
            self.config.failover_timeout,
            f"a new primary after the loss of {primary.name}",
        )
        promoted = next(n.name for n in nodes if n.writable)
        writable = await self._wait_writable(formation, began)
        rejoined = await self._rejoin(formation, primary.name)
        return (
            f"SIGKILL {primary.name}; {promoted} accepts writes after {writable:.1f} s; "
            f"{primary.name} started again, a caught-up standby after {rejoined:.1f} s"
        )

    async def stop_standby(self) -> str:
        """Stop the standby cleanly; the primary runs alone (``wait_primary``: no synchronous
        replication) for ``lone_primary_seconds``; then the standby comes back."""
        if self.formation_broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, standby = await self._healthy_formation()
        began = time.monotonic()
        await asyncio.to_thread(formation.stop_node, standby.name)
        await asyncio.to_thread(
            formation.wait_until,
            lambda nodes: any(
                n.name == primary.name and n.settled and n.reported == "wait_primary" for n in nodes
            ),
            self.config.failover_timeout,
            f"{primary.name} alone (wait_primary)",
        )
        alone = time.monotonic() - began
        await asyncio.sleep(self.config.lone_primary_seconds)
        rejoined = await self._rejoin(formation, standby.name)
        return (
            f"stopped standby {standby.name}; {primary.name} alone (wait_primary) after "
            f"{alone:.1f} s, for {self.config.lone_primary_seconds:.1f} s; {standby.name} a "
            f"caught-up standby again after {rejoined:.1f} s"
        )

    # --- network faults

    async def proxy_latency(self) -> str:
        for proxy in self.proxies.values():
            proxy.set_latency(self.config.latency)
        await asyncio.sleep(self.config.latency_seconds)
        for proxy in self.proxies.values():
            proxy.set_latency(0)
        return (
            f"+{self.config.latency * 1000:.0f} ms each way for {self.config.latency_seconds:.1f} s"
        )

    async def proxy_cut(self) -> str:
        cut = 0
        for proxy in self.proxies.values():
            cut += await asyncio.to_thread(proxy.cut)
        return f"reset {cut} database connections"

    async def proxy_stall(self) -> str:
        for proxy in self.proxies.values():
            await asyncio.to_thread(proxy.stall)
        try:
            await asyncio.sleep(self.config.stall_seconds)
        finally:
            for proxy in self.proxies.values():
                await asyncio.to_thread(proxy.resume)
        return f"nothing forwarded for {self.config.stall_seconds:.1f} s (longer than a lease)"


def formation_healthy(nodes: Sequence[NodeState]) -> bool:
    """One primary with synchronous replication, and the other node its caught-up standby."""
    roles = sorted(node.reported for node in nodes if node.settled)
    return len(nodes) == len(NODE_NAMES) and roles == ["primary", "secondary"]


# --- the campaign -----------------------------------------------------------------------------


def schedule(config: CampaignConfig) -> list[str]:
    """The faults to inject: the configured list, or shuffled rounds of it with ``repeat``.

    The proxy faults are left out when there is no proxy, and :data:`NOT_IN_HA` with ``ha``.

    Raises:
        ValueError: an unknown fault, or a formation fault without ``ha``.
    """
    chosen = config.faults
    if chosen is None:
        chosen = HA_CAMPAIGN_FAULTS if config.ha else FAULTS
    unknown = set(chosen) - set(FAULTS) - set(HA_FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS + HA_FAULTS}")
    if not config.ha and set(chosen) & set(HA_FAULTS):
        raise ValueError(f"{sorted(set(chosen) & set(HA_FAULTS))} need a formation (ha=True)")
    left_out = NOT_IN_HA if config.ha else frozenset() if config.use_proxy else PROXY_FAULTS
    faults = [f for f in chosen if f not in left_out]
    if not config.repeat:
        return faults
    rng = random.Random(config.seed + 2)
    rounds = []
    for _ in range(1000):
        batch = list(faults)
        rng.shuffle(batch)
        rounds += batch
    return rounds


class Campaign:
    """One run: set up, traffic + faults, drain, check (see the module docstring)."""

    def __init__(self, config: CampaignConfig) -> None:
        self.config = config
        self.history = History()
        self.workdir = config.workdir or Path(tempfile.mkdtemp(prefix="sundial-faults-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)  # the cluster runs as an unprivileged user when we are root
        self.cluster: LocalCluster | None = None
        self.formation: Formation | None = None
        self.target: DatabaseTarget
        if config.ha:
            self.formation = self.target = Formation(self.workdir / "formation")
            self.database = Database(self.target, patience=config.database_patience)
        else:
            self.cluster = self.target = LocalCluster(self.workdir / "cluster")
            self.database = Database(self.target)
        self.proxies: dict[str, FaultProxy] = {}
        self.servers: list[ServerProcess] = []

    async def run(self) -> Report:
        config = self.config
        began = time.monotonic()
        hard_deadline = began + config.duration + config.drain_timeout + 240
        try:
            await self.setup()
            token = await self.create_queues()
            self.history.started = time.time()
            workload = Workload(config, self.servers, self.history, token, hard_deadline)
            injector = Injector(
                config,
                self.database,
                self.proxies,
                self.servers,
                workload,
                self.history,
                cluster=self.cluster,
                formation=self.formation,
            )
            injector.queue_ids = await self.queue_ids()
            stop_watcher = asyncio.Event()
            watcher = asyncio.create_task(
                ExclusivityWatcher(self.database, self.history).run(stop_watcher, hard_deadline)
            )
            workload.start()
            traffic_began = time.monotonic()
            try:
                await self.inject(injector, traffic_began)
                # Traffic goes on after the last fault for `gap` at least: its aftermath (and
                # the end of its write outage) is observed too.
                remaining = config.duration - (time.monotonic() - traffic_began)
                await asyncio.sleep(max(remaining, config.gap))
                traffic_seconds = time.monotonic() - traffic_began
                _log(config, "stopping producers, draining")
                await workload.stop_producers()
                drained = await self.drain(workload)
                await injector.all_up()
            finally:
                await workload.stop()
                stop_watcher.set()
                await asyncio.wait_for(watcher, 10)
            db, twice = await self.database.final_state()
            measure_outages(self.history)
            checks = run_checks(self.history, db, twice)
            try:
                self.history.save(self.workdir / "history.json")
            except (OSError, TypeError, ValueError) as error:  # the report matters more
                _log(config, f"could not save the history: {error!r}")
            return Report(
                config=config,
                history=self.history,
                checks=checks,
                traffic_seconds=traffic_seconds,
                total_seconds=time.monotonic() - began,
                workdir=self.workdir,
                drained=drained,
                server_log_errors=sum(s.tracebacks() for s in self.servers),
                failed_starts=sum(len(s.failed_starts) for s in self.servers),
                unexpected_errors=[e for s in self.servers for e in s.unexpected_errors()],
            )
        finally:
            await self.teardown()

    async def inject(self, injector: Injector, began: float) -> None:
        for name in schedule(self.config):
            elapsed = time.monotonic() - began
            if self.config.repeat and elapsed + self.config.gap + 8 > self.config.duration:
                break
            await asyncio.sleep(self.config.gap)
            await injector.inject(name)

    async def drain(self, workload: Workload) -> bool:
        """Consumers only complete now; wait (bounded) until nothing is live."""
        workload.draining = True
        limit = time.monotonic() + self.config.drain_timeout
        while time.monotonic() < limit:
            live = await self.database.live_count()
            if live == 0 and not workload.stall_tasks:
                _log(self.config, "drained")
                return True
            _log(self.config, f"draining: {live} live")
            await asyncio.sleep(0.5)
        return False

    async def setup(self) -> None:
        config = self.config
        if self.formation is not None:
            _log(config, f"starting a pg_auto_failover formation in {self.workdir}")
            await asyncio.to_thread(self.formation.up)
        else:
            assert self.cluster is not None
            _log(config, f"starting PostgreSQL in {self.workdir}")
            await asyncio.to_thread(self.cluster.start)
        await asyncio.to_thread(migrate.upgrade, self.target.sqlalchemy_url)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SUNDIAL_")}
        for name in ("a", "b"):
            url = self.database_url_for(name)
            port = free_port()
            env = {
                **base_env,
                "SUNDIAL_DATABASE_URL": url,
                "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                "SUNDIAL_PORT": str(port),
                "SUNDIAL_WORKERS": "1",
                "SUNDIAL_SCHEDULER_TICK_SECONDS": "0.05",
                "SUNDIAL_LEADER_POLL_SECONDS": "0.5",
                "SUNDIAL_SCHEDULER_CLEANUP_SECONDS": "2",
                "SUNDIAL_DATA_DIR": str(self.workdir / f"data-{name}"),
            }
            self.servers.append(ServerProcess(name, port, env, self.workdir / f"server-{name}.log"))
        _log(config, "starting servers")
        await asyncio.gather(*(s.start(config.server_start_timeout) for s in self.servers))

    def database_url_for(self, name: str) -> str:
        """Server ``name``'s database URL: the formation's (every node; writes go to the
        primary), or the cluster's, through a fault proxy of its own when proxied (this starts
        that proxy)."""
        if self.formation is not None:
            return self.formation.sqlalchemy_url
        assert self.cluster is not None
        db_port = self.cluster.port
        if self.config.proxied:
            proxy = self.proxies[name] = FaultProxy("127.0.0.1", db_port)
            proxy.start()
            db_port = proxy.port
        user, database = self.cluster.user, self.cluster.database
        return f"postgresql+psycopg://{user}@127.0.0.1:{db_port}/{database}"

    async def create_queues(self) -> str:
        """The namespace, a token for it, and the two queues; returns the token."""
        base = self.servers[0].base
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=f"{base}/v1", headers=admin, timeout=10) as http:
            answer = await http.post("/namespaces", json={"name": NAMESPACE})
            assert answer.status_code == 201, answer.text
            answer = await http.post(f"/namespaces/{NAMESPACE}/tokens", json={"label": "faults"})
            assert answer.status_code == 201, answer.text
            token: str = answer.json()["token"]
            common = {"lease_seconds": self.config.lease_seconds, "max_attempts": 10}
            queues = {
                SIMPLE: {
                    "kind": "simple",
                    "retention_seconds": self.config.simple_retention_seconds,
                    **common,
                },
                EXCLUSIVE: {"kind": "exclusive", "exclusive_key": EXCLUSIVE_KEY, **common},
            }
            for name, body in queues.items():
                answer = await http.put(f"/namespaces/{NAMESPACE}/queues/{name}", json=body)
                assert answer.status_code == 201, answer.text
        return token

    async def queue_ids(self) -> dict[str, int]:
        rows = await self.database.fetch(
            "SELECT name, id FROM queues WHERE namespace = %s", (NAMESPACE,)
        )
        return dict(rows)

    async def teardown(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers), return_exceptions=True)
        for proxy in self.proxies.values():
            proxy.stop()
        if self.formation is not None:
            await asyncio.to_thread(self._stop_formation, self.formation)
        elif self.cluster is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.cluster.stop, "fast")

    @staticmethod
    def _stop_formation(formation: Formation) -> None:
        """Stop every keeper (they run detached); SIGKILL whatever did not stop. The data and
        the logs stay for the post-mortem."""
        with contextlib.suppress(FormationError):
            formation.down(timeout=30)
        for name in ("monitor", *NODE_NAMES):
            formation.kill_node(name)


def run_campaign(config: CampaignConfig) -> Report:
    """Run a whole campaign (blocking) and return its report.

    The working directory (cluster, server logs, ``history.json``) is removed afterwards when the
    campaign found no violation and no 500 and ``keep_workdir`` is false; otherwise it is kept for
    the post-mortem.
    """
    report = asyncio.run(Campaign(config).run())
    if not report.needs_post_mortem and not config.keep_workdir:
        shutil.rmtree(report.workdir, ignore_errors=True)
    return report
