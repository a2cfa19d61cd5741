"""Validation of bulk-enqueue rows with the core's rules (:mod:`app.core.validation`), batch by
batch, as Spark's ``mapInArrow`` calls it on executors. Pure Python and pyarrow: no Spark here.

A batch comes in with the columns of :data:`INPUT_COLUMNS`, already gathered from the dataset
(the id and priority as text, the payload as a JSON object, the metadata as a JSON object of
strings) and goes out as :data:`OUTPUT_SCHEMA`: either a message ready to insert, or a rejected
row with the field and the reason, exactly as the HTTP API would have refused it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

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
    values = json.loads(text)
    return {str(key): str(value) for key, value in values.items()}


def check_row(values: dict[str, Any], rules: RowRules) -> dict[str, Any]:
    """One row as a message to insert (``id``, ``priority``, ``payload``, ``metadata``,
    ``exclusive_value``), or :class:`RowRejected`."""
    if values["_corrupt"] is not None:
        raise RowRejected(FIELD, f"{FIELD}: malformed record")
    message_id = values["_id"]
    if not message_id:
        raise RowRejected(
            f"{FIELD}.id", f"{FIELD}.id: is required (bulk enqueue is idempotent by message id)"
        )
    payload = values["_payload"]
    message = NewMessage(
        id=message_id,
        priority=_priority(values["_priority"]),
        payload=payload.encode() if payload is not None else None,
        metadata=_metadata(values["_metadata"]),
    )
    try:
        validation.new_message(FIELD, message, rules.config, rules.limits)
    except ValidationError as error:
        raise RowRejected(error.field, error.message) from None
    except PayloadTooLargeError as error:
        raise RowRejected(str(error.details.get("field", FIELD)), error.message) from None
    key = rules.config.exclusive_key
    return {
        "id": message.id,
        "priority": message.priority,
        "payload": payload,
        "metadata": json.dumps(message.metadata, separators=(",", ":")),
        "exclusive_value": message.metadata[key] if key is not None else None,
    }


def check_batch(batch: pa.RecordBatch, rules: RowRules) -> pa.RecordBatch:
    """Every row of ``batch`` checked: the output batch has one row per input row."""
    out: dict[str, list[Any]] = {name: [] for name in OUTPUT_SCHEMA.names}
    for values in batch.to_pylist():
        try:
            row = check_row(values, rules)
            row.update(field=None, reason=None, source=None)
        except RowRejected as rejected:
            row = dict.fromkeys(OUTPUT_SCHEMA.names)
            row.update(field=rejected.field, reason=rejected.reason, source=values["_source"])
        for name in OUTPUT_SCHEMA.names:
            out[name].append(row[name])
    return pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def checker(rules: RowRules) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The function ``mapInArrow`` runs on each partition."""

    def check(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield check_batch(batch, rules)

    return check
