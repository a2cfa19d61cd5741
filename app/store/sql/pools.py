"""Pools (docs/scaling.md): registering a database as a pool, and the catalogue's map of which
pool holds each namespace."""

from __future__ import annotations

import sqlalchemy as sa

QUEUE_IDS_PER_POOL = 2**32
"""The size of each pool's range of queue ids: pool number ``n`` numbers its queues from
``n * 2^32 + 1`` (``default``, number 0, from 1 as before pools), so that a queue id names one
queue across every pool and still fits a JavaScript number."""

POOL_IDENTITY = sa.text("SELECT name, number FROM pool_identity")

POOL_IDENTITY_INSERT = sa.text(
    "INSERT INTO pool_identity (name, number) VALUES (:name, :number) ON CONFLICT DO NOTHING"
)

# The catalogue numbers pools in the order they are first registered (default is 0). The lock
# keeps two registrations at once from taking the same number; it is held for one statement's
# transaction, at a server's start.
POOLS_LOCK = sa.text("LOCK TABLE pools IN SHARE ROW EXCLUSIVE MODE")

POOL_NUMBER_ASSIGN = sa.text(
    """
    INSERT INTO pools (name, number)
    SELECT :name, CASE WHEN :name = 'default' THEN 0
                       ELSE (SELECT coalesce(max(number), 0) + 1 FROM pools) END
    ON CONFLICT (name) DO NOTHING
    """
)

POOL_NUMBER = sa.text("SELECT number FROM pools WHERE name = :name")

POOLS_REGISTERED = sa.text("SELECT name, number FROM pools ORDER BY number")

QUEUE_IDS_OUTSIDE = sa.text("SELECT count(*) FROM queues WHERE id NOT BETWEEN :low AND :high")

QUEUE_ID_MAX = sa.text("SELECT coalesce(max(id), 0) FROM queues")

NAMESPACE_POOL = sa.text("SELECT pool FROM namespace_pools WHERE namespace = :namespace")

NAMESPACE_POOLS = sa.text("SELECT namespace, pool FROM namespace_pools ORDER BY namespace")

# A name is taken in the catalogue before the namespace is made on its pool; an entry whose
# namespace the pool does not have (a creation cut short) is taken over by the next creation.
NAMESPACE_POOL_CLAIM = sa.text(
    """
    INSERT INTO namespace_pools (namespace, pool) VALUES (:namespace, :pool)
    ON CONFLICT (namespace) DO NOTHING
    RETURNING pool
    """
)

NAMESPACE_POOL_RECLAIM = sa.text(
    """
    UPDATE namespace_pools SET pool = :pool, created_at = now()
    WHERE namespace = :namespace AND pool = :was
    RETURNING pool
    """
)

NAMESPACE_POOL_FORGET = sa.text(
    "DELETE FROM namespace_pools WHERE namespace = :namespace AND pool = :pool"
)

# How loaded a pool is, for placing a namespace: the messages waiting in it (pending or delayed),
# from the kept counts, never a scan of messages.
POOL_WAITING_MESSAGES = sa.text(
    """
    SELECT coalesce(sum(n), 0)::bigint FROM (
        SELECT n FROM queue_state_counts WHERE state IN ('pending', 'invisible')
        UNION ALL
        SELECT delta FROM queue_state_count_deltas WHERE state IN ('pending', 'invisible')
    ) AS kept
    """
)
