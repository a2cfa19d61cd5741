"""The scheduler's leadership on PostgreSQL: the leader holds a session-level advisory lock on its
own connection, a follower fences a leader whose session has stopped working, and every
contender records its heartbeat in ``scheduler_nodes`` (the metrics count the leaders there).
The statements are :mod:`app.store.sql.leadership`."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.sql.leadership import LEADER_FENCE, LEADER_TRY_LOCK, SCHEDULER_NODE_HEARTBEAT

LEADER_LOCK_KEY = 0x53756E6469616C  # "Sundial" in ASCII: the advisory lock of the leader
FENCE_WAIT_MS = 2000  # how long a follower waits for a fenced leader's session to end


async def try_lead(conn: AsyncConnection) -> bool:
    """Take the leader lock on ``conn`` if no other session holds it."""
    return bool((await conn.execute(LEADER_TRY_LOCK, {"key": LEADER_LOCK_KEY})).scalar())


async def fence_stalled_leader(
    conn: AsyncConnection, stale_seconds: float
) -> list[tuple[int, bool]]:
    """Terminate the session holding the leader lock if it has been idle for over
    ``stale_seconds``; the sessions found, each with whether it ended (committed)."""
    rows = (
        await conn.execute(
            LEADER_FENCE,
            {
                "key_high": LEADER_LOCK_KEY >> 32,
                "key_low": LEADER_LOCK_KEY & 0xFFFFFFFF,
                "stale_seconds": stale_seconds,
                "wait_ms": FENCE_WAIT_MS,
            },
        )
    ).all()
    await conn.commit()
    return [(int(pid), bool(terminated)) for pid, terminated in rows]


async def heartbeat(conn: AsyncConnection, node_id: str, *, leader: bool) -> None:
    """Record that ``node_id`` is alive, and whether it leads (committed)."""
    await conn.execute(SCHEDULER_NODE_HEARTBEAT, {"node_id": node_id, "is_leader": leader})
    await conn.commit()
