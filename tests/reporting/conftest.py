"""A database with generated history for the reporting views, and connections as the read-only
role. The history is synthetic but exact: timestamps are chosen, so every figure of the views
can be computed independently in Python from :data:`Generated.rows`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from app.store import maintenance
from app.store.reporting import READER_ROLE, create_reader


@dataclass
class Row:
    """One generated message, live or archived."""

    namespace: str
    queue: str
    id: str
    state: str
    attempts: int
    enqueued_at: datetime
    first_leased_at: datetime | None
    leased_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    archived: bool
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def outcome(self) -> str | None:
        if self.state == "canceled" and self.last_error == "expired":
            return "expired"
        return self.state if self.state in ("completed", "canceled", "errored") else None


@dataclass
class Generated:
    """The generated database: its DSN (as owner), and every message in it."""

    dsn: str
    rows: list[Row]
    url: str


QUEUES = [("shop", "emails"), ("shop", "invoices"), ("billing", "charges")]


def _generate(now: datetime) -> list[Row]:
    """About 600 messages over the last 30 hours, most archived, in every state and outcome."""
    rng = random.Random(6)
    rows: list[Row] = []
    base = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=30)
    for n in range(600):
        namespace, queue = QUEUES[n % 3] if n % 10 else QUEUES[0]
        enqueued = base + timedelta(seconds=rng.randrange(0, 29 * 3600))
        kind = rng.choices(
            ["completed", "errored", "expired", "canceled", "pending", "running", "invisible"],
            weights=[70, 8, 4, 3, 8, 4, 3],
        )[0]
        wait = timedelta(milliseconds=rng.randrange(10, 120_000))
        run = timedelta(milliseconds=rng.randrange(5, 60_000))
        attempts = {"completed": rng.choice([1, 1, 1, 2, 3]), "errored": 3}.get(kind, 1)
        first = enqueued + wait
        last = first + timedelta(seconds=30 * (attempts - 1))
        finished = last + run
        state = "canceled" if kind in ("expired", "canceled") else kind
        if kind == "expired" or kind == "pending" or kind == "invisible":
            attempts, first, last = 0, None, None
        if kind in ("pending", "running", "invisible"):
            finished = None
        if kind == "expired":
            finished = enqueued + timedelta(minutes=10)
        if kind == "canceled":
            finished = (last or enqueued) + timedelta(seconds=1)
        rows.append(
            Row(
                namespace=namespace,
                queue=queue,
                id=f"m{n}",
                state=state,
                attempts=attempts,
                enqueued_at=enqueued,
                first_leased_at=first,
                leased_at=last,
                finished_at=finished,
                last_error={"errored": "boom", "expired": "expired", "canceled": "stop"}.get(kind),
                # Finished messages of the first 24 hours are in history, later ones still live.
                archived=finished is not None and finished < base + timedelta(hours=24),
                metadata={"customer": f"c{n % 7}"},
            )
        )
    return rows


def _insert(dsn: str, rows: list[Row]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO namespaces (name) VALUES ('shop'), ('billing')")
        ids = {}
        for namespace, queue in QUEUES:
            ids[(namespace, queue)] = conn.execute(
                "INSERT INTO queues (namespace, name, kind, lease_seconds, delay_seconds,"
                " max_attempts, retry_delay_seconds, retry_delay_max_seconds, retention_seconds)"
                " VALUES (%s, %s, 'simple', 30, 0, 3, 0, 0, 86400) RETURNING id",
                (namespace, queue),
            ).fetchone()[0]  # type: ignore[index]
        for r in rows:
            queue_id = ids[(r.namespace, r.queue)]
            if r.archived:
                conn.execute(
                    "INSERT INTO message_history (namespace, queue, queue_id, id, seq, priority,"
                    " state, payload, metadata, attempts, max_attempts, enqueued_at,"
                    " first_leased_at, leased_at, finished_at, last_error)"
                    " VALUES (%s, %s, %s, %s, 0, 0, %s, '{}', %s, %s, 3, %s, %s, %s, %s, %s)",
                    (r.namespace, r.queue, queue_id, r.id, r.state, psycopg.types.json.Jsonb(
                        r.metadata), r.attempts, r.enqueued_at, r.first_leased_at, r.leased_at,
                     r.finished_at, r.last_error),
                )  # fmt: skip
            else:
                running = r.state == "running"
                conn.execute(
                    "INSERT INTO messages (queue_id, id, priority, state, metadata, attempts,"
                    " lease_id, lease_expires_at, visible_at, enqueued_at, first_leased_at,"
                    " leased_at, finished_at, last_error)"
                    " VALUES (%s, %s, 0, %s, %s, %s, CASE WHEN %s THEN gen_random_uuid() END,"
                    " CASE WHEN %s THEN now() + interval '1 hour' END, %s, %s, %s, %s, %s, %s)",
                    (queue_id, r.id, r.state, psycopg.types.json.Jsonb(r.metadata), r.attempts,
                     running, running, r.enqueued_at if r.state != "invisible"
                     else r.enqueued_at + timedelta(days=2), r.enqueued_at, r.first_leased_at,
                     r.leased_at, r.finished_at, r.last_error),
                )  # fmt: skip


def _partitions(dsn: str, days: set[date]) -> None:
    """The daily history partitions for ``days``, named and bounded as the scheduler makes them."""
    with psycopg.connect(dsn) as conn:
        for day in days:
            conn.execute(
                f"CREATE TABLE {maintenance.partition_name(day)} PARTITION OF message_history"
                f" FOR VALUES FROM ('{day}T00:00:00Z') TO ('{day + timedelta(days=1)}T00:00:00Z')"
            )


@pytest.fixture(scope="module")
def generated(postgres) -> Iterator[Generated]:
    """A database of its own for the module (the tests only read it), filled with generated
    live messages and history."""
    name = postgres.create()
    dsn = postgres.dsn(name)
    with psycopg.connect(dsn) as conn:
        now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    rows = _generate(now)
    days = {r.finished_at.astimezone(UTC).date() for r in rows if r.archived and r.finished_at}
    _partitions(dsn, days)
    _insert(dsn, rows)
    try:
        yield Generated(dsn, rows, postgres.url(name))
    finally:
        postgres.drop(name)


@pytest.fixture(scope="module")
def reader_dsn(generated: Generated) -> str:
    """A DSN that connects to the generated database as the read-only role."""
    create_reader(generated.url)
    params = conninfo_to_dict(generated.dsn)
    params["user"] = READER_ROLE
    return make_conninfo(**params)


@pytest.fixture
def reader(reader_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the read-only role (autocommit, as an analyst's SQL client)."""
    with psycopg.connect(reader_dsn, autocommit=True) as conn:
        yield conn
