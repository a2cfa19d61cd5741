"""Every hot-path statement, as SQL. Each state change is one guarded statement whose
``WHERE state = ANY(:from_states)`` comes from :mod:`app.core.states`, so a stale caller changes
nothing. ``now()`` (the database clock, the transaction's start) is the only clock.

Bind parameters use SQLAlchemy's ``:name`` form; casts are written ``CAST(:x AS type)`` because
``:x::type`` does not parse as a bind.
"""

from __future__ import annotations

import functools
from typing import Final

from sqlalchemy import TextClause, text

from app.core.states import Event, allowed_from
from app.core.validation import MAX_BATCH_DEQUEUE

# Columns returned wherever a full message is read. max_attempts and lease_seconds resolve a
# per-message override against the queue's current setting (:queue_max_attempts, :queue_lease).
MESSAGE_COLUMNS_SQL = """
    m.id, m.state::text AS state, m.priority, m.payload::text AS payload, m.metadata,
    m.exclusive_value, m.attempts,
    coalesce(m.max_attempts, CAST(:queue_max_attempts AS integer)) AS max_attempts,
    coalesce(m.lease_seconds, CAST(:queue_lease AS integer)) AS lease_seconds,
    m.lease_id::text AS lease_id, m.lease_expires_at, m.visible_at, m.expires_at,
    m.enqueued_at, m.updated_at, m.finished_at, m.last_error
"""

# The guard of every statement that a request runs on the tokens and queues it looked up
# (app/core/catalogue.py): true while the catalogue is still at :catalogue_version and the
# caller's token is valid (:valid_until, by the database's clock); otherwise it raises SQLSTATE
# SD001, so the statement applies nothing and the server looks up again. It reads no row of the
# statement, so PostgreSQL evaluates it once, as a one-time filter, before the statement's first
# row. NULL arguments skip their check (statements run outside a request).
CATALOGUE_IS_CURRENT = (
    "sundial_catalogue_is(CAST(:catalogue_version AS bigint), CAST(:valid_until AS timestamptz))"
)

# The same check on its own, for statements that do not carry it (the non-hot ones).
CATALOGUE_CHECK: Final[TextClause] = text(f"SELECT {CATALOGUE_IS_CURRENT}")

NOTIFY_CHANNEL: Final = "sundial_ready"
"""Channel that announces "queue N has new visible messages" to long-polling consumers."""


# NOTIFY only when a server process has consumers waiting on the queue: a NOTIFY holds a
# database-wide lock through its transaction's commit, which would serialise every enqueue.
_SOMEONE_LISTENS = (
    "EXISTS (SELECT 1 FROM queue_listeners WHERE queue_id = CAST(:queue_id AS bigint))"
)


def _waking(change: str, before: str = "") -> str:
    """Wrap a data-changing statement (with RETURNING, including ``state``) so that it also
    wakes long-polling consumers of the queue when it made a message ready (``pending``) or may
    have freed an exclusive value (``:frees_value``, true for exclusive queues).

    ``before`` holds CTEs the change reads from (a data-changing CTE must be at the top level).
    The notification is delivered at commit; counting ``wake`` forces the CTE to run.
    """
    return f"""
    WITH {before} changed AS ({change}),
    wake AS (
        SELECT pg_notify('{NOTIFY_CHANNEL}', CAST(:queue_id AS text))
        WHERE EXISTS (
            SELECT 1 FROM changed
            WHERE changed.state = 'pending' OR CAST(:frees_value AS boolean))
          AND {_SOMEONE_LISTENS}
    )
    SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM wake) AS woken
    """


# --- queues ---------------------------------------------------------------------------------

# With the catalogue version it was read at (a request's statements check it: CATALOGUE_IS_CURRENT).
QUEUE_GET: Final[TextClause] = text(
    """
    SELECT q.*, v.version AS catalogue_version
    FROM queues q CROSS JOIN catalogue_version v
    WHERE q.namespace = :namespace AND q.name = :name
    """
)

# An unexpired token by its secret's hash, with the catalogue version it was read at.
TOKEN_FIND: Final[TextClause] = text(
    """
    SELECT t.id::text AS id, t.namespace, t.label, t.created_at, t.expires_at,
           v.version AS catalogue_version
    FROM tokens t CROSS JOIN catalogue_version v
    WHERE t.secret_hash = :secret_hash AND (t.expires_at IS NULL OR t.expires_at > now())
    """
)

