"""The kept counts (migration 0010: ``queue_state_counts`` plus the deltas the triggers on
``messages`` append, folded by the scheduler) are exactly the messages per queue and state.

A seeded random walk drives every path that changes a message, through the queue service, the
scheduler's maintenance and bulk loads (COPY, and INSERT … SELECT from a staging table as the
data pipeline loads), and after every step compares what the reads report with ``count(*)``
over ``messages``, both read in one snapshot. A second test runs writers, folds and those
comparisons concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import SundialError
from app.core.models import LeaseRef, MessageChanges, NewMessage, Queue
from app.core.service import QueueService
from app.core.states import State
from app.database_url import psycopg_dsn
from app.store import maintenance
from app.store.sql.reads import MESSAGES_COUNT_BY_STATE
from app.store.stats import read_database_stats
from tests.helpers import execute, expire_leases, fetch, make_due, make_queue, shift_back

Counts = dict[tuple[int, str], int]

REAL_COUNTS = sa.text(
    "SELECT queue_id, state::text AS state, count(*) AS n FROM messages GROUP BY 1, 2"
)
QUEUE_IDS = sa.text("SELECT id FROM queues")

# The walk's queues: retries straight to pending, retries through invisible, and exclusivity.
QUEUES: dict[str, dict[str, Any]] = {
    "plain": {"max_attempts": 2},
    "backoff": {"max_attempts": 3, "retry_delay_seconds": 60},
    "exclusive": {"kind": "exclusive", "exclusive_key": "k", "max_attempts": 2},
}


async def snapshot(engine: AsyncEngine) -> tuple[Counts, Counts]:
    """The real counts and the kept ones, read in one REPEATABLE READ transaction."""
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            real = {(r.queue_id, r.state): r.n for r in await conn.execute(REAL_COUNTS)}
            ids = list((await conn.execute(QUEUE_IDS)).scalars())
            rows = await conn.execute(MESSAGES_COUNT_BY_STATE, {"queue_ids": ids})
            kept = {(r.queue_id, r.state): r.n for r in rows}
    return real, kept


async def assert_exact(engine: AsyncEngine, service: QueueService) -> None:
    """What every read reports equals count(*) over messages."""
    real, kept = await snapshot(engine)
    assert kept == real
    # The service's answer (GET …/queues), and the metrics' gauges and oldest ages.
    for queue, counts in await service.list_queues("ns"):
        assert {s: n for s, n in counts.items() if n} == {
            State(state): n for (queue_id, state), n in real.items() if queue_id == queue.id
        }
    oldest = {
        row["queue_id"]: row["age"]
        for row in await fetch(
            engine,
            "SELECT queue_id, extract(epoch FROM now() - min(visible_at)) AS age FROM messages "
            "WHERE state = 'pending' GROUP BY queue_id",
        )
    }
    for depth in (await read_database_stats(engine)).queues:
        for state in ("invisible", "pending", "running"):
            assert getattr(depth, state) == real.get((depth.queue_id, state), 0)
        if depth.queue_id in oldest:
            assert depth.oldest_pending_age == pytest.approx(float(oldest[depth.queue_id]), abs=1)
        else:
            assert depth.oldest_pending_age is None


async def assert_folded(engine: AsyncEngine) -> None:
    """After a fold: no delta left, and the counts alone are the real ones, with no zero row
    and no row of a queue that no longer exists."""
    assert await fetch(engine, "SELECT * FROM queue_state_count_deltas") == []
    base = {
        (r["queue_id"], r["state"]): r["n"]
        for r in await fetch(
            engine, "SELECT queue_id, state::text AS state, n FROM queue_state_counts"
        )
    }
    real, _ = await snapshot(engine)
    assert base == real


class Walk:
    """One random walk over every path that changes a message."""

    def __init__(self, service: QueueService, engine: AsyncEngine, seed: int) -> None:
        self.service, self.engine = service, engine
        self.rng = random.Random(seed)
        self.leases: dict[tuple[str, str], str] = {}
        self.copied = 0

    def queue(self) -> str:
        return self.rng.choice(list(QUEUES))

    def message_id(self) -> str:
        return f"m{self.rng.randrange(30)}"

    def new_message(self, queue: str) -> NewMessage:
        rng = self.rng
        return NewMessage(
            id=self.message_id() if rng.random() < 0.9 else None,
            payload=b'"x"',
            metadata={"k": rng.choice("abc")} if queue == "exclusive" else {},
            delay_seconds=rng.choice([None, None, 0, 120]),
            ttl_seconds=rng.choice([None, None, 600]),
        )

    async def enqueue(self) -> None:
        queue = self.queue()
        count = self.rng.choice([1, 1, 2, 5, 8])
        await self.service.enqueue("ns", queue, [self.new_message(queue) for _ in range(count)])

    async def dequeue(self) -> None:
        queue = self.queue()
        for leased in await self.service.dequeue("ns", queue, count=self.rng.randint(1, 5)):
            self.leases[queue, leased.id] = leased.lease_id

    def lease(self) -> tuple[str, str, str] | None:
        """A lease this walk was granted and has not used up (it may have expired since)."""
        if not self.leases:
            return None
        (queue, message_id), lease_id = self.rng.choice(sorted(self.leases.items()))
        del self.leases[queue, message_id]
        return queue, message_id, lease_id

    async def pick(self, *states: State) -> tuple[str, str]:
        """A message in one of ``states`` (queue name, id), else any queue and id."""
        rows = await fetch(
            self.engine,
            "SELECT q.name, m.id FROM messages m JOIN queues q ON q.id = m.queue_id "
            "WHERE m.state = ANY(CAST(:states AS message_state[])) ORDER BY 1, 2",
            states=[str(s) for s in states],
        )
        if rows and self.rng.random() < 0.9:
            row = self.rng.choice(rows)
            return row["name"], row["id"]
        return self.queue(), self.message_id()

    async def complete(self) -> None:
        if held := self.lease():
            await self.service.complete("ns", *held)

    async def fail(self) -> None:
        if held := self.lease():
            delay = self.rng.choice([None, 0, 30])
            await self.service.fail("ns", *held, error="boom", retry_delay_seconds=delay)

    async def extend(self) -> None:
        if held := self.lease():
            await self.service.extend("ns", *held, 60)

    async def ack(self) -> None:
        queue = self.queue()
        mine = [LeaseRef(m, lease) for (q, m), lease in sorted(self.leases.items()) if q == queue]
        self.leases = {key: lease for key, lease in self.leases.items() if key[0] != queue}
        split = self.rng.randint(0, len(mine))
        await self.service.ack("ns", queue, mine[:split], mine[split:])

    async def cancel(self) -> None:
        force = self.rng.random() < 0.7
        queue, message_id = await self.pick(State.INVISIBLE, State.PENDING, State.RUNNING)
        await self.service.cancel("ns", queue, message_id, force=force)

    async def delete(self) -> None:
        await self.service.delete_message("ns", *await self.pick(*State))

    async def requeue(self) -> None:
        delay = self.rng.choice([0, 60])
        queue, message_id = await self.pick(State.ERRORED, State.CANCELED)
        await self.service.requeue("ns", queue, message_id, delay)

    async def requeue_dead_letters(self) -> None:
        states = self.rng.choice([("errored",), ("canceled",), ("errored", "canceled")])
        await self.service.requeue_dead_letters("ns", self.queue(), states)

    async def update(self) -> None:
        when = datetime.now(UTC) + timedelta(seconds=self.rng.choice([-60, 120]))
        changes = MessageChanges(visible_at=when, priority=self.rng.randint(0, 9))
        queue, message_id = await self.pick(State.INVISIBLE, State.PENDING)
        await self.service.update_message("ns", queue, message_id, changes)

    async def purge(self) -> None:
        states = self.rng.sample([str(s) for s in State], self.rng.randint(1, 3))
        await self.service.purge_queue("ns", self.queue(), states)

    async def scheduler(self) -> None:
        """Time passes for some messages, then the leader's tick (which folds) or archive."""
        rng = self.rng
        action = rng.choice(["leases", "due", "expiry", "archive", "fold"])
        if action == "leases":
            await expire_leases(self.engine)
        elif action == "due":
            await make_due(self.engine)
        elif action == "expiry":
            _, message_id = await self.pick(State.INVISIBLE, State.PENDING, State.RUNNING)
            await shift_back(self.engine, "expires_at", 3600, ids=[message_id])
        elif action == "archive":
            _, message_id = await self.pick(State.COMPLETED, State.CANCELED, State.ERRORED)
            await shift_back(self.engine, "finished_at", 8 * 86_400, ids=[message_id])
            async with self.engine.connect() as conn:
                await maintenance.archive_finished(conn)
        async with self.engine.connect() as conn:
            if action == "fold":
                await maintenance.fold_counts(conn)
            else:
                await maintenance.tick(conn)
        if action == "fold":
            await assert_folded(self.engine)

    async def bulk_insert(self) -> None:
        """A bulk load as the data pipeline makes one: COPY into a staging table, then one
        INSERT … SELECT … ON CONFLICT DO NOTHING; or COPY straight into messages."""
        queue = await self.service.get_queue_or_404("ns", self.rng.choice(["plain", "backoff"]))
        url = self.engine.url.render_as_string(hide_password=False)
        conn = await psycopg.AsyncConnection.connect(psycopg_dsn(url))
        async with conn, conn.transaction():
            if self.rng.random() < 0.5:
                self.copied += 1
                now = datetime.now(UTC).isoformat()
                rows = "".join(f"{queue.id},c{self.copied}-{n},0,pending,{now}\n" for n in range(4))
                columns = "queue_id, id, priority, state, visible_at"
                copy_sql = f"COPY messages ({columns}) FROM STDIN (FORMAT csv)"
                async with conn.cursor().copy(copy_sql) as copy:
                    await copy.write(rows.encode())
                return
            await conn.execute("CREATE TEMPORARY TABLE stage (ord int, id text) ON COMMIT DROP")
            async with conn.cursor().copy("COPY stage (ord, id) FROM STDIN (FORMAT csv)") as copy:
                await copy.write("".join(f"{n},{self.message_id()}\n" for n in range(6)).encode())
            await conn.execute(
                "INSERT INTO messages (queue_id, id, priority, state, visible_at)"
                " SELECT %(queue_id)s, id, 0, 'pending', now() FROM stage ORDER BY ord"
                " ON CONFLICT (queue_id, id) DO NOTHING",
                {"queue_id": queue.id},
            )

    async def recreate_queue(self) -> None:
        """Delete a queue with its messages, and create it again (a new queue, a new id)."""
        name = self.queue()
        await self.service.delete_queue("ns", name)
        self.leases = {key: lease for key, lease in self.leases.items() if key[0] != name}
        queue = await make_queue(self.service, "ns", name, **QUEUES[name])
        assert (await self.service.queue_detail("ns", name)).stats.counts == {}
        assert queue.id not in {q for q, _ in (await snapshot(self.engine))[1]}

    def steps(self) -> list[tuple[float, Callable[[], Awaitable[None]]]]:
        return [
            (6, self.enqueue),
            (5, self.dequeue),
            (3, self.complete),
            (3, self.fail),
            (1, self.extend),
            (2, self.ack),
            (2, self.cancel),
            (1, self.delete),
            (2, self.requeue),
            (1, self.requeue_dead_letters),
            (2, self.update),
            (0.5, self.purge),
            (4, self.scheduler),
            (0.5, self.bulk_insert),
            (0.3, self.recreate_queue),
        ]

    async def run(self, steps: int) -> None:
        weights, actions = zip(*self.steps(), strict=True)
        for _ in range(steps):
            action = self.rng.choices(actions, weights)[0]
            # A refusal (a stale lease, a wrong state, an unknown id) changes nothing.
            with contextlib.suppress(SundialError):
                await action()
            await assert_exact(self.engine, self.service)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_counts_stay_exact_through_every_change(service, engine, seed):
    for name, config in QUEUES.items():
        await make_queue(service, "ns", name, **config)
    walk = Walk(service, engine, seed)
    await walk.run(120)
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    await assert_folded(engine)
    # Deleting the namespace deletes every queue and message: nothing is left to count.
    await service.delete_namespace("ns")
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    assert await fetch(engine, "SELECT * FROM queue_state_counts") == []


