"""Connections for the store's read sides (dashboard insights, dashboard sessions): one place
that turns a lost or overloaded database into :class:`UnavailableError`; and what a connection
that reaches a standby instead of the primary means (:func:`reaches_a_standby`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.errors import UnavailableError

log = logging.getLogger("sundial.store")

READ_ONLY_SQL_TRANSACTION = "25006"
"""SQLSTATE of a write refused because the session is read-only: on a database that fails over,
the connection reaches a standby (a primary demoted under it, or a node that was one)."""


def reaches_a_standby(error: BaseException) -> bool:
    """Whether ``error`` (a driver error, or SQLAlchemy's wrapper of one) says the connection
    reaches a node that does not accept writes. Such a connection is as good as lost: it is
    discarded, and the next one (``target_session_attrs=read-write``) finds the primary."""
    orig = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    return getattr(orig, "sqlstate", None) == READ_ONLY_SQL_TRANSACTION


def discard_connections_to_standbys(engine: AsyncEngine) -> None:
    """Make ``engine`` treat a connection that reaches a standby as disconnected: SQLAlchemy
    then invalidates it and every connection pooled before it, as after a database restart."""

    @event.listens_for(engine.sync_engine, "handle_error")
    def _standby_is_a_disconnect(context: ExceptionContext) -> None:
        if reaches_a_standby(context.original_exception):
            context.is_disconnect = True


@asynccontextmanager
async def available(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection of ``engine``; a lost or overloaded database is UnavailableError."""
    try:
        async with engine.connect() as conn:
            yield conn
    except sa_exc.TimeoutError as error:
        raise UnavailableError("the server is busy; retry later") from error
    except (sa_exc.OperationalError, sa_exc.InterfaceError, OSError) as error:
        log.warning("database unavailable: %s", error)
        raise UnavailableError("the database is unavailable; retry later") from error
    except sa_exc.DBAPIError as error:
        if not reaches_a_standby(error):
            raise
        log.warning("database unavailable (a standby, not the primary): %s", error)
        raise UnavailableError("the database is unavailable; retry later") from error
