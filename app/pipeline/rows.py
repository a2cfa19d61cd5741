"""Validation of bulk-enqueue rows with the core's rules (:mod:`app.core.validation`), batch by
batch, as Spark's ``mapInArrow`` calls it on executors. Pure Python and pyarrow: no Spark here.

A batch comes in with the columns of :data:`INPUT_COLUMNS`, already gathered from the dataset
(the id and priority as text, the payload as a JSON object, the metadata as a JSON object of
strings) and goes out as :data:`OUTPUT_SCHEMA`: either a message ready to insert, or a rejected
row with the field and the reason, exactly as the HTTP API would have refused it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from app.core import validation
from app.core.errors import PayloadTooLargeError, ValidationError
from app.core.models import NewMessage, QueueConfig

INPUT_COLUMNS = ("_corrupt", "_source", "_id", "_priority", "_payload", "_metadata")

OUTPUT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("priority", pa.int64()),
        ("payload", pa.string()),
        ("metadata", pa.string()),
        ("exclusive_value", pa.string()),
        ("field", pa.string()),
        ("reason", pa.string()),
        ("source", pa.string()),
    ]
)
"""A row is rejected when ``reason`` is set; then only ``field`` and ``source`` mean anything."""

OUTPUT_DDL = ", ".join(
    f"{f.name} {'bigint' if f.name == 'priority' else 'string'}" for f in OUTPUT_SCHEMA
)

MESSAGE_COLUMNS = ("id", "priority", "payload", "metadata", "exclusive_value")
"""The columns of a message ready to insert: the first columns of :data:`OUTPUT_SCHEMA`."""

_REJECTED = (None,) * len(MESSAGE_COLUMNS)

_decode_object = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.Encoder().encode

FIELD = "row"
"""The prefix of field names in rejections: ``row.id``, ``row.metadata.project``, ..."""

_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class RowRules:
    """What a row is checked against: its queue's configuration and the server's limits."""

    config: QueueConfig
    limits: validation.Limits


class RowRejected(Exception):
    """A row the queue would refuse."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def _priority(text: str | None) -> int | None:
    if text is None:
        return None
    if not _INTEGER.fullmatch(text.strip()):
        raise RowRejected(f"{FIELD}.priority", f"{FIELD}.priority: must be an integer")
    return int(text)


def _metadata(text: str | None) -> dict[str, str]:
    if text is None:
        return {}
    values = _decode_object(text)
    return {str(key): str(value) for key, value in values.items()}


def _check(
    corrupt: str | None,
    message_id: str | None,
    priority: str | None,
    payload: str | None,
    metadata: str | None,
    rules: RowRules,
) -> tuple[str, int | None, str | None, str, str | None]:
    """One gathered row as ``(id, priority, payload, metadata, exclusive_value)``, or
    :class:`RowRejected`."""
    if corrupt is not None:
        raise RowRejected(FIELD, f"{FIELD}: malformed record")
    if not message_id:
        raise RowRejected(
            f"{FIELD}.id", f"{FIELD}.id: is required (bulk enqueue is idempotent by message id)"
        )
    message = NewMessage(
        id=message_id,
        priority=_priority(priority),
        payload=payload.encode() if payload is not None else None,
        metadata=_metadata(metadata),
    )
    try:
        validation.new_message(FIELD, message, rules.config, rules.limits)
    except ValidationError as error:
        raise RowRejected(error.field, error.message) from None
    except PayloadTooLargeError as error:
        raise RowRejected(str(error.details.get("field", FIELD)), error.message) from None
    key = rules.config.exclusive_key
    return (
        message_id,
        message.priority,
        payload,
        _encode(message.metadata).decode(),
        message.metadata[key] if key is not None else None,
    )


def check_row(values: dict[str, Any], rules: RowRules) -> dict[str, Any]:
    """One row as a message to insert (``id``, ``priority``, ``payload``, ``metadata``,
    ``exclusive_value``), or :class:`RowRejected`."""
    checked = _check(
        values["_corrupt"],
        values["_id"],
        values["_priority"],
        values["_payload"],
        values["_metadata"],
        rules,
    )
    return dict(zip(MESSAGE_COLUMNS, checked, strict=True))


def _values(column: pa.Array) -> Iterable[Any]:
    """A column's values as Python objects (a column of nulls without converting them)."""
    if column.null_count == len(column):
        return itertools.repeat(None, len(column))
    return column.to_pylist()  # type: ignore[no-any-return]


def check_batch(batch: pa.RecordBatch, rules: RowRules) -> pa.RecordBatch:
    """Every row of ``batch`` checked: the output batch has one row per input row.

    Column by column, not row dicts: this runs once per row of a bulk load, on the executors.
    A row's source (the whole record as JSON) is only taken for the rows refused.
    """
    corrupt, ids, priorities, payloads, metadatas = (
        _values(batch.column(name))
        for name in ("_corrupt", "_id", "_priority", "_payload", "_metadata")
    )
    messages: list[list[Any]] = [[] for _ in MESSAGE_COLUMNS]
    fields: list[str | None] = []
    reasons: list[str | None] = []
    refused = False
    for bad, message_id, priority, payload, metadata in zip(
        corrupt, ids, priorities, payloads, metadatas, strict=True
    ):
        try:
            checked: tuple[Any, ...] = _check(bad, message_id, priority, payload, metadata, rules)
        except RowRejected as rejected:
            checked = _REJECTED
            fields.append(rejected.field)
            reasons.append(rejected.reason)
            refused = True
        else:
            fields.append(None)
            reasons.append(None)
        for column, value in zip(messages, checked, strict=True):
            column.append(value)
    reason = pa.array(reasons, pa.string())
    source = batch.column("_source")
    if refused:
        source = pc.if_else(pc.is_valid(reason), source, pa.scalar(None, pa.string()))
    else:
        source = pa.nulls(len(reason), pa.string())
    return pa.RecordBatch.from_arrays(
        [
            *(
                pa.array(values, type=OUTPUT_SCHEMA.field(name).type)
                for name, values in zip(MESSAGE_COLUMNS, messages, strict=True)
            ),
            pa.array(fields, pa.string()),
            reason,
            source,
        ],
        schema=OUTPUT_SCHEMA,
    )


def checker(rules: RowRules) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The function ``mapInArrow`` runs on each partition."""

    def check(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield check_batch(batch, rules)

    return check
