"""``GET /metrics``: parsed with prometheus_client's own parser after real traffic.

Process metrics live in the test process's global registry and add up over the tests of a run,
so counters are compared before and after; the database gauges are this test's database only.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.api import create_app
from app.api.longpoll import WaiterRegistry
from app.observability import metrics
from app.observability.database import DatabaseCollector, DatabaseStatsCache, Reading
from app.observability.endpoint import render
from app.observability.observer import QueueLabels
from app.observability.sampler import Sampler
from app.observability.server import ServerMetrics
from app.scheduler import Scheduler
from app.store.maintenance import TickResult
from app.store.stats import DatabaseStats, QueueDepth
from tests.api.conftest import Caller, make_settings, serve
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
    # The gauges report the pool's own figures at the moment of the sample.
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
    scheduler = Scheduler(engine, make_settings(database_url))
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


def test_queue_labels_are_capped_per_process():
    labels = QueueLabels(limit=2)
    assert labels.of("a", "1") == ("a", "1")
    assert labels.of("a", "2") == ("a", "2")
    assert labels.of("a", "3") == (metrics.OTHER, metrics.OTHER)
    assert labels.of("a", "1") == ("a", "1")


def test_database_gauges_fold_queues_beyond_the_cap_into_other():
    queues = [
        QueueDepth("n", "a", 1, 2, 3, 5.0),
        QueueDepth("n", "b", 10, 20, 30, 7.0),
        QueueDepth("n", "c", 100, 200, 300, None),
    ]
    stats = DatabaseStats(queues, 0, 0, 0, 1, [])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(Reading(stats, 0), 0, queue_limit=1))
    registry_text = parse(generate_latest(registry).decode())
    other = {"namespace": metrics.OTHER, "queue": metrics.OTHER}
    assert value(registry_text, "sundial_queue_messages", namespace="n", queue="a", state="pending")
    assert value(registry_text, "sundial_queue_messages", **other, state="pending") == 220
    assert value(registry_text, "sundial_queue_oldest_pending_age_seconds", **other) == 7.0
    assert not value(
        registry_text, "sundial_queue_messages", namespace="n", queue="b", state="pending"
    )


def test_grafana_dashboard_uses_only_documented_metrics():
    dashboard = json.loads((DOC.parent / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    used = {re.sub(r"_bucket$", "", n) for e in exprs for n in re.findall(r"sundial_\w+", e)}
    documented = set(re.findall(r"`(sundial_[a-z_]+)`", DOC.read_text()))
    assert used
    assert used <= documented, used - documented
