"""The clients set a token's rate limits (issued with them, changed at runtime), and a limited
token's client sees 429 as :class:`RateLimited` with the server's ``retry_after``."""

from __future__ import annotations

import pytest

from app.client import AsyncClient, Client, RateLimited, RetryPolicy, ValidationError
from tests.conftest import ADMIN_TOKEN

SLOW = 0.01  # one request per 100 s
ONCE = RetryPolicy(attempts=1)


def test_limits_set_changed_and_felt(admin: Client, namespace: str) -> None:
    issued = admin.issue_token(namespace, "limited", read_rate=SLOW)
    assert (issued.read_rate, issued.write_rate) == (SLOW, None)
    with Client(admin.url, issued.token, retry=ONCE) as tenant:
        tenant.list_queues(namespace)
        with pytest.raises(RateLimited) as refused:
            tenant.list_queues(namespace)
        assert 90 <= refused.value.retry_after <= 100

        changed = admin.set_token_limits(namespace, issued.id, read_rate=None, write_rate=5)
        assert (changed.id, changed.read_rate, changed.write_rate) == (issued.id, None, 5.0)
        tenant.list_queues(namespace)  # lifted at once
        tenant.list_queues(namespace)
    listed = {t.id: (t.read_rate, t.write_rate) for t in admin.list_tokens(namespace)}
    assert listed[issued.id] == (None, 5.0)
    with pytest.raises(ValidationError):
        admin.set_token_limits(namespace, issued.id, read_rate=-1)


async def test_the_async_client_sets_limits(server: str, namespace: str) -> None:
    async with AsyncClient(server, ADMIN_TOKEN) as aadmin:
        issued = await aadmin.issue_token(namespace, write_rate=2)
        assert issued.write_rate == 2.0
        changed = await aadmin.set_token_limits(namespace, issued.id, write_rate=None)
        assert changed.write_rate is None
