"""The redrive pass: a queue's dead letters (``errored`` messages) go into the queue its
``dead_letter_queue`` names, pending, attempts reset, everything else kept; the source keeps a
tombstone (``canceled``, ``last_error = 'dead-lettered to <target>'``) that holds the id until
the source's retention moves it to history. Never lost, never doubled, never live in two queues,
even when two passes race.

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
from tests.helpers import fetch, make_queue, scalar

NS = "ns"
LIVE = ("invisible", "pending", "running", "errored")


def tombstone_error(target: str) -> str:
    """The ``last_error`` a redrive leaves on the source's row."""
    return f"dead-lettered to {target}"


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


async def archive(engine: AsyncEngine) -> int:
    """The scheduler's cleanup: finished messages past their queue's retention go to history."""
    async with engine.connect() as conn:
        return await maintenance.archive_finished(conn)


async def reader_counts(service: QueueService, queue: str) -> dict[State, int]:
    """The queue's non-zero counts per state, as every reader (API, SQS door) sees them."""
    counts = (await service.queue_detail(NS, queue)).stats.counts
    return {state: n for state, n in counts.items() if n}


async def live_in_two_queues(engine: AsyncEngine) -> list[str]:
    """The ids live (invisible, pending, running or errored) in more than one queue."""
    rows = await fetch(
        engine,
        "SELECT id FROM messages WHERE state::text = ANY(CAST(:live AS text[]))"
        " GROUP BY id HAVING count(*) > 1",
        live=list(LIVE),
    )
    return [row["id"] for row in rows]


async def tombstones(engine: AsyncEngine, target: str) -> Counter[str]:
    """How many tombstones of a move into ``target`` each id has, over every queue. Asserts
    that every canceled message is such a tombstone (nothing else cancels in these tests)."""
    rows = await fetch(
        engine,
        "SELECT id, last_error, finished_at FROM messages WHERE state = 'canceled'",
    )
    assert all(row["finished_at"] is not None for row in rows), rows
    assert {row["last_error"] for row in rows} <= {tombstone_error(target)}, rows
    return Counter(row["id"] for row in rows)


