"""The topics' part of the store (docs/concepts.md, "Topics"): topics and their subscriptions
read and changed, and the publish, one transaction that enqueues into every subscribed queue.

The publish reuses the enqueue statement of :mod:`app.store.sql.enqueue` (priority default,
delay, expiry, exclusive and filter values per queue, the wake-up of long polls, the counts'
triggers), once per subscribed queue, after :data:`~app.store.sql.topics.TOPIC_LOCK`, all in
one transaction: every queue gets its rows, or none does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, LiteralString, NoReturn

import psycopg
from psycopg.rows import namedtuple_row

from app.core import catalogue
from app.core.errors import (
    CatalogueChangedError,
    NamespaceMovingError,
    NotFoundError,
    UnavailableError,
)
from app.core.models import EnqueueOutcome, Queue
from app.core.ports import NewRow
from app.core.states import State
from app.core.topics import Subscription, TagFilter, Topic
from app.store.admin import AdminStore
from app.store.errors import TRANSIENT_RETRIES, retry_transient
from app.store.messages import enqueue_params
from app.store.paths import StorePaths, driver_sql
from app.store.rows import guard_params, queue_from_row
from app.store.sql import reads
from app.store.sql import topics as sql

_LOCK = driver_sql(sql.TOPIC_LOCK)
_STATES = driver_sql(reads.MESSAGES_STATES)

Targets = Sequence[tuple[Queue, Sequence[NewRow]]]
"""A publish's rows per subscribed queue."""


