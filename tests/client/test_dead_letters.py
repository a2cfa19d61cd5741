"""Dead letters through the Python client (sync and async) and ``sundial dead-letters``:
requeue with a new TTL, expiry or delay, delete with a limit (oldest finished first), and what a
leased message tells (remaining attempts, TTL, wait)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from app.client import ApiError, AsyncClient, Client
from tests.client.conftest import Sundial


def _dead_letters(client: Client, q: str, count: int) -> list[str]:
    """``count`` errored messages in ``q`` (max_attempts 1), finished in id order."""
    client.put_queue(q, max_attempts=1)
    ids = [f"m{i}" for i in range(count)]
    for message_id in ids:
        client.enqueue(q, id=message_id)
    leased = {m.id: m.lease_id for m in client.dequeue(q, count)}
    for message_id in ids:
        assert client.fail(q, message_id, leased[message_id], "boom").state == "errored"
    return ids


def _states(client: Client, q: str) -> dict[str, str]:
    return {m.id: m.state for m in client.query_messages(q, limit=1000).messages}


def test_requeue_with_a_ttl_and_delete_with_a_limit(q: str, client: Client) -> None:
    _dead_letters(client, q, 5)
    assert client.requeue_dead_letters(q, ids=["m0"], ttl_seconds=60) == 1
    m0 = client.get_message(q, "m0")
    assert m0.expires_at is not None
    assert m0.expires_at - m0.updated_at == timedelta(seconds=60)
    until = datetime(2031, 1, 1, tzinfo=UTC)
    assert client.requeue_dead_letters(q, ids=["m1"], delay_seconds=30, expires_at=until) == 1
    m1 = client.get_message(q, "m1")
    assert (m1.state, m1.expires_at) == ("invisible", until)
    with pytest.raises(ApiError) as refused:
        client.requeue_dead_letters(q, ttl_seconds=60, expires_at=until)
    assert refused.value.field == "expires_at"

    assert client.delete_dead_letters(q, limit=2) == 2
    assert _states(client, q) == {"m0": "pending", "m1": "invisible", "m4": "errored"}
    assert client.delete_dead_letters(q) == 1
    assert client.delete_dead_letters(q) == 0

    client.cancel(q, "m0")
    requeued = client.requeue(q, "m0", ttl_seconds=120)
    assert requeued.expires_at is not None
    assert requeued.expires_at - requeued.updated_at == timedelta(seconds=120)


def test_leased_messages_tell_attempts_ttl_and_wait(q: str, client: Client) -> None:
    client.put_queue(q, max_attempts=4)
    client.enqueue(q, id="a", ttl_seconds=600)
    [leased] = client.dequeue(q)
    assert leased.remaining_attempts == 3
    assert leased.expires_at is not None
    assert leased.ttl_remaining_seconds is not None
    assert 0 < leased.ttl_remaining_seconds <= 600
    assert leased.waited_seconds is not None
    assert leased.waited_seconds >= 0


async def test_async_client(q: str, client: Client, aclient: AsyncClient) -> None:
    _dead_letters(client, q, 3)
    assert await aclient.requeue_dead_letters(q, limit=1, ttl_seconds=30) == 1
    assert await aclient.delete_dead_letters(q, ids=["m2", "m0"]) == 1  # m0 is pending now
    assert _states(client, q) == {"m0": "pending", "m1": "errored"}
    client.cancel(q, "m0")
    requeued = await aclient.requeue(q, "m0", delay_seconds=5, ttl_seconds=50)
    assert requeued.state == "invisible"
    assert requeued.expires_at is not None
    assert requeued.expires_at - requeued.updated_at == timedelta(seconds=50)


def test_cli(q: str, sundial: Sundial, client: Client) -> None:
    _dead_letters(client, q, 4)
    client.cancel(q, client.enqueue(q, id="c").id)

    out = sundial("dead-letters", "requeue", q, "--limit", "1", "--ttl", "90", "--json").stdout
    assert json.loads(out) == {"requeued": 1}
    m0 = client.get_message(q, "m0")
    assert m0.expires_at is not None
    assert m0.expires_at - m0.updated_at == timedelta(seconds=90)
    out = sundial(
        "dead-letters", "requeue", q, "--id", "m1", "--expires-at", "2031-01-01T00:00:00+00:00"
    ).stdout
    assert out.strip() == "requeued 1"
    assert client.get_message(q, "m1").expires_at == datetime(2031, 1, 1, tzinfo=UTC)

    sundial("dead-letters", "delete", q, "--limit", "1", stdin="n\n", code=1)  # not confirmed
    assert _states(client, q)["m2"] == "errored"
    out = sundial("dead-letters", "delete", q, "--limit", "1", "--yes", "--json").stdout
    assert json.loads(out) == {"deleted": 1}
    out = sundial("dead-letters", "delete", q, "--state", "canceled", stdin="y\n").stdout
    assert out.strip().endswith("deleted 1")
    assert _states(client, q) == {"m0": "pending", "m1": "pending", "m3": "errored"}
    sundial("dead-letters", "delete", q, "--limit", "0", "--yes", code=1)
