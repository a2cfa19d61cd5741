"""Generated data for the pipeline's tests and benchmark: a realistic finished history with known
wait and run times, and a bulk-enqueue dataset with duplicates and malformed rows.

History: ``count`` finished messages over 2 namespaces x 2 queues (``jobs`` simple, ``builds``
exclusive on ``project``), enqueued over ``days`` days ending ``end_days_ago`` days ago. Every
timing is a deterministic function of the message's number ``i``, so the same call always makes
the same history (only ``archived_at`` varies: it is the insert's ``now()``):

- wait (enqueue -> first lease): ``(i * 7919) % 5_000_000`` microseconds, + 1 s per extra attempt;
- run (last lease -> finish): ``(i * 104729) % 3_000_000`` microseconds;
- ``i % 20``: 0 errored by lease expiry, 1 errored by the consumer, 2 expired (never leased),
  3 canceled while running, otherwise completed; attempts ``1 + i % 3``.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

NAMESPACES = ("acme", "globex")
QUEUES = ("jobs", "builds")
DAY_MICROS = 86_400_000_000

_HISTORY = """
WITH n AS (
    SELECT i,
           %(start)s::timestamptz
               + make_interval(secs => ((i - %(first)s::bigint)::double precision * %(spread)s)
                                       / %(count)s::bigint) AS enqueued_at,
           1 + i %% 3 AS attempts,
           i %% 20 AS kind
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
), t AS (
    SELECT n.*,
           n.enqueued_at + make_interval(secs => ((i * 7919) %% 5000000) / 1e6) AS first_leased_at,
           make_interval(secs => ((i * 104729) %% 3000000) / 1e6) AS run
    FROM n
)
INSERT INTO message_history (namespace, queue, queue_id, id, seq, priority, state, payload,
                             metadata, exclusive_value, attempts, max_attempts, enqueued_at,
                             first_leased_at, leased_at, finished_at, last_error)
SELECT (ARRAY['acme', 'globex'])[1 + i %% 2],
       (ARRAY['jobs', 'builds'])[1 + (i / 2) %% 2],
       1 + i %% 4,
       'm-' || i, i, i %% 1000,
       (CASE WHEN kind IN (0, 1) THEN 'errored'
             WHEN kind IN (2, 3) THEN 'canceled'
             ELSE 'completed' END)::message_state,
       jsonb_build_object('n', i),
       CASE WHEN (i / 2) %% 2 = 1 THEN jsonb_build_object('project', 'p' || (i * i) %% 11)
            ELSE '{}'::jsonb END,
       CASE WHEN (i / 2) %% 2 = 1 THEN 'p' || (i * i) %% 11 END,
       CASE WHEN kind = 2 THEN 0 ELSE attempts END,
       3,
       enqueued_at,
       CASE WHEN kind <> 2 THEN first_leased_at END,
       CASE WHEN kind <> 2 THEN first_leased_at + make_interval(secs => attempts - 1) END,
       CASE WHEN kind = 2 THEN enqueued_at + interval '10 minutes'
            ELSE first_leased_at + make_interval(secs => attempts - 1) + run END,
       CASE WHEN kind = 0 THEN 'lease expired'
            WHEN kind = 1 THEN 'boom'
            WHEN kind = 2 THEN 'expired'
            WHEN kind = 3 THEN 'canceled'
            WHEN attempts > 1 AND i %% 7 = 0 THEN 'lease expired'
            WHEN attempts > 1 THEN 'retry me' END
