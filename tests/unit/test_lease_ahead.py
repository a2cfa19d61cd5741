"""The worker's lease-ahead policy: it grows by the handlers that went idle waiting for an
answer, up to ``prefetch``; it shrinks by the messages still waiting when an answer comes; a
short answer (the queue ran dry) does not grow it; small refills wait for half the window."""

from __future__ import annotations

from app.client.lease_ahead import LeaseAhead


def test_grows_by_idle_handlers_up_to_prefetch() -> None:
    policy = LeaseAhead(concurrency=4, prefetch=10)
    assert policy.wanted(running=0, waiting=0, asked=0) == 4
    for _ in range(4):
        policy.handler_idle()
    policy.answered(waiting=0, full=True)
    assert policy.ahead == 4
    for _ in range(8):
        policy.handler_idle()
    policy.answered(waiting=0, full=True)
    assert policy.ahead == 10  # capped
    assert policy.wanted(running=0, waiting=0, asked=0) == 14


def test_a_short_answer_does_not_grow_it() -> None:
    policy = LeaseAhead(concurrency=4, prefetch=10)
    policy.handler_idle()
    policy.answered(waiting=0, full=False)
    assert policy.ahead == 0
    policy.answered(waiting=0, full=True)  # the idle handler was counted once, then forgotten
    assert policy.ahead == 0


def test_shrinks_by_what_still_waits() -> None:
    policy = LeaseAhead(concurrency=2, prefetch=8)
    for _ in range(8):
        policy.handler_idle()
    policy.answered(waiting=0, full=True)
    assert policy.ahead == 8
    policy.handler_idle()
    policy.answered(waiting=3, full=True)
    assert policy.ahead == 5


def test_small_refills_wait_unless_a_handler_starves() -> None:
    policy = LeaseAhead(concurrency=4, prefetch=12)
    for _ in range(12):
        policy.handler_idle()
    policy.answered(waiting=0, full=True)
    # At most 16 held: 9 held and asked leaves 7 < 8 to ask for, so it waits...
    assert policy.wanted(running=4, waiting=3, asked=2) == 0
    # ...until half the window is free.
    assert policy.wanted(running=4, waiting=4, asked=0) == 8
    # An idle handler with nothing waiting and nothing asked asks at once.
    assert policy.wanted(running=3, waiting=0, asked=0) == 13
    assert LeaseAhead(concurrency=1, prefetch=0).wanted(running=0, waiting=0, asked=0) == 1
    assert LeaseAhead(concurrency=1, prefetch=0).wanted(running=1, waiting=0, asked=0) == 0
