"""The one LISTEN connection of a server process.

Enqueue, promotion of due messages and lease release ``NOTIFY sundial_ready, '<queue id>'`` at
commit (:data:`app.store.sql.listeners.NOTIFY_CHANNEL`). :class:`NotificationListener` keeps a
single autocommit psycopg connection listening on that channel and hands each queue id to a
callback; the HTTP layer fans it out to the requests long-polling that queue.

The listener outlives database restarts: when its connection breaks it reconnects with
exponential backoff, and after every (re)connection it calls ``on_connect`` so that waiters
re-check the database (notifications sent while it was away are lost).

Statements notify only queues some process has registered interest in
(:class:`ListenerRegistrations`, table ``queue_listeners``), keyed by the backend pid of that
process's LISTEN connection; a reconnection gets a new pid and registers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.sql.listeners import LISTENER_REGISTER, LISTENER_UNREGISTER, NOTIFY_CHANNEL

log = logging.getLogger("sundial.notifications")

KEEPALIVE_SECONDS = 15.0
"""How long the connection may sit idle before a ``SELECT 1`` proves it is still alive."""

CONNECT_TIMEOUT_SECONDS = 5
MIN_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 5.0


class NotificationListener:
    """LISTENs on one channel and calls ``on_notify(queue_id)`` for every notification.

    Args:
        dsn: libpq connection string (see :func:`app.database_url.psycopg_dsn`).
        on_notify: called with the payload as an ``int`` (payloads that are not are ignored).
        on_connect: called after every successful (re)connection.
        channel: the channel to LISTEN on.
    """

    def __init__(
        self,
        dsn: str,
        on_notify: Callable[[int], None],
        on_connect: Callable[[], None],
        *,
        channel: str = NOTIFY_CHANNEL,
    ) -> None:
        self._dsn = dsn
        self._on_notify = on_notify
        self._on_connect = on_connect
        self._channel = channel
        self._task: asyncio.Task[None] | None = None
        self._attempted = asyncio.Event()
        self._changed = asyncio.Event()
        self.connections = 0
        """How many times the listener has connected (tests wait for it to grow)."""
        self.backend_pid: int | None = None
        """The server process id of the current LISTEN connection, ``None`` while down."""

    @property
    def connected(self) -> bool:
        """Whether the listener is LISTENing now."""
        return self.backend_pid is not None

    async def start(self) -> None:
        """Start listening in the background; returns after the first connection attempt, so
        that a server whose database is up receives notifications from its first request."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="sundial-listener")
            await self._attempted.wait()

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_connected(self, count: int) -> None:
        """Wait until the listener has connected at least ``count`` times."""
        while self.connections < count:
            await self._changed.wait()

    async def _run(self) -> None:
        backoff = MIN_BACKOFF_SECONDS
        while True:
            connections = self.connections
            try:
                await self._listen()
            except (psycopg.Error, OSError) as error:
                log.warning("notification listener: connection failed or lost: %s", error)
            except Exception:  # the listener must survive any surprise
                log.exception("notification listener failed")
            finally:
                self.backend_pid = None
                self._attempted.set()
            if self.connections > connections:
                backoff = MIN_BACKOFF_SECONDS  # it was up: retry quickly, then back off
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
        )
        async with conn:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self.backend_pid = conn.info.backend_pid
            self.connections += 1
            self._changed.set()
            self._changed = asyncio.Event()
            self._attempted.set()
            log.info("listening for %s notifications", self._channel)
            self._on_connect()
            while True:
                async for notify in conn.notifies(timeout=KEEPALIVE_SECONDS):
                    self._dispatch(notify.payload)
                await conn.execute("SELECT 1")

    def _dispatch(self, payload: str) -> None:
        try:
            queue_id = int(payload)
        except ValueError:
            log.warning("ignoring notification with payload %r", payload)
            return
        self._on_notify(queue_id)


class ListenerRegistrations:
    """Rows of ``queue_listeners``: which queues this process's LISTEN connection wants
    notifications for. Statements NOTIFY only queues that have a row (see migration 0002)."""

    def __init__(self, engine: AsyncEngine, listener: NotificationListener) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._listener = listener

    @property
    def pid(self) -> int | None:
        """The backend pid of the LISTEN connection, ``None`` while it is down."""
        return self._listener.backend_pid

    async def register(self, queue_id: int) -> int | None:
        """Ask for notifications of ``queue_id`` for the LISTEN connection of now; returns its
        pid (None when the listener is down). The connection may be replaced before this
        returns: the caller compares the pid with :attr:`pid`."""
        pid = self.pid
        if pid is None:
            return None
        async with self._engine.connect() as conn:
            await conn.execute(LISTENER_REGISTER, {"queue_id": queue_id, "pid": pid})
        return pid

    async def unregister(self, queue_id: int) -> None:
        """Stop asking for notifications of ``queue_id``."""
        pid = self.pid
        if pid is not None:
            async with self._engine.connect() as conn:
                await conn.execute(LISTENER_UNREGISTER, {"queue_id": queue_id, "pid": pid})
