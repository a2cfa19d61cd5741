"""The statements that end a failed attempt apply the state machine's rule, and no other.

``retry_target`` and ``backoff_seconds`` (app/core/states.py) say where a failed or
lease-expired attempt goes and how long it waits; the store applies that rule in SQL
(app/store/sql/retry.py). These tests run the very statements the store runs (a client's fail,
one message or a batch, and the scheduler's release of an expired lease) across attempts,
attempt limits (the queue's and a message's own) and retry delays (the queue's backoff, capped,
and a client's explicit delay), and hold each outcome (state, ``visible_at``, ``finished_at``) to
those two functions, so that the SQL and the table cannot drift apart.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.models import Queue
from app.core.service import QueueService
from app.core.states import Event, State, backoff_seconds, retry_target, targets
from app.store import batches
from app.store.rows import queue_params
from app.store.sql.guards import from_states
from app.store.sql.scheduler import MESSAGES_RELEASE_IF_LEASE_EXPIRED
from app.store.sql.transitions import MESSAGE_FAIL_IF_LEASED, MESSAGES_FAIL_IF_LEASED
from tests.helpers import execute, make_queue

NS = "ns"
QUEUE_MAX_ATTEMPTS = 4
BACKOFFS = [(0, 3600), (1, 2), (5, 60), (10, 35), (3, 3), (7, 0)]  # (retry_delay_seconds, max), raw
ATTEMPTS = [1, 2, 3, 4, 6]
OVERRIDES = [None, 1, 3, 5]  # a message's own max_attempts
CLIENT_DELAYS = [None, 0, 1, 7]  # a fail's retry_delay_seconds
VISIBLE_BEFORE = datetime(2000, 1, 1).astimezone()


@dataclass(frozen=True)
class Case:
    id: str
    attempts: int
    max_attempts: int | None
    client_delay: int | None = None


async def _queue(
    service: QueueService, engine: AsyncEngine, name: str, base: int, cap: int
) -> Queue:
    """A queue whose backoff is ``base`` doubling up to ``cap`` (set behind validation's back, so
    that a cap below the base is tried too)."""
    queue = await make_queue(service, NS, name)
    await execute(
        engine,
        "UPDATE queues SET retry_delay_seconds = :base, retry_delay_max_seconds = :cap,"
        " max_attempts = :max WHERE id = :id",
        base=base,
        cap=cap,
        max=QUEUE_MAX_ATTEMPTS,
        id=queue.id,
    )
    found = await service.store.get_queue(NS, name)
    assert found is not None
    return found


async def _running(engine: AsyncEngine, queue: Queue, cases: list[Case], *, expired: bool) -> str:
    """Insert ``cases`` as running messages under one lease; returns the lease id."""
    lease = str(uuid.uuid4())
    expiry = "now() - interval '1 second'" if expired else "now() + interval '1 hour'"
    for case in cases:
        await execute(
            engine,
            "INSERT INTO messages (queue_id, id, priority, state, attempts, max_attempts,"
            " lease_id, lease_expires_at, visible_at)"
            f" VALUES (:queue_id, :id, 0, 'running', :attempts, :max, :lease, {expiry}, :visible)",
            queue_id=queue.id,
            id=case.id,
            attempts=case.attempts,
            max=case.max_attempts,
            lease=lease,
            visible=VISIBLE_BEFORE,
        )
    return lease


async def _outcomes(conn: AsyncConnection, queue: Queue) -> dict[str, Any]:
    rows = await conn.execute(
        sa.text(
            "SELECT id, state::text AS state, visible_at, finished_at, attempts FROM messages"
            " WHERE queue_id = :queue_id"
        ),
        {"queue_id": queue.id},
    )
    return {row.id: row for row in rows}


def _check(queue: Queue, case: Case, row: Any, now: datetime, event: Event) -> None:
    """``row`` is where ``retry_target`` and ``backoff_seconds`` send ``case`` at ``now``."""
    config = queue.config
    delay = case.client_delay
    if delay is None:
        delay = backoff_seconds(
            attempt=case.attempts,
            base_seconds=config.retry_delay_seconds,
            cap_seconds=config.retry_delay_max_seconds,
        )
    limit = case.max_attempts if case.max_attempts is not None else config.max_attempts
    expected = retry_target(attempts=case.attempts, max_attempts=limit, delay_seconds=delay)
    assert expected in targets(State.RUNNING, event)
    assert (row.state, row.attempts) == (expected, case.attempts), (event, case, config)
    if expected is State.ERRORED:
        assert (row.visible_at, row.finished_at) == (VISIBLE_BEFORE, now), (event, case, config)
    else:
        assert row.visible_at == now + timedelta(seconds=delay), (event, case, config)
        assert row.finished_at is None, (event, case, config)


async def _now(conn: AsyncConnection) -> datetime:
    """The transaction's ``now()``: the clock of every statement in it."""
    return (await conn.execute(sa.text("SELECT now()"))).scalar_one()


