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
from typing import Final

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.store.connections import available

RENEW_AFTER_SECONDS = 60
"""A session's expiry is pushed back when it is used at least this long after the last time."""


def _from_now(seconds_param: str) -> str:
    """SQL: the database's now plus the parameter ``seconds_param`` (in seconds)."""
    return f"now() + make_interval(secs => CAST(:{seconds_param} AS double precision))"


_EXPIRY = _from_now("idle_seconds")

START: Final[TextClause] = text(
    f"""
    WITH pruned AS (DELETE FROM dashboard_sessions WHERE expires_at <= now())
    INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES (:id_hash, {_EXPIRY})
    """
)

TOUCH: Final[TextClause] = text(
    f"""
    WITH live AS (
        SELECT id_hash, expires_at FROM dashboard_sessions
        WHERE id_hash = :id_hash AND expires_at > now()
    ),
    renewed AS (
        UPDATE dashboard_sessions AS s SET expires_at = {_EXPIRY}
        FROM live
        WHERE s.id_hash = live.id_hash
          AND live.expires_at < {_from_now("renew_below")}
    )
    SELECT count(*) FROM live
    """
)

END: Final[TextClause] = text("DELETE FROM dashboard_sessions WHERE id_hash = :id_hash")


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
            await conn.execute(START, params)
        return session_id

    async def touch(self, session_id: str) -> bool:
        """Whether ``session_id`` is live (and, if so, renew it when due)."""
        params = {
            "id_hash": _hash(session_id),
            "idle_seconds": self.idle_seconds,
            "renew_below": self.idle_seconds - RENEW_AFTER_SECONDS,
        }
        async with self._connect() as conn:
            live = (await conn.execute(TOUCH, params)).scalar_one()
        return bool(live)

    async def end(self, session_id: str) -> None:
        """End ``session_id`` (nothing happens if it is not live)."""
        async with self._connect() as conn:
            await conn.execute(END, {"id_hash": _hash(session_id)})
