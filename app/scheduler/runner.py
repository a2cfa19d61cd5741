"""The background scheduler: leadership and timing. The work itself is the store's, handed in by
the composition root as a :class:`Maintenance` (the statements are in ``app/store/sql/``).

Every server process runs one :class:`Scheduler`; exactly one of them leads at a time::

     follower ──pg_try_advisory_lock──► leader ──tick every scheduler_tick_seconds──┐
        ▲   (every leader_poll_seconds)   │  ▲                                       │
        │                                 │  └───────────────────────────────────────┘
        └──── connection lost / stop ─────┘

Leadership is a session-level PostgreSQL advisory lock held by the leader's own connection, and
the leader does its work on that same connection. If the leader process dies, its connection
closes, PostgreSQL drops the lock, and a follower takes over at its next poll (about a second).
If the connection breaks, the leader stops working at once, because its work needs it.

A leader can also stall without its session ending: its process frozen, or its network to the
database cut while the server side of the connection stays open. Its session then holds the lock
but runs nothing, while a working leader runs a statement every tick. A standby that fails to
take the lock therefore looks at the holder's session, and if it has been idle for longer than
``leader_stale_seconds`` it terminates it (fencing: the stalled leader's next statement fails,
and it returns to standby) and takes the lock.

Nothing depends on the leader for correctness: every maintenance statement is guarded and
batched with SKIP LOCKED, and dequeue takes due messages by itself; one leader only avoids waste.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from typing import Protocol

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.config import Settings
from app.core.maintenance import TickResult

log = logging.getLogger("sundial.scheduler")

HEARTBEAT_SECONDS = 1.0


class Maintenance(Protocol):
    """The scheduler's work on the database, each call on the scheduler's own connection."""

    async def try_lead(self, conn: AsyncConnection) -> bool:
        """Take the leader lock if no other session holds it."""
        ...

    async def fence_stalled_leader(
        self, conn: AsyncConnection, stale_seconds: float
    ) -> list[tuple[int, bool]]:
        """End the leader's session if idle for over ``stale_seconds``: (pid, ended) pairs."""
        ...

    async def heartbeat(self, conn: AsyncConnection, node_id: str, *, leader: bool) -> None:
        """Record that this node is alive, and whether it leads."""
        ...

    async def tick(self, conn: AsyncConnection) -> TickResult:
        """Promote due messages, release expired leases, expire messages, fold the count deltas
        into the kept counts."""
        ...

    async def archive_finished(self, conn: AsyncConnection, days_ahead: int = 3) -> int:
        """Move finished messages past their retention into history; how many moved."""
        ...

    async def prune_listeners(self, conn: AsyncConnection) -> int:
        """Forget the notification registrations of connections that are gone."""
        ...

    async def analyze_if_stale(self, conn: AsyncConnection) -> bool:
        """Refresh the hot table's statistics if many rows changed; whether it did."""
        ...

    async def forget_idle_token_rates(self, conn: AsyncConnection) -> int:
        """Delete the per-token rate limits' counts that mean nothing any more."""
        ...

    async def prune_history(self, engine: AsyncEngine, retention_days: int) -> object | None:
        """Drop history partitions past ``retention_days`` on a session of its own (never the
        leader's), without blocking the archive; what it did, None when it could not run."""
        ...


