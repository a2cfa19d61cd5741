"""The redrive pass: a queue's dead letters (``errored`` messages) move into the queue its
``dead_letter_queue`` names, pending, attempts reset, everything else kept; never lost, never
doubled, even when two passes race.

Ticks are run by hand on connections of the test's own (``maintenance.tick``), as the scheduler
runs them; dead letters are made through the service (leased, then failed with no attempt left).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import LeaseRef, NewMessage
from app.core.service import QueueService
from app.core.states import Event, State
from app.store import maintenance
from app.store.sql.guards import from_states
from app.store.sql.scheduler import MESSAGES_REDRIVE_DEAD_LETTERS
from tests.api.conftest import Caller, assert_error
from tests.helpers import fetch, make_queue

NS = "ns"


async def kill(service: QueueService, queue: str, ids: list[str]) -> None:
    """Make the pending messages ``ids`` of ``queue`` (max_attempts 1) dead letters, failed a
    hundred at a time (one call per message for the order they die in to be theirs)."""
    for chunk in (ids[i : i + 100] for i in range(0, len(ids), 100)):
        leased = await service.dequeue(NS, queue, count=len(chunk))
        assert sorted(m.id for m in leased) == sorted(chunk)
        by_id = {m.id: m for m in leased}
        refs = [LeaseRef(i, by_id[i].lease_id, error="boom") for i in chunk]
        results = await service.ack(NS, queue, [], refs)
        assert all(result.ok for result in results), results


async def census(engine: AsyncEngine) -> Counter[tuple[str, str]]:
    """How many messages each (queue, state) holds, read from the table itself."""
    rows = await fetch(
        engine,
        "SELECT q.name, m.state::text AS state, count(*) AS n FROM messages m"
        " JOIN queues q ON q.id = m.queue_id GROUP BY q.name, m.state",
    )
    return Counter({(row["name"], row["state"]): row["n"] for row in rows})


async def ids_of(engine: AsyncEngine, queue: str, state: str | None = None) -> list[str]:
    rows = await fetch(
        engine,
        "SELECT m.id FROM messages m JOIN queues q ON q.id = m.queue_id"
        " WHERE q.name = :queue AND (CAST(:state AS text) IS NULL OR m.state::text = :state)",
        queue=queue,
        state=state,
    )
    return [row["id"] for row in rows]


async def tick(engine: AsyncEngine) -> int:
    """One scheduler tick; how many dead letters it moved."""
    async with engine.connect() as conn:
        return (await maintenance.tick(conn)).redriven


async def test_dead_letters_move_into_the_target_in_one_tick_as_they_were(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Every dead letter arrives pending with attempts 0 and its id, payload, metadata,
    priority, enqueue time and expiry; none stays behind and none arrives twice."""
    await make_queue(service, NS, "dlq", max_attempts=5)
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    ids = [f"m{i}" for i in range(30)]
    sent = [
        NewMessage(
            id=message_id,
            payload=f'{{"n": {i}}}'.encode(),
            metadata={"k": str(i)},
            priority=i % 3,
            ttl_seconds=3600 if i % 2 else None,
        )
        for i, message_id in enumerate(ids)
    ]
    await service.enqueue(NS, "src", sent)
    await kill(service, "src", ids)
    before = {i: await service.get_message(NS, "src", i) for i in ids}
    assert {m.state for m in before.values()} == {State.ERRORED}

    assert await tick(engine) == 30

    assert await census(engine) == Counter({("dlq", "pending"): 30})
    for message_id, old in before.items():
        new = await service.get_message(NS, "dlq", message_id)
        assert (new.state, new.attempts, new.max_attempts) == (State.PENDING, 0, 5)
        assert (new.payload, new.metadata, new.priority) == (
            old.payload,
            old.metadata,
            old.priority,
        )
        assert (new.enqueued_at, new.expires_at) == (old.enqueued_at, old.expires_at)
        assert (new.finished_at, new.lease_id) == (None, None)
    # The counts every reader sees moved with them.
    src, dlq = [(await service.queue_detail(NS, q)).stats.counts for q in ("src", "dlq")]
    assert src.get(State.ERRORED, 0) == 0
    assert dlq.get(State.PENDING, 0) == 30
    # A second tick finds nothing more to move.
    assert await tick(engine) == 0
    assert await census(engine) == Counter({("dlq", "pending"): 30})


