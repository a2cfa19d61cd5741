"""When a long-polling consumer should look again although nothing notified it: the moment the
next delayed message of its queue becomes visible (the claim's ``due`` source takes such a
message at once, before the scheduler's promotion would notify anyone)."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

NEXT_DUE_SCAN: Final = 100
"""How many of the earliest delayed messages, of every queue, one look reads at most."""

# Seconds until the queue's next invisible message becomes visible (negative: already due),
# reading at most the first :scan entries of messages_invisible_idx (visible_at, every queue's
# delayed messages, earliest first), so a queue whose next message is far behind other queues'
# costs no more than one whose next is first. When none of them is the queue's, its next is no
# earlier than the last one read: that time is returned, to look again then. NULL when fewer
# than :scan were read and none is the queue's (it has no delayed message).
_NEXT_DUE = """
    SELECT extract(epoch FROM coalesce(
               min(visible_at) FILTER (WHERE {mine}),
               CASE WHEN count(*) = :scan THEN max(visible_at) END) - now()) AS seconds
    FROM (SELECT queue_id, visible_at FROM messages
          WHERE state = 'invisible'
          ORDER BY visible_at
          LIMIT :scan) AS soonest
    """
MESSAGES_NEXT_DUE: Final[TextClause] = text(_NEXT_DUE.format(mine="queue_id = :queue_id"))

# The same for a consumer of several queues (POST /v1/namespaces/{ns}/dequeue): the next
# delayed message of any of :queue_ids.
MESSAGES_NEXT_DUE_ANY: Final[TextClause] = text(
    _NEXT_DUE.format(mine="queue_id = ANY(CAST(:queue_ids AS bigint[]))")
)
