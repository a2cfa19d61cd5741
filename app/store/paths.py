"""The store's two ways to PostgreSQL, shared by every part of :class:`PostgresStore`:

- the SQLAlchemy path (:meth:`StorePaths._transaction`): an :class:`AsyncConnection` whose
  every statement is its own transaction; most statements run here;
- the driver path (:meth:`StorePaths._driver`): the psycopg connection of a pooled connection,
  for the hot statements (enqueue, the claim, batch ack and every single-message transition),
  compiled once at import by SQLAlchemy's own psycopg dialect (:func:`driver_sql`).

Both translate driver errors into the core's (:mod:`app.store.errors`), refuse to acknowledge a
commit its synchronous standby did not confirm, and treat a connection that reaches a standby as
lost (:mod:`app.store.connections`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, LiteralString

import psycopg
import sqlalchemy as sa
from psycopg.rows import AsyncRowFactory, namedtuple_row
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from app.core import catalogue
from app.core.errors import CatalogueChangedError
from app.core.models import DEFAULT_POOL
from app.store import renewal
from app.store.connections import reaches_a_standby, replication_watch
from app.store.errors import is_catalogue_refusal, raise_translated, refuse_unreplicated
from app.store.lookups import LookupCache
from app.store.rows import guard_params
from app.store.sql.guards import CATALOGUE_CHECK

_PSYCOPG = PGDialect_psycopg()  # type: ignore[no-untyped-call]


def driver_sql(statement: sa.TextClause) -> LiteralString:
    """``statement`` as SQLAlchemy's psycopg dialect sends it (``%(name)s`` placeholders),
    compiled once, for the statements the store runs on the driver connection itself."""
    # A constant of app.store.sql, compiled: no caller input ever reaches this string.
    return statement.compile(dialect=_PSYCOPG).string


async def _return_to_pool(
    pooled: PoolProxiedConnection, driver: psycopg.AsyncConnection[Any]
) -> None:
    """Put a hot-path connection back: out of autocommit, as SQLAlchemy expects a pooled
    connection, then into the pool (SQLAlchemy's reset on return). One that cannot be restored
    (interrupted mid-statement, gone) is discarded instead. Neither step waits for the server on
    a healthy connection, so a cancellation cannot cut them short."""
    if not (driver.broken or driver.closed):
        try:
            await driver.set_autocommit(False)
        except psycopg.Error:
            await greenlet_spawn(pooled.invalidate)
    await greenlet_spawn(pooled.close)


class StorePaths:
    """The engine, the lookups a process has read, and the two paths to the database."""

    def __init__(
        self, engine: AsyncEngine, lookup_cache_seconds: float = 0.0, pool: str = DEFAULT_POOL
    ) -> None:
        self.engine = engine
        self.pool = pool
        """The pool this database is (docs/scaling.md): what its queues and namespaces say."""
        self.lookups = LookupCache(lookup_cache_seconds)
        """Tokens and queues recently read (see :mod:`app.store.lookups`)."""
        # Every store call is one self-contained statement (the second statement of enqueue is
        # a read), so each runs in autocommit: its own durable transaction, without the BEGIN
        # and COMMIT round trips a transaction block would add.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        renewal.watch(engine)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection whose every statement is its own transaction, with driver errors
        translated into the core's."""
        try:
            async with self._autocommit.connect() as conn:
                watch = replication_watch(conn.info)
                view = catalogue.unchecked_view()
                if view is not None:
                    # This path's statements do not carry the catalogue guard: check it first.
                    guard = guard_params(view.version, view.valid_until)
                    await conn.execute(CATALOGUE_CHECK, guard)
                    view.checked = True
                yield conn
                refuse_unreplicated(watch)
        except (sa_exc.TimeoutError, sa_exc.DBAPIError, OSError) as error:
            self._raise_catalogue_changed(error)
            raise_translated(error)

    @asynccontextmanager
    async def _driver(
        self, *, pipelined: bool = False, confirm: bool = True
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The psycopg connection of a pooled connection, in autocommit, for the hot path.

        Enqueue, dequeue, batch ack and every single-message transition (complete, fail,
        extend, cancel, requeue, update) run their statements on the driver connection that
        SQLAlchemy pools, skipping its execution layer (statement cache lookup, result
        metadata, the greenlet hop): about a third of the CPU of a one-message enqueue. The SQL
        is the same (:func:`driver_sql`). The connection is checked out of the engine's pool
        directly (no :class:`AsyncConnection` around it, whose setup and teardown cost as much
        CPU as a statement) and put in autocommit for the block, then back. Errors are
        translated as on the SQLAlchemy path, and a connection found broken is handled as
        SQLAlchemy handles a disconnect: it is discarded and every connection pooled before it
        replaced (:mod:`app.store.renewal`), so a restarted database costs one failed request,
        not one per pooled connection. A connection that reaches a standby counts as broken, and
        a commit its synchronous standby did not confirm is not acknowledged
        (:mod:`app.store.connections`). ``pipelined``: the block runs a pipeline, and an error
        replaces its connection (see the comment below). ``confirm``: the block's statements
        carry the catalogue guard, so their success confirms the request's lookups; False for
        a statement without it, which must leave them to the request's own statements.
        """
        try:
            pooled = await self.engine.raw_connection()
        except (sa_exc.TimeoutError, psycopg.Error, OSError) as error:
            raise_translated(error)
        driver: psycopg.AsyncConnection[Any] = pooled.driver_connection  # type: ignore[assignment]
        watch = replication_watch(pooled.info)
        try:
            await driver.set_autocommit(True)
            yield driver
            refuse_unreplicated(watch)
            # Every statement of this path carries the catalogue guard (unless ``confirm`` says
            # otherwise), and it passed.
            view = catalogue.current_view() if confirm else None
            if view is not None and view.version is not None:
                view.checked = True
        except psycopg.Error as error:
            broken = driver.broken or driver.closed or reaches_a_standby(error)
            if pipelined and not broken:
                # psycopg (3.3) counts the statements of a pipeline that an error aborted as
                # prepared when it sent their PREPARE in it, though the server prepared none of
                # them; on this connection they would then fail ("prepared statement _pg3_N
                # does not exist") every time they ran. Only this connection is replaced.
                await greenlet_spawn(pooled.invalidate, error)
            self._raise_catalogue_changed(error)
            if broken:
                await greenlet_spawn(renewal.discard, self.engine, pooled, error)
            raise_translated(error, connection_lost=broken)
        finally:
            await _return_to_pool(pooled, driver)

    async def _driver_rows(
        self,
        statement: LiteralString,
        params: Mapping[str, Any],
        row_factory: AsyncRowFactory[Any] = namedtuple_row,
    ) -> list[Any]:
        """Run one hot statement; its rows (named tuples unless ``row_factory`` says)."""
        async with self._driver() as driver:
            cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=row_factory)
            await cursor.execute(statement, params)
            return await cursor.fetchall() if cursor.description else []

    async def _driver_rows_together(
        self, statements: Sequence[tuple[LiteralString, Mapping[str, Any]]]
    ) -> list[list[Any]]:
        """Run hot statements as one transaction in one round trip; each one's rows.

        They go out together in pipeline mode, followed by one Sync. On a connection in
        autocommit, PostgreSQL runs everything before a Sync as one implicit transaction,
        committed at the Sync or rolled back whole when a statement fails. (psycopg's
        ``transaction()`` would add a BEGIN, a COMMIT and syncs of its own around them: about
        twice the client CPU for the same effect.) A single statement runs as
        :meth:`_driver_rows` runs it, without the pipeline's own cost.
        """
        if len(statements) == 1:
            return [await self._driver_rows(*statements[0])]
        cursors: list[psycopg.AsyncCursor[Any]] = []
        async with self._driver(pipelined=True) as driver:
            async with driver.pipeline():
                for statement, params in statements:
                    cursor = driver.cursor(row_factory=namedtuple_row)
                    await cursor.execute(statement, params)
                    cursors.append(cursor)
            return [await cursor.fetchall() for cursor in cursors]

    def _raise_catalogue_changed(self, error: Exception) -> None:
        """Raise :class:`CatalogueChangedError` if ``error`` is the catalogue guard's refusal,
        forgetting what this process had looked up: it is out of date."""
        if is_catalogue_refusal(error):
            self.lookups.forget_all()
            raise CatalogueChangedError() from error

    async def confirm_lookups(self) -> None:
        """Check the current request's lookups if none of its statements has yet (for answers
        made of lookups alone).

        Raises:
            CatalogueChangedError: they are out of date.
        """
        if catalogue.unchecked_view() is not None:
            async with self._transaction():
                pass
