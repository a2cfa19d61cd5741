"""Lease by id (``POST …/messages/{id}/lease``): the claim's lease on one message the consumer
names, and, when it leased nothing, why.

The lease is the claim's own (:data:`app.store.sql.claim.LEASE_GRANT`: ``attempts + 1``, a fresh
``lease_id``, the expiry from the request's ``lease_seconds``, else the message's, else the
queue's), so a message leased by id answers exactly as a dequeued one. Its sources are the
claim's (:data:`app.core.states.CLAIM`, which ``Event.LEASE_BY_ID`` shares): a pending message,
or an invisible one whose ``visible_at`` has passed, that has not expired.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.core.states import CLAIM
from app.store.sql.claim import LEASE_GRANT, NOT_RUNNING, ready_now


# The message, locked (FOR UPDATE: a claim that holds it is waited for, and the conditions are
# then checked again on its newest version, so one leased meanwhile is passed over: a message is
# never leased twice), if it is ready now. An exclusive queue adds the claim's probe: no message
# of its value is running. Two messages of one value leased at once can both pass the probe; the
# partial unique index messages_running_exclusive_uidx then refuses the second (unique_violation,
# which the store answers as "its value is running"): the index is the guarantee.
def _lease_by_id(exclusive: bool) -> TextClause:
    probe = NOT_RUNNING if exclusive else ""
    return text(
        f"""
WITH picked AS (
    SELECT c.id, 0 AS scanned FROM messages c
    WHERE c.queue_id = :queue_id AND c.id = :id
          AND {ready_now("c")}
          {probe}
    FOR UPDATE OF c
)
{LEASE_GRANT}"""
    )


MESSAGE_LEASE_IF_READY: Final[TextClause] = _lease_by_id(exclusive=False)
MESSAGE_LEASE_IF_READY_EXCLUSIVE: Final[TextClause] = _lease_by_id(exclusive=True)

# Why a lease by id leased nothing: the message's state, whether it is due and whether it has
# expired (by the database's clock), and whether another message of its exclusive value runs
# (never, in a simple queue: its messages have no exclusive value). No row: no such message.
MESSAGE_LEASE_REFUSAL: Final[TextClause] = text(
    f"""
    SELECT m.state::text AS state, m.exclusive_value, m.visible_at <= now() AS due,
           coalesce(m.expires_at <= now(), false) AS expired,
           EXISTS (SELECT 1 FROM messages r
                   WHERE r.queue_id = m.queue_id AND r.state = '{CLAIM.leased}'
                     AND r.exclusive_value = m.exclusive_value AND r.id <> m.id) AS value_running
    FROM messages m WHERE m.queue_id = :queue_id AND m.id = :id
    """
)
