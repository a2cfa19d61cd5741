"""``GET /metrics`` of a server over two pools: every database gauge is read from each pool and
labelled with it, a queue shows under its own pool only, the per-process gauges are sampled per
pool, each pool's scheduler is followed, and a pool that is down shows
``sundial_database_up{pool="b"} 0`` and none of its other database gauges while the default
pool's stay as they were (pool b then on a PostgreSQL of its own that the test stops).

Process metrics add up over the tests of a run, so namespaces have names of their own and
process figures are compared before and after.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from app.config import Settings
from app.embedded import LocalCluster
from app.observability.server import ServerMetrics
from tests.api.conftest import Caller, namespace_caller, serve
from tests.conftest import ADMIN_TOKEN
from tests.helpers import execute
from tests.observability.helpers import Samples, scrape, server_metrics, value

TIMEOUT = 10.0
RECOVERY_SECONDS = 30.0

DATABASE_GAUGES = frozenset(
    {
        "sundial_queue_messages",
        "sundial_queue_oldest_pending_age_seconds",
        "sundial_scheduler_lag_seconds",
        "sundial_scheduler_leaders",
        "sundial_table_dead_tuples",
        "sundial_table_live_tuples",
    }
)
"""The database gauges besides ``sundial_database_up`` and the age of the reading."""


def unique(prefix: str) -> str:
    """A namespace name no other test of the run uses (counters are the process's)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def queue_with(caller: Caller, messages: list[dict[str, object]]) -> str:
    """Queue ``q`` of the caller's namespace holding ``messages`` (if any); its base path."""
    base = f"/v1/namespaces/{caller.namespace}/queues/q"
    assert (await caller.put(base, json={})).status_code == 201
    if messages:
        enqueued = await caller.post(f"{base}/messages", json={"messages": messages})
        assert enqueued.status_code == 201, enqueued.text
    return base


def database_series(samples: Samples, pool: str) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """The database gauges' series of ``pool``."""
    return {
        (name, labels)
        for name, labels in samples
        if name in DATABASE_GAUGES and ("pool", pool) in labels
    }


def depth(samples: Samples, pool: str, namespace: str, state: str = "pending") -> float:
    labels = {"pool": pool, "namespace": namespace, "queue": "q", "state": state}
    return value(samples, "sundial_queue_messages", **labels)


async def test_database_gauges_are_read_from_each_pool_and_labelled_with_it(
    admin: Caller, engine_b: AsyncEngine
) -> None:
    near = await namespace_caller(admin, unique("near"), pool="default")
    far = await namespace_caller(admin, unique("far"), pool="b")
    await queue_with(near, [{"id": "n1"}])
    await queue_with(far, [{"id": "f1"}, {"id": "f2"}, {"id": "later", "delay_seconds": 3600}])
    # Pool b's promotion is overdue (no scheduler runs here); the default pool's is not.
    await execute(
        engine_b,
        "UPDATE messages SET visible_at = now() - interval '30 seconds' WHERE id = 'later'",
    )

    samples = await scrape(admin)

    for pool in ("default", "b"):
        assert value(samples, "sundial_database_up", pool=pool) == 1
        assert ("sundial_database_stats_age_seconds", frozenset({("pool", pool)})) in samples
        assert ("sundial_scheduler_leaders", frozenset({("pool", pool)})) in samples
        table = frozenset({("pool", pool), ("table", "messages")})
        assert ("sundial_table_live_tuples", table) in samples
    assert depth(samples, "default", near.namespace) == 1
    assert depth(samples, "b", far.namespace) == 2
    assert depth(samples, "b", far.namespace, "invisible") == 1
    queues = {
        (dict(labels)["pool"], dict(labels)["namespace"])
        for name, labels in samples
        if name == "sundial_queue_messages"
    }
    assert queues == {("default", near.namespace), ("b", far.namespace)}
    lag = "sundial_scheduler_lag_seconds"
    assert 30 <= value(samples, lag, pool="b", work="promotion") < 100
    assert value(samples, lag, pool="default", work="promotion") == 0
    # The counters of both pools' queues are shown: the queues that exist are every pool's.
    for caller, enqueued in ((near, 1), (far, 3)):
        labels = {"namespace": caller.namespace, "queue": "q"}
        assert value(samples, "sundial_messages_enqueued_total", **labels) == enqueued


async def test_a_deleted_queue_of_pool_b_leaves_the_next_scrape(admin: Caller) -> None:
    far = await namespace_caller(admin, unique("far"), pool="b")
    base = await queue_with(far, [{"id": "f1"}])
    labels = {"namespace": far.namespace, "queue": "q"}
    assert value(await scrape(admin), "sundial_messages_enqueued_total", **labels) == 1

    assert (await far.delete(base)).status_code == 204

    after = await scrape(admin)
    assert not [key for key in after if dict(key[1]).get("namespace") == far.namespace]


async def test_process_gauges_are_sampled_per_pool(admin: Caller) -> None:
    far = await namespace_caller(admin, unique("far"), pool="b")
    base = await queue_with(far, [])
    metrics = server_metrics(admin)
    pools = admin.runtime.pools

    def sample() -> None:
        for sampler in metrics.samplers.values():
            sampler.sample()

    sample()
    before = await scrape(admin)
    queue = await admin.runtime.service.get_queue_or_404(far.namespace, "q")
    poll = asyncio.create_task(far.post(f"{base}/dequeue", json={"wait_seconds": 10}))
    await asyncio.wait_for(pools["b"].waiters.wait_for_waiting(queue.id, 1), TIMEOUT)
    sample()
    during = await scrape(admin)
    assert (await far.post(f"{base}/messages", json={"messages": [{"id": "w"}]})).is_success
    assert (await poll).json()["messages"][0]["id"] == "w"

    waiters = "sundial_longpoll_waiters"
    assert value(during, waiters, pool="b") - value(before, waiters, pool="b") == 1
    assert value(during, waiters, pool="default") == value(before, waiters, pool="default")
    # This app's share of the connection pool gauges, per pool: what goes away when its
    # samplers withdraw (other apps of the process may report beside it).
    for sampler in metrics.samplers.values():
        await sampler.stop()
    others = await scrape(admin)
    for name, pool in pools.items():
        size = value(during, "sundial_db_pool_size", pool=name)
        size -= value(others, "sundial_db_pool_size", pool=name)
        assert size == pool.engine.pool.size()  # type: ignore[attr-defined]


@pytest.fixture
def scheduled(settings: Settings, engine: AsyncEngine) -> Litestar:
    """The two-pool server with a scheduler per pool (fast ticks)."""
    update = {"scheduler_enabled": True, "scheduler_tick_seconds": 0.02}
    return create_app(settings.model_copy(update=update), engine=engine)


async def test_each_pools_scheduler_is_followed(scheduled: Litestar, engine_b: AsyncEngine) -> None:
    async with serve(scheduled) as client:
        admin = Caller(client, scheduled, ADMIN_TOKEN)
        metrics = server_metrics(admin)
        schedulers = {name: sampler.scheduler for name, sampler in metrics.samplers.items()}
        assert set(schedulers) == {"default", "b"}
        for scheduler in schedulers.values():
            assert scheduler is not None
            await asyncio.wait_for(scheduler.wait_until(leader=True), TIMEOUT)
        b = schedulers["b"]
        assert b is not None
        assert b is not schedulers["default"]
        far = await namespace_caller(admin, unique("far"), pool="b")
        await queue_with(far, [{"id": "doomed", "ttl_seconds": 3600}])
        before = await scrape(admin)
        await execute(
            engine_b,
            "UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = 'doomed'",
        )

        def expired(samples: Samples) -> float:
            return value(samples, "sundial_messages_expired_total") - value(
                before, "sundial_messages_expired_total"
            )

        # Pool b's scheduler expires it; its ticks are counted: wait its ticks (bounded).
        for _ in range(200):
            if expired(await scrape(admin)) == 1:
                break
            await asyncio.wait_for(b.wait_until(ticks=b.ticks + 1), TIMEOUT)
        assert expired(await scrape(admin)) == 1
        for sampler in metrics.samplers.values():
            sampler.sample()
        samples = await scrape(admin)
        for pool in ("default", "b"):
            assert value(samples, "sundial_scheduler_leader", pool=pool) >= 1
            assert value(samples, "sundial_scheduler_leaders", pool=pool) == 1


# --- pool b down --------------------------------------------------------------------------------


def moved_clock(metrics: ServerMetrics) -> list[float]:
    """Every pool's stats cache on one clock the test moves (starts at 1000)."""
    now = [1000.0]
    for cache in metrics.databases.values():
        cache.recent.clock = lambda: now[0]
    return now


async def test_a_pool_that_is_down_is_up_0_and_the_others_series_stay(
    outage_admin: Caller, pool_b_cluster: LocalCluster
) -> None:
    admin = outage_admin
    metrics = server_metrics(admin)
    now = moved_clock(metrics)
    ttl = metrics.databases["b"].recent.ttl
    near = await namespace_caller(admin, unique("near"), pool="default")
    far = await namespace_caller(admin, unique("far"), pool="b")
    await queue_with(near, [{"id": "n1"}])
    await queue_with(far, [{"id": "f1"}, {"id": "f2"}])
    far_enqueued = {"namespace": far.namespace, "queue": "q"}
    up = await scrape(admin)
    assert value(up, "sundial_database_up", pool="b") == 1
    assert depth(up, "b", far.namespace) == 2
    assert value(up, "sundial_messages_enqueued_total", **far_enqueued) == 2

    await asyncio.to_thread(pool_b_cluster.stop, mode="immediate")
    try:
        now[0] += ttl  # a fresh reading of every pool
        down = await scrape(admin)
        assert value(down, "sundial_database_up", pool="b") == 0
        assert database_series(down, "b") == set()
        # The default pool's series are all there, with the same values.
        assert value(down, "sundial_database_up", pool="default") == 1
        assert database_series(down, "default") == database_series(up, "default")
        assert depth(down, "default", near.namespace) == 1
        near_enqueued = {"namespace": near.namespace, "queue": "q"}
        assert value(down, "sundial_messages_enqueued_total", **near_enqueued) == 1
        # Which of pool b's queues exist is unknown: their counters are left out meanwhile.
        assert not [key for key in down if dict(key[1]).get("namespace") == far.namespace]
    finally:
        await asyncio.to_thread(pool_b_cluster.start)

    # Back: pool b's gauges return, and its queues' counters were kept, not forgotten.
    deadline = time.monotonic() + RECOVERY_SECONDS
    while True:
        now[0] += ttl
        back = await scrape(admin)
        if value(back, "sundial_database_up", pool="b") == 1 and depth(back, "b", far.namespace):
            break
        assert time.monotonic() < deadline, "pool b's metrics did not recover"
        await asyncio.sleep(0.2)
    assert depth(back, "b", far.namespace) == 2
    assert value(back, "sundial_messages_enqueued_total", **far_enqueued) == 2
