"""Lease by id's part of the store: :meth:`LeaseByIdStore.lease_message` leases one named
message with one statement of :mod:`app.store.sql.lease_by_id`, or reports why it could not
(the service turns that into the error: :mod:`app.core.service.lease_by_id`)."""

from __future__ import annotations

from typing import Any

from psycopg import errors as pg_errors

from app.core.models import LeasedMessage, Queue
from app.core.ports import LeaseRefusal
from app.core.states import State
from app.store.dequeue import leased_messages
from app.store.errors import is_unique_violation, retry_transient
from app.store.paths import StorePaths, driver_sql
from app.store.rows import queue_guard
from app.store.sql import lease_by_id as sql

_LEASE = driver_sql(sql.MESSAGE_LEASE_IF_READY)
_LEASE_EXCLUSIVE = driver_sql(sql.MESSAGE_LEASE_IF_READY_EXCLUSIVE)
_EXCLUSIVE_INDEX = "messages_running_exclusive_uidx"


class LeaseByIdStore(StorePaths):
    """The lease of one named message."""

    @retry_transient
    async def lease_message(
        self, queue: Queue, message_id: str, lease_seconds: int | None
    ) -> LeasedMessage | LeaseRefusal | None:
        """Lease message ``message_id`` if it is ready (pending, or invisible and due, not
        expired; in an exclusive queue, no message of its value running): the leased message;
        else why not (:class:`LeaseRefusal`), or None when there is no such message."""
        params: dict[str, Any] = {
            **queue_guard(queue),
            "queue_id": queue.id,
            "id": message_id,
            "lease_override": lease_seconds,
            "queue_lease": queue.config.lease_seconds,
        }
        exclusive = queue.config.kind == "exclusive"
        try:
            rows = await self._driver_rows(_LEASE_EXCLUSIVE if exclusive else _LEASE, params)
        except pg_errors.UniqueViolation as error:
            # Another message of its value was leased at the same moment: the unique index
            # refused this lease, nothing changed. Its value is running: say so below.
            if not is_unique_violation(error, _EXCLUSIVE_INDEX):
                raise
            rows = []
        if rows:
            [leased] = leased_messages(rows, queue)
            return leased
        async with self._transaction() as conn:
            result = await conn.execute(sql.MESSAGE_LEASE_REFUSAL, params)
            row = result.first()
        if row is None:
            return None
        return LeaseRefusal(
            state=State(row.state),
            due=bool(row.due),
            expired=bool(row.expired),
            value_running=bool(row.value_running),
            exclusive_value=row.exclusive_value,
        )
