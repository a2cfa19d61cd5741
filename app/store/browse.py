"""Browsing a queue's messages: :meth:`BrowseStore.query` lists them by state, metadata and
priority, newest first or lowest priority first, a page at a time, with opaque cursors."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import msgspec
import sqlalchemy as sa

from app.core.errors import ValidationError
from app.core.models import MessageFilter, MessagePage, Queue
from app.store.paths import StorePaths
from app.store.rows import message_from_row, queue_params
from app.store.sql.reads import MESSAGE_COLUMNS_SQL

_json = msgspec.json.Encoder()


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


class BrowseStore(StorePaths):
    """The listing of a queue's messages."""

    async def query(self, queue: Queue, spec: MessageFilter) -> MessagePage:
        """List messages by filter, newest first or lowest priority first, a page at a time."""
        conditions = [sa.text("m.queue_id = :queue_id")]
        params: dict[str, Any] = {**queue_params(queue), "limit": spec.limit + 1}
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
            f"SELECT {MESSAGE_COLUMNS_SQL}, m.seq FROM messages m "
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
        return MessagePage([message_from_row(row) for row in rows], next_cursor)
