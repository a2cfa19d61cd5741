"""Namespaces on pools (docs/scaling.md): :class:`PooledStore` gives the service one
:class:`~app.core.ports.Store` over a :class:`~app.store.postgres.PostgresStore` per pool, and
sends every call to the pool that holds its namespace.

- A call about a queue goes to the pool the queue was read from (``Queue.pool``): a dictionary
  lookup, nothing read.
- A call about a namespace by name goes to the pool the catalogue's map says
  (:class:`NamespaceMap`, cached in the process). A lookup that finds nothing there reads the
  map again before it answers, so a namespace deleted and made again on another pool is found
  where it is now.
- Each pool's statements carry that pool's catalogue version (:mod:`app.core.catalogue`); a
  request acts on one pool, so its lookups share one version.
- While a move has the namespace (:mod:`app.store.moves`: frozen on its old pool, not yet
  active on its new one), a request waits for the flip, reading the map again.

With one pool (no ``SUNDIAL_POOLS``) no request reads the map: every namespace is on
``default``. Creating and deleting a namespace still keep the map, so that pools can be added.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.dead_letters import Respawn
from app.core.errors import (
    ConflictError,
    NamespaceMovingError,
    NotFoundError,
    UnavailableError,
    ValidationError,
)
from app.core.models import (
    DEFAULT_POOL,
    AccessKey,
    EnqueueOutcome,
    FilterValue,
    LeasedMessage,
    Message,
    MessageChanges,
    MessageFilter,
    MessagePage,
    Namespace,
    NextLease,
    Queue,
    QueueConfig,
    Token,
)
from app.core.periodic import PeriodicJob, PeriodicSpec
from app.core.ports import Acked, GuardState, LeaseRefusal, NewRow
from app.core.states import State
from app.core.topics import TagFilter, Topic
from app.store.errors import raise_translated
from app.store.postgres import PostgresStore
from app.store.sql import pools as sql

T = TypeVar("T")
Call = Coroutine[Any, Any, T]

MOVE_WAIT_SECONDS = 10.0
"""How long a request waits for a move of its namespace to finish before it answers 503."""
MOVE_POLL_SECONDS = 0.02
"""How often a waiting request reads the map again (a move's freeze lasts a few of these)."""
STALE_MAP_ATTEMPTS = 3
"""Pools a lookup that finds nothing asks, following the map as it changes."""


class NamespaceMap:
    """The catalogue's map of which pool holds each namespace, as this process last read it."""

    def __init__(self, catalogue: AsyncEngine) -> None:
        self._engine = catalogue.execution_options(isolation_level="AUTOCOMMIT")
        self._known: dict[str, str] = {}

    def cached(self, namespace: str) -> str | None:
        """The pool last read for ``namespace``, or None."""
        return self._known.get(namespace)

    async def read(self, namespace: str) -> str | None:
        """The pool the catalogue says holds ``namespace`` now (None: no such namespace)."""
        async with self._connect() as conn:
            found = (await conn.execute(sql.NAMESPACE_POOL, {"namespace": namespace})).scalar()
        if found is None:
            self._known.pop(namespace, None)
        else:
            self._known[namespace] = found
        return found

    async def read_all(self) -> dict[str, str]:
        """Every namespace and its pool."""
        async with self._connect() as conn:
            rows = (await conn.execute(sql.NAMESPACE_POOLS)).all()
        return {row.namespace: row.pool for row in rows}

    async def claim(self, namespace: str, pool: str) -> str:
        """Take ``namespace`` for ``pool``; returns the pool that holds the name (another one
        when it was taken)."""
        async with self._connect() as conn:
            params = {"namespace": namespace, "pool": pool}
            taken = (await conn.execute(sql.NAMESPACE_POOL_CLAIM, params)).scalar()
            if taken is None:
                taken = (await conn.execute(sql.NAMESPACE_POOL, params)).scalar()
        if taken is None:  # released between the two statements: try again
            return await self.claim(namespace, pool)
        self._known[namespace] = taken
        return str(taken)

    async def reclaim(self, namespace: str, was: str, pool: str) -> bool:
        """Move the name from ``was`` (whose namespace was never made) to ``pool``."""
        async with self._connect() as conn:
            params = {"namespace": namespace, "was": was, "pool": pool}
            moved = (await conn.execute(sql.NAMESPACE_POOL_RECLAIM, params)).first() is not None
        if moved:
            self._known[namespace] = pool
        return moved

    async def forget(self, namespace: str, pool: str) -> None:
        """Free the name (its namespace on ``pool`` was deleted)."""
        self._known.pop(namespace, None)
        async with self._connect() as conn:
            await conn.execute(sql.NAMESPACE_POOL_FORGET, {"namespace": namespace, "pool": pool})

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.connect() as conn:
                yield conn
        except (sa_exc.TimeoutError, sa_exc.DBAPIError, OSError) as error:
            raise_translated(error)


_acting: ContextVar[PostgresStore | None] = ContextVar("sundial_acting_pool", default=None)
"""The pool the current request's lookups came from (each request runs in a task of its own)."""


class PooledStore:
    """Implements :class:`app.core.ports.Store` over one :class:`PostgresStore` per pool.

    Args:
        pools: every pool's store by name (``default`` is the catalogue's).
        move_wait_seconds: how long a request waits for a move of its namespace to finish (the
            namespace frozen on its old pool) before it answers 503 to retry.
    """

    def __init__(
        self, pools: Mapping[str, PostgresStore], move_wait_seconds: float = MOVE_WAIT_SECONDS
    ) -> None:
        if DEFAULT_POOL not in pools:
            raise ValueError("the pools must include the catalogue's, 'default'")
        self.pools = dict(pools)
        self.map = NamespaceMap(pools[DEFAULT_POOL].engine)
        self.move_wait_seconds = move_wait_seconds
        self._single = self.pools[DEFAULT_POOL] if len(self.pools) == 1 else None
        self._registered: set[str] = {DEFAULT_POOL}

    # --- where a namespace is -------------------------------------------------------------------

    async def _pool_of(self, namespace: str, *, fresh: bool = False) -> PostgresStore:
        """The store of the pool that holds ``namespace`` (``default`` when none does: its
        lookups then find nothing)."""
        if self._single is not None:
            store = self._single
        else:
            name = None if fresh else self.map.cached(namespace)
            if name is None:
                name = await self.map.read(namespace)
            store = self.pools.get(name or DEFAULT_POOL, self.pools[DEFAULT_POOL])
        _acting.set(store)
        return store

    async def _moved_on(self, namespace: str, asked: PostgresStore) -> PostgresStore | None:
        """After ``asked`` found nothing of ``namespace``: the pool the map says now, when it
        says another (the cached map was out of date), else None."""
        if self._single is not None:
            return None
        now = await self._pool_of(namespace, fresh=True)
        return now if now is not asked else None

    async def _at(
        self,
        namespace: str,
        act: Callable[[PostgresStore], Awaitable[T]],
        found: Callable[[T], bool] = lambda _: True,
        *,
        fresh: bool = False,
    ) -> T:
        """``act`` on the pool that holds ``namespace``.

        When that pool finds nothing (``found`` says no, or NotFoundError) and the catalogue's
        map now names another pool, the other is asked. While a move has the namespace (frozen
        on its old pool, not yet active on its new one), the request waits, reading the map
        again, up to ``move_wait_seconds``; then NamespaceMovingError (503) is the client's to
        retry.
        """
        store = await self._pool_of(namespace, fresh=fresh)
        deadline: float | None = None
        for _ in range(STALE_MAP_ATTEMPTS):
            try:
                result = await act(store)
            except NamespaceMovingError:
                deadline = deadline or time.monotonic() + self.move_wait_seconds
                while time.monotonic() < deadline:
                    # No event crosses databases: poll the map, briefly (a freeze is short).
                    await asyncio.sleep(MOVE_POLL_SECONDS)
                    now = await self._pool_of(namespace, fresh=True)
                    try:
                        return await act(now)
                    except NamespaceMovingError:
                        continue
                raise
            except NotFoundError:
                if (moved := await self._moved_on(namespace, store)) is None:
                    raise
                store = moved
                continue
            if found(result) or (moved := await self._moved_on(namespace, store)) is None:
                return result
            store = moved
        return await act(store)

    async def _check_registered(self, store: PostgresStore) -> None:
        """Refuse to make namespaces or queues on a pool whose database is not registered as
        that pool (a server started while it was down, or a URL that names another pool's
        database): its queue ids would not be its own (docs/scaling.md). Checked once per pool
        and process."""
        if store.pool in self._registered:
            return
        registered = await store.identity()
        if registered != store.pool:
            raise UnavailableError(
                f"pool {store.pool!r}: its database is registered as {registered!r}, not as"
                " this pool: run sundial db upgrade"
                if registered is not None
                else f"pool {store.pool!r} is not registered yet: run sundial db upgrade"
            )
        self._registered.add(store.pool)

    def _of(self, queue: Queue) -> PostgresStore:
        store = self.pools.get(queue.pool)
        if store is None:  # a queue of a pool no longer configured
            raise UnavailableError(f"pool {queue.pool!r} is not configured on this server")
        return store

    # --- namespaces -----------------------------------------------------------------------------

    async def create_namespace(
        self, name: str, description: str, pool: str | None = None
    ) -> Namespace:
        """Make the namespace on ``pool`` (or the least loaded pool): its name is taken in the
        catalogue first, so no two pools hold one name."""
        if pool is not None and pool not in self.pools:
            known = ", ".join(sorted(self.pools))
            raise ValidationError("pool", f"unknown pool {pool!r}; this server has: {known}")
        chosen = pool or await self._least_loaded()
        await self._check_registered(self.pools[chosen])
        holder = await self.map.claim(name, chosen)
        if holder != chosen:
            held = self.pools.get(holder)
            if held is None or await self._at(name, lambda s: s.namespace_exists(name)):
                raise ConflictError(f"namespace {name!r} already exists", namespace=name)
            # Its creation was cut short: the name is free.
            if not await self.map.reclaim(name, holder, chosen):
                raise ConflictError(f"namespace {name!r} already exists", namespace=name)
        return await self.pools[chosen].create_namespace(name, description)

    async def _least_loaded(self) -> str:
        """The pool with the fewest waiting messages (pending or delayed), ties by name; pools
        that do not answer are passed over."""
        if self._single is not None:
            return DEFAULT_POOL
        loads: list[tuple[int, str]] = []
        for name, store in sorted(self.pools.items()):
            try:
                loads.append((await store.waiting_messages(), name))
            except UnavailableError:
                continue
        if not loads:
            raise UnavailableError("no pool is reachable")
        return min(loads)[1]

    async def list_namespaces(self) -> list[Namespace]:
        """Every namespace, from the pool the catalogue says holds it."""
        if self._single is not None:
            return await self._single.list_namespaces()
        placed = await self.map.read_all()
        found: list[Namespace] = []
        for pool in sorted(set(placed.values()) & set(self.pools)):
            found.extend(
                n for n in await self.pools[pool].list_namespaces() if placed.get(n.name) == pool
            )
        return sorted(found, key=lambda n: n.name)

    async def namespace_exists(self, name: str) -> bool:
        return await self._at(name, lambda s: s.namespace_exists(name), bool)

    async def delete_namespace(self, name: str) -> bool:
        deleted = await self._at(name, lambda s: s.delete_namespace(name), bool, fresh=True)
        if self._single is None or deleted:
            await self.map.forget(name, (_acting.get() or self.pools[DEFAULT_POOL]).pool)
        return deleted

    # --- tokens ---------------------------------------------------------------------------------

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
        return await self._at(
            namespace,
            lambda s: s.insert_token(
                namespace, token_id, label, secret_hash, expires_at, access_key, limits=limits
            ),
            fresh=True,
        )

    async def list_tokens(self, namespace: str) -> list[Token]:
        return await self._at(namespace, lambda s: s.list_tokens(namespace))

    async def delete_token(self, namespace: str, token_id: str) -> bool:
        return await self._at(
            namespace, lambda s: s.delete_token(namespace, token_id), bool, fresh=True
        )

    async def update_token_limits(
        self, namespace: str, token_id: str, limits: Mapping[str, float | None]
    ) -> Token | None:
        return await self._at(
            namespace,
            lambda s: s.update_token_limits(namespace, token_id, limits),
            lambda t: t is not None,
            fresh=True,
        )

    async def hit_token_rate(self, namespace: str, token_id: str, kind: str) -> float | None:
        """Counted where the request's token was found (the namespace's pool)."""
        store = self._single or _acting.get()
        if store is not None:
            return await store.hit_token_rate(namespace, token_id, kind)
        return await self._at(namespace, lambda s: s.hit_token_rate(namespace, token_id, kind))

    async def find_token(self, secret_hash: bytes, namespace: str | None = None) -> Token | None:
        """The token, looked for in ``namespace``'s pool; without a namespace, in every pool."""
        if namespace is None:
            for store in self.pools.values():
                token = await store.find_token(secret_hash)
                if token is not None:
                    _acting.set(store)
                    return token
            return None
        if self._single is not None:  # the hot path of a single database: nothing to route
            _acting.set(self._single)
            return await self._single.find_token(secret_hash)
        return await self._at(
            namespace, lambda s: s.find_token(secret_hash), lambda t: t is not None
        )

    async def find_access_key(self, access_key_id: str) -> AccessKey | None:
        """The access key, looked for in every pool (its namespace is not known yet)."""
        for store in self.pools.values():
            key = await store.find_access_key(access_key_id)
            if key is not None:
                _acting.set(store)
                return key
        return None

    async def confirm_lookups(self) -> None:
        store = _acting.get()
        if store is not None:
            await store.confirm_lookups()

    # --- queues ---------------------------------------------------------------------------------

    async def get_queue(self, namespace: str, name: str) -> Queue | None:
        if self._single is not None:  # the hot path of a single database: nothing to route
            _acting.set(self._single)
            return await self._single.get_queue(namespace, name)
        return await self._at(
            namespace, lambda s: s.get_queue(namespace, name), lambda q: q is not None
        )

    async def insert_queue(
        self,
        namespace: str,
        name: str,
        config: QueueConfig,
        sqs: Mapping[str, Any] | None = None,
    ) -> Queue | None:
        async def insert(store: PostgresStore) -> Queue | None:
            await self._check_registered(store)
            return await store.insert_queue(namespace, name, config, sqs)

        return await self._at(namespace, insert)

    def update_queue(
        self,
        queue: Queue,
        changes: Mapping[str, Any],
        *,
        wake: bool = False,
        sqs_patch: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> Call[Queue]:
        return self._of(queue).update_queue(queue, changes, wake=wake, sqs_patch=sqs_patch)

    async def delete_queue(self, namespace: str, name: str) -> bool:
        return await self._at(namespace, lambda s: s.delete_queue(namespace, name), bool)

    async def list_queues(self, namespace: str) -> list[Queue]:
        return await self._at(namespace, lambda s: s.list_queues(namespace))

    async def queue_counts(self, of: Sequence[Queue]) -> dict[int, dict[State, int]]:
        counts: dict[int, dict[State, int]] = {}
        for pool in {queue.pool for queue in of}:
            mine = [queue for queue in of if queue.pool == pool]
            counts.update(await self._of(mine[0]).queue_counts(mine))
        return counts

    def oldest_pending_age(self, queue: Queue) -> Call[float | None]:
        return self._of(queue).oldest_pending_age(queue)

    def purge(self, queue: Queue, states: Sequence[State]) -> Call[int]:
        return self._of(queue).purge(queue, states)

    # --- messages: the pool the queue was read from ---------------------------------------------

    def enqueue(
        self, queue: Queue, rows: Sequence[NewRow], replace: bool = False
    ) -> Call[list[EnqueueOutcome]]:
        return self._of(queue).enqueue(queue, rows, replace)

    def lease_message(
        self, queue: Queue, message_id: str, lease_seconds: int | None
    ) -> Call[LeasedMessage | LeaseRefusal | None]:
        return self._of(queue).lease_message(queue, message_id, lease_seconds)

    def dequeue(
        self,
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
    ) -> Call[list[LeasedMessage]]:
        return self._of(queue).dequeue(queue, count, lease_seconds, metadata)

    def next_due_in(self, queue: Queue) -> Call[float | None]:
        return self._of(queue).next_due_in(queue)

    def next_due_in_any(self, queues: Sequence[Queue]) -> Call[float | None]:
        # Queues of one namespace: one pool (a consumer of several queues names one namespace).
        return self._of(queues[0]).next_due_in_any(queues)

    def get_message(self, queue: Queue, message_id: str) -> Call[Message | None]:
        return self._of(queue).get_message(queue, message_id)

    def guard_state(self, queue: Queue, message_id: str) -> Call[GuardState | None]:
        return self._of(queue).guard_state(queue, message_id)

    def guard_states(self, queue: Queue, message_ids: Sequence[str]) -> Call[dict[str, GuardState]]:
        return self._of(queue).guard_states(queue, message_ids)

    def archived_completions(
        self, queue: Queue, items: Sequence[tuple[str, str]]
    ) -> Call[dict[str, Message]]:
        return self._of(queue).archived_completions(queue, items)

    def complete(self, queue: Queue, message_id: str, lease_id: str | None) -> Call[Message | None]:
        return self._of(queue).complete(queue, message_id, lease_id)

    def fail(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        error: str | None,
        retry_delay_seconds: int | None,
    ) -> Call[Message | None]:
        return self._of(queue).fail(queue, message_id, lease_id, error, retry_delay_seconds)

    def extend(
        self, queue: Queue, message_id: str, lease_id: str | None, lease_seconds: int
    ) -> Call[Message | None]:
        return self._of(queue).extend(queue, message_id, lease_id, lease_seconds)

    def cancel(
        self,
        queue: Queue,
        message_id: str,
        lease_id: str | None,
        force: bool,
        reason: str | None,
    ) -> Call[Message | None]:
        return self._of(queue).cancel(queue, message_id, lease_id, force, reason)

    def requeue(self, queue: Queue, message_id: str, terms: Respawn) -> Call[Message | None]:
        return self._of(queue).requeue(queue, message_id, terms)

    def update_message(
        self, queue: Queue, message_id: str, changes: MessageChanges
    ) -> Call[Message | None]:
        return self._of(queue).update_message(queue, message_id, changes)

    def delete_message(self, queue: Queue, message_id: str) -> Call[bool]:
        return self._of(queue).delete_message(queue, message_id)

    def acknowledge(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
    ) -> Call[tuple[Acked, Acked]]:
        return self._of(queue).acknowledge(queue, complete, fail)

    def acknowledge_and_claim(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
        claim: NextLease,
    ) -> Call[tuple[Acked, Acked, list[LeasedMessage]]]:
        return self._of(queue).acknowledge_and_claim(queue, complete, fail, claim)

    def requeue_many(
        self,
        queue: Queue,
        states: Sequence[State],
        ids: Sequence[str] | None,
        limit: int,
        terms: Respawn,
    ) -> Call[int]:
        return self._of(queue).requeue_many(queue, states, ids, limit, terms)

    def delete_dead_letters(
        self, queue: Queue, states: Sequence[State], ids: Sequence[str] | None, limit: int
    ) -> Call[int]:
        return self._of(queue).delete_dead_letters(queue, states, ids, limit)

    def query(self, queue: Queue, spec: MessageFilter) -> Call[MessagePage]:
        return self._of(queue).query(queue, spec)

    # --- topics: the pool that holds their namespace --------------------------------------------

    async def get_topic(self, namespace: str, name: str) -> Topic | None:
        return await self._at(
            namespace, lambda s: s.get_topic(namespace, name), lambda t: t is not None
        )

    async def list_topics(self, namespace: str) -> list[Topic]:
        return await self._at(namespace, lambda s: s.list_topics(namespace))

    async def put_topic(
        self, namespace: str, name: str, subscriptions: Sequence[tuple[Queue, TagFilter | None]]
    ) -> tuple[Topic, bool]:
        return await self._at(namespace, lambda s: s.put_topic(namespace, name, subscriptions))

    async def subscribe(
        self, namespace: str, topic: str, queue: Queue, tags: TagFilter | None
    ) -> tuple[Topic, bool]:
        return await self._of(queue).subscribe(namespace, topic, queue, tags)

    async def unsubscribe(self, namespace: str, topic: str, queue: Queue) -> bool:
        return await self._of(queue).unsubscribe(namespace, topic, queue)

    async def delete_topic(self, namespace: str, name: str) -> bool:
        return await self._at(namespace, lambda s: s.delete_topic(namespace, name), bool)

    async def publish(
        self, topic: Topic, targets: Sequence[tuple[Queue, Sequence[NewRow]]]
    ) -> list[list[EnqueueOutcome]]:
        """On the pool the topic's queues were read from (a namespace is on one pool)."""
        return await self._of(targets[0][0]).publish(topic, targets)

    # --- periodic jobs: the pool that holds their namespace ---------------------------------------

    async def put_periodic_job(
        self,
        namespace: str,
        name: str,
        spec: PeriodicSpec,
        expected_updated_at: datetime | None = None,
    ) -> tuple[PeriodicJob, bool] | None:
        return await self._at(
            namespace,
            lambda s: s.put_periodic_job(namespace, name, spec, expected_updated_at),
            lambda put: put is not None,
        )

    async def get_periodic_job(self, namespace: str, name: str) -> PeriodicJob | None:
        return await self._at(
            namespace, lambda s: s.get_periodic_job(namespace, name), lambda j: j is not None
        )

    async def list_periodic_jobs(
        self, namespace: str, queue: str | None = None
    ) -> list[PeriodicJob]:
        return await self._at(namespace, lambda s: s.list_periodic_jobs(namespace, queue))

    async def delete_periodic_job(self, namespace: str, name: str) -> bool:
        return await self._at(namespace, lambda s: s.delete_periodic_job(namespace, name), bool)

    async def trigger_periodic_job(
        self, namespace: str, name: str
    ) -> tuple[bool, str | None, str | None]:
        return await self._at(
            namespace, lambda s: s.trigger_periodic_job(namespace, name), lambda r: r[0]
        )
