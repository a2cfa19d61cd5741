"""Periodic (cron) jobs: their rows, and the firing of a due job's tick.

A firing is exactly once per tick by construction (docs/concepts.md, "Periodic jobs"): the
leader locks one due job (``PERIODIC_JOB_LOCK_IF_DUE``, ``FOR UPDATE SKIP LOCKED``), and in the
same transaction ``PERIODIC_JOB_FIRE`` advances its ``next_run_at`` with an UPDATE guarded by the
value it read and enqueues the tick's message *from the rows that UPDATE returned*, with the
tick's deterministic id and ``ON CONFLICT DO NOTHING``. A second scheduler (two leaders for a
moment, one fenced late) skips the locked row; after the commit the job is no longer due; and
should it ever run the statement with the old ``next_run_at``, the guard matches nothing, so
nothing is inserted. The clock is the database's ``now()``.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.store.sql.catalogue import NAMESPACE_IS_ACTIVE
from app.store.sql.enqueue import DEFAULT_PRIORITY, first_state
from app.store.sql.listeners import NOTIFY_CHANNEL

_COLUMNS = """namespace, name, queue, schedule, timezone, payload::text AS payload, metadata,
    priority, ttl_seconds, max_attempts, lease_seconds, paused, next_run_at, last_run_at,
    last_message_id, last_error, created_at, updated_at"""

DATABASE_NOW: Final[TextClause] = text("SELECT now()")

# A namespace's queue, served here (not moving): a job may only name one that exists.
_TARGET_EXISTS = """EXISTS (
    SELECT 1 FROM queues q JOIN namespaces n ON n.name = q.namespace
    WHERE q.namespace = CAST(:namespace AS text) AND q.name = CAST(:queue AS text)
      AND n.state = 'active')"""

_SPEC_COLUMNS = (
    "queue",
    "schedule",
    "timezone",
    "payload",
    "metadata",
    "priority",
    "ttl_seconds",
    "max_attempts",
    "lease_seconds",
    "paused",
)


def _spec_of(row: str) -> str:
    """The spec columns of ``row``, in :data:`_SPEC_PARAMS`'s order (to compare the two)."""
    return ", ".join(f"{row}.{column}" for column in _SPEC_COLUMNS)


_SPEC_PARAMS = """CAST(:queue AS text), CAST(:schedule AS text), CAST(:timezone AS text),
    CAST(:payload AS jsonb), CAST(:metadata AS jsonb), CAST(:priority AS bigint),
    CAST(:ttl_seconds AS integer), CAST(:max_attempts AS integer),
    CAST(:lease_seconds AS integer), CAST(:paused AS boolean)"""

# Create a job, or bring an existing one to the given spec (PUT). Its next_run_at is the first
# tick after the database's now() (:next_run_at, computed from DATABASE_NOW) when it is new, when
# its schedule or time zone changed, or when it is resumed (ticks missed while paused are not
# fired); otherwise it keeps its place. updated_at moves only when the spec changes: the same PUT
# again changes nothing. Nothing is written when the target queue does not exist.
PERIODIC_JOB_PUT: Final[TextClause] = text(
    f"""
    INSERT INTO periodic_jobs AS j (namespace, name, queue, schedule, timezone, payload, metadata,
                                    priority, ttl_seconds, max_attempts, lease_seconds, paused,
                                    next_run_at)
    SELECT CAST(:namespace AS text), CAST(:name AS text), {_SPEC_PARAMS},
           CAST(:next_run_at AS timestamptz)
    WHERE {_TARGET_EXISTS}
    ON CONFLICT (namespace, name) DO UPDATE
    SET queue = EXCLUDED.queue, schedule = EXCLUDED.schedule, timezone = EXCLUDED.timezone,
        payload = EXCLUDED.payload, metadata = EXCLUDED.metadata, priority = EXCLUDED.priority,
        ttl_seconds = EXCLUDED.ttl_seconds, max_attempts = EXCLUDED.max_attempts,
        lease_seconds = EXCLUDED.lease_seconds, paused = EXCLUDED.paused,
        next_run_at = CASE
            WHEN j.schedule = EXCLUDED.schedule AND j.timezone = EXCLUDED.timezone
                 AND NOT (j.paused AND NOT EXCLUDED.paused)
            THEN j.next_run_at ELSE EXCLUDED.next_run_at END,
        updated_at = CASE
            WHEN ({_spec_of("j")}) IS NOT DISTINCT FROM ({_spec_of("EXCLUDED")})
            THEN j.updated_at ELSE now() END
    RETURNING {_COLUMNS}, (xmax = 0) AS created
    """
)

