"""Bulk enqueue: a dataset (Parquet, CSV or JSON lines) into one queue, idempotent by message id.

Spark reads the dataset, gathers each row's id, priority, payload and metadata, and checks every
row with the core's rules on its executors (:mod:`app.pipeline.rows`), writing the result as
Parquet to a staging directory. The driver then streams that, batch by batch, into PostgreSQL
(:mod:`app.pipeline.loading`): ``COPY`` into a temporary table and one ``INSERT ... SELECT ...
ON CONFLICT DO NOTHING`` per batch, each its own transaction, over a few connections in
parallel. Memory stays bounded by a few batches, whatever the dataset's size.

Each batch wakes the queue's long-polling consumers at its commit (as the API's enqueue does),
so waiting consumers get the new messages at once, not at their 1 s fallback poll.

With pools (docs/scaling.md) the rows go to the database of the namespace's pool, which the
catalogue's map says (:func:`namespace_pool`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from psycopg.rows import dict_row

from app.core.errors import (
    NamespaceMovingError,
    NotFoundError,
    QueuePausedError,
    UnavailableError,
    ValidationError,
)
from app.core.models import DEFAULT_POOL, QueueConfig
from app.core.validation import Limits
from app.pipeline import queries
from app.pipeline.database import connect
from app.pipeline.lake import arrow_filesystem
from app.pipeline.loading import Loaders, SeqReserver
from app.pipeline.rows import MESSAGE_COLUMNS, OUTPUT_DDL, RowRules, checker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("sundial.pipeline.enqueue")

Format = Literal["parquet", "csv", "jsonl"]
FORMATS: tuple[Format, ...] = ("parquet", "csv", "jsonl")
CORRUPT = "_corrupt_record"


@dataclass(frozen=True, slots=True)
class Columns:
    """Which dataset columns make a message. ``payload=None``: every other column."""

    id: str = "id"
    priority: str | None = None
    payload: Sequence[str] | None = None
    metadata: Sequence[str] = ()


@dataclass(slots=True)
class EnqueueSummary:
    """What a bulk enqueue did with the dataset's rows."""

    read: int = 0
    enqueued: int = 0
    already_present: int = 0
    rejected: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the time went: ``check`` (Spark) and ``load`` (PostgreSQL), in seconds."""


@dataclass(frozen=True, slots=True)
class TargetQueue:
    """The queue a bulk enqueue fills."""

    id: int
    namespace: str
    name: str
    config: QueueConfig


def namespace_pool(catalogue_url: str, pools: Mapping[str, str], namespace: str) -> str:
    """The pool that holds ``namespace`` (one of ``pools``, database URLs by name): the one
    the catalogue's map names, ``default`` for a namespace it does not list (as the server's
    routing reads it); a single database has no other pool to look for.

    Raises:
        UnavailableError: the map names a pool that ``pools`` does not configure.
    """
    if pools.keys() == {DEFAULT_POOL}:
        return DEFAULT_POOL
    with connect(catalogue_url) as conn:
        row = conn.execute(queries.NAMESPACE_POOL, {"namespace": namespace}).fetchone()
    pool: str = row[0] if row is not None else DEFAULT_POOL
    if pool not in pools:
        raise UnavailableError(
            f"namespace {namespace} is on pool {pool!r}, which SUNDIAL_POOLS does not configure"
        )
    return pool


def find_queue(database_url: str, namespace: str, name: str) -> TargetQueue:
    """The queue, refusing a missing queue or one paused for enqueue, before any work."""
    with connect(database_url) as conn:
        row = (
            conn.cursor(row_factory=dict_row)
            .execute(queries.QUEUE_GET, {"namespace": namespace, "name": name})
            .fetchone()
        )
    if row is None:
        raise NotFoundError(f"queue {namespace}/{name} does not exist")
    if row["namespace_state"] != "active":
        raise NamespaceMovingError(namespace)
    fields = {key: row[key] for key in QueueConfig.__dataclass_fields__}
    fields["filter_keys"] = tuple(fields["filter_keys"])
    queue = TargetQueue(row["id"], namespace, name, QueueConfig(**fields))
    if queue.config.enqueue_paused:
        raise QueuePausedError(f"queue {namespace}/{name} is paused for enqueue")
    return queue


def detect_format(path: str) -> Format:
    """The format of a file, or of the files of a directory, by extension."""
    candidates = [Path(path)]
    if Path(path).is_dir():
        candidates = [p for p in sorted(Path(path).rglob("*")) if p.is_file()]
    for candidate in candidates:
        suffix = candidate.suffix.lower().lstrip(".")
        if suffix in ("parquet", "csv"):
            return suffix  # type: ignore[return-value]
        if suffix in ("jsonl", "ndjson", "json"):
            return "jsonl"
    raise ValidationError("from", "cannot tell the format by extension: give --format")


def read_dataset(spark: SparkSession, path: str, fmt: Format) -> DataFrame:
    """The dataset, with malformed records kept in ``_corrupt_record`` (CSV, JSON lines)."""
    if fmt == "parquet":
        return spark.read.parquet(path)
    if fmt == "csv":
        # Every column as text, so the core's rules (not Spark's inference) judge the values.
        header = spark.read.option("header", True).csv(path).schema
        schema = header.add(CORRUPT, "string")
        return (
            spark.read.option("header", True)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .schema(schema)
            .csv(path)
        )
    return (
        spark.read.option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(path)
    )


def gather(dataset: DataFrame, columns: Columns) -> DataFrame:
    """The columns :mod:`app.pipeline.rows` checks, from the dataset's columns."""
    from pyspark.sql import functions as F

    data = [name for name in dataset.columns if name != CORRUPT]
    wanted = [("id-column", columns.id), ("priority-column", columns.priority)]
    wanted += [("payload-columns", name) for name in columns.payload or ()]
    wanted += [("metadata-columns", name) for name in columns.metadata]
    for option, name in wanted:
        if name is not None and name not in data:
            raise ValidationError(option, f"the dataset has no column {name!r} (it has {data})")
    payload = columns.payload
    if payload is None:
        used = {columns.id, columns.priority, *columns.metadata}
        payload = [name for name in data if name not in used]
    corrupt = F.col(CORRUPT) if CORRUPT in dataset.columns else F.lit(None).cast("string")
    as_json = F.to_json(F.struct(*[F.col(f"`{name}`") for name in data]))
    return dataset.select(
        corrupt.alias("_corrupt"),
        F.coalesce(corrupt, as_json).alias("_source"),
        F.col(f"`{columns.id}`").cast("string").alias("_id"),
        (
            F.col(f"`{columns.priority}`").cast("string")
            if columns.priority
            else F.lit(None).cast("string")
        ).alias("_priority"),
        F.to_json(F.struct(*[F.col(f"`{name}`") for name in payload])).alias("_payload"),
        (
            F.to_json(
                F.struct(
                    *[F.col(f"`{name}`").cast("string").alias(name) for name in columns.metadata]
                )
            )
            if columns.metadata
            else F.lit(None).cast("string")
        ).alias("_metadata"),
    )


