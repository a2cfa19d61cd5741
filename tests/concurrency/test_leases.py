"""Leases under real concurrency: many asyncio consumers, each claim on its own pooled connection.

Nothing here waits by sleeping. Consumers start together on a barrier; a lease "expires" because
SQL moves ``lease_expires_at`` into the past; the exclusivity watcher is a task that polls the
database in a loop, and every consumer holds each lease until the watcher has looked at the
database at least once after the claim committed.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa
from psycopg import errors as pg_errors
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import LeaseMismatchError
from app.core.models import LeaseRef, NewMessage, Queue
from app.core.service import QueueService
from app.core.states import State
from app.store.sql.claim import messages_claim
from tests.helpers import (
    expire_leases,
    fetch,
    make_queue,
    release_expired,
    scalar,
    states_of,
)

NS = "ns"
TIMEOUT = 60  # seconds; a hang fails the test instead of stalling the run


@dataclass(frozen=True)
class Claimed:
    """One lease as a consumer saw it."""

    id: str
    lease_id: str
    value: str


async def warm_pool(engine: AsyncEngine, connections: int) -> None:
    """Open ``connections`` pooled connections up front, so that no consumer is slowed down by
    connecting while the others already run."""
    opened = [await engine.connect() for _ in range(connections)]
    for conn in opened:
        await conn.close()


async def enqueue_all(service: QueueService, queue: str, messages: list[NewMessage]) -> None:
    for start in range(0, len(messages), 1000):
        outcomes = await service.enqueue(NS, queue, messages[start : start + 1000])
        assert all(o.created for o in outcomes)


# ==============================================================================================
# (a) no double lease
# ==============================================================================================


async def test_no_message_is_leased_twice(service: QueueService, engine: AsyncEngine):
    queue = await make_queue(service, NS, "work", lease_seconds=600)
    total, consumers = 2000, 12
    ids = [f"m{i:05}" for i in range(total)]
    # Few distinct priorities: consumers contend for the same head of the queue.
    await enqueue_all(service, "work", [NewMessage(id=i, priority=int(i[1:]) % 5) for i in ids])
    leases: list[tuple[int, str, str, int]] = []  # (consumer, id, lease_id, attempt)
    refused: list[str] = []
    in_flight = max_in_flight = 0
    barrier = asyncio.Barrier(consumers)
    await warm_pool(engine, consumers)

    async def consumer(number: int) -> None:
        nonlocal in_flight, max_in_flight
        rng = random.Random(number)
        await barrier.wait()
        while True:
            in_flight += 1
            max_in_flight = max(max_in_flight, in_flight)
            try:
                batch = await service.dequeue(NS, "work", count=rng.randint(1, 20))
            finally:
                in_flight -= 1
            if not batch:
                return
            leases.extend((number, m.id, m.lease_id, m.attempt) for m in batch)
            if number % 2:
                results = await service.ack(
                    NS, "work", complete=[LeaseRef(m.id, m.lease_id) for m in batch], fail=[]
                )
                refused.extend(r.id for r in results if not r.ok)
            else:
                for m in batch:
                    done = await service.complete(NS, "work", m.id, m.lease_id)
                    assert done.state is State.COMPLETED

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(consumer(n) for n in range(consumers)))

    assert refused == []
    leased_ids = Counter(message_id for _, message_id, _, _ in leases)
    assert len(leases) == total
    assert set(leased_ids) == set(ids)
    assert [i for i, n in leased_ids.items() if n > 1] == []
    assert len({lease for _, _, lease, _ in leases}) == total
    assert {attempt for *_, attempt in leases} == {1}
    assert max_in_flight >= 8  # dequeues really overlapped
    assert len({number for number, *_ in leases}) >= 8  # and many consumers got work
    rows = await fetch(
        engine,
        "SELECT state::text AS state, attempts, count(*) AS n FROM messages "
        "WHERE queue_id = :q GROUP BY state, attempts",
        q=queue.id,
    )
    assert rows == [{"state": "completed", "attempts": 1, "n": total}]


# ==============================================================================================
# (b), (c) exclusivity and its detector
# ==============================================================================================

RUNNING_DUPLICATES = sa.text(
    """
    SELECT exclusive_value, count(*) AS n FROM messages
    WHERE queue_id = :queue_id AND state = 'running'
    GROUP BY exclusive_value HAVING count(*) > 1
    """
)


@dataclass
class ExclusiveRun:
    """What the consumers and the watcher recorded."""

    # exclusive value -> [(leased tick, completing tick, message id)]
    intervals: dict[str, list[tuple[int, int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    db_duplicates: list[tuple[str, int]] = field(default_factory=list)
    polls: int = 0
    claims: int = 0
    leases: Counter[str] = field(default_factory=Counter)

    def overlaps(self) -> list[tuple[str, str, str]]:
        """Neighbouring leases (by start) of one exclusive value whose intervals overlap.

        Empty exactly when no two intervals of any value overlap: if intervals i < j (by start)
        overlap, then so do i and i + 1, since start[i+1] <= start[j] < end[i].
        """
        found = []
        for value, spans in self.intervals.items():
            ordered = sorted(spans)
            for (_, end, first), (start, _, second) in itertools.pairwise(ordered):
                if start < end:
                    found.append((value, first, second))
        return found


Claim = Callable[[int], Awaitable[list[Claimed]]]
Complete = Callable[[Claimed], Awaitable[None]]


async def run_exclusive_consumers(
    engine: AsyncEngine,
    queue: Queue,
    total: int,
    claim: Claim,
    complete: Complete,
    consumers: int = 16,
) -> ExclusiveRun:
    """Run ``consumers`` tasks that claim (batches of 1..10) and complete until ``total`` are
    done, while a watcher polls the database for two running messages of one value.

    Intervals are recorded on a logical clock (one process, one event loop): a lease's interval
    starts after its claim returned (so after the claim committed) and ends just before its
    complete is sent (so before it commits). It lies inside the time the row really was running;
    if the database never runs two messages of one value at once, recorded intervals of one value
    cannot overlap. Each lease is held until a watcher poll that started after the claim has
    finished, so every lease is seen by the database check too.
    """
    run = ExclusiveRun()
    clock = itertools.count()
    polled = asyncio.Condition()
    started = finished = 0
    completed = 0
    consumers_done = asyncio.Event()
    barrier = asyncio.Barrier(consumers + 1)
    await warm_pool(engine, consumers + 1)

    async def watcher() -> None:
        nonlocal started, finished
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await barrier.wait()
            while not consumers_done.is_set():
                started += 1
                rows = (await conn.execute(RUNNING_DUPLICATES, {"queue_id": queue.id})).all()
                run.db_duplicates.extend((r.exclusive_value, r.n) for r in rows)
                async with polled:
                    finished = started
                    run.polls += 1
                    polled.notify_all()

    async def consumer(number: int) -> None:
        nonlocal completed
        rng = random.Random(1000 + number)
        await barrier.wait()
        while completed < total:
            batch = await claim(rng.randint(1, 10))
            leased_at = next(clock)
            if not batch:
                continue
            run.claims += 1
            seen_by = started + 1  # the first poll that starts after this claim committed
            async with polled:
                await polled.wait_for(lambda seen_by=seen_by: finished >= seen_by)
            for message in batch:
                run.leases[message.id] += 1
                run.intervals[message.value].append((leased_at, next(clock), message.id))
                await complete(message)
                completed += 1

    async with asyncio.timeout(TIMEOUT):
        watching = asyncio.create_task(watcher())
        try:
            await asyncio.gather(*(consumer(n) for n in range(consumers)))
        finally:
            consumers_done.set()
            await watching
    return run


async def exclusive_setup(
    service: QueueService, values: int, per_value: int
) -> tuple[Queue, list[str]]:
    queue = await make_queue(
        service, NS, "ex", kind="exclusive", exclusive_key="project", lease_seconds=600
    )
    # Messages of one value sit next to each other in priority order: the adversarial case,
    # every scan of the queue's head meets several messages of the same value.
    messages = [
        NewMessage(id=f"v{v:02}-{k}", priority=v * per_value + k, metadata={"project": f"p{v:02}"})
        for v in range(values)
        for k in range(per_value)
    ]
    await enqueue_all(service, "ex", messages)
    return queue, [m.id for m in messages if m.id is not None]


def service_claim(service: QueueService) -> Claim:
    async def claim(count: int) -> list[Claimed]:
        batch = await service.dequeue(NS, "ex", count=count)
        return [Claimed(m.id, m.lease_id, m.metadata["project"]) for m in batch]

    return claim


def service_complete(service: QueueService) -> Complete:
    async def complete(message: Claimed) -> None:
        done = await service.complete(NS, "ex", message.id, message.lease_id)
        assert done.state is State.COMPLETED

    return complete


async def test_exclusive_queue_never_runs_two_messages_of_one_value(
    service: QueueService, engine: AsyncEngine
):
    queue, ids = await exclusive_setup(service, values=50, per_value=5)
    run = await run_exclusive_consumers(
        engine, queue, len(ids), service_claim(service), service_complete(service)
    )
    assert run.db_duplicates == []
    assert run.overlaps() == []
    assert run.polls > 0
    assert run.claims > 0
    assert sorted(run.leases) == sorted(ids)
    assert set(run.leases.values()) == {1}
    assert set(run.intervals) == {f"p{v:02}" for v in range(50)}
    assert set((await states_of(engine, queue)).values()) == {"completed"}
    assert (
        await scalar(
            engine,
            "SELECT count(*) FROM messages WHERE queue_id = :q AND attempts <> 1",
            q=queue.id,
        )
        == 0
    )


async def test_detector_finds_overlaps_without_index_and_guard(
    service: QueueService, engine: AsyncEngine
):
    """The same run, with both protections removed, must be caught by the same detector."""
    queue, ids = await exclusive_setup(service, values=50, per_value=5)
    async with engine.begin() as conn:
        await conn.execute(sa.text("DROP INDEX messages_running_exclusive_uidx"))

    async def unguarded_claim(count: int) -> list[Claimed]:
        # The simple-queue dequeue: no NOT EXISTS, no one-per-value, on the exclusive queue.
        params = {
            "queue_id": queue.id,
            "lease_override": None,
            "queue_lease": 600,
            "catalogue_version": None,  # unchecked (no request's lookups)
            "valid_until": None,
        }
        async with engine.begin() as conn:
            rows = (await conn.execute(messages_claim(count=count), params)).all()
        return [Claimed(r.id, r.lease_id, r.metadata["project"]) for r in rows]

    run = await run_exclusive_consumers(
        engine, queue, len(ids), unguarded_claim, service_complete(service)
    )
    assert run.overlaps() != []
    assert run.db_duplicates != []
    assert all(n > 1 for _, n in run.db_duplicates)
    # Nothing else went wrong: every message was still leased once and completed.
    assert sorted(run.leases) == sorted(ids)
    assert set((await states_of(engine, queue)).values()) == {"completed"}


async def wait_for_lock_wait(engine: AsyncEngine, pid: int | None = None) -> int:
    """Poll until a backend of this database (``pid``, or any) waits for a lock; return its pid.

    This is how a test knows that a concurrent statement is queued behind another transaction.
    """
    query = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND (CAST(:pid AS integer) IS NULL OR pid = :pid)"
    )
    async with asyncio.timeout(10), engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        while True:
            found = (await conn.execute(query, {"pid": pid})).scalar()
            if found is not None:
                return found


@pytest.mark.parametrize("first_outcome", ["commit", "rollback"])
async def test_the_unique_index_is_the_guard(
    service: QueueService, engine: AsyncEngine, first_outcome: str
):
    """Two transactions force two messages of one value to running: the second waits for the
    first and is refused if it commits (and proceeds if it rolls back)."""
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [NewMessage(id=i, metadata={"project": "same"}) for i in ("one", "two")],
    )
    to_running = sa.text(
        "UPDATE messages SET state = 'running', attempts = attempts + 1, "
        "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
        "WHERE queue_id = :q AND id = :id"
    )
    async with engine.connect() as first, engine.connect() as second:
        pid = (await second.execute(sa.text("SELECT pg_backend_pid()"))).scalar()
        await second.commit()
        await first.execute(to_running, {"q": queue.id, "id": "one"})  # open transaction
        racing = asyncio.create_task(second.execute(to_running, {"q": queue.id, "id": "two"}))
        await wait_for_lock_wait(engine, pid)
        assert not racing.done()
        if first_outcome == "commit":
            await first.commit()
            with pytest.raises(sa_exc.IntegrityError) as info:
                await racing
            assert isinstance(info.value.orig, pg_errors.UniqueViolation)
            assert info.value.orig.diag.constraint_name == "messages_running_exclusive_uidx"
            await second.rollback()
            expected = {"one": "running", "two": "pending"}
        else:
            await first.rollback()
            await racing
            await second.commit()
            expected = {"one": "pending", "two": "running"}
    assert await states_of(engine, queue) == expected


async def test_exclusive_dequeue_race_is_retried_not_refused(
    service: QueueService, engine: AsyncEngine
):
    """While x1 is made running by an uncommitted transaction that the claim cannot see (x1 was
    not ready in its snapshot, and no claim holds value x), a dequeue that picked another X
    message loses on the index and retries: it gets the next value instead of an error."""
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [
            NewMessage(id="x1", priority=1, metadata={"project": "x"}, delay_seconds=3600),
            NewMessage(id="x2", priority=2, metadata={"project": "x"}),
            NewMessage(id="y1", priority=3, metadata={"project": "y"}),
        ],
    )
    async with engine.connect() as holder:
        # Hold x1 running in an open transaction, as a concurrent grant would.
        await holder.execute(
            sa.text(
                "UPDATE messages SET state = 'running', attempts = 1, "
                "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
                "WHERE queue_id = :q AND id = 'x1'"
            ),
            {"q": queue.id},
        )
        racing = asyncio.create_task(service.dequeue(NS, "ex", count=1))
        await wait_for_lock_wait(engine)
        await holder.commit()
        leased = await racing
    assert [m.id for m in leased] == ["y1"]
    assert await states_of(engine, queue) == {"x1": "running", "x2": "pending", "y1": "running"}


# ==============================================================================================
# (d) lease expiry under concurrency
# ==============================================================================================


async def test_expired_leases_are_released_and_re_leased_to_others(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "jobs", lease_seconds=600, max_attempts=3)
    total, consumers = 120, 8
    ids = [f"j{i:03}" for i in range(total)]
    await enqueue_all(service, "jobs", [NewMessage(id=i) for i in ids])

    # Round 1: eight consumers lease everything concurrently and never complete.
    held: dict[int, list[tuple[str, str]]] = defaultdict(list)
    barrier = asyncio.Barrier(consumers)
    await warm_pool(engine, consumers * 2)

    async def hoarder(number: int) -> None:
        rng = random.Random(number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "jobs", count=rng.randint(1, 10)):
            held[number].extend((m.id, m.lease_id) for m in batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(hoarder(n) for n in range(consumers)))
    stale = {message_id: lease for leases in held.values() for message_id, lease in leases}
    assert len(stale) == sum(len(leases) for leases in held.values()) == total
    assert len(held) >= 2

    # Half the leases expire (SQL shift); the holders of the other half keep theirs.
    expiring = {message_id for message_id in ids if int(message_id[1:]) % 2 == 0}
    keeping = set(ids) - expiring
    assert await expire_leases(engine, queue=queue, ids=sorted(expiring)) == len(expiring)
    assert await release_expired(engine, batch=1000) == len(expiring)
    rows = await fetch(
        engine,
        "SELECT id, state::text AS state, attempts, last_error FROM messages WHERE queue_id = :q",
        q=queue.id,
    )
    for row in rows:
        if row["id"] in expiring:
            assert (row["state"], row["attempts"], row["last_error"]) == (
                "pending",
                1,
                "lease expired",
            )
        else:
            assert (row["state"], row["attempts"]) == ("running", 1)
    assert await release_expired(engine, batch=1000) == 0  # nothing is released twice

    # Round 2, all at once: fresh consumers take the released messages and complete them, the
    # stale consumers try to complete / extend / fail with their expired leases, and the
    # hoarders whose leases are still valid complete theirs.
    fresh_leases: list[tuple[int, str, str, int]] = []
    stale_refusals: Counter[str] = Counter()
    stale_successes: list[str] = []
    barrier = asyncio.Barrier(consumers * 2)

    async def fresh(number: int) -> None:
        rng = random.Random(100 + number)
        await barrier.wait()
        while batch := await service.dequeue(NS, "jobs", count=rng.randint(1, 10)):
            fresh_leases.extend((number, m.id, m.lease_id, m.attempt) for m in batch)
            for m in batch:
                await service.complete(NS, "jobs", m.id, m.lease_id)

    async def former_holder(number: int) -> None:
        await barrier.wait()
        for message_id, lease in held[number]:
            if message_id in keeping:
                done = await service.complete(NS, "jobs", message_id, lease)
                assert done.state is State.COMPLETED
                continue
            for action in ("complete", "extend", "fail"):
                try:
                    if action == "complete":
                        await service.complete(NS, "jobs", message_id, lease)
                    elif action == "extend":
                        await service.extend(NS, "jobs", message_id, lease, 600)
                    else:
                        await service.fail(NS, "jobs", message_id, lease, error="stale")
                except LeaseMismatchError:
                    stale_refusals[action] += 1
                else:
                    stale_successes.append(f"{action} {message_id}")

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(
            *(fresh(n) for n in range(consumers)),
            *(former_holder(n) for n in range(consumers)),
        )

    assert stale_successes == []
    assert stale_refusals == {a: len(expiring) for a in ("complete", "extend", "fail")}
    re_leased = Counter(message_id for _, message_id, _, _ in fresh_leases)
    assert set(re_leased) == expiring
    assert set(re_leased.values()) == {1}
    assert {attempt for *_, attempt in fresh_leases} == {2}
    assert not {lease for _, _, lease, _ in fresh_leases} & set(stale.values())
    rows = await fetch(
        engine,
        "SELECT id, state::text AS state, attempts, lease_id::text AS lease_id, last_error "
        "FROM messages WHERE queue_id = :q",
        q=queue.id,
    )
    assert {row["state"] for row in rows} == {"completed"}
    for row in rows:
        if row["id"] in expiring:
            assert row["attempts"] == 2
            assert row["lease_id"] != stale[row["id"]]
            assert row["last_error"] == "lease expired"  # the stale fail changed nothing
        else:
            assert (row["attempts"], row["lease_id"]) == (1, stale[row["id"]])


async def test_expired_exclusive_leases_free_their_values(
    service: QueueService, engine: AsyncEngine
):
    """A consumer that dies holding a value blocks it only until its lease is released."""
    queue, ids = await exclusive_setup(service, values=10, per_value=3)
    claim = service_claim(service)
    barrier = asyncio.Barrier(8)
    await warm_pool(engine, 8)
    all_values = [f"p{v:02}" for v in range(10)]
    first_round: list[Claimed] = []

    async def hoarder(_: int) -> None:
        await barrier.wait()
        while batch := await claim(3):
            first_round.extend(batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(hoarder(n) for n in range(8)))
    # Every value is taken exactly once; nothing more can be leased.
    assert sorted(c.value for c in first_round) == all_values
    assert await claim(10) == []

    await expire_leases(engine, queue=queue)
    assert await release_expired(engine) == 10
    second_round: list[Claimed] = []

    async def taker(_: int) -> None:
        await barrier.wait()
        while batch := await claim(3):
            second_round.extend(batch)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(taker(n) for n in range(8)))
    # Each value is leased again, once, by other consumers.
    assert sorted(c.value for c in second_round) == all_values
    assert not {c.lease_id for c in second_round} & {c.lease_id for c in first_round}
    running = await fetch(
        engine,
        "SELECT exclusive_value FROM messages WHERE queue_id = :q AND state = 'running'",
        q=queue.id,
    )
    assert sorted(r["exclusive_value"] for r in running) == all_values
    for stale in first_round:
        with pytest.raises(LeaseMismatchError):
            await service.complete(NS, "ex", stale.id, stale.lease_id)
    for current in second_round:
        await service.complete(NS, "ex", current.id, current.lease_id)
    assert len(await service.dequeue(NS, "ex", count=10)) == 10
    assert len(ids) == 30


# ==============================================================================================
# idempotent enqueue under concurrency, and deadlocks between overlapping claims
# ==============================================================================================


async def test_concurrent_idempotent_enqueues_create_each_id_once(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "q")
    ids = [f"k{i:03}" for i in range(200)]
    producers = 8
    creators: dict[str, list[int]] = defaultdict(list)
    barrier = asyncio.Barrier(producers)
    await warm_pool(engine, producers)

    async def producer(number: int) -> None:
        await barrier.wait()
        for start in range(0, len(ids), 50):
            chunk = ids[start : start + 50]
            batch = [NewMessage(id=i, payload=str(number).encode()) for i in chunk]
            outcomes = await service.enqueue(NS, "q", batch)
            assert [o.id for o in outcomes] == chunk
            for outcome in outcomes:
                if outcome.created:
                    creators[outcome.id].append(number)

    async with asyncio.timeout(TIMEOUT):
        await asyncio.gather(*(producer(n) for n in range(producers)))
    assert sorted(creators) == ids
    assert {i: len(c) for i, c in creators.items()} == dict.fromkeys(ids, 1)
    rows = await fetch(
        engine, "SELECT id, payload::text AS payload FROM messages WHERE queue_id = :q", q=queue.id
    )
    assert len(rows) == len(ids)
    # The creator's payload is kept: a later duplicate never overwrites it.
    assert {r["id"]: int(r["payload"]) for r in rows} == {i: c[0] for i, c in creators.items()}


async def fast_deadlock_detection(engine: AsyncEngine) -> None:
    """New connections to this test's database detect deadlocks after 100 ms (instead of 1 s);
    the pool is emptied so that the service's connections pick the setting up."""
    async with engine.begin() as conn:
        await conn.execute(
            sa.text(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = %L', "
                "current_database(), '100ms'); END $$"
            )
        )
    await engine.dispose()