async def test_dead_letters_keep_the_order_they_died_in(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Dead letters moved in one tick are delivered from the target in the order they died
    (not in the order of their ids): a FIFO dead-letter queue keeps a group's order."""
    await make_queue(service, NS, "dlq", kind="exclusive", exclusive_key="g")
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    died = ["c", "a", "e", "b", "d"]
    await service.enqueue(NS, "src", [NewMessage(id=i, metadata={"g": "one"}) for i in died])
    for message_id in died:
        await kill(service, "src", [message_id])
    assert await tick(engine) == len(died)
    got = []
    for _ in died:  # one group: one message at a time, in the group's order
        (leased,) = await service.dequeue(NS, "dlq", count=10)
        got.append(leased.id)
        await service.complete(NS, "dlq", leased.id, leased.lease_id)
    assert got == died


async def test_a_dead_letter_whose_id_the_target_holds_stays_in_its_queue(
    service: QueueService, engine: AsyncEngine
) -> None:
    """The target's message of the same id is left as it is, the dead letter stays errored in
    its source, and the others move: nothing lost, nothing doubled."""
    await make_queue(service, NS, "dlq")
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    await service.enqueue(NS, "dlq", [NewMessage(id="dup", payload=b'"theirs"')])
    await service.enqueue(
        NS, "src", [NewMessage(id=i, payload=b'"ours"') for i in ("dup", "x", "y")]
    )
    await kill(service, "src", ["dup", "x", "y"])

    assert await tick(engine) == 2
    assert await census(engine) == Counter({("dlq", "pending"): 3, ("src", "errored"): 1})
    assert await ids_of(engine, "src") == ["dup"]
    assert (await service.get_message(NS, "dlq", "dup")).payload == b'"theirs"'
    assert (await service.get_message(NS, "src", "dup")).payload == b'"ours"'
    # It stays put tick after tick; once the target's message is gone, it moves.
    assert await tick(engine) == 0
    await service.purge_queue(NS, "dlq")
    assert await tick(engine) == 1
    assert await census(engine) == Counter({("dlq", "pending"): 1})
    assert (await service.get_message(NS, "dlq", "dup")).payload == b'"ours"'


async def test_dead_letters_whose_ids_are_taken_do_not_hold_back_the_others(
    service: QueueService, engine: AsyncEngine
) -> None:
    """A pass takes a batch of each source's dead letters, oldest first: the ones that cannot
    move (their id taken in the target) must not fill the batch and starve those behind them.
    Shown with a batch of 2 and two such dead letters at the head."""
    await make_queue(service, NS, "dlq")
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    await service.enqueue(NS, "dlq", [NewMessage(id="taken-1"), NewMessage(id="taken-2")])
    ids = ["taken-1", "taken-2", "free"]
    await service.enqueue(NS, "src", [NewMessage(id=i) for i in ids])
    for message_id in ids:  # they die in this order: the taken ones are the oldest
        await kill(service, "src", [message_id])
    params = {"from_states": from_states(Event.REDRIVE), "batch": 2}
    async with engine.begin() as conn:
        moved = sum(row.n for row in await conn.execute(MESSAGES_REDRIVE_DEAD_LETTERS, params))
    assert moved == 1
    assert sorted(await ids_of(engine, "dlq")) == ["free", "taken-1", "taken-2"]
    assert sorted(await ids_of(engine, "src", "errored")) == ["taken-1", "taken-2"]


async def test_two_sources_with_the_same_id_into_one_target_move_one(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Two queues' dead letters of one id, into one target: one moves, the other stays."""
    await make_queue(service, NS, "dlq")
    for source in ("s1", "s2"):
        await make_queue(service, NS, source, max_attempts=1, dead_letter_queue="dlq")
        await service.enqueue(NS, source, [NewMessage(id="same"), NewMessage(id=source)])
        await kill(service, source, ["same", source])

    assert await tick(engine) == 3
    census_now = await census(engine)
    assert census_now[("dlq", "pending")] == 3
    assert census_now[("s1", "errored")] + census_now[("s2", "errored")] == 1
    assert sum(census_now.values()) == 4


async def test_a_dead_letter_queue_naming_no_queue_keeps_the_dead_letters(
    service: QueueService, engine: AsyncEngine
) -> None:
    """A source whose dead_letter_queue does not exist keeps its dead letters, errored; once
    the queue exists, they move."""
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="nowhere")
    await service.enqueue(NS, "src", [NewMessage(id="a"), NewMessage(id="b")])
    await kill(service, "src", ["a", "b"])
    assert await tick(engine) == 0
    assert await census(engine) == Counter({("src", "errored"): 2})

    await make_queue(service, NS, "nowhere")
    assert await tick(engine) == 2
    assert await census(engine) == Counter({("nowhere", "pending"): 2})


async def test_a_queue_without_dead_letter_queue_keeps_its_dead_letters(
    service: QueueService, engine: AsyncEngine
) -> None:
    """No dead_letter_queue: the dead letters stay errored where they are."""
    await make_queue(service, NS, "plain", max_attempts=1)
    await make_queue(service, NS, "other")
    await service.enqueue(NS, "plain", [NewMessage(id="a")])
    await kill(service, "plain", ["a"])
    assert await tick(engine) == 0
    assert await census(engine) == Counter({("plain", "errored"): 1})


async def test_the_targets_keys_are_applied(service: QueueService, engine: AsyncEngine) -> None:
    """The moved message's exclusive and filter values are read with the target's keys (a FIFO
    dead-letter queue gets each message's group), and the target's exclusivity holds."""
    await make_queue(
        service, NS, "dlq", kind="exclusive", exclusive_key="group", filter_key="region"
    )
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    metadata = {
        "g1-a": {"group": "g1", "region": "eu"},
        "g1-b": {"group": "g1", "region": "us"},
        "g2-a": {"group": "g2"},
    }
    await service.enqueue(NS, "src", [NewMessage(id=i, metadata=m) for i, m in metadata.items()])
    await kill(service, "src", list(metadata))
    assert await tick(engine) == 3

    rows = await fetch(
        engine,
        "SELECT id, exclusive_value, filter_value FROM messages ORDER BY id",
    )
    assert [tuple(row.values()) for row in rows] == [
        ("g1-a", "g1", "eu"),
        ("g1-b", "g1", "us"),
        ("g2-a", "g2", None),
    ]
    # One message per group in flight: g1's second waits for its first.
    leased = await service.dequeue(NS, "dlq", count=10)
    assert sorted(m.id for m in leased) == ["g1-a", "g2-a"]
    assert await service.dequeue(NS, "dlq", count=10) == []
    first = next(m for m in leased if m.id == "g1-a")
    await service.complete(NS, "dlq", first.id, first.lease_id)
    assert [m.id for m in await service.dequeue(NS, "dlq", count=10)] == ["g1-b"]


async def test_racing_passes_move_each_dead_letter_exactly_once(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Redrive passes on several connections at once (one held open mid-transaction while
    another runs to the end) move every dead letter once: never into the target twice, never
    lost, and the moves they report add up."""
    await make_queue(service, NS, "dlq")
    sources = ("s1", "s2", "s3")
    per_source = 150
    for source in sources:
        await make_queue(service, NS, source, max_attempts=1, dead_letter_queue="dlq")
        ids = [f"{source}-{i}" for i in range(per_source)]
        # One id shared by every source: only one of them may land in the target.
        ids.append("shared")
        await service.enqueue(NS, source, [NewMessage(id=i) for i in ids])
        await kill(service, source, ids)
    total = len(sources) * (per_source + 1)
    params = {"from_states": from_states(Event.REDRIVE), "batch": 40}

    # A pass that takes 40 dead letters of each source and holds them, uncommitted, while a
    # full pass on another connection runs: it must skip them, not wait for them nor take them.
    async with engine.connect() as held, engine.connect() as other:
        taken = await held.execute(MESSAGES_REDRIVE_DEAD_LETTERS, params)
        moved_by_held = sum(row.n for row in taken)
        moved_by_other = await asyncio.wait_for(maintenance.redrive_dead_letters(other), 10)
        await held.commit()
    assert moved_by_held == len(sources) * 40  # "shared" died last: not among the first 40
    assert moved_by_held + moved_by_other == total - (len(sources) - 1)

    # The rest (none, or "shared" that found its id taken) by passes racing freely.
    async def pass_() -> int:
        async with engine.connect() as conn:
            return await maintenance.redrive_dead_letters(conn)

    assert sum(await asyncio.gather(*(pass_() for _ in range(4)))) == 0
    now = await census(engine)
    assert now[("dlq", "pending")] == total - 2
    assert sum(n for (_queue, state), n in now.items() if state == "errored") == 2
    assert sum(now.values()) == total
    in_target = Counter(await ids_of(engine, "dlq"))
    assert set(in_target.values()) == {1}
    expected = {f"{s}-{i}" for s in sources for i in range(per_source)} | {"shared"}
    assert set(in_target) == expected
    left = [i for q in sources for i in await ids_of(engine, q, "errored")]
    assert left == ["shared", "shared"]


async def test_freely_racing_ticks_move_each_dead_letter_exactly_once(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Whole ticks on four connections at once, over many dead letters of several sources into
    one target: each dead letter is moved by exactly one of them."""
    await make_queue(service, NS, "dlq")
    sources = [f"s{i}" for i in range(4)]
    for source in sources:
        await make_queue(service, NS, source, max_attempts=1, dead_letter_queue="dlq")
        ids = [f"{source}-{i}" for i in range(200)]
        await service.enqueue(NS, source, [NewMessage(id=i) for i in ids])
        await kill(service, source, ids)

    moved = await asyncio.gather(*(tick(engine) for _ in range(4)))
    assert sum(moved) == 800
    assert await census(engine) == Counter({("dlq", "pending"): 800})
    assert len(set(await ids_of(engine, "dlq"))) == 800


async def test_put_refuses_a_queue_that_is_its_own_dead_letter_queue(alpha: Caller) -> None:
    """PUT (create or update) and PATCH naming the queue itself as its dead_letter_queue are
    validation errors naming the field, and change nothing."""
    base = f"/v1/namespaces/{alpha.namespace}/queues"
    response = await alpha.put(f"{base}/loop", json={"dead_letter_queue": "loop"})
    assert_error(response, 400, "validation_error", "dead_letter_queue")
    assert (await alpha.get(f"{base}/loop")).status_code == 404

    assert (await alpha.put(f"{base}/loop", json={})).status_code == 201
    response = await alpha.put(f"{base}/loop", json={"dead_letter_queue": "loop"})
    assert_error(response, 400, "validation_error", "dead_letter_queue")
    response = await alpha.patch(f"{base}/loop", json={"dead_letter_queue": "loop"})
    assert_error(response, 400, "validation_error", "dead_letter_queue")
    assert (await alpha.get(f"{base}/loop")).json()["dead_letter_queue"] is None
    # Another queue's name is fine.
    response = await alpha.put(f"{base}/loop", json={"dead_letter_queue": "elsewhere"})
    assert response.status_code == 200, response.text
    assert response.json()["dead_letter_queue"] == "elsewhere"
