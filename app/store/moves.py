"""Moving a namespace from one pool to another while it keeps serving
(docs/adr/0015-namespaces-on-pools.md, docs/scaling.md).

:class:`NamespaceMover` runs the move in its phases, journaled in the catalogue
(``namespace_moves``) so that running it again resumes a move whose mover died, or
:meth:`NamespaceMover.abort` undoes it before the flip:

1. **copying** — the source logs every change to the namespace's messages (triggers, in the
   change's own transaction); the target receives the namespace (``incoming``: never served),
   its queues and tokens with their ids, and a snapshot copy of its messages taken after the
   triggers exist; then passes copy what changed since, until a pass finds few changes.
2. **frozen** — the source's namespace is frozen: its catalogue version moves (every statement
   prepared before is refused), its triggers refuse any change but the mover's, and parked long
   polls are woken. The mover then waits until every transaction that was in progress at the
   freeze has ended (one may have passed its guards before and still commit), applies the last
   changes, queues and tokens in one transaction on the target, and makes it ``active``.
3. **flipped** — the catalogue's map points at the target (the linearisation point); the copy
   left behind on the source is deleted in batches, and the triggers dropped.

One pool acts on the namespace at any moment: the source until the freeze, the target after it
is active; between them requests wait for the flip (or answer 503 to retry).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.engine import URL

from app.core.errors import ConflictError, NotFoundError, UnavailableError, ValidationError
from app.database_url import psycopg_dsn
from app.store.sql import moves as sql

log = logging.getLogger("sundial.moves")

SETTLED_CHANGES = 200
"""A catch-up pass that applies fewer changes than this ends the copy: the freeze then waits for
about this many."""
MAX_PASSES = 50
"""Catch-up passes before freezing anyway (a namespace changing faster than a pass copies)."""
FREEZE_WAIT_SECONDS = 10.0
"""How long the freeze waits for the transactions in progress at the freeze to end; past it
the move is undone (the namespace is unfrozen where it was) and can be run again."""
DELETE_BATCH = 5000
"""Messages of the copy left behind deleted per statement."""

Phase = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class MoveReport:
    """What a finished move did."""

    namespace: str
    source: str
    target: str
    copied: int
    """Messages in the snapshot copy."""
    passes: int
    """Catch-up passes before the freeze, the last one included."""
    changes: int
    """Changed messages applied after the snapshot, the freeze's last pass included."""
    frozen_seconds: float
    """How long the namespace was frozen (its requests waiting)."""


@dataclass(frozen=True, slots=True)
class MoveUnderWay:
    """A row of the catalogue's journal."""

    namespace: str
    source: str
    target: str
    phase: str


