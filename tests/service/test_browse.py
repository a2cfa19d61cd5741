"""Reading one message and listing messages a page at a time, through the service."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from app.core.errors import (
    ValidationError,
)
from app.core.models import (
    MessageFilter,
)
from app.core.service import QueueService
from app.core.states import State
from tests.helpers import (
    raw_row,
)
from tests.service.helpers import NS, Q, new


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
