"""Messages inserted: a whole batch, or one message, in one statement that reports ids already
taken and wakes the queue's long-polling consumers."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.core.states import Event
from app.store.sql.guards import CATALOGUE_IS_CURRENT, from_states
from app.store.sql.listeners import SOMEONE_LISTENS

# One statement for a whole batch: the rows come in as ``rows`` (in request order, ``ord``
# keeps seq, the tie-breaker, in that order). ON CONFLICT DO NOTHING makes a repeated id a
# no-op, so a retried enqueue never duplicates; RETURNING lists the rows created here, and the
# statement adds the current state of the ids that were taken (created = false). When
# one of them is visible now and a server has consumers waiting on the queue, the statement also
# NOTIFYs them (delivered at commit); that branch yields one row of NULLs, which the caller
# skips. Two shapes share everything but where the rows come from:
# - a batch binds one JSON array of row objects, which json_to_recordset reads (a key that is
#   absent is NULL). A payload travels as a JSON string holding its text, parsed into jsonb
#   once here, so no payload can alter the document around it. One document is cheap on both
#   sides: psycopg dumps column arrays element by element in Python (1.3 ms of client CPU for
#   100 rows, against 0.2 ms to encode the document), and PostgreSQL reads it faster than
#   eleven arrays (docs/adr/0010-batch-rows-as-json.md);
# - a single message binds plain values, a little cheaper still for one row, and most
#   producers send one message per request.
# ``filter_value`` and ``filter_value_2`` are extracted here from the queue's :filter_key and
# :filter_key_2 (NULL when the queue has none: ``->>`` with a NULL key is NULL), so no insert
# path can forget them.
_ROWS_OF_BATCH = """
    SELECT id, priority, CAST(payload AS jsonb) AS payload, metadata, exclusive_value,
           max_attempts, lease_seconds, delay_seconds, visible_at AS visible_at_given,
           ttl_seconds, expires_at, ord
    FROM ROWS FROM (
             json_to_recordset(CAST(:rows AS json))
             AS (id text, priority bigint, payload text, metadata jsonb, exclusive_value text,
                 max_attempts integer, lease_seconds integer, delay_seconds integer,
                 visible_at timestamptz, ttl_seconds integer, expires_at timestamptz))
         WITH ORDINALITY
         AS m(id, priority, payload, metadata, exclusive_value, max_attempts, lease_seconds,
              delay_seconds, visible_at, ttl_seconds, expires_at, ord)
"""
_ROW_OF_ONE = """
    SELECT CAST(:id AS text) AS id, CAST(:priority AS bigint) AS priority,
           CAST(:payload AS jsonb) AS payload, CAST(:metadata AS jsonb) AS metadata,
           CAST(:exclusive_value AS text) AS exclusive_value,
           CAST(:max_attempts AS integer) AS max_attempts,
           CAST(:lease_seconds AS integer) AS lease_seconds,
           CAST(:delay AS integer) AS delay_seconds,
           CAST(:visible_at AS timestamptz) AS visible_at_given,
           CAST(:ttl AS integer) AS ttl_seconds, CAST(:expires_at AS timestamptz) AS expires_at,
           1 AS ord
