"""The database side of a bulk enqueue: checked rows into ``messages``, over a few connections.

PostgreSQL spends most of a bulk enqueue (about 15-20 µs of CPU per row, for the heap, four
indexes, the foreign key and the speculative insertion), and one connection uses one core: the
rows are therefore spread over ``connections`` loaders, each a thread with its own connection,
that insert in parallel. What must not change with the parallelism:

- **seq follows the input order.** The driver reserves sequence values for each batch read, in
  input order, before the rows are spread (:data:`queries.ENQUEUE_RESERVE_SEQ`), and rows are
  inserted with their reserved value.
- **Of an id repeated in the dataset, the first is enqueued.** Rows are spread by a hash of
  their id, so every row of an id goes to the same loader, which inserts in input order; and no
  two loaders ever insert the same id, so they never wait for each other (nor deadlock).
- **Each transaction checks the queue** (deleted, paused for enqueue) under ``FOR SHARE`` and
  wakes its waiting consumers at commit, as before.

Each loader takes whole transactions of ``batch_rows`` rows from a queue of two: the driver
holds at most a batch per loader being filled plus two waiting, so memory stays bounded.
"""

from __future__ import annotations

import io
import queue as queues
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from app.core.errors import NamespaceMovingError, NotFoundError, QueuePausedError
from app.pipeline import queries
from app.pipeline.database import connect

if TYPE_CHECKING:
    from app.pipeline.enqueue import TargetQueue

NOTIFY_CHANNEL = "sundial_ready"  # app.store.sql.listeners.NOTIFY_CHANNEL
NAMESPACE_TAKEN = "SD001"
"""SQLSTATE of a move's refusal to change a namespace it has frozen (migration 0012)."""

ROW_COLUMNS = ("ord", "seq", "id", "priority", "payload", "metadata", "exclusive_value")
"""What a loader inserts: the checked message, its place in the input and its reserved seq."""

INBOX = 2
"""Transactions waiting for each loader."""

Advanced = Callable[[int], None]


def _copy_csv(rows: pa.Table) -> bytes:
    out = io.BytesIO()
    # Strings are quoted and NULLs left empty: COPY's CSV reads "" as '' and nothing as NULL.
    pacsv.write_csv(rows, out, pacsv.WriteOptions(include_header=False))
    return out.getvalue()


def insert_batch(conn: psycopg.Connection[Any], queue: TargetQueue, rows: pa.Table) -> int:
    """One transaction: ``rows`` (:data:`ROW_COLUMNS`) into the queue; returns how many messages
    it created."""
    try:
        with conn.transaction():
            lock = conn.execute(queries.QUEUE_LOCK, {"queue_id": queue.id}).fetchone()
            if lock is None:
                raise NotFoundError(f"queue {queue.namespace}/{queue.name} was deleted")
            paused, delay, namespace_state = lock
            if namespace_state != "active":
                raise NamespaceMovingError(queue.namespace)
            if paused:
                raise QueuePausedError(
                    f"queue {queue.namespace}/{queue.name} was paused for enqueue"
                )
            conn.execute(queries.ENQUEUE_STAGE)
            with conn.cursor() as cur, cur.copy(queries.ENQUEUE_COPY) as copy:
                copy.write(_copy_csv(rows.select(list(ROW_COLUMNS))))
            created, ready = conn.execute(
                queries.ENQUEUE_INSERT, {"queue_id": queue.id, "delay": delay}
            ).fetchone()  # type: ignore[misc]
            if ready:
                conn.execute(
                    queries.ENQUEUE_WAKE, {"channel": NOTIFY_CHANNEL, "queue_id": queue.id}
                )
    except psycopg.Error as error:
        if error.sqlstate == NAMESPACE_TAKEN:  # a move froze it after the check above
            raise NamespaceMovingError(queue.namespace) from error
        raise
    return int(created)


