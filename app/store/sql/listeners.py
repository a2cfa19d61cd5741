"""The wake-up of long-polling consumers: who listens for which queue (``queue_listeners``), and
the ``NOTIFY`` that a statement sends when it made messages ready."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

NOTIFY_CHANNEL: Final = "sundial_ready"
"""Channel that announces "queue N has new visible messages" to long-polling consumers."""


# NOTIFY only when a server process has consumers waiting on the queue: a NOTIFY holds a
# database-wide lock through its transaction's commit, which would serialise every enqueue.
SOMEONE_LISTENS = (
    "EXISTS (SELECT 1 FROM queue_listeners WHERE queue_id = CAST(:queue_id AS bigint))"
)


def waking(change: str, before: str = "") -> str:
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
          AND {SOMEONE_LISTENS}
    )
    SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) FROM wake) AS woken
    """


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
