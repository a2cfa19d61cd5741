"""The process's metrics after real traffic through the API: message counters move only for
committed changes, request latency is labelled by route template, and the long-poll waiters and
the connection pool are reported as sampled, labelled with their pool (``default``).

Process metrics add up over the tests of a run: counters are compared before and after."""

from __future__ import annotations

import asyncio

from tests.observability.helpers import Samples, scrape, server_metrics, value


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


async def test_long_poll_waiters_and_pool_usage(alpha, queue, engine):
    rt = alpha.runtime
    sampler = server_metrics(alpha).samplers["default"]
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
    default = {"pool": "default"}
    assert value(during, waiters, **default) - value(before, waiters, **default) == 1
    assert value(after, waiters, **default) == value(before, waiters, **default)
    # The gauges add up every app of the process (a session-wide test server may be running
    # beside this one): this app's share is what goes away when its sampler withdraws. The
    # background sampling stops with it, so that a sample of its own cannot land while a scrape
    # holds a connection (it reads which queues exist) and report that moment instead.
    await sampler.stop()
    others = await scrape(alpha)

    def ours(sample: Samples, name: str, **labels: str) -> float:
        return value(sample, name, **labels) - value(others, name, **labels)

    size = ours(during, "sundial_db_pool_size", **default)
    assert size == engine.pool.size()  # type: ignore[attr-defined]
    idle = ours(during, "sundial_db_pool_connections", **default, state="idle")
    assert idle >= 1  # earlier requests'
    # The gauges report the pool's own figures at the moment of the sample.
    sampler.sample()
    pool = engine.pool
    at_sample = (pool.checkedout(), pool.checkedin())  # type: ignore[attr-defined]
    sampled = await scrape(alpha)
    reported = tuple(
        ours(sampled, "sundial_db_pool_connections", **default, state=state)
        for state in ("in_use", "idle")
    )
    assert reported == at_sample
