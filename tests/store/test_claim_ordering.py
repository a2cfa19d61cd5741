"""A queue's ordering: ``priority`` (priority, then enqueue order) or ``due`` (the time a message
became visible first, priority breaking ties among messages due at the same instant, then
enqueue order), in both of the claim's sources, on simple and exclusive queues, with and
without filters. The setting is fixed at creation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ConflictError, ValidationError
from app.core.models import FilterValue, MessageChanges, NewMessage, QueueConfig
from app.core.service import QueueService
from tests.helpers import execute, leased_ids, make_queue

NS = "ns"


async def _delayed_then_backlog(
    service: QueueService, engine: AsyncEngine, name: str, *, promoted: bool, **config: Any
) -> None:
    """A message delayed for an hour, then a backlog enqueued after it (visible at once); then
    the hour passes for the delayed one (it becomes visible now, after the backlog). Promoted:
    it is pending, as the scheduler leaves it; else still invisible, due for the claim's due
    source. Every message has the default priority."""
    queue = await make_queue(service, NS, name, **config)
    tags = {"tenant": "a", "project": "delayed"}
    await service.enqueue(NS, name, [NewMessage(id="delayed", metadata=tags, delay_seconds=3600)])
    await service.enqueue(
        NS,
        name,
        [
            NewMessage(id=f"backlog-{i}", metadata={"tenant": "a", "project": f"p{i}"})
            for i in range(3)
        ],
    )
    if promoted:  # PATCH to now: pending, visible from now on
        changes = MessageChanges(visible_at=datetime.now(UTC))
        await service.update_message(NS, name, "delayed", changes)
    else:
        await execute(
            engine,
            "UPDATE messages SET visible_at = now() WHERE queue_id = :q AND id = 'delayed'",
            q=queue.id,
        )


@pytest.mark.parametrize("promoted", [True, False], ids=["promoted", "due-source"])
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"kind": "exclusive", "exclusive_key": "project"},
        {"filter_keys": ("tenant",)},
    ],
    ids=["simple", "exclusive", "keyed"],
)
@pytest.mark.parametrize(
    "wanted",
    [{}, {"tenant": "a"}, {"tenant": ["a", "b"]}, {"project": ["delayed", "p0", "p1", "p2"]}],
    ids=["unfiltered", "one-value", "any-value", "other-key"],
)
async def test_a_long_delayed_message_jumps_a_backlog_by_priority_but_not_by_due_time(
    service: QueueService,
    engine: AsyncEngine,
    promoted: bool,
    config: dict[str, Any],
    wanted: dict[str, FilterValue],
) -> None:
    await _delayed_then_backlog(service, engine, "by-priority", promoted=promoted, **config)
    await _delayed_then_backlog(
        service, engine, "by-due", promoted=promoted, ordering="due", **config
    )

    # The problem: same priority, earlier enqueue: the delayed message goes first.
    assert await leased_ids(service, NS, "by-priority", 10, **wanted) == [
        "delayed",
        "backlog-0",
        "backlog-1",
        "backlog-2",
    ]
    # Ordering "due": it became visible last, so it is served last.
    assert await leased_ids(service, NS, "by-due", 10, **wanted) == [
        "backlog-0",
        "backlog-1",
        "backlog-2",
        "delayed",
    ]


@pytest.mark.parametrize("count", [1, 10])
async def test_priority_breaks_ties_among_messages_due_at_the_same_instant(
    service: QueueService, count: int
) -> None:
    await make_queue(service, NS, "q", ordering="due")
    at = datetime.now(UTC) - timedelta(seconds=5)
    later = at + timedelta(seconds=1)
    await service.enqueue(
        NS,
        "q",
        [
            NewMessage(id="later-urgent", priority=-10, visible_at=later),
            NewMessage(id="at-low", priority=5, visible_at=at),
            NewMessage(id="at-high", priority=1, visible_at=at),
            NewMessage(id="at-high-2", priority=1, visible_at=at),
        ],
    )
    # Due at once (visible_at now()), in the same statement: the same instant. now-a has the
    # default priority, its enqueue time in ms.
    await service.enqueue(NS, "q", [NewMessage(id="now-a"), NewMessage(id="now-b", priority=2)])

    expected = ["at-high", "at-high-2", "at-low", "later-urgent", "now-b", "now-a"]
    got: list[str] = []
    while batch := await leased_ids(service, NS, "q", count):
        got += batch
    assert got == expected


async def test_due_ordering_of_a_mixed_batch_across_both_sources(
    service: QueueService, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, NS, "q", ordering="due", filter_keys=("tenant",))
    await service.enqueue(
        NS,
        "q",
        [
            NewMessage(id=f"d{i}", priority=-i, delay_seconds=3600, metadata={"tenant": "a"})
            for i in range(3)
        ],
    )
    await execute(  # due 30, 20, 10 seconds ago, not promoted
        engine,
        "UPDATE messages SET visible_at = now() - make_interval(secs => 30 - 10 * "
        "substr(id, 2)::int) WHERE queue_id = :q",
        q=queue.id,
    )
    early = datetime.now(UTC) - timedelta(seconds=25)
    await service.enqueue(
        NS,
        "q",
        [
            NewMessage(id="p-25", priority=9, visible_at=early, metadata={"tenant": "b"}),
            NewMessage(id="p-now", priority=-99, metadata={"tenant": "a"}),
        ],
    )

    expected = ["d0", "p-25", "d1", "d2", "p-now"]
    assert await leased_ids(service, NS, "q", 10) == expected


async def test_the_ordering_is_fixed_at_creation(service: QueueService) -> None:
    await make_queue(service, NS, "q", ordering="due")

    queue = await service.get_queue(NS, "q")
    assert queue.config.ordering == "due"
    with pytest.raises(ConflictError) as conflict:
        await service.put_queue(NS, "q", QueueConfig(ordering="priority"))
    assert "ordering='due'" in str(conflict.value)
    with pytest.raises(ValidationError) as refused:
        await service.update_queue(NS, "q", {"ordering": "priority"})
    assert refused.value.field == "ordering"
    with pytest.raises(ValidationError) as refused:
        await service.put_queue(NS, "other", QueueConfig(ordering="fifo"))  # type: ignore[arg-type]
    assert refused.value.field == "ordering"
    same, created = await service.put_queue(NS, "q", QueueConfig(ordering="due", lease_seconds=9))
    assert (created, same.config.ordering, same.config.lease_seconds) == (False, "due", 9)
