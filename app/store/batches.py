"""The inputs of the batch statements, as the JSON documents they bind.

A batch enqueue and a batch acknowledgement bind one JSON array of row objects, which the SQL
reads with ``json_to_recordset`` (see :mod:`app.store.sql`), rather than one array per
column: psycopg dumps a list element by element in Python, which made a 100-message enqueue
spend 1.3 ms of server CPU in the driver alone; msgspec encodes the same rows as one document in
a tenth of that, and PostgreSQL parses it faster than eleven arrays of text. Keys that would be
null are left out (``json_to_recordset`` reads an absent key as NULL), so the documents stay
small. ADR 0010 has the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from app.core.ports import NewRow


class _EnqueueRow(msgspec.Struct, omit_defaults=True):
    """One message of a batch enqueue; the keys are the SQL's ``json_to_recordset`` columns."""

    id: str
    metadata: dict[str, str]
    delay_seconds: int
    priority: int | None = None
    payload: str | None = None
    exclusive_value: str | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    visible_at: datetime | None = None
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


class _LeaseItem(msgspec.Struct, omit_defaults=True):
    """One item of a batch complete or fail: a message, its lease and, to fail it, an error."""

    id: str
    lease_id: str | None = None
    error: str | None = None


_encode = msgspec.json.Encoder().encode


def enqueue_rows(rows: Sequence[NewRow]) -> str:
    """The ``rows`` document of a batch enqueue, in request order.

    A payload travels as a string holding its JSON text, which the statement parses: embedded
    as raw JSON it would be parsed twice, and bytes that are not one JSON value could change
    the row around them.
    """
    return _encode(
        [
            _EnqueueRow(
                id=r.id,
                metadata=r.metadata,
                delay_seconds=r.delay_seconds,
                priority=r.priority,
                payload=r.payload.decode() if r.payload is not None else None,
                exclusive_value=r.exclusive_value,
                max_attempts=r.max_attempts,
                lease_seconds=r.lease_seconds,
                visible_at=r.visible_at,
                ttl_seconds=r.ttl_seconds,
                expires_at=r.expires_at,
            )
            for r in rows
        ]
    ).decode()


def lease_items(items: Sequence[tuple[str, str | None]]) -> str:
    """The ``items`` document of a batch complete: (message id, lease id) pairs."""
    return _encode([_LeaseItem(id=i, lease_id=lease) for i, lease in items]).decode()


def failed_items(items: Sequence[tuple[str, str | None, str | None]]) -> str:
    """The ``items`` document of a batch fail: (message id, lease id, error) triples."""
    return _encode([_LeaseItem(id=i, lease_id=lease, error=e) for i, lease, e in items]).decode()
