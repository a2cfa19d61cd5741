"""Where a long-polling request waits, in one server process: each request parks on its
:class:`Waiter`, and the :class:`WaiterRegistry` wakes the waiters of a queue when the database
notifies a change to it (enqueue, promotion, lease release), registering the queues that have
waiters with the process's LISTEN connection.

Shared server plumbing: the API's long poll (:mod:`app.web.longpoll`) parks here, and the
metrics (:mod:`app.observability`) count the waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

log = logging.getLogger("sundial.waiters")

FALLBACK_SECONDS = 1.0
IDLE_SECONDS = 30.0
"""How long a queue stays registered for notifications after its last waiting request."""


class Waiter:
    """One long-polling request's wake-up signal."""

    __slots__ = ("_event", "_on_park", "closed", "parked")

    @property
    def woken(self) -> bool:
        """A wake-up is pending (its next :meth:`wait` returns at once)."""
        return self._event.is_set()

    def __init__(self, on_park: Callable[[], None]) -> None:
        self._event = asyncio.Event()
        self._on_park = on_park
        self.closed = False
        """Set when the request should answer now without dequeueing (client gone, shutdown)."""
        self.parked = False

    def wake(self) -> None:
        """Make the next (or current) :meth:`wait` return at once."""
        self._event.set()

    def close(self) -> None:
        """Wake the request for good: it answers without dequeueing again."""
        self.closed = True
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a wake-up, at most ``seconds``; whether one came."""
        if not self._event.is_set():
            self.parked = True
            self._on_park()
            try:
                async with asyncio.timeout(seconds):
                    await self._event.wait()
            except TimeoutError:
                return False
            finally:
                self.parked = False
                self._on_park()
        self._event.clear()
        return True


class Registrar(Protocol):
    """Where a process registers the queues it wants notifications for."""

    @property
    def pid(self) -> int | None:
        """The LISTEN connection registrations are made for now (None while it is down)."""

    async def register(self, queue_id: int) -> int | None: ...
    async def unregister(self, queue_id: int) -> None: ...


class WaiterRegistry:
    """The long-polling requests of this process, by queue id.

    Statements notify a queue only while some process has registered interest in it, so busy
    consumers (which find messages without waiting) cost producers nothing. A request registers
    its queue just before it parks (:meth:`before_park`); queues nobody has waited on for
    :attr:`idle_seconds` are unregistered by :meth:`sweep`.
    """

    def __init__(
        self,
        fallback_seconds: float = FALLBACK_SECONDS,
        registrar: Registrar | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.fallback_seconds = fallback_seconds
        self.idle_seconds = idle_seconds
        self.registrar = registrar
        """Where queues are registered for notifications (None: every statement notifies)."""
        self._by_queue: dict[int, dict[Waiter, None]] = {}
        """The waiters of each queue, in the order they subscribed (an ordered set)."""
        self._closed = False
        self._changed = asyncio.Event()
        self._registered: set[int] = set()
        self._last_park: dict[int, float] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def before_park(self, queue_id: int) -> bool:
        """Make sure notifications for ``queue_id`` reach this process before a request parks.

        Returns True when it registered just now: the caller must then look for a message
        once more, since one may have been committed by a producer that checked for listeners
        before the registration was visible.
        """
        self._last_park[queue_id] = asyncio.get_running_loop().time()
        if self.registrar is None or queue_id in self._registered:
            return False
        async with self._locks.setdefault(queue_id, asyncio.Lock()):
            if queue_id in self._registered:
                return False
            pid = await self.registrar.register(queue_id)
            if pid is None:
                return False  # the listener is down: the fallback timer covers the wait
            if pid == self.registrar.pid:
                self._registered.add(queue_id)
            # Otherwise the LISTEN connection was replaced while registering: that row names a
            # connection that is gone (the leader prunes it), so this one is not taken as
            # registered; the caller looks again and registers anew before it parks.
            return True

    async def sweep(self) -> None:
        """Unregister queues nobody in this process has waited on for ``idle_seconds``."""
        if self.registrar is None:
            return
        now = asyncio.get_running_loop().time()
        for queue_id in list(self._registered):
            idle = now - self._last_park.get(queue_id, now) > self.idle_seconds
            if not idle or self._by_queue.get(queue_id):
                continue
            async with self._locks.setdefault(queue_id, asyncio.Lock()):
                if queue_id in self._registered and not self._by_queue.get(queue_id):
                    self._registered.discard(queue_id)
                    await self.registrar.unregister(queue_id)

    async def run_sweeper(self) -> None:
        """Sweep every half ``idle_seconds``, forever (a background task of the server)."""
        while True:
            await asyncio.sleep(self.idle_seconds / 2)
            try:
                await self.sweep()
            except Exception:  # a failed sweep retries at the next round
                log.warning("could not unregister idle queues", exc_info=True)

    def reconnected(self) -> None:
        """The LISTEN connection is new (new pid): register again, and look again now."""
        self._registered.clear()
        self.notify_all()

    def notify(self, queue_id: int) -> None:
        """Something may be ready in ``queue_id``: wake one of its requests, the one parked
        longest (else one about to park), unless one is already woken and has yet to look.

        One, not all: a notification usually stands for one message, and every request woken
        runs a claim, so waking them all would make all but one claim for nothing, on the
        cores the winner needs. A request that leases a full batch passes the wake-up on
        (:meth:`pass_on`), so a batch of messages still reaches every waiting request.
        """
        waiters = self._by_queue.get(queue_id)
        if not waiters:
            return
        if any(w.woken for w in waiters):
            return
        parked = next((w for w in waiters if w.parked), None)
        (parked or next(iter(waiters))).wake()

    def pass_on(self, queue_id: int) -> None:
        """A woken request leased all it asked for, or left without looking: more may be
        ready, so wake the next one."""
        self.notify(queue_id)

    def notify_all(self) -> None:
        """Wake every waiting request (notifications may have been missed)."""
        for waiters in self._by_queue.values():
            for waiter in waiters:
                waiter.wake()

    def close(self) -> None:
        """Shutting down: every waiting request answers now, and new ones do not wait."""
        self._closed = True
        for waiters in self._by_queue.values():
            for waiter in waiters:
                waiter.close()

    def subscribe(self, queue_id: int) -> contextlib.AbstractContextManager[Waiter]:
        """A waiter that notifications for ``queue_id`` wake, for the duration of the block."""
        return self.subscribe_many((queue_id,))

    @contextlib.contextmanager
    def subscribe_many(self, queue_ids: Sequence[int]) -> Iterator[Waiter]:
        """One waiter that a notification for any of ``queue_ids`` wakes, for the duration of
        the block (a dequeue from several queues: :mod:`app.web.longpoll_many`).

        It is one of the waiters of each of those queues: a notification of one of them may
        wake it rather than another waiter of that queue, and one of them woken but yet to look
        keeps the others' notifications from waking anyone else (it looks at every queue it
        waits on). So a request of several queues passes a wake-up on to each of them
        (:meth:`pass_on`) where one of a single queue passes it on to that queue, and does so
        once it has left the block: passed on while it still waited there, the wake-up could
        wake itself again.
        """
        waiter = Waiter(self._park_changed)
        if self._closed:
            waiter.close()
        for queue_id in queue_ids:
            self._by_queue.setdefault(queue_id, {})[waiter] = None
        try:
            yield waiter
        finally:
            for queue_id in queue_ids:
                waiters = self._by_queue.get(queue_id)
                if waiters is not None:
                    waiters.pop(waiter, None)
                    if not waiters:
                        self._by_queue.pop(queue_id, None)

    def waiting(self, queue_id: int) -> int:
        """How many requests are parked waiting for ``queue_id`` now."""
        return sum(w.parked for w in self._by_queue.get(queue_id, ()))

    def waiting_anywhere(self) -> int:
        """How many requests are parked now, over every queue (the waiters gauge); a request
        waiting on several queues counts once."""
        return len({w for waiters in self._by_queue.values() for w in waiters if w.parked})

    async def wait_for_waiting(self, queue_id: int, count: int) -> None:
        """Wait until at least ``count`` requests are parked on ``queue_id`` (for tests)."""
        while self.waiting(queue_id) < count:
            await self._changed.wait()

    def _park_changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
