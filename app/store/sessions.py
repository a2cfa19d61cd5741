"""Dashboard sessions in PostgreSQL (``dashboard_sessions``, migration 0007): what makes
signing out end a session everywhere.

The dashboard's encrypted cookie carries a random session id; the session is live while a row
for the id's SHA-256 exists and has not expired. Every worker process of every server on the
database reads the same rows, so a session ended through one of them is refused by all of them
from the next request on. A session unused for ``idle_seconds`` expires; its use renews it
(at most once a minute, so that pages and their live data do not write on every request).
Each sign-in deletes the expired rows, so the table holds only the sessions of the last
``idle_seconds``.
"""

from __future__ import annotations

import hashlib
import secrets
from contextlib import AbstractAsyncContextManager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.store.connections import available
from app.store.sql.sessions import (
    DASHBOARD_SESSION_END,
    DASHBOARD_SESSION_START_AND_PRUNE_EXPIRED,
    DASHBOARD_SESSION_TOUCH_IF_LIVE,
)

RENEW_AFTER_SECONDS = 60
"""A session's expiry is pushed back when it is used at least this long after the last time."""


def _hash(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


class DashboardSessions:
    """Starts, checks and ends dashboard sessions."""

    def __init__(self, engine: AsyncEngine, idle_seconds: int) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.idle_seconds = idle_seconds

    def _connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection in autocommit; a lost or overloaded database is UnavailableError."""
        return available(self._engine)

    async def start(self) -> str:
        """A new live session; returns its id (for the cookie, never stored as such)."""
        session_id = secrets.token_urlsafe(32)
        params = {"id_hash": _hash(session_id), "idle_seconds": self.idle_seconds}
        async with self._connect() as conn:
            await conn.execute(DASHBOARD_SESSION_START_AND_PRUNE_EXPIRED, params)
        return session_id

    async def touch(self, session_id: str) -> bool:
        """Whether ``session_id`` is live (and, if so, renew it when due)."""
        params = {
            "id_hash": _hash(session_id),
            "idle_seconds": self.idle_seconds,
            "renew_below": self.idle_seconds - RENEW_AFTER_SECONDS,
        }
        async with self._connect() as conn:
            live = (await conn.execute(DASHBOARD_SESSION_TOUCH_IF_LIVE, params)).scalar_one()
        return bool(live)

    async def end(self, session_id: str) -> None:
        """End ``session_id`` (nothing happens if it is not live)."""
        async with self._connect() as conn:
            await conn.execute(DASHBOARD_SESSION_END, {"id_hash": _hash(session_id)})