class TopicStore(StorePaths):
    """Topics, subscriptions and the publish."""

    async def get_topic(self, namespace: str, name: str) -> Topic | None:
        """The topic with its subscribed queues, read now (never from memory), or None."""
        found = await self._read_topics(namespace, name)
        return found[0] if found else None

    async def list_topics(self, namespace: str) -> list[Topic]:
        """A namespace's topics by name, each with its subscribed queues."""
        return await self._read_topics(namespace, None)

    async def _read_topics(
        self, namespace: str, name: str | None, *, rely: bool = True
    ) -> list[Topic]:
        """The topics, read now; ``rely``: the current request relies on the catalogue version
        they were read at (not so when reading back what the request itself just changed: its
        change counted the version up past the one its other lookups rely on)."""
        params = {"namespace": namespace, "name": name}
        async with self._transaction() as conn:
            rows = (await conn.execute(sql.TOPICS_GET, params)).mappings().all()
            if not rows and not await _namespace_here(conn, namespace):
                raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        if not rows:
            return []
        if rows[0]["namespace_state"] != "active":
            raise NamespaceMovingError(namespace)
        version = rows[0]["catalogue_version"]
        view = catalogue.current_view()
        if view is not None and rely:
            view.rely_on(version, fresh=True)
        topics: dict[str, Topic] = {}
        subscriptions: dict[str, list[Subscription]] = {}
        for row in rows:
            topic_name = row["topic_name"]
            if topic_name not in topics:
                topics[topic_name] = Topic(
                    namespace=row["topic_namespace"],
                    name=topic_name,
                    created_at=row["topic_created_at"],
                    updated_at=row["topic_updated_at"],
                    subscriptions=subscriptions.setdefault(topic_name, []),
                    catalogue_version=version,
                )
            if row["id"] is not None:
                tags = None
                if row["tag_key"] is not None:
                    tags = TagFilter(row["tag_key"], tuple(row["tags"]))
                queue = queue_from_row(row, self.pool)
                subscriptions[topic_name].append(Subscription(queue, tags, row["subscribed_at"]))
        return list(topics.values())

    async def put_topic(
        self, namespace: str, name: str, subscriptions: Sequence[tuple[Queue, TagFilter | None]]
    ) -> tuple[Topic, bool]:
        """Make the topic, or bring an existing one to exactly these subscriptions; the topic
        as it then is, and whether it was created. NotFoundError without the namespace."""
        self.lookups.forget_all()
        wanted = [
            {
                "queue_id": queue.id,
                "tag_key": tags.key if tags else None,
                "tags": list(tags.values) if tags else None,
            }
            for queue, tags in subscriptions
        ]
        params = {"namespace": namespace, "name": name, "subscriptions": json.dumps(wanted)}
        async with self._transaction() as conn:
            row = (await conn.execute(sql.TOPIC_PUT, params)).first()
            if row is None:
                await self._absent_namespace(conn, namespace)
        return await self._read_back(namespace, name), bool(row.created)

    async def subscribe(
        self, namespace: str, topic: str, queue: Queue, tags: TagFilter | None
    ) -> tuple[Topic, bool]:
        """Subscribe ``queue`` to the topic (made if need be), or set its filter; the topic as
        it then is, and whether the subscription is new. NotFoundError without the
        namespace."""
        self.lookups.forget_all()
        params = {
            "namespace": namespace,
            "topic": topic,
            "queue_id": queue.id,
            "tag_key": tags.key if tags else None,
            "tags": list(tags.values) if tags else None,
        }
        async with self._transaction() as conn:
            row = (await conn.execute(sql.SUBSCRIPTION_PUT, params)).first()
            if row is None:
                await self._absent_namespace(conn, namespace)
        return await self._read_back(namespace, topic), bool(row.created)

    async def _read_back(self, namespace: str, name: str) -> Topic:
        """The topic as a change just left it (or as a later change did)."""
        found = await self._read_topics(namespace, name, rely=False)
        if not found:  # deleted since, by another request
            raise NotFoundError(f"topic {namespace}/{name} does not exist", topic=name)
        return found[0]

    async def unsubscribe(self, namespace: str, topic: str, queue: Queue) -> bool:
        """Delete the subscription of ``queue``; whether it existed."""
        self.lookups.forget_all()
        params = {"namespace": namespace, "topic": topic, "queue_id": queue.id}
        async with self._transaction() as conn:
            if (await conn.execute(sql.SUBSCRIPTION_DELETE, params)).first() is not None:
                return True
            await _namespace_here(conn, namespace)  # raises while it moves
            return False

    async def delete_topic(self, namespace: str, name: str) -> bool:
        """Delete the topic and its subscriptions (its queues stay); whether it existed."""
        self.lookups.forget_all()
        params = {"namespace": namespace, "name": name}
        async with self._transaction() as conn:
            if (await conn.execute(sql.TOPIC_DELETE, params)).first() is not None:
                return True
            await _namespace_here(conn, namespace)  # raises while it moves
            return False

    async def _absent_namespace(self, conn: Any, namespace: str) -> NoReturn:
        """Raise why a change that needs an active namespace changed nothing."""
        await _namespace_here(conn, namespace)  # raises while it moves
        raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)

    async def publish(self, topic: Topic, targets: Targets) -> list[list[EnqueueOutcome]]:
        """Enqueue each queue's rows, all queues in one transaction (each row's outcome, per
        queue, in order).

        The transaction holds the topic row and carries the catalogue guard of the version the
        topic was read at: a change to its subscriptions or queues committed since applies
        nothing (CatalogueChangedError: read again and publish again), and none can commit
        until the publish has. As enqueue does, an id found taken is reported with its state;
        one taken by a publish that committed while this one ran is read afterwards, and
        should it be gone by then, its message is published again, alone, all or nothing.
        """
        view = catalogue.current_view()
        guard = guard_params(topic.catalogue_version, view.valid_until if view else None)
        outcomes: list[dict[str, EnqueueOutcome]] = [{} for _ in targets]
        pending: list[list[NewRow]] = [list(rows) for _, rows in targets]
        for _ in range(TRANSIENT_RETRIES):
            try:
                await self._publish_once(topic, targets, pending, guard, outcomes)
            except NotFoundError as error:
                # A subscribed queue was deleted while the publish ran (an insert's foreign
                # key): nothing was applied, and the topic read again no longer names it.
                raise CatalogueChangedError() from error
            missing = {
                row.id
                for index, rows in enumerate(pending)
                for row in rows
                if row.id not in outcomes[index]
            }
            if not missing:
                return [
                    [found[row.id] for row in rows]
                    for found, (_, rows) in zip(outcomes, targets, strict=True)
                ]
            pending = [[row for row in rows if row.id in missing] for _, rows in targets]
        raise UnavailableError("the queues' messages changed too fast to publish; retry")

    @retry_transient
    async def _publish_once(
        self,
        topic: Topic,
        targets: Targets,
        pending: Sequence[Sequence[NewRow]],
        guard: dict[str, Any],
        outcomes: list[dict[str, EnqueueOutcome]],
    ) -> None:
        """One publish transaction of the ``pending`` rows per queue, their outcomes recorded
        (an outcome already recorded is kept: it is the first publish's)."""
        lock = {**guard, "namespace": topic.namespace, "name": topic.name}
        statements: list[tuple[LiteralString, dict[str, Any]]] = [(_LOCK, lock)]
        sent: list[int] = []
        for index, ((queue, _), rows) in enumerate(zip(targets, pending, strict=True)):
            if rows:
                statements.append(enqueue_params(queue, rows, guard))
                sent.append(index)
        results: list[list[Any]] = []
        async with self._driver() as driver:
            async with driver.transaction():
                # One statement after another in a transaction block, not pipelined: an aborted
                # pipeline can leave psycopg believing in a prepared statement that the server
                # never made ("prepared statement _pg3_N does not exist" on the next use), and a
                # publish meets aborts routinely (the catalogue guard refusing a stale read).
                for statement, params in statements:
                    results.append(await _rows(driver, statement, params))
            # Ids taken by a publish that committed meanwhile: read after this one committed.
            for index, ids in _record(outcomes, sent, results[1:], pending):
                params = {"queue_id": targets[index][0].id, "ids": ids}
                for row in await _rows(driver, _STATES, params):
                    outcomes[index].setdefault(
                        row.id, EnqueueOutcome(row.id, State(row.state), False, row.seq)
                    )


def _record(
    outcomes: list[dict[str, EnqueueOutcome]],
    sent: Sequence[int],
    results: Sequence[Sequence[Any]],
    pending: Sequence[Sequence[NewRow]],
) -> list[tuple[int, list[str]]]:
    """Record the enqueue statements' outcomes (``results``, of the queues ``sent``); the ids
    they did not answer for, by queue: taken by a publish that committed meanwhile."""
    unseen: list[tuple[int, list[str]]] = []
    for index, rows in zip(sent, results, strict=True):
        found = outcomes[index]
        for row in rows:
            if row.id is not None and row.id not in found:  # not the wake-up's row
                found[row.id] = EnqueueOutcome(row.id, State(row.state), row.created, row.seq)
        ids = [r.id for r in pending[index] if r.id not in found]
        if ids:
            unseen.append((index, ids))
    return unseen


async def _rows(
    driver: psycopg.AsyncConnection[Any], statement: LiteralString, params: dict[str, Any]
) -> list[Any]:
    """A statement's rows, as named tuples."""
    cursor: psycopg.AsyncCursor[Any] = driver.cursor(row_factory=namedtuple_row)
    await cursor.execute(statement, params)
    return await cursor.fetchall()


_namespace_here = AdminStore._namespace_is_active
"""Whether the namespace is here and served (NamespaceMovingError while a move has it)."""
