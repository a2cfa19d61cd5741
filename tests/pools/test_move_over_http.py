"""A namespace moves under HTTP traffic: every answer a client gets during the move is a
success or a 503 to retry (never a 500, never a 404 for what exists), and what was acknowledged
is on the new pool afterwards, completed once."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.moves import NamespaceMover
from tests.api.conftest import Caller, namespace_caller
from tests.helpers import fetch

pytestmark = pytest.mark.slow

LOAD_SECONDS = 0.5


async def test_http_clients_see_only_successes_and_503s_through_a_move(
    admin: Caller, database_url: str, pool_b_url: str, engine_b: AsyncEngine
) -> None:
    shop = await namespace_caller(admin, "shop", pool="default")
    base = "/v1/namespaces/shop/queues/q"
    assert (await shop.put(base, json={"lease_seconds": 300})).status_code == 201
    statuses: Counter[int] = Counter()
    acknowledged: set[str] = set()
    completed: Counter[str] = Counter()
    stop, drained = asyncio.Event(), asyncio.Event()

    async def call(method: str, path: str, body: dict) -> dict | None:
        while True:
            response = await shop.request(method, path, json=body)
            statuses[response.status_code] += 1
            if response.status_code != 503:
                assert response.status_code in {200, 201}, response.text
                return response.json() if response.content else None
            await asyncio.sleep(0.01)

    async def produce(name: str) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            ids = [f"{name}-{n}-{i}" for i in range(2)]
            await call("POST", f"{base}/messages", {"messages": [{"id": i} for i in ids]})
            acknowledged.update(ids)

    async def consume() -> None:
        while True:
            answer = await call("POST", f"{base}/dequeue", {"count": 2})
            assert answer is not None
            if not answer["messages"]:
                if drained.is_set():
                    return
                await asyncio.sleep(0.005)
                continue
            items = [{"id": m["id"], "lease_id": m["lease_id"]} for m in answer["messages"]]
            acked = await call("POST", f"{base}/ack", {"complete": items})
            assert acked is not None
            for result in acked["results"]:
                assert result["ok"], result
                completed[result["id"]] += 1

    producers = [asyncio.create_task(produce(f"p{i}")) for i in range(2)]
    consumers = [asyncio.create_task(consume()) for _ in range(3)]
    await asyncio.sleep(LOAD_SECONDS)
    await NamespaceMover({"default": database_url, "b": pool_b_url}).move("shop", "b")
    await asyncio.sleep(LOAD_SECONDS)
    stop.set()
    await asyncio.gather(*producers)
    drained.set()
    await asyncio.wait_for(asyncio.gather(*consumers), 60)

    assert set(statuses) <= {200, 201, 503}
    assert acknowledged
    assert set(completed) == acknowledged
    assert max(completed.values()) == 1
    rows = await fetch(engine_b, "SELECT id, state::text FROM messages")
    assert Counter(r["id"] for r in rows) == Counter(acknowledged)
    assert {r["state"] for r in rows} == {"completed"}
