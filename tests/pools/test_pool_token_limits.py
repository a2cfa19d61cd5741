"""A token of a namespace on another pool is held to its own rate limits there: the count lives
in the namespace's pool, beside the token (docs/scaling.md)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api.conftest import Caller, assert_error
from tests.helpers import scalar


async def test_a_token_on_another_pool_is_limited_there(
    admin: Caller, engine: AsyncEngine, engine_b: AsyncEngine
) -> None:
    assert (
        await admin.post("/v1/namespaces", json={"name": "far", "pool": "b"})
    ).status_code == 201
    issued = await admin.post("/v1/namespaces/far/tokens", json={"read_rate": 0.01})
    assert issued.status_code == 201, issued.text
    far = Caller(admin.client, admin.app, issued.json()["token"])
    assert (await far.get("/v1/namespaces/far/queues")).status_code == 200
    assert_error(await far.get("/v1/namespaces/far/queues"), 429, "rate_limited")
    assert await scalar(engine_b, "SELECT count(*) FROM token_rate_limits") == 1
    assert await scalar(engine, "SELECT count(*) FROM token_rate_limits") == 0

    token_id = issued.json()["id"]
    lifted = await admin.patch(f"/v1/namespaces/far/tokens/{token_id}", json={"read_rate": None})
    assert lifted.status_code == 200, lifted.text
    assert (await far.get("/v1/namespaces/far/queues")).status_code == 200
