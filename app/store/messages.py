"""The messages' part of the store, but for the claim (:mod:`app.store.dequeue`) and browsing
(:mod:`app.store.browse`): enqueue, the reads a transition's caller needs, every single-message
transition, the batch acknowledgement, requeue of dead letters and deletion.

It decides nothing about the state machine: each transition is one guarded statement of
:mod:`app.store.sql.transitions` whose source states come from :mod:`app.core.states`, and a
statement that matched nothing returns None; the service then asks :meth:`guard_state` why.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

import msgspec
import psycopg
from psycopg.rows import dict_row, namedtuple_row

from app.core.dead_letters import Respawn
from app.core.errors import UnavailableError
from app.core.models import EnqueueOutcome, Message, MessageChanges, Queue
from app.core.ports import Acked, GuardState, NewRow
from app.core.states import Event, State, allowed_from
from app.store import batches
from app.store.coalesce import StatementJoiner
from app.store.errors import TRANSIENT_RETRIES, retry_transient
from app.store.paths import StorePaths, driver_sql
from app.store.rows import message_from_row, queue_guard, queue_params
from app.store.sql import enqueue as enqueue_sql
from app.store.sql import reads, transitions
from app.store.sql.guards import from_states

_json = msgspec.json.Encoder()

# The hot path's statements (and every single-message transition), run through
# ``StorePaths._driver``.
_ENQUEUE = driver_sql(enqueue_sql.MESSAGES_ENQUEUE_IF_NEW)
_ENQUEUE_ONE = driver_sql(enqueue_sql.MESSAGE_ENQUEUE_ONE_IF_NEW)
_REPLACE = driver_sql(enqueue_sql.MESSAGES_ENQUEUE_OR_REPLACE)
_REPLACE_ONE = driver_sql(enqueue_sql.MESSAGE_ENQUEUE_ONE_OR_REPLACE)
_STATES = driver_sql(reads.MESSAGES_STATES)
_COMPLETE_MANY = driver_sql(transitions.MESSAGES_COMPLETE_IF_LEASED)
_COMPLETE_MANY_WHOLE = driver_sql(transitions.MESSAGES_COMPLETE_IF_LEASED_WHOLE)
_FAIL_MANY = driver_sql(transitions.MESSAGES_FAIL_IF_LEASED)
_COMPLETE = driver_sql(transitions.MESSAGE_COMPLETE_IF_LEASED)
_FAIL = driver_sql(transitions.MESSAGE_FAIL_IF_LEASED)
_EXTEND = driver_sql(transitions.MESSAGE_EXTEND_IF_LEASED)
_CANCEL = driver_sql(transitions.MESSAGE_CANCEL_IF_LIVE)
_REQUEUE = driver_sql(transitions.MESSAGE_REQUEUE_IF_DEAD_LETTER)
_UPDATE = driver_sql(transitions.MESSAGE_UPDATE_IF_WAITING)


def enqueue_params(
    queue: Queue, rows: Sequence[NewRow], guard: dict[str, Any], replace: bool = False
) -> tuple[LiteralString, dict[str, Any]]:
    """The enqueue statement for ``rows`` and its parameters (``guard``: the catalogue guard):
    plain values for one message, one JSON document for a batch (the same statement
    otherwise); ``replace``: the variant that replaces waiting messages of ids already taken."""
    if len(rows) == 1:
        [row] = rows
        return _REPLACE_ONE if replace else _ENQUEUE_ONE, {
            **guard,
            "queue_id": queue.id,
            "filter_key": queue.config.filter_key,
            "filter_key_2": queue.config.filter_key_2,
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
    return _REPLACE if replace else _ENQUEUE, {
        **guard,
        "queue_id": queue.id,
        "filter_key": queue.config.filter_key,
        "filter_key_2": queue.config.filter_key_2,
        "rows": batches.enqueue_rows(rows),
    }


def acknowledgement(
    queue: Queue,
    complete: Sequence[tuple[str, str | None]],
    fail: Sequence[tuple[str, str | None, str | None]],
) -> list[tuple[LiteralString, dict[str, Any]]]:
    """The statements of a batch acknowledgement: one that completes the ``(id, lease_id)``
    items, one that fails the ``(id, lease_id, error)`` items, each only when it has items."""
    guard = queue_params(queue)
    statements: list[tuple[LiteralString, dict[str, Any]]] = []
    if complete:
        items = batches.lease_items(complete)
        complete_from = from_states(Event.COMPLETE)
        statements.append((_COMPLETE_MANY, {**guard, "items": items, "from_states": complete_from}))
    if fail:
        items = batches.failed_items(fail)
        fail_from = from_states(Event.FAIL)
        params = {**guard, "items": items, "retry_delay": None, "from_states": fail_from}
        statements.append((_FAIL_MANY, params))
    return statements


def acknowledged(
    changed: list[Acked], complete: Sequence[object], fail: Sequence[object]
) -> tuple[Acked, Acked]:
    """The pairs completed and the pairs failed (each with the seconds its lease was held),
    from the (id, lease_id) pairs each statement of :func:`acknowledgement` changed."""
    done = iter(changed)
    return (next(done) if complete else {}), (next(done) if fail else {})


def _row_id(row: NewRow) -> str:
    return row.id


def _item_id(item: tuple[str, str | None]) -> str:
    return item[0]


class MessageStore(StorePaths):
    """Enqueue, transitions, acknowledgement, requeue and deletion of messages."""

    async def enqueue(
        self, queue: Queue, rows: Sequence[NewRow], replace: bool = False
    ) -> list[EnqueueOutcome]:
        """Insert new messages (ids unique within the batch); existing ids are reported, or,
        with ``replace``, the waiting ones replaced. The concurrent enqueues of a queue in this
        process share statements and commits (:mod:`app.store.coalesce`); only enqueues of the
        same mode are joined."""
        if replace:
            if self._joined_replaces is None:
                replace_now = functools.partial(self._enqueue_now, replace=True)
                self._joined_replaces = StatementJoiner(replace_now, _row_id)
            return await self._joined_replaces.run(queue, rows, queue_guard(queue))
        if self._joined_enqueues is None:
            self._joined_enqueues = StatementJoiner(self._enqueue_now, _row_id)
        return await self._joined_enqueues.run(queue, rows, queue_guard(queue))

    _joined_enqueues: StatementJoiner[NewRow, EnqueueOutcome] | None = None
    _joined_replaces: StatementJoiner[NewRow, EnqueueOutcome] | None = None
    _joined_completes: StatementJoiner[tuple[str, str | None], Message | None] | None = None

    @retry_transient
    async def _enqueue_now(
        self, queue: Queue, rows: Sequence[NewRow], guard: dict[str, Any], replace: bool = False
    ) -> list[EnqueueOutcome]:
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
                await cursor.execute(*enqueue_params(queue, pending, guard, replace))
                for row in await cursor.fetchall():
                    if row.id is not None:  # not the wake-up branch's row
                        replaced = replace and not row.created
                        outcomes[row.id] = EnqueueOutcome(
                            row.id, State(row.state), row.created, row.seq, replaced
                        )
                unseen = [r.id for r in pending if r.id not in outcomes]
                if unseen:
                    await cursor.execute(_STATES, {"queue_id": queue.id, "ids": unseen})
                    for row in await cursor.fetchall():
                        outcomes[row.id] = EnqueueOutcome(row.id, State(row.state), False, row.seq)
                pending = [r for r in pending if r.id not in outcomes]
                if not pending:
                    return [outcomes[r.id] for r in rows]
        raise UnavailableError("the queue's messages changed too fast to enqueue; retry")

    async def get_message(self, queue: Queue, message_id: str) -> Message | None:
        """One message of the queue, or None."""
        params = {**queue_params(queue), "id": message_id}
        async with self._transaction() as conn:
            row = (await conn.execute(reads.MESSAGE_GET, params)).mappings().first()
        return message_from_row(row) if row is not None else None

    async def guard_state(self, queue: Queue, message_id: str) -> GuardState | None:
        """The state and lease of a message, to explain why a guarded statement changed nothing."""
        return (await self.guard_states(queue, [message_id])).get(message_id)

    async def guard_states(self, queue: Queue, message_ids: Sequence[str]) -> dict[str, GuardState]:
        """:meth:`guard_state` for many messages in one query (absent ids are left out)."""
        params = {"queue_id": queue.id, "ids": list(message_ids)}
        async with self._transaction() as conn:
            rows = (await conn.execute(reads.MESSAGE_GUARD_STATES, params)).all()
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
            result = await conn.execute(reads.MESSAGES_ARCHIVED_COMPLETED, params)
            rows = result.mappings().all()
        asked = set(items)
        return {
            row["id"]: message_from_row(row)
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
        guard: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Message | None:
        """Run one guarded transition (carrying ``guard``, by default the current request's
        catalogue guard); None when the guard matched no row."""
        bound = {
            **queue_params(queue, guard),
            "id": message_id,
            "from_states": from_states(event),
            **params,
        }
        rows = await self._driver_rows(statement, bound, dict_row)
        return message_from_row(rows[0]) if rows else None

    async def complete(self, queue: Queue, message_id: str, lease_id: str | None) -> Message | None:
        """running -> completed, if ``lease_id`` is the current lease. The concurrent completes
        of a queue in this process share statements and commits (:mod:`app.store.coalesce`)."""
        if self._joined_completes is None:
            self._joined_completes = StatementJoiner(self._complete_now, _item_id)
        [completed] = await self._joined_completes.run(
            queue, [(message_id, lease_id)], queue_guard(queue)
        )
        return completed

    @retry_transient
    async def _complete_now(
        self, queue: Queue, items: Sequence[tuple[str, str | None]], guard: dict[str, Any]
    ) -> list[Message | None]:
        """Complete ``(id, lease_id)`` items in one statement; each completed message, or None
        where the lease was not current."""
        if len(items) == 1:
            [(message_id, lease_id)] = items
            completed = await self._transition(
                _COMPLETE, queue, message_id, Event.COMPLETE, guard, lease_id=lease_id
            )
            return [completed]
        params = {
            **queue_params(queue, guard),
            "items": batches.lease_items(items),
            "from_states": from_states(Event.COMPLETE),
        }
        rows = await self._driver_rows(_COMPLETE_MANY_WHOLE, params, dict_row)
        done = {(row["id"], row["lease_id"]): message_from_row(row) for row in rows}
        return [done.get(item) for item in items]

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

    async def requeue(self, queue: Queue, message_id: str, terms: Respawn) -> Message | None:
        """errored/canceled -> pending (or invisible for a delay), attempts reset, expiring as
        ``terms`` say."""
        return await self._transition(
            _REQUEUE, queue, message_id, Event.REQUEUE, **_respawn_params(terms)
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
            filter_key_2=queue.config.filter_key_2,
            visible_at=changes.visible_at,
        )

    @retry_transient
    async def delete_message(self, queue: Queue, message_id: str) -> bool:
        """Remove a message in any state."""
        params = {**queue_params(queue), "id": message_id}
        async with self._transaction() as conn:
            result = await conn.execute(transitions.MESSAGE_DELETE, params)
            return result.first() is not None

    @retry_transient
    async def acknowledge(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
    ) -> tuple[Acked, Acked]:
        """Complete every (id, lease_id) and fail every (id, lease_id, error) whose lease is
        current, all or nothing (one transaction; one statement when only one kind is given).
        Returns the (id, lease_id) pairs completed and those failed, each with the seconds its
        lease was held."""
        statements = acknowledgement(queue, complete, fail)
        if not statements:
            return {}, {}
        results = await self._driver_rows_together(statements)
        changed = [{(r.id, r.lease_id): r.held_seconds for r in rows} for rows in results]
        return acknowledged(changed, complete, fail)

    @retry_transient
    async def requeue_many(
        self,
        queue: Queue,
        states: Sequence[State],
        ids: Sequence[str] | None,
        limit: int,
        terms: Respawn,
    ) -> int:
        """Requeue up to ``limit`` dead letters in ``states`` (optionally only ``ids``), oldest
        finished first, expiring as ``terms`` say."""
        params = {**_dead_letters_params(queue, states, ids, limit), **_respawn_params(terms)}
        async with self._transaction() as conn:
            result = await conn.execute(transitions.MESSAGES_REQUEUE_DEAD_LETTERS, params)
            return len(result.all())

    @retry_transient
    async def delete_dead_letters(
        self, queue: Queue, states: Sequence[State], ids: Sequence[str] | None, limit: int
    ) -> int:
        """Delete up to ``limit`` dead letters in ``states`` (optionally only ``ids``), oldest
        finished first: the ones :meth:`requeue_many` would take. Returns how many."""
        params = _dead_letters_params(queue, states, ids, limit)
        async with self._transaction() as conn:
            return (await conn.execute(transitions.MESSAGES_DELETE_DEAD_LETTERS, params)).rowcount


def _respawn_params(terms: Respawn) -> dict[str, Any]:
    """The parameters of a requeue's new life (``_REQUEUE_SET``)."""
    return {"delay": terms.delay_seconds, "ttl": terms.ttl_seconds, "expires_at": terms.expires_at}


def _dead_letters_params(
    queue: Queue, states: Sequence[State], ids: Sequence[str] | None, limit: int
) -> dict[str, Any]:
    """The parameters of the bulk dead-letter statements: ``states`` kept to those a requeue
    may start from (the dead-letter states), whatever the caller passed."""
    allowed = set(allowed_from(Event.REQUEUE))
    return {
        **queue_params(queue),
        "states": [str(s) for s in states if str(s) in allowed],
        "ids": list(ids) if ids is not None else None,
        "limit": limit,
    }
