"""The pipeline at scale: ``.venv/bin/python -m bench.pipeline_bench [--messages N] [--rows N]``.

On a private durable PostgreSQL (a temp dir), it

1. generates a history of ``--messages`` finished messages over 7 days (bench/pipeline_data.py);
2. runs ``sundial pipeline export`` and ``sundial pipeline report`` as the operator would, each
   a separate process, recording wall time and the peak RSS of its process tree (the Python
   driver plus Spark's JVM), then checks every figure of ``report_hourly`` against plain SQL,
   and that a second export exports nothing and a second report changes nothing;
3. writes a CSV of ``--rows`` distinct rows plus 5 % duplicates and 3 % malformed rows, runs
   ``sundial pipeline enqueue`` into an exclusive queue, checks the summary and the table, and
   runs it again (idempotency).

Prints one JSON document of the figures. Takes a few minutes at the default sizes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

from app.embedded import LocalCluster
from app.store import migrate
from bench.pipeline_data import SQL_FIGURES, bulk_rows, generate_history

SUNDIAL = Path(sys.executable).parent / "sundial"
OPEN = {"since": "1970-01-01T00:00:00Z", "until": "9999-01-01T00:00:00Z"}
REPORT = """
SELECT namespace, queue, hour, enqueued, completed, errored, canceled, expired,
       wait_p50_us, wait_p95_us, wait_p99_us, run_p50_us, run_p95_us, run_p99_us,
       attempts, lease_expired, lease_expiry_rate, busiest_exclusive
FROM report_hourly ORDER BY 1, 2, 3
"""


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def run_measured(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a command; its wall time, the peak RSS of its process tree, and its JSON output."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watched = psutil.Process(proc.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, _tree_rss(watched))
            except psutil.NoSuchProcess:
                return
            done.wait(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{err[-4000:]}")
    return {
        "seconds": round(wall, 1),
        "peak_rss_mb": round(peak / 2**20),
        "output": json.loads(out),
    }


def _rounded(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [[*r[:16], None if r[16] is None else round(r[16], 12), r[17]] for r in rows]


def history_benchmark(
    conn: psycopg.Connection[Any], env: dict[str, str], lake: Path, n: int
) -> dict[str, Any]:
    t = time.monotonic()
    generate_history(conn, n, days=7.0, end_days_ago=1.0)
    generated = round(time.monotonic() - t, 1)
    export = run_measured([str(SUNDIAL), "pipeline", "export", "--lake", str(lake)], env)
    assert export["output"]["rows"] == n, export
    report = run_measured([str(SUNDIAL), "pipeline", "report", "--lake", str(lake)], env)
    t = time.monotonic()
    expected = _rounded(conn.execute(SQL_FIGURES, OPEN).fetchall())
    sql_seconds = round(time.monotonic() - t, 1)
    actual = _rounded(conn.execute(REPORT).fetchall())
    assert actual == expected, "report_hourly differs from the figures computed by SQL"
    again = run_measured([str(SUNDIAL), "pipeline", "export", "--lake", str(lake)], env)
    assert again["output"]["rows"] == 0, again
    rerun = run_measured([str(SUNDIAL), "pipeline", "report", "--lake", str(lake)], env)
    assert _rounded(conn.execute(REPORT).fetchall()) == expected
    lake_mb = sum(f.stat().st_size for f in (lake / "history").rglob("*.parquet")) / 2**20
    return {
        "messages": n,
        "generate_seconds": generated,
        "export": export,
        "report": report,
        "report_rows_checked_against_sql": len(expected),
        "sql_check_seconds": sql_seconds,
        "second_export": again,
        "second_report": rerun,
        "lake_history_mb": round(lake_mb),
    }


def enqueue_benchmark(
    conn: psycopg.Connection[Any], env: dict[str, str], work: Path, n: int
) -> dict[str, Any]:
    conn.execute("INSERT INTO namespaces (name) VALUES ('bench')")
    conn.execute(
        "INSERT INTO queues (namespace, name, kind, exclusive_key, lease_seconds, delay_seconds,"
        " max_attempts, retry_delay_seconds, retry_delay_max_seconds, retention_seconds)"
        " VALUES ('bench', 'bulk', 'exclusive', 'project', 30, 0, 3, 0, 3600, 604800)"
    )
    duplicates, malformed = n // 20, n * 3 // 100
    source = work / "bulk.csv"
    with source.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "priority", "project", "body"])
        writer.writeheader()
        writer.writerows(bulk_rows(n, duplicates=duplicates, malformed=malformed))
    argv = [
        str(SUNDIAL), "pipeline", "enqueue", "--queue", "bench/bulk", "--from", str(source),
        "--priority-column", "priority", "--payload-columns", "body",
        "--metadata-columns", "project", "--rejects", str(work / "rejects.jsonl"),
    ]  # fmt: skip
    first = run_measured(argv, env)
    summary = first["output"]
    expected = {
        "read": n + duplicates + malformed,
        "enqueued": n,
        "already_present": duplicates,
        "rejected": malformed,
    }
    assert {k: summary[k] for k in expected} == expected, summary
    stored = conn.execute("SELECT count(*) FROM messages").fetchone()[0]  # type: ignore[index]
    assert stored == n, stored
    second = run_measured(argv, env)
    assert second["output"]["enqueued"] == 0, second
    return {
        "rows": n,
        "duplicates": duplicates,
        "malformed": malformed,
        "first": first,
        "rerun": second,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sundial-pipeline-bench-"))
    cluster = LocalCluster(work / "postgres")
    cluster.ensure_initialized()
    cluster.start()
    try:
        migrate.upgrade(cluster.sqlalchemy_url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUNDIAL_")}
        env["SUNDIAL_DATABASE_URL"] = cluster.sqlalchemy_url
        env["SUNDIAL_SPARK_LOCAL_DIR"] = str(work / "spark")
        env["SUNDIAL_PIPELINE_EXPORT_LAG_SECONDS"] = "0"
        with psycopg.connect(cluster.libpq_dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
            results = {
                "cores": os.cpu_count(),
                "history": history_benchmark(conn, env, work / "lake", args.messages)
                if args.messages
                else None,
                "enqueue": enqueue_benchmark(conn, env, work, args.rows) if args.rows else None,
            }
        print(json.dumps(results, indent=2, default=str))
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
