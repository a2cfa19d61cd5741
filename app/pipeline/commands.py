"""``sundial pipeline``: the data pipeline's jobs (docs/pipeline.md).

Argument parsing and printing only. PySpark and pyarrow come with the optional ``pipeline``
extra; they are imported when a command runs, never when ``sundial`` starts. Long commands show
progress on a terminal (:mod:`app.pipeline.progress`) and print their result as JSON.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.bootstrap.database import open_database, pool_urls
from app.commandline import split_queue_path
from app.config import Settings, get_settings
from app.pipeline.progress import CommandProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _requires_pipeline_extra() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as error:
        raise click.ClickException(
            f"{error.name} is missing: install the pipeline extra (pip install 'sundial[pipeline]')"
        ) from error


@contextlib.contextmanager
def _database(settings: Settings) -> Iterator[str]:
    """The catalogue's database URL (every pool's follows from it: ``pool_urls``)."""
    # An embedded database is this command's own: bring it to the newest schema on first use.
    with open_database(settings, migrate_schema=settings.database_url is None) as url:
        yield url


@contextlib.contextmanager
def _pipeline_lock_errors() -> Iterator[None]:
    """The pipeline's lock refused (another job runs) or a pool misconfigured, as one line."""
    from app.pipeline.lock import ExportBusyError, PoolMismatchError

    try:
        yield
    except (ExportBusyError, PoolMismatchError) as error:
        raise click.ClickException(str(error)) from error


@contextlib.contextmanager
def _spark(settings: Settings) -> Iterator[SparkSession]:
    from app.pipeline.session import start_spark

    spark = start_spark(settings)
    try:
        yield spark
    finally:
        spark.stop()


def _lake(settings: Settings, lake: str | None) -> str:
    lake = lake or settings.pipeline_lake
    if not lake:
        raise click.UsageError("give --lake PATH (or set SUNDIAL_PIPELINE_LAKE)")
    return lake


def _utc_time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """An ISO 8601 time; without a zone it is UTC."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time such as 2026-11-22T10:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _columns(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def _echo(value: dict[str, Any]) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


@contextlib.contextmanager
def _staging(root: str | None) -> Iterator[str]:
    """Where the checked rows go: a temp dir, or a fresh directory under ``root`` (which must be
    shared by the driver and the executors on a cluster), removed afterwards."""
    if root is None:
        with tempfile.TemporaryDirectory(prefix="sundial-enqueue-") as scratch:
            yield str(Path(scratch) / "checked")
        return
    from app.pipeline.lake import arrow_filesystem, join

    path = join(root, f"sundial-enqueue-{uuid.uuid4().hex}")
    try:
        yield path
    finally:
        filesystem, local = arrow_filesystem(path)
        with contextlib.suppress(FileNotFoundError):
            filesystem.delete_dir(local)


@click.group()
def pipeline() -> None:
    """The data pipeline on Spark: history lake, hourly reports, bulk enqueue."""


@pipeline.command()
@click.option("--lake", help="Lake root: a directory or a URI (default: SUNDIAL_PIPELINE_LAKE).")
def export(lake: str | None) -> None:
    """Copy every pool's newly archived history into the lake (redoing an interrupted run
    first)."""
    _requires_pipeline_extra()
    from app.pipeline.export import export_pools

    settings = get_settings()
    root = _lake(settings, lake)
    with _database(settings) as url, CommandProgress() as progress:
        rows = progress.phase("export history to the lake")
        with _pipeline_lock_errors():
            result = export_pools(
                pool_urls(settings, url),
                root,
                lag_seconds=settings.pipeline_export_lag_seconds,
                advanced=rows.advance,
            )
        rows.finish()
    _echo(asdict(result))


@pipeline.command("prune-history")
@click.option(
    "--older-than-days",
    type=click.IntRange(min=1),
    help="Retention in days (default: SUNDIAL_PIPELINE_HISTORY_RETENTION_DAYS).",
)
def prune_history(older_than_days: int | None) -> None:
    """Drop every pool's history partitions past retention whose rows are all exported."""
    # Plain SQL: needs neither Spark nor pyarrow.
    from app.pipeline.prune import prune_pools

    settings = get_settings()
    with _database(settings) as url, _pipeline_lock_errors():
        result = prune_pools(
            pool_urls(settings, url), older_than_days or settings.pipeline_history_retention_days
        )
    _echo(asdict(result))