QUEUE_INSERT: Final[TextClause] = text(
    """
    INSERT INTO queues (namespace, name, kind, exclusive_key, filter_key, lease_seconds,
                        delay_seconds, max_attempts, retry_delay_seconds,
                        retry_delay_max_seconds, retention_seconds, enqueue_paused,
                        dequeue_paused)
    SELECT :namespace, :name, :kind, :exclusive_key, :filter_key, :lease_seconds, :delay_seconds,
           :max_attempts, :retry_delay_seconds, :retry_delay_max_seconds,
           :retention_seconds, :enqueue_paused, :dequeue_paused
    WHERE EXISTS (SELECT 1 FROM namespaces WHERE name = :namespace)
    ON CONFLICT (namespace, name) DO NOTHING
    RETURNING *
    """
)

QUEUE_DELETE: Final[TextClause] = text(
    "DELETE FROM queues WHERE namespace = :namespace AND name = :name RETURNING id"
)

QUEUE_PURGE: Final[TextClause] = text(
    """
    DELETE FROM messages
    WHERE queue_id = :queue_id AND state = ANY(CAST(:states AS message_state[]))
    """
)

# Counts per state for the queues of a namespace (or one queue). Reads the hot table, which the
# retention cleanup keeps to live messages plus recent finished ones.
QUEUE_COUNTS: Final[TextClause] = text(
    """
    SELECT m.queue_id, m.state::text AS state, count(*) AS n
    FROM messages m
    WHERE m.queue_id = ANY(CAST(:queue_ids AS bigint[]))
    GROUP BY m.queue_id, m.state
    """
)

QUEUE_OLDEST_PENDING_AGE: Final[TextClause] = text(
    """
    SELECT extract(epoch FROM now() - min(visible_at)) AS age
    FROM messages WHERE queue_id = :queue_id AND state = 'pending'
    """
)

# --- enqueue ----------------------------------------------------------------------------------

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
# ``filter_value`` is extracted here from the queue's :filter_key (NULL when the queue has none:
# ``->>`` with a NULL key is NULL), so no insert path can forget it.
_ENQUEUE_ROWS_OF_BATCH = """
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
_ENQUEUE_ROW_OF_ONE = """
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


def _enqueue(rows: str) -> TextClause:
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
                              filter_value, max_attempts, lease_seconds, visible_at, expires_at)
        SELECT CAST(:queue_id AS bigint), id,
               coalesce(priority, (extract(epoch FROM now()) * 1000)::bigint),
               CASE WHEN visible_at > now() THEN 'invisible' ELSE 'pending' END::message_state,
               coalesce(payload, 'null'::jsonb), coalesce(metadata, '{{}}'::jsonb),
               exclusive_value, metadata ->> CAST(:filter_key AS text),
               max_attempts, lease_seconds, visible_at,
               coalesce(expires_at, now() + make_interval(secs => ttl_seconds))
        FROM input
        WHERE {CATALOGUE_IS_CURRENT}
        ORDER BY ord
        ON CONFLICT (queue_id, id) DO NOTHING
        RETURNING id, state
    ),
    existing AS (
        -- The ids the insert found taken, with their states as of this statement's start. One
        -- taken by a producer that committed after that start is not seen here: the caller
        -- reads it afterwards.
        SELECT m.id, m.state FROM messages m
        WHERE m.queue_id = CAST(:queue_id AS bigint)
          AND m.id IN (SELECT id FROM rows EXCEPT ALL SELECT id FROM inserted)
    ),
    wake AS (
        SELECT pg_notify('sundial_ready', CAST(:queue_id AS text))
        WHERE EXISTS (SELECT 1 FROM inserted WHERE state = 'pending')
          AND {_SOMEONE_LISTENS}
    )
    SELECT id, state::text AS state, true AS created FROM inserted
    UNION ALL
    SELECT id, state::text, false FROM existing
    UNION ALL
    SELECT NULL, NULL, NULL FROM wake
    """
    )


MESSAGES_ENQUEUE: Final[TextClause] = _enqueue(_ENQUEUE_ROWS_OF_BATCH)
MESSAGE_ENQUEUE_ONE: Final[TextClause] = _enqueue(_ENQUEUE_ROW_OF_ONE)

MESSAGES_STATES: Final[TextClause] = text(
    "SELECT id, state::text AS state FROM messages "
    "WHERE queue_id = :queue_id AND id = ANY(CAST(:ids AS text[]))"
)

# --- dequeue ----------------------------------------------------------------------------------

# Grant leases on up to `count` messages, lowest priority first, ties by enqueue order.
# Two sources, each locked with FOR UPDATE SKIP LOCKED so concurrent consumers pass over rows
# another claim holds instead of waiting:
#   ready: walks messages_pending_idx (queue_id, priority, seq) WHERE state = 'pending' in order;
#   due:   invisible messages whose visible_at has passed but that the scheduler has not
#          promoted yet (found through messages_invisible_idx; few, so ranking them by
#          priority is cheap), so a due message never waits for its tick.
# MATERIALIZED fences the candidate set: the ranking runs once, not once per updated row.
#
# ``match`` holds the filter's conditions, written only when there is a filter (see
# messages_dequeue). A metadata filter is tested row by row on the walk, which is cheap while
# matches are common but walks past every non-matching message ahead of a rare value's first
# match. When the filter names the queue's filter_key, ``filter_value = :filter_value`` makes the
# ready source walk messages_filter_pending_idx (queue_id, filter_value, priority, seq), which
# holds exactly that value's ready messages in order, and stop at the first unlocked ones.
_KEYED = "AND filter_value = CAST(:filter_value AS text)"
_FILTERED = "AND metadata @> CAST(:filter AS jsonb)"


def _dequeue_simple(match: str, count: int) -> str:
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE queue_id = :queue_id AND state = 'pending' {match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT {count}
        FOR UPDATE SKIP LOCKED
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE state = 'invisible' AND visible_at <= now() AND queue_id = :queue_id {match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT {count}
        FOR UPDATE SKIP LOCKED
    ) AS due
),
picked AS (
    SELECT id, 0 AS scanned FROM candidate ORDER BY priority, seq LIMIT {count}
)
"""