async def test_counts_stay_exact_under_concurrent_writers_and_folds(service, engine):
    queues = [await make_queue(service, "ns", f"q{n}", max_attempts=2) for n in range(2)]
    writers_done = asyncio.Event()

    async def writer(number: int, queue: Queue) -> None:
        rng = random.Random(number)
        for round_ in range(25):
            batch = [NewMessage(id=f"w{number}-{round_}-{k}") for k in range(rng.randint(1, 6))]
            await service.enqueue("ns", queue.name, batch)
            for leased in await service.dequeue("ns", queue.name, count=rng.randint(1, 4)):
                if rng.random() < 0.7:
                    await service.complete("ns", queue.name, leased.id, leased.lease_id)
                else:
                    await service.fail("ns", queue.name, leased.id, leased.lease_id)

    async def folder() -> int:
        folds = 0
        async with engine.connect() as conn:
            while not writers_done.is_set():
                await maintenance.fold_counts(conn)
                folds += 1
                await asyncio.sleep(0)
        return folds

    async def checker() -> int:
        checks = 0
        while not writers_done.is_set():
            real, kept = await snapshot(engine)
            assert kept == real
            checks += 1
        return checks

    async def writers() -> None:
        try:
            await asyncio.gather(*(writer(n, queues[n % 2]) for n in range(6)))
        finally:
            writers_done.set()

    _, folds, checks = await asyncio.gather(writers(), folder(), checker())
    assert folds > 0
    assert checks > 0
    await assert_exact(engine, service)
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    await assert_folded(engine)


