"""Statements NOTIFY a queue only while some server process listens for it (queue_listeners):
a NOTIFY serialises commits, so producers must not pay for it when nobody waits.

Notifications are delivered in commit order, so instead of waiting for one that should not
come, each check commits a marker NOTIFY after the operation and reads up to the marker.
"""

from __future__ import annotations

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage, QueueConfig
from app.core.service import QueueService
from app.database_url import psycopg_dsn
from app.store import maintenance
from app.store.sql.listeners import NOTIFY_CHANNEL


async def notifications_until_marker(
    listener: psycopg.AsyncConnection, engine: AsyncEngine
) -> list[str]:
    async with engine.begin() as conn:
        await conn.execute(text(f"SELECT pg_notify('{NOTIFY_CHANNEL}', 'marker')"))
    seen = []
    async for notify in listener.notifies(timeout=10):
        if notify.payload == "marker":
            return seen
        seen.append(notify.payload)
    raise AssertionError("the marker notification never arrived")


async def test_enqueue_notifies_only_registered_queues(
    service: QueueService, engine: AsyncEngine, database_url: str
) -> None:
    await service.create_namespace("ns")
    queue, _ = await service.put_queue("ns", "q", QueueConfig())
    async with await psycopg.AsyncConnection.connect(
        psycopg_dsn(database_url), autocommit=True
    ) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")

        await service.enqueue("ns", "q", [NewMessage(id="unheard")])
        assert await notifications_until_marker(listener, engine) == []

        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO queue_listeners (queue_id, listener_pid) VALUES (:q, :pid)"),
                {"q": queue.id, "pid": listener.info.backend_pid},
            )
        await service.enqueue("ns", "q", [NewMessage(id="heard")])
        assert await notifications_until_marker(listener, engine) == [str(queue.id)]


async def test_registrations_of_dead_listeners_are_pruned(
    service: QueueService, engine: AsyncEngine
) -> None:
    await service.create_namespace("ns")
    queue, _ = await service.put_queue("ns", "q", QueueConfig())
    async with engine.connect() as conn:
        live_pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        for pid in (live_pid, -1):  # -1: a pid no backend has
            await conn.execute(
                text("INSERT INTO queue_listeners (queue_id, listener_pid) VALUES (:q, :pid)"),
                {"q": queue.id, "pid": pid},
            )
        await conn.commit()
        assert await maintenance.prune_listeners(conn) == 1
        left = (await conn.execute(text("SELECT listener_pid FROM queue_listeners"))).scalars()
        assert list(left) == [live_pid]