# Exclusive queues add two rules: skip messages whose exclusive value already has a running
# message (NOT EXISTS probes messages_running_exclusive_uidx), and take at most one message per
# value from this batch (DISTINCT ON). Two consumers racing for the same idle value can still both
# pass NOT EXISTS; the partial unique index then refuses the second UPDATE (unique_violation) and
# the store retries the claim. The index, not this query, is what guarantees exclusivity.
# Each source looks at `scan` candidates only; when they share fewer values than `count`, the
# batch comes back short although other values may wait further on. Every leased row therefore
# carries ``scanned``, the candidates looked at: when it reached `scan` the store claims again for
# the rest (the values just leased are running by then, so NOT EXISTS passes over them).
#
# A claim locks only what it leases, so that concurrent claims share the idle values:
# - the candidates are read, not locked: a claim that row-locked its whole window would hide
#   the first message of every value in it from the others, which would then lease a later
#   message of such a value, out of order, or nothing at all;
# - the values are taken best first, and only while fewer than `count` messages are (the LIMIT
#   stops asking for rows): each with a non-blocking advisory lock (one that fails takes
#   nothing), so that another claim skips a value being leased instead of queueing behind it on
#   the unique index (two claims taking two values in opposite orders would deadlock there);
# - then the value's message is locked (FOR UPDATE SKIP LOCKED), which re-reads it at its newest
#   version: one that another claim leased and committed since this statement's snapshot is no
#   longer ready and is passed over, and no claim waits for another's rows.
def _dequeue_exclusive(match: str, count: int, scan: int) -> str:
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq, exclusive_value FROM messages c
        WHERE queue_id = :queue_id AND state = 'pending' {match}
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = :queue_id AND r.state = 'running'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY priority, seq
        LIMIT {scan}
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq, exclusive_value FROM messages c
        WHERE state = 'invisible' AND visible_at <= now() AND queue_id = :queue_id {match}
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = :queue_id AND r.state = 'running'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY priority, seq
        LIMIT {scan}
    ) AS due
),
one_per_value AS (
    SELECT DISTINCT ON (exclusive_value) id, priority, seq, exclusive_value FROM candidate
    ORDER BY exclusive_value, priority, seq
),
-- MATERIALIZED keeps the locks below out of this sort: PostgreSQL would otherwise push the
-- advisory lock into it and try it on every value before sorting.
best_first AS MATERIALIZED (
    SELECT id, priority, seq, exclusive_value FROM one_per_value ORDER BY priority, seq
),
picked AS (
    -- A nested loop over best_first, in its order, that the LIMIT stops at `count` rows: each
    -- value's advisory lock is tried, then its message locked, only while more are wanted.
    SELECT best_first.id, (SELECT count(*) FROM candidate) AS scanned
    FROM best_first
    CROSS JOIN LATERAL (
        SELECT 1 FROM messages m
        WHERE m.queue_id = :queue_id AND m.id = best_first.id
          AND (m.state = 'pending' OR (m.state = 'invisible' AND m.visible_at <= now()))
          AND (m.expires_at IS NULL OR m.expires_at > now())
        FOR UPDATE SKIP LOCKED
    ) AS still_ready
    WHERE pg_try_advisory_xact_lock(
        hashtextextended(CAST(:queue_id AS text) || '/' || best_first.exclusive_value, 0))
    LIMIT {count}
)
"""


# The lease: attempts + 1, a fresh random lease_id (the fencing token), and an expiry from the
# request's lease_seconds, else the message's override, else the queue's default.
_DEQUEUE_GRANT = f"""
UPDATE messages m
SET state = 'running',
    attempts = m.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = now() + make_interval(
        secs => coalesce(CAST(:lease_override AS integer), m.lease_seconds,
                         CAST(:queue_lease AS integer))),
    leased_at = now(),
    first_leased_at = coalesce(m.first_leased_at, now()),
    updated_at = now()
