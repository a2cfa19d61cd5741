"""Every QueueService operation and every refusal, against a real, migrated PostgreSQL.

Speed: cloning the template database costs ~0.3 s, which for ~80 tests is most of the suite's
budget. This module therefore clones one database for the whole module and overrides
``database_url`` to empty it (TRUNCATE … RESTART IDENTITY) before each test: every test still
starts from the state of a freshly migrated database, with the same fixtures (``engine``,
``service``) on top.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from app.core.errors import (
    ConflictError,
    InvalidStateError,
    LeaseMismatchError,
    NotFoundError,
    PayloadTooLargeError,
    QueuePausedError,
    ValidationError,
)
from app.core.models import (
    LeasedMessage,
    LeaseRef,
    MessageChanges,
    MessageFilter,
    NewMessage,
    Principal,
    QueueConfig,
)
from app.core.service import QueueService
from app.core.states import State, backoff_seconds
from app.core.validation import MAX_DELAY_SECONDS, Limits
from tests.helpers import (
    count_messages,
    execute,
    expire_leases,
    fetch,
    make_due,
    make_queue,
    raw_row,
    release_expired,
    scalar,
    shift_back,
    states_of,
)

ADMIN_TOKEN = "test-admin-token-32-characters-ok"  # = tests/conftest.py's ADMIN_TOKEN
NS, Q = "ns", "q"


def seconds(delta: timedelta | None) -> float:
    assert delta is not None
    return delta.total_seconds()


def new(message_id: str, **fields) -> NewMessage:
    return NewMessage(id=message_id, **fields)


async def lease_one(service: QueueService, queue: str = Q, **kwargs) -> LeasedMessage:
    leased = await service.dequeue(NS, queue, **kwargs)
    assert len(leased) == 1, leased
    return leased[0]


async def dead_letters(service: QueueService, ids: list[str], error: str = "boom") -> None:
    """Turn ``ids`` (pending, in a max_attempts=1 queue) into errored messages, in that order."""
    for message_id in ids:
        leased = await service.dequeue(NS, Q, metadata={"n": message_id})
        assert [m.id for m in leased] == [message_id]
        failed = await service.fail(NS, Q, message_id, leased[0].lease_id, error=error)
        assert failed.state is State.ERRORED


@pytest.fixture(scope="module")
def module_database(postgres):
    """The name of one migrated database (a clone of the template) for this module."""
    name = postgres.create()
    yield name
    postgres.drop(name)


@pytest.fixture
def database_url(module_database, postgres):
    """Override of conftest's: the module's database, emptied as if freshly migrated.

    Every table the migrations made (whatever they are) is truncated, identities restart, but
    for the one-row tables they fill (the catalogue's version).
    """
    with psycopg.connect(postgres.dsn(module_database), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")
        (tables,) = conn.execute(
            "SELECT string_agg(format('%I', tablename), ', ') FROM pg_tables "
            "WHERE schemaname = 'public'"
            " AND tablename NOT IN ('alembic_version', 'catalogue_version')"
        ).fetchone()
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    return postgres.url(module_database)


@pytest.fixture
async def queue(service: QueueService):
    """A simple queue ``ns/q`` with default settings."""
    return await make_queue(service, NS, Q)


# ==============================================================================================
# enqueue
# ==============================================================================================


async def test_enqueue_batch_in_request_order(service, engine, queue):
    outcomes = await service.enqueue(
        NS,
        Q,
        [
            new("c", payload=b'{"n": 1}', metadata={"k": "v"}),
            new("a", payload=b"[1, 2]"),
            new("b"),
        ],
    )
    assert [(o.id, o.state, o.created) for o in outcomes] == [
        ("c", State.PENDING, True),
        ("a", State.PENDING, True),
        ("b", State.PENDING, True),
    ]
    rows = await fetch(
        engine, "SELECT id FROM messages WHERE queue_id = :q ORDER BY seq", q=queue.id
    )
    assert [r["id"] for r in rows] == ["c", "a", "b"]
    c = await service.get_message(NS, Q, "c")
    assert json.loads(c.payload) == {"n": 1}
    assert c.metadata == {"k": "v"}
    b = await service.get_message(NS, Q, "b")
    assert json.loads(b.payload) is None
    assert b.metadata == {}
    assert (b.attempts, b.lease_id, b.finished_at, b.last_error) == (0, None, None, None)


STORED_FIELDS = (
    *("state", "priority", "payload", "metadata", "exclusive_value"),
    *("max_attempts", "lease_seconds", "visible_at", "expires_at"),
)


async def test_a_batch_stores_every_field_as_a_single_enqueue_does(service, engine):
    # A batch binds one JSON document and a single message plain values: the same message must
    # come out the same either way, whatever its text holds (quotes, backslashes, non-ASCII,
    # a payload that is itself a JSON string) and whichever optional fields it sets.
    queue = await make_queue(service, NS, Q, kind="exclusive", exclusive_key="tenant")
    other = {"tenant": "other"}
    at = datetime(2031, 5, 17, 8, 30, 15, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    fields = {
        "priority": -(2**63),
        "payload": '{"text": "é \\" \\\\ ☃ \\u00e9", "nested": [1, 2.5, null, true]}'.encode(),
        "metadata": {"tenant": 'a"b\\c ☃', "k": ""},
        "max_attempts": 7,
        "lease_seconds": 13,
        "visible_at": at,
        "expires_at": at + timedelta(days=1),
    }
    await service.enqueue(NS, Q, [new("one", **fields)])
    await service.enqueue(
        NS, Q, [new("two", payload=b'"just a string"', metadata=other), new("many", **fields)]
    )
    delayed = new("a", delay_seconds=30, ttl_seconds=90, metadata=other)
    await service.enqueue(NS, Q, [delayed, new("b", metadata=other)])

    def stored(message):
        return {f: getattr(message, f) for f in STORED_FIELDS}

    one = await service.get_message(NS, Q, "one")
    many = await service.get_message(NS, Q, "many")
    assert stored(many) == stored(one)
    assert json.loads(many.payload) == json.loads(fields["payload"])
    assert (many.state, many.visible_at, many.exclusive_value) == (State.INVISIBLE, at, 'a"b\\c ☃')
    assert json.loads((await service.get_message(NS, Q, "two")).payload) == "just a string"
    row = await raw_row(engine, queue, "a")
    assert seconds(row["visible_at"] - row["enqueued_at"]) == 30
    assert seconds(row["expires_at"] - row["enqueued_at"]) == 90


async def test_generated_ids_are_unique_uuid7_in_enqueue_order(service, queue):
    first = await service.enqueue(NS, Q, [NewMessage() for _ in range(50)])
    second = await service.enqueue(NS, Q, [NewMessage() for _ in range(50)])
    ids = [o.id for o in first + second]
    assert all(o.created for o in first + second)
    assert len(set(ids)) == 100
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert ids == sorted(ids)  # time-sortable: generation order is sort order
    page = await service.query_messages(NS, Q, MessageFilter(order="priority", limit=1000))
    assert {m.id for m in page.messages} == set(ids)


async def test_enqueue_is_idempotent_across_calls(service, engine, queue):
    (first,) = await service.enqueue(NS, Q, [new("a", payload=b"1", priority=5)])
    assert first.created
    (again,) = await service.enqueue(NS, Q, [new("a", payload=b"2", priority=1)])
    assert (again.id, again.created, again.state) == ("a", False, State.PENDING)
    message = await service.get_message(NS, Q, "a")
    assert (json.loads(message.payload), message.priority) == (1, 5)
    assert await count_messages(engine, queue.id) == 1
    # The outcome reports the message's current state.
    await lease_one(service)
    (running,) = await service.enqueue(NS, Q, [new("a")])
    assert (running.created, running.state) == (False, State.RUNNING)
    assert await count_messages(engine, queue.id) == 1


async def test_enqueue_duplicate_ids_within_a_batch_first_wins(service, engine, queue):
    await service.enqueue(NS, Q, [new("old", payload=b'"old"')])
    outcomes = await service.enqueue(
        NS,
        Q,
        [
            new("x", payload=b'"first"'),
            new("old", payload=b'"ignored"'),
            new("y"),
            new("x", payload=b'"second"'),
            new("x", payload=b'"third"'),
        ],
    )
    assert [(o.id, o.created) for o in outcomes] == [
        ("x", True),
        ("old", False),
        ("y", True),
        ("x", False),
        ("x", False),
    ]
    assert json.loads((await service.get_message(NS, Q, "x")).payload) == "first"
    assert json.loads((await service.get_message(NS, Q, "old")).payload) == "old"
    assert await count_messages(engine, queue.id) == 3


async def test_default_priority_is_enqueue_time_in_ms_so_fifo(service, queue):
    for name in ["m1", "m2", "m3", "m4"]:
        await service.enqueue(NS, Q, [new(name)])
    for name in ["m1", "m2", "m3", "m4"]:
        message = await service.get_message(NS, Q, name)
        assert abs(message.priority - message.enqueued_at.timestamp() * 1000) <= 1
    await service.enqueue(NS, Q, [new("b1"), new("b2"), new("b3")])  # one ms: ties by order
    leased = await service.dequeue(NS, Q, count=10)
    assert [m.id for m in leased] == ["m1", "m2", "m3", "m4", "b1", "b2", "b3"]


async def test_priority_int64_bounds_are_stored(service, queue):
    low, high = -(2**63), 2**63 - 1
    await service.enqueue(NS, Q, [new("hi", priority=high), new("lo", priority=low)])
    assert (await service.get_message(NS, Q, "hi")).priority == high
    assert (await service.get_message(NS, Q, "lo")).priority == low
    assert [m.id for m in await service.dequeue(NS, Q, count=2)] == ["lo", "hi"]


async def test_delay_makes_a_message_invisible(service, engine, queue):
    (out,) = await service.enqueue(NS, Q, [new("d", delay_seconds=90)])
    assert out.state is State.INVISIBLE
    row = await raw_row(engine, queue, "d")
    assert row["state"] == "invisible"
    assert seconds(row["visible_at"] - row["enqueued_at"]) == 90
    assert await service.dequeue(NS, Q) == []


async def test_queue_default_delay_and_per_message_override(service, engine):
    await make_queue(service, NS, "slow", delay_seconds=30)
    outcomes = await service.enqueue(
        NS, "slow", [new("default"), new("now", delay_seconds=0), new("more", delay_seconds=60)]
    )
    assert [o.state for o in outcomes] == [State.INVISIBLE, State.PENDING, State.INVISIBLE]
    queue = await service.get_queue_or_404(NS, "slow")
    default = await raw_row(engine, queue, "default")
    more = await raw_row(engine, queue, "more")
    assert seconds(default["visible_at"] - default["enqueued_at"]) == 30
    assert seconds(more["visible_at"] - more["enqueued_at"]) == 60
    assert [m.id for m in await service.dequeue(NS, "slow", count=10)] == ["now"]


async def test_visible_at_past_is_pending_future_is_invisible(service, queue):
    now = datetime.now(UTC)
    past = now - timedelta(minutes=5)
    future = (now + timedelta(hours=2)).astimezone(timezone(timedelta(hours=5, minutes=30)))
    outcomes = await service.enqueue(
        NS, Q, [new("past", visible_at=past), new("future", visible_at=future)]
    )
    assert [o.state for o in outcomes] == [State.PENDING, State.INVISIBLE]
    assert (await service.get_message(NS, Q, "past")).visible_at == past
    assert (await service.get_message(NS, Q, "future")).visible_at == future
    # visible_at wins over the queue's default delay.
    await make_queue(service, NS, "slow", delay_seconds=600)
    (out,) = await service.enqueue(NS, "slow", [new("p", visible_at=past)])
    assert out.state is State.PENDING


async def test_ttl_and_expires_at_are_stored(service, engine, queue):
    expires = datetime.now(UTC) + timedelta(days=2)
    await service.enqueue(
        NS, Q, [new("ttl", ttl_seconds=60), new("abs", expires_at=expires), new("none")]
    )
    ttl = await raw_row(engine, queue, "ttl")
    assert seconds(ttl["expires_at"] - ttl["enqueued_at"]) == 60
    assert (await service.get_message(NS, Q, "abs")).expires_at == expires
    assert (await service.get_message(NS, Q, "none")).expires_at is None
    # A message past its expires_at is not handed out, even before the scheduler cancels it.
    await shift_back(engine, "expires_at", 120, queue=queue, ids=["ttl"])
    leased = await service.dequeue(NS, Q, count=10)
    assert sorted(m.id for m in leased) == ["abs", "none"]


async def test_per_message_overrides_and_queue_defaults(service, engine):
    await make_queue(service, NS, Q, max_attempts=4, lease_seconds=45)
    await service.enqueue(NS, Q, [new("own", max_attempts=9, lease_seconds=7), new("dflt")])
    own = await service.get_message(NS, Q, "own")
    dflt = await service.get_message(NS, Q, "dflt")
    assert (own.max_attempts, own.lease_seconds) == (9, 7)
    assert (dflt.max_attempts, dflt.lease_seconds) == (4, 45)
    # A default follows the queue's current setting; an override does not.
    await service.update_queue(NS, Q, {"max_attempts": 2, "lease_seconds": 50})
    own = await service.get_message(NS, Q, "own")
    dflt = await service.get_message(NS, Q, "dflt")
    assert (own.max_attempts, own.lease_seconds) == (9, 7)
    assert (dflt.max_attempts, dflt.lease_seconds) == (2, 50)


async def test_enqueue_refusals_change_nothing(service, engine, queue):
    with pytest.raises(ValidationError) as info:
        await service.enqueue(NS, Q, [new("a"), new("b"), new("bad id")])
    assert info.value.field == "messages[2].id"
    with pytest.raises(ValidationError) as info:
        await service.enqueue(NS, Q, [new("a"), new("b", metadata={"k": "x\x00"})])
    assert info.value.field == "messages[1].metadata.k"
    with pytest.raises(ValidationError) as info:
        await service.enqueue(NS, Q, [])
    assert info.value.field == "messages"
    with pytest.raises(PayloadTooLargeError) as too_large:
        await service.enqueue(NS, Q, [new("a"), new("big", payload=b'"' + b"x" * 5000 + b'"')])
    assert too_large.value.details["field"] == "messages[1].payload"
    # JSON that PostgreSQL refuses: still a client error, and the batch is all or nothing.
    with pytest.raises(ValidationError):
        await service.enqueue(NS, Q, [new("a", payload=b"1"), new("b", payload=b"{not json")])
    assert await count_messages(engine, queue.id) == 0


async def test_escaped_nul_payload_refused_literal_backslash_u0000_stored(service, queue):
    with pytest.raises(ValidationError) as info:
        await service.enqueue(NS, Q, [new("ok"), new("nul", payload=rb'{"a": "\u0000"}')])
    assert info.value.field == "messages[1].payload"
    await service.enqueue(NS, Q, [new("lit", payload=rb'{"a": "\\u0000"}')])
    message = await service.get_message(NS, Q, "lit")
    assert json.loads(message.payload) == {"a": "\\u0000"}
    with pytest.raises(NotFoundError):
        await service.get_message(NS, Q, "ok")


async def test_enqueue_paused_refuses_and_changes_nothing(service, engine, queue):
    await service.update_queue(NS, Q, {"enqueue_paused": True})
    with pytest.raises(QueuePausedError):
        await service.enqueue(NS, Q, [new("a")])
    assert await count_messages(engine, queue.id) == 0
    await service.update_queue(NS, Q, {"enqueue_paused": False})
    assert (await service.enqueue(NS, Q, [new("a")]))[0].created


async def test_exclusive_enqueue_stores_the_value_and_requires_the_key(service, engine):
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="project")
    await service.enqueue(NS, "ex", [new("a", metadata={"project": "foo", "x": "1"})])
    assert (await service.get_message(NS, "ex", "a")).exclusive_value == "foo"
    with pytest.raises(ValidationError) as info:
        await service.enqueue(
            NS, "ex", [new("b", metadata={"project": "bar"}), new("c", metadata={"x": "1"})]
        )
    assert info.value.field == "messages[1].metadata.project"
    assert await count_messages(engine, queue.id) == 1


# ==============================================================================================
# dequeue
# ==============================================================================================


async def test_dequeue_by_priority_then_enqueue_order(service, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("a", priority=5),
            new("b", priority=1),
            new("c", priority=5),
            new("d", priority=3),
            new("e", priority=1),
            new("f", priority=-7),
        ],
    )
    assert [m.id for m in await service.dequeue(NS, Q, count=2)] == ["f", "b"]
    assert [m.id for m in await service.dequeue(NS, Q, count=10)] == ["e", "d", "a", "c"]
    assert await service.dequeue(NS, Q, count=10) == []


async def test_dequeue_count(service, queue):
    await service.enqueue(NS, Q, [new(f"m{i:02}", priority=i) for i in range(10)])
    assert len(await service.dequeue(NS, Q)) == 1
    assert len(await service.dequeue(NS, Q, count=3)) == 3
    assert len(await service.dequeue(NS, Q, count=100)) == 6
    assert await service.dequeue(NS, Q, count=100) == []


async def test_dequeue_grants_a_lease(service, engine, queue):
    await service.enqueue(NS, Q, [new("a", payload=b'{"x": [1]}', metadata={"k": "v"})])
    leased = await lease_one(service)
    assert leased.id == "a"
    assert leased.attempt == 1
    assert uuid.UUID(leased.lease_id)
    assert json.loads(leased.payload) == {"x": [1]}
    assert leased.metadata == {"k": "v"}
    row = await raw_row(engine, queue, "a")
    assert row["state"] == "running"
    assert row["attempts"] == 1
    assert row["lease_id"] == leased.lease_id
    assert row["lease_expires_at"] == leased.lease_expires_at
    assert seconds(row["lease_expires_at"] - row["leased_at"]) == 30  # queue default
    assert row["first_leased_at"] == row["leased_at"]


async def test_lease_seconds_request_beats_message_beats_queue(service, engine):
    queue = await make_queue(service, NS, Q, lease_seconds=40)
    await service.enqueue(
        NS,
        Q,
        [new("q", priority=1), new("m", priority=2, lease_seconds=7), new("r", priority=3)],
    )
    await service.dequeue(NS, Q)
    await service.dequeue(NS, Q)
    await service.dequeue(NS, Q, lease_seconds=5)
    for message_id, expected in [("q", 40), ("m", 7), ("r", 5)]:
        row = await raw_row(engine, queue, message_id)
        assert seconds(row["lease_expires_at"] - row["leased_at"]) == expected, message_id
    await service.enqueue(NS, Q, [new("m2", lease_seconds=7)])
    await service.dequeue(NS, Q, lease_seconds=600)
    row = await raw_row(engine, queue, "m2")
    assert seconds(row["lease_expires_at"] - row["leased_at"]) == 600


async def test_dequeue_metadata_filter_needs_every_pair(service, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("ab", metadata={"a": "1", "b": "2"}),
            new("a", metadata={"a": "1"}),
            new("b", metadata={"b": "2"}),
            new("a2", metadata={"a": "2", "b": "2"}),
            new("none"),
        ],
    )
    both = await service.dequeue(NS, Q, count=10, metadata={"a": "1", "b": "2"})
    assert [m.id for m in both] == ["ab"]
    assert [m.id for m in await service.dequeue(NS, Q, count=10, metadata={"a": "1"})] == ["a"]
    assert await service.dequeue(NS, Q, count=10, metadata={"a": "3"}) == []
    rest = await service.dequeue(NS, Q, count=10, metadata={})
    assert [m.id for m in rest] == ["b", "a2", "none"]


async def test_dequeue_paused_returns_nothing(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    await service.update_queue(NS, Q, {"dequeue_paused": True})
    assert await service.dequeue(NS, Q, count=10) == []
    assert (await raw_row(engine, queue, "a"))["state"] == "pending"
    await service.update_queue(NS, Q, {"dequeue_paused": False})
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_delayed_message_waits_then_is_dequeued_without_the_scheduler(service, engine, queue):
    await service.enqueue(NS, Q, [new("later", delay_seconds=3600, priority=1)])
    await service.enqueue(NS, Q, [new("now", priority=9)])
    assert [m.id for m in await service.dequeue(NS, Q, count=10)] == ["now"]
    assert await service.dequeue(NS, Q, count=10) == []
    assert await make_due(engine, queue=queue) == 1
    assert (await raw_row(engine, queue, "later"))["state"] == "invisible"  # not promoted
    leased = await service.dequeue(NS, Q, count=10)
    assert [m.id for m in leased] == ["later"]
    assert (await raw_row(engine, queue, "later"))["state"] == "running"


async def test_due_and_pending_messages_are_served_together_by_priority(service, engine, queue):
    await service.enqueue(
        NS,
        Q,
        [
            new("p5", priority=5),
            new("d1", priority=1, delay_seconds=60),
            new("p3", priority=3),
            new("d4", priority=4, delay_seconds=60),
            new("d0", priority=0, delay_seconds=60),
        ],
    )
    await make_due(engine, queue=queue, ids=["d1", "d4"])
    assert [m.id for m in await service.dequeue(NS, Q, count=3)] == ["d1", "p3", "d4"]
    assert [m.id for m in await service.dequeue(NS, Q, count=3)] == ["p5"]


async def test_dequeue_refusals(service, queue):
    for count in (0, 101):
        with pytest.raises(ValidationError) as info:
            await service.dequeue(NS, Q, count=count)
        assert info.value.field == "count"
    with pytest.raises(ValidationError) as info:
        await service.dequeue(NS, Q, lease_seconds=0)
    assert info.value.field == "lease_seconds"
    with pytest.raises(ValidationError) as info:
        await service.dequeue(NS, Q, metadata={"k": "v" * 300})
    assert info.value.field == "metadata.k"
    with pytest.raises(NotFoundError):
        await service.dequeue(NS, "nope")


async def test_exclusive_dequeue_one_running_message_per_value(service, engine):
    queue = await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS,
        "ex",
        [
            new("a1", priority=1, metadata={"p": "a"}),
            new("a2", priority=2, metadata={"p": "a"}),
            new("b1", priority=3, metadata={"p": "b"}),
            new("a3", priority=4, metadata={"p": "a"}),
            new("b2", priority=5, metadata={"p": "b"}),
            new("c1", priority=6, metadata={"p": "c"}),
        ],
    )
    first = await service.dequeue(NS, "ex", count=10)
    assert [m.id for m in first] == ["a1", "b1", "c1"]  # at most one per value
    assert await service.dequeue(NS, "ex", count=10) == []  # every value is busy
    leases = {m.id: m.lease_id for m in first}
    await service.complete(NS, "ex", "a1", leases["a1"])
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a2"]
    await service.fail(NS, "ex", "b1", leases["b1"])  # b1 back to pending, b is free
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["b1"]
    running = await fetch(
        engine,
        "SELECT exclusive_value, count(*) AS n FROM messages WHERE queue_id = :q "
        "AND state = 'running' GROUP BY exclusive_value",
        q=queue.id,
    )
    assert {r["exclusive_value"]: r["n"] for r in running} == {"a": 1, "b": 1, "c": 1}


async def test_exclusive_batch_is_filled_from_values_beyond_the_first_candidates(service):
    # 20 values with 30 messages each, ranked so that the 400 best candidates (what one claim
    # round looks at for a batch of 100) hold only 14 values: the batch must still take one
    # message of every value, the best of each.
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    batch = [
        new(f"v{value:02}-{rank:02}", priority=value * 30 + rank, metadata={"p": f"v{value:02}"})
        for value in range(20)
        for rank in range(30)
    ]
    for start in range(0, len(batch), 100):
        await service.enqueue(NS, "ex", batch[start : start + 100])
    leased = await service.dequeue(NS, "ex", count=100)
    assert [m.id for m in leased] == [f"v{value:02}-00" for value in range(20)]
    assert await service.dequeue(NS, "ex", count=100) == []


async def test_exclusive_expired_lease_blocks_until_released(service, engine):
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS, "ex", [new("a1", metadata={"p": "a"}), new("a2", metadata={"p": "a"})]
    )
    await lease_one(service, "ex")
    await expire_leases(engine)
    # Still running until the scheduler releases it: the value stays taken.
    assert await service.dequeue(NS, "ex", count=10) == []
    assert await release_expired(engine) == 1
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a1"]


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
# cancel
# ==============================================================================================


async def test_cancel_pending_and_invisible(service, engine, queue):
    await service.enqueue(NS, Q, [new("p"), new("i", delay_seconds=60)])
    canceled = await service.cancel(NS, Q, "p")
    assert canceled.state is State.CANCELED
    assert canceled.last_error == "canceled"
    assert canceled.finished_at is not None
    with_reason = await service.cancel(NS, Q, "i", reason="no longer needed")
    assert (with_reason.state, with_reason.last_error) == (State.CANCELED, "no longer needed")
    assert await states_of(engine, queue) == {"p": "canceled", "i": "canceled"}
    await make_due(engine, queue=queue)
    assert await service.dequeue(NS, Q, count=10) == []
    with pytest.raises(NotFoundError):
        await service.cancel(NS, Q, "missing", force=True)
    await service.enqueue(NS, Q, [new("a")])
    with pytest.raises(ValidationError) as info:
        await service.cancel(NS, Q, "a", reason="x" * 5000)
    assert info.value.field == "reason"
    assert (await service.get_message(NS, Q, "a")).state is State.PENDING


async def test_cancel_running_needs_the_lease_or_force(service, engine, queue):
    await service.enqueue(NS, Q, [new("a"), new("b"), new("c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=3)}
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a")
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a", lease_id=str(uuid.uuid4()))
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "a", lease_id="junk")
    assert (await raw_row(engine, queue, "a"))["state"] == "running"
    assert (await service.cancel(NS, Q, "a", lease_id=leases["a"])).state is State.CANCELED
    assert (await service.cancel(NS, Q, "b", force=True)).state is State.CANCELED
    # The canceled message's lease is dead.
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", leases["a"])
    # An expired lease no longer allows cancel; force still does.
    await expire_leases(engine, ids=["c"])
    with pytest.raises(LeaseMismatchError):
        await service.cancel(NS, Q, "c", lease_id=leases["c"])
    assert (await service.cancel(NS, Q, "c", force=True)).state is State.CANCELED


async def test_cancel_terminal_is_invalid_state(service, engine):
    await make_queue(service, NS, Q, max_attempts=1)
    await service.enqueue(NS, Q, [new("done", metadata={"n": "done"}), new("x")])
    leased = await lease_one(service, metadata={"n": "done"})
    await service.complete(NS, Q, "done", leased.lease_id)
    await service.enqueue(NS, Q, [new("dead", metadata={"n": "dead"})])
    await dead_letters(service, ["dead"])
    await service.cancel(NS, Q, "x")
    for message_id in ("done", "dead", "x"):
        for kwargs in ({}, {"force": True}):
            with pytest.raises(InvalidStateError) as info:
                await service.cancel(NS, Q, message_id, **kwargs)
            assert info.value.details["state"] in ("completed", "errored", "canceled")


# ==============================================================================================
# requeue
# ==============================================================================================


async def test_requeue_errored_and_canceled(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    await service.enqueue(NS, Q, [new("dead", metadata={"n": "dead"}), new("gone")])
    await dead_letters(service, ["dead"])
    await service.cancel(NS, Q, "gone")
    for message_id in ("dead", "gone"):
        back = await service.requeue(NS, Q, message_id)
        assert back.state is State.PENDING
        assert (back.attempts, back.lease_id, back.finished_at) == (0, None, None)
        row = await raw_row(engine, queue, message_id)
        assert row["visible_at"] == row["updated_at"]
    leased = await service.dequeue(NS, Q, count=10)
    assert sorted(m.id for m in leased) == ["dead", "gone"]
    assert all(m.attempt == 1 for m in leased)


async def test_requeue_with_delay_is_invisible(service, engine):
    queue = await make_queue(service, NS, Q)
    await service.enqueue(NS, Q, [new("a")])
    await service.cancel(NS, Q, "a")
    back = await service.requeue(NS, Q, "a", delay_seconds=120)
    assert back.state is State.INVISIBLE
    row = await raw_row(engine, queue, "a")
    assert seconds(row["visible_at"] - row["updated_at"]) == 120
    assert await service.dequeue(NS, Q) == []


async def test_requeue_clears_expiry_of_an_expired_message(service, engine, queue):
    await service.enqueue(NS, Q, [new("a", ttl_seconds=60)])
    await service.cancel(NS, Q, "a", reason="expired")
    back = await service.requeue(NS, Q, "a")
    assert back.expires_at is None
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_requeue_refusals(service, engine, queue):
    await service.enqueue(NS, Q, [new("p"), new("i", delay_seconds=60), new("r"), new("c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    assert set(leases) == {"p", "r"}
    await service.complete(NS, Q, "p", leases["p"])
    before = await states_of(engine, queue)
    for message_id in ("p", "i", "r", "c"):
        with pytest.raises(InvalidStateError):
            await service.requeue(NS, Q, message_id)
    assert await states_of(engine, queue) == before
    with pytest.raises(NotFoundError):
        await service.requeue(NS, Q, "missing")
    with pytest.raises(ValidationError) as info:
        await service.requeue(NS, Q, "c", delay_seconds=-1)
    assert info.value.field == "delay_seconds"


async def test_requeue_dead_letters_by_state(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    ids = ["e1", "e2", "e3", "c1", "c2", "p", "done"]
    await service.enqueue(NS, Q, [new(i, metadata={"n": i}) for i in ids])
    await dead_letters(service, ["e1", "e2", "e3"])
    await service.cancel(NS, Q, "c1")
    await service.cancel(NS, Q, "c2")
    leased = await lease_one(service, metadata={"n": "done"})
    await service.complete(NS, Q, "done", leased.lease_id)
    assert await service.requeue_dead_letters(NS, Q) == 3  # errored by default
    states = await states_of(engine, queue)
    assert {i for i, s in states.items() if s == "pending"} == {"e1", "e2", "e3", "p"}
    assert await service.requeue_dead_letters(NS, Q, states=["canceled"]) == 2
    states = await states_of(engine, queue)
    assert states == dict.fromkeys(ids, "pending") | {"done": "completed"}
    assert await service.requeue_dead_letters(NS, Q, states=["errored", "canceled"]) == 0


async def test_requeue_dead_letters_by_ids_and_limit(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=1)
    ids = ["e1", "e2", "e3", "e4", "c1"]
    await service.enqueue(NS, Q, [new(i, metadata={"n": i}) for i in ids])
    await dead_letters(service, ["e1", "e2", "e3", "e4"])
    await service.cancel(NS, Q, "c1")
    # Make the finishing order explicit: e4 oldest, then e2, e3, e1.
    for message_id, age in [("e4", 400), ("e2", 300), ("e3", 200), ("e1", 100)]:
        await shift_back(engine, "finished_at", age, queue=queue, ids=[message_id])
    count = await service.requeue_dead_letters(
        NS, Q, states=["errored", "canceled"], ids=["e1", "c1", "unknown"]
    )
    assert count == 2
    states = await states_of(engine, queue)
    assert (states["e1"], states["c1"]) == ("pending", "pending")
    assert await service.requeue_dead_letters(NS, Q, limit=2) == 2  # the oldest two
    states = await states_of(engine, queue)
    assert (states["e4"], states["e2"], states["e3"]) == ("pending", "pending", "errored")
    assert await service.requeue_dead_letters(NS, Q, ids=[]) == 0


async def test_requeue_dead_letters_refusals(service, queue):
    cases = [
        ({"states": ["pending"]}, "states[0]"),
        ({"states": ["errored", "completed"]}, "states[1]"),
        ({"states": ["bogus"]}, "states[0]"),
        ({"ids": ["ok", "not ok"]}, "ids[1]"),
        ({"ids": [f"m{i}" for i in range(1001)]}, "ids"),
        ({"limit": 0}, "limit"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as info:
            await service.requeue_dead_letters(NS, Q, **kwargs)
        assert info.value.field == field
    with pytest.raises(NotFoundError):
        await service.requeue_dead_letters(NS, "nope")


# ==============================================================================================
# update_message
# ==============================================================================================


async def test_update_pending_message(service, queue):
    await service.enqueue(NS, Q, [new("a", priority=10), new("b", priority=20)])
    updated = await service.update_message(
        NS,
        Q,
        "b",
        MessageChanges(priority=1, payload=b'{"v": 2}', metadata={"k": "v"}),
    )
    assert (updated.state, updated.priority, updated.metadata) == (State.PENDING, 1, {"k": "v"})
    assert json.loads(updated.payload) == {"v": 2}
    assert [m.id for m in await service.dequeue(NS, Q, count=2)] == ["b", "a"]


async def test_update_only_given_fields(service, queue):
    await service.enqueue(NS, Q, [new("a", priority=3, payload=b"[1]", metadata={"x": "y"})])
    updated = await service.update_message(NS, Q, "a", MessageChanges(priority=4))
    assert (updated.priority, json.loads(updated.payload), updated.metadata) == (
        4,
        [1],
        {"x": "y"},
    )
    cleared = await service.update_message(NS, Q, "a", MessageChanges(metadata={}))
    assert cleared.metadata == {}


async def test_update_visible_at_moves_between_invisible_and_pending(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    future = datetime.now(UTC) + timedelta(hours=1)
    hidden = await service.update_message(NS, Q, "a", MessageChanges(visible_at=future))
    assert (hidden.state, hidden.visible_at) == (State.INVISIBLE, future)
    assert await service.dequeue(NS, Q) == []
    still = await service.update_message(NS, Q, "a", MessageChanges(priority=7))
    assert (still.state, still.visible_at, still.priority) == (State.INVISIBLE, future, 7)
    past = datetime.now(UTC) - timedelta(seconds=5)
    shown = await service.update_message(NS, Q, "a", MessageChanges(visible_at=past))
    assert (shown.state, shown.visible_at) == (State.PENDING, past)
    assert (await raw_row(engine, queue, "a"))["state"] == "pending"
    assert [m.id for m in await service.dequeue(NS, Q)] == ["a"]


async def test_update_refused_unless_waiting(service, queue):
    await service.enqueue(NS, Q, [new("r"), new("c"), new("x")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    await service.complete(NS, Q, "c", leases["c"])
    await service.cancel(NS, Q, "x")
    for message_id, state in [("r", "running"), ("c", "completed"), ("x", "canceled")]:
        with pytest.raises(InvalidStateError) as info:
            await service.update_message(NS, Q, message_id, MessageChanges(priority=1))
        assert info.value.details["state"] == state
    assert (await service.get_message(NS, Q, "r")).priority != 1
    with pytest.raises(NotFoundError):
        await service.update_message(NS, Q, "missing", MessageChanges(priority=1))
    with pytest.raises(ValidationError) as info:
        await service.update_message(NS, Q, "r", MessageChanges(priority=2**63))
    assert info.value.field == "priority"


async def test_update_in_exclusive_queue_moves_the_value(service, engine):
    await make_queue(service, NS, "ex", kind="exclusive", exclusive_key="p")
    await service.enqueue(
        NS,
        "ex",
        [
            new("a1", priority=1, metadata={"p": "a"}),
            new("a2", priority=2, metadata={"p": "a"}),
        ],
    )
    moved = await service.update_message(
        NS, "ex", "a2", MessageChanges(metadata={"p": "b", "x": "1"})
    )
    assert (moved.exclusive_value, moved.metadata) == ("b", {"p": "b", "x": "1"})
    # a1 and a2 now hold different values: both can run at once.
    assert [m.id for m in await service.dequeue(NS, "ex", count=10)] == ["a1", "a2"]
    for metadata in ({"x": "1"}, {"p": ""}):
        await service.enqueue(NS, "ex", [new("a3", metadata={"p": "a"})])
        with pytest.raises(ValidationError) as info:
            await service.update_message(NS, "ex", "a3", MessageChanges(metadata=metadata))
        assert info.value.field == "metadata.p"
    message = await service.get_message(NS, "ex", "a3")
    assert (message.exclusive_value, message.metadata) == ("a", {"p": "a"})
    # A change without metadata keeps the value.
    kept = await service.update_message(NS, "ex", "a3", MessageChanges(priority=0))
    assert kept.exclusive_value == "a"


# ==============================================================================================
# delete_message
# ==============================================================================================


async def test_delete_message_in_any_state(service, engine, queue):
    await service.enqueue(NS, Q, [new("c"), new("r"), new("p"), new("i", delay_seconds=60)])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    await service.complete(NS, Q, "c", leases["c"])
    assert await states_of(engine, queue) == {
        "c": "completed",
        "r": "running",
        "p": "pending",
        "i": "invisible",
    }
    for message_id in ("p", "i", "r", "c"):
        await service.delete_message(NS, Q, message_id)
        with pytest.raises(NotFoundError):
            await service.get_message(NS, Q, message_id)
        with pytest.raises(NotFoundError):
            await service.delete_message(NS, Q, message_id)
    assert await count_messages(engine, queue.id) == 0


async def test_delete_running_message_invalidates_its_lease(service, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    await service.delete_message(NS, Q, "a")
    with pytest.raises(NotFoundError):
        await service.complete(NS, Q, "a", leased.lease_id)
    with pytest.raises(NotFoundError):
        await service.fail(NS, Q, "a", leased.lease_id)
    with pytest.raises(NotFoundError):
        await service.extend(NS, Q, "a", leased.lease_id, 30)
    # Re-enqueueing the id makes a new message; the old lease does not act on it.
    await service.enqueue(NS, Q, [new("a")])
    fresh = await lease_one(service)
    with pytest.raises(LeaseMismatchError):
        await service.complete(NS, Q, "a", leased.lease_id)
    assert (await service.complete(NS, Q, "a", fresh.lease_id)).state is State.COMPLETED


# ==============================================================================================
# get and query
# ==============================================================================================


async def test_get_message_reads_every_field(service, engine, queue):
    expires = datetime.now(UTC) + timedelta(days=1)
    await service.enqueue(
        NS,
        Q,
        [
            new(
                "a",
                priority=42,
                payload=b'{"k": [1, "two"]}',
                metadata={"m": "1"},
                max_attempts=5,
                lease_seconds=9,
                expires_at=expires,
            )
        ],
    )
    message = await service.get_message(NS, Q, "a")
    row = await raw_row(engine, queue, "a")
    assert message.id == "a"
    assert message.state is State.PENDING
    assert message.priority == 42
    assert json.loads(message.payload) == {"k": [1, "two"]}
    assert message.metadata == {"m": "1"}
    assert message.exclusive_value is None
    assert (message.attempts, message.max_attempts, message.lease_seconds) == (0, 5, 9)
    assert (message.lease_id, message.lease_expires_at) == (None, None)
    assert message.expires_at == expires
    assert message.visible_at == row["visible_at"]
    assert message.enqueued_at == row["enqueued_at"]
    assert message.updated_at == row["updated_at"]
    assert (message.finished_at, message.last_error) == (None, None)


async def _seed_for_query(service: QueueService) -> None:
    await service.enqueue(
        NS,
        Q,
        [
            new("m0", priority=30, metadata={"team": "red", "kind": "a"}),
            new("m1", priority=10, metadata={"team": "blue"}),
            new("m2", priority=20, metadata={"team": "red", "kind": "b"}),
            new("m3", priority=10, metadata={"team": "red", "kind": "a"}),
            new("m4", priority=40, delay_seconds=600),
            new("m5", priority=-5, metadata={"team": "blue"}),
        ],
    )
    (leased,) = await service.dequeue(NS, Q, metadata={"team": "blue"})
    assert leased.id == "m5"


async def test_query_filters(service, queue):
    await _seed_for_query(service)

    async def ids(**spec) -> list[str]:
        page = await service.query_messages(NS, Q, MessageFilter(**spec))
        return [m.id for m in page.messages]

    assert await ids() == ["m5", "m4", "m3", "m2", "m1", "m0"]  # newest first
    assert await ids(order="priority") == ["m5", "m1", "m3", "m2", "m0", "m4"]
    assert await ids(states=(State.PENDING,), order="priority") == ["m1", "m3", "m2", "m0"]
    assert await ids(states=(State.RUNNING, State.INVISIBLE)) == ["m5", "m4"]
    assert await ids(states=(State.COMPLETED,)) == []
    assert await ids(metadata={"team": "red"}) == ["m3", "m2", "m0"]
    assert await ids(metadata={"team": "red", "kind": "a"}) == ["m3", "m0"]
    assert await ids(metadata={"team": "green"}) == []
    assert await ids(priority_gte=10, order="priority") == ["m1", "m3", "m2", "m0", "m4"]
    assert await ids(priority_lt=20, order="priority") == ["m5", "m1", "m3"]
    assert await ids(priority_gte=10, priority_lt=30, order="priority") == ["m1", "m3", "m2"]
    assert await ids(priority_gte=20, priority_lt=20) == []
    combined = await ids(
        states=(State.PENDING,), metadata={"team": "red"}, priority_gte=20, order="priority"
    )
    assert combined == ["m2", "m0"]


async def test_query_cursor_pagination_visits_every_message_once(service, queue):
    # Few distinct priorities, so pages split runs of equal priority.
    await service.enqueue(
        NS,
        Q,
        [new(f"m{i:02}", priority=i % 4, metadata={"odd": str(i % 2)}) for i in range(25)],
    )

    async def walk(**spec) -> tuple[list[str], int]:
        seen: list[str] = []
        cursor, pages = None, 0
        while True:
            page = await service.query_messages(NS, Q, MessageFilter(cursor=cursor, **spec))
            pages += 1
            assert len(page.messages) <= spec["limit"]
            seen += [m.id for m in page.messages]
            if page.next_cursor is None:
                return seen, pages
            assert len(page.messages) == spec["limit"]
            cursor = page.next_cursor
            assert pages < 100

    by_priority = sorted((f"m{i:02}" for i in range(25)), key=lambda i: (int(i[1:]) % 4, i))
    newest_first = [f"m{i:02}" for i in reversed(range(25))]
    for limit in (1, 7, 25, 26):
        seen, pages = await walk(order="priority", limit=limit)
        assert seen == by_priority, limit
        assert pages == math.ceil(25 / limit)
        seen, pages = await walk(order="enqueued_at", limit=limit)
        assert seen == newest_first, limit
        assert pages == math.ceil(25 / limit)
    # With a filter, pages walk only the matching messages.
    seen, _ = await walk(order="priority", limit=3, metadata={"odd": "1"}, priority_gte=2)
    assert seen == [i for i in by_priority if int(i[1:]) % 2 and int(i[1:]) % 4 >= 2]
    seen, _ = await walk(order="enqueued_at", limit=4, metadata={"odd": "0"}, priority_lt=2)
    assert seen == [i for i in newest_first if int(i[1:]) % 2 == 0 and int(i[1:]) % 4 < 2]


async def test_query_refusals(service, queue):
    await service.enqueue(NS, Q, [new(f"m{i}") for i in range(3)])
    page = await service.query_messages(NS, Q, MessageFilter(order="priority", limit=1))
    assert page.next_cursor is not None
    other_order = MessageFilter(order="enqueued_at", cursor=page.next_cursor)
    bad_cursors = ["%%%", "not-a-cursor", "", "WyJhIl0", "eyJhIjoxfQ", "é", "W1tdXQ"]
    specs = [MessageFilter(cursor=c) for c in bad_cursors] + [other_order]
    for spec in specs:
        with pytest.raises(ValidationError) as info:
            await service.query_messages(NS, Q, spec)
        assert info.value.field == "cursor", spec.cursor
    for limit in (0, 1001):
        with pytest.raises(ValidationError) as info:
            await service.query_messages(NS, Q, MessageFilter(limit=limit))
        assert info.value.field == "limit"
    with pytest.raises(ValidationError) as info:
        await service.query_messages(NS, Q, MessageFilter(metadata={"k": "\x00"}))
    assert info.value.field == "metadata.k"


# ==============================================================================================
# ack (batch)
# ==============================================================================================


async def test_ack_batch_reports_each_item(service, engine, queue):
    await service.enqueue(NS, Q, [new(i) for i in ("a", "b", "c", "d", "e")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=4)}
    assert set(leases) == {"a", "b", "c", "d"}
    results = await service.ack(
        NS,
        Q,
        complete=[
            LeaseRef("a", leases["a"]),
            LeaseRef("b", str(uuid.uuid4())),
            LeaseRef("zzz", leases["a"]),
            LeaseRef("e", str(uuid.uuid4())),  # pending: exists, no such lease
        ],
        fail=[LeaseRef("c", leases["c"], error="bad input"), LeaseRef("d", "not-a-uuid")],
    )
    assert [(r.id, r.ok, r.error) for r in results] == [
        ("a", True, None),
        ("b", False, "lease_mismatch"),
        ("zzz", False, "not_found"),
        ("e", False, "lease_mismatch"),
        ("c", True, None),
        ("d", False, "lease_mismatch"),
    ]
    assert await states_of(engine, queue) == {
        "a": "completed",
        "b": "running",
        "c": "pending",
        "d": "running",
        "e": "pending",
    }
    c = await service.get_message(NS, Q, "c")
    assert (c.last_error, c.attempts) == ("bad input", 1)


async def test_ack_accepts_a_lease_id_in_any_uuid_spelling(service, engine, queue):
    await service.enqueue(NS, Q, [new(i) for i in ("a", "b", "c")])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=3)}
    results = await service.ack(
        NS,
        Q,
        complete=[LeaseRef("a", leases["a"].upper()), LeaseRef("b", "{" + leases["b"] + "}")],
        fail=[LeaseRef("c", "urn:uuid:" + leases["c"])],
    )
    assert [(r.id, r.ok) for r in results] == [("a", True), ("b", True), ("c", True)]
    assert await states_of(engine, queue) == {"a": "completed", "b": "completed", "c": "pending"}


async def test_ack_fail_uses_queue_backoff_and_dead_letters(service, engine):
    queue = await make_queue(service, NS, Q, max_attempts=2, retry_delay_seconds=30)
    await service.enqueue(NS, Q, [new("a"), new("b", max_attempts=1)])
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    results = await service.ack(
        NS, Q, complete=[], fail=[LeaseRef(i, leases[i], error="x") for i in ("a", "b")]
    )
    assert all(r.ok for r in results)
    a = await raw_row(engine, queue, "a")
    assert a["state"] == "invisible"
    assert seconds(a["visible_at"] - a["updated_at"]) == 30
    b = await raw_row(engine, queue, "b")
    assert (b["state"], b["last_error"]) == ("errored", "x")
    assert b["finished_at"] is not None


async def test_ack_refusals(service, queue):
    too_many = [LeaseRef(f"m{i}", str(uuid.uuid4())) for i in range(1001)]
    with pytest.raises(ValidationError) as info:
        await service.ack(NS, Q, complete=too_many, fail=[])
    assert info.value.field == "complete"
    with pytest.raises(ValidationError) as info:
        await service.ack(NS, Q, complete=[], fail=[LeaseRef("a", "x"), LeaseRef("b", "y", "\x00")])
    assert info.value.field == "fail[1].error"
    assert await service.ack(NS, Q, complete=[], fail=[]) == []


async def test_ack_judges_each_lease_of_a_repeated_id_on_its_own(service, engine, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    stale = str(uuid.uuid4())
    results = await service.ack(
        NS, Q, complete=[LeaseRef("a", stale), LeaseRef("a", leased.lease_id)], fail=[]
    )
    assert (await raw_row(engine, queue, "a"))["state"] == "completed"
    assert [(r.id, r.ok, r.error) for r in results] == [
        ("a", False, "lease_mismatch"),
        ("a", True, None),
    ]


async def test_ack_complete_retried_with_the_same_lease_is_ok(service, queue):
    await service.enqueue(NS, Q, [new("a")])
    leased = await lease_one(service)
    first = await service.ack(NS, Q, complete=[LeaseRef("a", leased.lease_id)], fail=[])
    assert [(r.ok, r.error) for r in first] == [(True, None)]
    # Single complete is idempotent for the lease that completed it ...
    assert (await service.complete(NS, Q, "a", leased.lease_id)).state is State.COMPLETED
    # ... so a consumer that lost the answer of its batch ack and sends it again must not be
    # told its lease is gone.
    again = await service.ack(NS, Q, complete=[LeaseRef("a", leased.lease_id)], fail=[])
    assert [(r.ok, r.error) for r in again] == [(True, None)]


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


# ==============================================================================================
# queues
# ==============================================================================================


async def test_put_queue_creates_is_idempotent_and_updates(service):
    await service.create_namespace(NS)
    created, was_created = await service.put_queue(NS, Q, QueueConfig(lease_seconds=20))
    assert was_created
    assert created.config == QueueConfig(lease_seconds=20)
    assert (created.namespace, created.name) == (NS, Q)
    same, was_created = await service.put_queue(NS, Q, QueueConfig(lease_seconds=20))
    assert not was_created
    assert same == created
    changed_config = QueueConfig(lease_seconds=60, max_attempts=7, dequeue_paused=True)
    changed, was_created = await service.put_queue(NS, Q, changed_config)
    assert not was_created
    assert changed.id == created.id
    assert changed.config == changed_config
    assert changed.updated_at >= created.updated_at
    assert (await service.get_queue_or_404(NS, Q)).config == changed_config


async def test_put_queue_cannot_change_kind_or_key(service):
    await service.create_namespace(NS)
    await service.put_queue(NS, "s", QueueConfig())
    await service.put_queue(NS, "e", QueueConfig(kind="exclusive", exclusive_key="p"))
    for name, config in [
        ("s", QueueConfig(kind="exclusive", exclusive_key="p")),
        ("e", QueueConfig()),
        ("e", QueueConfig(kind="exclusive", exclusive_key="other")),
        ("e", QueueConfig(kind="exclusive", exclusive_key="other", lease_seconds=5)),
    ]:
        with pytest.raises(ConflictError):
            await service.put_queue(NS, name, config)
    assert (await service.get_queue_or_404(NS, "e")).config.exclusive_key == "p"
    assert (await service.get_queue_or_404(NS, "e")).config.lease_seconds == 30


async def test_put_queue_refusals(service):
    with pytest.raises(NotFoundError):
        await service.put_queue("nowhere", Q, QueueConfig())
    await service.create_namespace(NS)
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, "bad name", QueueConfig())
    assert info.value.field == "queue"
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, Q, QueueConfig(kind="exclusive"))
    assert info.value.field == "exclusive_key"
    with pytest.raises(ValidationError) as info:
        await service.put_queue(NS, Q, QueueConfig(max_attempts=0))
    assert info.value.field == "max_attempts"
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404(NS, Q)


async def test_update_queue_patch(service, queue):
    patched = await service.update_queue(NS, Q, {"lease_seconds": 99, "retention_seconds": 0})
    assert patched.config == QueueConfig(lease_seconds=99, retention_seconds=0)
    assert (await service.get_queue_or_404(NS, Q)).config == patched.config
    assert await service.update_queue(NS, Q, {}) == patched
    for changes, field in [
        ({"kind": "exclusive"}, "kind"),
        ({"exclusive_key": "p"}, "exclusive_key"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"nonsense": 1}, "nonsense"),
    ]:
        with pytest.raises(ValidationError) as info:
            await service.update_queue(NS, Q, changes)
        assert info.value.field == field
    assert (await service.get_queue_or_404(NS, Q)).config == patched.config
    with pytest.raises(NotFoundError):
        await service.update_queue(NS, "nope", {"lease_seconds": 5})


async def test_delete_queue_cascades_messages(service, engine, queue):
    await service.enqueue(NS, Q, [new("a"), new("b"), new("c", delay_seconds=60)])
    await lease_one(service)
    await make_queue(service, NS, "other")
    await service.enqueue(NS, "other", [new("a")])
    await service.delete_queue(NS, Q)
    assert await count_messages(engine, queue.id) == 0
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404(NS, Q)
    with pytest.raises(NotFoundError):
        await service.get_message(NS, Q, "a")
    with pytest.raises(NotFoundError):
        await service.delete_queue(NS, Q)
    assert (await service.get_message(NS, "other", "a")).state is State.PENDING
    # The name can be reused: a new, empty queue.
    fresh, created = await service.put_queue(NS, Q, QueueConfig())
    assert created
    assert fresh.id != queue.id
    assert (await service.queue_detail(NS, Q)).stats.counts == {}


async def test_purge_queue_by_states(service, engine, queue):
    await service.enqueue(
        NS, Q, [new("p1"), new("p2"), new("i", delay_seconds=60), new("r"), new("c")]
    )
    leases = {m.id: m.lease_id for m in await service.dequeue(NS, Q, count=2)}
    assert set(leases) == {"p1", "p2"}
    await service.complete(NS, Q, "p1", leases["p1"])
    await service.cancel(NS, Q, "c")
    assert await service.purge_queue(NS, Q, ["completed", "canceled"]) == 2
    assert await states_of(engine, queue) == {"p2": "running", "i": "invisible", "r": "pending"}
    assert await service.purge_queue(NS, Q, []) == 0
    with pytest.raises(ValidationError) as info:
        await service.purge_queue(NS, Q, ["pending", "zombie"])
    assert info.value.field == "states[1]"
    assert await service.purge_queue(NS, Q) == 3
    assert await count_messages(engine, queue.id) == 0
    with pytest.raises(NotFoundError):
        await service.purge_queue(NS, "nope")


async def test_queue_detail_counts_and_oldest_pending_age(service, engine, queue):
    detail = await service.queue_detail(NS, Q)
    assert detail.queue == queue
    assert detail.stats.counts == {}
    assert detail.stats.oldest_pending_age_seconds is None
    await service.enqueue(
        NS,
        Q,
        [new("p1"), new("p2"), new("p3"), new("i", delay_seconds=60), new("x"), new("p4")],
    )
    await service.cancel(NS, Q, "x")
    first = await lease_one(service)
    await service.complete(NS, Q, first.id, first.lease_id)
    assert (await lease_one(service)).id == "p2"
    await shift_back(engine, "visible_at", 100, queue=queue, ids=["p3"])
    await shift_back(engine, "visible_at", 1000, queue=queue, ids=["x"])  # not pending
    detail = await service.queue_detail(NS, Q)
    assert detail.stats.counts == {
        State.PENDING: 2,
        State.INVISIBLE: 1,
        State.RUNNING: 1,
        State.COMPLETED: 1,
        State.CANCELED: 1,
    }
    age = detail.stats.oldest_pending_age_seconds
    assert age is not None
    assert 100 <= age < 160
    # list_queues: by name, with the same counts; other namespaces are not listed.
    await make_queue(service, NS, "a", kind="exclusive", exclusive_key="k")
    await make_queue(service, "other", "c")
    await service.enqueue("other", "c", [new("x")])
    listed = await service.list_queues(NS)
    assert [(q.name, counts) for q, counts in listed] == [("a", {}), (Q, detail.stats.counts)]
    with pytest.raises(NotFoundError):
        await service.list_queues("nowhere")


# ==============================================================================================
# namespaces and tokens
# ==============================================================================================


async def test_namespaces(service):
    created = await service.create_namespace("alpha", "first one")
    assert (created.name, created.description) == ("alpha", "first one")
    await service.create_namespace("beta")
    with pytest.raises(ConflictError):
        await service.create_namespace("alpha", "again")
    assert [(n.name, n.description) for n in await service.list_namespaces()] == [
        ("alpha", "first one"),
        ("beta", ""),
    ]
    with pytest.raises(ValidationError) as info:
        await service.create_namespace("no spaces")
    assert info.value.field == "name"
    with pytest.raises(ValidationError) as info:
        await service.create_namespace("ok", "nul\x00")
    assert info.value.field == "description"
    with pytest.raises(NotFoundError):
        await service.delete_namespace("gamma")


async def test_delete_namespace_cascades(service, engine):
    queue = await make_queue(service, "doomed", Q)
    await service.enqueue("doomed", Q, [new("a"), new("b")])
    issued = await service.issue_token("doomed")
    kept = await make_queue(service, "kept", Q)
    await service.enqueue("kept", Q, [new("a")])
    await service.delete_namespace("doomed")
    assert [n.name for n in await service.list_namespaces()] == ["kept"]
    assert await count_messages(engine, queue.id) == 0
    assert await scalar(engine, "SELECT count(*) FROM queues WHERE namespace = 'doomed'") == 0
    assert await scalar(engine, "SELECT count(*) FROM tokens WHERE namespace = 'doomed'") == 0
    assert await service.authenticate(issued.secret) is None
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404("doomed", Q)
    with pytest.raises(NotFoundError):
        await service.list_tokens("doomed")
    assert await count_messages(engine, kept.id) == 1


async def test_tokens_issue_list_revoke(service):
    await service.create_namespace(NS)
    await service.create_namespace("other")
    issued = await service.issue_token(NS, "ci")
    second = await service.issue_token(NS, "deploy")
    assert issued.secret.startswith("sdl_")
    assert issued.secret != second.secret
    assert (issued.token.namespace, issued.token.label, issued.token.expires_at) == (
        NS,
        "ci",
        None,
    )
    listed = await service.list_tokens(NS)
    assert [t.id for t in listed] == [issued.token.id, second.token.id]
    assert listed[0] == issued.token
    assert not hasattr(listed[0], "secret")
    assert await service.list_tokens("other") == []
    principal = await service.authenticate(issued.secret)
    assert principal == Principal(is_admin=False, namespace=NS, token_id=issued.token.id)
    # Revoking through another namespace finds nothing and changes nothing.
    with pytest.raises(NotFoundError):
        await service.revoke_token("other", issued.token.id)
    assert await service.authenticate(issued.secret) is not None
    await service.revoke_token(NS, issued.token.id)
    assert await service.authenticate(issued.secret) is None
    assert await service.authenticate(second.secret) is not None
    assert [t.id for t in await service.list_tokens(NS)] == [second.token.id]
    with pytest.raises(NotFoundError):
        await service.revoke_token(NS, issued.token.id)
    with pytest.raises(NotFoundError):
        await service.revoke_token(NS, "not-a-uuid")


async def test_token_refusals(service):
    with pytest.raises(NotFoundError):
        await service.issue_token("nowhere")
    with pytest.raises(NotFoundError):
        await service.list_tokens("nowhere")
    await service.create_namespace(NS)
    with pytest.raises(ValidationError) as info:
        await service.issue_token(NS, "x" * 201)
    assert info.value.field == "label"
    with pytest.raises(ValidationError) as info:
        await service.issue_token(NS, expires_at=datetime(2030, 1, 1))  # noqa: DTZ001
    assert info.value.field == "expires_at"
    assert await service.list_tokens(NS) == []


async def test_authenticate(service, engine):
    await service.create_namespace(NS)
    admin = await service.authenticate(ADMIN_TOKEN)
    assert admin == Principal(is_admin=True)
    assert admin.may_access(NS)
    assert admin.may_access("anything")
    expired = await service.issue_token(NS, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert await service.authenticate(expired.secret) is None
    valid = await service.issue_token(NS, expires_at=datetime.now(UTC) + timedelta(hours=1))
    principal = await service.authenticate(valid.secret)
    assert principal is not None
    assert principal.may_access(NS)
    assert not principal.may_access("other")
    # Expiry is judged by the database clock at each call.
    await execute(engine, "UPDATE tokens SET expires_at = now() - interval '1 second'")
    assert await service.authenticate(valid.secret) is None
    for garbage in ["", "x", "sdl_", "sdl_" + "A" * 43, ADMIN_TOKEN + "x", ADMIN_TOKEN[:-1]]:
        assert await service.authenticate(garbage) is None, garbage
    assert await service.authenticate(valid.secret + "x") is None
    assert await service.authenticate("sdl_" + "a" * 300) is None


async def test_authenticate_without_admin_token():
    # No database needed: these secrets never reach the store.
    for admin_token in (None, ""):
        service = QueueService(_NoStore(), limits=Limits(), admin_token=admin_token)
        assert await service.authenticate("") is None
        assert await service.authenticate(ADMIN_TOKEN) is None


class _NoStore:
    def __getattr__(self, name):
        raise AssertionError(f"the store was used: {name}")


# ==============================================================================================
# unknown namespace / queue / message
# ==============================================================================================

LEASE = str(uuid.uuid4())
QUEUE_OPERATIONS = {
    "enqueue": lambda s, ns, q: s.enqueue(ns, q, [NewMessage()]),
    "dequeue": lambda s, ns, q: s.dequeue(ns, q),
    "complete": lambda s, ns, q: s.complete(ns, q, "m", LEASE),
    "fail": lambda s, ns, q: s.fail(ns, q, "m", LEASE),
    "extend": lambda s, ns, q: s.extend(ns, q, "m", LEASE, 10),
    "ack": lambda s, ns, q: s.ack(ns, q, [LeaseRef("m", LEASE)], []),
    "get_message": lambda s, ns, q: s.get_message(ns, q, "m"),
    "update_message": lambda s, ns, q: s.update_message(ns, q, "m", MessageChanges(priority=1)),
    "delete_message": lambda s, ns, q: s.delete_message(ns, q, "m"),
    "cancel": lambda s, ns, q: s.cancel(ns, q, "m", force=True),
    "requeue": lambda s, ns, q: s.requeue(ns, q, "m"),
    "requeue_dead_letters": lambda s, ns, q: s.requeue_dead_letters(ns, q),
    "query_messages": lambda s, ns, q: s.query_messages(ns, q, MessageFilter()),
    "queue_detail": lambda s, ns, q: s.queue_detail(ns, q),
    "update_queue": lambda s, ns, q: s.update_queue(ns, q, {"lease_seconds": 5}),
    "delete_queue": lambda s, ns, q: s.delete_queue(ns, q),
    "purge_queue": lambda s, ns, q: s.purge_queue(ns, q),
}
MESSAGE_OPERATIONS = [
    "complete",
    "fail",
    "extend",
    "get_message",
    "update_message",
    "delete_message",
    "cancel",
    "requeue",
]


async def test_unknown_namespace_or_queue_is_not_found(service):
    await make_queue(service, NS, Q)
    await make_queue(service, "other", "elsewhere")
    not_raised = []
    for operation, call in sorted(QUEUE_OPERATIONS.items()):
        for namespace, queue_name in [("nowhere", Q), (NS, "nowhere"), (NS, "elsewhere")]:
            try:
                await call(service, namespace, queue_name)
            except NotFoundError:
                continue
            not_raised.append((operation, namespace, queue_name))
    assert not_raised == []
    assert (await service.get_queue_or_404(NS, Q)).config == QueueConfig()


async def test_unknown_message_is_not_found(service, engine):
    queue = await make_queue(service, NS, Q)
    await make_queue(service, NS, "other")
    await service.enqueue(NS, "other", [new("m")])  # same id, another queue
    not_raised = []
    for operation in MESSAGE_OPERATIONS:
        try:
            await QUEUE_OPERATIONS[operation](service, NS, Q)
        except NotFoundError:
            continue
        not_raised.append(operation)
    assert not_raised == []
    (result,) = await service.ack(NS, Q, [LeaseRef("m", LEASE)], [])
    assert (result.ok, result.error) == (False, "not_found")
    assert await count_messages(engine, queue.id) == 0
    assert (await service.get_message(NS, "other", "m")).state is State.PENDING


# ==============================================================================================
# SQL backoff == Python backoff
# ==============================================================================================


async def test_sql_retry_delay_equals_backoff_seconds(engine):
    attempts = [-5, 0, 1, 2, 3, 4, 7, 10, 11, 20, 31, 32, 62, 63, 64, 100, 10_000, 2**31 - 1]
    bases = [0, 1, 2, 3, 7, 10, 30, 3600, MAX_DELAY_SECONDS]
    caps = [0, 1, 15, 60, 3600, 86_400, MAX_DELAY_SECONDS, 2**31 - 1]
    grid = [(a, b, c) for a in attempts for b in bases for c in caps]
    rows = await fetch(
        engine,
        "SELECT a, b, c, sundial_retry_delay(a, b, c) AS d FROM unnest("
        "CAST(:a AS integer[]), CAST(:b AS integer[]), CAST(:c AS integer[])) AS g(a, b, c)",
        a=[g[0] for g in grid],
        b=[g[1] for g in grid],
        c=[g[2] for g in grid],
    )
    assert len(rows) == len(grid)
    mismatches = [
        (r["a"], r["b"], r["c"], r["d"])
        for r in rows
        if r["d"] != backoff_seconds(attempt=r["a"], base_seconds=r["b"], cap_seconds=r["c"])
    ]
    assert mismatches == []
