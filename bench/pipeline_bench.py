"""The pipeline at scale: ``.venv/bin/python -m bench.pipeline_bench [--messages N] [--rows N]
[--enqueue-runs N] [--connections N]``.

On a private durable PostgreSQL (a temp dir), it

1. generates a history of ``--messages`` finished messages over 7 days (bench/pipeline_data.py);
2. runs ``sundial pipeline export`` and ``sundial pipeline report`` as the operator would, each
   a separate process, recording wall time and the peak RSS of its process tree (the Python
   driver plus Spark's JVM), then checks every figure of ``report_hourly`` against plain SQL,
   and that a second export exports nothing and a second report changes nothing;
3. writes a CSV of ``--rows`` distinct rows plus 5 % duplicates and 3 % malformed rows, runs
   ``sundial pipeline enqueue`` into an exclusive queue ``--enqueue-runs`` times (emptying the
   queue before each, so every run does the same work), checks the summary and the table, and
   runs it once more over the full queue (idempotency). Each run's rows per second are counted
   after Spark's start-up (the command reports its phases' seconds) and overall; the median
   run is the figure.

Prints one JSON document of the figures, then the bulk-enqueue row of docs/pipeline.md's table.
Takes a few minutes at the default sizes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import statistics
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


def enqueue_speed(run: dict[str, Any]) -> dict[str, Any]:
    """Rows per second of one enqueue run: after Spark's start-up (its check and load phases),
    and over the whole command (process start to exit)."""
    summary = run["output"]
    working = summary["seconds"]["check"] + summary["seconds"]["load"]
    return {
        "enqueued_per_second": round(summary["enqueued"] / working),
        "read_per_second": round(summary["read"] / working),
        "enqueued_per_second_overall": round(summary["enqueued"] / run["seconds"]),
    }


def enqueue_benchmark(
    conn: psycopg.Connection[Any],
    env: dict[str, str],
    work: Path,
    n: int,
    *,
    runs: int = 1,
    connections: int | None = None,
) -> dict[str, Any]:
    conn.execute("INSERT INTO namespaces (name) VALUES ('bench')")
    conn.execute(
        "INSERT INTO queues (namespace, name, kind, exclusive_key, lease_seconds, delay_seconds,"
        " max_attempts, retry_delay_seconds, retry_delay_max_seconds, retention_seconds)"
        " VALUES ('bench', 'bulk', 'exclusive', 'project', 30, 0, 3, 0, 3600, 604800)"
    )
    duplicates, malformed = n // 20, n * 3 // 100
    source = work / "bulk.csv"
    rows = bulk_rows(n, duplicates=duplicates, malformed=malformed)
    with source.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "priority", "project", "body"])
        writer.writeheader()
        writer.writerows(rows)
    # Where each id first appears in the file: seq must follow it.
    conn.execute("CREATE TEMPORARY TABLE input_order (id text PRIMARY KEY, position bigint)")
    with conn.cursor().copy("COPY input_order FROM STDIN") as copy:
        seen: set[str] = set()
        for position, row in enumerate(rows):
            if row["id"] not in seen:
                seen.add(row["id"])
                copy.write_row((row["id"], position))
    del rows, seen
    argv = [
        str(SUNDIAL), "pipeline", "enqueue", "--queue", "bench/bulk", "--from", str(source),
        "--priority-column", "priority", "--payload-columns", "body",
        "--metadata-columns", "project", "--rejects", str(work / "rejects.jsonl"),
    ]  # fmt: skip
    if connections is not None:
        argv += ["--connections", str(connections)]
    expected = {
        "read": n + duplicates + malformed,
        "enqueued": n,
        "already_present": duplicates,
        "rejected": malformed,
    }
    first = []
    for _ in range(runs):
        # Every run into an empty queue, from a checkpoint: the same work each time.
        conn.execute("TRUNCATE messages")
        conn.execute("CHECKPOINT")
        run = run_measured(argv, env)
        summary = run["output"]
        assert {k: summary[k] for k in expected} == expected, summary
        stored = conn.execute("SELECT count(*) FROM messages").fetchone()[0]  # type: ignore[index]
        assert stored == n, stored
        run["rows_per_second"] = enqueue_speed(run)
        first.append(run)
    in_order = conn.execute(
        "SELECT bool_and(ok) FROM (SELECT seq > lag(seq) OVER (ORDER BY position) AS ok"
        " FROM messages JOIN input_order USING (id)) c"
    ).fetchone()[0]  # type: ignore[index]
    assert in_order, "seq does not follow the input order"
    second = run_measured(argv, env)
    assert second["output"]["enqueued"] == 0, second
    speeds = [run["rows_per_second"]["enqueued_per_second"] for run in first]
    median = first[speeds.index(statistics.median_low(speeds))]
    return {
        "rows": n,
        "duplicates": duplicates,
        "malformed": malformed,
        "runs": first,
        "median_run": {
            "seconds": median["seconds"],
            "phase_seconds": median["output"]["seconds"],
            "peak_rss_mb": median["peak_rss_mb"],
            **median["rows_per_second"],
        },
        "rerun": second,
        "seq_follows_input_order": in_order,
    }


def enqueue_row(result: dict[str, Any]) -> str:
    """The bulk-enqueue row of docs/pipeline.md's table, from the median run."""
    run = result["median_run"]
    phases = run["phase_seconds"]
    return (
        f"| `enqueue` | CSV of {result['rows'] + result['duplicates'] + result['malformed']:,}"
        f" rows: {result['rows']:,} distinct ids + {result['duplicates']:,} duplicates +"
        f" {result['malformed']:,} malformed, into an exclusive queue"
        f" (median of {len(result['runs'])}) | {run['seconds']:.0f} s (Spark start-up"
        f" {phases['spark_start']:.0f} s, check {phases['check']:.0f} s, load"
        f" {phases['load']:.0f} s): **{run['enqueued_per_second']:,} rows/s** after start-up"
        f" | {run['peak_rss_mb']:,} MiB |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--enqueue-runs", type=int, default=3, help="Enqueue runs (the median is reported)."
    )
    parser.add_argument(
        "--connections", type=int, help="The enqueue's --connections (default: its own)."
    )
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
                "enqueue": enqueue_benchmark(
                    conn,
                    env,
                    work,
                    args.rows,
                    runs=args.enqueue_runs,
                    connections=args.connections,
                )
                if args.rows
                else None,
            }
        print(json.dumps(results, indent=2, default=str))
        if results["enqueue"]:
            print(enqueue_row(results["enqueue"]))
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
