"""Tokens and queues as a request looks them up, and the queue statements written as SQL (the
other namespace, token and queue statements are built on :mod:`app.store.tables`)."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

# With the catalogue version it was read at (a request's statements check it: CATALOGUE_IS_CURRENT).
QUEUE_GET: Final[TextClause] = text(
    """
    SELECT q.*, v.version AS catalogue_version
    FROM queues q CROSS JOIN catalogue_version v
    WHERE q.namespace = :namespace AND q.name = :name
    """
)

# An unexpired token by its secret's hash, with the catalogue version it was read at.
TOKEN_FIND_UNEXPIRED: Final[TextClause] = text(
    """
    SELECT t.id::text AS id, t.namespace, t.label, t.created_at, t.expires_at,
           v.version AS catalogue_version
    FROM tokens t CROSS JOIN catalogue_version v
    WHERE t.secret_hash = :secret_hash AND (t.expires_at IS NULL OR t.expires_at > now())
    """
)

# A new queue, if its namespace exists and the name is free (else no row).
QUEUE_INSERT_IF_NEW: Final[TextClause] = text(
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