def stage(
    spark: SparkSession, path: str, fmt: Format, columns: Columns, rules: RowRules, staging: str
) -> None:
    """Read, gather and check the dataset with Spark; write the result to ``staging``."""
    gathered = gather(read_dataset(spark, path, fmt), columns)
    checked = gathered.mapInArrow(checker(rules), OUTPUT_DDL)
    checked.write.mode("overwrite").parquet(staging)


def load(
    database_url: str,
    queue: TargetQueue,
    staging: str,
    rejects: Path,
    *,
    batch_rows: int,
    connections: int = 1,
    started: Callable[[int], None] | None = None,
    advanced: Callable[[int], None] | None = None,
) -> EnqueueSummary:
    """Insert the staged, checked rows in transactions of ``batch_rows`` over ``connections``
    connections; write rejected rows to ``rejects`` (JSON lines: ``field``, ``reason``,
    ``source``)."""
    filesystem, path = arrow_filesystem(staging)
    dataset = ds.dataset(path, format="parquet", filesystem=filesystem)
    summary = EnqueueSummary(read=dataset.count_rows())
    if started:
        started(summary.read)
    offset = 0
    with (
        connect(database_url, autocommit=True) as sequencer,
        Loaders(
            database_url,
            queue,
            connections=connections,
            batch_rows=batch_rows,
            advanced=advanced,
        ) as loaders,
        rejects.open("w", encoding="utf-8") as out,
    ):
        seqs = SeqReserver(sequencer)
        for fragment in sorted(dataset.get_fragments(), key=lambda f: f.path):
            for batch in fragment.to_batches(batch_size=batch_rows):
                table = pa.Table.from_batches([batch])
                refused = pc.is_valid(table.column("reason"))
                for row in table.filter(refused).select(["field", "reason", "source"]).to_pylist():
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                valid = table.filter(pc.invert(refused))
                summary.rejected += table.num_rows - valid.num_rows
                if advanced and table.num_rows > valid.num_rows:
                    advanced(table.num_rows - valid.num_rows)
                if not valid.num_rows:
                    continue
                numbered = {
                    "ord": pa.array(range(offset, offset + valid.num_rows), pa.int64()),
                    "seq": seqs.reserve(valid.num_rows),
                    **{name: valid.column(name) for name in MESSAGE_COLUMNS},
                }
                loaders.add(pa.table(numbered))
                offset += valid.num_rows
        summary.enqueued = loaders.finish()
    summary.already_present = offset - summary.enqueued
    return summary


def bulk_enqueue(
    spark: SparkSession,
    database_url: str,
    queue: TargetQueue,
    path: str,
    *,
    fmt: Format,
    columns: Columns,
    limits: Limits,
    staging: str,
    rejects: Path,
    batch_rows: int,
    connections: int = 1,
    checking: Callable[[], AbstractContextManager[object]] | None = None,
    started: Callable[[int], None] | None = None,
    advanced: Callable[[int], None] | None = None,
) -> EnqueueSummary:
    """The whole job: stage with Spark (within ``checking()``, e.g. a progress display), then
    load into the queue."""
    began = time.monotonic()
    with checking() if checking else contextlib.nullcontext():
        stage(spark, path, fmt, columns, RowRules(queue.config, limits), staging)
    checked = time.monotonic()
    summary = load(
        database_url,
        queue,
        staging,
        rejects,
        batch_rows=batch_rows,
        connections=connections,
        started=started,
        advanced=advanced,
    )
    summary.seconds = {
        "check": round(checked - began, 2),
        "load": round(time.monotonic() - checked, 2),
    }
    log.info("bulk enqueue into %s/%s: %s", queue.namespace, queue.name, summary)
    return summary
