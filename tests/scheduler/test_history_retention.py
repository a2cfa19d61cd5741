"""History retention by SQL alone (``SUNDIAL_HISTORY_RETENTION_DAYS``, ``sundial history prune``):
partitions of days past retention are dropped with no pipeline (no Spark, no pyarrow), newer
ones kept and readable; unset, everything is kept; once the pipeline has exported, only exported
partitions go.

History of 40 days ago is generated (bench.pipeline_data) beside today's; retention is 30 days.
The scheduler's prune runs in the background of its leader: tests wait for its counter of
finished prunes, never with sleeps.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.bootstrap.commands import main
from app.bootstrap.database import history_prune, scheduling
from app.config import Settings, get_settings
from app.scheduler import Scheduler
from app.store import maintenance
from bench.pipeline_data import generate_history

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0
RETENTION = 30

PARTITIONS = """
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'message_history'::regclass ORDER BY 1
"""


@pytest.fixture
def db(postgres: Any, database_url: str) -> Iterator[psycopg.Connection[Any]]:
    dsn = str(postgres.dsn(make_url(database_url).database))
    with psycopg.connect(dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
        yield conn


def partitions(db: psycopg.Connection[Any]) -> list[str]:
    return [name for (name,) in db.execute(PARTITIONS).fetchall()]


def today(db: psycopg.Connection[Any]) -> date:
    return db.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]  # type: ignore[index]


def history(db: psycopg.Connection[Any]) -> tuple[list[str], list[str]]:
    """Old history (40 days ago, 50 rows) and recent history (yesterday, 20 rows): the
    partitions past retention and those within it that hold rows."""
    generate_history(db, 50, days=0.5, end_days_ago=40.0)
    generate_history(db, 20, days=0.2, end_days_ago=1.0, offset=50)
    cutoff = maintenance.partition_name(today(db) - timedelta(days=RETENTION))
    old = [name for name in partitions(db) if name < cutoff]
    recent = [name for name in partitions(db) if name >= cutoff]
    assert old
    assert recent
    return old, recent


def rows(db: psycopg.Connection[Any]) -> int:
    return int(db.execute("SELECT count(*) FROM message_history").fetchone()[0])  # type: ignore[index]


def exported_until(db: psycopg.Connection[Any], high: str) -> None:
    """A committed export run whose watermark is ``high``: the pipeline is in use."""
    db.execute(
        "INSERT INTO pipeline_export_runs (low, high, committed_at, rows, files)"
        " VALUES ('1970-01-01T00:00:00Z', CAST(%s AS timestamptz), now(), 0, 0)",
        (high,),
    )


def test_partitions_past_retention_are_dropped_by_sql_alone(
    database_url: str, db: psycopg.Connection[Any]
) -> None:
    old, recent = history(db)
    result = history_prune.prune_database(make_url(database_url), RETENTION)
    assert sorted(result.dropped) == old
    assert result.unexported == result.pending == []
    assert partitions(db) == recent
    # What is left reads as before: the recent rows, whole.
    assert rows(db) == 20
    assert db.execute("SELECT count(*) FROM message_history WHERE id = 'm-51'").fetchone() == (1,)
    # Nothing more to do the second time.
    assert history_prune.prune_database(make_url(database_url), RETENTION).dropped == []


def test_once_the_pipeline_exports_only_exported_partitions_go(
    database_url: str, db: psycopg.Connection[Any]
) -> None:
    old, recent = history(db)
    holding = [name for name in old if _holds_rows(db, name)]
    exported_until(db, "1970-01-02T00:00:00Z")  # an export ran, before any of this history
    result = history_prune.prune_database(make_url(database_url), RETENTION)
    assert sorted(result.unexported) == holding  # kept: the lake does not have them yet
    assert sorted(result.dropped) == [name for name in old if name not in holding]  # empty
    assert partitions(db) == holding + recent
    assert rows(db) == 70
    exported_until(db, "9999-01-01T00:00:00Z")  # now all of it is in the lake
    dropped = history_prune.prune_database(make_url(database_url), RETENTION).dropped
    assert sorted(dropped) == holding
    assert partitions(db) == recent


def _holds_rows(db: psycopg.Connection[Any], name: str) -> bool:
    return bool(db.execute(f'SELECT EXISTS (SELECT 1 FROM "{name}")').fetchone()[0])  # type: ignore[index]


def test_the_pipeline_rule_drops_nothing_before_the_first_export(
    database_url: str, db: psycopg.Connection[Any]
) -> None:
    old, recent = history(db)
    pruned = history_prune.prune_pools(
        {"default": make_url(database_url)}, RETENTION, export="required"
    )
    assert pruned.pools["default"].dropped == []
    assert partitions(db) == old + recent


def settings(database_url: str, retention_days: int | None) -> Settings:
    return Settings(
        database_url=database_url,
        scheduler_tick_seconds=0.02,
        leader_poll_seconds=0.1,
        scheduler_cleanup_seconds=0.05,
        history_retention_days=retention_days,
    )


async def lead(engine: AsyncEngine, config: Settings, **until: int) -> Scheduler:
    """A scheduler that leads, run until ``until`` (Scheduler.wait_until's), then stopped."""
    scheduler = Scheduler(engine, config, work=scheduling, node_id="retention")
    await scheduler.start()
    try:
        await asyncio.wait_for(scheduler.wait_until(leader=True, **until), TIMEOUT)
    finally:
        await scheduler.stop()
    return scheduler


async def test_the_scheduler_leader_applies_retention(
    engine: AsyncEngine, database_url: str, db: psycopg.Connection[Any]
) -> None:
    old, recent = history(db)
    await lead(engine, settings(database_url, RETENTION), history_prunes=1)
    remaining = partitions(db)
    assert not set(old) & set(remaining)
    assert set(recent) <= set(remaining)
    assert rows(db) == 20


async def test_retention_unset_keeps_everything(
    engine: AsyncEngine, database_url: str, db: psycopg.Connection[Any]
) -> None:
    old, recent = history(db)
    # Cleanups every 0.05 s, ticks every 0.02 s: 20 ticks span several cleanups.
    scheduler = await lead(engine, settings(database_url, None), ticks=20)
    assert scheduler.history_prunes == 0
    assert set(old + recent) <= set(partitions(db))
    assert rows(db) == 70


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
    monkeypatch.delenv("SUNDIAL_HISTORY_RETENTION_DAYS", raising=False)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def test_history_prune_command(cli: CliRunner, db: psycopg.Connection[Any]) -> None:
    old, recent = history(db)
    unset = cli.invoke(main, ["history", "prune"])
    assert unset.exit_code != 0
    assert "SUNDIAL_HISTORY_RETENTION_DAYS" in unset.output
    assert partitions(db) == old + recent

    pruned = cli.invoke(main, ["history", "prune", "--older-than-days", str(RETENTION)])
    assert pruned.exit_code == 0, pruned.output
    assert sorted(json.loads(pruned.output)["pools"]["default"]["dropped"]) == old
    assert partitions(db) == recent


def test_retention_needs_no_pipeline_extra() -> None:
    code = (
        "import sys, app.cli.history, app.store.retention, app.bootstrap.commands;"
        " print(sorted(m for m in ('pyspark', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
