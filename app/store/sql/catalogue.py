"""Tokens and queues as a request looks them up, and the queue statements written as SQL (the
other namespace, token and queue statements are built on :mod:`app.store.tables`)."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

# With the catalogue version it was read at (a request's statements check it: CATALOGUE_IS_CURRENT)
# and its namespace's state here (only an active namespace is served: migration 0012).
QUEUE_GET: Final[TextClause] = text(
    """
    SELECT q.*, v.version AS catalogue_version, n.state AS namespace_state
    FROM queues q
    JOIN namespaces n ON n.name = q.namespace
    CROSS JOIN catalogue_version v
    WHERE q.namespace = :namespace AND q.name = :name
    """
)

# An unexpired bearer token by its secret's hash, with the catalogue version it was read at and
# its namespace's state here. An SQS access key's secret signs requests and is never a bearer
# token, whatever it looks like.
TOKEN_FIND_UNEXPIRED: Final[TextClause] = text(
    """
    SELECT t.id::text AS id, t.namespace, t.label, t.created_at, t.expires_at, t.access_key_id,
           t.read_rate, t.write_rate, v.version AS catalogue_version, n.state AS namespace_state
    FROM tokens t
    JOIN namespaces n ON n.name = t.namespace
    CROSS JOIN catalogue_version v
    WHERE t.secret_hash = :secret_hash AND t.access_key_id IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > now())
    """
)

# An unexpired SQS access key by its id, with its sealed secret, the catalogue version it was
# read at and its namespace's state here.
ACCESS_KEY_FIND_UNEXPIRED: Final[TextClause] = text(
    """
    SELECT t.id::text AS id, t.namespace, t.label, t.created_at, t.expires_at, t.access_key_id,
           t.read_rate, t.write_rate, t.sealed_secret, v.version AS catalogue_version,
           n.state AS namespace_state
    FROM tokens t
    JOIN namespaces n ON n.name = t.namespace
    CROSS JOIN catalogue_version v
    WHERE t.access_key_id = :access_key_id AND (t.expires_at IS NULL OR t.expires_at > now())
    """
)

# A namespace's state here: active, incoming, frozen, moved; no row when it is not here.
NAMESPACE_STATE: Final[TextClause] = text("SELECT state FROM namespaces WHERE name = :namespace")

# What changes a namespace's tokens and queues applies only while it is active here: once a move
# has frozen it, such a change would not reach the namespace's new pool.
NAMESPACE_IS_ACTIVE = "EXISTS (SELECT 1 FROM namespaces WHERE name = {} AND state = 'active')"

# A new queue, if its namespace exists and the name is free (else no row).
QUEUE_INSERT_IF_NEW: Final[TextClause] = text(
    """
    INSERT INTO queues (namespace, name, kind, exclusive_key, filter_key, filter_key_2, ordering,
                        lease_seconds, delay_seconds, max_attempts, retry_delay_seconds,
                        retry_delay_max_seconds, retention_seconds, enqueue_paused,
                        dequeue_paused, dead_letter_queue, sqs)
    SELECT :namespace, :name, :kind, :exclusive_key, :filter_key, :filter_key_2, :ordering,
           :lease_seconds, :delay_seconds, :max_attempts, :retry_delay_seconds,
           :retry_delay_max_seconds, :retention_seconds, :enqueue_paused, :dequeue_paused,
           :dead_letter_queue, CAST(:sqs AS jsonb)
    WHERE EXISTS (SELECT 1 FROM namespaces WHERE name = :namespace AND state = 'active')
    ON CONFLICT (namespace, name) DO NOTHING
    RETURNING *
    """
)

QUEUE_DELETE: Final[TextClause] = text(
    f"""
    DELETE FROM queues WHERE namespace = :namespace AND name = :name
      AND {NAMESPACE_IS_ACTIVE.format(":namespace")}
    RETURNING id
    """
)
