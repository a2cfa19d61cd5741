"""The harness's own way to the database (never through a proxy), and the live watcher on it.

:class:`Database` runs the harness's queries and reads the final state of every message;
:class:`ExclusivityWatcher` polls it for two running messages of one exclusive value while the
campaign runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, Protocol

import psycopg

from tests.faults.config import HARNESS_APP, NAMESPACE
from tests.faults.history import DbRow, History, WatcherHit


class DatabaseTarget(Protocol):
    """Where the campaign's database is: a :class:`LocalCluster` or a :class:`Formation`."""

    @property
    def libpq_dsn(self) -> str:
        """For the harness's own connections (a formation's: to the node accepting writes)."""
        ...

    @property
    def sqlalchemy_url(self) -> str:
        """For the servers and the migration."""
        ...


class Database:
    """Direct connections to the database (never through the proxy), for the harness only.

    Args:
        target: The cluster or formation.
        patience: Seconds :meth:`fetch` keeps retrying at least (beyond its ``tries``): longer
            than a failover for a formation.
    """

    def __init__(self, target: DatabaseTarget, *, patience: float = 0.0) -> None:
        self.target = target
        self.patience = patience

    @property
    def dsn(self) -> str:
        return (
            f"{self.target.libpq_dsn} application_name={HARNESS_APP} connect_timeout=3 "
            "options='-c statement_timeout=5000'"
        )

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def fetch(self, query: str, params: Sequence[Any] = (), tries: int = 20) -> list[Any]:
        """Run a query, retrying (bounded: ``tries`` times and ``patience`` seconds at least)
        while the database is restarting or failing over."""
        give_up = time.monotonic() + self.patience
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(10):
                    conn = await self.connect()
                    async with conn:
                        cursor = await conn.execute(query, params)
                        return await cursor.fetchall() if cursor.description else []
            except (psycopg.OperationalError, OSError, TimeoutError):
                if attempt >= tries and time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(0.25)

    async def live_count(self) -> int:
        rows = await self.fetch(
            "SELECT count(*) FROM messages m JOIN queues q ON q.id = m.queue_id "
            "WHERE q.namespace = %s AND m.state IN ('invisible', 'pending', 'running')",
            (NAMESPACE,),
        )
        return int(rows[0][0])

    async def final_state(
        self,
    ) -> tuple[dict[tuple[str, str], DbRow], list[tuple[str, str]]]:
        rows = await self.fetch(
            """
            SELECT q.name, m.id, m.state::text, m.attempts, m.lease_id::text, false
            FROM messages m JOIN queues q ON q.id = m.queue_id WHERE q.namespace = %s
            UNION ALL
            SELECT h.queue, h.id, h.state::text, h.attempts, NULL, true
            FROM message_history h WHERE h.namespace = %s
            """,
            (NAMESPACE, NAMESPACE),
        )
        db: dict[tuple[str, str], DbRow] = {}
        twice: list[tuple[str, str]] = []
        for queue, message_id, state, attempts, lease_id, archived in rows:
            key = (queue, message_id)
            if key in db:
                twice.append(key)
            db[key] = DbRow(state, attempts, lease_id, archived)
        return db, twice


class ExclusivityWatcher:
    """Polls the cluster directly for two running messages of one exclusive value."""

    QUERY = """
        SELECT queue_id, exclusive_value, count(*) FROM messages
        WHERE state = 'running' AND exclusive_value IS NOT NULL
        GROUP BY queue_id, exclusive_value HAVING count(*) > 1
    """

    def __init__(self, database: Database, history: History, interval: float = 0.05) -> None:
        self.database = database
        self.history = history
        self.interval = interval

    async def run(self, stop: asyncio.Event, deadline: float) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    async with asyncio.timeout(5):
                        if conn is None or conn.closed:
                            conn = await self.database.connect()
                        rows = await (await conn.execute(self.QUERY)).fetchall()
                    self.history.watcher_samples += 1
                    now = time.time()
                    self.history.watcher_hits += [
                        WatcherHit(now, queue_id, value, count) for queue_id, value, count in rows
                    ]
                except (psycopg.Error, OSError, TimeoutError):
                    self.history.watcher_errors += 1
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            await conn.close()
                    conn = None
                    await asyncio.sleep(0.2)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
