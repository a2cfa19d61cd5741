"""Who may read ``GET /metrics`` and what it never shows: a metrics token guards it (wrong
tokens count as failed authentication), and no payload, metadata, id, error or token appears in
it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from litestar import Litestar
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.server import create_app
from tests.api.conftest import Caller, assert_error, make_settings, serve
from tests.conftest import ADMIN_TOKEN

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
    assert 'sundial_database_up{pool="default"} 1.0' in allowed.text
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
