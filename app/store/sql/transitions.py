"""The state changes a client makes to messages, other than the claim: complete, fail and extend
under the current lease (one message or many), cancel, requeue of dead letters, update of a
waiting message; and their deletion (one message, or a queue's messages in some states)."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.store.sql.guards import CATALOGUE_IS_CURRENT
from app.store.sql.listeners import waking
from app.store.sql.reads import MESSAGE_COLUMNS_SQL
from app.store.sql.retry import CLIENT_FAIL, retry_or_dead_letter

# A lease is current while the message is running under that lease_id and it has not expired.
_LEASE_IS_CURRENT = f"""
    m.state = ANY(CAST(:from_states AS message_state[]))
    AND m.lease_id = CAST(:lease_id AS uuid) AND m.lease_expires_at > now()
    AND {CATALOGUE_IS_CURRENT}
"""

MESSAGE_COMPLETE_IF_LEASED: Final[TextClause] = text(
    waking(
        f"""
    UPDATE messages m
    SET state = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

MESSAGE_FAIL_IF_LEASED: Final[TextClause] = text(
    waking(
        f"""
    UPDATE messages m {retry_or_dead_letter(**CLIENT_FAIL, error=":error")}
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

MESSAGE_EXTEND_IF_LEASED: Final[TextClause] = text(
    f"""
    UPDATE messages m
    SET lease_expires_at = now() + make_interval(secs => CAST(:lease_seconds AS integer)),
        updated_at = now()
    WHERE m.queue_id = :queue_id AND m.id = :id AND {_LEASE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
)

# Any live message; a running one only with its current lease or with force.
MESSAGE_CANCEL_IF_LIVE: Final[TextClause] = text(
    waking(
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

# A dead letter (errored or canceled) starts a new life: attempts reset, no lease; it expires
# at :expires_at, else :ttl seconds after the requeue, else never (both NULL: cleared).
_REQUEUE_SET = """
    SET state = CASE WHEN CAST(:delay AS integer) > 0 THEN 'invisible'
                     ELSE 'pending' END::message_state,
        visible_at = now() + make_interval(secs => CAST(:delay AS integer)),
        attempts = 0, lease_id = NULL, lease_expires_at = NULL,
        expires_at = coalesce(CAST(:expires_at AS timestamptz),
                              now() + make_interval(secs => CAST(:ttl AS integer))),
        finished_at = NULL, updated_at = now()
"""

MESSAGE_REQUEUE_IF_DEAD_LETTER: Final[TextClause] = text(
    waking(
        f"""
    UPDATE messages m {_REQUEUE_SET}
    WHERE m.queue_id = :queue_id AND m.id = :id
      AND m.state = ANY(CAST(:from_states AS message_state[])) AND {CATALOGUE_IS_CURRENT}
    RETURNING {MESSAGE_COLUMNS_SQL}
    """
    )
)

# The dead letters a bulk requeue or delete acts on: up to :limit of the queue's messages in
# :states (which the caller keeps to dead-letter states), optionally only :ids, oldest finished
# first. Each is locked, and a row another statement holds is passed over (SKIP LOCKED), so two
# concurrent bulk operations never take the same message; a row changed since this statement's
# snapshot is re-read at its newest version and taken only if still in :states.
_DEAD_LETTERS_PICKED = """
        picked AS (
            SELECT id FROM messages
            WHERE queue_id = :queue_id AND state = ANY(CAST(:states AS message_state[]))
              AND (CAST(:ids AS text[]) IS NULL OR id = ANY(CAST(:ids AS text[])))
            ORDER BY finished_at
            LIMIT :limit
            FOR UPDATE SKIP LOCKED
        ),"""

# Bulk requeue of dead letters (see _DEAD_LETTERS_PICKED).
MESSAGES_REQUEUE_DEAD_LETTERS: Final[TextClause] = text(
    waking(
        before=_DEAD_LETTERS_PICKED,
        change=f"""
        UPDATE messages m {_REQUEUE_SET}
        FROM picked
        WHERE m.queue_id = :queue_id AND m.id = picked.id
          AND m.state = ANY(CAST(:states AS message_state[]))
        RETURNING m.state::text AS state
        """,
    )
)

# Bulk deletion of dead letters, the same ones a bulk requeue would take (_DEAD_LETTERS_PICKED).
# Dead letters hold no lease and no exclusive value, and none becomes ready: nobody to wake.
MESSAGES_DELETE_DEAD_LETTERS: Final[TextClause] = text(
    f"""
    WITH {_DEAD_LETTERS_PICKED.rstrip().rstrip(",")}
    DELETE FROM messages m
    USING picked
    WHERE m.queue_id = :queue_id AND m.id = picked.id
      AND m.state = ANY(CAST(:states AS message_state[]))
    RETURNING m.id
    """
)

# PATCH of a waiting message. Moving visible_at moves it between invisible and pending; in an
# exclusive queue the exclusive value follows the metadata, and so do the filter values.
MESSAGE_UPDATE_IF_WAITING: Final[TextClause] = text(
    waking(
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
        filter_value_2 = coalesce(CAST(:metadata AS jsonb), m.metadata)
                         ->> CAST(:filter_key_2 AS text),
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


# Batch acknowledgement: every item is its own guarded transition, all in one statement.
# ``items`` is a JSON array of {"id", "lease_id"} objects (see the enqueue statement for why a
# document rather than arrays); only items whose lease is current change. A lease_id that is
# not a UUID never reaches here (the service maps it to null, which matches nothing).
def _complete_many(returning: str) -> TextClause:
    """Complete the ``(id, lease_id)`` items of ``:items`` whose lease is current."""
    return text(
        waking(
            f"""
    UPDATE messages m
    SET state = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
    FROM json_to_recordset(CAST(:items AS json)) AS a(id text, lease_id uuid)
    WHERE m.queue_id = :queue_id AND m.id = a.id
      AND m.state = ANY(CAST(:from_states AS message_state[]))
      AND m.lease_id = a.lease_id AND m.lease_expires_at > now() AND {CATALOGUE_IS_CURRENT}
    RETURNING {returning}
    """
        )
    )


# held_seconds: how long the lease was held (from its grant to now), for the processing-time
# metric.
_ACKED = (
    "m.id, m.lease_id::text AS lease_id, m.state::text AS state,"
    " extract(epoch FROM now() - m.leased_at)::float8 AS held_seconds"
)

MESSAGES_COMPLETE_IF_LEASED: Final[TextClause] = _complete_many(_ACKED)

# The same, answering each completed message whole, as a single complete does: what concurrent
# one-message completes of a queue run when they are joined (app/store/coalesce.py).
MESSAGES_COMPLETE_IF_LEASED_WHOLE: Final[TextClause] = _complete_many(MESSAGE_COLUMNS_SQL)

MESSAGES_FAIL_IF_LEASED: Final[TextClause] = text(
    waking(
        f"""
    UPDATE messages m {retry_or_dead_letter(**CLIENT_FAIL, error="a.error")}
    FROM json_to_recordset(CAST(:items AS json)) AS a(id text, lease_id uuid, error text)
    WHERE m.queue_id = :queue_id AND m.id = a.id
      AND m.state = ANY(CAST(:from_states AS message_state[]))
      AND m.lease_id = a.lease_id AND m.lease_expires_at > now() AND {CATALOGUE_IS_CURRENT}
    RETURNING {_ACKED}
    """
    )
)

# Deleting a running message of an exclusive queue frees its value.
MESSAGE_DELETE: Final[TextClause] = text(
    waking(
        "DELETE FROM messages WHERE queue_id = :queue_id AND id = :id "
        "RETURNING id, state::text AS state"
    )
)

# A queue's purge: its messages in :states, whatever they are.
MESSAGES_PURGE_IN_STATES: Final[TextClause] = text(
    """
    DELETE FROM messages
    WHERE queue_id = :queue_id AND state = ANY(CAST(:states AS message_state[]))
    """
)
