"""The fault-injection checkers fail when their guarantee is broken, and only then.

A checker that never fires proves nothing. Here each one is fed synthetic histories, broken
(a lost id, an overlapping exclusive interval, a 200 on a stale lease, a redelivery of a completed
message...) and sound (the same history with the fault removed, and the tricky cases a naive
checker would flag). ``test_checks_on_a_broken_database.py`` then breaks the system for real.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults.checks import (
    check_duplicates,
    check_exclusivity,
    check_fencing,
    check_lost,
    run_checks,
)
from tests.faults.config import EXCLUSIVE, SIMPLE, CampaignConfig
from tests.faults.history import AckAttempt, DbRow, Delivery, EnqueueAck, History, WatcherHit
from tests.faults.report import Report

T0 = 1_800_000_000.0
LEASE = 2


def delivery(
    message_id: str = "m1",
    lease: str = "lease-1",
    *,
    at: float = 0.0,
    attempt: int = 1,
    value: str | None = None,
    acks: list[AckAttempt] | None = None,
    intent: str = "complete",
) -> Delivery:
    """A lease received at T0+at, granted just before, expiring LEASE seconds after the grant."""
    return Delivery(
        queue=EXCLUSIVE if value is not None else SIMPLE,
        id=message_id,
        lease_id=lease,
        attempt=attempt,
        server="a",
        requested=T0 + at - 0.01,
        received=T0 + at,
        lease_expires_at=T0 + at - 0.005 + LEASE,
        lease_seconds=LEASE,
        exclusive_value=value,
        intent=intent,
        acks=acks or [],
    )


def ack(kind: str, at: float, status: int | None, code: str | None = None) -> AckAttempt:
    return AckAttempt(kind, T0 + at, None if status is None else T0 + at + 0.01, status, code)


def completed(message_id: str, lease: str, attempts: int = 1) -> DbRow:
    return DbRow("completed", attempts, lease)


# --- lost -------------------------------------------------------------------------------------


def test_lost_fires_on_an_acknowledged_id_missing_from_the_database() -> None:
    enqueues = [EnqueueAck(SIMPLE, i, True, "pending", "a", T0) for i in ("m1", "m2", "m3")]
    db = {(SIMPLE, "m1"): completed("m1", "l1"), (SIMPLE, "m3"): DbRow("pending", 0, None)}
    result = check_lost(enqueues, db)
    assert not result.ok
    assert result.counts["lost"] == 1
    assert result.violations == ["acknowledged enqueue simple/m2 is in no table: lost"]
    assert result.counts["live"] == 1

    db[(SIMPLE, "m2")] = DbRow("errored", 10, None, archived=True)  # in history: not lost
    assert check_lost(enqueues, db).ok


def test_lost_fires_on_an_id_created_twice_or_stored_twice() -> None:
    enqueues = [
        EnqueueAck(SIMPLE, "m1", True, "pending", "a", T0),
        EnqueueAck(SIMPLE, "m1", False, "pending", "b", T0 + 1),  # an idempotent retry: fine
    ]
    db = {(SIMPLE, "m1"): completed("m1", "l1")}
    assert check_lost(enqueues, db).ok
    enqueues.append(EnqueueAck(SIMPLE, "m1", True, "pending", "b", T0 + 2))
    assert "reported created 2 times" in check_lost(enqueues, db).violations[0]
    assert not check_lost(enqueues[:1], db, duplicated_rows=[(SIMPLE, "m1")]).ok


# --- fencing ----------------------------------------------------------------------------------


def test_fencing_fires_on_a_200_for_a_stale_lease() -> None:
    late = LEASE + 0.5
    d = delivery(acks=[ack("complete", late, 200)])
    result = check_fencing([d], {(SIMPLE, "m1"): completed("m1", "lease-1")})
    assert not result.ok
    assert result.counts["stale_accepted"] == 1
    assert "after the lease expired was accepted" in result.violations[0]

    # The same late complete refused as the API says is the guarantee holding.
    d = delivery(acks=[ack("complete", late, 409, "lease_mismatch")])
    result = check_fencing([d], {(SIMPLE, "m1"): DbRow("pending", 1, "lease-1")})
    assert result.ok
    assert result.counts["stale_refused"] == 1

    # A late *fail* accepted is as stale as a late complete.
    d = delivery(acks=[ack("fail", late, 200)])
    assert not check_fencing([d], {(SIMPLE, "m1"): DbRow("pending", 1, "lease-1")}).ok

    # Refused, but with the wrong code, is a contract violation too.
    d = delivery(acks=[ack("complete", late, 409, "invalid_state")])
    assert not check_fencing([d], {(SIMPLE, "m1"): DbRow("pending", 1, "lease-1")}).ok


def test_fencing_allows_the_idempotent_retry_of_a_complete_whose_answer_was_lost() -> None:
    d = delivery(acks=[ack("complete", 1.0, None), ack("complete", LEASE + 0.5, 200)])
    result = check_fencing([d], {(SIMPLE, "m1"): completed("m1", "lease-1")})
    assert result.ok, result.violations
    assert result.counts["late_idempotent_retries"] == 1

    # ...but not when the lost attempt was itself sent after the lease expired.
    d = delivery(acks=[ack("complete", LEASE + 0.1, None), ack("complete", LEASE + 0.5, 200)])
    assert not check_fencing([d], {(SIMPLE, "m1"): completed("m1", "lease-1")}).ok


def test_fencing_fires_when_the_database_disagrees_with_an_acknowledged_complete() -> None:
    d = delivery(acks=[ack("complete", 0.5, 200)])
    assert check_fencing([d], {(SIMPLE, "m1"): completed("m1", "lease-1")}).ok
    # Completed, but by another lease: the 200 was given to a lease that did not win.
    result = check_fencing([d], {(SIMPLE, "m1"): completed("m1", "lease-2", 2)})
    assert "completed by lease lease-2" in result.violations[0]
    # Not completed at all: the acknowledged change was lost (durability).
    assert not check_fencing([d], {(SIMPLE, "m1"): DbRow("pending", 1, "lease-1")}).ok
    assert not check_fencing([d], {}).ok
    # Moved to history (no lease kept): the attempt number identifies the completing lease.
    assert check_fencing([d], {(SIMPLE, "m1"): DbRow("completed", 1, None, True)}).ok
    assert not check_fencing([d], {(SIMPLE, "m1"): DbRow("completed", 2, None, True)}).ok


def test_fencing_fires_when_two_leases_both_complete_one_message() -> None:
    first = delivery(acks=[ack("complete", 0.5, 200)])
    second = delivery(lease="lease-2", at=3.0, attempt=2, acks=[ack("complete", 3.5, 200)])
    result = check_fencing([first, second], {(SIMPLE, "m1"): completed("m1", "lease-2", 2)})
    assert any("by 2 different leases" in v for v in result.violations)


# --- exclusivity ------------------------------------------------------------------------------


def test_exclusivity_fires_on_overlapping_intervals_of_one_value() -> None:
    a = delivery("m1", "l1", at=0.0, value="v", acks=[ack("complete", 1.0, 200)])
    b = delivery("m2", "l2", at=0.5, value="v", acks=[ack("complete", 1.2, 200)])
    result = check_exclusivity([a, b])
    assert not result.ok
    assert result.counts["overlaps"] == 1
    assert "valid for 0.500 s more" in result.violations[0]

    # Other values may run at the same time.
    b.exclusive_value = "w"
    assert check_exclusivity([a, b]).ok


def test_exclusivity_counts_only_the_time_a_lease_was_valid() -> None:
    # b is received after a's complete was sent: a's lease may have ended then. No overlap.
    a = delivery("m1", "l1", at=0.0, value="v", acks=[ack("complete", 1.0, 200)])
    b = delivery("m2", "l2", at=1.05, value="v")
    assert check_exclusivity([a, b]).ok
    # a's consumer died: the value is held until a's lease expires, then b may have it.
    a = delivery("m1", "l1", at=0.0, value="v", intent="die")
    b = delivery("m2", "l2", at=LEASE + 0.1, value="v")
    assert check_exclusivity([a, b]).ok
    # ...a stalled consumer whose late complete was refused held it only until expiry, too.
    a.acks = [ack("complete", LEASE + 0.5, 409, "lease_mismatch")]
    assert check_exclusivity([a, b]).ok
    # A complete whose answer was lost may have ended the lease when it was sent.
    a.acks = [ack("complete", 0.3, None)]
    b = delivery("m2", "l2", at=0.4, value="v")
    assert check_exclusivity([a, b]).ok
    # But b received while a was certainly valid is a violation.
    b = delivery("m2", "l2", at=0.2, value="v")
    assert not check_exclusivity([a, b]).ok


def test_exclusivity_ignores_a_lease_dead_on_arrival() -> None:
    a = delivery("m1", "l1", at=0.0, value="v", intent="die")
    late = delivery("m2", "l2", at=0.5, value="v")
    late.lease_expires_at = late.received - 0.1  # the answer arrived after the lease expired
    assert late.valid_interval() is None
    assert check_exclusivity([a, late]).ok


def test_exclusivity_fires_on_a_watcher_hit() -> None:
    result = check_exclusivity([], [WatcherHit(T0, 7, "v", 2)])
    assert result.violations == ["watcher: 2 running messages of value 'v' in queue 7"]


# --- duplicates -------------------------------------------------------------------------------


def test_duplicates_are_counted_after_a_fault_and_refused_otherwise() -> None:
    died = delivery("m1", "l1", intent="die")
    again = delivery("m1", "l2", at=LEASE + 0.2, attempt=2, acks=[ack("complete", 2.5, 200)])
    result = check_duplicates([died, again])
    assert result.ok, result.violations
    assert result.counts["duplicated"] == 1
    assert result.counts["duplicated_after_consumer_die"] == 1

    nacked = delivery("m2", "l3", acks=[ack("fail", 0.3, 200)])
    retried = delivery("m2", "l4", at=0.5, attempt=2)
    result = check_duplicates([nacked, retried])
    assert result.ok
    assert (result.counts["duplicated"], result.counts["retries_after_nack"]) == (0, 1)

    # Delivered again after an acknowledged complete: a completed message came back.
    done = delivery("m3", "l5", acks=[ack("complete", 0.3, 200)])
    result = check_duplicates([done, delivery("m3", "l6", at=LEASE + 1, attempt=2)])
    assert "after lease l5 completed it" in result.violations[0]

    # Delivered again while the first lease was still valid: two valid leases at once.
    held = delivery("m4", "l7")
    result = check_duplicates([held, delivery("m4", "l8", at=0.5, attempt=2)])
    assert "was valid for" in result.violations[0]

    # Every lease has its own attempt number; a gap is a lease whose answer never arrived.
    result = check_duplicates([died, delivery("m1", "l9", at=LEASE + 0.2, attempt=1)])
    assert "two leases (l1, l9) for attempt 1" in result.violations[0]
    result = check_duplicates([died, delivery("m1", "l9", at=LEASE + 5, attempt=3)])
    assert result.ok
    assert result.counts["unseen_leases"] == 1


def test_duplicates_follow_the_grant_order_not_the_arrival_order() -> None:
    # Lease 1's answer was held up by a paused server and arrived after lease 2's (it was dead
    # on arrival); lease 2 was granted after lease 1 expired and completed. Not a violation.
    first = delivery("m1", "l1", attempt=1)
    first.received = T0 + LEASE + 1.5
    second = delivery("m1", "l2", at=LEASE + 0.2, attempt=2, acks=[ack("complete", 2.5, 200)])
    result = check_duplicates([second, first])
    assert result.ok, result.violations
    assert result.counts["duplicated"] == 1


def test_a_lease_forgotten_by_a_database_crash_is_counted_not_flagged() -> None:
    # Claims commit asynchronously: a crash may forget a lease already handed out, and the
    # message is leased again with the same attempt number while the first lease looks unexpired.
    crash = (T0 + 0.3, T0 + 0.8)
    first = delivery("m1", "l1", value="v")
    again = delivery("m1", "l2", at=1.0, attempt=1, value="v", acks=[ack("complete", 1.5, 200)])
    result = check_duplicates([first, again], crashes=[crash])
    assert result.ok, result.violations
    assert result.counts["forgotten_leases"] == 1
    assert result.counts["duplicated_after_db_crash"] == 1
    # Without a crash in between, the same history is two leases at once.
    assert len(check_duplicates([first, again]).violations) == 2

    # The injector's crash window opens a little before PostgreSQL dies: a lease granted inside
    # it may be forgotten too.
    result = check_duplicates([first, again], crashes=[(T0 - 0.1, T0 + 0.5)])
    assert result.ok, result.violations
    assert result.counts["forgotten_leases"] == 1

    # The database held one lease at a time; the consumer of l1 saw its value shared.
    other = delivery("m2", "l3", at=1.0, value="v")
    result = check_exclusivity([first, other], crashes=[crash])
    assert result.ok, result.violations
    assert result.counts["overlaps_through_forgotten_leases"] == 1
    assert not check_exclusivity([first, other]).ok


def test_report_collects_every_violation() -> None:
    history = History(started=T0)
    history.enqueues.append(EnqueueAck(SIMPLE, "m1", True, "pending", "a", T0))
    history.deliveries.append(delivery(acks=[ack("complete", LEASE + 1, 200)]))
    history.fault_violations.append("leader_loss: no other scheduler led within 5 s")
    db = {(SIMPLE, "m1"): completed("m1", "lease-1")}
    report = Report(CampaignConfig(), history, run_checks(history, db), 1, 1, Path("."), True)
    assert not report.ok
    assert [v.split("]")[0] for v in report.violations] == ["[fencing", "[faults"]
    assert report.figures()["stale completions accepted"] == 1
    assert "VIOLATIONS: 2" in report.format()


def test_history_is_saved_for_the_post_mortem(tmp_path: Path) -> None:
    history = History(started=T0)
    history.attempted[(SIMPLE, "m1")] = T0
    history.unacknowledged.add((SIMPLE, "m2"))
    history.statuses["complete 200"] += 2
    history.deliveries.append(delivery(acks=[ack("complete", 0.5, 200)]))
    history.save(tmp_path / "history.json")
    saved = json.loads((tmp_path / "history.json").read_text())
    assert saved["statuses"] == {"complete 200": 2}
    assert saved["attempted"] == [[SIMPLE, "m1", T0]]
    assert saved["deliveries"][0]["acks"][0]["status"] == 200