FROM picked
WHERE m.queue_id = :queue_id AND m.id = picked.id AND {CATALOGUE_IS_CURRENT}
RETURNING m.id, m.lease_id::text AS lease_id, m.lease_expires_at, m.attempts, m.priority,
          m.seq, m.payload::text AS payload, m.metadata, m.enqueued_at, picked.scanned
"""


def exclusive_scan(count: int) -> int:
    """How many candidates an exclusive claim of ``count`` looks at: 4 per wanted message, as
    several may share a value, and at most 400."""
    return min(count * 4, 400)


def messages_dequeue(
    *, count: int, exclusive: bool = False, keyed: bool = False, filtered: bool = False
) -> TextClause:
    """The claim of up to ``count`` messages of a simple or an exclusive queue.

    ``keyed``: the filter names the queue's filter_key (binds ``:filter_value``); ``filtered``:
    the filter has pairs beyond that (binds ``:filter``, the whole filter). A filter of the key
    alone needs no ``metadata @>`` test: the filter value is that key's value.

    ``count`` is written into the text as a literal, not bound, and a claim without a filter
    has no filter condition at all: PostgreSQL then plans each variant once per connection and
    reuses the plan. With ``LIMIT $n`` it estimates the LIMIT at a tenth of the table, with
    ``metadata @> $filter`` a fixed selectivity; either makes the generic plan look far dearer
    than a custom one, so it planned the claim again on every execution, which cost more
    database CPU than running it (0.49 -> 0.22 ms per claim, docs/adr/0009-claim-plans.md).
    The counts a consumer uses are few; claims with a filter beyond the key stay custom-planned.
    """
    if not (isinstance(count, int) and 1 <= count <= MAX_BATCH_DEQUEUE):
        raise ValueError(f"claim count must be an integer from 1 to {MAX_BATCH_DEQUEUE}: {count!r}")
    match = " ".join(condition for on, condition in ((keyed, _KEYED), (filtered, _FILTERED)) if on)
    if exclusive:
        return text(_dequeue_exclusive(match, count, exclusive_scan(count)) + _DEQUEUE_GRANT)
    return text(_dequeue_simple(match, count) + _DEQUEUE_GRANT)


# --- guards -------------------------------------------------------------------------------------


@functools.cache
def from_states(event: Event) -> str:
    """The ``:from_states`` of a statement guarded by ``state = ANY(CAST(:from_states AS
    message_state[]))``: the states ``event`` may happen from (:func:`allowed_from`, the one
    table of the state machine) as an array literal such as ``{running}``. One string is what
    psycopg dumps cheapest; a list it would inspect and dump element by element on every
    statement (5% of a worker's CPU under dequeue + complete)."""
    return "{" + ",".join(allowed_from(event)) + "}"


# --- per-message transitions ------------------------------------------------------------------

# A lease is current while the message is running under that lease_id and it has not expired.
_LEASE_IS_CURRENT = f"""
    m.state = ANY(CAST(:from_states AS message_state[]))
    AND m.lease_id = CAST(:lease_id AS uuid) AND m.lease_expires_at > now()
    AND {CATALOGUE_IS_CURRENT}
"""

MESSAGE_GET: Final[TextClause] = text(
    f"SELECT {MESSAGE_COLUMNS_SQL} FROM messages m WHERE m.queue_id = :queue_id AND m.id = :id"
)

MESSAGE_COMPLETE: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m
    SET state = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)


