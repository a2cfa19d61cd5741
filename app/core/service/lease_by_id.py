"""Leasing one message by its id (``POST …/messages/{id}/lease``): the claim's lease on a message
the consumer names, granted only when a dequeue could have leased it now, and the precise
reason when not."""

from __future__ import annotations

from app.core import validation
from app.core.errors import InvalidStateError, QueuePausedError, SundialError
from app.core.models import LeasedMessage
from app.core.ports import LeaseRefusal
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.refusals import message_not_found
from app.core.states import CLAIM

LEASE_ATTEMPTS = 3
"""Leases tried when the message was found ready after the lease missed it (it was leased and
released in between): after that, the message's state is the answer."""


class LeasingById(ServiceBase):
    """A consumer's lease of a message it names."""

    @again_if_catalogue_changed
    async def lease_message(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        *,
        lease_seconds: int | None = None,
    ) -> LeasedMessage:
        """Lease message ``message_id`` as a dequeue would, if it is ready: pending, or invisible
        with its ``visible_at`` passed, not expired, and (in an exclusive queue) no message of
        its exclusive value running. Refused while the queue is dequeue-paused.

        Raises:
            NotFoundError: no such queue or message.
            QueuePausedError: the queue's ``dequeue_paused`` is on.
            InvalidStateError: the message is not ready (``details.state``), or its exclusive
                value is running (``details.exclusive_value`` too).
        """
        if lease_seconds is not None:
            validation.integer("lease_seconds", lease_seconds, 1, validation.MAX_LEASE_SECONDS)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        if queue.config.dequeue_paused:
            await self.store.confirm_lookups()  # still paused?
            raise QueuePausedError(
                f"queue {namespace}/{queue_name} is paused for dequeue", queue=queue_name
            )
        refusal: LeaseRefusal | None = None
        for _ in range(LEASE_ATTEMPTS):
            found = await self.store.lease_message(queue, message_id, lease_seconds)
            if isinstance(found, LeasedMessage):
                # Counted as a dequeue: a message leased by id is a message handed out.
                self._handed_out(queue, [found])
                return found
            if found is None:
                raise message_not_found(queue, message_id)
            refusal = found
            if not _ready_again(refusal):
                break
        assert refusal is not None
        raise _refused(message_id, refusal)


def _ready_again(refusal: LeaseRefusal) -> bool:
    """Whether the message the lease missed is ready by now (leased and released meanwhile)."""
    ready = refusal.state == CLAIM.ready or (refusal.state == CLAIM.due and refusal.due)
    return ready and not refusal.expired and not refusal.value_running


def _refused(message_id: str, refusal: LeaseRefusal) -> SundialError:
    """The error of a lease by id that leased nothing, from what the message looks like."""
    state = str(refusal.state)
    if refusal.state == CLAIM.due and not refusal.due:
        reason = "is invisible until its visible_at"
    elif refusal.state in (CLAIM.ready, CLAIM.due) and refusal.expired:
        reason = "has expired (its expires_at has passed)"
    elif refusal.value_running:
        return InvalidStateError(
            f"message {message_id!r} is {state}, but another message of its exclusive value is"
            " running: it can be leased once that one finishes",
            state=state,
            exclusive_value=refusal.exclusive_value,
        )
    elif refusal.state in (CLAIM.ready, CLAIM.due):
        reason = "was leased and released while this lease was tried; try again"
    else:
        reason = f"is {state}"
    return InvalidStateError(
        f"message {message_id!r} {reason}; only pending (or due) messages can be leased",
        state=state,
    )