async def test_dead_letters_move_into_the_target_in_one_tick_as_they_were(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Every dead letter arrives pending with attempts 0 and its id, payload, metadata,
    priority, enqueue time and expiry; the source keeps it canceled, dead-lettered to the
    target, finished by the move and otherwise as it was; none arrives twice and none is live
    in both queues."""
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
    started = await scalar(engine, "SELECT now()")

    assert await tick(engine) == 30

    assert await census(engine) == Counter({("dlq", "pending"): 30, ("src", "canceled"): 30})
    assert await live_in_two_queues(engine) == []
    assert await tombstones(engine, "dlq") == Counter(dict.fromkeys(ids, 1))
    for message_id, old in before.items():
        new = await service.get_message(NS, "dlq", message_id)
        assert (new.state, new.attempts, new.max_attempts) == (State.PENDING, 0, 5)
        assert (new.payload, new.metadata, new.priority) == (
            old.payload,
            old.metadata,
            old.priority,
        )
        assert (new.enqueued_at, new.expires_at) == (old.enqueued_at, old.expires_at)
        assert (new.finished_at, new.lease_id, new.last_error) == (None, None, "boom")
        left = await service.get_message(NS, "src", message_id)
        assert (left.state, left.last_error) == (State.CANCELED, tombstone_error("dlq"))
        assert left.finished_at is not None
        assert left.finished_at >= started
        assert left.updated_at >= started
        kept = (left.payload, left.metadata, left.priority, left.attempts, left.enqueued_at)
        assert kept == (old.payload, old.metadata, old.priority, old.attempts, old.enqueued_at)
        assert left.expires_at == old.expires_at
    # The counts every reader sees moved with them.
    assert await reader_counts(service, "src") == {State.CANCELED: 30}
    assert await reader_counts(service, "dlq") == {State.PENDING: 30}
    # A second tick finds nothing more to move (a tombstone is no dead letter).
    assert await tick(engine) == 0
    assert await census(engine) == Counter({("dlq", "pending"): 30, ("src", "canceled"): 30})
    assert await tombstones(engine, "dlq") == Counter(dict.fromkeys(ids, 1))


async def test_the_tombstone_keeps_the_id_taken_until_it_leaves_for_history(
    service: QueueService, engine: AsyncEngine
) -> None:
    """After a redrive, the id enqueued again into the source (a producer's resend) is reported
    as already there, canceled, and creates nothing: not a second delivery from the source, and
    the tombstone unchanged. So while the archive keeps it (retention); once the archive has
    moved it to history (retention 0), the id is free and enqueue creates a new message."""
    await make_queue(service, NS, "dlq")
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    await service.enqueue(NS, "src", [NewMessage(id="m", payload=b'"first"')])
    await kill(service, "src", ["m"])
    assert await tick(engine) == 1
    tombstone = await service.get_message(NS, "src", "m")
    assert (tombstone.state, tombstone.last_error) == (State.CANCELED, tombstone_error("dlq"))
    after_move = Counter({("dlq", "pending"): 1, ("src", "canceled"): 1})

    async def resend() -> None:
        (outcome,) = await service.enqueue(NS, "src", [NewMessage(id="m", payload=b'"second"')])
        assert (outcome.id, outcome.state, outcome.created) == ("m", State.CANCELED, False)
        assert await service.get_message(NS, "src", "m") == tombstone
        assert await census(engine) == after_move
        assert await service.dequeue(NS, "src", count=10) == []

    await resend()
    await resend()  # and again: still the tombstone
    assert await tick(engine) == 0
    assert await archive(engine) == 0  # within the source's retention (a week by default)
    await resend()
    assert await reader_counts(service, "src") == {State.CANCELED: 1}

    await service.update_queue(NS, "src", {"retention_seconds": 0})
    assert await archive(engine) == 1
    assert await census(engine) == Counter({("dlq", "pending"): 1})
    (outcome,) = await service.enqueue(NS, "src", [NewMessage(id="m", payload=b'"second"')])
    assert (outcome.id, outcome.state, outcome.created) == ("m", State.PENDING, True)
    assert await census(engine) == Counter({("dlq", "pending"): 1, ("src", "pending"): 1})
    assert (await service.get_message(NS, "src", "m")).payload == b'"second"'
    assert (await service.get_message(NS, "dlq", "m")).payload == b'"first"'


async def test_the_tombstone_is_archived_as_canceled_with_its_last_error(
    service: QueueService, engine: AsyncEngine
) -> None:
    """The archive pass moves the tombstone (and not the copy) into ``message_history``:
    canceled, ``dead-lettered to <target>``, finished when it moved, the message otherwise as
    its source had it."""
    await make_queue(service, NS, "dlq")
    await make_queue(
        service, NS, "src", max_attempts=1, dead_letter_queue="dlq", retention_seconds=0
    )
    message = NewMessage(id="m", payload=b'{"n": 1}', metadata={"k": "v"}, priority=4)
    await service.enqueue(NS, "src", [message])
    await kill(service, "src", ["m"])
    assert await tick(engine) == 1
    tombstone = await service.get_message(NS, "src", "m")

    assert await archive(engine) == 1
    rows = await fetch(
        engine,
        "SELECT namespace, queue, id, state::text AS state, last_error, finished_at, attempts,"
        " max_attempts, priority, payload, metadata, enqueued_at FROM message_history",
    )
    assert rows == [
        {
            "namespace": NS,
            "queue": "src",
            "id": "m",
            "state": "canceled",
            "last_error": tombstone_error("dlq"),
            "finished_at": tombstone.finished_at,
            "attempts": 1,
            "max_attempts": 1,
            "priority": 4,
            "payload": {"n": 1},
            "metadata": {"k": "v"},
            "enqueued_at": tombstone.enqueued_at,
        }
    ]
    assert await census(engine) == Counter({("dlq", "pending"): 1})
    assert await reader_counts(service, "src") == {}
    copy = await service.get_message(NS, "dlq", "m")
    assert (copy.state, copy.payload) == (State.PENDING, b'{"n": 1}')
    assert await archive(engine) == 0  # the copy is live: it stays


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
    assert await census(engine) == Counter({("dlq", "completed"): 5, ("src", "canceled"): 5})
    assert await tombstones(engine, "dlq") == Counter(dict.fromkeys(died, 1))


async def test_a_dead_letter_whose_id_the_target_holds_stays_in_its_queue(
    service: QueueService, engine: AsyncEngine
) -> None:
    """The target's message of the same id is left as it is, the dead letter stays errored in
    its source (no tombstone), and the others move: nothing lost, nothing doubled."""
    await make_queue(service, NS, "dlq")
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    await service.enqueue(NS, "dlq", [NewMessage(id="dup", payload=b'"theirs"')])
    await service.enqueue(
        NS, "src", [NewMessage(id=i, payload=b'"ours"') for i in ("dup", "x", "y")]
    )
    await kill(service, "src", ["dup", "x", "y"])

    assert await tick(engine) == 2
    assert await census(engine) == Counter(
        {("dlq", "pending"): 3, ("src", "errored"): 1, ("src", "canceled"): 2}
    )
    assert await ids_of(engine, "src", "errored") == ["dup"]
    assert await tombstones(engine, "dlq") == Counter({"x": 1, "y": 1})
    assert (await service.get_message(NS, "dlq", "dup")).payload == b'"theirs"'
    kept = await service.get_message(NS, "src", "dup")
    assert (kept.state, kept.payload, kept.last_error) == (State.ERRORED, b'"ours"', "boom")
    assert await reader_counts(service, "src") == {State.ERRORED: 1, State.CANCELED: 2}
    assert await reader_counts(service, "dlq") == {State.PENDING: 3}
    assert await live_in_two_queues(engine) == ["dup"]  # theirs and ours: two messages
    # It stays put tick after tick; once the target's message is gone, it moves.
    assert await tick(engine) == 0
    await service.purge_queue(NS, "dlq")
    assert await tick(engine) == 1
    assert await census(engine) == Counter({("dlq", "pending"): 1, ("src", "canceled"): 3})
    assert await tombstones(engine, "dlq") == Counter({"dup": 1, "x": 1, "y": 1})
    assert await live_in_two_queues(engine) == []
    assert (await service.get_message(NS, "dlq", "dup")).payload == b'"ours"'
    assert await reader_counts(service, "src") == {State.CANCELED: 3}


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
    assert await tombstones(engine, "dlq") == Counter({"free": 1})
    assert await ids_of(engine, "src", "canceled") == ["free"]


async def test_two_sources_with_the_same_id_into_one_target_move_one(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Two queues' dead letters of one id, into one target: one moves (a tombstone in its
    source), the other stays errored in its own."""
    await make_queue(service, NS, "dlq")
    for source in ("s1", "s2"):
        await make_queue(service, NS, source, max_attempts=1, dead_letter_queue="dlq")
        await service.enqueue(NS, source, [NewMessage(id="same"), NewMessage(id=source)])
        await kill(service, source, ["same", source])

    assert await tick(engine) == 3
    census_now = await census(engine)
    assert census_now[("dlq", "pending")] == 3
    assert census_now[("s1", "errored")] + census_now[("s2", "errored")] == 1
    assert census_now[("s1", "canceled")] + census_now[("s2", "canceled")] == 3
    assert sum(census_now.values()) == 7
    assert await tombstones(engine, "dlq") == Counter({"same": 1, "s1": 1, "s2": 1})
    same = {q: (await service.get_message(NS, q, "same")).state for q in ("s1", "s2")}
    assert sorted(same.values()) == [State.CANCELED, State.ERRORED]
    # Two messages of one id: the one that moved (pending in the target) and the other one,
    # still errored in its source; every other id is live in one queue.
    assert await live_in_two_queues(engine) == ["same"]


async def test_a_dead_letter_queue_naming_no_queue_keeps_the_dead_letters(
    service: QueueService, engine: AsyncEngine
) -> None:
    """A source whose dead_letter_queue does not exist keeps its dead letters, errored; once
    the queue exists, they move, and their tombstones name it."""
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="nowhere")
    await service.enqueue(NS, "src", [NewMessage(id="a"), NewMessage(id="b")])
    await kill(service, "src", ["a", "b"])
    assert await tick(engine) == 0
    assert await census(engine) == Counter({("src", "errored"): 2})

    await make_queue(service, NS, "nowhere")
    assert await tick(engine) == 2
    assert await census(engine) == Counter({("nowhere", "pending"): 2, ("src", "canceled"): 2})
    assert await tombstones(engine, "nowhere") == Counter({"a": 1, "b": 1})
    assert await reader_counts(service, "src") == {State.CANCELED: 2}


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
    left = await service.get_message(NS, "plain", "a")
    assert (left.state, left.last_error) == (State.ERRORED, "boom")


async def test_the_targets_keys_are_applied(service: QueueService, engine: AsyncEngine) -> None:
    """The moved message's exclusive and filter values are read with the target's keys (a FIFO
    dead-letter queue gets each message's group), and the target's exclusivity holds; the
    tombstones left in the (simple) source keep the source's (none)."""
    await make_queue(
        service, NS, "dlq", kind="exclusive", exclusive_key="group", filter_keys=("region", "zone")
    )
    await make_queue(service, NS, "src", max_attempts=1, dead_letter_queue="dlq")
    metadata = {
        "g1-a": {"group": "g1", "region": "eu", "zone": "z1"},
        "g1-b": {"group": "g1", "region": "us"},
        "g2-a": {"group": "g2"},
    }
    await service.enqueue(NS, "src", [NewMessage(id=i, metadata=m) for i, m in metadata.items()])
    await kill(service, "src", list(metadata))
    assert await tick(engine) == 3

    rows = await fetch(
        engine,
        "SELECT q.name, m.id, m.state::text, m.exclusive_value, m.filter_value,"
        " m.filter_value_2 FROM messages m JOIN queues q ON q.id = m.queue_id"
        " ORDER BY q.name, m.id",
    )
    assert [tuple(row.values()) for row in rows] == [
        ("dlq", "g1-a", "pending", "g1", "eu", "z1"),
        ("dlq", "g1-b", "pending", "g1", "us", None),
        ("dlq", "g2-a", "pending", "g2", None, None),
        ("src", "g1-a", "canceled", None, None, None),
        ("src", "g1-b", "canceled", None, None, None),
        ("src", "g2-a", "canceled", None, None, None),
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
    another runs to the end) move every dead letter once: one copy in the target and one
    tombstone in its source per move, never lost, never live in both queues (not even while a
    pass is open), and the moves they report add up."""
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
        # Seen from outside while the held pass is open: only the committed moves, whole.
        during = await census(engine)
        assert during[("dlq", "pending")] == moved_by_other
        assert sum(n for (_q, state), n in during.items() if state == "canceled") == moved_by_other
        assert await live_in_two_queues(engine) == ["shared"]
        await held.commit()
    assert moved_by_held == len(sources) * 40  # "shared" died last: not among the first 40
    assert moved_by_held + moved_by_other == total - (len(sources) - 1)

    # The rest (none, or "shared" that found its id taken) by passes racing freely.
    async def pass_() -> int:
        async with engine.connect() as conn:
            return await maintenance.redrive_dead_letters(conn)

    assert sum(await asyncio.gather(*(pass_() for _ in range(4)))) == 0
    now = await census(engine)
    moved = total - 2
    assert now[("dlq", "pending")] == moved
    assert sum(n for (_queue, state), n in now.items() if state == "errored") == 2
    assert sum(n for (_queue, state), n in now.items() if state == "canceled") == moved
    assert sum(now.values()) == total + moved
    in_target = Counter(await ids_of(engine, "dlq"))
    expected = {f"{s}-{i}" for s in sources for i in range(per_source)} | {"shared"}
    assert in_target == Counter(dict.fromkeys(expected, 1))
    assert await tombstones(engine, "dlq") == in_target  # one tombstone per copy
    left = [i for q in sources for i in await ids_of(engine, q, "errored")]
    assert left == ["shared", "shared"]
    # "shared": the copy that moved and the two that could not are three messages.
    assert await live_in_two_queues(engine) == ["shared"]
    for queue in (*sources, "dlq"):
        expected_counts = {State(state): n for (q, state), n in now.items() if q == queue}
        assert await reader_counts(service, queue) == expected_counts


async def test_freely_racing_ticks_move_each_dead_letter_exactly_once(
    service: QueueService, engine: AsyncEngine
) -> None:
    """Whole ticks on four connections at once, over many dead letters of several sources into
    one target: each dead letter is moved by exactly one of them (one copy, one tombstone)."""
    await make_queue(service, NS, "dlq")
    sources = [f"s{i}" for i in range(4)]
    for source in sources:
        await make_queue(service, NS, source, max_attempts=1, dead_letter_queue="dlq")
        ids = [f"{source}-{i}" for i in range(200)]
        await service.enqueue(NS, source, [NewMessage(id=i) for i in ids])
        await kill(service, source, ids)

    moved = await asyncio.gather(*(tick(engine) for _ in range(4)))
    assert sum(moved) == 800
    expected = Counter({(source, "canceled"): 200 for source in sources})
    expected[("dlq", "pending")] = 800
    assert await census(engine) == expected
    in_target = Counter(await ids_of(engine, "dlq"))
    assert in_target == Counter({f"{s}-{i}": 1 for s in sources for i in range(200)})
    assert await tombstones(engine, "dlq") == in_target
    assert await live_in_two_queues(engine) == []
    for source in sources:
        assert await reader_counts(service, source) == {State.CANCELED: 200}
    assert await reader_counts(service, "dlq") == {State.PENDING: 800}


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
