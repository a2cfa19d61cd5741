"""The PostgreSQL store: runs the statements of :mod:`app.store.queries` and maps rows to
:mod:`app.core.models`. It decides nothing about the state machine; it passes the guards that
:mod:`app.core.states` gives and reports what changed.

Driver errors are translated once, here: a lost database becomes :class:`UnavailableError`.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, LiteralString, NoReturn, ParamSpec, TypeVar

import msgspec
import psycopg
import sqlalchemy as sa
from psycopg import errors as pg_errors
from psycopg.rows import dict_row, namedtuple_row
from sqlalchemy import RowMapping
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool, PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from app.core import catalogue
from app.core.errors import (
    CatalogueChangedError,
    ConflictError,
    NotFoundError,
    UnavailableError,
    ValidationError,
)
from app.core.models import (
    EnqueueOutcome,
    LeasedMessage,
    Message,
    MessageChanges,
    MessageFilter,
    MessagePage,
    Namespace,
    Queue,
    QueueConfig,
    Token,
)
from app.core.ports import GuardState, NewRow
from app.core.states import Event, State, allowed_from
from app.store import batches, queries
from app.store.connections import ReplicationWatch, reaches_a_standby, replication_watch
from app.store.lookups import LookupCache
from app.store.tables import namespaces, queues, tokens

log = logging.getLogger("sundial.store")

# How often a dequeue on an exclusive queue is retried after losing a race for an exclusive
# value (unique_violation on messages_running_exclusive_uidx).
EXCLUSIVE_CLAIM_RETRIES = 20

_json = msgspec.json.Encoder()


def _queue_from_row(row: RowMapping) -> Queue:
    return Queue(
        id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        config=QueueConfig(
            kind=row["kind"],
            exclusive_key=row["exclusive_key"],
            filter_key=row["filter_key"],
            lease_seconds=row["lease_seconds"],
            delay_seconds=row["delay_seconds"],
            max_attempts=row["max_attempts"],
            retry_delay_seconds=row["retry_delay_seconds"],
            retry_delay_max_seconds=row["retry_delay_max_seconds"],
            retention_seconds=row["retention_seconds"],
            enqueue_paused=row["enqueue_paused"],
            dequeue_paused=row["dequeue_paused"],
        ),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        catalogue_version=row.get("catalogue_version"),
    )


def _message_from_row(row: RowMapping | Mapping[str, Any]) -> Message:
    return Message(
        id=row["id"],
        state=State(row["state"]),
        priority=row["priority"],
        payload=row["payload"].encode(),
        metadata=row["metadata"],
        exclusive_value=row["exclusive_value"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        lease_id=row["lease_id"],
        lease_expires_at=row["lease_expires_at"],
        visible_at=row["visible_at"],
        expires_at=row["expires_at"],
        enqueued_at=row["enqueued_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        last_error=row["last_error"],
    )


def _guard_params(version: int | None, valid_until: datetime | None) -> dict[str, Any]:
    """The parameters of :data:`queries.CATALOGUE_IS_CURRENT`."""
    return {"catalogue_version": version, "valid_until": valid_until}


def _queue_guard(queue: Queue) -> dict[str, Any]:
    """The catalogue guard of a request's statement about ``queue``."""
    return _guard_params(*catalogue.guard(queue.catalogue_version))


def _queue_params(queue: Queue) -> dict[str, Any]:
    """Parameters every message statement takes from its queue's configuration, and the
    catalogue guard of the request (:data:`queries.CATALOGUE_IS_CURRENT`)."""
    config = queue.config
    return {
        **_queue_guard(queue),
        "queue_id": queue.id,
        "queue_max_attempts": config.max_attempts,
        "queue_lease": config.lease_seconds,
        "queue_retry_delay": config.retry_delay_seconds,
        "queue_retry_delay_max": config.retry_delay_max_seconds,
        # Finishing a running message of an exclusive queue frees its value: wake consumers.
        "frees_value": config.kind == "exclusive",
    }


CATALOGUE_CHANGED = "SD001"
"""SQLSTATE of :data:`queries.CATALOGUE_IS_CURRENT`'s refusal (migration 0006)."""


def _is_unique_violation(error: BaseException, constraint: str) -> bool:
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


def _translate(error: Exception, *, connection_lost: bool = False) -> Exception:
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


