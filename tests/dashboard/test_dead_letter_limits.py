"""The dead-letters page's limit and TTL (issue #20): delete or requeue only the oldest finished
up to a limit, and requeue with a new TTL (all, a selection or one row), each through the
confirmation page; bad numbers are refused by name."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.dashboard.test_pages import make_dead_letters
from tests.helpers import raw_row, states_of

LISTING = "/dashboard/queues/ns/q/dead-letters"


async def test_delete_the_oldest_up_to_a_limit(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b", "c", "d")
    queue = await service.get_queue_or_404("ns", "q")
    page = await signed_in.get(LISTING)
    assert 'name="limit"' in page.text
    assert 'name="ttl_seconds"' in page.text
    fields = [("action", "delete"), ("every", "1"), ("states", "errored"), ("limit", "2")]

    confirm = await signed_in.submit(LISTING, f"{LISTING}/confirm", fields)
    assert "Delete the 2 oldest finished errored messages of ns/q?" in confirm.text
    assert 'name="limit" value="2"' in confirm.text
    assert len(await states_of(engine, queue)) == 4

    applied = await signed_in.submit(LISTING, f"{LISTING}/apply", fields)
    assert applied.status_code == 303
    assert await states_of(engine, queue) == {"c": "errored", "d": "errored"}
    assert "Deleted 2 messages of ns/q." in (await signed_in.get(LISTING)).text


async def test_requeue_with_a_ttl(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b", "c")
    queue = await service.get_queue_or_404("ns", "q")
    fields = [
        ("action", "requeue"),
        ("every", "1"),
        ("states", "errored"),
        ("limit", "1"),
        ("ttl_seconds", "600"),
    ]
    confirm = await signed_in.submit(LISTING, f"{LISTING}/confirm", fields)
    assert "Requeue the 1 oldest finished errored message of ns/q?" in confirm.text
    assert "600 seconds" in confirm.text
    assert 'name="ttl_seconds" value="600"' in confirm.text
    await signed_in.submit(LISTING, f"{LISTING}/apply", fields)
    assert await states_of(engine, queue) == {"a": "pending", "b": "errored", "c": "errored"}
    a = await raw_row(engine, queue, "a")
    assert a is not None
    assert a["expires_at"] - a["updated_at"] == timedelta(seconds=600)

    # A row's own button takes the TTL of the selection bar; without one, no expiry.
    confirm = await signed_in.submit(
        LISTING, f"{LISTING}/confirm", [("ttl_seconds", "60"), ("single", "requeue:b")]
    )
    assert "Requeue 1 message of ns/q?" in confirm.text
    assert "60 seconds" in confirm.text
    await signed_in.submit(
        LISTING, f"{LISTING}/apply", [("action", "requeue"), ("ids", "b"), ("ttl_seconds", "60")]
    )
    b = await raw_row(engine, queue, "b")
    assert b is not None
    assert b["expires_at"] - b["updated_at"] == timedelta(seconds=60)
    confirm = await signed_in.submit(LISTING, f"{LISTING}/confirm", [("single", "requeue:c")])
    assert "They do not expire." in confirm.text
    await signed_in.submit(LISTING, f"{LISTING}/apply", [("action", "requeue"), ("ids", "c")])
    c = await raw_row(engine, queue, "c")
    assert c is not None
    assert (c["state"], c["expires_at"]) == ("pending", None)


@pytest.mark.parametrize(
    ("field", "value"),
    [("limit", "0"), ("limit", "100001"), ("limit", "ten"), ("ttl_seconds", "-5")],
)
async def test_bad_numbers_are_refused_by_name(
    signed_in: Browser, service: QueueService, engine: AsyncEngine, field: str, value: str
) -> None:
    await make_dead_letters(service, "a")
    queue = await service.get_queue_or_404("ns", "q")
    fields = [("action", "requeue"), ("every", "1"), ("states", "errored"), (field, value)]
    for step in ("confirm", "apply"):
        page = await signed_in.submit(LISTING, f"{LISTING}/{step}", fields)
        assert page.status_code == 400, page.text
        assert field in page.text
    assert await states_of(engine, queue) == {"a": "errored"}
