"""Long polling over several queues: a dequeue that waits up to ``wait_seconds`` for a message
in any of the queues it names (``POST /v1/namespaces/{ns}/dequeue``).

It waits as the single-queue long poll does (:mod:`app.web.longpoll`: no database connection
held; woken by a notification, the next delayed message becoming visible, the fallback timer,
its deadline, or its client leaving), with one :class:`~app.web.waiters.Waiter` subscribed to
every queue it names, so a notification of any of them wakes it. Each look takes the queues in
their order (:meth:`QueueService.dequeue_planned_many`), so a message of the first queue is
leased before one of the second, whichever woke it. Its queues are of one namespace, hence of
one pool: one registry holds its waiter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from litestar.types import Receive

from app.core.models import Queue
from app.core.service import QueueService
from app.core.service.consuming_many import LeasedFrom
from app.web.longpoll import WaitingDequeue, check_wait, wait_and_lease
from app.web.waiters import WaiterRegistry


class WaitingManyDequeue(WaitingDequeue, Protocol):
    """What a waiting dequeue of several queues asks for: a queue's, and the queues."""

    @property
    def queues(self) -> Sequence[str]: ...


async def dequeue_many(
    service: QueueService,
    waiters_of: Callable[[Queue], WaiterRegistry],
    namespace: str,
    request: WaitingManyDequeue,
    receive: Receive | None = None,
) -> list[LeasedFrom]:
    """Dequeue from ``request.queues`` in their order, waiting up to ``request.wait_seconds``
    for a message in any of them.

    Args:
        service: the queue service.
        waiters_of: this process's waiters on the pool of a queue.
        namespace: the queues' namespace.
        request: the dequeue body.
        receive: the ASGI receive channel, to notice a client that goes away while waiting.
    """
    wait = check_wait(request)
    plan = await service.plan_dequeue_many(
        namespace,
        request.queues,
        count=request.count,
        lease_seconds=request.lease_seconds,
        metadata=request.metadata,
    )
    if wait == 0:
        return await service.dequeue_planned_many(plan)
    registry = waiters_of(plan.queues[0])
    return await wait_and_lease(
        registry,
        plan.queue_ids,
        look=lambda: service.dequeue_planned_many(plan),
        next_due=lambda: service.next_due_in_many(plan),
        count=plan.count,
        wait=wait,
        moved=lambda: waiters_of(plan.queues[0]) is not registry,
        receive=receive,
    )