FROM t
"""

# Every figure of report_hourly computed by SQL alone over message_history (percentile_disc,
# like the Spark job), for the rows whose hour is in [%(since)s, %(until)s).
SQL_FIGURES = """
WITH m AS (
    SELECT namespace, queue, attempts, exclusive_value, enqueued_at, first_leased_at, finished_at,
           CASE WHEN state = 'canceled' AND last_error = 'expired' THEN 'expired'
                ELSE state::text END AS outcome,
           last_error = 'lease expired' AS lease_expired,
           (extract(epoch FROM first_leased_at - enqueued_at) * 1000000)::bigint AS wait_us,
           (extract(epoch FROM finished_at - leased_at) * 1000000)::bigint AS run_us
    FROM message_history
), enq AS (
    SELECT namespace, queue, date_trunc('hour', enqueued_at) AS hour, count(*) AS enqueued
    FROM m GROUP BY 1, 2, 3
), fin AS (
    SELECT namespace, queue, date_trunc('hour', finished_at) AS hour,
           count(*) FILTER (WHERE outcome = 'completed') AS completed,
           count(*) FILTER (WHERE outcome = 'errored') AS errored,
           count(*) FILTER (WHERE outcome = 'canceled') AS canceled,
           count(*) FILTER (WHERE outcome = 'expired') AS expired,
           count(*) FILTER (WHERE lease_expired) AS lease_expired,
           count(*) AS finished
    FROM m GROUP BY 1, 2, 3
), wait AS (
    SELECT namespace, queue, date_trunc('hour', first_leased_at) AS hour,
           percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY wait_us) AS p
    FROM m WHERE wait_us IS NOT NULL GROUP BY 1, 2, 3
), run AS (
    SELECT namespace, queue, date_trunc('hour', finished_at) AS hour,
           percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY run_us) AS p
    FROM m WHERE run_us IS NOT NULL GROUP BY 1, 2, 3
), att AS (
    SELECT namespace, queue, hour, jsonb_object_agg(attempts::text, n) AS attempts
    FROM (SELECT namespace, queue, date_trunc('hour', finished_at) AS hour, attempts,
                 count(*) AS n FROM m GROUP BY 1, 2, 3, 4) a
    GROUP BY 1, 2, 3
), busy AS (
    SELECT namespace, queue, hour,
           jsonb_agg(jsonb_build_object('value', exclusive_value, 'messages', n) ORDER BY rank)
               AS busiest
    FROM (SELECT namespace, queue, hour, exclusive_value, n,
                 row_number() OVER (PARTITION BY namespace, queue, hour
                                    ORDER BY n DESC, exclusive_value) AS rank
          FROM (SELECT namespace, queue, date_trunc('hour', finished_at) AS hour,
                       exclusive_value, count(*) AS n
                FROM m WHERE exclusive_value IS NOT NULL GROUP BY 1, 2, 3, 4) v) r
    WHERE rank <= 3
    GROUP BY 1, 2, 3
), keys AS (
    SELECT namespace, queue, hour FROM enq UNION SELECT namespace, queue, hour FROM fin
    UNION SELECT namespace, queue, hour FROM wait
)
SELECT k.namespace, k.queue, k.hour,
       coalesce(enq.enqueued, 0), coalesce(fin.completed, 0), coalesce(fin.errored, 0),
       coalesce(fin.canceled, 0), coalesce(fin.expired, 0),
       wait.p[1], wait.p[2], wait.p[3], run.p[1], run.p[2], run.p[3],
       coalesce(att.attempts, '{}'), coalesce(fin.lease_expired, 0),
       fin.lease_expired::double precision / nullif(fin.finished, 0),
       coalesce(busy.busiest, '[]')
FROM keys k
LEFT JOIN enq USING (namespace, queue, hour) LEFT JOIN fin USING (namespace, queue, hour)
LEFT JOIN wait USING (namespace, queue, hour) LEFT JOIN run USING (namespace, queue, hour)
LEFT JOIN att USING (namespace, queue, hour) LEFT JOIN busy USING (namespace, queue, hour)
WHERE k.hour >= %(since)s AND k.hour < %(until)s
ORDER BY 1, 2, 3
"""


def history_partitions(
    conn: psycopg.Connection[Any], first_day_ago: int, last_day_ago: int
) -> None:
    """Create the daily history partitions from ``first_day_ago`` to ``last_day_ago`` days ago,
    named as app/store/maintenance.py names them."""
    today: date = conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]  # type: ignore[index]
    for ago in range(first_day_ago, last_day_ago - 1, -1):
        day = today - timedelta(days=ago)
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF message_history "
                "FOR VALUES FROM ({}) TO ({})"
            ).format(
                sql.Identifier(f"message_history_{day:%Y%m%d}"),
                sql.Literal(f"{day.isoformat()}T00:00:00Z"),
                sql.Literal(f"{(day + timedelta(days=1)).isoformat()}T00:00:00Z"),
            )
        )


def generate_history(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    days: float = 2.0,
    end_days_ago: float = 1.0,
    offset: int = 0,
) -> None:
    """Insert ``count`` finished messages (ids ``m-<offset + 1>``...) into ``message_history``."""
    start_days_ago = end_days_ago + days
    history_partitions(conn, int(start_days_ago) + 1, max(int(end_days_ago) - 1, -1))
    start = conn.execute(
        "SELECT now() - make_interval(secs => %s)", (start_days_ago * 86400,)
    ).fetchone()[0]  # type: ignore[index]
    conn.execute(
        _HISTORY,
        {
            "start": start,
            "spread": float(days * 86400),
            "count": count,
            "first": offset + 1,
            "last": offset + count,
        },
    )


def bulk_rows(
    count: int, *, duplicates: int, malformed: int, seed: int = 7
) -> list[dict[str, Any]]:
    """Rows for an exclusive queue keyed on ``project``: ``count`` distinct good ids, then
    ``duplicates`` repeats of earlier ids and ``malformed`` rows the core refuses (bad id,
    non-integer priority, missing project), shuffled in."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = [
        {"id": f"row-{i}", "priority": str(i % 500), "project": f"p{i % 97}", "body": f"item {i}"}
        for i in range(count)
    ]
    rows += [dict(rows[rng.randrange(count)]) for _ in range(duplicates)]
    bad = [
        {"id": "has space", "priority": "1", "project": "p1", "body": "x"},
        {"id": "bad-priority", "priority": "soon", "project": "p1", "body": "x"},
        {"id": "no-project", "priority": "1", "project": None, "body": "x"},
    ]
    rows += [dict(bad[k % 3], id=f"{bad[k % 3]['id']}-{k}") for k in range(malformed)]
    rng.shuffle(rows)
    return rows


def write_jsonl(rows: list[dict[str, Any]], path: Path, *, garbage_lines: int = 0) -> None:
    """Rows as JSON lines, with ``garbage_lines`` lines that are not JSON at all."""
    with path.open("w") as out:
        for index, row in enumerate(rows):
            out.write(json.dumps(row) + "\n")
            if index < garbage_lines:
                out.write("{not json\n")
