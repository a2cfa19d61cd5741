"""Enqueue through the service: batches, ids, defaults and overrides, delays and expiry, and
the refusals that leave the queue as it was.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.core.errors import (
    NotFoundError,
    PayloadTooLargeError,
    QueuePausedError,
    ValidationError,
)
from app.core.models import (
    MessageFilter,
    NewMessage,
)
from app.core.states import State
from tests.helpers import (
    count_messages,
    fetch,
    make_queue,
    raw_row,
    shift_back,
)
from tests.service.helpers import NS, Q, lease_one, new, seconds


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
