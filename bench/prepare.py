"""Backlogs prepared in SQL, not through the API: ``INSERT … SELECT generate_series`` in the
shape the API would create, in chunks, then ``VACUUM ANALYZE``."""

from __future__ import annotations

import time
from typing import Any, Protocol

import psycopg


class Connects(Protocol):
    """Whatever reaches the database that holds the queue: an :class:`bench.harness.Environment`,
    or a namespace on a pool (bench/pools/)."""

    def connect(self, autocommit: bool = True) -> psycopg.Connection[Any]: ...


def prefill(
    env: Connects,
    queue_id: int,
    n: int,
    *,
    metadata: str = "'{}'::jsonb",
    exclusive: str = "NULL",
    table: str = "messages",
    chunk: int = 1_000_000,
) -> float:
    """Insert ``n`` pending messages in SQL (INSERT … SELECT generate_series, the shape the API
    would create, the values of the queue's filter keys included), in chunks, then VACUUM
    ANALYZE; the seconds it took."""
    t0 = time.monotonic()
    with env.connect() as conn:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            conn.execute(
                f"""
                INSERT INTO {table} (queue_id, id, priority, state, payload, metadata,
                                     exclusive_value, filter_value, filter_value_2, visible_at)
                SELECT %(q)s, 'p' || g, (extract(epoch FROM now()) * 1000)::bigint, 'pending',
                       jsonb_build_object('i', g), m.md, {exclusive},
                       m.md ->> (SELECT filter_key FROM queues WHERE id = %(q)s),
                       m.md ->> (SELECT filter_key_2 FROM queues WHERE id = %(q)s), now()
                FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS g,
                     LATERAL (SELECT {metadata} AS md) AS m
                """,
                {"q": queue_id, "start": start + 1, "stop": stop},
            )
        conn.execute(f"VACUUM ANALYZE {table}")
    return time.monotonic() - t0
