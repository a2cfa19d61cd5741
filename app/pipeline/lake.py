"""The Parquet lake: where things live in it, and the history schema, declared once.

Layout under the lake root::

    history/namespace=<ns>/queue=<q>/day=<YYYY-MM-DD>/part-<run>.parquet   one file per export run
    history/_staging/run-<run>/...                                          (a run being written)
    reports/hourly/day=<YYYY-MM-DD>/part-*.parquet                           written by Spark

Spark and pyarrow skip paths that start with ``_``, so staged files are never read. Timestamps
are stored as microseconds since the epoch, UTC (Parquet ``TIMESTAMP(MICROS, UTC)``).

Every pool (docs/scaling.md) exports its own history, with runs numbered by its own database,
so ``<run>`` names the pool as well as the run (:func:`run_name`): ``7`` for the pool
``default``'s run 7, as before pools, and ``eu-7`` for the pool ``eu``'s. A partition may hold
rows of several pools (a namespace moved leaves its history on the pool it left); each row says
its pool in the ``pool`` column.

A lake is a local directory or a URI. Spark reaches S3 as ``s3a://``, pyarrow as ``s3://``;
:func:`arrow_filesystem` maps the one to the other, so both jobs take the same path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyarrow import fs

from app.core.models import DEFAULT_POOL

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

HISTORY = "history"
STAGING = "_staging"
HOURLY_REPORT = "reports/hourly"

PARTITION_COLUMNS = ("namespace", "queue", "day")
"""How history is partitioned: by namespace, queue and UTC day of ``finished_at``."""

TIMESTAMP = pa.timestamp("us", tz="UTC")

HISTORY_COLUMNS = pa.schema(
    [
        ("queue_id", pa.int64()),
        ("id", pa.string()),
        ("seq", pa.int64()),
        ("priority", pa.int64()),
        ("state", pa.string()),
        ("payload", pa.string()),
        ("metadata", pa.string()),
        ("exclusive_value", pa.string()),
        ("attempts", pa.int32()),
        ("max_attempts", pa.int32()),
        ("enqueued_at", TIMESTAMP),
        ("first_leased_at", TIMESTAMP),
        ("leased_at", TIMESTAMP),
        ("finished_at", TIMESTAMP),
        ("last_error", pa.string()),
        ("archived_at", TIMESTAMP),
        ("pool", pa.string()),
    ]
)
"""The columns of a history file: ``message_history`` less the partition columns, plus the
``pool`` whose database held the rows. ``payload`` and ``metadata`` are JSON text. Files
exported before pools have no ``pool``: their rows are the pool ``default``'s, and
:func:`app.pipeline.report.read_history` reads them so (the column stays nullable for them)."""

TIMESTAMP_COLUMNS = tuple(f.name for f in HISTORY_COLUMNS if f.type == TIMESTAMP)


def history_spark_schema() -> StructType:
    """The Spark schema of the history dataset: the file columns plus the partition columns,
    typed here rather than inferred (a namespace called ``2024`` stays a string)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import DateType, StringType, StructField

    schema = from_arrow_schema(HISTORY_COLUMNS)
    schema.add(StructField("namespace", StringType(), False))
    schema.add(StructField("queue", StringType(), False))
    schema.add(StructField("day", DateType(), False))
    return schema


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for a local path or a URI."""
    return "/".join([root.rstrip("/"), *parts])


def arrow_filesystem(root: str) -> tuple[fs.FileSystem, str]:
    """The pyarrow filesystem of a lake path and the path within it."""
    if "://" not in root:
        return fs.LocalFileSystem(), root
    scheme, rest = root.split("://", 1)
    if scheme in ("s3a", "s3n"):
        scheme = "s3"
    return fs.FileSystem.from_uri(f"{scheme}://{rest}")  # type: ignore[no-any-return]


def run_name(pool: str, run_id: int) -> str:
    """How the export run ``run_id`` of ``pool`` names its file in each partition
    (``part-<name>.parquet``) and its staging directory (``run-<name>``): the run's number for
    the pool ``default``, as before pools, so a run interrupted before an upgrade is redone
    under the same names; ``<pool>-<run>`` for the others. Pool names are lower-case letters,
    digits, ``_`` and ``-`` (``app.config``), so no two pools' names meet."""
    return str(run_id) if pool == DEFAULT_POOL else f"{pool}-{run_id}"


def partition_dir(namespace: str, queue: str, day: str) -> str:
    """The history partition of one namespace, queue and day (relative to ``history``)."""
    return f"namespace={namespace}/queue={queue}/day={day}"
