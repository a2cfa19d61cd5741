"""A pool that goes down takes only its own namespaces with it: they answer 503 `unavailable`
while the other pool's keep serving, /readyz reports the pool, a new namespace is placed on a
pool that answers, and the pool's namespaces recover by themselves when it returns.

Pool ``b`` is a private PostgreSQL cluster of its own (:class:`LocalCluster`) that the test
stops and starts; the catalogue (pool ``default``) is the test's database.
"""

from __future__ import annotations

import asyncio
import time

from app.embedded import LocalCluster
from tests.api.conftest import Caller, assert_error, namespace_caller

RECOVERY_SECONDS = 30.0


async def _queue(caller: Caller) -> str:
    base = f"/v1/namespaces/{caller.namespace}/queues/q"
    assert (await caller.put(base, json={})).status_code == 201
    return base


async def _enqueue(caller: Caller, base: str, message_id: str) -> int:
    response = await caller.post(f"{base}/messages", json={"messages": [{"id": message_id}]})
    return response.status_code


async def test_a_pool_that_is_down_takes_only_its_namespaces(
    outage_admin: Caller, pool_b_cluster: LocalCluster
) -> None:
    admin = outage_admin
    near = await namespace_caller(admin, "near", pool="default")
    far = await namespace_caller(admin, "far", pool="b")
    near_q, far_q = await _queue(near), await _queue(far)
    assert await _enqueue(far, far_q, "before") == 201

    await asyncio.to_thread(pool_b_cluster.stop, mode="immediate")
    try:
        # The other pool's namespace is served as before.
        assert await _enqueue(near, near_q, "n1") == 201
        leased = await near.post(f"{near_q}/dequeue", json={})
        assert [m["id"] for m in leased.json()["messages"]] == ["n1"]
        # The pool's own namespace answers 503, to its token and to the admin's.
        for caller in (far, admin):
            refused = await caller.post(f"{far_q}/messages", json={"messages": [{"id": "x"}]})
            assert_error(refused, 503, "unavailable")
            assert int(refused.headers["Retry-After"]) >= 1
        assert_error(await far.post(f"{far_q}/dequeue", json={}), 503, "unavailable")
        # Ready, and saying which pool is not.
        ready = await admin.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["pools"]["b"] == {"status": "unavailable", "revision": None}
        assert ready.json()["pools"]["default"]["status"] == "ready"
        # A namespace placed meanwhile goes to a pool that answers.
        placed = await admin.post("/v1/namespaces", json={"name": "new"})
        assert (placed.status_code, placed.json()["pool"]) == (201, "default")
        # Named for the pool that is down: 503, and the name stays free.
        assert_error(
            await admin.post("/v1/namespaces", json={"name": "late", "pool": "b"}),
            503,
            "unavailable",
        )
    finally:
        await asyncio.to_thread(pool_b_cluster.start)

    # Back: the pool's namespace recovers by itself (the first statements on the dead
    # connections fail, and the pool's connections are renewed).
    deadline = time.monotonic() + RECOVERY_SECONDS
    while (status := await _enqueue(far, far_q, "after")) != 201:
        assert status == 503
        assert time.monotonic() < deadline, "pool b's namespace did not recover"
        await asyncio.sleep(0.2)
    messages = (await far.get(f"{far_q}/messages")).json()["messages"]
    assert sorted(m["id"] for m in messages) == ["after", "before"]
    late = await admin.post("/v1/namespaces", json={"name": "late", "pool": "b"})
    assert late.status_code == 201, late.text
