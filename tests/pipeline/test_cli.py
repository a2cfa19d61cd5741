"""``sundial pipeline`` commands in-process (the ones that need no SparkSession of their own:
the report and enqueue commands stop theirs, which would end the tests' shared session)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from app.cli.main import main
from app.config import get_settings
from bench.pipeline_data import generate_history


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", database_url)
    monkeypatch.setenv("SUNDIAL_PIPELINE_EXPORT_LAG_SECONDS", "0")
    monkeypatch.delenv("SUNDIAL_PIPELINE_LAKE", raising=False)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def test_export_then_prune_from_the_command_line(cli, db, lake):
    generate_history(db, 500, days=2.0, end_days_ago=40.0)

    exported = cli.invoke(main, ["pipeline", "export", "--lake", lake])
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.output)["rows"] == 500

    pruned = cli.invoke(main, ["pipeline", "prune-history", "--older-than-days", "30"])
    assert pruned.exit_code == 0, pruned.output
    assert len(json.loads(pruned.output)["dropped"]) >= 2
    assert db.execute("SELECT count(*) FROM message_history").fetchone()[0] == 0


def test_bad_arguments_are_named(cli):
    no_lake = cli.invoke(main, ["pipeline", "export"])
    assert no_lake.exit_code == 2
    assert "--lake" in no_lake.output
    bad_time = cli.invoke(main, ["pipeline", "report", "--lake", "x", "--since", "yesterday"])
    assert bad_time.exit_code == 2
    assert "--since" in bad_time.output
    no_queue = cli.invoke(main, ["pipeline", "enqueue", "--queue", "shop/none", "--from", "x.csv"])
    assert no_queue.exit_code == 1
    assert "not_found" in no_queue.output
