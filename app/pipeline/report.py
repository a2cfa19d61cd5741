"""The hourly report job: the lake's history -> Spark -> Parquet in the lake and ``report_hourly``.

A window is widened to whole UTC days, and the report's Parquet is partitioned by day and
written with dynamic partition overwrite, so a rerun replaces exactly the days it covers.
In PostgreSQL the window's rows are upserted and the window's rows that the new result lacks are
deleted, in one transaction. Rerunning a window is therefore idempotent in both places.

The lake holds the history of every pool (docs/scaling.md), so each figure covers a queue's
messages on every pool (a namespace that moved has history on both); the report is written to
the ``report_hourly`` of the database it is given, the catalogue's.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from pyarrow import fs
from pyspark.sql import functions as F

from app.core.models import DEFAULT_POOL
from app.pipeline import queries
from app.pipeline.database import connect
from app.pipeline.lake import (
    HISTORY,
    HOURLY_REPORT,
    arrow_filesystem,
    history_spark_schema,
    join,
)
from app.pipeline.transforms import report_from_measures, with_measures

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("sundial.pipeline.report")

FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ReportResult:
    """What one report run wrote."""

    since: datetime | None
    until: datetime | None
    rows: int


def day_window(
    since: datetime | None, until: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """``[since, until)`` widened to whole UTC days (``None`` stays open)."""

    def floor(moment: datetime) -> datetime:
        return datetime.combine(moment.astimezone(UTC).date(), time(), tzinfo=UTC)

    low = floor(since) if since is not None else None
    high = None
    if until is not None:
        high = floor(until)
        if high < until:
            high += timedelta(days=1)
    return low, high


def read_history(spark: SparkSession, lake: str, since: datetime | None = None) -> DataFrame:
    """The lake's history, of every pool (rows of files exported before pools have no ``pool``:
    they are ``default``'s). With ``since``, only partitions that can matter to hours from
    ``since`` on: a message enqueued or leased at ``since`` or later finished then or later."""
    history = spark.read.schema(history_spark_schema()).parquet(join(lake, HISTORY))
    history = history.withColumn("pool", F.coalesce(F.col("pool"), F.lit(DEFAULT_POOL)))
    if since is not None:
        history = history.where(F.col("day") >= F.lit(since.date()))
    return history


def _rows_for_postgres(report: DataFrame) -> list[tuple[Any, ...]]:
    """The report's rows, with the map and array figures as JSON text."""
    # Python's datetimes from Spark are naive local times: move the hour as microseconds.
    report = report.withColumn("hour", F.unix_micros("hour"))
    rows = []
    for row in report.toLocalIterator():
        values = row.asDict(recursive=True)
        values["hour"] = FAR_PAST + timedelta(microseconds=values["hour"])
        values["attempts"] = json.dumps({str(k): v for k, v in sorted(values["attempts"].items())})
        values["busiest_exclusive"] = json.dumps(values["busiest_exclusive"])
        rows.append(tuple(values.values()))
    return rows


def upsert_report(
    database_url: str,
    rows: list[tuple[Any, ...]],
    since: datetime | None,
    until: datetime | None,
) -> None:
    """Replace the window's rows of ``report_hourly`` with ``rows``, in one transaction."""
    with connect(database_url) as conn, conn.transaction():
        conn.execute(queries.REPORT_STAGE)
        with conn.cursor() as cur, cur.copy(queries.REPORT_COPY) as copy:
            for row in rows:
                copy.write_row(row)
        conn.execute(queries.REPORT_UPSERT)
        conn.execute(
            queries.REPORT_DELETE_STALE,
            {"since": since or FAR_PAST, "until": until or FAR_FUTURE},
        )


def run_report(
    spark: SparkSession,
    database_url: str,
    lake: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    top_exclusive: int = 3,
    computing: Callable[[], AbstractContextManager[object]] | None = None,
) -> ReportResult:
    """Compute the report for ``[since, until)`` (widened to days), write it, upsert it.

    Spark's work runs within ``computing()`` (a progress display, say), the upsert after it."""
    since, until = day_window(since, until)
    filesystem, root = arrow_filesystem(lake)
    if filesystem.get_file_info(join(root, HISTORY)).type == fs.FileType.NotFound:
        raise FileNotFoundError(f"no history in the lake {lake}: run `sundial pipeline export`")
    measures = with_measures(read_history(spark, lake, since)).cache()
    report = report_from_measures(
        measures, since=since, until=until, top_exclusive=top_exclusive
    ).cache()
    try:
        with computing() if computing else contextlib.nullcontext():
            (
                report.withColumn("day", F.to_date("hour"))
                .repartition("day")
                .write.mode("overwrite")
                .partitionBy("day")
                .parquet(join(lake, HOURLY_REPORT))
            )
            rows = _rows_for_postgres(report)
    finally:
        report.unpersist()
        measures.unpersist()
    upsert_report(database_url, rows, since, until)
    log.info("report [%s, %s): %d rows", since, until, len(rows))
    return ReportResult(since, until, len(rows))