def _retry_or_dead_letter(*, attempts_left: str, retry_delay: str, error: str) -> str:
    """The SET clause of a failed attempt (fail, batch fail, lease expiry): the rule of
    ``states.retry_target``: errored when attempts are used up, else invisible for the retry
    delay, or pending when the delay is zero.

    Args:
        attempts_left: SQL that is true while the message may get another lease.
        retry_delay: SQL for the delay in seconds before the retry.
        error: SQL for the new ``last_error``.
    """
    return f"""
    SET state = CASE WHEN NOT ({attempts_left}) THEN 'errored'
                     WHEN {retry_delay} > 0 THEN 'invisible'
                     ELSE 'pending' END::message_state,
        visible_at = CASE WHEN {attempts_left}
                          THEN now() + make_interval(secs => {retry_delay})
                          ELSE m.visible_at END,
        finished_at = CASE WHEN {attempts_left} THEN NULL ELSE now() END,
        lease_expires_at = NULL,
        last_error = {error},
        updated_at = now()
    """


# A client's fail: the request's retry_delay_seconds, else the queue's exponential backoff
# (sundial_retry_delay), with the per-message max_attempts override.
_CLIENT_FAIL = {
    "attempts_left": (
        "m.attempts < coalesce(m.max_attempts, CAST(:queue_max_attempts AS integer))"
    ),
    "retry_delay": """coalesce(CAST(:retry_delay AS double precision),
             sundial_retry_delay(m.attempts, CAST(:queue_retry_delay AS integer),
                                 CAST(:queue_retry_delay_max AS integer)))""",
}

MESSAGE_FAIL: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m {_retry_or_dead_letter(**_CLIENT_FAIL, error=":error")}
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

MESSAGE_EXTEND: Final[TextClause] = text(
    f"""
    UPDATE messages m
    SET lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS integer)),
        updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
)

# A running message is canceled only with its current lease or with force.
MESSAGE_CANCEL: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m
    SET state = 'canceled', finished_at = now(), lease_expires_at = NULL,
        last_error = coalesce(:reason, 'canceled'), updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id
      AND m.state = ANY(CAST(:from_states AS message_state[]))
      AND (m.state <> 'running' OR CAST(:force AS boolean)
           OR (m.lease_id = CAST(:lease_id AS uuid) AND m.lease_expires_at > now()))
      AND {CATALOGUE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

# A dead letter (errored or canceled) starts a new life: attempts reset, no lease, no expiry.
_REQUEUE_SET = """
    SET state = CASE WHEN CAST(:delay AS integer) > 0 THEN 'invisible'
                     ELSE 'pending' END::message_state,
        visible_at = now() + make_interval(secs => CAST(:delay AS integer)),
        attempts = 0, lease_id = NULL, lease_expires_at = NULL, expires_at = NULL,
        finished_at = NULL, updated_at = now()
"""

MESSAGE_REQUEUE: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m {_REQUEUE_SET}
    WHERE m.queue_id = :queue_id AND m.id = :id
      AND m.state = ANY(CAST(:from_states AS message_state[])) AND {CATALOGUE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

# Bulk requeue of dead letters, oldest first, optionally restricted to ids.
MESSAGES_REQUEUE: Final[TextClause] = text(
    _waking(
        before="""
        picked AS (
            SELECT id FROM messages
            WHERE queue_id = :queue_id AND state = ANY(CAST(:states AS message_state[]))
              AND (CAST(:ids AS text[]) IS NULL OR id = ANY(CAST(:ids AS text[])))
            ORDER BY finished_at
            LIMIT :limit
            FOR UPDATE SKIP LOCKED
        ),""",
        change=f"""
        UPDATE messages m {_REQUEUE_SET}
        FROM picked
        WHERE m.queue_id = :queue_id AND m.id = picked.id
        RETURNING m.state::text AS state
        """,
    )
)

# PATCH of a waiting message. Moving visible_at moves it between invisible and pending; in an
# exclusive queue the exclusive value follows the metadata, and so does the filter value.
MESSAGE_UPDATE: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m
    SET priority = coalesce(CAST(:priority AS bigint), m.priority),
        payload = coalesce(CAST(:payload AS jsonb), m.payload),
        metadata = coalesce(CAST(:metadata AS jsonb), m.metadata),
        exclusive_value = CASE WHEN CAST(:exclusive_key AS text) IS NULL THEN m.exclusive_value
                               ELSE coalesce(CAST(:metadata AS jsonb), m.metadata)
                                    ->> CAST(:exclusive_key AS text) END,
        filter_value = coalesce(CAST(:metadata AS jsonb), m.metadata)
                       ->> CAST(:filter_key AS text),
        visible_at = coalesce(CAST(:visible_at AS timestamptz), m.visible_at),
        state = CASE WHEN coalesce(CAST(:visible_at AS timestamptz), m.visible_at) > now()
                     THEN 'invisible' ELSE 'pending' END::message_state,
        updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id
      AND m.state = ANY(CAST(:from_states AS message_state[])) AND {CATALOGUE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

# Deleting a running message of an exclusive queue frees its value.
MESSAGE_DELETE: Final[TextClause] = text(
    _waking(
        "DELETE FROM messages WHERE queue_id = :queue_id AND id = :id "
        "RETURNING id, state::text AS state"
    )
)

LISTENER_REGISTER: Final[TextClause] = text(
    """
    INSERT INTO queue_listeners (queue_id, listener_pid)
    SELECT id, :pid FROM queues WHERE id = :queue_id
    ON CONFLICT DO NOTHING
    """
)

LISTENER_UNREGISTER: Final[TextClause] = text(
    "DELETE FROM queue_listeners WHERE queue_id = :queue_id AND listener_pid = :pid"
)

# Registrations of LISTEN connections that no longer exist (their server died or reconnected).
LISTENERS_PRUNE: Final[TextClause] = text(
    """
    DELETE FROM queue_listeners
    WHERE listener_pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)
    """
)

# Batch acknowledgement: every item is its own guarded transition, all in one statement.
# ``items`` is a JSON array of {"id", "lease_id"} objects (see the enqueue statement for why a
# document rather than arrays); only items whose lease is current change. A lease_id that is
# not a UUID never reaches here (the service maps it to null, which matches nothing).
MESSAGES_COMPLETE_MANY: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m
    SET state = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
    FROM json_to_recordset(CAST(:items AS json)) AS a(id text, lease_id uuid)
    WHERE m.queue_id = :queue_id AND m.id = a.id
      AND m.state = ANY(CAST(:from_states AS message_state[]))
      AND m.lease_id = a.lease_id AND m.lease_expires_at > now() AND {CATALOGUE_IS_CURRENT}
    RETURNING m.id, m.lease_id::text AS lease_id, m.state::text AS state
    """
    )
)

