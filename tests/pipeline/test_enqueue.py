"""Bulk enqueue end to end: CSV, JSON lines and Parquet datasets with duplicates and bad rows,
into simple and exclusive queues, idempotent on rerun, refusing paused queues, waking waiting
consumers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.core.errors import NotFoundError, QueuePausedError
from app.core.validation import Limits
from app.pipeline.database import connect
from app.pipeline.enqueue import Columns, bulk_enqueue, detect_format, find_queue
from app.store import maintenance
from bench.pipeline_data import bulk_rows, write_jsonl

LIMITS = Limits(max_payload_bytes=1024)


def _make_queue(db, name: str, *, exclusive_key: str | None = None, **config) -> None:
    db.execute("INSERT INTO namespaces (name) VALUES ('shop') ON CONFLICT DO NOTHING")
    values = {
        "kind": "exclusive" if exclusive_key else "simple",
        "exclusive_key": exclusive_key,
        "lease_seconds": 30,
        "delay_seconds": 0,
        "max_attempts": 3,
        "retry_delay_seconds": 0,
        "retry_delay_max_seconds": 3600,
        "retention_seconds": 3600,
        "enqueue_paused": False,
        **config,
    }
    db.execute(
        f"INSERT INTO queues (namespace, name, {', '.join(values)})"
        f" VALUES ('shop', %s, {', '.join(['%s'] * len(values))})",
        [name, *values.values()],
    )


def _run(spark, database_url, tmp_path, queue_name, source, columns, **kw):
    queue = find_queue(database_url, "shop", queue_name)
    rejects = tmp_path / "rejects.jsonl"
    summary = bulk_enqueue(
        spark,
        database_url,
        queue,
        str(source),
        fmt=kw.pop("fmt", None) or detect_format(str(source)),
        columns=columns,
        limits=LIMITS,
        staging=str(tmp_path / "staging"),
        rejects=rejects,
        batch_rows=kw.pop("batch_rows", 100),
        **kw,
    )
    return summary, [json.loads(line) for line in rejects.read_text().splitlines()]


def _messages(db, queue_name):
    return {
        row[0]: row[1:]
        for row in db.execute(
            "SELECT m.id, m.state::text, m.priority, m.payload, m.metadata, m.exclusive_value,"
            " m.max_attempts, m.lease_seconds FROM messages m JOIN queues q ON q.id = m.queue_id"
            " WHERE q.name = %s",
            (queue_name,),
        )
    }


def test_csv_into_an_exclusive_queue_with_duplicates_and_bad_rows(
    spark, db, database_url, tmp_path
):
    _make_queue(db, "builds", exclusive_key="project", filter_key="project")
    # One id is in the queue already, with other contents: it must stay untouched.
    db.execute(
        "INSERT INTO messages (queue_id, id, priority, state, payload, metadata,"
        " exclusive_value, visible_at)"
        " SELECT id, 'row-3', 42, 'pending', '\"old\"', '{\"project\": \"x\"}', 'x', now()"
        " FROM queues WHERE name = 'builds'"
    )
    rows = bulk_rows(600, duplicates=50, malformed=30)
    source = tmp_path / "input.csv"
    with source.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "priority", "project", "body"])
        writer.writeheader()
        writer.writerows(rows)
        out.write('"row-9000",1,p1,"too","many","columns"\n')
        out.write(f'"big-1",1,p1,"{"x" * 2000}"\n')  # payload over the 1024-byte limit
    columns = Columns(id="id", priority="priority", payload=["body"], metadata=["project"])

    progress: list[int] = []
    summary, rejects = _run(
        spark,
        database_url,
        tmp_path,
        "builds",
        source,
        columns,
        started=progress.append,
        advanced=progress.append,
    )

    assert (summary.read, summary.rejected) == (600 + 50 + 30 + 2, 32)
    assert summary.enqueued == 599  # row-3 was there
    assert summary.already_present == 50 + 1
    assert progress[0] == summary.read
    assert sum(progress[1:]) == summary.read
    by_field: dict[str, int] = {}
    for reject in rejects:
        by_field[reject["field"]] = by_field.get(reject["field"], 0) + 1
    assert by_field == {
        "row.id": 10,
        "row.priority": 10,
        "row.metadata.project": 10,
        "row": 1,
        "row.payload": 1,
    }
    missing = next(r for r in rejects if r["field"] == "row.metadata.project")
    assert "required" in missing["reason"]
    assert json.loads(missing["source"])["id"].startswith("no-project-")
    malformed = next(r for r in rejects if r["field"] == "row")
    assert malformed["source"].startswith('"row-9000"')
    assert "1024" in next(r for r in rejects if r["field"] == "row.payload")["reason"]

    messages = _messages(db, "builds")
    assert len(messages) == 600
    assert messages["row-3"][1:3] == (42, "old")
    state, priority, payload, metadata, value, max_attempts, lease = messages["row-7"]
    assert (state, priority, payload, metadata, value) == (
        "pending",
        7,
        {"body": "item 7"},
        {"project": "p7"},
        "p7",
    )
    assert (max_attempts, lease) == (None, None)  # the queue's current settings apply
    # The queue's filter_key is indexed for filtered dequeues, as the API's enqueue does.
    filter_values = db.execute(
        "SELECT id, filter_value FROM messages WHERE id IN ('row-7', 'row-3')"
    ).fetchall()
    assert dict(filter_values) == {"row-7": "p7", "row-3": None}  # row-3 was inserted raw

    # Rerun: nothing new, everything already present.
    again, _ = _run(spark, database_url, tmp_path, "builds", source, columns)
    assert (again.enqueued, again.already_present, again.rejected) == (0, 650, 32)
    assert len(_messages(db, "builds")) == 600


def test_jsonl_into_a_delayed_queue_with_default_payload_and_priority(
    spark, db, database_url, tmp_path
):
    _make_queue(db, "later", delay_seconds=60)
    rows = [{"id": f"j-{i}", "n": i, "tags": {"a": [i]}} for i in range(40)]
    rows.append({"id": "j-1", "n": 99})  # duplicate id
    rows.append({"n": 5})  # no id
    source = tmp_path / "input.jsonl"
    write_jsonl(rows, source, garbage_lines=2)

    summary, rejects = _run(spark, database_url, tmp_path, "later", source, Columns())

    assert (summary.read, summary.enqueued, summary.already_present, summary.rejected) == (
        44,
        40,
        1,
        3,
    )
    assert sorted(r["field"] for r in rejects) == ["row", "row", "row.id"]
    messages = _messages(db, "later")
    state, priority, payload, metadata, *_ = messages["j-3"]
    assert state == "invisible"  # the queue's delay
    assert payload == {"n": 3, "tags": {"a": [3]}}
    assert metadata == {}
    assert priority > 1_600_000_000_000  # the enqueue time in milliseconds
    visible = db.execute(
        "SELECT min(visible_at - enqueued_at) FROM messages WHERE id LIKE 'j-%%'"
    ).fetchone()[0]
    assert visible.total_seconds() == 60


def test_parquet_in_small_batches_wakes_waiting_consumers(spark, db, database_url, tmp_path):
    _make_queue(db, "jobs")
    queue_id = db.execute("SELECT id FROM queues WHERE name = 'jobs'").fetchone()[0]
    source = tmp_path / "input.parquet"
    pq.write_table(
        pa.table({"key": [f"p-{i}" for i in range(250)], "prio": list(range(250))}), source
    )
    with connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN sundial_ready")
        pid = listener.execute("SELECT pg_backend_pid()").fetchone()[0]
        db.execute(
            "INSERT INTO queue_listeners (queue_id, listener_pid) VALUES (%s, %s)", (queue_id, pid)
        )

        summary, _ = _run(
            spark,
            database_url,
            tmp_path,
            "jobs",
            source,
            Columns(id="key", priority="prio"),
            batch_rows=100,
        )
        assert (summary.enqueued, summary.rejected) == (250, 0)
        woken = [n.payload for n in listener.notifies(timeout=5, stop_after=3)]
    assert woken == [str(queue_id)] * 3  # one per committed batch
    messages = _messages(db, "jobs")
    assert messages["p-17"][:3] == ("pending", 17, {})


async def test_a_rerun_enqueues_again_only_the_ids_moved_to_history(
    spark, db, database_url, engine, tmp_path
):
    """Idempotency by id covers the live table, as for the API's enqueue (docs/pipeline.md):
    a rerun skips every id still there, finished or not, and enqueues again the ids whose
    messages the scheduler has moved to history."""
    _make_queue(db, "reruns", retention_seconds=0)
    source = tmp_path / "input.jsonl"
    write_jsonl([{"id": f"r-{i}", "n": i} for i in range(10)], source)
    first, _ = _run(spark, database_url, tmp_path, "reruns", source, Columns())
    assert (first.enqueued, first.already_present) == (10, 0)
    db.execute(
        "UPDATE messages SET state = 'completed', finished_at = now() - interval '1 second'"
        " WHERE id IN ('r-0', 'r-1', 'r-2', 'r-3')"
    )
    async with engine.connect() as conn:
        assert await maintenance.archive_finished(conn) == 4
    db.execute("UPDATE messages SET state = 'completed', finished_at = now() WHERE id = 'r-4'")

    again, _ = _run(spark, database_url, tmp_path, "reruns", source, Columns())
    assert (again.enqueued, again.already_present) == (4, 6)
    states = {i: state for i, (state, *_) in _messages(db, "reruns").items()}
    assert states == {
        **{f"r-{i}": "pending" for i in range(10)},
        "r-4": "completed",  # finished, still in the live table: not enqueued again
    }


def test_paused_or_missing_queues_are_refused_before_any_work(db, database_url):
    _make_queue(db, "held", enqueue_paused=True)
    with pytest.raises(QueuePausedError, match="paused"):
        find_queue(database_url, "shop", "held")
    with pytest.raises(NotFoundError):
        find_queue(database_url, "shop", "nope")


def test_unknown_columns_are_named(spark, db, database_url, tmp_path):
    _make_queue(db, "jobs")
    source = tmp_path / "input.csv"
    source.write_text("id,body\na,b\n")
    with pytest.raises(Exception, match="metadata-columns"):
        _run(spark, database_url, tmp_path, "jobs", source, Columns(metadata=["owner"]))


def test_formats_are_told_by_extension(tmp_path: Path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "part-0.jsonl").write_text("{}\n")
    assert detect_format(str(tmp_path / "d")) == "jsonl"
    assert detect_format("x.parquet") == "parquet"
    assert detect_format("x.csv") == "csv"
