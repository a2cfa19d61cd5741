"""The pool after a disconnect found on the driver path (:mod:`app.store.paths`), renewed as
SQLAlchemy renews it after one found on its own path: the broken connection is discarded, and
every connection made before the failure is replaced at its next checkout, so a restarted
database (or a failover) costs one failed request rather than one per pooled connection.

SQLAlchemy does this with a private call (``Pool._invalidate``); here it is done through the
pool's public events. A ``connect`` listener notes when each connection was made. A disconnect on
a connection made since the pool was last renewed (an older one was condemned by that renewal
already) arms a one-shot ``checkout`` listener that raises :class:`sqlalchemy.exc.
InvalidatePoolError`, SQLAlchemy's own signal that the database went away: the pool then
replaces the connection being checked out and every connection made before it. The listener
removes itself as it fires, so a checkout costs nothing more while no renewal is pending.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

_CONNECTED_AT = "sundial.connected_at"
"""Key of a connection's ``info``: when it was made (``time.monotonic()``)."""


def _note_connected(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_CONNECTED_AT] = time.monotonic()


class _Renewal:
    """The renewal of one engine's pool: at most one pending at a time, as SQLAlchemy tries a
    checkout only twice before it gives up."""

    def __init__(self, engine: Engine) -> None:
        self.pending = False
        self.renewed_at = 0.0
        """When the pool was last renewed (``time.monotonic()``)."""
        engine_ref = weakref.ref(engine)

        def renew(
            dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
        ) -> None:
            if not self.pending:
                return
            self.pending, self.renewed_at = False, time.monotonic()
            target = engine_ref()
            if target is not None:
                # Removed (from the pool, and from any pool that dispose() made from it) before
                # raising, so that the checkout SQLAlchemy retries does not meet it again; the
                # raise ends the dispatch that runs it.
                event.remove(target, "checkout", renew)
            raise sa_exc.InvalidatePoolError("a pooled connection was found disconnected")

        self._engine = engine_ref
        self._renew = renew  # a function, not a bound method: the event registry keeps weak refs

    def arm(self, connected_at: float | None) -> None:
        """Renew the pool at its next checkout, unless a renewal is pending or one made since
        ``connected_at`` condemned the failed connection already."""
        if self.pending or (connected_at is not None and connected_at < self.renewed_at):
            return
        engine = self._engine()
        if engine is not None:
            self.pending = True
            event.listen(engine, "checkout", self._renew)


_renewals: weakref.WeakKeyDictionary[Engine, _Renewal] = weakref.WeakKeyDictionary()


def watch(engine: AsyncEngine) -> None:
    """Prepare the pool of ``engine`` for :func:`discard` (once per engine; the listeners carry
    over to a pool that ``dispose()`` makes)."""
    sync_engine = engine.sync_engine
    if sync_engine not in _renewals:
        _renewals[sync_engine] = _Renewal(sync_engine)
        event.listen(sync_engine, "connect", _note_connected)


def discard(engine: AsyncEngine, pooled: PoolProxiedConnection, error: BaseException) -> None:
    """Discard ``pooled``, found disconnected by ``error``, and have the pool of ``engine``
    renewed at its next checkout. Run through ``greenlet_spawn``: closing the connection is I/O
    that needs SQLAlchemy's greenlet."""
    connected_at: float | None = pooled.info.get(_CONNECTED_AT)
    pooled.invalidate(error)
    renewal = _renewals.get(engine.sync_engine)
    if renewal is not None:
        renewal.arm(connected_at)
