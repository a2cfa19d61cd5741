"""The pipeline's bulk enqueue and the store's enqueue make the same rows.

app/pipeline/queries.py ``ENQUEUE_INSERT`` restates the rules of app/store/sql/enqueue.py
``MESSAGES_ENQUEUE_IF_NEW`` for a batch without per-message overrides (issue #16). Here, for each
queue shape that matters, one batch goes into two identically configured queues:

- through the pipeline's driver side, as ``sundial pipeline enqueue`` runs it for one batch:
  rows checked by :func:`app.pipeline.rows.check_batch`, staged as Parquet, then
  :func:`app.pipeline.enqueue.load` (QUEUE_LOCK, ENQUEUE_STAGE, ENQUEUE_COPY of the pipeline's
  own CSV, ENQUEUE_INSERT, ENQUEUE_WAKE). Spark is not started: what it would hand over (the
  gathered id, priority, payload and metadata as text) is given directly;
- through the service's enqueue (the store's statement).

Then every column of ``messages`` is compared (a column added later is compared too), the
values that depend on the transaction's clock through what they derive from it: the delay
(``visible_at - enqueued_at``) and a defaulted priority (the enqueue time in milliseconds).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg.rows import dict_row

from app.core.models import EnqueueOutcome, NewMessage, QueueConfig
from app.core.service import QueueService
from app.core.validation import Limits
from app.pipeline.database import connect
from app.pipeline.enqueue import EnqueueSummary, find_queue, load
from app.pipeline.loading import NOTIFY_CHANNEL
from app.pipeline.rows import INPUT_COLUMNS, RowRules, check_batch
from tests.helpers import make_queue

NS = "rules"
LIMITS = Limits(max_payload_bytes=4096)  # the service fixture's limit


@dataclass(frozen=True)
class Msg:
    """One message as both paths take it: no per-message overrides (the pipeline has none)."""

    id: str
    priority: int | None
    payload: str  # JSON text
    metadata: dict[str, str]


# In the queue before the batch, which brings the same id with other contents.
EXISTING = Msg("old-1", 1, '{"v": "old"}', {"tenant": "t0", "region": "eu"})

# Input order is not id order, so seq order means something. Payloads take every JSON shape:
# Spark's gather only makes objects, but the statements take any JSON text. Metadata values
# hold what CSV must quote. A message without the exclusive key goes only into queues that have
# no exclusive key.
BATCH = (
    Msg("old-1", 7, '{"v": "new"}', {"tenant": "t9", "region": "ap"}),  # left alone
    Msg("z-1", 5, '{"n": 1, "tags": ["x"], "deep": {"a": [1, {"k": null}]}}', {"tenant": "t1"}),
    Msg("a-2", None, '[1, 2.5, "three", false, null]', {"tenant": "t2", "region": "eu"}),
    Msg(
        "m-3",
        -3,
        '"with \\"quotes\\", commas,\\nand a newline"',
        {"tenant": "t1", "note": 'é 漢字 "q", x\ny'},
    ),
    Msg("b-4", 0, "42.5e2", {"tenant": 'T,3 "Quoted"', "region": ""}),
    Msg("k-5", None, "null", {"tenant": "t2", "region": "eu"}),
    Msg("c-6", 2**63 - 1, "{}", {"tenant": "t3"}),
    Msg("y-7", -(2**63), "true", {"tenant": "t1", "region": "us"}),
    Msg("z-1", 99, '{"n": "repeated"}', {"tenant": "t4", "region": "ap"}),  # the first one wins
    Msg("d-8", None, '{"s": "a\\nb", "e": "\\ud83d\\ude00", "u": "日本"}', {"tenant": "t5"}),
    Msg("e-9", None, '  { "spaced" : [ ] , "n": 1.50 }  ', {"tenant": "t1", "region": "eu"}),
    Msg("f-10", 3, '{"no": "metadata"}', {}),
    Msg("g-11", None, '{"only": "region"}', {"region": "ap"}),
)

QUEUE = {"lease_seconds": 45, "max_attempts": 7}  # not the defaults: both must leave them NULL
EXCLUSIVE = {"kind": "exclusive", "exclusive_key": "tenant"}
SHAPES = {
    "simple": {},
    "delayed": {"delay_seconds": 90},
    "exclusive": EXCLUSIVE,
    "filtered": {"filter_keys": ("region",)},
    "filtered-on-two-keys": {"filter_keys": ("region", "tenant")},
    "exclusive-filtered": {**EXCLUSIVE, "filter_keys": ("region",)},
    "exclusive-filtered-on-its-key": {**EXCLUSIVE, "filter_keys": ("tenant",)},
    "delayed-exclusive-filtered": {**EXCLUSIVE, "filter_keys": ("region",), "delay_seconds": 45},
}

# Values of one queue or one transaction, compared through what derives from them.
_PER_QUEUE = frozenset({"queue_id", "seq", "enqueued_at", "updated_at", "visible_at"})

_ROWS = """
    SELECT *, state::text AS state,
           visible_at - enqueued_at AS delay,
           updated_at - enqueued_at AS updated_after_enqueue,
           priority::numeric - round(extract(epoch FROM enqueued_at) * 1000) AS priority_offset_ms
    FROM messages WHERE queue_id = %(queue_id)s ORDER BY seq
