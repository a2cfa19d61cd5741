"""Dashboard sessions (``dashboard_sessions``, migration 0007; :mod:`app.store.sessions`): a row
per live session, keyed by the SHA-256 of its id, that expires after ``:idle_seconds`` unused."""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text


def _from_now(seconds_param: str) -> str:
    """SQL: the database's now plus the parameter ``seconds_param`` (in seconds)."""
    return f"now() + make_interval(secs => CAST(:{seconds_param} AS double precision))"


_EXPIRY = _from_now("idle_seconds")

# A new session that expires :idle_seconds from now; the expired rows go in the same statement,
# so the table holds only the sessions of the last :idle_seconds.
DASHBOARD_SESSION_START_AND_PRUNE_EXPIRED: Final[TextClause] = text(
    f"""
    WITH pruned AS (DELETE FROM dashboard_sessions WHERE expires_at <= now())
    INSERT INTO dashboard_sessions (id_hash, expires_at) VALUES (:id_hash, {_EXPIRY})
    """
)

# Whether the session is live (1, else 0), and if it is and its expiry is less than
# :renew_below seconds away, its expiry pushed back to :idle_seconds from now.
DASHBOARD_SESSION_TOUCH_IF_LIVE: Final[TextClause] = text(
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

# Ends the session whether it is live or expired (nothing happens if there is no row).
DASHBOARD_SESSION_END: Final[TextClause] = text(
    "DELETE FROM dashboard_sessions WHERE id_hash = :id_hash"
)