async def test_overlapping_enqueues_in_opposite_order_both_succeed(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "q")
    await fast_deadlock_detection(engine)
    insert = sa.text(
        "INSERT INTO messages (queue_id, id, priority, state, visible_at) "
        "VALUES (:q, :id, 0, 'pending', now()) ON CONFLICT DO NOTHING"
    )
    async with engine.connect() as other:
        # The other producer: inserts x, then y, in one transaction (as one enqueue of [x, y]
        # does row by row). It waits long before checking for deadlocks, so that the service's
        # side is the one PostgreSQL picks as the victim.
        await other.execute(sa.text("SET deadlock_timeout = '10s'"))
        other_created = {"x": (await other.execute(insert, {"q": queue.id, "id": "x"})).rowcount}
        racing = asyncio.create_task(
            service.enqueue(NS, "q", [NewMessage(id="y"), NewMessage(id="x")])
        )
        await wait_for_lock_wait(engine)  # the service's enqueue inserted y and waits on x
        other_created["y"] = (await other.execute(insert, {"q": queue.id, "id": "y"})).rowcount
        await other.commit()
        outcomes = await racing
    assert [o.id for o in outcomes] == ["y", "x"]
    for outcome in outcomes:
        assert other_created[outcome.id] + outcome.created == 1, outcome
    assert await states_of(engine, queue) == {"x": "pending", "y": "pending"}


