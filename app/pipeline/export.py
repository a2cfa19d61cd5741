"""Export of finished history to the Parquet lake (its pruning is :mod:`app.pipeline.prune`).

An export is a *run* over a window ``[low, high)`` of ``archived_at`` (see
:data:`app.pipeline.queries.EXPORT_NEW_RUN` for why no row can appear behind ``high`` later)::

    record the run (low = watermark, high = horizon) ─► COPY the window, stream it through pyarrow
    into one staged file per partition ─► move each file into its partition ─► commit the run
    (its high is the new watermark)

Each run adds exactly one file, ``part-<run>.parquet``, to each partition it touches, and a
file appears whole (a rename), so a reader never sees part of a run's rows in a partition.
A run that is interrupted stays uncommitted in ``pipeline_export_runs``; the next export redoes
it first, with the same window and the same file names, so nothing is exported twice.

With pools (docs/scaling.md) every pool's database has its own history, runs and watermark:
an export runs one after another on each pool, every row with its pool's name in the ``pool``
column, and names its files by pool and run (:func:`app.pipeline.lake.run_name`). It takes
every pool's lock first (:func:`app.pipeline.lock.locked_pools`), so one export at a time
writes to the lake's staging area, whichever pools it covers.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pyarrow import fs

from app.core.models import DEFAULT_POOL
from app.pipeline import queries
from app.pipeline.lake import (
    HISTORY,
    HISTORY_COLUMNS,
    PARTITION_COLUMNS,
    STAGING,
    TIMESTAMP,
    TIMESTAMP_COLUMNS,
    arrow_filesystem,
    join,
    partition_dir,
    run_name,
)
from app.pipeline.lock import locked_pools

log = logging.getLogger("sundial.pipeline.export")

Hook = Callable[[str], None]
"""Called with the name of each phase a run reaches ("staged", "moved"); tests interrupt here."""

CSV_BLOCK_BYTES = 8 << 20
"""How much CSV pyarrow parses at a time: bounds the export's memory, whatever the history size."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What one export did on one pool."""

    run_id: int | None
    low: datetime | None
    high: datetime | None
    rows: int = 0
    files: int = 0
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class PoolsExport:
    """What one export did: on every pool, and the rows and files of all of them."""

    pools: dict[str, ExportResult]
    rows: int = field(init=False)
    files: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", sum(run.rows for run in self.pools.values()))
        object.__setattr__(self, "files", sum(run.files for run in self.pools.values()))


class _CopyReader(io.RawIOBase):
    """The output of a ``COPY ... TO STDOUT`` as a readable byte stream, for pyarrow."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._chunks = chunks
        self._chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._chunk:
            try:
                self._chunk = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._chunk))
        buffer[:size] = self._chunk[:size]
        self._chunk = self._chunk[size:]
        return size


def _csv_reader(stream: io.BufferedReader[Any]) -> pacsv.CSVStreamingReader:
    names = [*PARTITION_COLUMNS, *HISTORY_COLUMNS.names]
    types: dict[str, pa.DataType] = {name: pa.string() for name in PARTITION_COLUMNS}
    for column in HISTORY_COLUMNS:
        types[column.name] = pa.int64() if column.type == TIMESTAMP else column.type
    return pacsv.open_csv(
        stream,
        read_options=pacsv.ReadOptions(column_names=names, block_size=CSV_BLOCK_BYTES),
        # COPY's CSV: NULL is an empty unquoted field, an empty string is "".
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def _history_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A parsed CSV batch as the history file schema (timestamps from microseconds)."""
    arrays = []
    for column in HISTORY_COLUMNS:
        values = batch.column(column.name)
        if column.name in TIMESTAMP_COLUMNS:
            values = pc.cast(values, TIMESTAMP)
        arrays.append(values)
    return pa.RecordBatch.from_arrays(arrays, schema=HISTORY_COLUMNS)