# Bring an existing job to a spec (PATCH: the spec is the job as read with the changes applied),
# guarded by the updated_at it was read with: a change made in between matches nothing (the
# service reads again). next_run_at and updated_at as in PERIODIC_JOB_PUT. Nothing is written
# when the target queue does not exist.
PERIODIC_JOB_REPLACE_IF_UNCHANGED: Final[TextClause] = text(
    f"""
    UPDATE periodic_jobs j
    SET (queue, schedule, timezone, payload, metadata, priority, ttl_seconds, max_attempts,
         lease_seconds, paused) = ({_SPEC_PARAMS}),
        next_run_at = CASE
            WHEN j.schedule = CAST(:schedule AS text) AND j.timezone = CAST(:timezone AS text)
                 AND NOT (j.paused AND NOT CAST(:paused AS boolean))
            THEN j.next_run_at ELSE CAST(:next_run_at AS timestamptz) END,
        updated_at = CASE WHEN ({_spec_of("j")}) IS NOT DISTINCT FROM ({_SPEC_PARAMS})
                          THEN j.updated_at ELSE now() END
    WHERE j.namespace = CAST(:namespace AS text) AND j.name = CAST(:name AS text)
      AND j.updated_at = CAST(:expected_updated_at AS timestamptz)
      AND {_TARGET_EXISTS}
    RETURNING {_COLUMNS}, false AS created
    """
)

PERIODIC_JOB_GET: Final[TextClause] = text(
    f"""
    SELECT {_COLUMNS} FROM periodic_jobs
    WHERE namespace = CAST(:namespace AS text) AND name = CAST(:name AS text)
    """
)

# A namespace's jobs by name; with :queue, only those of that queue.
PERIODIC_JOBS_LIST: Final[TextClause] = text(
    f"""
    SELECT {_COLUMNS} FROM periodic_jobs
    WHERE namespace = CAST(:namespace AS text)
      AND (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
    ORDER BY name
    """
)

# A job deleted, only while its namespace is active here: once a move has frozen it, a delete
# could come after the move's last copy and be lost. A row when it was deleted.
PERIODIC_JOB_DELETE: Final[TextClause] = text(
    f"""
    DELETE FROM periodic_jobs
    WHERE namespace = CAST(:namespace AS text) AND name = CAST(:name AS text)
      AND {NAMESPACE_IS_ACTIVE.format("CAST(:namespace AS text)")}
    RETURNING name
    """
)

# The next due job of a namespace this database serves, locked for this transaction; a job
# another scheduler holds is skipped (periodic_jobs_due_idx), and so are the jobs whose firing
# failed in this pass (:failed, "namespace/name": tried again at the next tick). now() is the
# transaction's: the firing's tick and next run are computed from it.
PERIODIC_JOB_LOCK_IF_DUE: Final[TextClause] = text(
    """
    SELECT j.namespace, j.name, j.schedule, j.timezone, j.next_run_at, now() AS now
    FROM periodic_jobs j
    WHERE NOT j.paused AND j.next_run_at <= now()
      AND j.namespace IN (SELECT name FROM namespaces WHERE state = 'active')
      AND j.namespace || '/' || j.name <> ALL(CAST(:failed AS text[]))
    ORDER BY j.next_run_at
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED
    """
)

# Why a job's message cannot be enqueued into its queue now (NULL: it can), as a code
# ('missing', 'paused', 'key': an exclusive queue's key without a value) and as the text a
# firing records. Shared by the firing and the trigger, so both refuse the same things.
_REFUSAL_CODE = """CASE
        WHEN t.id IS NULL THEN 'missing'
        WHEN t.enqueue_paused THEN 'paused'
        WHEN t.exclusive_key IS NOT NULL AND coalesce(j.metadata ->> t.exclusive_key, '') = ''
        THEN 'key'
    END"""

_TARGET = f"""
    SELECT j.namespace, j.name, t.id AS queue_id, t.exclusive_key, t.filter_key, t.filter_key_2,
           t.delay_seconds, r.code AS refusal_code,
           CASE r.code
               WHEN 'missing' THEN 'queue ' || j.queue || ' does not exist'
               WHEN 'paused' THEN 'queue ' || j.queue || ' is paused for enqueue'
               WHEN 'key' THEN 'metadata has no value for ' || t.exclusive_key
                               || ', the key of the exclusive queue ' || j.queue
           END AS refusal
    FROM periodic_jobs j
    LEFT JOIN queues t ON t.namespace = j.namespace AND t.name = j.queue
    CROSS JOIN LATERAL (SELECT {_REFUSAL_CODE} AS code) r
    WHERE j.namespace = CAST(:namespace AS text) AND j.name = CAST(:name AS text)
"""