@pipeline.command()
@click.option("--lake", help="Lake root: a directory or a URI (default: SUNDIAL_PIPELINE_LAKE).")
@click.option("--since", callback=_utc_time, help="First hour (widened to its UTC day).")
@click.option("--until", callback=_utc_time, help="End, exclusive (widened to a UTC day).")
def report(lake: str | None, since: datetime | None, until: datetime | None) -> None:
    """Compute the hourly report over the lake into the lake and report_hourly."""
    _requires_pipeline_extra()
    from app.pipeline.report import run_report

    settings = get_settings()
    root = _lake(settings, lake)
    with _database(settings) as url, _spark(settings) as spark, CommandProgress() as progress:
        try:
            result = run_report(
                spark,
                url,
                root,
                since=since,
                until=until,
                top_exclusive=settings.pipeline_report_top_exclusive,
                computing=lambda: progress.spark(spark, "compute the hourly report"),
            )
        except FileNotFoundError as error:
            raise click.ClickException(str(error)) from error
    _echo(asdict(result))


@pipeline.command()
@click.option("--queue", "queue_path", required=True, metavar="NAMESPACE/QUEUE")
@click.option(
    "--from", "source", required=True, help="A Parquet, CSV or JSON-lines file, or a directory."
)
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv", "jsonl"]))
@click.option("--id-column", default="id", show_default=True, help="The message ids.")
@click.option("--priority-column", help="Priorities (default: the enqueue time in ms).")
@click.option(
    "--payload-columns", help="Comma-separated columns of the JSON payload (default: the rest)."
)
@click.option("--metadata-columns", help="Comma-separated columns that become metadata.")
@click.option(
    "--rejects",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where rejected rows go, as JSON lines (default: ./<source name>.rejects.jsonl).",
)
@click.option(
    "--staging",
    help="Scratch directory or URI for the checked rows (default: a temp dir); on a cluster,"
    " one the driver and the executors share.",
)
@click.option(
    "--connections",
    type=click.IntRange(min=1, max=32),
    default=2,
    show_default=True,
    help="Database connections that insert in parallel (PostgreSQL uses a core for each).",
)
def enqueue(
    queue_path: str,
    source: str,
    fmt: str | None,
    id_column: str,
    priority_column: str | None,
    payload_columns: str | None,
    metadata_columns: str | None,
    rejects: Path | None,
    staging: str | None,
    connections: int,
) -> None:
    """Enqueue every row of a dataset into a queue (on its namespace's pool), idempotent by
    message id."""
    _requires_pipeline_extra()
    from app.core.errors import SundialError
    from app.core.validation import Limits
    from app.pipeline.enqueue import (
        Columns,
        bulk_enqueue,
        detect_format,
        find_queue,
        namespace_pool,
    )

    settings = get_settings()
    namespace, name = split_queue_path(queue_path)
    columns = Columns(
        id=id_column,
        priority=priority_column,
        payload=_columns(payload_columns),
        metadata=_columns(metadata_columns) or [],
    )
    rejects = rejects or Path(f"{Path(source.rstrip('/')).name}.rejects.jsonl")
    with _database(settings) as catalogue, _staging(staging) as scratch:
        try:
            pools = pool_urls(settings, catalogue)
            pool = namespace_pool(catalogue, pools, namespace)
            url = pools[pool]
            queue = find_queue(url, namespace, name)
            starting = time.monotonic()
            with _spark(settings) as spark, CommandProgress() as progress:
                spark_start = time.monotonic() - starting
                loaded = progress.phase(f"enqueue into {queue_path}")
                summary = bulk_enqueue(
                    spark,
                    url,
                    queue,
                    source,
                    fmt=fmt or detect_format(source),  # type: ignore[arg-type]
                    columns=columns,
                    limits=Limits(max_payload_bytes=settings.max_payload_bytes),
                    staging=scratch,
                    rejects=rejects,
                    batch_rows=settings.pipeline_enqueue_batch_rows,
                    connections=connections,
                    checking=lambda: progress.spark(spark, "check the rows"),
                    started=loaded.total,
                    advanced=loaded.advance,
                )
                loaded.finish()
        except SundialError as error:
            raise click.ClickException(f"{error.code}: {error.message}") from error
    summary.seconds = {"spark_start": round(spark_start, 2), **summary.seconds}
    _echo({**asdict(summary), "pool": pool, "rejects_file": str(rejects)})
