"""What a lease holder does through the service: complete, fail (retry, backoff, dead
letter) and extend, each fenced by its lease; and leases that expire.
"""

from __future__ import annotations

import uuid

import pytest

from app.core.errors import (
    LeaseMismatchError,
    NotFoundError,
    ValidationError,
)
from app.core.states import State, backoff_seconds
from tests.helpers import (
    expire_leases,
    make_due,
    make_queue,
    raw_row,
    release_expired,
    scalar,
)
from tests.service.helpers import NS, Q, lease_one, new, seconds

# ==============================================================================================
# complete
# ==============================================================================================


async def test_complete(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    done = await service.complete(NS, Q, "a", leased.lease_id)
    assert done.state is State.COMPLETED
    assert done.finished_at is not None
    assert done.lease_expires_at is None
    assert done.attempts == 1
    row = await raw_row(engine, queue, "a")
    assert row["state"] == "completed"
    assert row["finished_at"] == done.finished_at


async def test_complete_again_with_the_same_lease_returns_the_message(service, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    done = await service.complete(NS, Q, "a", leased.lease_id)
    again = await service.complete(NS, Q, "a", leased.lease_id)
    assert again == done
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", str(uuid.uuid4()))
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", "garbage")


async def test_complete_with_a_wrong_lease_is_refused(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    last = leased.lease_id[-1]
    wrong_leases = {
        "random": str(uuid.uuid4()),
        "malformed": "not-a-uuid",
        "empty": "",
        "near_miss": leased.lease_id[:-1] + ("1" if last == "0" else "0"),
    }
    for kind, wrong in wrong_leases.items():
        with pytest.raises(LeaseMismatchError):
            await service.complete(NS, Q, "a", wrong)
        row = await raw_row(engine, queue, "a")
        assert (row["state"], row["lease_id"]) == ("running", leased.lease_id), kind
    # The same UUID in capitals is the same lease.
    done = await service.complete(NS, Q, "a", leased.lease_id.upper())
    assert done.state is State.COMPLETED


async def test_complete_with_an_expired_lease_is_refused(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    await expire_leases(engine, ids=["a"])
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", leased.lease_id)
    assert (await raw_row(engine, queue, "a"))["state"] == "running"


async def test_complete_refusals_by_state(service, queue):
    await service.enqueue(NS, Q, [new("pending")])
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "pending", str(uuid.uuid4()))
    with pytest.raises(NotFoundError):
        await service.complete(NS, Q, "missing", str(uuid.uuid4()))


async def test_stale_lease_is_refused_after_release_and_new_lease(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    stale = await lease_one(service)
    await expire_leases(engine)
    assert await release_expired(engine) == 1
    fresh = await lease_one(service)
    assert fresh.attempt == 2
    assert fresh.lease_id != stale.lease_id
    for call in (
        service.complete(NS, Q, "a", stale.lease_id),
        service.fail(NS, Q, "a", stale.lease_id),
        service.extend(NS, Q, "a", stale.lease_id, 60),
    ):
        with pytest.raises(LeaseMismatchError):
            await call
    assert (await service.complete(NS, Q, "a", fresh.lease_id)).state is State.COMPLETED


# ==============================================================================================
# fail
# ==============================================================================================


async def test_fail_with_attempts_left_goes_back_to_pending(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    failed = await service.fail(NS, Q, "a", leased.lease_id, error="disk full")
    assert failed.state is State.PENDING
    assert failed.last_error == "disk full"
    assert (failed.attempts, failed.finished_at, failed.lease_expires_at) == (1, None, None)
    row = await raw_row(engine, queue, "a")
    assert row["visible_at"] == row["updated_at"]
    again = await lease_one(service)
    assert again.attempt == 2
    assert again.lease_id != leased.lease_id


async def test_fail_on_the_last_attempt_is_errored(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=2, retry_delay_seconds=10)
    await service.enqueue(NS, Q, [new("a")])
    first = await lease_one(service)
    await service.fail(NS, Q, "a", first.lease_id, error="one")
    await make_due(engine, queue=queue)
    second = await lease_one(service)
    assert second.attempt == 2
    dead = await service.fail(NS, Q, "a", second.lease_id, error="two")
    assert dead.state is State.ERRORED
    assert dead.last_error == "two"
    assert dead.finished_at is not None
    assert dead.attempts == 2
    assert (await raw_row(engine, queue, "a"))["state"] == "errored"
    assert await service.dequeue(NS, Q) == []
    # A per-message max_attempts overrides the queue's.
    await service.enqueue(NS, Q, [new("once", max_attempts=1)])
    leased = await lease_one(service)
    assert (await service.fail(NS, Q, "once", leased.lease_id)).state is State.ERRORED


async def test_fail_with_queue_retry_delay_backs_off_exponentially(service, engine):
    queue = await make_queue(
        service, NS, Q, max_attempts=10, retry_delay_seconds=10, retry_delay_max_seconds=35
    )
    await service.enqueue(NS, Q, [new("a")])
    for attempt, expected in [(1, 10), (2, 20), (3, 35), (4, 35)]:
        leased = await lease_one(service)
        assert leased.attempt == attempt
        failed = await service.fail(NS, Q, "a", leased.lease_id, error=f"try {attempt}")
        assert failed.state is State.INVISIBLE
        row = await raw_row(engine, queue, "a")
        assert seconds(row["visible_at"] - row["updated_at"]) == expected
        assert expected == backoff_seconds(attempt=attempt, base_seconds=10, cap_seconds=35)
        assert await service.dequeue(NS, Q) == []  # not before visible_at
        await make_due(engine, queue=queue)


async def test_fail_retry_delay_override(service, engine):
    queue = await make_queue(service, NS, Q, retry_delay_seconds=100)
    await service.enqueue(NS, Q, [new("a"), new("b")])
    a, b = await service.dequeue(NS, Q, count=2)
    now_pending = await service.fail(NS, Q, "a", a.lease_id, retry_delay_seconds=0)
    assert now_pending.state is State.PENDING
    later = await service.fail(NS, Q, "b", b.lease_id, retry_delay_seconds=7)
    assert later.state is State.INVISIBLE
    row = await raw_row(engine, queue, "b")
    assert seconds(row["visible_at"] - row["updated_at"]) == 7
    # On a queue without retry delay, the override still delays.
    await make_queue(service, NS, "plain")
    await service.enqueue(NS, "plain", [new("c")])
    (c,) = await service.dequeue(NS, "plain")
    assert (await service.fail(NS, "plain", "c", c.lease_id, retry_delay_seconds=3)).state is (
        State.INVISIBLE
    )
    # On the last attempt a retry delay does not matter: the message is a dead letter.
    await service.enqueue(NS, "plain", [new("last", max_attempts=1)])
    (last,) = await service.dequeue(NS, "plain")
    dead = await service.fail(NS, "plain", "last", last.lease_id, retry_delay_seconds=30)
    assert dead.state is State.ERRORED
    assert dead.finished_at is not None


async def test_fail_refusals(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    with pytest.raises(LeaseMismatchError):
        await service.fail(NS, Q, "a", str(uuid.uuid4()))
    with pytest.raises(LeaseMismatchError):
        await service.fail(NS, Q, "a", "nope")
    with pytest.raises(NotFoundError):
        await service.fail(NS, Q, "missing", leased.lease_id)
    with pytest.raises(ValidationError) as info:
        await service.fail(NS, Q, "a", leased.lease_id, error="a\x00b")
    assert info.value.field == "error"
    with pytest.raises(ValidationError) as info:
        await service.fail(NS, Q, "a", leased.lease_id, retry_delay_seconds=-1)
    assert info.value.field == "retry_delay_seconds"
    await expire_leases(engine, ids=["a"])
    with pytest.raises(LeaseMismatchError):
        await service.fail(NS, Q, "a", leased.lease_id)
    row = await raw_row(engine, queue, "a")
    assert (row["state"], row["attempts"], row["last_error"]) == ("running", 1, None)


# ==============================================================================================
# extend
# ==============================================================================================


async def test_extend_moves_the_expiry(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    extended = await service.extend(NS, Q, "a", leased.lease_id, 600)
    assert extended.state is State.RUNNING
    assert extended.lease_id == leased.lease_id
    assert extended.lease_expires_at > leased.lease_expires_at
    row = await raw_row(engine, queue, "a")
    assert seconds(row["lease_expires_at"] - row["updated_at"]) == 600
    # An extended lease survives the release of expired ones.
    assert await release_expired(engine) == 0
    assert (await service.complete(NS, Q, "a", leased.lease_id)).state is State.COMPLETED


async def test_extend_refusals(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    with pytest.raises(LeaseMismatchError):
        await service.extend(NS, Q, "a", str(uuid.uuid4()), 60)
    with pytest.raises(NotFoundError):
        await service.extend(NS, Q, "missing", leased.lease_id, 60)
    for bad in (0, 12 * 3600 + 1):
        with pytest.raises(ValidationError) as info:
            await service.extend(NS, Q, "a", leased.lease_id, bad)
        assert info.value.field == "lease_seconds"
    await expire_leases(engine, ids=["a"])
    with pytest.raises(LeaseMismatchError):
        await service.extend(NS, Q, "a", leased.lease_id, 60)  # an expired lease is not revived
    assert await scalar(engine, "SELECT lease_expires_at < now() FROM messages WHERE id = 'a'")
    # A completed message's lease cannot be extended.
    await service.enqueue(NS, Q, [new("b")])
    leased = await lease_one(service)
    await service.complete(NS, Q, "b", leased.lease_id)
    with pytest.raises(LeaseMismatchError):
        await service.extend(NS, Q, "b", leased.lease_id, 60)


# ==============================================================================================
# lease expiry (the scheduler's release statement follows the same retry rule as fail)
# ==============================================================================================


async def test_released_leases_follow_the_retry_rule(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=2, retry_delay_seconds=10)
    plain = await make_queue(service, NS, "plain")
    await service.enqueue(NS, Q, [new("a"), new("b", max_attempts=1), new("c")])
    await service.enqueue(NS, "plain", [new("d")])
    assert len(await service.dequeue(NS, Q, count=3)) == 3
    await service.dequeue(NS, "plain")
    await expire_leases(engine, ids=["a", "b", "d"])
    assert await release_expired(engine) == 3
    a = await raw_row(engine, queue, "a")
    assert (a["state"], a["attempts"], a["last_error"], a["finished_at"]) == (
        "invisible",
        1,
        "lease expired",
        None,
    )
    assert seconds(a["visible_at"] - a["updated_at"]) == 10
    b = await raw_row(engine, queue, "b")
    assert (b["state"], b["last_error"]) == ("errored", "lease expired")
    assert b["finished_at"] == b["updated_at"]
    assert (await raw_row(engine, queue, "c"))["state"] == "running"  # its lease is valid
    d = await raw_row(engine, plain, "d")
    assert (d["state"], d["visible_at"]) == ("pending", d["updated_at"])
    # The second and last attempt of a expires too: errored.
    await make_due(engine, ids=["a"])
    assert (await lease_one(service)).attempt == 2
    await expire_leases(engine, ids=["a"])
    assert await release_expired(engine) == 1
    assert (await raw_row(engine, queue, "a"))["state"] == "errored"