class SeqReserver:
    """Hands out values of ``messages``' seq sequence, on a connection of its own."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        row = conn.execute(queries.ENQUEUE_SEQUENCE).fetchone()
        if row is None or row[0] is None:
            raise RuntimeError("messages.seq has no sequence: is the schema migrated?")
        self._sequence: str = row[0]

    def reserve(self, count: int) -> pa.Array:
        """``count`` new values, ascending."""
        with (
            self._conn.cursor() as cur,
            cur.copy(
                queries.ENQUEUE_RESERVE_SEQ, {"sequence": self._sequence, "count": count}
            ) as copy,
        ):
            text = b"".join(bytes(chunk) for chunk in copy)
        values = pacsv.read_csv(
            io.BytesIO(text),
            read_options=pacsv.ReadOptions(column_names=["seq"]),
            convert_options=pacsv.ConvertOptions(column_types={"seq": pa.int64()}),
        ).column(0)
        ascending = values.combine_chunks()
        assert len(ascending) == count
        return ascending.take(pc.array_sort_indices(ascending))


@dataclass(slots=True)
class _Outcome:
    created: int = 0
    error: Exception | None = None


class _Loader(threading.Thread):
    """Inserts the transactions of its inbox, in order, on its own connection."""

    def __init__(
        self,
        database_url: str,
        queue: TargetQueue,
        halt: threading.Event,
        advanced: Advanced | None,
    ) -> None:
        super().__init__(name="sundial-enqueue-loader", daemon=True)
        self.inbox: queues.Queue[pa.Table | None] = queues.Queue(maxsize=INBOX)
        self.outcome = _Outcome()
        self._url = database_url
        self._queue = queue
        self._halt = halt
        self._advanced = advanced

    def run(self) -> None:
        try:
            with connect(self._url) as conn:
                while (rows := self.inbox.get()) is not None:
                    if self._halt.is_set():
                        continue  # another loader failed: take what is left, insert nothing
                    self.outcome.created += insert_batch(conn, self._queue, rows)
                    if self._advanced:
                        self._advanced(rows.num_rows)
        # Any error: the driver's thread raises it (see Loaders).
        except Exception as error:  # noqa: BLE001
            self.outcome.error = error
            self._halt.set()
            # Keep taking, so the driver never blocks on a full inbox, until the end marker.
            while self.inbox.get() is not None:
                pass


class Loaders:
    """``connections`` loaders fed with rows in input order; a context manager.

    :meth:`add` spreads rows by id over the loaders and hands a loader a transaction whenever it
    has ``batch_rows`` rows; :meth:`finish` hands over the rest, waits, and returns how many
    messages were created. The first loader error stops every loader (each finishes the
    transaction it is in) and is raised by the next :meth:`add` or by :meth:`finish`.
    """

    def __init__(
        self,
        database_url: str,
        queue: TargetQueue,
        *,
        connections: int,
        batch_rows: int,
        advanced: Advanced | None = None,
    ) -> None:
        if connections < 1:
            raise ValueError("connections must be at least 1")
        self._halt = threading.Event()
        self._loaders = [
            _Loader(database_url, queue, self._halt, advanced) for _ in range(connections)
        ]
        self._batch_rows = batch_rows
        self._filling: list[list[pa.Table]] = [[] for _ in self._loaders]
        """Per loader, the rows gathered for its next transaction."""

    def __enter__(self) -> Loaders:
        for loader in self._loaders:
            loader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()  # a no-op after finish(); on an error, loaders stop at once
        self._close()

    def _close(self) -> None:
        for loader in self._loaders:
            if loader.is_alive():
                loader.inbox.put(None)
        for loader in self._loaders:
            loader.join()

    def _raise_failure(self) -> None:
        for loader in self._loaders:
            if loader.outcome.error is not None:
                raise loader.outcome.error

    def _shards(self, rows: pa.Table) -> list[pa.Table]:
        count = len(self._loaders)
        if count == 1:
            return [rows]
        # Python's string hash: the same within this process, which is all that matters here.
        shard = pa.array([hash(key) % count for key in rows.column("id").to_pylist()], pa.int64())
        return [rows.filter(pc.equal(shard, index)) for index in range(count)]

    def add(self, rows: pa.Table) -> None:
        """Queue ``rows`` (:data:`ROW_COLUMNS`, in input order) for insertion."""
        if self._halt.is_set():
            self._raise_failure()
        for index, part in enumerate(self._shards(rows)):
            if part.num_rows:
                self._filling[index].append(part)
            while self._filled(index) >= self._batch_rows:
                self._hand_over(index, self._batch_rows)

    def _filled(self, index: int) -> int:
        return sum(part.num_rows for part in self._filling[index])

    def _hand_over(self, index: int, size: int) -> None:
        filling = pa.concat_tables(self._filling[index])
        batch, rest = filling.slice(0, size), filling.slice(size)
        self._filling[index] = [rest] if rest.num_rows else []
        self._loaders[index].inbox.put(batch.combine_chunks())

    def finish(self) -> int:
        """Hand over what is left, wait for every loader; the messages they created."""
        for index in range(len(self._loaders)):
            filled = self._filled(index)
            if filled and not self._halt.is_set():
                self._hand_over(index, filled)
        self._close()
        self._raise_failure()
        return sum(loader.outcome.created for loader in self._loaders)