MESSAGES_FAIL_MANY: Final[TextClause] = text(
    _waking(
        f"""
    UPDATE messages m {_retry_or_dead_letter(**_CLIENT_FAIL, error="a.error")}
    FROM json_to_recordset(CAST(:items AS json)) AS a(id text, lease_id uuid, error text)
    WHERE m.queue_id = :queue_id AND m.id = a.id
      AND m.state = ANY(CAST(:from_states AS message_state[]))
      AND m.lease_id = a.lease_id AND m.lease_expires_at > now() AND {CATALOGUE_IS_CURRENT}
    RETURNING m.id, m.lease_id::text AS lease_id, m.state::text AS state
    """
    )
)

# Why a guarded statement changed nothing: the caller reads the row's state and lease.
MESSAGE_GUARD_STATES: Final[TextClause] = text(
    """
    SELECT id, state::text AS state, lease_id::text AS lease_id,
           lease_expires_at > now() AS live
    FROM messages WHERE queue_id = :queue_id AND id = ANY(CAST(:ids AS text[]))
    """
)

# A repeated complete that the live table refused, because the scheduler has moved the message
# into history: the completed messages of these ids there whose lease is one of :lease_ids (the
# caller keeps the exact (id, lease) pairs it asked about), as complete answered them (updated_at
# is finished_at: nothing changes a completed message). One probe of message_history_message_idx
# per partition; run on the refusal path only, never by a complete that succeeds.
MESSAGES_ARCHIVED_COMPLETED: Final[TextClause] = text(
    """
    SELECT h.id, h.state::text AS state, h.priority, h.payload::text AS payload, h.metadata,
           h.exclusive_value, h.attempts, h.max_attempts, h.lease_seconds,
           h.lease_id::text AS lease_id, NULL::timestamptz AS lease_expires_at, h.visible_at,
           h.expires_at, h.enqueued_at, h.finished_at AS updated_at, h.finished_at, h.last_error
    FROM message_history h
    WHERE h.queue_id = :queue_id AND h.id = ANY(CAST(:ids AS text[]))
      AND h.state = 'completed' AND h.lease_id = ANY(CAST(:lease_ids AS uuid[]))
    """
)

# --- scheduler --------------------------------------------------------------------------------

