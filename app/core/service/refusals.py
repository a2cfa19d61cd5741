"""Why a guarded statement changed nothing, as the error its caller gets: no such message, a
lease that is not (or no longer) the current one, or a state that does not allow the operation.

A statement whose guard matched nothing returns nothing; the service then asks the store why
(:meth:`~app.core.ports.Store.guard_state`) and raises what these functions build.
"""

from __future__ import annotations

from app.core.errors import InvalidStateError, LeaseMismatchError, NotFoundError
from app.core.models import Queue
from app.core.ports import Store


def message_not_found(queue: Queue, message_id: str) -> NotFoundError:
    """No message ``message_id`` in ``queue``."""
    return NotFoundError(
        f"message {message_id!r} does not exist in queue {queue.namespace}/{queue.name}",
        message_id=message_id,
    )


def lease_refusal(
    queue: Queue, message_id: str, exists: bool
) -> NotFoundError | LeaseMismatchError:
    """Why a lease-fenced statement (complete, fail, extend) changed nothing."""
    if not exists:
        return message_not_found(queue, message_id)
    return LeaseMismatchError(
        f"lease_id is not the current lease of message {message_id!r}, or it has expired",
        message_id=message_id,
    )


async def state_refusal(
    store: Store, queue: Queue, message_id: str, allowed: str, verb: str
) -> NotFoundError | InvalidStateError:
    """Why a state-guarded statement changed nothing: no such message, or its state."""
    guard = await store.guard_state(queue, message_id)
    if guard is None:
        return message_not_found(queue, message_id)
    return InvalidStateError(
        f"message {message_id!r} is {guard.state}; only {allowed} messages can be {verb}",
        state=str(guard.state),
    )
