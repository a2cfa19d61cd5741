"""The pipeline over two pools (docs/scaling.md): the test's database is the catalogue and pool
``default``, a second fresh database on the same server is pool ``b``, both registered.

Every pool's history reaches the lake once, with its pool, from its own watermark; the prune
keeps to each pool's watermark; the report's history says each row's pool; a bulk enqueue
writes to the database of the namespace's pool.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from app.bootstrap.commands import main
from app.config import get_settings
from app.core.errors import UnavailableError
from app.pipeline import commands
from app.pipeline.database import connect
from app.pipeline.enqueue import namespace_pool
from app.pipeline.export import export_history, export_pools
from app.pipeline.lock import ExportBusyError, Locked, PoolMismatchError
from app.pipeline.prune import prune_pools
from app.pipeline.report import read_history
from app.store import pool_registry
from bench.pipeline_data import generate_history
from tests.pipeline.test_enqueue import _make_queue as make_queue

if TYPE_CHECKING:
    pass

Connection = psycopg.Connection[Any]


@pytest.fixture
def pools(database_url: str, pool_b_url: str) -> dict[str, str]:
    """Both pools' URLs by name, registered as a server's start registers them."""
    pool_registry.register(database_url, "default", database_url)
    pool_registry.register(database_url, "b", pool_b_url)
    return {"default": database_url, "b": pool_b_url}


@pytest.fixture
def db_b(pool_b_url: str) -> Iterator[Connection]:
    """An autocommit connection to pool ``b``'s database."""
    with connect(pool_b_url, autocommit=True) as conn:
        yield conn


def _exported(lake: str) -> list[tuple[str, str]]:
    """``(pool, id)`` of every history row in the lake, duplicates kept, sorted."""
    table = ds.dataset(Path(lake, "history"), format="parquet").to_table(columns=["pool", "id"])
    pools, ids = table.column("pool").to_pylist(), table.column("id").to_pylist()
    return sorted(zip(pools, ids, strict=True))


def _archived(db: Connection, db_b: Connection) -> list[tuple[str, str]]:
    """``(pool, id)`` of every row of both pools' ``message_history``, sorted."""
    rows = [("default", id) for (id,) in db.execute("SELECT id FROM message_history")]
    rows += [("b", id) for (id,) in db_b.execute("SELECT id FROM message_history")]
    return sorted(rows)


def test_an_export_takes_each_pools_history_once_from_its_own_watermark(db, db_b, pools, lake):
    # The same namespaces, queues and days on both pools (a namespace that moved leaves its
    # history behind), so the two pools' files share partitions.
    generate_history(db, 300, days=1.0, end_days_ago=1.0)
    generate_history(db_b, 200, days=1.0, end_days_ago=1.0, offset=300)

    first = export_pools(pools, lake, lag_seconds=0)
    assert {pool: run.rows for pool, run in first.pools.items()} == {"default": 300, "b": 200}
    assert (first.rows, first.files) == (500, sum(run.files for run in first.pools.values()))
    assert _exported(lake) == _archived(db, db_b)
    # Each database numbers its own runs: both first runs are run 1, in files of their own.
    both = [
        part.parent
        for part in Path(lake, "history").rglob("part-1.parquet")
        if (part.parent / "part-b-1.parquet").exists()
    ]
    assert both

    again = export_pools(pools, lake, lag_seconds=0)
    assert {pool: (run.rows, run.low) for pool, run in again.pools.items()} == {
        pool: (0, run.high) for pool, run in first.pools.items()
    }

    generate_history(db_b, 50, days=1.0, end_days_ago=1.0, offset=500)
    third = export_pools(pools, lake, lag_seconds=0)
    assert {pool: run.rows for pool, run in third.pools.items()} == {"default": 0, "b": 50}
    assert third.pools["b"].low == again.pools["b"].high
    assert _exported(lake) == _archived(db, db_b)
    assert Counter(pool for pool, _ in _exported(lake)) == {"default": 300, "b": 250}


def test_an_export_interrupted_on_one_pool_redoes_that_pools_run_only(db, db_b, pools, lake):
    generate_history(db, 300, days=1.0, end_days_ago=1.0)
    generate_history(db_b, 200, days=1.0, end_days_ago=1.0, offset=300)
    moved: list[str] = []

    def crash_after_the_second_pools_move(phase: str) -> None:
        if phase == "moved":
            moved.append(phase)
            if len(moved) == 2:  # default's run committed; b's files moved, its run not
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_pools(pools, lake, lag_seconds=0, hook=crash_after_the_second_pools_move)
    assert _exported(lake) == _archived(db, db_b)

    redone = export_pools(pools, lake, lag_seconds=0)
    assert (redone.pools["b"].run_id, redone.pools["b"].resumed) == (1, True)
    assert (redone.pools["default"].resumed, redone.rows) == (False, 200)
    assert _exported(lake) == _archived(db, db_b)  # b's files replaced, not doubled


def test_a_pool_busy_with_another_job_stops_export_and_prune_before_any_work(
    db, db_b, pools, pool_b_url, lake
):
    generate_history(db, 100, days=1.0, end_days_ago=1.0)
    with connect(pool_b_url, autocommit=True) as other, Locked(other):
        with pytest.raises(ExportBusyError, match="pool 'b'"):
            export_pools(pools, lake, lag_seconds=0)
        with pytest.raises(ExportBusyError, match="pool 'b'"):
            prune_pools(pools, retention_days=30)
    assert db.execute("SELECT count(*) FROM pipeline_export_runs").fetchone() == (0,)
    assert not Path(lake).exists()
    assert export_pools(pools, lake, lag_seconds=0).rows == 100