def _refuse_unreplicated(watch: ReplicationWatch | None) -> None:
    """Refuse to acknowledge what a block did if one of its commits stopped waiting for the
    synchronous standby (:data:`app.store.connections.UNREPLICATED_COMMIT`): the change is on the
    primary, but a failover now could lose it, so its outcome is unknown to the client (503)."""
    if watch is not None and watch.unreplicated:
        log.warning("a commit was cancelled before the synchronous standby confirmed it")
        raise UnavailableError(
            "the change reached the primary but its standby did not confirm it; retry"
        )


def _raise_translated(error: Exception, *, connection_lost: bool = False) -> NoReturn:
    """Raise the core's view of ``error`` (see :func:`_translate`), chained to it."""
    translated = _translate(error, connection_lost=connection_lost)
    if translated is error:
        raise error
    raise translated from error


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


_PSYCOPG = PGDialect_psycopg()  # type: ignore[no-untyped-call]


def driver_sql(statement: sa.TextClause) -> LiteralString:
    """``statement`` as SQLAlchemy's psycopg dialect sends it (``%(name)s`` placeholders),
    compiled once, for the statements the store runs on the driver connection itself."""
    # A constant of app.store.queries, compiled: no caller input ever reaches this string.
    return statement.compile(dialect=_PSYCOPG).string


# The hot path's statements (and every single-message transition), run through
# ``PostgresStore._driver``.
_ENQUEUE = driver_sql(queries.MESSAGES_ENQUEUE)
_ENQUEUE_ONE = driver_sql(queries.MESSAGE_ENQUEUE_ONE)
_STATES = driver_sql(queries.MESSAGES_STATES)
_COMPLETE_MANY = driver_sql(queries.MESSAGES_COMPLETE_MANY)
_FAIL_MANY = driver_sql(queries.MESSAGES_FAIL_MANY)
_COMPLETE = driver_sql(queries.MESSAGE_COMPLETE)
_FAIL = driver_sql(queries.MESSAGE_FAIL)
_EXTEND = driver_sql(queries.MESSAGE_EXTEND)
_CANCEL = driver_sql(queries.MESSAGE_CANCEL)
_REQUEUE = driver_sql(queries.MESSAGE_REQUEUE)
_UPDATE = driver_sql(queries.MESSAGE_UPDATE)


@functools.cache
def _claim_sql(count: int, *, exclusive: bool, keyed: bool, filtered: bool) -> LiteralString:
    """A claim statement as the driver runs it, compiled once per variant and count."""
    claim = queries.messages_dequeue(
        count=count, exclusive=exclusive, keyed=keyed, filtered=filtered
    )
    return driver_sql(claim)


def _encode_cursor(values: Sequence[int]) -> str:
    return base64.urlsafe_b64encode(_json.encode(list(values))).decode().rstrip("=")


