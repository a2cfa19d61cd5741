"""Database errors as the core sees them, for both of the store's ways to PostgreSQL (the
SQLAlchemy path and the driver path, :mod:`app.store.paths`): a lost or overloaded database is
:class:`UnavailableError`, a refused value :class:`ValidationError`, a deleted queue
:class:`NotFoundError`, a rolled-back transaction :class:`TransientConflictError` (which
:func:`retry_transient` runs again); errors that are bugs pass through unchanged."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, ParamSpec, TypeVar

import psycopg
from psycopg import errors as pg_errors
from sqlalchemy import exc as sa_exc

from app.core.errors import NotFoundError, UnavailableError, ValidationError
from app.store.connections import ReplicationWatch

log = logging.getLogger("sundial.store")

CATALOGUE_CHANGED = "SD001"
"""SQLSTATE of :data:`app.store.sql.guards.CATALOGUE_IS_CURRENT`'s refusal (migration 0006)."""

TRANSIENT_RETRIES = 5
"""Attempts of a transaction that PostgreSQL rolled back for a deadlock or serialization
failure. Every store method is one transaction, all-or-nothing, so running it again is safe."""

P = ParamSpec("P")
R = TypeVar("R")


class TransientConflictError(UnavailableError):
    """PostgreSQL rolled the transaction back (deadlock, serialization failure); retry it."""


def is_catalogue_refusal(error: Exception) -> bool:
    """Whether ``error`` is the catalogue guard's refusal: the lookups a request relied on are
    out of date."""
    orig = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    return getattr(orig, "sqlstate", None) == CATALOGUE_CHANGED


def is_unique_violation(error: BaseException, constraint: str) -> bool:
    """Whether ``error`` is a unique violation of ``constraint``."""
    return isinstance(error, pg_errors.UniqueViolation) and error.diag.constraint_name == constraint


_REFUSED: dict[str, str] = {
    "22": "a value of the request cannot be stored",
    "22001": "a text value is longer than the database stores",
    "22003": "a number is outside the range the database stores",
    "22007": "a timestamp is outside the range the database stores",
    "22008": "a timestamp is outside the range the database stores",
    "22009": "a timestamp's time zone offset is outside the range the database stores",
    "22021": "a text value holds a character the database cannot store",
    "22P05": "a text value holds a character the database cannot store",
    "22P02": "a value is not in a form the database accepts",
    "54": "the request exceeds a database limit (too large, or nested too deeply)",
}
"""What a client is told when PostgreSQL refuses a value: by SQLSTATE, else by its class."""


def translate(error: Exception, *, connection_lost: bool = False) -> Exception:
    """The core's view of a database error, raised through SQLAlchemy (which wraps psycopg's
    errors one to one, keeping the original as ``orig``) or by psycopg on the driver path;
    errors that are bugs pass through unchanged. Failing to get a connection at all (the pool
    exhausted, the server unreachable) is the database being unavailable, or the server busy."""
    if isinstance(error, sa_exc.TimeoutError):
        # Every pooled connection is busy: the server is overloaded, not broken.
        log.warning("database pool exhausted: %s", error)
        return UnavailableError("the server is busy; retry later")
    if isinstance(error, OSError):
        log.warning("database unavailable: %s", error)
        return UnavailableError("the database is unavailable; retry later")
    orig = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        connection_lost = True
    sqlstate = str(getattr(orig, "sqlstate", "") or "")
    # Class 40, transaction rollback: deadlock_detected, serialization_failure, ...
    if sqlstate.startswith("40"):
        return TransientConflictError("the transaction conflicted with another; retry")
    if sqlstate == "23503":
        # foreign_key_violation: the queue (or namespace) was deleted while this request used it.
        return NotFoundError("the queue no longer exists")
    if sqlstate.startswith(("22", "54")):
        # A value PostgreSQL refused (data exception, class 22) or found beyond one of its
        # limits (class 54), which validation did not foresee: the statement failed, so nothing
        # changed, and the request is the client's to fix. Its text may quote stored values or
        # internals: it is logged, and the client gets a fixed one.
        log.warning("database refused a value (SQLSTATE %s): %s", sqlstate, orig)
        return ValidationError("request", _REFUSED.get(sqlstate) or _REFUSED[sqlstate[:2]])
    # A DataError raised by the driver itself (no SQLSTATE) is a value it could not convert,
    # typically one read back that Python cannot represent: the statement may have committed,
    # so it is no 400; it passes through as the bug it is (a logged 500 without its text).
    if connection_lost or isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        log.warning("database unavailable: %s", orig)
        return UnavailableError("the database is unavailable; retry later")
    return error


def raise_translated(error: Exception, *, connection_lost: bool = False) -> NoReturn:
    """Raise the core's view of ``error`` (see :func:`translate`), chained to it."""
    translated = translate(error, connection_lost=connection_lost)
    if translated is error:
        raise error
    raise translated from error


def refuse_unreplicated(watch: ReplicationWatch | None) -> None:
    """Refuse to acknowledge what a block did if one of its commits stopped waiting for the
    synchronous standby (:data:`app.store.connections.UNREPLICATED_COMMIT`): the change is on the
    primary, but a failover now could lose it, so its outcome is unknown to the client (503)."""
    if watch is not None and watch.unreplicated:
        log.warning("a commit was cancelled before the synchronous standby confirmed it")
        raise UnavailableError(
            "the change reached the primary but its standby did not confirm it; retry"
        )


def retry_transient(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Run a one-transaction store method again when PostgreSQL rolls it back for a deadlock
    or serialization failure (SQLSTATE class 40)."""

    @functools.wraps(method)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, TRANSIENT_RETRIES + 1):
            try:
                return await method(*args, **kwargs)
            except TransientConflictError:
                if attempt == TRANSIENT_RETRIES:
                    raise
                log.info("transaction conflict in %s, attempt %d", method.__name__, attempt)
        raise AssertionError("unreachable")

    return run
