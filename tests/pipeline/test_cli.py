"""``sundial pipeline`` commands: in-process where they need no SparkSession of their own, and
``enqueue`` as a real ``sundial`` process (it starts and stops its own session, which in-process
would end the tests' shared one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.bootstrap.commands import main
from app.config import get_settings
from bench.pipeline_data import generate_history
from tests.pipeline.test_enqueue import _make_queue as make_queue


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
    result = json.loads(exported.output)
    assert result["rows"] == result["pools"]["default"]["rows"] == 500

    pruned = cli.invoke(main, ["pipeline", "prune-history", "--older-than-days", "30"])
    assert pruned.exit_code == 0, pruned.output
    assert len(json.loads(pruned.output)["pools"]["default"]["dropped"]) >= 2
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


def test_enqueue_command_end_to_end(db, database_url: str, tmp_path: Path) -> None:
    make_queue(db, "imports")
    (tmp_path / "orders.csv").write_text(
        "order,region,total\n"
        "o-1,eu,10\n"
        "o-2,us,20\n"
        "o-1,eu,10\n"  # a duplicate id: enqueued once
        ",eu,30\n"  # no id: rejected, with the field named
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("SUNDIAL_")}
    env.update(
        SUNDIAL_DATABASE_URL=database_url,
        SUNDIAL_SPARK_MASTER="local[1]",
        SUNDIAL_SPARK_DRIVER_MEMORY="512m",
        SUNDIAL_SPARK_SHUFFLE_PARTITIONS="1",
    )
    command = [sys.executable, "-m", "app.bootstrap.commands", "pipeline", "enqueue"]
    arguments = ["--queue", "shop/imports", "--from", "orders.csv", "--id-column", "order"]
    arguments += ["--metadata-columns", "region"]
    done = subprocess.run(
        [*command, *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["read"], summary["enqueued"], summary["rejected"]) == (4, 2, 1)
    assert (summary["already_present"], summary["pool"]) == (1, "default")
    assert summary["rejects_file"] == "orders.csv.rejects.jsonl"
    # Where the time went: Spark's start-up, the checks on its executors, the database's load.
    assert set(summary["seconds"]) == {"spark_start", "check", "load"}
    assert all(seconds > 0 for seconds in summary["seconds"].values())
    assert not done.stderr.count("\x1b[")  # no progress drawn: stderr is not a terminal
    [reject] = [json.loads(line) for line in (tmp_path / "orders.csv.rejects.jsonl").open()]
    assert reject["field"] == "row.id"
    rows = db.execute("SELECT id, payload, metadata FROM messages ORDER BY id").fetchall()
    # CSV has no types: its values reach the payload as the strings they are.
    assert rows == [
        ("o-1", {"total": "10"}, {"region": "eu"}),
        ("o-2", {"total": "20"}, {"region": "us"}),
    ]
