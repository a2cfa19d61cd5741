"""Connections for the store's read sides (dashboard insights, dashboard sessions): one place
that turns a lost or overloaded database into :class:`UnavailableError`; and what a connection
that reaches a standby instead of the primary means (:func:`reaches_a_standby`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry

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


UNREPLICATED_COMMIT = "canceling wait for synchronous replication"
"""How PostgreSQL's warning begins when a commit stops waiting for the synchronous standby
because its statement was cancelled (``pg_cancel_backend``, a ``statement_timeout`` set on the
role or database): the transaction has committed on the primary, but may not be on the standby,
and PostgreSQL reports it as a success."""

_WATCH = "sundial.replication_watch"


class ReplicationWatch:
    """Hears the notices of one connection and remembers an unreplicated commit."""

    __slots__ = ("unreplicated",)

    def __init__(self) -> None:
        self.unreplicated = False

    def __call__(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        if (diagnostic.message_primary or "").startswith(UNREPLICATED_COMMIT):
            self.unreplicated = True


def replication_watch(info: dict[Any, Any]) -> ReplicationWatch | None:
    """The watch of a pooled connection (its ``info``), set by :func:`prepare_for_failover`,
    cleared for a new use of the connection (a use that failed may have left it set)."""
    watch: ReplicationWatch | None = info.get(_WATCH)
    if watch is not None:
        watch.unreplicated = False
    return watch


def prepare_for_failover(engine: AsyncEngine) -> None:
    """What ``engine`` needs on a database that fails over:

    - a connection that reaches a standby counts as disconnected: SQLAlchemy then invalidates it
      and every connection pooled before it, as after a database restart;
    - every connection gets a :class:`ReplicationWatch`, so that the store never acknowledges a
      change whose commit was cut short before its standby confirmed it.
    """

    @event.listens_for(engine.sync_engine, "handle_error")
    def _standby_is_a_disconnect(context: ExceptionContext) -> None:
        if reaches_a_standby(context.original_exception):
            context.is_disconnect = True

    @event.listens_for(engine.sync_engine, "connect")
    def _watch_replication(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        watch = ReplicationWatch()
        dbapi_connection.driver_connection.add_notice_handler(watch)
        record.info[_WATCH] = watch


@asynccontextmanager
async def available(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection of ``engine``; a lost or overloaded database is UnavailableError."""
    try:
        async with engine.connect() as conn:
            yield conn
    except sa_exc.TimeoutError as error:
        raise UnavailableError("the server is busy; retry later") from error
    except (sa_exc.DBAPIError, OSError) as error:
        # Lost, or a disconnect (a connection that reached a standby: prepare_for_failover).
        lost = not isinstance(error, sa_exc.DBAPIError) or error.connection_invalidated
        if not (lost or isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError)):
            raise
        log.warning("database unavailable: %s", error)
        raise UnavailableError("the database is unavailable; retry later") from error
