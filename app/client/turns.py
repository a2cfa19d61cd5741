"""A worker's turns: the requests that acknowledge what its handlers finished and lease what
they take next (:class:`Turns`, the lease loop of :class:`~app.client.worker.Worker`).

A turn is one request: ``POST …/ack`` with ``dequeue`` when there is something to acknowledge
(completions and the next leases in one transaction), else a dequeue, which long-polls when
nothing else is on its way. A worker on several queues leases from all of them, in their order,
with ``POST /v1/namespaces/{ns}/dequeue``, and acknowledges in turns of their own: ``POST …/ack``
on each queue that has completions (no request acknowledges on one queue and leases on several).
Up to :data:`TURNS_IN_FLIGHT` are on their way at once; how many messages each asks for is
:mod:`app.client.lease_ahead`'s. A turn the server refuses for good (the queue deleted, the token
revoked) stops the worker; one that cannot reach it is tried again after a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import httpx

from app.client.async_client import AsyncClient
from app.client.calls import DequeueFilter
from app.client.errors import ApiError, RateLimited, Unavailable
from app.client.held import Holdings
from app.client.lease_ahead import LeaseAhead
from app.client.models import Acknowledged, Leased, LeasedFrom
from app.client.outcomes import Outcomes

log = logging.getLogger("sundial.worker")

MAX_ACK_BATCH = 100
"""Most completions in one acknowledgement (the server takes up to 1,000)."""

TURNS_IN_FLIGHT = 4
"""Requests a worker has on their way at once: the next lease while earlier ones are answered
(four drained a queue about a third faster than two on the benchmark machine, bench `worker`)."""

_UNREACHABLE = (httpx.TransportError, Unavailable, RateLimited)
"""What makes the worker back off and try again."""


class Turns:
    """The lease loop of a worker; the worker provides the messages it holds, what finished,
    and how a leased message is taken on."""

    queues: list[str]
    burst: bool
    wait_seconds: int
    batch_size: int
    metadata: DequeueFilter | None
    _lease: int
    _held: Holdings
    _finished: list[Leased]
    _outcomes: Outcomes
    _lease_ahead: LeaseAhead
    _stopping: asyncio.Event
    _turn: asyncio.Event

    def _init_turns(self) -> None:
        self._turns: dict[asyncio.Task[None], bool] = {}
        """Requests on their way, each with whether it is a long poll."""
        self._asked = 0
        """Messages asked for by the turns on their way."""
        self._dry = False
        """The last answer had fewer messages than asked: the queue ran dry."""
        self._failures = 0
        self._retry_at = 0.0
        self._fatal: ApiError | None = None
        """What made the worker stop on its own (raised by run_async once it has drained)."""

    def _take_on(self, client: AsyncClient, message: Leased) -> None:
        """Run a message just leased, or keep it until a handler is free (the worker's)."""
        raise NotImplementedError

    async def _lease_loop(self, client: AsyncClient) -> None:
        """Send turns while not stopping: up to :data:`TURNS_IN_FLIGHT` at once, or one long
        poll when there is nothing to acknowledge and nothing else on its way."""
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            if self.burst and self._dry and not self._busy():
                return
            pause = self._retry_at - loop.time()
            if pause > 0:
                await self._next_turn(pause)
                continue
            wanted = self._lease_ahead.wanted(
                running=len(self._held.running),
                waiting=len(self._held.waiting),
                asked=self._asked,
            )
            if len(self._turns) >= TURNS_IN_FLIGHT or (wanted <= 0 and not self._ack_alone()):
                await self._next_turn()
                continue
            acks = self._take_finished()
            if acks and len(self.queues) > 1:
                self._start_turn(client, acks, 0, False)  # acknowledgements alone
                continue
            long_poll = not acks and not self._turns and not self.burst
            if not acks and not long_poll and (self._asked > 0 or self._dry):
                # A dequeue without a wait while another turn that leases is on its way, or
                # once the queue was found empty, would only find what that turn finds.
                await self._next_turn()
                continue
            count = min(max(wanted, 0), self.batch_size)
            self._start_turn(client, acks, count, long_poll)
        await self._end_turns()

    def _ack_alone(self) -> bool:
        """Whether finished messages should be acknowledged without leasing: they wait for
        the next turn that leases, unless no turn but a long poll is on its way."""
        return bool(self._finished) and all(self._turns.values())

    def _busy(self) -> bool:
        """Anything held, finished or on its way (burst mode stops only when nothing is)."""
        return bool(self._held or self._finished or self._turns)

    def _start_turn(
        self, client: AsyncClient, acks: list[Leased], count: int, long_poll: bool
    ) -> None:
        turn = asyncio.create_task(self._turn_of(client, acks, count, long_poll))
        self._turns[turn] = long_poll
        self._asked += count

    async def _turn_of(
        self, client: AsyncClient, acks: list[Leased], count: int, long_poll: bool
    ) -> None:
        """One request: acknowledge ``acks`` and lease up to ``count`` messages (a long poll
        waits for one); its messages are taken on as soon as it is answered."""
        try:
            if not count:
                await self._acknowledge(client, acks)
                return
            try:
                leased = await self._request(client, acks, count, long_poll)
            except _UNREACHABLE as error:
                if acks:
                    self._outcomes.unacknowledged(acks, error)
                self._failures += 1
                delay = min(0.5 * 2**self._failures, 10.0)
                self._retry_at = asyncio.get_running_loop().time() + delay
                log.warning("dequeue failed (%s); again in %.1f s", error, delay)
                return
            except ApiError as error:  # the queue is gone, the token revoked: nothing to retry
                if acks:
                    self._outcomes.unacknowledged(acks, error)
                if self._fatal is None:
                    self._fatal = error
                    log.error("worker on %s cannot go on: %s", self, error)
                self._stopping.set()  # as stop() does: running handlers finish and complete
                self._turn.set()
                return
            self._failures = 0
            self._dry = len(leased) < count
            self._lease_ahead.answered(waiting=len(self._held.waiting), full=not self._dry)
            for message in leased:
                self._take_on(client, message)
        finally:
            self._asked -= count
            self._turns.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self._turn.set()

    async def _end_turns(self) -> None:
        """Stopping: a long poll is withdrawn (the server leases nothing to a client that
        left); a turn that acknowledges or leases is let finish, its messages run or released
        by the drain."""
        for turn, long_poll in list(self._turns.items()):
            if long_poll:
                turn.cancel()
        if self._turns:
            await asyncio.wait(set(self._turns))

    async def _request(
        self, client: AsyncClient, acks: list[Leased], count: int, long_poll: bool
    ) -> Sequence[Leased]:
        """Acknowledge ``acks`` and lease up to ``count`` messages in one call, or, with
        nothing to acknowledge, a dequeue (waiting for a message if ``long_poll``). On several
        queues (never with ``acks``: they go in turns of their own), one dequeue of them all."""
        if len(self.queues) > 1:
            return await client.dequeue_many(
                self.queues,
                count,
                wait_seconds=self.wait_seconds if long_poll else 0,
                lease_seconds=self._lease,
                metadata=self.metadata,
            )
        [queue] = self.queues
        if not acks:
            return await client.dequeue(
                queue,
                count,
                wait_seconds=self.wait_seconds if long_poll else 0,
                lease_seconds=self._lease,
                metadata=self.metadata,
            )
        answer: Acknowledged = await client.ack_and_dequeue(
            queue,
            complete=[(m.id, m.lease_id) for m in acks],
            count=count,
            lease_seconds=self._lease,
            metadata=self.metadata,
        )
        self._outcomes.acknowledged(acks, answer.results)
        return answer.messages

    async def _next_turn(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until a handler or a turn ends, or the worker is asked to stop (or until
        ``timeout``)."""
        self._turn.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._turn.wait(), timeout)

    def _take_finished(self) -> list[Leased]:
        taken = self._finished[:MAX_ACK_BATCH]
        del self._finished[:MAX_ACK_BATCH]
        return taken

    async def _acknowledge(self, client: AsyncClient, acks: list[Leased]) -> None:
        """Complete ``acks`` (no lease asked): one request per queue they belong to."""
        for queue, group in self._by_queue(acks).items():
            try:
                results = await client.ack(queue, complete=[(m.id, m.lease_id) for m in group])
            except (httpx.TransportError, ApiError) as error:
                self._outcomes.unacknowledged(group, error)
                continue
            self._outcomes.acknowledged(group, results)

    def _by_queue(self, messages: list[Leased]) -> dict[str, list[Leased]]:
        """``messages`` grouped by the queue each is acknowledged on, in order."""
        groups: dict[str, list[Leased]] = {}
        for message in messages:
            groups.setdefault(self._queue_of(message), []).append(message)
        return groups

    def _queue_of(self, message: Leased) -> str:
        """The queue ``message`` is acknowledged on: the one it was leased from."""
        return message.queue if isinstance(message, LeasedFrom) else self.queues[0]
