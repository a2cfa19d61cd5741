"""Concurrent enqueues and completes share statements (app/store/coalesce.py) and still answer
each request as if it had been written alone: on a real database, many one-message requests of
one queue are all stored (or completed) with fewer statements than requests, an id two requests
share is created once and reported to the later one as existing, a complete with a stale
lease is refused while the others of its statement complete, and joined dequeues each get
messages of their own; with a stand-in writer, a refused
value fails only its own request, a database error fails every joined request, and a request
whose caller left does not stop the others."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import LeaseMismatchError, UnavailableError, ValidationError
from app.core.models import EnqueueOutcome, NewMessage, Queue, QueueConfig
from app.core.ports import NewRow
from app.core.service import QueueService
from app.core.states import State
from app.store.coalesce import MAX_JOINED_ITEMS, StatementJoiner
from app.store.postgres import PostgresStore
from tests.helpers import count_messages, make_queue, states_of

GUARD: dict[str, Any] = {"catalogue_version": None, "valid_until": None}


async def test_concurrent_requests_share_statements(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, name="busy")
    store = service.store
    assert isinstance(store, PostgresStore)
    requests = [
        service.enqueue("ns", "busy", [NewMessage(id=f"m{i}", payload=b"1")]) for i in range(60)
    ]
    answers = await asyncio.gather(*requests)
    assert [[(o.id, o.created) for o in a] for a in answers] == [
        [(f"m{i}", True)] for i in range(60)
    ]
    assert await count_messages(engine, queue.id) == 60
    assert store._joined_enqueues is not None
    assert store._joined_enqueues.statements < 60


async def test_an_id_two_requests_share_is_created_once(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, name="same")
    answers = await asyncio.gather(
        *(
            service.enqueue("ns", "same", [NewMessage(id="x", payload=str(i).encode())])
            for i in range(5)
        )
    )
    created = [a[0].created for a in answers]
    assert created.count(True) == 1
    assert {a[0].state for a in answers} == {State.PENDING}
    assert await count_messages(engine, queue.id) == 1


async def test_concurrent_completes_share_statements(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, name="done")
    await service.enqueue("ns", "done", [NewMessage(id=f"m{i}", payload=b"1") for i in range(40)])
    leased = await service.dequeue("ns", "done", count=40)
    stale = "00000000-0000-0000-0000-000000000000"
    answers = await asyncio.gather(
        *(
            service.complete("ns", "done", m.id, stale if m.id == "m7" else m.lease_id)
            for m in leased
        ),
        return_exceptions=True,
    )
    by_id = {m.id: answer for m, answer in zip(leased, answers, strict=True)}
    assert isinstance(by_id.pop("m7"), LeaseMismatchError)
    assert {a.state for a in by_id.values() if not isinstance(a, BaseException)} == {
        State.COMPLETED
    }
    assert all(a.id == i for i, a in by_id.items() if not isinstance(a, BaseException))
    states = await states_of(engine, queue)
    assert states.pop("m7") == "running"
    assert set(states.values()) == {"completed"}
    store = service.store
    assert isinstance(store, PostgresStore)
    assert store._joined_completes is not None
    assert store._joined_completes.statements < 40


async def test_concurrent_dequeues_share_claims(service: QueueService, engine: AsyncEngine) -> None:
    queue = await make_queue(service, name="claims")
    messages = [NewMessage(id=f"m{i:02}", payload=b"1", priority=i) for i in range(30)]
    messages += [NewMessage(id=f"t{i}", payload=b"1", metadata={"t": "x"}) for i in range(3)]
    await service.enqueue("ns", "claims", messages)
    answers = await asyncio.gather(
        *(service.dequeue("ns", "claims", count=1) for _ in range(30)),
        service.dequeue("ns", "claims", count=3, metadata={"t": "x"}),
    )
    *singles, filtered = answers
    assert sorted(m.id for m in filtered) == ["t0", "t1", "t2"]  # another filter: its own claim
    leased = [m.id for answer in singles for m in answer]
    assert len(leased) == len(set(leased)) == 30  # no message twice, none lost
    states = await states_of(engine, queue)
    assert set(states.values()) == {"running"}
    store = service.store
    assert isinstance(store, PostgresStore)
    assert store._joined_claims is not None
    assert store._joined_claims.statements < 31


def _queue() -> Queue:
    now = datetime.now(UTC)
    return Queue(1, "ns", "q", QueueConfig(), now, now)


def _row_id(row: NewRow) -> str:
    return row.id


def _row(message_id: str) -> NewRow:
    return NewRow(message_id, None, b"1", {}, None, None, None, 0, None, None, None)


class StandInWriter:
    """Writes by recording the statements; refuses a row whose id starts with ``bad``, and
    fails every statement while ``down``."""

    def __init__(self) -> None:
        self.statements: list[list[str]] = []
        self.down = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(
        self, queue: Queue, rows: Sequence[NewRow], guard: dict[str, Any]
    ) -> list[EnqueueOutcome]:
        await self.gate.wait()
        self.statements.append([r.id for r in rows])
        if self.down:
            raise UnavailableError("the database is unavailable")
        if any(r.id.startswith("bad") for r in rows):
            raise ValidationError("request", "a value the database refuses")
        return [EnqueueOutcome(r.id, State.PENDING, True) for r in rows]


async def test_a_refused_value_fails_only_its_own_request() -> None:
    writer = StandInWriter()
    coalescer = StatementJoiner(writer, _row_id)
    writer.gate.clear()  # hold the first statement, so that the others join the next
    first = asyncio.create_task(coalescer.run(_queue(), [_row("a")], GUARD))
    await asyncio.sleep(0)
    later = [
        asyncio.create_task(coalescer.run(_queue(), [_row(i)], GUARD)) for i in ("b", "bad", "c")
    ]
    await asyncio.sleep(0)
    writer.gate.set()
    assert [o.id for o in await first] == ["a"]
    assert [o.id for o in await later[0]] == ["b"]
    with pytest.raises(ValidationError):
        await later[1]
    assert [o.id for o in await later[2]] == ["c"]
    # a alone, then b, bad and c joined (refused), then each alone again.
    assert writer.statements == [["a"], ["b", "bad", "c"], ["b"], ["bad"], ["c"]]


async def test_a_database_error_fails_every_joined_request() -> None:
    writer = StandInWriter()
    writer.down = True
    coalescer = StatementJoiner(writer, _row_id)
    writer.gate.clear()
    tasks = [asyncio.create_task(coalescer.run(_queue(), [_row(i)], GUARD)) for i in "abc"]
    await asyncio.sleep(0)
    writer.gate.set()
    for task in tasks:
        with pytest.raises(UnavailableError):
            await task
    assert writer.statements == [["a", "b", "c"]]


async def test_requests_are_joined_only_when_they_fit_and_share_no_id() -> None:
    writer = StandInWriter()
    coalescer = StatementJoiner(writer, _row_id)
    writer.gate.clear()
    big = [_row(f"big{i}") for i in range(MAX_JOINED_ITEMS - 1)]
    tasks = [asyncio.create_task(coalescer.run(_queue(), [_row("first")], GUARD))]
    await asyncio.sleep(0)
    tasks += [
        asyncio.create_task(coalescer.run(_queue(), rows, GUARD))
        for rows in ([_row("x")], [_row("x")], big, [_row("y")])
    ]
    other_guard = {"catalogue_version": 7, "valid_until": None}
    tasks.append(asyncio.create_task(coalescer.run(_queue(), [_row("z")], other_guard)))
    await asyncio.sleep(0)
    writer.gate.set()
    await asyncio.gather(*tasks)
    sizes = sorted(len(s) for s in writer.statements)
    # "first" alone; "z" alone (another guard); x + big joined (999 + 1 = 1000); then the
    # second x (an id already in that statement) with y.
    assert ["z"] in writer.statements
    assert ["x", *[r.id for r in big]] in writer.statements
    assert ["x", "y"] in writer.statements
    assert sizes == [1, 1, 2, MAX_JOINED_ITEMS]


async def test_a_request_whose_caller_left_does_not_stop_the_others() -> None:
    writer = StandInWriter()
    coalescer = StatementJoiner(writer, _row_id)
    writer.gate.clear()
    leaving = asyncio.create_task(coalescer.run(_queue(), [_row("a")], GUARD))
    staying = asyncio.create_task(coalescer.run(_queue(), [_row("b")], GUARD))
    await asyncio.sleep(0)
    leaving.cancel()
    writer.gate.set()
    assert [o.id for o in await staying] == ["b"]
    assert writer.statements == [["a", "b"]]  # a is written all the same, as alone it would be
