"""Managing messages outside the consumer's lease: reading and listing them, changing or
deleting one, cancelling a live one, and requeueing dead letters."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.core import dead_letters, validation
from app.core.errors import InvalidStateError, LeaseMismatchError, ValidationError
from app.core.models import Message, MessageChanges, MessageFilter, MessagePage
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import lease_uuid
from app.core.service.refusals import message_not_found, state_refusal
from app.core.states import TERMINAL_STATES, Event


class Messages(ServiceBase):
    """The operations on messages that hold no lease."""

    @again_if_catalogue_changed
    async def get_message(self, namespace: str, queue_name: str, message_id: str) -> Message:
        """One message, in any state."""
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.get_message(queue, message_id)
        if message is None:
            raise message_not_found(queue, message_id)
        return message

    @again_if_catalogue_changed
    async def update_message(
        self, namespace: str, queue_name: str, message_id: str, changes: MessageChanges
    ) -> Message:
        """Change a message that is still waiting (invisible or pending)."""
        validation.message_changes(changes, self.limits)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        key = queue.config.exclusive_key
        if key is not None and changes.metadata is not None and not changes.metadata.get(key):
            raise ValidationError(f"metadata.{key}", "is required in this exclusive queue")
        message = await self.store.update_message(queue, message_id, changes)
        if message is not None:
            return message
        raise await state_refusal(self.store, queue, message_id, "invisible or pending", "changed")

    @again_if_catalogue_changed
    async def delete_message(self, namespace: str, queue_name: str, message_id: str) -> None:
        """Remove a message in any state (a running lease becomes invalid)."""
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        if not await self.store.delete_message(queue, message_id):
            raise message_not_found(queue, message_id)

    @again_if_catalogue_changed
    async def cancel(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        *,
        lease_id: str | None = None,
        force: bool = False,
        reason: str | None = None,
    ) -> Message:
        """Cancel a live message; a running one needs its current lease or ``force``."""
        if reason is not None:
            validation.text("reason", reason)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.cancel(queue, message_id, lease_uuid(lease_id), force, reason)
        if message is not None:
            self.observer.transitioned(queue, Event.CANCEL, 1)
            return message
        guard = await self.store.guard_state(queue, message_id)
        if guard is None:
            raise message_not_found(queue, message_id)
        if guard.state in TERMINAL_STATES:
            raise InvalidStateError(
                f"message {message_id!r} is already {guard.state}", state=str(guard.state)
            )
        raise LeaseMismatchError(
            f"message {message_id!r} is running: cancel it with its current lease_id or force",
            message_id=message_id,
        )

    @again_if_catalogue_changed
    async def requeue(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        delay_seconds: int = 0,
        *,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
    ) -> Message:
        """Send a dead letter (errored or canceled) back to the queue with attempts reset; it
        expires ``ttl_seconds`` after the requeue or at ``expires_at`` (neither: never)."""
        terms = dead_letters.respawn(delay_seconds, ttl_seconds, expires_at)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.requeue(queue, message_id, terms)
        if message is not None:
            self.observer.transitioned(queue, Event.REQUEUE, 1)
            return message
        raise await state_refusal(self.store, queue, message_id, "errored or canceled", "requeued")

    @again_if_catalogue_changed
    async def requeue_dead_letters(
        self,
        namespace: str,
        queue_name: str,
        states: Sequence[str] = ("errored",),
        ids: Sequence[str] | None = None,
        limit: int = dead_letters.DEFAULT_BULK_LIMIT,
        *,
        delay_seconds: int = 0,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
    ) -> int:
        """Requeue many dead letters at once, oldest finished first, as :meth:`requeue` does
        one; returns how many."""
        chosen = dead_letters.selection(states, ids, limit)
        terms = dead_letters.respawn(delay_seconds, ttl_seconds, expires_at)
        queue = await self.get_queue_or_404(namespace, queue_name)
        requeued = await self.store.requeue_many(
            queue, chosen.states, chosen.ids, chosen.limit, terms
        )
        self.observer.transitioned(queue, Event.REQUEUE, requeued)
        return requeued

    @again_if_catalogue_changed
    async def delete_dead_letters(
        self,
        namespace: str,
        queue_name: str,
        states: Sequence[str] = ("errored",),
        ids: Sequence[str] | None = None,
        limit: int = dead_letters.DEFAULT_BULK_LIMIT,
    ) -> int:
        """Delete up to ``limit`` dead letters, the ones :meth:`requeue_dead_letters` would
        take (oldest finished first); returns how many."""
        chosen = dead_letters.selection(states, ids, limit)
        queue = await self.get_queue_or_404(namespace, queue_name)
        return await self.store.delete_dead_letters(queue, chosen.states, chosen.ids, chosen.limit)

    @again_if_catalogue_changed
    async def query_messages(
        self, namespace: str, queue_name: str, spec: MessageFilter
    ) -> MessagePage:
        """List messages by state, metadata and priority range, a page at a time."""
        validation.integer("limit", spec.limit, 1, validation.MAX_QUERY_LIMIT)
        validation.metadata("metadata", spec.metadata)
        queue = await self.get_queue_or_404(namespace, queue_name)
        return await self.store.query(queue, spec)
