"""Per-queue series of ``GET /metrics``: queue labels capped per process (the rest folded into
``_other``), and deleted queues and namespaces gone from the next scrape, their place under the
cap given to new queues; the internal queue id is never shown."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest
from prometheus_client import CollectorRegistry, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from app.core.readings import DatabaseStats, QueueDepth
from app.observability import metrics
from app.observability.database import DatabaseCollector, PoolReading
from app.observability.existing import ExistingQueuesOnly
from app.observability.observer import QueueLabels
from tests.api.conftest import namespace_caller
from tests.observability.helpers import Samples, parse, scrape, server_metrics, value


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


def _pools_samples(
    pools: dict[str, list[QueueDepth] | None], existing: set[int] | None, limit: int
) -> Samples:
    """The database gauges of readings with these queues per pool (None: it did not answer)."""
    readings = {
        pool: PoolReading(None if queues is None else DatabaseStats(queues, 0, 0, 0, 1, []), 0)
        for pool, queues in pools.items()
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(readings, existing, queue_limit=limit))
    return parse(generate_latest(registry).decode())


def _database_samples(queues: list[QueueDepth], existing: set[int] | None, limit: int) -> Samples:
    return _pools_samples({"default": queues}, existing, limit)


def test_database_gauges_fold_queues_beyond_the_cap_into_other():
    samples = _database_samples(_depths(), {1, 2, 3}, limit=1)
    other = {"pool": "default", "namespace": metrics.OTHER, "queue": metrics.OTHER}
    a, b = ({"pool": "default", "namespace": "n", "queue": q} for q in ("a", "b"))
    assert value(samples, "sundial_queue_messages", **a, state="pending") == 2
    assert value(samples, "sundial_queue_messages", **other, state="pending") == 220
    assert value(samples, "sundial_queue_oldest_pending_age_seconds", **other) == 7.0
    assert not value(samples, "sundial_queue_messages", **b, state="pending")


def test_the_cap_counts_the_queues_of_every_pool_and_folds_each_pools_rest_apart():
    # Two named queues over both pools, by name: n/a (default) and n/b (b); the rest of each
    # pool is folded into its own _other, so that each pool's totals stay exact.
    pools: dict[str, list[QueueDepth] | None] = {
        "default": [QueueDepth("n", "a", 1, 2, 3, 5.0, 1), QueueDepth("n", "c", 4, 5, 6, 9.0, 3)],
        "b": [QueueDepth("n", "b", 10, 20, 30, 7.0, 2), QueueDepth("n", "d", 0, 40, 0, 1.0, 4)],
    }
    samples = _pools_samples(pools, {1, 2, 3, 4}, limit=2)
    named = {
        (dict(labels)["pool"], dict(labels)["queue"])
        for name, labels in samples
        if name == "sundial_queue_messages"
    }
    assert named == {("default", "a"), ("b", "b"), ("default", metrics.OTHER), ("b", metrics.OTHER)}
    other = {"namespace": metrics.OTHER, "queue": metrics.OTHER}
    assert value(samples, "sundial_queue_messages", pool="default", **other, state="pending") == 5
    assert value(samples, "sundial_queue_messages", pool="b", **other, state="pending") == 40
    assert value(samples, "sundial_queue_oldest_pending_age_seconds", pool="b", **other) == 1.0
    # A pool that did not answer: up 0 and the age of that reading, nothing else of it; its
    # places under the cap go to the other pool's queues.
    down = _pools_samples({**pools, "b": None}, {1, 2, 3, 4}, limit=2)
    assert value(down, "sundial_database_up", pool="b") == 0
    assert value(down, "sundial_database_up", pool="default") == 1
    of_b = {name for name, labels in down if dict(labels).get("pool") == "b"}
    assert of_b == {"sundial_database_up", "sundial_database_stats_age_seconds"}
    c = {"pool": "default", "namespace": "n", "queue": "c"}
    assert value(down, "sundial_queue_messages", **c, state="pending") == 5


def test_database_gauges_show_only_queues_that_exist():
    # The reading may be seconds old: a queue deleted since is left out, even from _other.
    samples = _database_samples(_depths(), {1, 3}, limit=1)
    queues = {dict(labels).get("queue") for name, labels in samples if "queue" in dict(labels)}
    assert queues == {"a", metrics.OTHER}
    other = {"pool": "default", "namespace": metrics.OTHER, "queue": metrics.OTHER}
    assert value(samples, "sundial_queue_messages", **other, state="pending") == 200
    # Existence unknown (the database did not answer): no per-queue gauge at all.
    unknown = _database_samples(_depths(), None, limit=10)
    assert not [name for name, labels in unknown if "queue" in dict(labels)]
    assert value(unknown, "sundial_database_up", pool="default") == 1


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
    cache = server_metrics(alpha).databases["default"]
    now = [1000.0]
    cache.recent.clock = lambda: now[0]  # the database reading stays the first one until moved
    assert (await alpha.put(base, json={})).status_code == 201
    body = {"messages": [{"id": "a"}, {"id": "b"}, {"id": "later", "delay_seconds": 3600}]}
    assert (await alpha.post(f"{base}/messages", json=body)).status_code == 201
    [leased] = (await alpha.post(f"{base}/dequeue", json={})).json()["messages"]
    done = {"lease_id": leased["lease_id"]}
    assert (await alpha.post(f"{base}/messages/{leased['id']}/complete", json=done)).is_success
    labels = {"namespace": "alpha", "queue": name}
    depth = {**labels, "pool": "default"}
    before = await scrape(alpha)
    assert value(before, "sundial_messages_enqueued_total", **labels) == 3
    assert value(before, "sundial_messages_completed_total", **labels) == 1
    assert value(before, "sundial_queue_messages", **depth, state="pending") == 1
    assert value(before, "sundial_queue_messages", **depth, state="invisible") == 1

    assert (await alpha.delete(base)).status_code == 204
    # The cached reading still counts the queue's messages; the scrape leaves them out.
    assert _queue_samples(await scrape(alpha), **labels) == {}

    assert (await alpha.put(base, json={})).status_code == 201
    assert (await alpha.post(f"{base}/messages", json={"messages": [{"id": "x"}]})).is_success
    now[0] += cache.recent.ttl
    again = await scrape(alpha)
    fresh = _queue_samples(again, **labels)
    assert fresh.pop("sundial_queue_oldest_pending_age_seconds[('pool', 'default')]") >= 0
    assert fresh == {
        "sundial_messages_enqueued_total[]": 1,
        "sundial_queue_messages[('pool', 'default'), ('state', 'invisible')]": 0,
        "sundial_queue_messages[('pool', 'default'), ('state', 'pending')]": 1,
        "sundial_queue_messages[('pool', 'default'), ('state', 'running')]": 0,
        "sundial_queue_dead_letters[('pool', 'default')]": 0,
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
        depth = {**labels, "pool": "default"}
        assert value(samples, "sundial_queue_messages", **depth, state="pending") == 1

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
