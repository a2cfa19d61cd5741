"""The dashboard's read side (app/core/insights.py over app/store/insights.py) on a real
database: per-minute throughput and wait times over the last hour, running exclusive values
and what waits behind them, oldest pending ages, and the guarded delete of dead letters.

Time moves by shifting timestamps back with SQL (tests/helpers.py), never by sleeping."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.bootstrap.database import build_insights
from app.core.errors import NotFoundError, ValidationError
from app.core.insights import WINDOW_MINUTES, PoolNamespaces, QueueInsights
from app.core.models import NewMessage
from app.core.service import QueueService
from app.core.states import State
from app.store import maintenance
from app.store.insights import PostgresInsights
from tests.helpers import make_queue, scalar, shift_back, states_of

NOW = WINDOW_MINUTES - 1  # the index of the current minute in a series


@pytest.fixture
def insights(engine: AsyncEngine, service: QueueService) -> QueueInsights:
    return build_insights({"default": engine}, service)


async def enqueue(service: QueueService, ns: str, queue: str, *ids: str, **fields: object) -> None:
    await service.enqueue(ns, queue, [NewMessage(id=i, **fields) for i in ids])  # type: ignore[arg-type]


async def lease(service: QueueService, ns: str, queue: str, count: int) -> dict[str, str]:
    return {m.id: m.lease_id for m in await service.dequeue(ns, queue, count=count)}


async def test_throughput_counts_each_outcome_in_its_minute(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, "ns", "q", max_attempts=1)
    await enqueue(service, "ns", "q", "old", "a", "b", "c", "d", "e")
    # "old" was enqueued before the window (it is the queue's first row, as seq requires).
    await shift_back(engine, "enqueued_at", 90 * 60, queue=queue, ids=["old"])
    leases = await lease(service, "ns", "q", 4)  # old, a, b, c
    await service.complete("ns", "q", "old", leases["old"])
    await service.complete("ns", "q", "a", leases["a"])
    await service.fail("ns", "q", "b", leases["b"], error="boom")  # last attempt: errored
    await service.cancel("ns", "q", "d")
    # "a" finished ten minutes ago.
    await shift_back(engine, "finished_at", 600, queue=queue, ids=["a"])

    series = (await insights.queue_activity("ns", "q")).throughput

    assert len(series.enqueued) == WINDOW_MINUTES
    assert series.step_seconds == 60
    assert series.total("enqueued") == 5  # a..e, not "old"
    assert series.enqueued[NOW] == 5
    assert series.completed[NOW - 10] == 1
    assert series.completed[NOW] == 1
    assert series.total("completed") == 2
    assert series.errored[NOW] == 1
    assert series.canceled[NOW] == 1


async def test_throughput_leaves_out_what_finished_before_the_window(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, "ns", "q")
    await enqueue(service, "ns", "q", "a", "b")
    leases = await lease(service, "ns", "q", 2)
    for message_id, lease_id in leases.items():
        await service.complete("ns", "q", message_id, lease_id)
    await shift_back(engine, "enqueued_at", 2 * 3600, queue=queue)
    await shift_back(engine, "finished_at", 3601 + 60, queue=queue, ids=["a"])

    series = (await insights.queue_activity("ns", "q")).throughput

    assert series.total("enqueued") == 0
    assert series.total("completed") == 1


async def test_throughput_counts_messages_already_moved_to_history(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    await make_queue(service, "ns", "short", retention_seconds=0)
    await enqueue(service, "ns", "short", "a", "b", "c")
    leases = await lease(service, "ns", "short", 2)
    for message_id, lease_id in leases.items():
        await service.complete("ns", "short", message_id, lease_id)
    async with engine.connect() as conn:
        assert await maintenance.archive_finished(conn) == 2

    series = (await insights.queue_activity("ns", "short")).throughput

    assert series.total("enqueued") == 3  # one in the hot table, two in history
    assert series.total("completed") == 2


async def test_overview_sums_every_queue_and_reports_oldest_pending_age(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    first = await make_queue(service, "alpha", "one")
    await make_queue(service, "alpha", "two")
    await make_queue(service, "beta", "three")
    await enqueue(service, "alpha", "one", "x", "y")
    await enqueue(service, "beta", "three", "z")
    await shift_back(engine, "visible_at", 120, queue=first, ids=["x"])
    await lease(service, "beta", "three", 1)

    found = await insights.overview()

    assert [n.name for n in found.namespaces] == ["alpha", "beta"]
    rows = {(s.queue.namespace, s.queue.name): s for s in found.queues}
    assert set(rows) == {("alpha", "one"), ("alpha", "two"), ("beta", "three")}
    assert rows["alpha", "one"].counts == {State.PENDING: 2}
    assert rows["alpha", "one"].oldest_pending_age_seconds == pytest.approx(120, abs=5)
    assert rows["alpha", "two"].oldest_pending_age_seconds is None
    assert rows["beta", "three"].counts == {State.RUNNING: 1}
    assert found.throughput.total("enqueued") == 3


async def test_wait_times_are_enqueue_to_first_lease_percentiles(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, "ns", "q")
    await enqueue(service, "ns", "q", "a", "b", "c")
    await shift_back(engine, "enqueued_at", 100, queue=queue, ids=["a"])
    await shift_back(engine, "enqueued_at", 200, queue=queue, ids=["b"])
    await shift_back(engine, "enqueued_at", 300, queue=queue, ids=["c"])
    leases = await lease(service, "ns", "q", 3)
    await service.complete("ns", "q", "a", leases["a"])  # finished ones count as well

    waits = (await insights.queue_activity("ns", "q")).wait_times

    assert waits.count[NOW] == 3
    assert sum(waits.count) == 3
    assert waits.p50_seconds[NOW] == pytest.approx(200, abs=5)
    assert waits.p95_seconds[NOW] == pytest.approx(290, abs=5)
    assert waits.max_seconds[NOW] == pytest.approx(300, abs=5)
    assert waits.p50_seconds[NOW - 1] is None


async def test_exclusive_activity_lists_running_values_and_what_waits_behind_them(
    service: QueueService, insights: QueueInsights
) -> None:
    await make_queue(service, "ns", "builds", kind="exclusive", exclusive_key="project")
    for message_id, project in [
        ("web-1", "web"),
        ("web-2", "web"),
        ("web-3", "web"),
        ("api-1", "api"),
        ("api-2", "api"),
        ("docs-1", "docs"),
    ]:
        await enqueue(service, "ns", "builds", message_id, metadata={"project": project})
    running = await lease(service, "ns", "builds", 10)
    assert set(running) == {"web-1", "api-1", "docs-1"}

    activity = (await insights.queue_activity("ns", "builds")).exclusive

    assert activity is not None
    by_value = {r.value: r for r in activity.running}
    assert {v: (r.message_id, r.blocked) for v, r in by_value.items()} == {
        "web": ("web-1", 2),
        "api": ("api-1", 1),
        "docs": ("docs-1", 0),
    }
    assert activity.blocked == 3
    assert activity.scanned == 3
    assert all(r.attempts == 1 and r.lease_left_seconds > 0 for r in activity.running)


async def test_simple_queues_have_no_exclusive_activity(
    service: QueueService, insights: QueueInsights
) -> None:
    await make_queue(service, "ns", "q")
    assert (await insights.queue_activity("ns", "q")).exclusive is None


async def test_delete_dead_letters_removes_only_errored_and_canceled(
    service: QueueService, insights: QueueInsights, engine: AsyncEngine
) -> None:
    queue = await make_queue(service, "ns", "q", max_attempts=1)
    await enqueue(service, "ns", "q", "err", "live", "gone")
    leases = await lease(service, "ns", "q", 1)
    await service.fail("ns", "q", "err", leases["err"])
    await service.cancel("ns", "q", "gone")

    deleted = await insights.delete_dead_letters("ns", "q", ["err", "live", "gone", "nope"])

    assert deleted == 2
    assert await states_of(engine, queue) == {"live": "pending"}


async def test_delete_dead_letters_checks_its_input(
    insights: QueueInsights, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    with pytest.raises(ValidationError) as empty:
        await insights.delete_dead_letters("ns", "q", [])
    assert empty.value.field == "ids"
    with pytest.raises(ValidationError) as bad:
        await insights.delete_dead_letters("ns", "q", ["ok", "not an id!"])
    assert bad.value.field == "ids[1]"
    with pytest.raises(NotFoundError):
        await insights.delete_dead_letters("ns", "missing", ["a"])


async def test_an_empty_server_has_an_empty_overview(insights: QueueInsights) -> None:
    found = await insights.overview()
    assert found.queues == []
    assert found.throughput.enqueued == [0] * WINDOW_MINUTES


async def test_series_start_is_the_database_minute_an_hour_ago(
    insights: QueueInsights, service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, "ns", "q")
    series = (await insights.queue_activity("ns", "q")).throughput
    expected = await scalar(engine, "SELECT date_trunc('minute', now()) - interval '59 minutes'")
    # the same minute (or the next one, if a minute turned between the two statements)
    assert 0 <= (expected - series.start).total_seconds() <= 60


async def test_a_database_that_does_not_answer_is_reported_not_raised(
    insights: QueueInsights, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    found = await insights.store.namespaces_by_pool()
    assert [(p.pool, [n.name for n in p.namespaces or []], p.placed) for p in found] == [
        ("default", ["ns"], ["ns"])
    ]
    unreachable = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        down = await PostgresInsights(unreachable).namespaces_of("b")
    finally:
        await unreachable.dispose()
    assert down == PoolNamespaces("b", None, [])