class NamespaceMover:
    """Moves namespaces between the pools at ``urls`` (by name; ``default`` is the catalogue).

    Args:
        urls: every pool's database URL by name.
        on_phase: awaited as each phase begins (``copying``, ``frozen``, then ``draining``
            once frozen, before the wait for transactions in progress, and ``flipped``), for
            tests and progress.
        freeze_wait_seconds: see :data:`FREEZE_WAIT_SECONDS`.
        wait_in_flight: whether the freeze waits for transactions in progress (always, but
            for the test that shows what goes wrong without it).
    """

    def __init__(
        self,
        urls: Mapping[str, str | URL],
        *,
        on_phase: Phase | None = None,
        freeze_wait_seconds: float = FREEZE_WAIT_SECONDS,
        wait_in_flight: bool = True,
    ) -> None:
        self._dsns = {name: psycopg_dsn(url) for name, url in urls.items()}
        self._on_phase = on_phase
        self._freeze_wait = freeze_wait_seconds
        self._wait_in_flight = wait_in_flight

    # --- the journal ------------------------------------------------------------------------

    async def under_way(self) -> list[MoveUnderWay]:
        """The moves the catalogue's journal holds (started, not finished or aborted)."""
        async with self._connect("default") as catalogue:
            rows = await (await catalogue.execute(sql.MOVES_UNDER_WAY)).fetchall()
        return [MoveUnderWay(r["namespace"], r["source"], r["target"], r["phase"]) for r in rows]

    # --- moving -----------------------------------------------------------------------------

    async def move(self, namespace: str, target: str) -> MoveReport | None:
        """Move ``namespace`` to pool ``target``, or finish its move there if one was under way;
        None when it is on ``target`` already.

        Raises:
            ValidationError: ``target`` is not a pool of this configuration.
            NotFoundError: no such namespace.
            ConflictError: another move of the namespace (to another pool), or out of its pool,
                is under way.
            UnavailableError: the freeze waited too long; the move was undone.
        """
        if target not in self._dsns:
            known = ", ".join(sorted(self._dsns))
            raise ValidationError("pool", f"unknown pool {target!r}; pools: {known}")
        async with self._connect("default") as catalogue:
            journal = await self._journal(catalogue, namespace)
            if journal is None:
                source = await self._pool_of(catalogue, namespace)
                if source == target:
                    return None
                await self._check_source_is_free(source, namespace)
                params = {"namespace": namespace, "source": source, "target": target}
                await catalogue.execute(sql.MOVE_JOURNAL_START, params)
                journal = await self._journal(catalogue, namespace)
                if journal is None:  # finished or aborted meanwhile by another mover
                    raise ConflictError(f"namespace {namespace!r} moved meanwhile")
            if journal.target != target:
                raise ConflictError(
                    f"namespace {namespace!r} is being moved to {journal.target!r}: finish or"
                    " abort that move first",
                    namespace=namespace,
                )
            return await self._run(catalogue, journal)

    async def _run(self, catalogue: psycopg.AsyncConnection[Any], move: MoveUnderWay) -> MoveReport:
        ns, source, target = move.namespace, move.source, move.target
        copied = passes = changes = 0
        frozen_seconds = 0.0
        async with self._connect(source) as src, self._connect(target) as dst:
            if move.phase == "copying":
                await self._announce("copying")
                copied = await self._prepare_and_copy(src, dst, ns)
                while True:
                    applied = await self._catch_up(src, dst, ns)
                    passes, changes = passes + 1, changes + applied
                    if applied < SETTLED_CHANGES or passes >= MAX_PASSES:
                        break
                await self._set_phase(catalogue, ns, "frozen")
                move = MoveUnderWay(ns, source, target, "frozen")
            if move.phase == "frozen":
                await self._announce("frozen")
                started = time.monotonic()
                changes += await self._freeze_and_finish(src, dst, ns)
                async with catalogue.transaction():
                    flip = {"namespace": ns, "source": source, "target": target}
                    await catalogue.execute(sql.MAP_FLIP, flip)
                    await catalogue.execute(
                        sql.MOVE_JOURNAL_PHASE, {"namespace": ns, "phase": "flipped"}
                    )
                frozen_seconds = time.monotonic() - started
            await self._announce("flipped")
            await self._clean_up_source(src, ns)
        await catalogue.execute(sql.MOVE_JOURNAL_END, {"namespace": ns})
        log.info(
            "moved namespace %s from pool %s to %s: %d copied, %d changes in %d passes,"
            " frozen %.3f s",
            ns,
            source,
            target,
            copied,
            changes,
            passes,
            frozen_seconds,
        )
        return MoveReport(ns, source, target, copied, passes, changes, frozen_seconds)

    async def _prepare_and_copy(
        self, src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> int:
        """Log the namespace's changes on the source, then copy a snapshot of it taken after
        the log began into a fresh ``incoming`` copy on the target; returns the messages
        copied."""
        async with src.transaction():
            await src.execute(sql.MOVING_OUT_ADD, {"namespace": ns})
            for statement in sql.MOVE_LOG_TRIGGERS_INSTALL:
                await src.execute(statement)
        # Keys logged by an earlier attempt are superseded by the snapshot below.
        await src.execute(sql.MOVE_LOG_CLEAR)
        async with dst.transaction():
            await self._drop_copy(dst, ns)
            async with self._snapshot(src):
                row = await (await src.execute(sql.NAMESPACE_ROW, {"namespace": ns})).fetchone()
                if row is None:
                    raise NotFoundError(f"namespace {ns!r} does not exist", namespace=ns)
                await dst.execute(sql.NAMESPACE_INCOMING, row)
                await self._sync_catalogue(src, dst, ns)
                copied = await self._stream(
                    src, sql.MESSAGES_OF_COPY_OUT, {"namespace": ns}, dst, sql.MESSAGES_COPY_IN
                )
        return copied

    async def _catch_up(
        self, src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> int:
        """One pass: make the target's queues, tokens and logged messages of ``ns`` what they
        are on the source now; returns how many messages it applied."""
        async with dst.transaction(), self._snapshot(src):
            await self._sync_catalogue(src, dst, ns)
            return await self._apply_changes(src, dst)

    @staticmethod
    @asynccontextmanager
    async def _snapshot(src: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
        """A REPEATABLE READ transaction on the source: a pass reads the log, the queues and
        the messages at one moment, and forgets only the log entries it read."""
        async with src.transaction():
            await src.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    async def _apply_changes(
        self, src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any]
    ) -> int:
        """Within the caller's transactions (a snapshot of the source, and the target's):
        replace each logged message by its row on the source (or nothing, when it is gone
        there), then forget those log entries; returns how many it applied.

        Everything is read at the snapshot: the entries of transactions that had not committed
        then stay for the next pass, and a message an exclusive value passed on to another is
        logged whenever the other one is, so the target never holds both running."""
        last = (await (await src.execute(sql.MOVE_LOG_LAST)).fetchone() or {}).get("last")
        if last is None:
            return 0
        keys = await (await src.execute(sql.MOVE_LOG_KEYS, {"last": last})).fetchone()
        if keys is None:
            return 0
        await dst.execute(sql.MESSAGES_DELETE_KEYS, keys)
        await self._stream(src, sql.MESSAGES_CHANGED_COPY_OUT, keys, dst, sql.MESSAGES_COPY_IN)
        await src.execute(sql.MOVE_LOG_FORGET, {"last": last})
        return len(keys["ids"])

    async def _freeze_and_finish(
        self, src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> int:
        """Freeze the namespace on the source, wait out the transactions in progress, and make
        the target's copy whole and active in one transaction; returns the changes applied."""
        async with src.transaction():
            frozen = await src.execute(
                sql.NAMESPACE_SET_STATE,
                {"namespace": ns, "state": "frozen", "from_states": ["active", "frozen"]},
            )
            if await frozen.fetchone() is None:
                raise NotFoundError(f"namespace {ns!r} is not on its source pool", namespace=ns)
            await src.execute(sql.NAMESPACE_WAKE_CONSUMERS, {"namespace": ns})
        if self._wait_in_flight:
            await self._announce("draining")
            await self._wait_for_transactions_in_progress(src, ns)
        async with dst.transaction(), self._snapshot(src):
            await self._sync_catalogue(src, dst, ns)
            applied = await self._apply_changes(src, dst)
            await dst.execute(sql.MESSAGE_SEQ_PAST_COPIED)
            activated = await dst.execute(
                sql.NAMESPACE_SET_STATE,
                {"namespace": ns, "state": "active", "from_states": ["incoming", "active"]},
            )
            if await activated.fetchone() is None:
                raise ConflictError(f"the copy of namespace {ns!r} on its target is gone")
        return applied

    async def _wait_for_transactions_in_progress(
        self, src: psycopg.AsyncConnection[Any], ns: str
    ) -> None:
        """Wait until every transaction in progress on the source just after the freeze has
        ended; undo the freeze and raise UnavailableError after the freeze's wait."""
        row = await (await src.execute(sql.TRANSACTIONS_IN_PROGRESS)).fetchone()
        xids = list(row["xids"]) if row else []
        deadline = time.monotonic() + self._freeze_wait
        delay = 0.001
        while xids:
            running = await src.execute(sql.TRANSACTIONS_STILL_RUNNING, {"xids": xids})
            if not (await running.fetchone() or {}).get("running"):
                return
            if time.monotonic() >= deadline:
                await src.execute(
                    sql.NAMESPACE_SET_STATE,
                    {"namespace": ns, "state": "active", "from_states": ["frozen"]},
                )
                raise UnavailableError(
                    f"transactions on the source pool did not end within {self._freeze_wait:g} s"
                    f" of the freeze; namespace {ns!r} was unfrozen: run the move again"
                )
            # No event tells another session's transaction has ended: poll, briefly at first.
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def _sync_catalogue(
        self, src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> None:
        """Within the callers' transactions: make the target's queues and tokens of ``ns`` the
        source's (same ids), its topics and their subscriptions, and its description."""
        params = {"namespace": ns}
        row = await (await src.execute(sql.NAMESPACE_ROW, params)).fetchone()
        if row is not None:
            await dst.execute(sql.NAMESPACE_DESCRIBE, row)
        found = await (await src.execute(sql.QUEUES_OF, params)).fetchall()
        for queue in found:
            await dst.execute(sql.QUEUE_UPSERT, queue)
        await dst.execute(sql.QUEUES_DELETE_OTHERS, {**params, "ids": [q["id"] for q in found]})
        issued = await (await src.execute(sql.TOKENS_OF, params)).fetchall()
        for token in issued:
            await dst.execute(sql.TOKEN_UPSERT, token)
        await dst.execute(sql.TOKENS_DELETE_OTHERS, {**params, "ids": [t["id"] for t in issued]})
        await self._sync_topics(src, dst, ns)
        await self._sync_periodic(src, dst, ns)

    @staticmethod
    async def _sync_topics(
        src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> None:
        """Within the callers' transactions, after the queues: make the target's topics of
        ``ns`` and their subscriptions the source's."""
        params = {"namespace": ns}
        found = await (await src.execute(sql.TOPICS_OF, params)).fetchall()
        for topic in found:
            await dst.execute(sql.TOPIC_UPSERT, topic)
        names = [t["name"] for t in found]
        await dst.execute(sql.TOPICS_DELETE_OTHERS, {**params, "names": names})
        await dst.execute(sql.SUBSCRIPTIONS_DELETE, params)
        for subscription in await (await src.execute(sql.SUBSCRIPTIONS_OF, params)).fetchall():
            await dst.execute(sql.SUBSCRIPTION_INSERT, subscription)

    @staticmethod
    async def _sync_periodic(
        src: psycopg.AsyncConnection[Any], dst: psycopg.AsyncConnection[Any], ns: str
    ) -> None:
        """Within the callers' transactions: make the target's periodic jobs of ``ns`` the
        source's, with their next runs."""
        params = {"namespace": ns}
        found = await (await src.execute(sql.PERIODIC_JOBS_OF, params)).fetchall()
        for job in found:
            await dst.execute(sql.PERIODIC_JOB_UPSERT, job)
        names = [j["name"] for j in found]
        await dst.execute(sql.PERIODIC_JOBS_DELETE_OTHERS, {**params, "names": names})

    async def _clean_up_source(self, src: psycopg.AsyncConnection[Any], ns: str) -> None:
        """Stop logging, then delete the copy left behind in batches (its history stays)."""
        async with src.transaction():
            moved = {"namespace": ns, "state": "moved", "from_states": ["frozen", "moved"]}
            await src.execute(sql.NAMESPACE_SET_STATE, moved)
            await self._stop_logging(src, ns)
        while True:
            deleted = await src.execute(
                sql.MESSAGES_LEFT_BEHIND_DELETE, {"namespace": ns, "batch": DELETE_BATCH}
            )
            if deleted.rowcount < DELETE_BATCH:
                break
        await src.execute(sql.NAMESPACE_DELETE, {"namespace": ns})

    async def _stop_logging(self, src: psycopg.AsyncConnection[Any], ns: str) -> None:
        """Within the caller's transaction: forget ``ns`` as moving out, and its log; drop the
        triggers when no other namespace is moving out."""
        await src.execute(sql.MOVING_OUT_REMOVE, {"namespace": ns})
        await src.execute(sql.MOVE_LOG_CLEAR)
        if not await (await src.execute(sql.MOVING_OUT)).fetchall():
            for statement in sql.MOVE_LOG_TRIGGERS_DROP:
                await src.execute(statement)

    # --- aborting ---------------------------------------------------------------------------

    async def abort(self, namespace: str) -> MoveUnderWay | None:
        """Undo a move that has not flipped: the namespace is served where it was, the
        target's copy is dropped; returns the move undone (None: none was under way).

        Raises:
            ConflictError: the move has flipped already (run it again to finish it).
        """
        async with self._connect("default") as catalogue:
            move = await self._journal(catalogue, namespace)
            if move is None:
                return None
            if move.phase == "flipped":
                raise ConflictError(
                    f"the move of {namespace!r} to {move.target!r} has flipped: run it again to"
                    " finish it",
                    namespace=namespace,
                )
            async with self._connect(move.source) as src, self._connect(move.target) as dst:
                async with dst.transaction():
                    await self._drop_copy(dst, namespace)
                async with src.transaction():
                    await src.execute(
                        sql.NAMESPACE_SET_STATE,
                        {"namespace": namespace, "state": "active", "from_states": ["frozen"]},
                    )
                    await self._stop_logging(src, namespace)
            await catalogue.execute(sql.MOVE_JOURNAL_END, {"namespace": namespace})
        return move

    # --- plumbing ---------------------------------------------------------------------------

    @staticmethod
    async def _drop_copy(dst: psycopg.AsyncConnection[Any], ns: str) -> None:
        """Within the caller's transaction: delete an earlier attempt's copy on the target; a
        namespace the target serves is never touched."""
        row = await (await dst.execute(sql.NAMESPACE_ROW, {"namespace": ns})).fetchone()
        if row is None:
            return
        if row["state"] != "incoming":
            raise ConflictError(
                f"pool already holds namespace {ns!r} ({row['state']})", namespace=ns
            )
        await dst.execute(sql.NAMESPACE_DELETE, {"namespace": ns})

    async def _journal(
        self, catalogue: psycopg.AsyncConnection[Any], ns: str
    ) -> MoveUnderWay | None:
        row = await (await catalogue.execute(sql.MOVE_JOURNAL_READ, {"namespace": ns})).fetchone()
        return None if row is None else MoveUnderWay(ns, row["source"], row["target"], row["phase"])

    @staticmethod
    async def _pool_of(catalogue: psycopg.AsyncConnection[Any], ns: str) -> str:
        row = await (await catalogue.execute(sql.MAP_POOL, {"namespace": ns})).fetchone()
        if row is None:
            raise NotFoundError(f"namespace {ns!r} does not exist", namespace=ns)
        pool: str = row["pool"]
        return pool

    async def _check_source_is_free(self, source: str, ns: str) -> None:
        """One namespace moves out of a pool at a time: its change log is the move's."""
        if source not in self._dsns:
            raise ValidationError("pool", f"namespace {ns!r} is on pool {source!r}, not configured")
        async with self._connect(source) as src:
            others = [r["namespace"] for r in await (await src.execute(sql.MOVING_OUT)).fetchall()]
        if [other for other in others if other != ns]:
            raise ConflictError(
                f"pool {source!r} is moving namespace {others[0]!r} out: one at a time",
                namespace=ns,
            )

    async def _set_phase(
        self, catalogue: psycopg.AsyncConnection[Any], ns: str, phase: str
    ) -> None:
        await catalogue.execute(sql.MOVE_JOURNAL_PHASE, {"namespace": ns, "phase": phase})

    async def _announce(self, phase: str) -> None:
        if self._on_phase is not None:
            await self._on_phase(phase)

    @staticmethod
    async def _stream(
        src: psycopg.AsyncConnection[Any],
        out: LiteralString,
        params: Mapping[str, Any],
        dst: psycopg.AsyncConnection[Any],
        into: LiteralString,
    ) -> int:
        """COPY rows out of the source and into the target; returns how many."""
        async with src.cursor() as reading, dst.cursor() as writing:
            async with reading.copy(out, params) as source, writing.copy(into) as sink:
                async for chunk in source:
                    await sink.write(chunk)
            return max(reading.rowcount, 0)

    @asynccontextmanager
    async def _connect(self, pool: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of the mover's own to ``pool``, in autocommit, rows as dicts."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsns[pool], autocommit=True, row_factory=dict_row
            )
        except psycopg.OperationalError as error:
            raise UnavailableError(f"pool {pool!r} is unavailable: {error}") from error
        try:
            yield conn
        finally:
            await conn.close()