"""
_CLOCK_MS = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _gathered(message: Msg) -> dict[str, str | None]:
    """The row :func:`app.pipeline.enqueue.gather` hands to the checker for ``message``."""
    return {
        "_corrupt": None,
        "_source": json.dumps(asdict(message)),
        "_id": message.id,
        "_priority": None if message.priority is None else str(message.priority),
        "_payload": message.payload,
        "_metadata": json.dumps(message.metadata) if message.metadata else None,
    }


def _through_pipeline(database_url: str, work: Path, name: str, batch: list[Msg]) -> EnqueueSummary:
    queue = find_queue(database_url, NS, name)
    schema = pa.schema([(column, pa.string()) for column in INPUT_COLUMNS])
    gathered = pa.RecordBatch.from_pylist([_gathered(m) for m in batch], schema=schema)
    checked = check_batch(gathered, RowRules(queue.config, LIMITS))
    assert [r for r in checked.to_pylist() if r["reason"] is not None] == []
    staging = work / "staging"
    staging.mkdir(parents=True)
    pq.write_table(pa.Table.from_batches([checked]), staging / "part-00000.parquet")
    return load(database_url, queue, str(staging), work / "rejects.jsonl", batch_rows=1000)


async def _through_store(
    service: QueueService, name: str, batch: list[Msg]
) -> list[EnqueueOutcome]:
    messages = [
        NewMessage(id=m.id, priority=m.priority, payload=m.payload.encode(), metadata=m.metadata)
        for m in batch
    ]
    return await service.enqueue(NS, name, messages)


def _rows(db: psycopg.Connection[Any], queue_id: int) -> list[dict[str, Any]]:
    return db.cursor(row_factory=dict_row).execute(_ROWS, {"queue_id": queue_id}).fetchall()


def _differences(
    pipeline: list[dict[str, Any]], store: list[dict[str, Any]], first: dict[str, Msg]
) -> list[tuple[str, str, Any, Any]]:
    """(id, column, pipeline's value, store's value) wherever the two rows of an id differ,
    but in per-queue values; a defaulted priority is compared as its offset from the enqueue
    time, an explicit one as itself."""
    assert [r["id"] for r in pipeline] == [r["id"] for r in store]  # the same ids, in seq order
    out = []
    for ours, theirs in zip(pipeline, store, strict=True):
        defaulted = first[ours["id"]].priority is None
        skip = _PER_QUEUE | {"priority" if defaulted else "priority_offset_ms"}
        out.extend(
            (ours["id"], column, ours.get(column), theirs.get(column))
            for column in sorted((set(ours) | set(theirs)) - skip)
            if ours.get(column) != theirs.get(column)
        )
    return out


def _assert_the_rules(
    rows: list[dict[str, Any]],
    config: QueueConfig,
    first: dict[str, Msg],
    window: tuple[int, int],
) -> None:
    """What both paths must do, as docs and ENQUEUE_INSERT's comment state it."""
    assert [r["id"] for r in rows] == [EXISTING.id, *[i for i in first if i != EXISTING.id]]
    for row in rows:
        message = EXISTING if row["id"] == EXISTING.id else first[row["id"]]
        assert row["payload"] == json.loads(message.payload), row["id"]
        assert row["metadata"] == message.metadata, row["id"]
        key, filter_key = config.exclusive_key, config.filter_key
        assert row["exclusive_value"] == (message.metadata[key] if key else None), row["id"]
        assert row["filter_value"] == (message.metadata.get(filter_key) if filter_key else None)
        assert (row["max_attempts"], row["lease_seconds"], row["attempts"]) == (None, None, 0)
        assert row["expires_at"] is None
        if row["id"] == EXISTING.id:
            continue  # left alone
        assert row["state"] == ("invisible" if config.delay_seconds else "pending"), row["id"]
        assert row["delay"] == timedelta(seconds=config.delay_seconds), row["id"]
        if message.priority is None:
            assert row["priority_offset_ms"] == 0, row["id"]
            assert window[0] <= row["priority"] <= window[1], row["id"]
        else:
            assert row["priority"] == message.priority, row["id"]


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_pipeline_and_the_store_enqueue_the_same_rows(
    shape: str,
    service: QueueService,
    db: psycopg.Connection[Any],
    database_url: str,
    tmp_path: Path,
):
    config = QueueConfig(**{**QUEUE, **SHAPES[shape]})
    key = config.exclusive_key
    batch = [m for m in BATCH if key is None or key in m.metadata]
    first: dict[str, Msg] = {}
    for message in batch:
        first.setdefault(message.id, message)
    queues = {}
    for side in ("pipeline", "store"):
        queues[side] = await make_queue(service, NS, side, **QUEUE, **SHAPES[shape])
        await _through_store(service, side, [EXISTING])
    # A waiting consumer on each queue, as a server registers it.
    with connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        pid = listener.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        for queue in queues.values():
            db.execute(
                "INSERT INTO queue_listeners (queue_id, listener_pid) VALUES (%s, %s)",
                (queue.id, pid),
            )

        before = db.execute(_CLOCK_MS).fetchone()[0]  # type: ignore[index]
        summary = _through_pipeline(database_url, tmp_path, "pipeline", batch)
        between = db.execute(_CLOCK_MS).fetchone()[0]  # type: ignore[index]
        outcomes = await _through_store(service, "store", batch)
        after = db.execute(_CLOCK_MS).fetchone()[0]  # type: ignore[index]

        woken = Counter(n.payload for n in listener.notifies(timeout=0.3))

    created = sum(o.created for o in outcomes)
    assert (summary.enqueued, summary.already_present) == (created, len(batch) - created)
    assert (summary.read, summary.rejected, created) == (len(batch), 0, len(first) - 1)
    pipeline_rows, store_rows = _rows(db, queues["pipeline"].id), _rows(db, queues["store"].id)
    assert _differences(pipeline_rows, store_rows, first) == []
    _assert_the_rules(store_rows, config, first, (between, after))
    _assert_the_rules(pipeline_rows, config, first, (before, between))
    # One wake-up per committed batch that made messages ready, none for a delayed queue.
    ready = 0 if config.delay_seconds else 1
    assert woken == Counter({str(q.id): ready for q in queues.values() if ready})
