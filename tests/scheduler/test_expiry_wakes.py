"""Expiry that frees an exclusive value wakes the consumers waiting on the queue.

A running message of an exclusive queue whose ``expires_at`` passes is canceled by the
scheduler's expiry pass; like a complete, a fail or a lease release, that frees its value, and
a long poll parked behind it must be woken by a notification, not by its fallback timer. As on
every other path, only queues some server listens for are notified (ADR 0007).
"""

from __future__ import annotations

import asyncio

import psycopg
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, Queue
from app.core.service import QueueService
from app.database_url import psycopg_dsn
from app.store import maintenance
from app.store.sql.listeners import NOTIFY_CHANNEL
from tests.api.conftest import Caller
from tests.helpers import execute, make_queue, shift_back
from tests.store.test_notify_gate import notifications_until_marker

TIMEOUT = 5.0


async def expire_now(engine: AsyncEngine, queue_id: int, message_id: str) -> int:
    """Move the message's ``expires_at`` into the past and run the scheduler's expiry pass."""
    await execute(
        engine,
        "UPDATE messages SET expires_at = now() - interval '1 second' "
        "WHERE queue_id = :q AND id = :id",
        q=queue_id,
        id=message_id,
    )
    async with engine.connect() as conn:
        return await maintenance.expire_messages(conn)


async def test_a_long_poll_behind_a_running_message_is_woken_when_it_expires(
    alpha: Caller, engine: AsyncEngine
) -> None:
    base = f"/v1/namespaces/{alpha.namespace}/queues/builds"
    created = await alpha.put(base, json={"kind": "exclusive", "exclusive_key": "project"})
    assert created.status_code == 201, created.text
    registry = alpha.runtime.waiters
    registry.fallback_seconds = 60  # only a notification can wake the consumer in time
    queue = await alpha.runtime.service.get_queue_or_404(alpha.namespace, "builds")
    enqueued = await alpha.post(
        f"{base}/messages",
        json={
            "messages": [
                {"id": "first", "metadata": {"project": "web"}, "ttl_seconds": 3600},
                {"id": "second", "metadata": {"project": "web"}},
            ]
        },
    )
    assert enqueued.status_code == 201, enqueued.text
    leased = await alpha.post(f"{base}/dequeue", json={})
    assert [m["id"] for m in leased.json()["messages"]] == ["first"]

    # "second" is pending but blocked behind the running "first": the consumer parks.
    consumer = asyncio.create_task(alpha.post(f"{base}/dequeue", json={"wait_seconds": 10}))
    await asyncio.wait_for(registry.wait_for_waiting(queue.id, 1), TIMEOUT)
    assert await expire_now(engine, queue.id, "first") == 1

    answered = await asyncio.wait_for(consumer, TIMEOUT)
    assert answered.status_code == 200, answered.text
    assert [m["id"] for m in answered.json()["messages"]] == ["second"]
    first = await alpha.get(f"{base}/messages/first")
    assert (first.json()["state"], first.json()["last_error"]) == ("canceled", "expired")


async def _listening(listener: psycopg.AsyncConnection, engine: AsyncEngine, queue: Queue) -> None:
    await execute(
        engine,
        "INSERT INTO queue_listeners (queue_id, listener_pid) VALUES (:q, :pid)",
        q=queue.id,
        pid=listener.info.backend_pid,
    )


async def test_expiry_notifies_only_when_it_frees_a_value_someone_waits_for(
    service: QueueService, engine: AsyncEngine, database_url: str
) -> None:
    exclusive = await make_queue(service, "ns", "ex", kind="exclusive", exclusive_key="project")
    simple = await make_queue(service, "ns", "simple")
    unheard = await make_queue(service, "ns", "unheard", kind="exclusive", exclusive_key="project")
    for queue in (exclusive, simple, unheard):
        await service.enqueue(
            "ns",
            queue.name,
            [
                NewMessage(id=message_id, metadata={"project": "web"}, ttl_seconds=3600)
                for message_id in ("running", "waiting")
            ],
        )
        (leased,) = await service.dequeue("ns", queue.name)
        assert leased.id == "running"
    async with await psycopg.AsyncConnection.connect(
        psycopg_dsn(database_url), autocommit=True
    ) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        await _listening(listener, engine, exclusive)
        await _listening(listener, engine, simple)

        # A pending message that expires frees nothing.
        assert await expire_now(engine, exclusive.id, "waiting") == 1
        assert await notifications_until_marker(listener, engine) == []

        # A running one frees its value, in the exclusive queues only; "unheard" has no
        # listener and "simple" has no values.
        await shift_back(engine, "expires_at", 7200, ids=["running"])
        async with engine.connect() as conn:
            assert await maintenance.expire_messages(conn) == 3
        assert await notifications_until_marker(listener, engine) == [str(exclusive.id)]
