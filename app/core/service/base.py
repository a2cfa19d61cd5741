"""What every part of the queue service shares: the store, the limits and the observer, and
the lookups its operations start from (a namespace, a queue, a message id that could exist).

Each resource's operations are a class derived from :class:`ServiceBase`
(:mod:`app.core.service`); :class:`~app.core.service.QueueService` joins them over one store.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core import validation
from app.core.errors import NotFoundError
from app.core.models import LeasedMessage, Queue
from app.core.ports import Store
from app.core.service.identifiers import could_exist
from app.core.service.observer import Observer
from app.core.service.refusals import message_not_found
from app.core.states import Event


class ServiceBase:
    """The state the service's parts share, and the lookups they all begin with."""

    store: Store
    limits: validation.Limits
    observer: Observer
    """Told about every committed change (metrics); replaceable after construction."""

    def _handed_out(self, queue: Queue, leased: Sequence[LeasedMessage]) -> None:
        """Tell the observer that ``leased`` messages of ``queue`` were handed out (a dequeue,
        the dequeue of an acknowledgement, a lease by id): counted as dequeues, with how long
        those on their first attempt waited for it."""
        if not leased:
            return
        self.observer.transitioned(queue, Event.DEQUEUE, len(leased))
        waits = [w for m in leased if m.attempt == 1 and (w := m.waited_seconds) is not None]
        self.observer.waited(queue, waits)

    async def get_queue_or_404(self, namespace: str, name: str) -> Queue:
        """The queue, or NotFoundError."""
        if not (
            could_exist(validation.NAME_PATTERN, namespace)
            and could_exist(validation.NAME_PATTERN, name)
        ):
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)
        queue = await self.store.get_queue(namespace, name)
        if queue is None:
            raise NotFoundError(f"queue {namespace}/{name} does not exist", queue=name)
        return queue

    async def _require_namespace(self, namespace: str) -> None:
        """Nothing, or NotFoundError when ``namespace`` does not exist."""
        if not could_exist(validation.NAME_PATTERN, namespace) or not (
            await self.store.namespace_exists(namespace)
        ):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)

    async def _queue_with_message(self, namespace: str, queue_name: str, message_id: str) -> Queue:
        """The queue, after checking that ``message_id`` could name a message at all."""
        queue = await self.get_queue_or_404(namespace, queue_name)
        if not could_exist(validation.MESSAGE_ID_PATTERN, message_id):
            raise message_not_found(queue, message_id)
        return queue
