"""The pipeline on a real cluster: a Spark standalone master and worker (pyspark's own
``spark-class``, on the loopback), and ``sundial pipeline export``, ``report`` and ``enqueue``
run against it as an operator runs them, each a ``sundial`` process.

The executors run a Python that has the virtualenv's third-party packages but not Sundial
(:func:`tests.pipeline.standalone.python_without_sundial`), as a node where nothing of Sundial is
installed: the bulk enqueue's row checks run there only because the session ships Sundial's code
(app/pipeline/shipping.py). Without that the enqueue fails with ``ModuleNotFoundError: app``.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.pipeline_data import SQL_FIGURES, generate_history
from tests.pipeline.standalone import (
    LOOPBACK,
    StandaloneCluster,
    python_without_sundial,
    spark_env,
    standalone_cluster,
)
from tests.pipeline.test_enqueue import _make_queue as make_queue
from tests.pipeline.test_export_report import OPEN, REPORT, _normalised

pytestmark = [pytest.mark.slow, pytest.mark.serial]

HISTORY = 3000


@pytest.fixture
def cluster(tmp_path: Path):
    with standalone_cluster(tmp_path / "spark") as running:
        yield running


def _sundial(
    cluster: StandaloneCluster, database_url: str, work: Path, python: Path, *arguments: str
) -> dict[str, Any]:
    """``sundial pipeline ...`` as its own process, its Spark session on the cluster."""
    env = spark_env(work / "driver")
    env = {key: value for key, value in env.items() if not key.startswith("SUNDIAL_")}
    env.update(
        SUNDIAL_DATABASE_URL=database_url,
        SUNDIAL_PIPELINE_EXPORT_LAG_SECONDS="0",
        SUNDIAL_SPARK_MASTER=cluster.master_url,
        SUNDIAL_SPARK_DRIVER_MEMORY="512m",
        SUNDIAL_SPARK_SHUFFLE_PARTITIONS="1",
        SUNDIAL_SPARK_CONF=json.dumps(
            {
                "spark.driver.host": LOOPBACK,
                "spark.driver.bindAddress": LOOPBACK,
                "spark.executor.memory": "1g",
                "spark.locality.wait": "0s",
                "spark.pyspark.python": str(python),
            }
        ),
        XDG_CACHE_HOME=str(work / "cache"),  # where the shipped zip is built
    )
    done = subprocess.run(
        [sys.executable, "-m", "app.bootstrap.commands", "pipeline", *arguments],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"{done.stderr[-4000:]}\n{cluster.logs()}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_export_report_and_enqueue_on_a_standalone_cluster(
    cluster: StandaloneCluster, db, database_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "python-runs.txt"
    python = python_without_sundial(tmp_path / "python-without-sundial", runs)
    # The executors' Python has what the shipped code imports, and no Sundial of its own.
    neutral = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    has = subprocess.run(
        [str(python), "-c", "import pyarrow, msgspec, pyspark"], cwd=tmp_path, env=neutral
    )
    assert has.returncode == 0
    lacks = subprocess.run(
        [str(python), "-c", "import app"], cwd=tmp_path, env=neutral, capture_output=True
    )
    assert b"ModuleNotFoundError: No module named 'app'" in lacks.stderr
    runs.unlink()

    # Export (the driver alone) and the report (Spark, on the cluster), checked against SQL.
    generate_history(db, HISTORY, days=1.0, end_days_ago=1.0)
    lake = str(tmp_path / "lake")
    exported = _sundial(cluster, database_url, tmp_path, python, "export", "--lake", lake)
    assert exported["rows"] == HISTORY
    reported = _sundial(cluster, database_url, tmp_path, python, "report", "--lake", lake)
    expected = _normalised(db.execute(SQL_FIGURES, OPEN).fetchall())
    assert reported["rows"] == len(expected) > 24
    assert _normalised(db.execute(REPORT, OPEN).fetchall()) == expected

    # Bulk enqueue: every row checked on the executors, with the shipped code.
    make_queue(db, "imports", exclusive_key="region")
    source = tmp_path / "orders.csv"
    with source.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["order", "region", "total"])
        writer.writerows([f"o-{i}", ("eu", "us")[i % 2], i] for i in range(500))
        writer.writerow(["o-7", "eu", 999])  # a duplicate id: the first one stays
        writer.writerow(["", "eu", 1])  # no id: rejected, with the field named
    summary = _sundial(
        cluster, database_url, tmp_path, python,
        "enqueue", "--queue", "shop/imports", "--from", str(source), "--id-column", "order",
        "--metadata-columns", "region", "--rejects", str(tmp_path / "rejects.jsonl"),
    )  # fmt: skip
    assert {k: summary[k] for k in ("read", "enqueued", "already_present", "rejected")} == {
        "read": 502,
        "enqueued": 500,
        "already_present": 1,
        "rejected": 1,
    }
    [reject] = [json.loads(line) for line in (tmp_path / "rejects.jsonl").open()]
    assert reject["field"] == "row.id"
    rows = dict(
        db.execute(
            "SELECT id, payload ->> 'total' FROM messages WHERE id IN ('o-7', 'o-8')"
        ).fetchall()
    )
    assert rows == {"o-7": "7", "o-8": "8"}
    in_input_order = db.execute(
        "SELECT array_agg(id ORDER BY seq) FROM messages WHERE exclusive_value = 'us'"
    ).fetchone()[0]
    assert in_input_order == [f"o-{i}" for i in range(1, 500, 2)]

    # What ran where: both Spark jobs were applications of the cluster, their Python workers
    # ran the Python without Sundial (PySpark's daemon), and the code they imported is the zip
    # built in the driver's cache.
    assert cluster.finished_apps() == ["sundial-pipeline", "sundial-pipeline"]
    assert "-m pyspark.daemon" in runs.read_text()
    [shipped] = (tmp_path / "cache" / "sundial" / "pipeline").glob("sundial-*.zip")
    assert shipped.stat().st_size > 0