async def test_a_statement_that_changes_no_state_appends_no_delta(service, engine):
    await make_queue(service, "ns", "q")
    await service.enqueue("ns", "q", [NewMessage(id="a"), NewMessage(id="b")])
    [leased] = await service.dequeue("ns", "q")
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    await service.extend("ns", "q", leased.id, leased.lease_id, 60)
    await service.update_message("ns", "q", "b", MessageChanges(priority=5))
    await service.enqueue("ns", "q", [NewMessage(id="b")])  # taken: nothing inserted
    assert await fetch(engine, "SELECT * FROM queue_state_count_deltas") == []
    # A batch appends one row per queue and state it changed, with the net change.
    await service.enqueue("ns", "q", [NewMessage(id=f"n{k}") for k in range(5)])
    assert await fetch(
        engine, "SELECT state::text AS state, delta FROM queue_state_count_deltas"
    ) == [{"state": "pending", "delta": 5}]


async def test_truncating_messages_empties_the_counts(service, engine):
    await make_queue(service, "ns", "q")
    await service.enqueue("ns", "q", [NewMessage(id=f"m{k}") for k in range(3)])
    async with engine.connect() as conn:
        await maintenance.fold_counts(conn)
    await service.enqueue("ns", "q", [NewMessage(id="late")])
    await execute(engine, "TRUNCATE messages")
    assert await fetch(engine, "SELECT * FROM queue_state_counts") == []
    assert await fetch(engine, "SELECT * FROM queue_state_count_deltas") == []
    await assert_exact(engine, service)
