"""The state machine of app/core/states.py against docs/concepts.md, written out independently."""

from __future__ import annotations

import itertools

import pytest

from app.core.states import (
    CLAIM,
    DEAD_LETTER_STATES,
    LEASE_EVENTS,
    LIVE_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    Event,
    InvalidTransitionError,
    State,
    allowed_from,
    backoff_seconds,
    retry_target,
    targets,
)

INV, PEN, RUN = State.INVISIBLE, State.PENDING, State.RUNNING
COM, CAN, ERR = State.COMPLETED, State.CANCELED, State.ERRORED

# docs/concepts.md's transitions, transcribed by hand: (state, event) -> the states it may lead
# to. Every pair not listed here must be refused.
EXPECTED: dict[tuple[State, Event], set[State]] = {
    (INV, Event.PROMOTE): {PEN},
    (PEN, Event.DEQUEUE): {RUN},
    (INV, Event.DEQUEUE): {RUN},  # a due message (visible_at passed), promoted and leased at once
    (RUN, Event.EXTEND): {RUN},
    (RUN, Event.COMPLETE): {COM},
    (RUN, Event.FAIL): {PEN, INV, ERR},
    (RUN, Event.LEASE_EXPIRE): {PEN, INV, ERR},
    (INV, Event.CANCEL): {CAN},
    (PEN, Event.CANCEL): {CAN},
    (RUN, Event.CANCEL): {CAN},
    (INV, Event.EXPIRE): {CAN},
    (PEN, Event.EXPIRE): {CAN},
    (RUN, Event.EXPIRE): {CAN},
    (ERR, Event.REQUEUE): {PEN, INV},
    (CAN, Event.REQUEUE): {PEN, INV},
    (INV, Event.UPDATE): {INV, PEN},
    (PEN, Event.UPDATE): {INV, PEN},
    (ERR, Event.REDRIVE): {CAN},  # a copy goes pending into the queue's dead_letter_queue
    (PEN, Event.LEASE_BY_ID): {RUN},
    (INV, Event.LEASE_BY_ID): {RUN},  # once due, as a dequeue
    (INV, Event.REPLACE): {INV, PEN},
    (PEN, Event.REPLACE): {INV, PEN},
}

ALL_PAIRS = list(itertools.product(State, Event))


def test_the_enums_are_the_products():
    assert [s.value for s in State] == [
        "invisible",
        "pending",
        "running",
        "completed",
        "canceled",
        "errored",
    ]
    assert {e.value for e in Event} == {
        "promote",
        "dequeue",
        "extend",
        "complete",
        "fail",
        "lease_expire",
        "cancel",
        "expire",
        "requeue",
        "update",
        "redrive",
        "lease_by_id",
        "replace",
    }
    assert frozenset({COM, CAN, ERR}) == TERMINAL_STATES
    assert frozenset({INV, PEN, RUN}) == LIVE_STATES
    assert [s for s in State if s.is_terminal] == [COM, CAN, ERR]


@pytest.mark.parametrize(("state", "event"), ALL_PAIRS, ids=lambda v: str(v))
def test_targets_of_every_state_and_event(state: State, event: Event):
    expected = EXPECTED.get((state, event))
    if expected is None:
        with pytest.raises(InvalidTransitionError) as info:
            targets(state, event)
        assert info.value.state is state
        assert info.value.event is event
        assert str(state) in str(info.value)
        assert str(event) in str(info.value)
    else:
        result = targets(state, event)
        assert isinstance(result, frozenset)
        assert result == expected


def test_the_table_lists_nothing_beyond_the_product():
    listed = {
        (state, event): set(to)
        for event, by_state in TRANSITIONS.items()
        for state, to in by_state.items()
    }
    assert listed == EXPECTED


@pytest.mark.parametrize("event", list(Event), ids=str)
def test_allowed_from_matches_the_table(event: Event):
    expected = sorted(str(state) for state in State if (state, event) in EXPECTED)
    result = allowed_from(event)
    assert result == expected
    assert result == sorted(TRANSITIONS[event])
    assert all(isinstance(item, str) for item in result)
    assert result  # every event can happen from somewhere


def test_allowed_from_is_sql_ready_text():
    # The store binds these as message_state[]; they must be the enum's labels.
    labels = {s.value for s in State}
    for event in Event:
        assert set(allowed_from(event)) <= labels


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES), ids=str)
def test_terminal_states_only_leave_by_requeue_or_redrive(state: State):
    for event in Event:
        if event is Event.REQUEUE and state in (ERR, CAN):
            assert targets(state, event) == {PEN, INV}
        elif event is Event.REDRIVE and state is ERR:
            assert targets(state, event) == {CAN}
        else:
            with pytest.raises(InvalidTransitionError):
                targets(state, event)


def test_completed_is_final():
    for event in Event:
        with pytest.raises(InvalidTransitionError):
            targets(COM, event)


def test_no_transition_enters_a_state_the_spec_does_not_name():
    # running is reached only by a lease (dequeue, or lease by id) and extend keeps it;
    # completed only by complete.
    leasing = (Event.DEQUEUE, Event.LEASE_BY_ID, Event.EXTEND)
    entering_running = {e for (s, e), to in EXPECTED.items() if RUN in to}
    assert entering_running == set(leasing)
    for event, by_state in TRANSITIONS.items():
        for state, to in by_state.items():
            if RUN in to:
                assert event in leasing, (state, event)
            if COM in to:
                assert (state, event) == (RUN, Event.COMPLETE)