_VISIBLE_AT = "now() + make_interval(secs => t.delay_seconds)"
"""A fired message's visible_at: after its queue's delay."""


def _insert(source: str) -> str:
    """The INSERT of a job's message (id :message_id) into its queue, from ``source`` (rows of
    the job joined with ``target``), after the queue's delay; NOTHING when the id is taken."""
    return f"""
    INSERT INTO messages (queue_id, id, priority, state, payload, metadata, exclusive_value,
                          filter_value, filter_value_2, max_attempts, lease_seconds, visible_at,
                          expires_at)
    SELECT t.queue_id, CAST(:message_id AS text),
           coalesce(s.priority, {DEFAULT_PRIORITY}), {first_state(_VISIBLE_AT)},
           s.payload, s.metadata, s.metadata ->> t.exclusive_key, s.metadata ->> t.filter_key,
           s.metadata ->> t.filter_key_2,
           s.max_attempts, s.lease_seconds, {_VISIBLE_AT},
           now() + make_interval(secs => s.ttl_seconds)
    FROM {source}, target t
    WHERE t.refusal IS NULL
    ON CONFLICT (queue_id, id) DO NOTHING
    RETURNING queue_id, id, state
    """


_WAKE = f"""
    wake AS (
        SELECT pg_notify('{NOTIFY_CHANNEL}', CAST(i.queue_id AS text)) FROM inserted i
        WHERE i.state = 'pending'
          AND EXISTS (SELECT 1 FROM queue_listeners l WHERE l.queue_id = i.queue_id)
    )"""

# One tick of a due job: advance next_run_at to :next_run_at, guarded by the value read
# (:was), record the tick, and enqueue its message (id :message_id) only from what that UPDATE
# returned: a second firing of the same tick updates nothing and so inserts nothing. A queue
# missing, paused for enqueue, or exclusive with no value for its key skips the tick, which
# last_error records (the tick still counts as done: it is not fired later).
PERIODIC_JOB_FIRE: Final[TextClause] = text(
    f"""
    WITH target AS ({_TARGET}),
    advanced AS (
        UPDATE periodic_jobs j
        SET next_run_at = CAST(:next_run_at AS timestamptz),
            last_run_at = CAST(:tick AS timestamptz),
            last_error = t.refusal,
            last_message_id = CASE WHEN t.refusal IS NULL THEN CAST(:message_id AS text)
                                   ELSE j.last_message_id END,
            updated_at = now()
        FROM target t
        WHERE j.namespace = t.namespace AND j.name = t.name
          AND j.next_run_at = CAST(:was AS timestamptz) AND NOT j.paused
        RETURNING j.payload, j.metadata, j.priority, j.ttl_seconds, j.max_attempts,
                  j.lease_seconds
    ),
    inserted AS ({_insert("advanced s")}),
    {_WAKE}
    SELECT (SELECT count(*) FROM advanced) AS advanced,
           (SELECT count(*) FROM inserted) AS inserted,
           (SELECT refusal FROM target) AS refusal,
           (SELECT count(*) FROM wake) AS woken
    """
)

# A job whose schedule cannot be evaluated any more (its time zone gone from the system's
# tz database): paused, with the reason, so it stops coming up as due.
PERIODIC_JOB_PAUSE_BROKEN: Final[TextClause] = text(
    """
    UPDATE periodic_jobs SET paused = true, last_error = CAST(:error AS text), updated_at = now()
    WHERE namespace = CAST(:namespace AS text) AND name = CAST(:name AS text)
      AND next_run_at = CAST(:was AS timestamptz)
    """
)

# Fire a job once now (POST …/trigger), whatever its schedule, paused or not; its schedule and
# next_run_at are left as they are. Returns the refusal's code, if any, and what was inserted.
PERIODIC_JOB_TRIGGER: Final[TextClause] = text(
    f"""
    WITH target AS ({_TARGET}),
    job AS (
        SELECT j.payload, j.metadata, j.priority, j.ttl_seconds, j.max_attempts, j.lease_seconds
        FROM periodic_jobs j
        WHERE j.namespace = CAST(:namespace AS text) AND j.name = CAST(:name AS text)
    ),
    inserted AS ({_insert("job s")}),
    {_WAKE}
    SELECT (SELECT count(*) FROM job) AS found,
           (SELECT count(*) FROM inserted) AS inserted,
           (SELECT refusal_code FROM target) AS refusal_code,
           (SELECT count(*) FROM wake) AS woken
    """
)
