"""The message state machine: the one place its rules live.

::

                   visible_at reached
    invisible ────────┬─────────────────────► pending
     │  ▲             │                        │   ▲
     │  │             │ dequeue, once due      │   │ fail / lease expiry with attempts left,
     │  │             │                        │   │ no retry delay
     │  │             │                dequeue │   │
     │  │             │                        │   │
     │  │             │                        ▼   │    complete
     │  │             └─────────────────────► running ───────────► completed
     │  │                                     │  │ │▲
     │  │ fail / lease expiry with attempts   │  │ └┘ extend
     │  └─────────────────────────────────────┼──┘
     │    left and a retry delay              │ fail / lease expiry,
     ▼ cancel / expires_at                    ▼ attempts used up
    canceled (from any live state)          errored

    requeue: errored / canceled ──► pending, or invisible with a delay (attempts reset)
    redrive: errored ──► canceled, and a copy pending in the queue's dead_letter_queue
    update:  invisible ◄──► pending, as visible_at changes
    replace: invisible / pending ──► invisible / pending (an enqueue replacing a waiting message)
    lease by id: as dequeue, for one named message

Every state change in the store is a single guarded statement. Most guard with
``WHERE state = ANY(:from)``, whose ``:from`` comes from :func:`allowed_from`; the claim names its
sources as literals, rendered from :data:`CLAIM` when its SQL is built, because PostgreSQL uses
a partial index (``WHERE state = 'pending'``) only for a literal. So the SQL guards and this table
cannot drift. Where a transition has several possible targets (fail: retry or dead-letter), the
statement chooses among :func:`targets` of the event by the rule of :func:`retry_target` and
:func:`backoff_seconds`; a test runs those statements and holds them to these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class State(StrEnum):
    """A message's state. The last three are terminal."""

    INVISIBLE = "invisible"
    """Enqueued with a future ``visible_at`` (a delay, or a retry backoff); not dequeueable yet."""

    PENDING = "pending"
    """Visible and waiting for a consumer; dequeue serves these lowest priority first."""

    RUNNING = "running"
    """Leased to one consumer until ``lease_expires_at``; only the holder of ``lease_id`` acts."""

    COMPLETED = "completed"
    """Finished successfully (terminal)."""

    CANCELED = "canceled"
    """Canceled by a client, or expired (``last_error = 'expired'``) (terminal)."""

    ERRORED = "errored"
    """Failed on its last allowed attempt: a dead letter that may be requeued (terminal)."""

    @property
    def is_terminal(self) -> bool:
        """Whether no further work happens to a message in this state."""
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({State.COMPLETED, State.CANCELED, State.ERRORED})
LIVE_STATES = frozenset({State.INVISIBLE, State.PENDING, State.RUNNING})
DEAD_LETTER_STATES: tuple[State, ...] = (State.ERRORED, State.CANCELED)
"""The terminal states a message can be requeued from (``Event.REQUEUE``): dead letters, in the
order they are listed to operators."""


class Event(StrEnum):
    """What can happen to a message."""

    PROMOTE = "promote"
    """``visible_at`` is reached (scheduler, or a dequeue that finds it due)."""
    DEQUEUE = "dequeue"
    """The claim: a consumer is granted a lease (``attempts += 1``, a new ``lease_id``) on a
    pending message, or on an invisible one whose ``visible_at`` has passed (see :data:`CLAIM`)."""
    EXTEND = "extend"
    """The lease holder pushes ``lease_expires_at`` forward (heartbeat)."""
    COMPLETE = "complete"
    """The lease holder reports success."""
    FAIL = "fail"
    """The lease holder reports failure: retried while attempts remain, else errored."""
    LEASE_EXPIRE = "lease_expire"
    """``lease_expires_at`` passed without complete/fail: treated like a fail (scheduler)."""
    CANCEL = "cancel"
    """A client cancels (a running message needs its ``lease_id`` or ``force``)."""
    EXPIRE = "expire"
    """``expires_at`` passed before the message finished (scheduler); ``last_error='expired'``."""
    REQUEUE = "requeue"
    """A dead letter is sent back for another round, attempts reset."""
    UPDATE = "update"
    """A client changes priority, payload, metadata or ``visible_at`` of a waiting message."""
    REDRIVE = "redrive"
    """A dead letter of a queue with a ``dead_letter_queue`` goes there (scheduler): canceled
    here (``last_error = 'dead-lettered to <queue>'``), a copy pending there, attempts reset."""
    LEASE_BY_ID = "lease_by_id"
    """A consumer leases one message it names (``POST …/messages/{id}/lease``): the claim's
    lease on that message alone, from the claim's sources (:data:`CLAIM`: pending, or invisible
    once its ``visible_at`` has passed); counted as a dequeue."""
    REPLACE = "replace"
    """An enqueue with ``on_conflict = replace`` finds the id taken by a waiting message: the
    message takes the new payload, metadata, priority, visibility, expiry and overrides, and is
    invisible or pending as its new ``visible_at`` says."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The states of the claim (``Event.DEQUEUE``), which reads its two sources separately."""

    ready: State
    """Claimed as it is, best ``(priority, seq)`` first."""
    due: State
    """Claimed once its ``visible_at`` has passed: a message that ``Event.PROMOTE`` would make
    ready and the scheduler has not yet; the claim promotes and leases it in one step, so that it
    never waits for the scheduler's tick."""
    leased: State
    """What the claim makes of both."""


