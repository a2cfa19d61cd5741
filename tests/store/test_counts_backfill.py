"""Migration 0010 counts the messages already stored, so the kept counts are exact from the
first read after an upgrade, and the triggers keep them from the first write."""

from __future__ import annotations

import psycopg

from app.store import migrate

QUEUE = (
    "INSERT INTO queues (namespace, name, kind, lease_seconds, delay_seconds, max_attempts,"
    " retry_delay_seconds, retry_delay_max_seconds, retention_seconds)"
    " VALUES ('ns', %s, 'simple', 30, 0, 3, 0, 3600, 604800) RETURNING id"
)
KEPT = (
    "SELECT queue_id, state::text, sum(n)::bigint FROM ("
    " SELECT queue_id, state, n FROM queue_state_counts"
    " UNION ALL SELECT queue_id, state, delta FROM queue_state_count_deltas) AS c"
    " GROUP BY 1, 2 HAVING sum(n) <> 0"
)
REAL = "SELECT queue_id, state::text, count(*) FROM messages GROUP BY 1, 2"


def test_upgrade_counts_the_messages_already_stored(postgres):
    name = postgres.create(template=None)
    try:
        url, dsn = postgres.url(name), postgres.dsn(name)
        migrate.upgrade(url, "0009")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO namespaces (name) VALUES ('ns')")
            one = conn.execute(QUEUE, ("one",)).fetchone()
            two = conn.execute(QUEUE, ("two",)).fetchone()
            assert one is not None
            assert two is not None
            for queue_id, states in (
                (one[0], ("pending", "running", "errored")),
                (two[0], ("invisible",)),
            ):
                for number, state in enumerate(states * 3):
                    conn.execute(
                        "INSERT INTO messages (queue_id, id, priority, state, visible_at)"
                        " VALUES (%s, %s, 0, %s, now())",
                        (queue_id, f"m{number}", state),
                    )
        migrate.upgrade(url)
        with psycopg.connect(dsn, autocommit=True) as conn:
            real = set(conn.execute(REAL).fetchall())
            assert set(conn.execute(KEPT).fetchall()) == real
            assert conn.execute("SELECT count(*) FROM queue_state_count_deltas").fetchone() == (0,)
            # From the first write on, the triggers keep them.
            conn.execute("UPDATE messages SET state = 'completed' WHERE state = 'running'")
            conn.execute("DELETE FROM messages WHERE state = 'errored'")
            assert set(conn.execute(KEPT).fetchall()) == set(conn.execute(REAL).fetchall())
    finally:
        postgres.drop(name)
