"""``GET /metrics``: parsed with prometheus_client's own parser after real traffic.

Process metrics live in the test process's global registry and add up over the tests of a run,
so counters are compared before and after; the database gauges are this test's database only.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from prometheus_client import CollectorRegistry, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from pydantic import SecretStr
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.bootstrap.database import scheduling
from app.bootstrap.server import create_app
from app.core.maintenance import TickResult
from app.core.readings import DatabaseStats, QueueDepth
from app.observability import metrics
from app.observability.database import DatabaseCollector, DatabaseStatsCache, Reading
from app.observability.endpoint import render
from app.observability.existing import ExistingQueuesOnly
from app.observability.observer import QueueLabels
from app.observability.sampler import Sampler
from app.observability.server import ServerMetrics
from app.scheduler import Scheduler
from app.web.waiters import WaiterRegistry
from tests.api.conftest import Caller, assert_error, make_settings, namespace_caller, serve
from tests.conftest import ADMIN_TOKEN

DOC = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(caller: Caller) -> Samples:
    response = await caller.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def parse(body: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def server_metrics(caller: Caller) -> ServerMetrics:
    found: ServerMetrics = caller.app.state.metrics
    return found


async def test_metrics_need_no_token_and_every_metric_is_documented(anonymous, alpha, queue):
    await alpha.post(f"{queue}/messages", json={"messages": [{"id": "a"}]})
    response = await anonymous.get("/metrics")
    assert response.status_code == 200
    names = {f.name for f in text_string_to_metric_families(response.text)}
    sundial = {n for n in names if n.startswith("sundial_")}
    documented = set(re.findall(r"`(sundial_[a-z_]+)`", DOC.read_text()))
    # The parser drops counters' _total from family names; the docs use the full name.
    exposed = {n + "_total" if f"{n}_total" in documented else n for n in sundial}
    # Litestar creates its error counter at the first 5xx, which this test does not cause.
    lazy = {"sundial_http_requests_error_total"}
    assert exposed - lazy == documented - lazy


async def test_counters_count_only_committed_changes(alpha, queue):
    before = await scrape(alpha)
    labels = {"namespace": "alpha", "queue": "q"}
    messages = [{"id": i} for i in ("a", "b", "c", "d", "a")]  # "a" twice: created once
    assert (await alpha.post(f"{queue}/messages", json={"messages": messages})).status_code == 201
    got = (await alpha.post(f"{queue}/dequeue", json={"count": 3})).json()["messages"]
    assert len(got) == 3
    first, second, third = got
    done = {"lease_id": first["lease_id"]}
    assert (await alpha.post(f"{queue}/messages/{first['id']}/complete", json=done)).is_success
    # Repeating a complete with the same lease is accepted but changes nothing.
    assert (await alpha.post(f"{queue}/messages/{first['id']}/complete", json=done)).is_success
    fail = {"lease_id": second["lease_id"], "error": "boom"}
    assert (await alpha.post(f"{queue}/messages/{second['id']}/fail", json=fail)).is_success
    ack = {
        "complete": [
            {"id": third["id"], "lease_id": third["lease_id"]},
            {"id": first["id"], "lease_id": second["lease_id"]},  # stale: refused
        ]
    }
    results = (await alpha.post(f"{queue}/ack", json=ack)).json()["results"]
    assert [r["ok"] for r in results] == [True, False]
    pending = next(i for i in ("a", "b", "c", "d") if i not in {m["id"] for m in got})
    assert (await alpha.post(f"{queue}/messages/{pending}/cancel", json={})).is_success
    assert (await alpha.post(f"{queue}/messages/{pending}/requeue", json={})).is_success
    after = await scrape(alpha)

    def moved(name: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("sundial_messages_enqueued_total") == 4
    assert moved("sundial_messages_dequeued_total") == 3
    assert moved("sundial_messages_completed_total") == 2
    assert moved("sundial_messages_failed_total") == 1
    assert moved("sundial_messages_canceled_total") == 1
    assert moved("sundial_messages_requeued_total") == 1


async def test_http_latency_is_labelled_by_route_template(alpha, queue):
    before = await scrape(alpha)
    for message_id in ("x1", "x2", "x3"):
        await alpha.get(f"{queue}/messages/{message_id}")  # 404s: unknown ids
    after = await scrape(alpha)
    route = {
        "app_name": "sundial",
        "method": "GET",
        "path": "/v1/namespaces/{ns}/queues/{queue}/messages/{message_id}",
        "status_code": "404",
    }
    count = "sundial_http_request_duration_seconds_count"
    assert value(after, count, **route) - value(before, count, **route) == 3
    paths = {dict(labels).get("path") for _, labels in after}
    assert not any(p and ("alpha" in p or "x1" in p) for p in paths), paths


async def test_queue_depth_oldest_pending_age_and_scheduler_lag(alpha, queue, engine):
    # The test app runs no scheduler, so overdue work stays overdue.
    body = {"messages": [{"id": "p1"}, {"id": "p2"}, {"id": "later", "delay_seconds": 3600}]}
    assert (await alpha.post(f"{queue}/messages", json=body)).status_code == 201
    await alpha.post(f"{queue}/dequeue", json={"count": 1})
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE messages SET visible_at = now() - interval '30 seconds' WHERE id = 'later'"
            )
        )
        await conn.execute(
            text(
                "UPDATE messages SET lease_expires_at = now() - interval '20 seconds'"
                " WHERE state = 'running'"
            )
        )
        await conn.execute(
            text(
                "UPDATE messages SET visible_at = now() - interval '40 seconds'"
                " WHERE state = 'pending'"
            )
        )
    samples = await scrape(alpha)
    q = {"namespace": "alpha", "queue": "q"}
    assert value(samples, "sundial_database_up") == 1
    assert value(samples, "sundial_queue_messages", **q, state="pending") == 1
    assert value(samples, "sundial_queue_messages", **q, state="running") == 1
    assert value(samples, "sundial_queue_messages", **q, state="invisible") == 1
    assert 40 <= value(samples, "sundial_queue_oldest_pending_age_seconds", **q) < 100
    assert 30 <= value(samples, "sundial_scheduler_lag_seconds", work="promotion") < 100
    assert 20 <= value(samples, "sundial_scheduler_lag_seconds", work="lease_release") < 100
    assert value(samples, "sundial_scheduler_lag_seconds", work="expiry") == 0


async def test_dead_tuples_come_from_the_statistics(alpha, queue, engine):
    body = {"messages": [{"id": f"m{i}"} for i in range(10)]}
    assert (await alpha.post(f"{queue}/messages", json=body)).status_code == 201
    async with engine.connect() as conn:
        await conn.execute(text("DELETE FROM messages WHERE id IN ('m1', 'm2', 'm3', 'm4', 'm5')"))
        await conn.commit()
        # Make this session hand its statistics in now rather than within a second.
        await conn.execute(text("SELECT pg_stat_force_next_flush()"))
        await conn.commit()
    samples = await scrape(alpha)
    assert value(samples, "sundial_table_dead_tuples", table="messages") >= 5
    # Live tuples are reported too (their figure depends on when the enqueue's session hands
    # in its statistics, so only its presence is certain here).
    assert ("sundial_table_live_tuples", frozenset({("table", "messages")})) in samples


async def test_the_database_is_read_once_per_period_however_many_scrape(alpha, queue, engine):
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "pg_stat_user_tables" in statement:
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        cache = server_metrics(alpha).database
        now = [1000.0]
        cache.recent.clock = lambda: now[0]
        await asyncio.gather(*(scrape(alpha) for _ in range(5)))
        await scrape(alpha)
        assert len(statements) == 1
        now[0] += cache.recent.ttl
        await scrape(alpha)
        assert len(statements) == 2
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)


async def test_an_unreachable_database_is_a_metric_not_an_error():
    engine = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        reading = await DatabaseStatsCache(engine, timeout=5).reading()
    finally:
        await engine.dispose()
    assert reading.stats is None
    samples = parse(render(reading, reading.taken_at).decode())
    assert value(samples, "sundial_database_up") == 0
    assert not any(name == "sundial_queue_messages" for name, _ in samples)


async def test_scrape_answers_while_the_database_is_unreachable(anonymous):
    cache = server_metrics(anonymous).database
    cache.engine = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        samples = await scrape(anonymous)
    finally:
        await cache.engine.dispose()
    assert value(samples, "sundial_database_up") == 0
    assert ("sundial_db_pool_size", frozenset()) in samples  # process metrics still there


async def test_long_poll_waiters_and_pool_usage(alpha, queue, engine):
    rt = alpha.runtime
    sampler = server_metrics(alpha).sampler
    sampler.sample()
    before = await scrape(alpha)
    queue_id = (await rt.service.get_queue_or_404("alpha", "q")).id
    poll = asyncio.create_task(alpha.post(f"{queue}/dequeue", json={"wait_seconds": 10}))
    await asyncio.wait_for(rt.waiters.wait_for_waiting(queue_id, 1), 5)
    sampler.sample()
    during = await scrape(alpha)
    assert (await alpha.post(f"{queue}/messages", json={"messages": [{"id": "w"}]})).is_success
    assert (await poll).json()["messages"][0]["id"] == "w"
    sampler.sample()
    after = await scrape(alpha)
    waiters = "sundial_longpoll_waiters"
    assert value(during, waiters) - value(before, waiters) == 1
    assert value(after, waiters) == value(before, waiters)
    assert value(during, "sundial_db_pool_size") == engine.pool.size()  # type: ignore[attr-defined]
    assert value(during, "sundial_db_pool_connections", state="idle") >= 1  # earlier requests'
    # The gauges report the pool's own figures at the moment of the sample. The background
    # sampling stops first: a sample of its own could land while the scrape holds a connection
    # (it reads which queues exist), and report that moment instead.
    await sampler.stop()
    sampler.sample()
    pool = engine.pool
    at_sample = (pool.checkedout(), pool.checkedin())  # type: ignore[attr-defined]
    sampled = await scrape(alpha)
    reported = tuple(
        value(sampled, "sundial_db_pool_connections", state=state) for state in ("in_use", "idle")
    )
    assert reported == at_sample


@pytest.fixture
async def scheduled(database_url: str, engine: AsyncEngine) -> AsyncIterator[Caller]:
    """An admin caller of an app whose scheduler runs (fast ticks)."""
    settings = make_settings(database_url, scheduler_enabled=True, scheduler_tick_seconds=0.02)
    app: Litestar = create_app(settings, engine=engine)
    async with serve(app) as client:
        yield Caller(client, app, ADMIN_TOKEN)


async def test_ticks_that_finish_before_the_watcher_wakes_are_all_counted(engine, database_url):
    # The tick watcher runs on the event loop after the scheduler announces a tick; on a busy
    # loop two ticks can finish before it runs. Both must be counted. The scheduler is not
    # started: its counters are moved by hand, its announcement is the real one.
    scheduler = Scheduler(engine, make_settings(database_url), work=scheduling)
    sampler = Sampler(engine, WaiterRegistry(), scheduler)

    def expired_so_far() -> float:
        return value(parse(render(Reading(None, 0), 0).decode()), "sundial_messages_expired_total")

    before = expired_so_far()
    await sampler.start()
    try:
        await asyncio.sleep(0)  # one loop turn: the watcher takes its baseline and waits
        for result in (TickResult(expired=2), TickResult(expired=3)):
            scheduler.changed += result
            scheduler.ticks += 1
        await scheduler._announce()
        for _ in range(100):  # bounded loop turns, no wall-clock wait
            if expired_so_far() - before == 5:
                break
            await asyncio.sleep(0)
        assert expired_so_far() - before == 5
    finally:
        await sampler.stop()


async def test_scheduler_leadership_ticks_and_expiry_counts(scheduled: Caller, engine):
    caller = scheduled
    sampler = server_metrics(caller).sampler
    scheduler = sampler.scheduler
    assert scheduler is not None
    await asyncio.wait_for(scheduler.wait_until(leader=True), 10)
    await caller.post("/v1/namespaces", json={"name": "s"})
    base = "/v1/namespaces/s/queues/q"
    assert (await caller.put(base, json={"max_attempts": 1})).status_code == 201
    before = await scrape(caller)
    body = {"messages": [{"id": "held"}, {"id": "doomed", "ttl_seconds": 3600}]}
    assert (await caller.post(f"{base}/messages", json=body)).status_code == 201
    held = (await caller.post(f"{base}/dequeue", json={"count": 1})).json()["messages"]
    assert [m["id"] for m in held] == ["held"]
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = 'doomed'")
        )
        await conn.execute(
            text(
                "UPDATE messages SET lease_expires_at = now() - interval '1 second'"
                " WHERE id = 'held'"
            )
        )

    def counted() -> tuple[float, float]:
        samples = parse(render(Reading(None, 0), 0).decode())
        return (
            value(samples, "sundial_messages_expired_total")
            - value(before, "sundial_messages_expired_total"),
            value(samples, "sundial_leases_expired_total")
            - value(before, "sundial_leases_expired_total"),
        )

    # The tick watcher counts right after each tick: wait ticks (bounded), never sleep.
    for _ in range(200):
        if counted() == (1, 1):
            break
        await asyncio.wait_for(scheduler.wait_until(ticks=scheduler.ticks + 1), 5)
    assert counted() == (1, 1)
    sampler.sample()
    samples = await scrape(caller)
    assert value(samples, "sundial_scheduler_leader") >= 1
    assert value(samples, "sundial_scheduler_ticks_total") > value(
        before, "sundial_scheduler_ticks_total"
    )
    assert value(samples, "sundial_scheduler_leaders") == 1


def test_queue_labels_are_capped_per_process_and_forget_deleted_queues():
    labels = QueueLabels(limit=2)
    other = (metrics.OTHER, metrics.OTHER, "")
    assert labels.of(1, "a", "1") == ("a", "1", "1")
    assert labels.of(2, "a", "2") == ("a", "2", "2")
    assert not labels.refused
    assert labels.of(3, "a", "3") == other
    assert labels.refused
    assert labels.of(1, "a", "1") == ("a", "1", "1")
    # Queue 1 was deleted: its place goes to the next new queue. Queue 4 is "a/1" created
    # again: a new queue, with labels of its own.
    assert labels.forget({1, 2, 3}) == []  # nothing deleted: still full
    assert labels.refused
    assert labels.forget({2, 3, 4}) == [("a", "1", "1")]
    assert not labels.refused
    assert labels.of(4, "a", "1") == ("a", "1", "4")
    assert labels.of(3, "a", "3") == other


def _depths() -> list[QueueDepth]:
    return [
        QueueDepth("n", "a", 1, 2, 3, 5.0, queue_id=1),
        QueueDepth("n", "b", 10, 20, 30, 7.0, queue_id=2),
        QueueDepth("n", "c", 100, 200, 300, None, queue_id=3),
    ]


def _database_samples(queues: list[QueueDepth], existing: set[int] | None, limit: int) -> Samples:
    stats = DatabaseStats(queues, 0, 0, 0, 1, [])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(Reading(stats, 0), 0, existing, queue_limit=limit))
    return parse(generate_latest(registry).decode())


def test_database_gauges_fold_queues_beyond_the_cap_into_other():
    samples = _database_samples(_depths(), {1, 2, 3}, limit=1)
    other = {"namespace": metrics.OTHER, "queue": metrics.OTHER}
    assert value(samples, "sundial_queue_messages", namespace="n", queue="a", state="pending")
    assert value(samples, "sundial_queue_messages", **other, state="pending") == 220
    assert value(samples, "sundial_queue_oldest_pending_age_seconds", **other) == 7.0
    assert not value(samples, "sundial_queue_messages", namespace="n", queue="b", state="pending")


def test_database_gauges_show_only_queues_that_exist():
    # The reading may be seconds old: a queue deleted since is left out, even from _other.
    samples = _database_samples(_depths(), {1, 3}, limit=1)
    queues = {dict(labels).get("queue") for name, labels in samples if "queue" in dict(labels)}
    assert queues == {"a", metrics.OTHER}
    other = {"namespace": metrics.OTHER, "queue": metrics.OTHER}
    assert value(samples, "sundial_queue_messages", **other, state="pending") == 200
    # Existence unknown (the database did not answer): no per-queue gauge at all.
    unknown = _database_samples(_depths(), None, limit=10)
    assert not [name for name, labels in unknown if "queue" in dict(labels)]
    assert value(unknown, "sundial_database_up") == 1


class _Counted(Collector):
    """One counter family with a series per (namespace, queue, queue_id)."""

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "sundial_messages_enqueued",
            "Messages created by enqueue.",
            labels=metrics.COUNTED_LABELS,
        )
        family.add_metric(["n", "kept", "1"], 5)
        family.add_metric(["n", "gone", "2"], 7)
        family.add_metric([metrics.OTHER, metrics.OTHER, ""], 11)
        yield family
        yield CounterMetricFamily("sundial_scheduler_ticks", "Ticks.", value=3)


def _filtered(existing: set[int] | None) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ExistingQueuesOnly(_Counted(), existing))
    return parse(generate_latest(registry).decode())


def test_process_series_of_deleted_queues_are_left_out_and_queue_id_is_never_shown():
    samples = _filtered({1})
    enqueued = "sundial_messages_enqueued_total"
    assert value(samples, enqueued, namespace="n", queue="kept") == 5
    assert value(samples, enqueued, namespace=metrics.OTHER, queue=metrics.OTHER) == 11
    assert not [labels for name, labels in samples if dict(labels).get("queue") == "gone"]
    assert value(samples, "sundial_scheduler_ticks_total") == 3
    assert not [labels for _, labels in samples if metrics.QUEUE_ID in dict(labels)]
    unknown = _filtered(None)
    assert [dict(labels)["queue"] for name, labels in unknown if name == enqueued] == [
        metrics.OTHER
    ]


def _queue_samples(samples: Samples, **labels: str) -> dict[str, float]:
    """The samples carrying all of ``labels``, by name and remaining labels."""
    wanted = set(labels.items())
    return {
        f"{name}{sorted(set(found) - wanted)}": sample
        for (name, found), sample in samples.items()
        if wanted <= found
    }


async def test_a_deleted_queue_leaves_the_next_scrape_and_one_made_again_starts_fresh(alpha):
    name = f"gone-{uuid.uuid4().hex[:12]}"  # counters are the test process's: a name of its own
    base = f"/v1/namespaces/alpha/queues/{name}"
    cache = server_metrics(alpha).database
    now = [1000.0]
    cache.recent.clock = lambda: now[0]  # the database reading stays the first one until moved
    assert (await alpha.put(base, json={})).status_code == 201
    body = {"messages": [{"id": "a"}, {"id": "b"}, {"id": "later", "delay_seconds": 3600}]}
    assert (await alpha.post(f"{base}/messages", json=body)).status_code == 201
    [leased] = (await alpha.post(f"{base}/dequeue", json={})).json()["messages"]
    done = {"lease_id": leased["lease_id"]}
    assert (await alpha.post(f"{base}/messages/{leased['id']}/complete", json=done)).is_success
    labels = {"namespace": "alpha", "queue": name}
    before = await scrape(alpha)
    assert value(before, "sundial_messages_enqueued_total", **labels) == 3
    assert value(before, "sundial_messages_completed_total", **labels) == 1
    assert value(before, "sundial_queue_messages", **labels, state="pending") == 1
    assert value(before, "sundial_queue_messages", **labels, state="invisible") == 1

    assert (await alpha.delete(base)).status_code == 204
    # The cached reading still counts the queue's messages; the scrape leaves them out.
    assert _queue_samples(await scrape(alpha), **labels) == {}

    assert (await alpha.put(base, json={})).status_code == 201
    assert (await alpha.post(f"{base}/messages", json={"messages": [{"id": "x"}]})).is_success
    now[0] += cache.recent.ttl
    again = await scrape(alpha)
    fresh = _queue_samples(again, **labels)
    assert fresh.pop("sundial_queue_oldest_pending_age_seconds[]") >= 0
    assert fresh == {
        "sundial_messages_enqueued_total[]": 1,
        "sundial_queue_messages[('state', 'invisible')]": 0,
        "sundial_queue_messages[('state', 'pending')]": 1,
        "sundial_queue_messages[('state', 'running')]": 0,
    }
    assert not [labels for _, labels in again if metrics.QUEUE_ID in dict(labels)]


async def test_a_deleted_namespace_takes_the_series_of_its_queues_along(admin):
    namespace = f"gone-{uuid.uuid4().hex[:12]}"
    tenant = await namespace_caller(admin, namespace)
    for queue in ("q1", "q2"):
        base = f"/v1/namespaces/{namespace}/queues/{queue}"
        assert (await tenant.put(base, json={})).status_code == 201
        assert (await tenant.post(f"{base}/messages", json={"messages": [{"id": "m"}]})).is_success
    samples = await scrape(admin)
    for queue in ("q1", "q2"):
        labels = {"namespace": namespace, "queue": queue}
        assert value(samples, "sundial_messages_enqueued_total", **labels) == 1
        assert value(samples, "sundial_queue_messages", **labels, state="pending") == 1

    assert (await admin.delete(f"/v1/namespaces/{namespace}")).status_code == 204
    assert _queue_samples(await scrape(admin), namespace=namespace) == {}


@pytest.mark.parametrize("scraped_first", [True, False])
async def test_a_deleted_queue_gives_its_place_under_the_cap_to_a_new_one(alpha, scraped_first):
    observer = server_metrics(alpha).observer
    observer.labels = QueueLabels(limit=1)
    first, second = (f"cap-{uuid.uuid4().hex[:12]}" for _ in range(2))
    for name in (first, second):
        base = f"/v1/namespaces/alpha/queues/{name}"
        assert (await alpha.put(base, json={})).status_code == 201
        assert (await alpha.post(f"{base}/messages", json={"messages": [{"id": "m"}]})).is_success
    assert observer.labels.refused  # the second queue was counted under _other
    samples = await scrape(alpha)
    assert value(samples, "sundial_messages_enqueued_total", namespace="alpha", queue=first) == 1
    assert not value(samples, "sundial_messages_enqueued_total", namespace="alpha", queue=second)

    assert (await alpha.delete(f"/v1/namespaces/alpha/queues/{first}")).status_code == 204
    if scraped_first:
        await scrape(alpha)  # the worker that answers a scrape forgets deleted queues
    else:
        await server_metrics(alpha).forget_if_full()  # what every worker does periodically
    assert not observer.labels.refused
    base = f"/v1/namespaces/alpha/queues/{second}"
    assert (await alpha.post(f"{base}/messages", json={"messages": [{"id": "n"}]})).is_success
    samples = await scrape(alpha)
    assert value(samples, "sundial_messages_enqueued_total", namespace="alpha", queue=second) == 1


METRICS_TOKEN = "metrics-" + "s3cret" * 6


@pytest.fixture
async def guarded(database_url: str, engine: AsyncEngine) -> AsyncIterator[Caller]:
    """An anonymous caller of an app whose /metrics asks for :data:`METRICS_TOKEN`."""
    settings = make_settings(database_url, metrics_token=SecretStr(METRICS_TOKEN))
    app: Litestar = create_app(settings, engine=engine)
    async with serve(app) as client:
        yield Caller(client, app, None)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        f"Bearer {ADMIN_TOKEN}",
        "Bearer " + METRICS_TOKEN[:-1] + "x",  # same length, last character differs
        "Bearer " + METRICS_TOKEN[:-1],
        f"Basic {METRICS_TOKEN}",
        f"Bearer {METRICS_TOKEN} extra",
    ],
)
async def test_a_metrics_token_guards_metrics(guarded: Caller, authorization: str | None):
    headers = {"Authorization": authorization} if authorization else {}
    refused = await guarded.get("/metrics", headers=headers)
    assert_error(refused, 401, "unauthorized")
    assert refused.headers["www-authenticate"] == "Bearer"
    assert METRICS_TOKEN not in refused.text
    allowed = await guarded.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert allowed.status_code == 200
    assert "sundial_database_up 1.0" in allowed.text
    # The token guards /metrics only: the other operations endpoints stay open.
    assert (await guarded.get("/healthz")).status_code == 200


async def test_wrong_metrics_tokens_count_as_failed_authentication(database_url, engine):
    settings = make_settings(
        database_url, metrics_token=SecretStr(METRICS_TOKEN), auth_failure_limit=2
    )
    app: Litestar = create_app(settings, engine=engine)
    right = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with serve(app) as client:
        for _ in range(2):
            wrong = {"Authorization": f"Bearer {METRICS_TOKEN}x"}
            assert_error(await client.get("/metrics", headers=wrong), 401, "unauthorized")
        # The address is refused now, the right token included, as after wrong API tokens.
        refused = await client.get("/metrics", headers=right)
        assert_error(refused, 429, "rate_limited")
        assert int(refused.headers["retry-after"]) >= 1


async def test_metrics_never_show_payloads_metadata_ids_or_tokens(admin, alpha, queue):
    secrets = ["payload-" + uuid.uuid4().hex, "meta-" + uuid.uuid4().hex, "id-" + uuid.uuid4().hex]
    message = {"id": secrets[2], "payload": {"p": secrets[0]}, "metadata": {"k": secrets[1]}}
    assert (await alpha.post(f"{queue}/messages", json={"messages": [message]})).is_success
    [leased] = (await alpha.post(f"{queue}/dequeue", json={})).json()["messages"]
    fail = {"lease_id": leased["lease_id"], "error": "error-" + uuid.uuid4().hex}
    assert (await alpha.post(f"{queue}/messages/{secrets[2]}/fail", json=fail)).is_success
    tokens = (await admin.get("/v1/namespaces/alpha/tokens")).json()["tokens"]
    text = (await alpha.get("/metrics")).text
    hidden = [*secrets, fail["error"], leased["lease_id"], alpha.token, ADMIN_TOKEN]
    hidden += [t["id"] for t in tokens]
    assert [h for h in hidden if h and h in text] == []
    assert 'namespace="alpha",queue="q"' in text  # what it does show: names and figures


def test_grafana_dashboard_uses_only_documented_metrics():
    dashboard = json.loads((DOC.parent / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    used = {re.sub(r"_bucket$", "", n) for e in exprs for n in re.findall(r"sundial_\w+", e)}
    documented = set(re.findall(r"`(sundial_[a-z_]+)`", DOC.read_text()))
    assert used
    assert used <= documented, used - documented
