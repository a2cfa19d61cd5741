"""End to end: a generated history exported to the lake, reported on with Spark, and every figure
of the report checked against the same figure computed by plain SQL over ``message_history``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from app.pipeline.database import connect
from app.pipeline.export import export_history
from app.pipeline.prune import prune_history
from app.pipeline.report import run_report
from bench.pipeline_data import SQL_FIGURES, generate_history

COUNT = 20_000

REPORT = """
SELECT namespace, queue, hour, enqueued, completed, errored, canceled, expired,
       wait_p50_us, wait_p95_us, wait_p99_us, run_p50_us, run_p95_us, run_p99_us,
       attempts, lease_expired, lease_expiry_rate, busiest_exclusive
FROM report_hourly WHERE hour >= %(since)s AND hour < %(until)s ORDER BY 1, 2, 3
"""

OPEN = {"since": datetime(1970, 1, 1, tzinfo=UTC), "until": datetime(9999, 1, 1, tzinfo=UTC)}


def _lake_rows(lake: str) -> int:
    return ds.dataset(Path(lake) / "history", format="parquet", partitioning="hive").count_rows()


def _history_rows(db) -> int:
    return db.execute("SELECT count(*) FROM message_history").fetchone()[0]


def _normalised(rows):
    out = []
    for row in rows:
        row = list(row)
        row[16] = None if row[16] is None else round(row[16], 12)
        out.append(row)
    return out


def test_export_and_report_match_plain_sql(spark, db, database_url, lake):
    generate_history(db, COUNT, days=2.0, end_days_ago=1.0)

    exported = export_history(database_url, lake, lag_seconds=0)
    assert exported.rows == COUNT
    assert _lake_rows(lake) == COUNT
    # 2 namespaces x 2 queues, over the 3 or 4 UTC days the history touches: one file each.
    files = sorted(Path(lake, "history").rglob("*.parquet"))
    assert len(files) == exported.files
    assert {f.parent.parent.parent.name for f in files} == {"namespace=acme", "namespace=globex"}
    assert not list(Path(lake, "history", "_staging").glob("*"))

    result = run_report(spark, database_url, lake)
    expected = _normalised(db.execute(SQL_FIGURES, OPEN).fetchall())
    actual = _normalised(db.execute(REPORT, OPEN).fetchall())
    assert result.rows == len(expected) > 4 * 48
    assert actual == expected
    # Real figures, not a vacuous match.
    totals = db.execute(
        "SELECT sum(enqueued), sum(completed), sum(errored), sum(canceled), sum(expired),"
        " sum(lease_expired), count(*) FILTER (WHERE busiest_exclusive <> '[]')"
        " FROM report_hourly"
    ).fetchone()
    assert totals[:5] == (COUNT, COUNT * 16 // 20, COUNT * 2 // 20, COUNT // 20, COUNT // 20)
    assert totals[5] > COUNT // 20
    assert totals[6] > 0

    # The same rows are in the lake, partitioned by day.
    lake_report = ds.dataset(
        Path(lake) / "reports" / "hourly", format="parquet", partitioning="hive"
    ).to_table()
    assert lake_report.num_rows == len(expected)
    assert sum(lake_report.column("enqueued").to_pylist()) == COUNT


def test_rerunning_a_window_is_idempotent_and_touches_only_its_days(spark, db, database_url, lake):
    generate_history(db, 4000, days=2.0, end_days_ago=1.0)
    export_history(database_url, lake, lag_seconds=0)
    run_report(spark, database_url, lake)
    first = db.execute(REPORT, OPEN).fetchall()

    # A window of one day, given in hours: widened to the whole day, and rerun twice.
    day = first[len(first) // 2][2].replace(hour=0)
    since, until = day + timedelta(hours=5), day + timedelta(hours=7)
    for _ in range(2):
        result = run_report(spark, database_url, lake, since=since, until=until)
        assert (result.since, result.until) == (day, day + timedelta(days=1))
        assert db.execute(REPORT, OPEN).fetchall() == first
    window = {"since": day, "until": day + timedelta(days=1)}
    assert db.execute(REPORT, window).fetchall() == _normalised_sql(db, window)
    lake_days = {
        p.name for p in Path(lake, "reports", "hourly").iterdir() if p.name.startswith("day=")
    }
    assert f"day={day.date().isoformat()}" in lake_days
    lake_rows = ds.dataset(
        Path(lake) / "reports" / "hourly", format="parquet", partitioning="hive"
    ).count_rows()
    assert lake_rows == len(first)


def _normalised_sql(db, window):
    return [tuple(r) for r in db.execute(SQL_FIGURES, window).fetchall()]


def test_export_is_incremental(db, database_url, lake):
    generate_history(db, 3000, days=1.0, end_days_ago=1.0)
    first = export_history(database_url, lake, lag_seconds=0)
    assert first.rows == 3000

    again = export_history(database_url, lake, lag_seconds=0)
    assert again.rows == 0
    assert again.low == first.high

    generate_history(db, 500, days=1.0, end_days_ago=1.0, offset=3000)
    third = export_history(database_url, lake, lag_seconds=0)
    assert (third.rows, third.low) == (500, again.high)
    assert _lake_rows(lake) == _history_rows(db) == 3500
    ids = ds.dataset(Path(lake) / "history", format="parquet").to_table(columns=["id"])
    assert len(set(ids.column("id").to_pylist())) == 3500


def test_export_leaves_rows_of_open_transactions_for_the_next_run(db, database_url, lake):
    generate_history(db, 100, days=1.0, end_days_ago=1.0)
    with connect(database_url) as late:
        # An archive that started before the export and commits after it.
        generate_history(late, 50, days=1.0, end_days_ago=1.0, offset=100)
        first = export_history(database_url, lake, lag_seconds=0)
        assert first.rows == 100
    second = export_history(database_url, lake, lag_seconds=0)
    assert second.rows == 50
    assert _lake_rows(lake) == 150


@pytest.mark.parametrize("phase", ["staged", "moved"])
def test_an_interrupted_export_shows_no_partial_partition_and_resumes(
    db, database_url, lake, phase
):
    generate_history(db, 2000, days=1.0, end_days_ago=1.0)

    def crash(reached: str) -> None:
        if reached == phase:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_history(database_url, lake, lag_seconds=0, hook=crash)
    visible = _lake_rows(lake) if Path(lake, "history").exists() else 0
    # Before the move nothing is visible; after it, every partition holds the run's whole slice.
    assert visible == (0 if phase == "staged" else 2000)
    open_run = db.execute(
        "SELECT id FROM pipeline_export_runs WHERE committed_at IS NULL"
    ).fetchone()[0]

    # More history arrives meanwhile: the redone run keeps its window, the next run takes it.
    generate_history(db, 300, days=1.0, end_days_ago=1.0, offset=2000)
    resumed = export_history(database_url, lake, lag_seconds=0)
    assert (resumed.run_id, resumed.resumed, resumed.rows) == (open_run, True, 2000)
    assert _lake_rows(lake) == 2000
    assert export_history(database_url, lake, lag_seconds=0).rows == 300
    assert _lake_rows(lake) == _history_rows(db) == 2300


def test_prune_drops_only_exported_partitions_past_retention(db, database_url, lake):
    generate_history(db, 1000, days=3.0, end_days_ago=40.0)  # 40-43 days ago
    generate_history(db, 1000, days=1.0, end_days_ago=1.0, offset=1000)
    partitions = "SELECT count(*) FROM pg_inherits WHERE inhparent = 'message_history'::regclass"
    before = db.execute(partitions).fetchone()[0]

    nothing = prune_history(database_url, retention_days=30)
    assert nothing.dropped == []  # nothing exported yet

    export_history(database_url, lake, lag_seconds=0)
    # A late archive into an old day, after the export: that partition must stay.
    generate_history(db, 10, days=0.1, end_days_ago=41.5, offset=5000)
    late_days = db.execute(
        "SELECT DISTINCT to_char(finished_at AT TIME ZONE 'UTC', 'YYYYMMDD') FROM message_history"
        " WHERE id LIKE 'm-50__' ORDER BY 1"
    ).fetchall()  # one day, or two when the late rows straddle a midnight

    pruned = prune_history(database_url, retention_days=30)
    assert pruned.unexported == [f"message_history_{day}" for (day,) in late_days]
    assert len(pruned.dropped) >= 3
    assert db.execute(partitions).fetchone()[0] == before - len(pruned.dropped)
    remaining = db.execute(
        "SELECT count(*) FROM message_history WHERE finished_at < now() - interval '30 days'"
    ).fetchone()[0]
    assert remaining > 0  # the late partition's rows
    # Everything dropped is in the lake.
    assert _lake_rows(lake) == 2000