"""


# What an insert does with an id the queue already holds:
# - keep (the default): nothing; the id is reported with its current state (created = false);
# - replace: a waiting message (Event.REPLACE's sources: invisible or pending, the guard
#   evaluated on the row's newest version, which ON CONFLICT locks) takes the new row's
#   priority, payload, metadata, exclusive and filter values, overrides, visible_at (and the
#   state that follows from it) and expires_at; its id, seq (its place among equal priorities),
#   enqueued_at, attempts and last_error stay. A running or finished message is left as it is,
#   and the statement does not report it: the caller reads its state afterwards, at its newest
#   (a state read in this statement's snapshot could be older than the one the guard saw).
#   ``xmax = 0`` tells a row inserted here from one updated here.
# A new message's default priority: the enqueue time in Unix milliseconds (docs/concepts.md,
# "Priorities as deadlines"); and its first state from its visible_at. Shared by every insert of
# a new message (enqueue, publish, a periodic job's firing).
DEFAULT_PRIORITY = "(extract(epoch FROM now()) * 1000)::bigint"


def first_state(visible_at: str) -> str:
    """The state a new message starts in, from the SQL expression of its ``visible_at``."""
    return f"CASE WHEN {visible_at} > now() THEN 'invisible' ELSE 'pending' END::message_state"


_KEEP = "ON CONFLICT (queue_id, id) DO NOTHING RETURNING id, state, seq, true AS created"
_REPLACE = f"""
        ON CONFLICT (queue_id, id) DO UPDATE
        SET priority = EXCLUDED.priority, payload = EXCLUDED.payload,
            metadata = EXCLUDED.metadata, exclusive_value = EXCLUDED.exclusive_value,
            filter_value = EXCLUDED.filter_value, filter_value_2 = EXCLUDED.filter_value_2,
            max_attempts = EXCLUDED.max_attempts,
            lease_seconds = EXCLUDED.lease_seconds, visible_at = EXCLUDED.visible_at,
            state = EXCLUDED.state, expires_at = EXCLUDED.expires_at, updated_at = now()
        WHERE messages.state = ANY(CAST('{from_states(Event.REPLACE)}' AS message_state[]))
        RETURNING id, state, seq, xmax = 0 AS created
"""
_EXISTING = """
    existing AS (
        -- The ids the insert found taken, with their states as of this statement's start. One
        -- taken by a producer that committed after that start is not seen here: the caller
        -- reads it afterwards.
        SELECT m.id, m.state, m.seq FROM messages m
        WHERE m.queue_id = CAST(:queue_id AS bigint)
          AND m.id IN (SELECT id FROM rows EXCEPT ALL SELECT id FROM inserted)
    ),"""
_NO_EXISTING = """
    existing AS (SELECT NULL::text AS id, NULL::message_state AS state, NULL::bigint AS seq
                 WHERE false),"""


def _enqueue(rows: str, replace: bool = False) -> TextClause:
    conflict, existing = (_REPLACE, _NO_EXISTING) if replace else (_KEEP, _EXISTING)
    return text(
        f"""
    WITH rows AS ({rows}),
    input AS (
        SELECT m.*, coalesce(m.visible_at_given, now() + make_interval(secs => m.delay_seconds))
                    AS visible_at
        FROM rows m
    ),
    inserted AS (
        INSERT INTO messages (queue_id, id, priority, state, payload, metadata, exclusive_value,
                              filter_value, filter_value_2, max_attempts, lease_seconds,
                              visible_at, expires_at)
        SELECT CAST(:queue_id AS bigint), id,
               coalesce(priority, {DEFAULT_PRIORITY}),
               {first_state("visible_at")},
               coalesce(payload, 'null'::jsonb), coalesce(metadata, '{{}}'::jsonb),
               exclusive_value, metadata ->> CAST(:filter_key AS text),
               metadata ->> CAST(:filter_key_2 AS text),
               max_attempts, lease_seconds, visible_at,
               coalesce(expires_at, now() + make_interval(secs => ttl_seconds))
        FROM input
        WHERE {CATALOGUE_IS_CURRENT}
        ORDER BY ord
        {conflict}
    ),{existing}
    wake AS (
        SELECT pg_notify('sundial_ready', CAST(:queue_id AS text))
        WHERE EXISTS (SELECT 1 FROM inserted WHERE state = 'pending')
          AND {SOMEONE_LISTENS}
    )
    SELECT id, state::text AS state, created, seq FROM inserted
    UNION ALL
    SELECT id, state::text, false, seq FROM existing
    UNION ALL
    SELECT NULL, NULL, NULL, NULL FROM wake
    """
    )


MESSAGES_ENQUEUE_IF_NEW: Final[TextClause] = _enqueue(_ROWS_OF_BATCH)
MESSAGE_ENQUEUE_ONE_IF_NEW: Final[TextClause] = _enqueue(_ROW_OF_ONE)
MESSAGES_ENQUEUE_OR_REPLACE: Final[TextClause] = _enqueue(_ROWS_OF_BATCH, replace=True)
MESSAGE_ENQUEUE_ONE_OR_REPLACE: Final[TextClause] = _enqueue(_ROW_OF_ONE, replace=True)
