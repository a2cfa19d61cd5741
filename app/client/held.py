"""The messages a worker holds a lease on, from the answer that leased them until their outcome
is on its way: waiting for a free handler, or running. Each has a heartbeat timer that extends
its lease every third of it, so a message leased ahead of a free handler keeps its lease too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import httpx

from app.client.async_client import AsyncClient
from app.client.errors import ApiError, InvalidState, LeaseMismatch, NotFound
from app.client.models import Leased

log = logging.getLogger("sundial.worker")

Spawn = Callable[[Coroutine[Any, Any, None]], object]

QueueOf = Callable[[Leased], str]
"""The queue a leased message is acknowledged on (``"namespace/queue"``): a worker's one queue,
or the ``queue`` a :class:`~app.client.models.LeasedFrom` names."""


@dataclass(slots=True, eq=False)
class Held:
    """One leased message and the timer of its next heartbeat."""

    message: Leased
    timer: asyncio.TimerHandle | None = None
    held: bool = True
    """False once the server said the lease is no longer the message's."""
    let_go: bool = False
    """True once its outcome is on its way (no more heartbeats)."""


class Holdings:
    """The held messages of one worker: ``waiting`` for a handler and ``running``, with their
    heartbeats (``extend`` every ``lease_seconds / 3``, counted with ``count``)."""

    def __init__(self, queue_of: QueueOf, spawn: Spawn, count: Callable[..., None]) -> None:
        self._queue_of = queue_of
        self._spawn = spawn
        self._count = count
        self._client: AsyncClient | None = None
        self._lease = 0
        self.waiting: deque[Held] = deque()
        self.running: dict[asyncio.Future[Any], Held] = {}

    def attach(self, client: AsyncClient, lease_seconds: int) -> None:
        """Extend leases through ``client``, by ``lease_seconds`` at a time."""
        self._client, self._lease = client, lease_seconds

    def __len__(self) -> int:
        return len(self.waiting) + len(self.running)

    def hold(self, message: Leased) -> Held:
        """Start holding ``message`` (its heartbeats begin now)."""
        held = Held(message)
        self._schedule(held)
        return held

    def let_go(self, held: Held) -> None:
        """Its outcome is on its way: no more heartbeats."""
        held.let_go = True
        if held.timer is not None:
            held.timer.cancel()

    def _schedule(self, held: Held) -> None:
        loop = asyncio.get_running_loop()
        held.timer = loop.call_later(self._lease / 3, self._spawn_heartbeat, held)

    def _spawn_heartbeat(self, held: Held) -> None:
        self._spawn(self._heartbeat(held))

    async def _heartbeat(self, held: Held) -> None:
        message = held.message
        if held.held and self._client is not None:
            try:
                queue = self._queue_of(message)
                await self._client.extend(queue, message.id, message.lease_id, self._lease)
                self._count(heartbeats=1)
            except (LeaseMismatch, InvalidState, NotFound) as error:
                held.held = False
                log.warning("lease of %s lost while it is held: %s", message.id, error)
            except (httpx.TransportError, ApiError) as error:
                log.warning("heartbeat of %s failed: %s", message.id, error)
        if not held.let_go:
            self._schedule(held)