def split_by_partition(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Consecutive rows of ``batch`` that share a partition, with that partition's directory.

    The export orders rows by partition, so each partition is one run of rows.
    """
    keys = pc.binary_join_element_wise(
        batch.column("namespace"), batch.column("queue"), batch.column("day"), "/"
    )
    runs = pc.run_end_encode(keys)
    start = 0
    for end, key in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        namespace, queue, day = key.split("/")
        yield partition_dir(namespace, queue, day), batch.slice(start, end - start)
        start = end


class _PartitionWriter:
    """Writes one staged Parquet file per partition, one partition at a time."""

    def __init__(self, filesystem: fs.FileSystem, staging: str, filename: str) -> None:
        self._fs = filesystem
        self._staging = staging
        self._filename = filename
        self._current: str | None = None
        self._writer: pq.ParquetWriter | None = None
        self.rows: dict[str, int] = {}

    def write(self, partition: str, rows: pa.RecordBatch) -> None:
        if partition != self._current:
            self.close()
            directory = join(self._staging, partition)
            self._fs.create_dir(directory, recursive=True)
            self._writer = pq.ParquetWriter(
                join(directory, self._filename),
                HISTORY_COLUMNS,
                filesystem=self._fs,
                compression="zstd",
            )
            self._current = partition
        assert self._writer is not None
        self._writer.write_batch(_history_batch(rows))
        self.rows[partition] = self.rows.get(partition, 0) + rows.num_rows

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._current = None


def _delete_dir(filesystem: fs.FileSystem, path: str) -> None:
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


def _stage(
    conn: psycopg.Connection[Any],
    pool: str,
    run: tuple[int, datetime, datetime],
    writer: _PartitionWriter,
    advanced: Callable[[int], None] | None,
) -> None:
    run_id, low, high = run
    window = {"low": low, "high": high, "pool": pool}
    with conn.cursor() as cur, cur.copy(queries.EXPORT_COPY, window) as copy:
        stream = io.BufferedReader(_CopyReader(iter(copy)), buffer_size=1 << 20)
        if not stream.peek(1):  # an empty window (pyarrow refuses an empty CSV)
            return
        for batch in _csv_reader(stream):
            for partition, rows in split_by_partition(batch):
                writer.write(partition, rows)
            if advanced:
                advanced(batch.num_rows)
    writer.close()
    log.info("export run %d of pool %s: staged %d rows", run_id, pool, sum(writer.rows.values()))


def _open_or_new_run(
    conn: psycopg.Connection[Any], lag_seconds: float
) -> tuple[tuple[int, datetime, datetime] | None, bool]:
    row = conn.execute(queries.EXPORT_OPEN_RUN).fetchone()
    if row is not None:
        return (row[0], row[1], row[2]), True
    row = conn.execute(queries.EXPORT_NEW_RUN, {"lag": lag_seconds}).fetchone()
    return ((row[0], row[1], row[2]) if row is not None else None), False


def export_history(
    database_url: str,
    lake: str,
    *,
    pool: str = DEFAULT_POOL,
    lag_seconds: float = 5.0,
    hook: Hook | None = None,
    advanced: Callable[[int], None] | None = None,
) -> ExportResult:
    """Export the history of one database, the pool ``pool``'s, archived since its watermark
    (first redoing an interrupted run); ``advanced`` is told of the rows as they are staged."""
    exported = export_pools(
        {pool: database_url}, lake, lag_seconds=lag_seconds, hook=hook, advanced=advanced
    )
    return exported.pools[pool]


def export_pools(
    pools: Mapping[str, str],
    lake: str,
    *,
    lag_seconds: float = 5.0,
    hook: Hook | None = None,
    advanced: Callable[[int], None] | None = None,
) -> PoolsExport:
    """Export the history of every pool (``pools``: database URL by name), each from its own
    watermark (first redoing its interrupted run), one pool after another.

    Raises:
        app.pipeline.lock.ExportBusyError: another export or prune runs on one of the pools
            (nothing is exported).
        app.pipeline.lock.PoolMismatchError: a pool's database is registered as another pool.
    """
    filesystem, root = arrow_filesystem(lake)
    history = join(root, HISTORY)
    with locked_pools(pools) as sessions:
        # Whatever is staged belongs to an interrupted attempt of a run or to finished runs:
        # this export holds every pool's lock, so no other writes there now.
        _delete_dir(filesystem, join(history, STAGING))
        runs = {
            name: _export_pool(conn, name, filesystem, history, lag_seconds, hook, advanced)
            for name, conn in sessions.items()
        }
    return PoolsExport(runs)


def _export_pool(
    conn: psycopg.Connection[Any],
    pool: str,
    filesystem: fs.FileSystem,
    history: str,
    lag_seconds: float,
    hook: Hook | None,
    advanced: Callable[[int], None] | None,
) -> ExportResult:
    """One run on one pool's locked session: its open run redone, else a new one."""
    run, resumed = _open_or_new_run(conn, lag_seconds)
    if run is None:
        return ExportResult(run_id=None, low=None, high=None)
    run_id, low, high = run
    again = " (resumed)" if resumed else ""
    log.info("export run %d of pool %s%s: [%s, %s)", run_id, pool, again, low, high)
    name = run_name(pool, run_id)
    staging = join(history, STAGING, f"run-{name}")
    filename = f"part-{name}.parquet"
    writer = _PartitionWriter(filesystem, staging, filename)
    _stage(conn, pool, run, writer, advanced)
    if hook:
        hook("staged")
    for partition in writer.rows:
        target = join(history, partition)
        filesystem.create_dir(target, recursive=True)
        filesystem.move(join(staging, partition, filename), join(target, filename))
    if hook:
        hook("moved")
    rows = sum(writer.rows.values())
    conn.execute(queries.EXPORT_COMMIT_RUN, {"id": run_id, "rows": rows, "files": len(writer.rows)})
    _delete_dir(filesystem, staging)
    return ExportResult(run_id, low, high, rows, len(writer.rows), resumed)
