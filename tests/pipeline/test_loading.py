"""Bulk enqueue's database side over several connections (app/pipeline/loading.py): the same rows
as over one, seq in input order, the first of a repeated id enqueued, and a failure anywhere
stops every connection. No Spark: checked rows are staged as the executors would stage them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.core.errors import QueuePausedError
from app.core.validation import Limits
from app.pipeline import loading
from app.pipeline.database import connect
from app.pipeline.enqueue import EnqueueSummary, find_queue, load
from app.pipeline.rows import INPUT_COLUMNS, RowRules, check_batch
from tests.pipeline.test_enqueue import _make_queue as make_queue

LIMITS = Limits(max_payload_bytes=1024)


def _stage(database_url: str, staging: Path, rows: list[dict[str, str]], files: int = 3) -> None:
    """``rows`` checked and written as ``files`` staged Parquet files, in input order."""
    queue = find_queue(database_url, "shop", "bulk")
    schema = pa.schema([(name, pa.string()) for name in INPUT_COLUMNS])
    gathered = [
        {
            "_corrupt": None,
            "_source": json.dumps(row),
            "_id": row["id"],
            "_priority": row.get("priority"),
            "_payload": json.dumps({"n": row["n"]}),
            "_metadata": None,
        }
        for row in rows
    ]
    staging.mkdir()
    size = -(-len(gathered) // files)
    for part in range(files):
        batch = pa.RecordBatch.from_pylist(gathered[part * size : (part + 1) * size], schema)
        checked = check_batch(batch, RowRules(queue.config, LIMITS))
        pq.write_table(pa.Table.from_batches([checked]), staging / f"part-{part:05d}.parquet")


def _input() -> list[dict[str, str]]:
    """300 rows, ids out of id order, every tenth one repeating an earlier id, one bad id."""
    rows = [{"id": f"k-{(i * 7919) % 1000:03d}", "n": str(i), "priority": "5"} for i in range(270)]
    for i in range(30):
        rows.insert(10 * i + 9, {"id": rows[i * 8]["id"], "n": f"again-{i}", "priority": "1"})
    rows[150] = {"id": "bad id", "n": "x"}
    return rows


def _load(database_url: str, tmp_path: Path, connections: int, **options: Any) -> EnqueueSummary:
    """Load what :func:`_stage` staged under ``tmp_path`` into shop/bulk, 16 rows a batch."""
    return load(
        database_url,
        find_queue(database_url, "shop", "bulk"),
        str(tmp_path / "staging"),
        tmp_path / "rejects.jsonl",
        batch_rows=16,
        connections=connections,
        **options,
    )


@pytest.mark.parametrize("connections", [1, 3])
def test_several_connections_enqueue_what_one_does(db, database_url, tmp_path, connections):
    make_queue(db, "bulk")
    rows = _input()
    _stage(database_url, tmp_path / "staging", rows)
    advanced: list[int] = []

    summary = _load(database_url, tmp_path, connections, advanced=advanced.append)

    first: dict[str, str] = {}
    for row in rows:
        if row["id"] != "bad id":
            first.setdefault(row["id"], row["n"])
    assert (summary.read, summary.rejected) == (300, 1)
    assert (summary.enqueued, summary.already_present) == (len(first), 299 - len(first))
    assert sum(advanced) == 300  # every row, loaded or rejected, reported to the progress bar
    stored = db.execute("SELECT id, payload ->> 'n' FROM messages ORDER BY seq").fetchall()
    # seq follows the input order, and of a repeated id the first one is the message.
    assert stored == list(first.items())


def test_a_pause_during_the_load_stops_it_at_the_next_batch(db, database_url, tmp_path):
    make_queue(db, "bulk")
    rows = [row for row in _input() if row["id"] != "bad id"]
    _stage(database_url, tmp_path / "staging", rows)

    def pause(rows: int) -> None:  # after the first committed batch
        with connect(database_url, autocommit=True) as other:
            other.execute("UPDATE queues SET enqueue_paused = true WHERE name = 'bulk'")

    with pytest.raises(QueuePausedError, match="paused"):
        _load(database_url, tmp_path, 1, advanced=pause)
    first_batch = {row["id"] for row in rows[:16]}
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == len(first_batch)


def test_a_failing_connection_stops_the_others(db, database_url, tmp_path, monkeypatch):
    make_queue(db, "bulk")
    _stage(database_url, tmp_path / "staging", _input())
    batches: list[int] = []
    insert_batch = loading.insert_batch

    def failing_third(conn, queue, rows):
        batches.append(rows.num_rows)
        if len(batches) == 3:
            raise QueuePausedError("queue shop/bulk was paused for enqueue")
        return insert_batch(conn, queue, rows)

    monkeypatch.setattr(loading, "insert_batch", failing_third)
    with pytest.raises(QueuePausedError, match="paused"):
        _load(database_url, tmp_path, 3)
    # Each connection stops at its next batch: of the 18 or so batches, a few were tried.
    assert len(batches) <= 3 + 2 * (1 + loading.INBOX)
    loaded = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert loaded <= 16 * (len(batches) - 1)
