"""The checks of the guarantees: plain functions over a finished history and the final rows.

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

The checkers take no process and no database, so they can be fed synthetic broken histories
(``tests/faults/test_checks_detect_breakage.py``).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.faults.history import Crash, DbRow, Delivery, EnqueueAck, History, WatcherHit

LIVE_STATES = frozenset({"invisible", "pending", "running"})
TERMINAL_STATES = frozenset({"completed", "canceled", "errored"})
CLOCK_EPSILON = 0.02
"""Seconds of slack when comparing a client send time with a server lease expiry."""


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