CLAIM: Final = Claim(ready=State.PENDING, due=State.INVISIBLE, leased=State.RUNNING)
"""The claim's sources and target; the claim's SQL is rendered from these (``app/store/sql``)."""


# (event, from-state) -> the states the message may move to. Every transition the server makes
# is listed here; the store takes its WHERE guards from this table (the claim's from CLAIM).
TRANSITIONS: dict[Event, dict[State, frozenset[State]]] = {
    Event.PROMOTE: {State.INVISIBLE: frozenset({State.PENDING})},
    Event.DEQUEUE: {
        CLAIM.ready: frozenset({CLAIM.leased}),
        CLAIM.due: frozenset({CLAIM.leased}),  # once visible_at has passed
    },
    Event.EXTEND: {State.RUNNING: frozenset({State.RUNNING})},
    Event.COMPLETE: {State.RUNNING: frozenset({State.COMPLETED})},
    Event.FAIL: {State.RUNNING: frozenset({State.PENDING, State.INVISIBLE, State.ERRORED})},
    Event.LEASE_EXPIRE: {State.RUNNING: frozenset({State.PENDING, State.INVISIBLE, State.ERRORED})},
    Event.CANCEL: {
        State.INVISIBLE: frozenset({State.CANCELED}),
        State.PENDING: frozenset({State.CANCELED}),
        State.RUNNING: frozenset({State.CANCELED}),
    },
    Event.EXPIRE: {
        State.INVISIBLE: frozenset({State.CANCELED}),
        State.PENDING: frozenset({State.CANCELED}),
        State.RUNNING: frozenset({State.CANCELED}),
    },
    Event.REQUEUE: {
        State.ERRORED: frozenset({State.PENDING, State.INVISIBLE}),
        State.CANCELED: frozenset({State.PENDING, State.INVISIBLE}),
    },
    Event.UPDATE: {
        State.INVISIBLE: frozenset({State.INVISIBLE, State.PENDING}),
        State.PENDING: frozenset({State.INVISIBLE, State.PENDING}),
    },
    Event.REDRIVE: {State.ERRORED: frozenset({State.CANCELED})},
    Event.LEASE_BY_ID: {
        CLAIM.ready: frozenset({CLAIM.leased}),
        CLAIM.due: frozenset({CLAIM.leased}),  # once visible_at has passed
    },
    Event.REPLACE: {
        State.INVISIBLE: frozenset({State.INVISIBLE, State.PENDING}),
        State.PENDING: frozenset({State.INVISIBLE, State.PENDING}),
    },
}

# Events that act on a lease and must present the current lease_id (fencing).
LEASE_EVENTS = frozenset({Event.EXTEND, Event.COMPLETE, Event.FAIL})


class InvalidTransitionError(Exception):
    """The state machine has no such transition."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"a {state} message cannot {event}")
        self.state = state
        self.event = event


def allowed_from(event: Event) -> list[str]:
    """The states from which ``event`` may happen, as strings for a SQL ``ANY`` guard."""
    return sorted(TRANSITIONS[event])


def targets(state: State, event: Event) -> frozenset[State]:
    """The states ``event`` may move a ``state`` message to.

    Raises:
        InvalidTransitionError: when ``event`` cannot happen in ``state``.
    """
    try:
        return TRANSITIONS[event][state]
    except KeyError:
        raise InvalidTransitionError(state, event) from None


def retry_target(*, attempts: int, max_attempts: int, delay_seconds: float) -> State:
    """Where a failed or lease-expired attempt goes (the rule of FAIL and LEASE_EXPIRE, which
    the store's statements apply in SQL; tests/store/test_retry_rule.py holds them to this).

    Args:
        attempts: leases granted so far, including the one that just failed.
        max_attempts: leases the message may get in all.
        delay_seconds: the retry delay that applies to this attempt.
    """
    if attempts >= max_attempts:
        return State.ERRORED
    return State.INVISIBLE if delay_seconds > 0 else State.PENDING


def backoff_seconds(*, attempt: int, base_seconds: int, cap_seconds: int) -> int:
    """The retry delay after failed attempt number ``attempt`` (1-based).

    The delay doubles per attempt: ``base * 2**(attempt-1)``, capped at ``cap_seconds``.
    The store computes the same formula in SQL (``sundial_retry_delay``); tests check that the
    two agree, and that the fail and lease-expiry statements apply it.
    """
    if base_seconds <= 0:
        return 0
    exponent = min(max(attempt - 1, 0), 62)
    return min(base_seconds * (1 << exponent), cap_seconds)