def _decode_cursor(cursor: str, size: int) -> list[int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = msgspec.json.decode(base64.urlsafe_b64decode(padded), type=list[int])
    except (ValueError, msgspec.DecodeError):
        raise ValidationError("cursor", "is not a cursor this server issued") from None
    if len(values) != size:
        raise ValidationError("cursor", "does not belong to this ordering")
    return values


TRANSIENT_RETRIES = 5
"""Attempts of a transaction that PostgreSQL rolled back for a deadlock or serialization
failure. Every store method is one transaction, all-or-nothing, so running it again is safe."""

P = ParamSpec("P")
R = TypeVar("R")


class TransientConflictError(UnavailableError):
    """PostgreSQL rolled the transaction back (deadlock, serialization failure); retry it."""


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


def _invalidate_on_disconnect(
    pool: Pool, pooled: PoolProxiedConnection, error: BaseException
) -> None:
    """What SQLAlchemy does when a statement finds its connection gone: discard it, and mark
    every connection pooled before it stale (a restarted database broke them all), so each is
    replaced at its next checkout. Run through ``greenlet_spawn``: closing the broken
    connection is I/O that needs SQLAlchemy's greenlet."""
    pool._invalidate(pooled, error)
    if pooled.is_valid:
        pooled.invalidate(error)


def _enqueue_params(queue: Queue, rows: Sequence[NewRow]) -> tuple[LiteralString, dict[str, Any]]:
    """The enqueue statement for ``rows`` and its parameters: plain values for one message,
    one JSON document for a batch (the same statement otherwise)."""
    guard = _queue_guard(queue)
    if len(rows) == 1:
        [row] = rows
        return _ENQUEUE_ONE, {
            **guard,
            "queue_id": queue.id,
            "filter_key": queue.config.filter_key,
            "id": row.id,
            "priority": row.priority,
            "payload": row.payload.decode() if row.payload is not None else None,
            "metadata": _json.encode(row.metadata).decode(),
            "exclusive_value": row.exclusive_value,
            "max_attempts": row.max_attempts,
            "lease_seconds": row.lease_seconds,
            "delay": row.delay_seconds,
            "visible_at": row.visible_at,
            "ttl": row.ttl_seconds,
            "expires_at": row.expires_at,
        }
    return _ENQUEUE, {
        **guard,
        "queue_id": queue.id,
        "filter_key": queue.config.filter_key,
        "rows": batches.enqueue_rows(rows),
    }


class PostgresStore:
    """Implements :class:`app.core.ports.Store` on PostgreSQL through SQLAlchemy + psycopg."""

    def __init__(self, engine: AsyncEngine, lookup_cache_seconds: float = 0.0) -> None:
        self.engine = engine
        self.lookups = LookupCache(lookup_cache_seconds)
        """Tokens and queues recently read (see :mod:`app.store.lookups`)."""
        # Every store call is one self-contained statement (the second statement of enqueue is
        # a read), so each runs in autocommit: its own durable transaction, without the BEGIN
        # and COMMIT round trips a transaction block would add.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

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
                    guard = _guard_params(view.version, view.valid_until)
                    await conn.execute(queries.CATALOGUE_CHECK, guard)
                    view.checked = True
                yield conn
                _refuse_unreplicated(watch)
        except (sa_exc.TimeoutError, sa_exc.DBAPIError, OSError) as error:
            self._raise_catalogue_changed(error)
            _raise_translated(error)

    @asynccontextmanager
    async def _driver(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The psycopg connection of a pooled connection, in autocommit, for the hot path.

        Enqueue, dequeue, batch ack and every single-message transition (complete, fail,
        extend, cancel, requeue, update) run their statements on the driver connection that
        SQLAlchemy pools, skipping its execution layer (statement cache lookup, result
        metadata, the greenlet hop): about a third of the CPU of a one-message enqueue. The SQL
        is the same (:func:`driver_sql`). The connection is checked out of the engine's pool
        directly (no :class:`AsyncConnection` around it, whose setup and teardown cost as much
        CPU as a statement) and put in autocommit for the block, then back. Errors are
        translated as on the SQLAlchemy path, and a connection found broken is handled as
        SQLAlchemy handles a disconnect: it and every connection pooled before it are replaced,
        so a restarted database costs one failed request, not one per pooled connection. A
        connection that reaches a standby counts as broken, and a commit its synchronous standby
        did not confirm is not acknowledged (:mod:`app.store.connections`).
        """
        try:
            pooled = await self.engine.raw_connection()
        except (sa_exc.TimeoutError, psycopg.Error, OSError) as error:
            _raise_translated(error)
        driver: psycopg.AsyncConnection[Any] = pooled.driver_connection  # type: ignore[assignment]
        watch = replication_watch(pooled.info)
        try:
            await driver.set_autocommit(True)
            yield driver
            _refuse_unreplicated(watch)
            # Every statement of this path carries the catalogue guard, and it passed.
            view = catalogue.current_view()
            if view is not None and view.version is not None:
                view.checked = True
        except psycopg.Error as error:
            self._raise_catalogue_changed(error)
            broken = driver.broken or driver.closed or reaches_a_standby(error)
            if broken:
                await greenlet_spawn(
                    _invalidate_on_disconnect, self.engine.sync_engine.pool, pooled, error
                )
            _raise_translated(error, connection_lost=broken)
        finally:
            await _return_to_pool(pooled, driver)

    def _raise_catalogue_changed(self, error: Exception) -> None:
        """Raise :class:`CatalogueChangedError` if ``error`` is the catalogue guard's refusal,
        forgetting what this process had looked up: it is out of date."""
        orig = error.orig if isinstance(error, sa_exc.DBAPIError) else error
        if getattr(orig, "sqlstate", None) == CATALOGUE_CHANGED:
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

    async def _driver_rows(self, statement: LiteralString, params: Mapping[str, Any]) -> list[Any]:
        """Run one hot statement; its rows as named tuples."""
        async with self._driver() as driver:
            cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=namedtuple_row)
            await cursor.execute(statement, params)
            return await cursor.fetchall() if cursor.description else []

    # --- namespaces and tokens ------------------------------------------------------------------

    async def create_namespace(self, name: str, description: str) -> Namespace:
        """Insert a namespace; ConflictError when it exists."""
        stmt = (
            sa.dialects.postgresql.insert(namespaces)
            .values(name=name, description=description)
            .on_conflict_do_nothing()
            .returning(namespaces)
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise ConflictError(f"namespace {name!r} already exists", namespace=name)
        return Namespace(**row)

    async def list_namespaces(self) -> list[Namespace]:
        """All namespaces by name."""
        async with self._transaction() as conn:
            rows = await conn.execute(sa.select(namespaces).order_by(namespaces.c.name))
            return [Namespace(**row) for row in rows.mappings()]

    async def namespace_exists(self, name: str) -> bool:
        """Whether the namespace exists."""
        async with self._transaction() as conn:
            stmt = sa.select(sa.literal(1)).where(namespaces.c.name == name)
            return (await conn.execute(stmt)).first() is not None

    async def delete_namespace(self, name: str) -> bool:
        """Delete a namespace with its tokens, queues and messages."""
        self.lookups.forget_all()
        async with self._transaction() as conn:
            result = await conn.execute(sa.delete(namespaces).where(namespaces.c.name == name))
            return result.rowcount > 0

    async def insert_token(
        self,
        namespace: str,
        token_id: str,
        label: str,
        secret_hash: bytes,
        expires_at: datetime | None,
    ) -> Token:
        """Store a token (hashed); NotFoundError when the namespace does not exist."""
        stmt = (
            sa.insert(tokens)
            .from_select(
                ["id", "namespace", "label", "secret_hash", "expires_at"],
                sa.select(
                    sa.literal(token_id, sa.dialects.postgresql.UUID(as_uuid=False)),
                    namespaces.c.name,
                    sa.literal(label),
                    sa.literal(secret_hash, sa.LargeBinary),
                    sa.literal(expires_at, sa.DateTime(timezone=True)),
                ).where(namespaces.c.name == namespace),
            )
            .returning(*(c for c in tokens.c if c.name != "secret_hash"))
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        return Token(**row)

    async def list_tokens(self, namespace: str) -> list[Token]:
        """A namespace's tokens, oldest first, without secrets."""
        columns = [c for c in tokens.c if c.name != "secret_hash"]
        stmt = (
            sa.select(*columns)
            .where(tokens.c.namespace == namespace)
            .order_by(tokens.c.created_at, tokens.c.id)
        )
        async with self._transaction() as conn:
            return [Token(**row) for row in (await conn.execute(stmt)).mappings()]

    async def delete_token(self, namespace: str, token_id: str) -> bool:
        """Revoke a token at once."""
        stmt = sa.delete(tokens).where(tokens.c.namespace == namespace, tokens.c.id == token_id)
        try:
            async with self._transaction() as conn:
                return (await conn.execute(stmt)).rowcount > 0
        finally:
            self.lookups.forget_all()

    async def find_token(self, secret_hash: bytes) -> Token | None:
        """The unexpired token with this secret hash, if any."""
        view = catalogue.current_view()
        if view is not None and self.lookups.enabled:
            cached = self.lookups.token(secret_hash)
            if cached is not None:
                view.rely_on(self.lookups.version, fresh=False, valid_until=cached.expires_at)
                return cached
        async with self._transaction() as conn:
            params = {"secret_hash": secret_hash}
            row = (await conn.execute(queries.TOKEN_FIND, params)).mappings().first()
        if row is None:
            return None
        version = row["catalogue_version"]
        token = Token(**{key: value for key, value in row.items() if key != "catalogue_version"})
        if view is not None:
            view.rely_on(version, fresh=True, valid_until=token.expires_at)
            self.lookups.remember_token(secret_hash, token, version)
        return token

    # --- queues -----------------------------------------------------------------------------

    async def get_queue(self, namespace: str, name: str) -> Queue | None:
        """The queue, or None."""
        view = catalogue.current_view()
        if view is not None and self.lookups.enabled:
            cached = self.lookups.queue(namespace, name)
            if cached is not None and cached.catalogue_version is not None:
                view.rely_on(cached.catalogue_version, fresh=False)
                return cached
        async with self._transaction() as conn:
            row = (
                (await conn.execute(queries.QUEUE_GET, {"namespace": namespace, "name": name}))
                .mappings()
                .first()
            )
        if row is None:
            return None
        queue = _queue_from_row(row)
        if view is not None and queue.catalogue_version is not None:
            view.rely_on(queue.catalogue_version, fresh=True)
            self.lookups.remember_queue(queue)
        return queue

    async def insert_queue(self, namespace: str, name: str, config: QueueConfig) -> Queue | None:
        """Create a queue; None when it already exists. NotFoundError without the namespace."""
        params = {"namespace": namespace, "name": name, **dataclasses.asdict(config)}
        async with self._transaction() as conn:
            row = (await conn.execute(queries.QUEUE_INSERT, params)).mappings().first()
            if row is not None:
                return _queue_from_row(row)
            exists = await conn.execute(
                sa.select(sa.literal(1)).where(namespaces.c.name == namespace)
            )
            if exists.first() is None:
                raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
            return None

    async def update_queue(
        self, queue_id: int, changes: Mapping[str, Any], *, wake: bool = False
    ) -> Queue:
        """Apply validated changes to a queue's mutable settings; ``wake``: also tell its
        long-polling consumers to look again (it was just resumed), in the same statement, so
        that the change and the wake-up are one outcome."""
        self.lookups.forget_all()
        returned: list[Any] = [queues]
        if wake:  # delivered at the update's commit
            returned.append(
                sa.func.pg_notify(queries.NOTIFY_CHANNEL, sa.cast(queues.c.id, sa.Text))
            )
        stmt = (
            sa.update(queues)
            .where(queues.c.id == queue_id)
            .values(**changes, updated_at=sa.func.now())
            .returning(*returned)
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise NotFoundError("queue does not exist")
        return _queue_from_row(row)

    async def delete_queue(self, namespace: str, name: str) -> bool:
        """Delete a queue and its messages."""
        self.lookups.forget_all()
        async with self._transaction() as conn:
            result = await conn.execute(
                queries.QUEUE_DELETE, {"namespace": namespace, "name": name}
            )
            return result.first() is not None

    async def list_queues(self, namespace: str) -> list[Queue]:
        """A namespace's queues by name."""
        stmt = sa.select(queues).where(queues.c.namespace == namespace).order_by(queues.c.name)
        async with self._transaction() as conn:
            return [_queue_from_row(row) for row in (await conn.execute(stmt)).mappings()]

    async def queue_counts(self, queue_ids: Sequence[int]) -> dict[int, dict[State, int]]:
        """Messages per state for each queue (states with no message are absent)."""
        counts: dict[int, dict[State, int]] = {queue_id: {} for queue_id in queue_ids}
        async with self._transaction() as conn:
            rows = await conn.execute(queries.QUEUE_COUNTS, {"queue_ids": list(queue_ids)})
            for row in rows.mappings():
                counts[row["queue_id"]][State(row["state"])] = row["n"]
        return counts

    async def oldest_pending_age(self, queue_id: int) -> float | None:
        """Seconds the longest-waiting pending message has been visible, or None."""
        async with self._transaction() as conn:
            age = (
                await conn.execute(queries.QUEUE_OLDEST_PENDING_AGE, {"queue_id": queue_id})
            ).scalar()
        return float(age) if age is not None else None

    @retry_transient
    async def purge(self, queue_id: int, states: Sequence[State]) -> int:
        """Delete a queue's messages in the given states."""
        async with self._transaction() as conn:
            result = await conn.execute(
                queries.QUEUE_PURGE, {"queue_id": queue_id, "states": [str(s) for s in states]}
            )
            return result.rowcount

    # --- messages ---------------------------------------------------------------------------

    @retry_transient
    async def enqueue(self, queue: Queue, rows: Sequence[NewRow]) -> list[EnqueueOutcome]:
        """Insert new messages (ids unique within the batch); existing ids are reported.

        The statement reports the state of every id it found taken, except one taken by a
        producer that committed while it ran: that one is read afterwards. Should such an id be
        gone by then (deleted, purged or archived in between), there is nothing to report: it
        is enqueued again, and so reported truthfully as created (at most
        :data:`TRANSIENT_RETRIES` rounds, each its own all-or-nothing statement).
        """
        outcomes: dict[str, EnqueueOutcome] = {}
        pending = list(rows)
        async with self._driver() as driver:
            cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=namedtuple_row)
            for _ in range(TRANSIENT_RETRIES):
                await cursor.execute(*_enqueue_params(queue, pending))
                for row in await cursor.fetchall():
                    if row.id is not None:  # not the wake-up branch's row
                        outcomes[row.id] = EnqueueOutcome(row.id, State(row.state), row.created)
                unseen = [r.id for r in pending if r.id not in outcomes]
                if unseen:
                    await cursor.execute(_STATES, {"queue_id": queue.id, "ids": unseen})
                    for row in await cursor.fetchall():
                        outcomes[row.id] = EnqueueOutcome(row.id, State(row.state), False)
                pending = [r for r in pending if r.id not in outcomes]
                if not pending:
                    return [outcomes[r.id] for r in rows]
        raise UnavailableError("the queue's messages changed too fast to enqueue; retry")

    @retry_transient
    async def dequeue(
        self, queue: Queue, count: int, lease_seconds: int | None, metadata: Mapping[str, str]
    ) -> list[LeasedMessage]:
        """Lease up to ``count`` messages (fewer, or none, when fewer are ready)."""
        if queue.config.kind != "exclusive":
            rows = await self._driver_rows(*self._claim(queue, count, lease_seconds, metadata))
        else:
            rows = await self._claim_exclusive(queue, count, lease_seconds, metadata)
        ordered = sorted(rows, key=lambda r: (r.priority, r.seq))
        return [
            LeasedMessage(
                id=r.id,
                lease_id=r.lease_id,
                lease_expires_at=r.lease_expires_at,
                attempt=r.attempts,
                priority=r.priority,
                payload=r.payload.encode(),
                metadata=r.metadata,
                enqueued_at=r.enqueued_at,
            )
            for r in ordered
        ]

    @staticmethod
    def _claim(
        queue: Queue, count: int, lease_seconds: int | None, metadata: Mapping[str, str]
    ) -> tuple[LiteralString, dict[str, Any]]:
        """The claim statement for this queue and request, and its parameters."""
        key = queue.config.filter_key
        # A filter on the queue's filter_key takes the index of that key's values; the other
        # pairs, if any, are tested on the rows it reads.
        value = metadata.get(key) if key is not None else None
        keyed, filtered = value is not None, len(metadata) > (value is not None)
        params: dict[str, Any] = {
            **_queue_guard(queue),
            "queue_id": queue.id,
            "lease_override": lease_seconds,
            "queue_lease": queue.config.lease_seconds,
        }
        if keyed:
            params["filter_value"] = value
        if filtered:  # most claims have no filter: nothing to encode
            params["filter"] = _json.encode(metadata).decode()
        exclusive = queue.config.kind == "exclusive"
        return _claim_sql(count, exclusive=exclusive, keyed=keyed, filtered=filtered), params

    async def _claim_exclusive(
        self, queue: Queue, count: int, lease_seconds: int | None, metadata: Mapping[str, str]
    ) -> list[Any]:
        """Claim on an exclusive queue, in rounds until the batch is full or nothing is left.

        A round looks at a window of candidates and leases one message per free value in it;
        when the window was full (``scanned`` reached ``scan``), values beyond it may be free,
        so the next round claims the rest. Each round commits: its leases stand even if a later
        round fails, and they are returned.
        """
        leased: list[Any] = []
        while len(leased) < count:
            wanted = count - len(leased)
            claim = self._claim(queue, wanted, lease_seconds, metadata)
            try:
                rows = await self._claim_exclusive_round(queue, *claim)
            except UnavailableError:
                if not leased:
                    raise
                log.warning("exclusive claim round failed; returning %d leases", len(leased))
                break
            leased.extend(rows)
            if not rows or rows[0].scanned < queries.exclusive_scan(wanted):
                break  # nothing more to take, or every candidate was seen
        return leased

    async def _claim_exclusive_round(
        self, queue: Queue, statement: LiteralString, params: Mapping[str, Any]
    ) -> list[Any]:
        for attempt in range(EXCLUSIVE_CLAIM_RETRIES):
            try:
                return await self._driver_rows(statement, params)
            except pg_errors.UniqueViolation as error:
                # Lost a race for an exclusive value to another consumer: the unique index
                # refused the second lease, nothing was changed; claim again.
                if not _is_unique_violation(error, "messages_running_exclusive_uidx"):
                    raise
                log.debug("exclusive claim race on queue %s (attempt %d)", queue.id, attempt + 1)
        return []

    async def get_message(self, queue: Queue, message_id: str) -> Message | None:
        """One message of the queue, or None."""
        params = {**_queue_params(queue), "id": message_id}
        async with self._transaction() as conn:
            row = (await conn.execute(queries.MESSAGE_GET, params)).mappings().first()
        return _message_from_row(row) if row is not None else None

    async def guard_state(self, queue: Queue, message_id: str) -> GuardState | None:
        """The state and lease of a message, to explain why a guarded statement changed nothing."""
        return (await self.guard_states(queue, [message_id])).get(message_id)

    async def guard_states(self, queue: Queue, message_ids: Sequence[str]) -> dict[str, GuardState]:
        """:meth:`guard_state` for many messages in one query (absent ids are left out)."""
        params = {"queue_id": queue.id, "ids": list(message_ids)}
        async with self._transaction() as conn:
            rows = (await conn.execute(queries.MESSAGE_GUARD_STATES, params)).all()
        return {row.id: GuardState(State(row.state), row.lease_id, bool(row.live)) for row in rows}

    async def archived_completions(
        self, queue: Queue, items: Sequence[tuple[str, str]]
    ) -> dict[str, Message]:
        """The messages of ``items`` (id, lease_id) that history holds as completed with that
        lease, by id: what a repeated complete answers once the message has been archived."""
        if not items:
            return {}
        params = {
            "queue_id": queue.id,
            "ids": [message_id for message_id, _ in items],
            "lease_ids": [lease_id for _, lease_id in items],
        }
        async with self._transaction() as conn:
            result = await conn.execute(queries.MESSAGES_ARCHIVED_COMPLETED, params)
            rows = result.mappings().all()
        asked = set(items)
        return {
            row["id"]: _message_from_row(row)
            for row in rows
            if (row["id"], row["lease_id"]) in asked
        }

    @retry_transient
    async def _transition(
        self,
        statement: LiteralString,
        queue: Queue,
        message_id: str,
        event: Event,
        **params: Any,
    ) -> Message | None:
        """Run one guarded transition; None when the guard matched no row."""
        bound = {
            **_queue_params(queue),
            "id": message_id,
            "from_states": queries.from_states(event),
            **params,
        }
        async with self._driver() as driver:
            cursor = driver.cursor(row_factory=dict_row)
            await cursor.execute(statement, bound)
            row = await cursor.fetchone()
        return _message_from_row(row) if row is not None else None

    async def complete(self, queue: Queue, message_id: str, lease_id: str | None) -> Message | None:
        """running -> completed, if ``lease_id`` is the current lease."""
        return await self._transition(
            _COMPLETE, queue, message_id, Event.COMPLETE, lease_id=lease_id
        )

    async def fail(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        error: str | None,
        retry_delay_seconds: int | None,
    ) -> Message | None:
        """running -> pending/invisible/errored, if ``lease_id`` is the current lease."""
        return await self._transition(
            _FAIL,
            queue,
            message_id,
            Event.FAIL,
            lease_id=lease_id,
            error=error,
            retry_delay=retry_delay_seconds,
        )

    async def extend(
        self, queue: Queue, message_id: str, lease_id: str | None, lease_seconds: int
    ) -> Message | None:
        """Push the lease's expiry to now + ``lease_seconds``, if it is the current lease."""
        return await self._transition(
            _EXTEND,
            queue,
            message_id,
            Event.EXTEND,
            lease_id=lease_id,
            lease_seconds=lease_seconds,
        )

    async def cancel(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        force: bool,
        reason: str | None,
    ) -> Message | None:
        """live -> canceled (a running message needs its lease or force)."""
        return await self._transition(
            _CANCEL,
            queue,
            message_id,
            Event.CANCEL,
            lease_id=lease_id,
            force=force,
            reason=reason,
        )

    async def requeue(self, queue: Queue, message_id: str, delay_seconds: int) -> Message | None:
        """errored/canceled -> pending (or invisible for a delay), attempts reset."""
        return await self._transition(
            _REQUEUE, queue, message_id, Event.REQUEUE, delay=delay_seconds
        )

    async def update_message(
        self, queue: Queue, message_id: str, changes: MessageChanges
    ) -> Message | None:
        """Change a waiting (invisible or pending) message."""
        return await self._transition(
            _UPDATE,
            queue,
            message_id,
            Event.UPDATE,
            priority=changes.priority,
            payload=changes.payload.decode() if changes.payload is not None else None,
            metadata=_json.encode(changes.metadata).decode()
            if changes.metadata is not None
            else None,
            exclusive_key=queue.config.exclusive_key,
            filter_key=queue.config.filter_key,
            visible_at=changes.visible_at,
        )

    @retry_transient
    async def delete_message(self, queue: Queue, message_id: str) -> bool:
        """Remove a message in any state."""
        params = {**_queue_params(queue), "id": message_id}
        async with self._transaction() as conn:
            result = await conn.execute(queries.MESSAGE_DELETE, params)
            return result.first() is not None

    @retry_transient
    async def acknowledge(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
    ) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        """Complete every (id, lease_id) and fail every (id, lease_id, error) whose lease is
        current, all or nothing (one transaction; one statement when only one kind is given).
        Returns the (id, lease_id) pairs completed and those failed."""
        guard = _queue_params(queue)
        statements: list[tuple[LiteralString, dict[str, Any]]] = []
        if complete:
            items = batches.lease_items(complete)
            from_states = queries.from_states(Event.COMPLETE)
            statements.append(
                (_COMPLETE_MANY, {**guard, "items": items, "from_states": from_states})
            )
        if fail:
            items = batches.failed_items(fail)
            from_states = queries.from_states(Event.FAIL)
            params = {**guard, "items": items, "retry_delay": None, "from_states": from_states}
            statements.append((_FAIL_MANY, params))
        changed: list[set[tuple[str, str]]] = []
        if statements:
            async with self._driver() as driver:
                cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=namedtuple_row)
                both = driver.transaction() if len(statements) > 1 else contextlib.nullcontext()
                async with both:
                    for statement, params in statements:
                        await cursor.execute(statement, params)
                        changed.append({(r.id, r.lease_id) for r in await cursor.fetchall()})
        done = iter(changed)
        return (next(done) if complete else set()), (next(done) if fail else set())

    @retry_transient
    async def requeue_many(
        self, queue: Queue, states: Sequence[State], ids: Sequence[str] | None, limit: int
    ) -> int:
        """Requeue up to ``limit`` dead letters in ``states`` (optionally only ``ids``)."""
        allowed = set(allowed_from(Event.REQUEUE))
        params = {
            **_queue_params(queue),
            "states": [str(s) for s in states if str(s) in allowed],
            "ids": list(ids) if ids is not None else None,
            "limit": limit,
            "delay": 0,
        }
        async with self._transaction() as conn:
            result = await conn.execute(queries.MESSAGES_REQUEUE, params)
            return len(result.all())

    async def query(self, queue: Queue, spec: MessageFilter) -> MessagePage:
        """List messages by filter, newest first or lowest priority first, a page at a time."""
        conditions = [sa.text("m.queue_id = :queue_id")]
        params: dict[str, Any] = {**_queue_params(queue), "limit": spec.limit + 1}
        if spec.states:
            conditions.append(sa.text("m.state = ANY(CAST(:states AS message_state[]))"))
            params["states"] = [str(s) for s in spec.states]
        if spec.metadata:
            conditions.append(sa.text("m.metadata @> CAST(:filter AS jsonb)"))
            params["filter"] = _json.encode(spec.metadata).decode()
        if spec.priority_gte is not None:
            conditions.append(sa.text("m.priority >= :priority_gte"))
            params["priority_gte"] = spec.priority_gte
        if spec.priority_lt is not None:
            conditions.append(sa.text("m.priority < :priority_lt"))
            params["priority_lt"] = spec.priority_lt
        if spec.order == "priority":
            order = "m.priority, m.seq"
            if spec.cursor is not None:
                after_priority, after_seq = _decode_cursor(spec.cursor, 2)
                conditions.append(sa.text("(m.priority, m.seq) > (:after_priority, :after_seq)"))
                params.update(after_priority=after_priority, after_seq=after_seq)
        else:
            order = "m.seq DESC"
            if spec.cursor is not None:
                (before_seq,) = _decode_cursor(spec.cursor, 1)
                conditions.append(sa.text("m.seq < :before_seq"))
                params["before_seq"] = before_seq
        where = " AND ".join(str(c) for c in conditions)
        stmt = sa.text(
            f"SELECT {queries.MESSAGE_COLUMNS_SQL}, m.seq FROM messages m "
            f"WHERE {where} ORDER BY {order} LIMIT :limit"
        )
        async with self._transaction() as conn:
            rows = (await conn.execute(stmt, params)).mappings().all()
        next_cursor = None
        if len(rows) > spec.limit:
            rows = rows[: spec.limit]
            last = rows[-1]
            key = [last["priority"], last["seq"]] if spec.order == "priority" else [last["seq"]]
            next_cursor = _encode_cursor(key)
        return MessagePage([_message_from_row(row) for row in rows], next_cursor)