# invisible -> pending for messages whose visible_at has passed (messages_invisible_idx), and a
# NOTIFY per queue so long-polling consumers wake.
MESSAGES_PROMOTE_DUE: Final[TextClause] = text(
    """
    WITH due AS (
        SELECT queue_id, id FROM messages
        WHERE state = 'invisible' AND visible_at <= now()
        ORDER BY visible_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    promoted AS (
        UPDATE messages m SET state = 'pending', updated_at = now()
        FROM due
        WHERE m.queue_id = due.queue_id AND m.id = due.id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
        RETURNING m.queue_id
    )
    SELECT queue_id, count(*) AS n, pg_notify('sundial_ready', CAST(queue_id AS text))
    FROM promoted GROUP BY queue_id
    """
)

# running -> pending/invisible/errored for leases past lease_expires_at (messages_lease_idx),
# with the same retry rule as MESSAGE_FAIL, from each queue's configuration.
MESSAGES_RELEASE_EXPIRED: Final[TextClause] = text(
    f"""
    WITH expired AS (
        SELECT queue_id, id FROM messages
        WHERE state = 'running' AND lease_expires_at <= now()
        ORDER BY lease_expires_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    released AS (
        UPDATE messages m {
        _retry_or_dead_letter(
            attempts_left="m.attempts < coalesce(m.max_attempts, q.max_attempts)",
            retry_delay=(
                "sundial_retry_delay(m.attempts, q.retry_delay_seconds, q.retry_delay_max_seconds)"
            ),
            error="'lease expired'",
        )
    }
        FROM expired, queues q
        WHERE m.queue_id = expired.queue_id AND m.id = expired.id AND q.id = m.queue_id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
          AND m.lease_expires_at <= now()
        RETURNING m.queue_id, m.state
    )
    SELECT queue_id, count(*) AS n, pg_notify('sundial_ready', CAST(queue_id AS text))
    FROM released GROUP BY queue_id
    """
)

# live -> canceled for messages whose expires_at has passed (messages_expires_idx). A running
# message of an exclusive queue (one with an exclusive value) frees its value as it expires:
# like every other path that frees one, that wakes the queue's long-polling consumers, and only
# if some server listens for the queue (ADR 0007). ``doomed`` reads the state under the row
# lock, so it is the state the UPDATE changes.
MESSAGES_EXPIRE: Final[TextClause] = text(
    f"""
    WITH doomed AS (
        SELECT queue_id, id, state = 'running' AND exclusive_value IS NOT NULL AS frees_value
        FROM messages
        WHERE expires_at <= now() AND state IN ('invisible', 'pending', 'running')
        ORDER BY expires_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ),
    expired AS (
        UPDATE messages m
        SET state = 'canceled', finished_at = now(), lease_expires_at = NULL,
            last_error = 'expired', updated_at = now()
        FROM doomed
        WHERE m.queue_id = doomed.queue_id AND m.id = doomed.id
          AND m.state = ANY(CAST(:from_states AS message_state[]))
        RETURNING m.queue_id, doomed.frees_value
    )
    SELECT queue_id, count(*) AS n,
           CASE WHEN bool_or(frees_value)
                     AND EXISTS (SELECT 1 FROM queue_listeners l
                                 WHERE l.queue_id = expired.queue_id)
                THEN pg_notify('{NOTIFY_CHANNEL}', CAST(queue_id AS text)) END AS woken
    FROM expired GROUP BY queue_id
    """
)

# Finished messages past their queue's retention leave the hot table for message_history, in one
# statement (the DELETE and the INSERT commit together, so nothing is lost or kept twice).
# The LATERAL probe walks messages_finished_idx per queue.
MESSAGES_ARCHIVE: Final[TextClause] = text(
    """
    WITH doomed AS (
        SELECT d.queue_id, d.id
        FROM queues q
        CROSS JOIN LATERAL (
            SELECT m.queue_id, m.id FROM messages m
            WHERE m.queue_id = q.id AND m.state IN ('completed', 'canceled', 'errored')
              AND m.finished_at < now() - make_interval(secs => q.retention_seconds)
            ORDER BY m.finished_at
            LIMIT :batch
            FOR UPDATE SKIP LOCKED
        ) AS d
        LIMIT :batch
    ),
    moved AS (
        DELETE FROM messages m USING doomed
        WHERE m.queue_id = doomed.queue_id AND m.id = doomed.id
          AND m.state IN ('completed', 'canceled', 'errored')
        RETURNING m.*
    )
    INSERT INTO message_history (namespace, queue, queue_id, id, seq, priority, state, payload,
                                 metadata, exclusive_value, attempts, max_attempts, enqueued_at,
                                 first_leased_at, leased_at, finished_at, last_error,
                                 lease_id, lease_seconds, visible_at, expires_at)
    SELECT q.namespace, q.name, moved.queue_id, moved.id, moved.seq, moved.priority, moved.state,
           moved.payload, moved.metadata, moved.exclusive_value, moved.attempts,
           coalesce(moved.max_attempts, q.max_attempts), moved.enqueued_at,
           moved.first_leased_at, moved.leased_at, moved.finished_at, moved.last_error,
           moved.lease_id, coalesce(moved.lease_seconds, q.lease_seconds), moved.visible_at,
           moved.expires_at
    FROM moved JOIN queues q ON q.id = moved.queue_id
    """
)

