"""The catalogue's part of the store: namespaces, tokens and queues (create, read, change,
delete), with the lookups a request makes before its work (:meth:`AdminStore.find_token`,
:meth:`AdminStore.get_queue`, served from :mod:`app.store.lookups` when they can be), and a
queue's counts and purge."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core import catalogue
from app.core.errors import ConflictError, NamespaceMovingError, NotFoundError, ValidationError
from app.core.models import AccessKey, Namespace, Queue, QueueConfig, Token
from app.core.states import State
from app.store.errors import retry_transient
from app.store.paths import StorePaths, driver_sql
from app.store.rows import queue_from_row
from app.store.sql import catalogue as catalogue_sql
from app.store.sql import pools as pools_sql
from app.store.sql import reads, transitions
from app.store.sql import token_limits as token_limits_sql
from app.store.sql.listeners import NOTIFY_CHANNEL
from app.store.tables import namespaces, queues, tokens

_NAMESPACE_COLUMNS = (namespaces.c.name, namespaces.c.description, namespaces.c.created_at)
_TOKEN_FIELDS = (
    "id",
    "namespace",
    "label",
    "created_at",
    "expires_at",
    "access_key_id",
    "read_rate",
    "write_rate",
)
_SECRET_COLUMNS = frozenset({"secret_hash", "sealed_secret"})
_TOKEN_RATE_HIT = driver_sql(token_limits_sql.TOKEN_RATE_HIT)


class AdminStore(StorePaths):
    """Namespaces, tokens and queues."""

    # --- namespaces and tokens ------------------------------------------------------------------

    async def create_namespace(
        self, name: str, description: str, pool: str | None = None
    ) -> Namespace:
        """Insert a namespace; ConflictError when it exists, ValidationError when ``pool`` is
        another pool's name."""
        if pool is not None and pool != self.pool:
            raise ValidationError("pool", f"unknown pool {pool!r}; this database is {self.pool!r}")
        stmt = (
            sa.dialects.postgresql.insert(namespaces)
            .values(name=name, description=description)
            .on_conflict_do_nothing()
            .returning(*_NAMESPACE_COLUMNS)
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise ConflictError(f"namespace {name!r} already exists", namespace=name)
        return Namespace(**row, pool=self.pool)

    async def waiting_messages(self) -> int:
        """Messages waiting in this database (pending or delayed), from the kept counts: how
        loaded the pool is, when a namespace is placed (docs/scaling.md)."""
        async with self._transaction() as conn:
            return int((await conn.execute(pools_sql.POOL_WAITING_MESSAGES)).scalar_one())

    async def identity(self) -> str | None:
        """The pool this database is registered as (``pool_identity``), None before it is."""
        async with self._transaction() as conn:
            row = (await conn.execute(pools_sql.POOL_IDENTITY)).first()
        return None if row is None else str(row.name)

    async def list_namespaces(self) -> list[Namespace]:
        """The namespaces this database serves (active), by name."""
        stmt = (
            sa.select(*_NAMESPACE_COLUMNS)
            .where(namespaces.c.state == "active")
            .order_by(namespaces.c.name)
        )
        async with self._transaction() as conn:
            rows = await conn.execute(stmt)
            return [Namespace(**row, pool=self.pool) for row in rows.mappings()]

    async def namespace_exists(self, name: str) -> bool:
        """Whether this database serves the namespace; NamespaceMovingError while a move has it
        (docs/scaling.md)."""
        async with self._transaction() as conn:
            return await self._namespace_is_active(conn, name)

    async def delete_namespace(self, name: str) -> bool:
        """Delete a namespace with its tokens, queues and messages (not while it moves)."""
        self.lookups.forget_all()
        stmt = sa.delete(namespaces).where(
            namespaces.c.name == name, namespaces.c.state == "active"
        )
        async with self._transaction() as conn:
            if (await conn.execute(stmt)).rowcount > 0:
                return True
            await self._namespace_is_active(conn, name)  # raises while it moves
            return False

    @classmethod
    async def _require_active(cls, conn: AsyncConnection, name: str) -> None:
        """Nothing, or NotFoundError when the namespace is not here (NamespaceMovingError while
        a move has it)."""
        if not await cls._namespace_is_active(conn, name):
            raise NotFoundError(f"namespace {name!r} does not exist", namespace=name)

    @staticmethod
    async def _namespace_is_active(conn: AsyncConnection, name: str) -> bool:
        """Whether the namespace is here and served: False when it is not here, and
        NamespaceMovingError when a move has it (incoming, frozen or moved)."""
        state = (await conn.execute(catalogue_sql.NAMESPACE_STATE, {"namespace": name})).scalar()
        if state is None:
            return False
        if state != "active":
            raise NamespaceMovingError(name)
        return True

    async def insert_token(
        self,
        namespace: str,
        token_id: str,
        label: str,
        secret_hash: bytes,
        expires_at: datetime | None,
        access_key: tuple[str, bytes] | None = None,
        *,
        limits: Mapping[str, float | None],
    ) -> Token:
        """Store a token (hashed; an SQS access key also with its id and sealed secret; with its
        rate ``limits``, ``read_rate`` and ``write_rate``); NotFoundError when the namespace
        does not exist."""
        access_key_id, sealed_secret = access_key or (None, None)
        stmt = (
            sa.insert(tokens)
            .from_select(
                [
                    "id",
                    "namespace",
                    "label",
                    "secret_hash",
                    "expires_at",
                    "access_key_id",
                    "sealed_secret",
                    "read_rate",
                    "write_rate",
                ],
                sa.select(
                    sa.literal(token_id, sa.dialects.postgresql.UUID(as_uuid=False)),
                    namespaces.c.name,
                    sa.literal(label),
                    sa.literal(secret_hash, sa.LargeBinary),
                    sa.literal(expires_at, sa.DateTime(timezone=True)),
                    sa.literal(access_key_id, sa.Text),
                    sa.literal(sealed_secret, sa.LargeBinary),
                    sa.literal(limits["read_rate"], sa.Double),
                    sa.literal(limits["write_rate"], sa.Double),
                ).where(namespaces.c.name == namespace, namespaces.c.state == "active"),
            )
            .returning(*(c for c in tokens.c if c.name not in _SECRET_COLUMNS))
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
            if row is None:
                await self._require_active(conn, namespace)
                raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        return Token(**row)

    async def list_tokens(self, namespace: str) -> list[Token]:
        """A namespace's tokens, oldest first, without secrets."""
        columns = [c for c in tokens.c if c.name not in _SECRET_COLUMNS]
        stmt = (
            sa.select(*columns)
            .where(tokens.c.namespace == namespace)
            .order_by(tokens.c.created_at, tokens.c.id)
        )
        async with self._transaction() as conn:
            await self._require_active(conn, namespace)
            return [Token(**row) for row in (await conn.execute(stmt)).mappings()]

    async def delete_token(self, namespace: str, token_id: str) -> bool:
        """Revoke a token at once (not while its namespace moves)."""
        stmt = sa.delete(tokens).where(
            tokens.c.namespace == namespace,
            tokens.c.id == token_id,
            sa.text(catalogue_sql.NAMESPACE_IS_ACTIVE.format("tokens.namespace")),
        )
        try:
            async with self._transaction() as conn:
                if (await conn.execute(stmt)).rowcount > 0:
                    return True
                await self._namespace_is_active(conn, namespace)  # raises while it moves
                return False
        finally:
            self.lookups.forget_all()

    async def update_token_limits(
        self, namespace: str, token_id: str, limits: Mapping[str, float | None]
    ) -> Token | None:
        """Set a token's rate limits (the fields of ``limits``); None when there is no such
        token. Its catalogue version moves on (a trigger), so the change applies to the next
        request in every process."""
        stmt = (
            sa.update(tokens)
            .where(
                tokens.c.namespace == namespace,
                tokens.c.id == token_id,
                sa.text(catalogue_sql.NAMESPACE_IS_ACTIVE.format("tokens.namespace")),
            )
            .values(**limits)
            .returning(*(c for c in tokens.c if c.name not in _SECRET_COLUMNS))
        )
        try:
            async with self._transaction() as conn:
                row = (await conn.execute(stmt)).mappings().first()
                if row is None:
                    await self._require_active(conn, namespace)
                    return None
                return Token(**row)
        finally:
            self.lookups.forget_all()

    async def hit_token_rate(self, namespace: str, token_id: str, kind: str) -> float | None:
        """Count one request of ``kind`` (``read``, ``write``) of a token against its limit, in
        every process at once (app/store/sql/token_limits.py): None when allowed (also when it
        has no such limit any more), else the seconds until a retry may be allowed."""
        params = {"token_id": token_id, "kind": kind}
        # The driver path, without confirming: the statement reads the limit from ``tokens``
        # itself, so it relies on no lookup of the request and must neither check nor confirm
        # them (a catalogue change is the request's own statements' to find).
        async with self._driver(confirm=False) as driver:
            cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=namedtuple_row)
            await cursor.execute(_TOKEN_RATE_HIT, params)
            row = await cursor.fetchone()
        if row is None or row.allowed:
            return None
        return max(0.0, float(row.retry_after))

    async def find_token(self, secret_hash: bytes, namespace: str | None = None) -> Token | None:
        """The unexpired token with this secret hash, if any (of any namespace: the caller
        authorizes it; ``namespace`` only says where a router would look)."""
        view = catalogue.current_view()
        if view is not None and self.lookups.enabled:
            cached = self.lookups.token(secret_hash)
            if cached is not None:
                view.rely_on(self.lookups.version, fresh=False, valid_until=cached.expires_at)
                return cached
        async with self._transaction() as conn:
            params = {"secret_hash": secret_hash}
            result = await conn.execute(catalogue_sql.TOKEN_FIND_UNEXPIRED, params)
            row = result.mappings().first()
        if row is None:
            return None
        if row["namespace_state"] != "active":
            raise NamespaceMovingError(row["namespace"])
        version = row["catalogue_version"]
        token = Token(**{key: row[key] for key in _TOKEN_FIELDS})
        if view is not None:
            view.rely_on(version, fresh=True, valid_until=token.expires_at)
            self.lookups.remember_token(secret_hash, token, version)
        return token

    async def find_access_key(self, access_key_id: str) -> AccessKey | None:
        """The unexpired SQS access key with this id, with its sealed secret, if any; kept in
        memory and relied on like a token (its secret never changes, and a revocation changes
        the catalogue version, so it applies to the next request)."""
        view = catalogue.current_view()
        if view is not None and self.lookups.enabled:
            cached = self.lookups.access_key(access_key_id)
            if cached is not None:
                valid_until = cached.token.expires_at
                view.rely_on(self.lookups.version, fresh=False, valid_until=valid_until)
                return cached
        async with self._transaction() as conn:
            params = {"access_key_id": access_key_id}
            result = await conn.execute(catalogue_sql.ACCESS_KEY_FIND_UNEXPIRED, params)
            row = result.mappings().first()
        if row is None:
            return None
        if row["namespace_state"] != "active":
            raise NamespaceMovingError(row["namespace"])
        token = Token(**{key: row[key] for key in _TOKEN_FIELDS})
        key = AccessKey(token=token, sealed_secret=bytes(row["sealed_secret"]))
        version = row["catalogue_version"]
        if view is not None:
            view.rely_on(version, fresh=True, valid_until=token.expires_at)
            self.lookups.remember_access_key(key, version)
        return key

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
            params = {"namespace": namespace, "name": name}
            row = (await conn.execute(catalogue_sql.QUEUE_GET, params)).mappings().first()
        if row is None:
            return None
        if row["namespace_state"] != "active":
            raise NamespaceMovingError(namespace)
        queue = queue_from_row(row, self.pool)
        if view is not None and queue.catalogue_version is not None:
            view.rely_on(queue.catalogue_version, fresh=True)
            self.lookups.remember_queue(queue)
        return queue

    async def insert_queue(
        self,
        namespace: str,
        name: str,
        config: QueueConfig,
        sqs: Mapping[str, Any] | None = None,
    ) -> Queue | None:
        """Create a queue (with what the SQS door keeps for it, ``sqs``); None when it already
        exists. NotFoundError without the namespace."""
        params = {
            "namespace": namespace,
            "name": name,
            **dataclasses.asdict(config),
            "filter_key": config.filter_key,
            "filter_key_2": config.filter_key_2,
            "sqs": json.dumps(sqs or {}),
        }
        async with self._transaction() as conn:
            result = await conn.execute(catalogue_sql.QUEUE_INSERT_IF_NEW, params)
            row = result.mappings().first()
            if row is not None:
                # The catalogue moved on: what this process looked up is out of date, and its
                # own next request (an enqueue that created the queue) need not trip over it.
                self.lookups.forget_all()
                return queue_from_row(row, self.pool)
            await self._require_active(conn, namespace)
            return None

    async def update_queue(
        self,
        queue: Queue,
        changes: Mapping[str, Any],
        *,
        wake: bool = False,
        sqs_patch: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> Queue:
        """Apply validated changes to a queue's mutable settings; ``wake``: also tell its
        long-polling consumers to look again (it was just resumed), in the same statement, so
        that the change and the wake-up are one outcome. ``sqs_patch``: keys to set in sections
        of what the SQS door keeps (``attributes``, ``tags``), ``None`` to remove one, merged
        in the statement itself, so that two patches at once both apply."""
        self.lookups.forget_all()
        if sqs_patch:
            changes = {**changes, "sqs": _merged_sqs(sqs_patch)}
        returned: list[Any] = [queues]
        if wake:  # delivered at the update's commit
            returned.append(sa.func.pg_notify(NOTIFY_CHANNEL, sa.cast(queues.c.id, sa.Text)))
        stmt = (
            sa.update(queues)
            .where(
                queues.c.id == queue.id,
                sa.text(catalogue_sql.NAMESPACE_IS_ACTIVE.format("queues.namespace")),
            )
            .values(**changes, updated_at=sa.func.now())
            .returning(*returned)
        )
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).mappings().first()
            if row is None:
                await self._namespace_is_active(conn, queue.namespace)  # raises while it moves
                raise NotFoundError("queue does not exist")
        return queue_from_row(row, self.pool)

    async def delete_queue(self, namespace: str, name: str) -> bool:
        """Delete a queue and its messages."""
        self.lookups.forget_all()
        async with self._transaction() as conn:
            params = {"namespace": namespace, "name": name}
            if (await conn.execute(catalogue_sql.QUEUE_DELETE, params)).first() is not None:
                return True
            await self._namespace_is_active(conn, namespace)  # raises while it moves
            return False

    async def list_queues(self, namespace: str) -> list[Queue]:
        """A namespace's queues by name."""
        stmt = sa.select(queues).where(queues.c.namespace == namespace).order_by(queues.c.name)
        async with self._transaction() as conn:
            await self._require_active(conn, namespace)
            return [queue_from_row(row, self.pool) for row in (await conn.execute(stmt)).mappings()]

    async def queue_counts(self, of: Sequence[Queue]) -> dict[int, dict[State, int]]:
        """Messages per state for each queue, by queue id (states with no message are absent)."""
        counts: dict[int, dict[State, int]] = {queue.id: {} for queue in of}
        async with self._transaction() as conn:
            params = {"queue_ids": list(counts)}
            rows = await conn.execute(reads.MESSAGES_COUNT_BY_STATE, params)
            for row in rows.mappings():
                counts[row["queue_id"]][State(row["state"])] = row["n"]
        return counts

    async def oldest_pending_age(self, queue: Queue) -> float | None:
        """Seconds the longest-waiting pending message has been visible, or None."""
        async with self._transaction() as conn:
            params = {"queue_id": queue.id}
            age = (await conn.execute(reads.MESSAGES_OLDEST_PENDING_AGE, params)).scalar()
        return float(age) if age is not None else None

    @retry_transient
    async def purge(self, queue: Queue, states: Sequence[State]) -> int:
        """Delete a queue's messages in the given states."""
        async with self._transaction() as conn:
            params = {"queue_id": queue.id, "states": [str(s) for s in states]}
            result = await conn.execute(transitions.MESSAGES_PURGE_IN_STATES, params)
            return result.rowcount


def _merged_sqs(patch: Mapping[str, Mapping[str, str | None]]) -> Any:
    """``queues.sqs`` with ``patch`` merged into its sections, as SQL: each section's keys
    replaced by the patch's (``||``), then the ones the patch set to null removed."""
    merged: Any = queues.c.sqs
    for section, values in patch.items():
        current = sa.func.coalesce(queues.c.sqs[section], sa.cast(sa.text("'{}'"), JSONB))
        changed = sa.func.jsonb_strip_nulls(current.op("||")(sa.cast(values, JSONB)))
        merged = sa.func.jsonb_set(merged, sa.cast([section], sa.ARRAY(sa.Text)), changed)
    return merged