async def test_a_clients_fail_applies_the_retry_rule(
    service: QueueService, engine: AsyncEngine
) -> None:
    for n, (base, cap) in enumerate(BACKOFFS):
        queue = await _queue(service, engine, f"fail{n}", base, cap)
        cases = [
            Case(f"m{i}", attempts, limit, delay)
            for i, (attempts, limit, delay) in enumerate(
                itertools.product(ATTEMPTS, OVERRIDES, CLIENT_DELAYS)
            )
        ]
        lease = await _running(engine, queue, cases, expired=False)
        async with engine.begin() as conn:
            now = await _now(conn)
            for case in cases:
                params = {
                    **queue_params(queue),
                    "id": case.id,
                    "from_states": from_states(Event.FAIL),
                    "lease_id": lease,
                    "error": "boom",
                    "retry_delay": case.client_delay,
                }
                assert (await conn.execute(MESSAGE_FAIL_IF_LEASED, params)).first() is not None
            rows = await _outcomes(conn, queue)
        for case in cases:
            _check(queue, case, rows[case.id], now, Event.FAIL)


async def test_a_batch_fail_applies_the_retry_rule(
    service: QueueService, engine: AsyncEngine
) -> None:
    for n, (base, cap) in enumerate(BACKOFFS):
        queue = await _queue(service, engine, f"batch{n}", base, cap)
        cases = [
            Case(f"m{i}", attempts, limit)
            for i, (attempts, limit) in enumerate(itertools.product(ATTEMPTS, OVERRIDES))
        ]
        lease = await _running(engine, queue, cases, expired=False)
        items = batches.failed_items([(case.id, lease, "boom") for case in cases])
        params = {
            **queue_params(queue),
            "items": items,
            "retry_delay": None,
            "from_states": from_states(Event.FAIL),
        }
        async with engine.begin() as conn:
            now = await _now(conn)
            failed = (await conn.execute(MESSAGES_FAIL_IF_LEASED, params)).all()
            rows = await _outcomes(conn, queue)
        assert len(failed) == len(cases)
        for case in cases:
            _check(queue, case, rows[case.id], now, Event.FAIL)


async def test_a_lease_expiry_applies_the_retry_rule(
    service: QueueService, engine: AsyncEngine
) -> None:
    queues = [
        await _queue(service, engine, f"q{n}", *backoff) for n, backoff in enumerate(BACKOFFS)
    ]
    cases = [
        Case(f"m{i}", attempts, limit)
        for i, (attempts, limit) in enumerate(itertools.product(ATTEMPTS, OVERRIDES))
    ]
    for queue in queues:
        await _running(engine, queue, cases, expired=True)
    params = {"from_states": from_states(Event.LEASE_EXPIRE), "batch": 10_000}
    async with engine.begin() as conn:
        now = await _now(conn)
        released = (await conn.execute(MESSAGES_RELEASE_IF_LEASE_EXPIRED, params)).all()
        outcomes = {queue.id: await _outcomes(conn, queue) for queue in queues}
    assert sum(row.n for row in released) == len(queues) * len(cases)
    for queue in queues:
        for case in cases:
            _check(queue, case, outcomes[queue.id][case.id], now, Event.LEASE_EXPIRE)