async def test_exclusive_claims_in_opposite_value_order_do_not_fail(
    service: QueueService, engine: AsyncEngine
):
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        NS,
        "ex",
        [
            # x1 and y1 are not ready: the service's claim sees x2 and y2 as the values' first.
            NewMessage(id="x1", priority=1, metadata={"project": "x"}, delay_seconds=3600),
            NewMessage(id="y2", priority=2, metadata={"project": "y"}),
            NewMessage(id="x2", priority=3, metadata={"project": "x"}),
            NewMessage(id="y1", priority=4, metadata={"project": "y"}, delay_seconds=3600),
        ],
    )
    await fast_deadlock_detection(engine)
    to_running = sa.text(
        "UPDATE messages SET state = 'running', attempts = attempts + 1, "
        "lease_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' "
        "WHERE queue_id = :q AND id = :id"
    )
    async with engine.connect() as other:
        # Another consumer's claim of {x1, y1}, granted row by row: x first, then y.
        await other.execute(sa.text("SET deadlock_timeout = '10s'"))
        await other.execute(to_running, {"q": queue.id, "id": "x1"})
        # The service's claim takes y2, then x2: y first, then x.
        racing = asyncio.create_task(service.dequeue(NS, "ex", count=2))
        await wait_for_lock_wait(engine)
        await other.execute(to_running, {"q": queue.id, "id": "y1"})
        await other.commit()
        leased = await racing
    assert leased == []  # both values are taken by the other consumer
    assert await states_of(engine, queue) == {
        "x1": "running",
        "y1": "running",
        "x2": "pending",
        "y2": "pending",
    }