class Scheduler:
    """Contends for leadership and, while leading, runs the maintenance passes."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings,
        *,
        work: Maintenance,
        node_id: str | None = None,
    ):
        self.engine = engine
        self.settings = settings
        self.work = work
        self.node_id = node_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.is_leader = False
        self.ticks = 0
        """Maintenance ticks completed while leading (tests and metrics watch it)."""
        self.last_tick: TickResult | None = None
        self.changed = TickResult()
        """What every tick of this scheduler changed, added up (metrics count from it)."""
        self.history_prunes = 0
        """History prunes finished (SUNDIAL_HISTORY_RETENTION_DAYS; tests watch it)."""
        self._stopping = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._history_prune: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Begin contending for leadership in the background."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._run(), name=f"scheduler {self.node_id}")

    async def stop(self) -> None:
        """Stop, giving up leadership (the lock is released with the connection)."""
        self._stopping.set()
        if self._task is not None:
            task, self._task = self._task, None
            try:
                await asyncio.wait_for(task, timeout=10)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._history_prune is not None:
            # Its steps wait for a lock at most the prune's lock timeout each.
            prune, self._history_prune = self._history_prune, None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(prune), timeout=30)

    async def wait_until(
        self,
        *,
        leader: bool | None = None,
        ticks: int | None = None,
        history_prunes: int | None = None,
    ) -> None:
        """Wait until this scheduler's leadership is ``leader`` and/or it has done ``ticks``
        (and ``history_prunes``)."""

        def reached() -> bool:
            return (
                (leader is None or self.is_leader == leader)
                and (ticks is None or self.ticks >= ticks)
                and (history_prunes is None or self.history_prunes >= history_prunes)
            )

        async with self._changed:
            await self._changed.wait_for(reached)

    async def _announce(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                conn = await self.engine.connect()
                try:
                    await self._contend(conn)
                finally:
                    # Never hand a connection that may hold the lock back to the pool.
                    await conn.invalidate()
                    await conn.close()
            except (sa_exc.DBAPIError, OSError) as error:
                log.warning("scheduler %s lost its database connection: %s", self.node_id, error)
            if self.is_leader:
                self.is_leader = False
                log.info("scheduler %s is no longer the leader", self.node_id)
                await self._announce()
            await self._pause(self.settings.leader_poll_seconds)

    async def _contend(self, conn: AsyncConnection) -> None:
        while not self._stopping.is_set():
            acquired = await self.work.try_lead(conn)
            if not acquired and await self._fence_stalled_leader(conn):
                acquired = await self.work.try_lead(conn)
            await self._heartbeat(conn, leader=acquired)
            if acquired:
                self.is_leader = True
                log.info("scheduler %s is the leader", self.node_id)
                await self._announce()
                await self._lead(conn)
                return
            await self._pause(self.settings.leader_poll_seconds)

    async def _lead(self, conn: AsyncConnection) -> None:
        loop = asyncio.get_running_loop()
        next_cleanup = loop.time()
        next_heartbeat = loop.time() + HEARTBEAT_SECONDS
        while not self._stopping.is_set():
            try:
                self.last_tick = await self.work.tick(conn)
                self.changed += self.last_tick
                if loop.time() >= next_cleanup:
                    moved = await self.work.archive_finished(
                        conn, self.settings.history_partition_days_ahead
                    )
                    if moved:
                        log.info("archived %d finished messages into history", moved)
                    await self.work.prune_listeners(conn)
                    await self.work.forget_idle_token_rates(conn)
                    self._start_history_prune()
                    next_cleanup = loop.time() + self.settings.scheduler_cleanup_seconds
            except sa_exc.DBAPIError as error:
                if error.connection_invalidated:
                    raise
                # A statement failed (e.g. a partition race); the next tick tries again.
                log.exception("scheduler tick failed")
                await conn.rollback()
            if loop.time() >= next_heartbeat:
                await self._heartbeat(conn, leader=True)
                if await self.work.analyze_if_stale(conn):
                    log.debug("analyzed the messages table (statistics were stale)")
                next_heartbeat = loop.time() + HEARTBEAT_SECONDS
            self.ticks += 1
            await self._announce()
            await self._pause(self.settings.scheduler_tick_seconds)

    def _start_history_prune(self) -> None:
        """Start a history prune in the background (SUNDIAL_HISTORY_RETENTION_DAYS set), unless
        one still runs: the leader's loop never waits for it."""
        days = self.settings.history_retention_days
        if days is None or (self._history_prune is not None and not self._history_prune.done()):
            return
        self._history_prune = asyncio.create_task(
            self._prune_history(days), name=f"history prune {self.node_id}"
        )

    async def _prune_history(self, retention_days: int) -> None:
        try:
            result = await self.work.prune_history(self.engine, retention_days)
        except Exception:
            log.exception("history prune failed; the next cleanup tries again")
        else:
            if result is not None:
                log.debug("history prune: %s", result)
        self.history_prunes += 1
        await self._announce()

    async def _fence_stalled_leader(self, conn: AsyncConnection) -> bool:
        """Terminate the leader's session if it has stopped working; True if one was ended."""
        rows = await self.work.fence_stalled_leader(conn, self.settings.leader_stale_seconds)
        for pid, terminated in rows:
            log.warning(
                "scheduler %s fenced the stalled leader session %s (idle over %.1f s): %s",
                self.node_id,
                pid,
                self.settings.leader_stale_seconds,
                "ended" if terminated else "did not end in time",
            )
        return any(terminated for _, terminated in rows)

    async def _heartbeat(self, conn: AsyncConnection, *, leader: bool) -> None:
        await self.work.heartbeat(conn, self.node_id, leader=leader)