def test_a_pool_name_leading_to_another_pools_database_is_refused(pools, pool_b_url, lake):
    with pytest.raises(PoolMismatchError, match="registered as pool 'b'"):
        export_pools({"c": pool_b_url}, lake, lag_seconds=0)
    with pytest.raises(PoolMismatchError, match="registered as pool 'b'"):
        prune_pools({"c": pool_b_url}, retention_days=30)
    assert not Path(lake).exists()


def test_prune_keeps_to_each_pools_own_watermark(db, db_b, pools, lake):
    generate_history(db, 200, days=2.0, end_days_ago=40.0)
    generate_history(db_b, 200, days=2.0, end_days_ago=40.0, offset=200)
    export_pools(pools, lake, lag_seconds=0)
    # A late archive into an old day of b, after the export: only b keeps that partition.
    generate_history(db_b, 10, days=0.1, end_days_ago=41.0, offset=1000)
    late = db_b.execute(
        "SELECT DISTINCT 'message_history_' || to_char(finished_at AT TIME ZONE 'UTC', 'YYYYMMDD')"
        " FROM message_history WHERE id LIKE 'm-10__' ORDER BY 1"
    ).fetchall()

    pruned = prune_pools(pools, retention_days=30)
    assert pruned.pools["default"].unexported == []
    assert len(pruned.pools["default"].dropped) >= 2
    assert pruned.pools["b"].unexported == [name for (name,) in late]
    assert db.execute("SELECT count(*) FROM message_history").fetchone() == (0,)
    kept = "SELECT count(*) FROM message_history WHERE id LIKE 'm-10__'"
    assert db_b.execute(kept).fetchone() == (10,)


def test_the_history_read_by_the_report_says_each_rows_pool_default_for_older_files(
    spark: SparkSession, db, db_b, pools, database_url, lake
):
    generate_history(db, 300, days=1.0, end_days_ago=1.0)
    export_history(database_url, lake, lag_seconds=0)
    # As an export wrote them before pools: no pool column.
    for part in Path(lake, "history").rglob("part-1.parquet"):
        pq.write_table(pq.read_table(part).drop_columns(["pool"]), part)
    generate_history(db_b, 200, days=1.0, end_days_ago=1.0, offset=300)
    export_pools(pools, lake, lag_seconds=0)

    by_pool = read_history(spark, lake).groupBy("pool").count().collect()
    assert {row["pool"]: row["count"] for row in by_pool} == {"default": 300, "b": 200}


def test_namespace_pool_reads_the_catalogues_map(db, pools, database_url):
    db.execute("INSERT INTO namespace_pools (namespace, pool) VALUES ('shop', 'b'), ('eu', 'eu')")
    assert namespace_pool(database_url, pools, "shop") == "b"
    assert namespace_pool(database_url, pools, "unlisted") == "default"
    with pytest.raises(UnavailableError, match="pool 'eu'"):
        namespace_pool(database_url, pools, "eu")


@pytest.fixture
def cli(
    database_url: str, pools: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[CliRunner]:
    """The ``sundial`` command with both pools configured."""
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
    monkeypatch.setenv("SUNDIAL_POOLS", json.dumps({"b": pools["b"]}))
    monkeypatch.setenv("SUNDIAL_PIPELINE_EXPORT_LAG_SECONDS", "0")
    monkeypatch.delenv("SUNDIAL_PIPELINE_LAKE", raising=False)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def test_export_and_prune_commands_cover_every_pool(cli, db, db_b, lake):
    generate_history(db, 200, days=2.0, end_days_ago=40.0)
    generate_history(db_b, 100, days=2.0, end_days_ago=40.0, offset=200)

    exported = cli.invoke(main, ["pipeline", "export", "--lake", lake])
    assert exported.exit_code == 0, exported.output
    result = json.loads(exported.output)
    assert result["rows"] == 300
    assert {pool: run["rows"] for pool, run in result["pools"].items()} == {
        "default": 200,
        "b": 100,
    }

    pruned = cli.invoke(main, ["pipeline", "prune-history", "--older-than-days", "30"])
    assert pruned.exit_code == 0, pruned.output
    dropped = {pool: run["dropped"] for pool, run in json.loads(pruned.output)["pools"].items()}
    assert set(dropped) == {"default", "b"}
    assert all(len(names) >= 2 for names in dropped.values())
    for conn in (db, db_b):
        assert conn.execute("SELECT count(*) FROM message_history").fetchone() == (0,)


def test_a_bulk_enqueue_into_a_namespace_on_pool_b_writes_to_pool_b(
    spark: SparkSession, cli, db, db_b, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    make_queue(db_b, "imports")
    # The same queue on default too (as a namespace that moved away leaves it until it is
    # deleted): only the catalogue's map tells them apart.
    make_queue(db, "imports")
    db.execute("INSERT INTO namespace_pools (namespace, pool) VALUES ('shop', 'b')")
    (tmp_path / "orders.csv").write_text("order,total\no-1,10\no-2,20\n")
    # The tests' Spark session, which the command must not stop.
    monkeypatch.setattr(commands, "_spark", lambda settings: contextlib.nullcontext(spark))

    done = cli.invoke(
        main,
        ["pipeline", "enqueue", "--queue", "shop/imports", "--from", str(tmp_path / "orders.csv"),
         "--id-column", "order", "--rejects", str(tmp_path / "rejects.jsonl"),
         "--staging", str(tmp_path / "staging")],
    )  # fmt: skip

    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert (summary["pool"], summary["enqueued"]) == ("b", 2)
    on_b = db_b.execute("SELECT id, payload FROM messages ORDER BY id").fetchall()
    assert on_b == [("o-1", {"total": "10"}), ("o-2", {"total": "20"})]
    assert db.execute("SELECT count(*) FROM messages").fetchone() == (0,)