def test_lease_events_act_on_running_messages_only():
    assert frozenset({Event.EXTEND, Event.COMPLETE, Event.FAIL}) == LEASE_EVENTS
    for event in LEASE_EVENTS:
        assert allowed_from(event) == ["running"]


# --- retry_target --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "delay", "expected"),
    [
        (1, 3, 0, PEN),
        (2, 3, 0, PEN),
        (1, 3, 5, INV),
        (2, 3, 0.001, INV),
        (3, 3, 0, ERR),
        (3, 3, 10, ERR),  # the last attempt is a dead letter even with a retry delay
        (4, 3, 0, ERR),  # more attempts than allowed (max lowered meanwhile)
        (1, 1, 0, ERR),
        (1, 1, 60, ERR),
        (999, 1000, 0, PEN),
        (1000, 1000, 0, ERR),
        (0, 3, 0, PEN),
    ],
)
def test_retry_target(attempts: int, max_attempts: int, delay: float, expected: State):
    assert (
        retry_target(attempts=attempts, max_attempts=max_attempts, delay_seconds=delay) is expected
    )


def test_retry_target_targets_are_allowed_by_the_table():
    for attempts, max_attempts, delay in itertools.product(range(0, 5), range(1, 4), (0, 1)):
        target = retry_target(attempts=attempts, max_attempts=max_attempts, delay_seconds=delay)
        assert target in targets(RUN, Event.FAIL)
        assert target in targets(RUN, Event.LEASE_EXPIRE)


# --- backoff_seconds -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "expected"),
    [
        (1, 1, 3600, 1),
        (2, 1, 3600, 2),
        (3, 1, 3600, 4),
        (4, 1, 3600, 8),
        (1, 5, 3600, 5),
        (2, 5, 3600, 10),
        (3, 5, 3600, 20),
        (10, 5, 3600, 2560),
        (11, 5, 3600, 3600),  # 5120 capped
        (12, 1, 3600, 2048),
        (13, 1, 3600, 3600),  # 4096 capped
        (1, 30, 10, 10),  # the cap applies from the first attempt
        (5, 7, 7 * 16, 7 * 16),  # exactly at the cap
        (0, 5, 3600, 5),  # attempt 0 and below count as the first
        (-3, 5, 3600, 5),
        (1, 0, 3600, 0),  # base 0: no backoff at all
        (50, 0, 3600, 0),
        (1, -5, 3600, 0),
        (3, 1, 0, 0),  # cap 0
    ],
)
def test_backoff_seconds(attempt: int, base: int, cap: int, expected: int):
    assert backoff_seconds(attempt=attempt, base_seconds=base, cap_seconds=cap) == expected


def test_backoff_doubles_until_the_cap():
    base, cap = 3, 1000
    previous = None
    for attempt in range(1, 20):
        value = backoff_seconds(attempt=attempt, base_seconds=base, cap_seconds=cap)
        if previous is not None:
            assert value == min(previous * 2, cap)
        previous = value
    assert previous == cap


@pytest.mark.parametrize("attempt", [63, 64, 65, 100, 1000, 2**31 - 1, 10**18])
def test_backoff_of_huge_attempt_numbers_is_the_cap(attempt: int):
    cap = 365 * 24 * 3600
    assert backoff_seconds(attempt=attempt, base_seconds=1, cap_seconds=cap) == cap
    assert backoff_seconds(attempt=attempt, base_seconds=3600, cap_seconds=cap) == cap


def test_backoff_exponent_is_bounded():
    # Without a cap in sight the exponent stops at 62: the result stays a bounded integer.
    huge_cap = 2**200
    at_62 = backoff_seconds(attempt=63, base_seconds=1, cap_seconds=huge_cap)
    assert at_62 == 2**62
    assert backoff_seconds(attempt=10**9, base_seconds=1, cap_seconds=huge_cap) == 2**62
    assert backoff_seconds(attempt=10**9, base_seconds=2, cap_seconds=huge_cap) == 2**63


def test_backoff_returns_int():
    value = backoff_seconds(attempt=4, base_seconds=2, cap_seconds=3600)
    assert type(value) is int


def test_dead_letters_are_exactly_the_states_a_requeue_starts_from():
    assert set(DEAD_LETTER_STATES) == set(TRANSITIONS[Event.REQUEUE])
    assert all(state.is_terminal for state in DEAD_LETTER_STATES)


def test_the_claim_reads_the_sources_of_its_event():
    # The claim's SQL is rendered from CLAIM (app/store/sql/claim.py): its states are the table's.
    assert {CLAIM.ready, CLAIM.due} == set(TRANSITIONS[Event.DEQUEUE])
    assert all(to == {CLAIM.leased} for to in TRANSITIONS[Event.DEQUEUE].values())
    assert (CLAIM.ready, CLAIM.due, CLAIM.leased) == (PEN, INV, RUN)


def test_claiming_a_due_message_is_a_promotion_then_a_dequeue():
    # The due source is what PROMOTE takes (once visible_at has passed) to the ready source.
    assert targets(CLAIM.due, Event.PROMOTE) == {CLAIM.ready}
    assert targets(CLAIM.ready, Event.DEQUEUE) == targets(CLAIM.due, Event.DEQUEUE)