# The days of finished_at that the next archive batch may touch, so their partitions exist.
MESSAGES_ARCHIVE_DAYS: Final[TextClause] = text(
    """
    SELECT DISTINCT date_trunc('day', m.finished_at AT TIME ZONE 'UTC')::date AS day
    FROM queues q
    CROSS JOIN LATERAL (
        SELECT m.finished_at FROM messages m
        WHERE m.queue_id = q.id AND m.state IN ('completed', 'canceled', 'errored')
          AND m.finished_at < now() - make_interval(secs => q.retention_seconds)
        ORDER BY m.finished_at
        LIMIT :batch
    ) AS m
    """
)

# The history partitions that take rows: not one that a prune is detaching (its name stays
# taken until the prune drops it or attaches it back).
HISTORY_PARTITIONS: Final[TextClause] = text(
    """
    SELECT c.relname
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname = 'message_history' AND NOT i.inhdetachpending
    """
)

DATABASE_TODAY: Final[TextClause] = text("SELECT (now() AT TIME ZONE 'UTC')::date AS today")

# Leadership: one session-level advisory lock, held by the active scheduler's connection. The
# lock dies with the connection, so a crashed leader is replaced at the next poll.
# The hot table's statistics are stale when more rows changed since its last ANALYZE than 1,000
# plus a tenth of its live rows (autovacuum's own rule with a smaller scale factor).
MESSAGES_STATISTICS_STALE: Final[TextClause] = text(
    """
    SELECT n_mod_since_analyze > 1000 + 0.1 * n_live_tup
    FROM pg_stat_user_tables WHERE relid = 'messages'::regclass
    """
)
MESSAGES_ANALYZE: Final[TextClause] = text("ANALYZE (SKIP_LOCKED) messages")

LEADER_TRY_LOCK: Final[TextClause] = text("SELECT pg_try_advisory_lock(:key) AS acquired")
LEADER_UNLOCK: Final[TextClause] = text("SELECT pg_advisory_unlock(:key)")

# Fence a leader that has stopped working. Its session still holds the leader lock (its process
# is frozen, or it is cut off from the database and the server side of its connection stays
# open, which TCP alone may not notice for hours), but a working leader runs a statement every
# tick, so a session idle for longer than :stale_seconds is not leading anything. Terminating it
# releases the lock. A bigint advisory key shows in pg_locks as classid (high 32 bits), objid
# (low 32 bits) and objsubid 1. A session in the middle of a statement ('active') is left
# alone, however long the statement runs. pg_terminate_backend waits up to :wait_ms for the
# session to end, so the caller can take the lock at once.
LEADER_FENCE: Final[TextClause] = text(
    """
    SELECT activity.pid, pg_terminate_backend(activity.pid, :wait_ms) AS terminated
    FROM pg_locks AS lock
    JOIN pg_stat_activity AS activity ON activity.pid = lock.pid
    WHERE lock.locktype = 'advisory' AND lock.granted
      AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND lock.classid = :key_high AND lock.objid = :key_low AND lock.objsubid = 1
      AND activity.pid <> pg_backend_pid()
      AND activity.state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
      AND activity.state_change < now() - make_interval(secs => :stale_seconds)
    """
)

SCHEDULER_NODE_HEARTBEAT: Final[TextClause] = text(
    """
    INSERT INTO scheduler_nodes (node_id, is_leader, heartbeat_at, last_tick_at)
    VALUES (:node_id, :is_leader, now(), CASE WHEN :is_leader THEN now() END)
    ON CONFLICT (node_id) DO UPDATE
    SET is_leader = EXCLUDED.is_leader, heartbeat_at = now(),
        last_tick_at = coalesce(EXCLUDED.last_tick_at, scheduler_nodes.last_tick_at)
    """
)
