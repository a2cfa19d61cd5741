"""Per-token rate limiting: over the limit → 429 rate_limited with Retry-After; each token (and
the admin) has its own allowance; no limit configured → none applied."""

from __future__ import annotations

import pytest

from app.config import Settings
from tests.api.conftest import Caller, assert_error, make_settings, namespace_caller

LIMIT = 5


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, rate_limit=f"{LIMIT}/minute")


async def test_a_token_over_its_limit_gets_429_with_retry_after(admin: Caller) -> None:
    # The admin spends 2 of its own requests here; namespace tokens have separate allowances.
    alpha = await namespace_caller(admin, "alpha")
    beta = await namespace_caller(admin, "beta")
    for _ in range(LIMIT):
        assert (await alpha.get("/v1/namespaces/alpha/queues")).status_code == 200
    refused = await alpha.get("/v1/namespaces/alpha/queues")
    assert_error(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Another token of another namespace is not affected.
    assert (await beta.get("/v1/namespaces/beta/queues")).status_code == 200


async def test_admin_has_its_own_allowance(admin: Caller) -> None:
    statuses = [(await admin.get("/v1/namespaces")).status_code for _ in range(LIMIT + 1)]
    assert statuses == [200] * LIMIT + [429]


def test_rate_limit_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="rate_limit"):
        make_settings(None, rate_limit="lots")
