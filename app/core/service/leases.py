"""What the holder of a lease does with it: complete, fail or extend one message, or complete
and fail many at once (ack). Each is fenced by the lease id; completing again with the lease
that completed a message is accepted (live or from history), so a lost answer can be retried."""

from __future__ import annotations

from collections.abc import Sequence

from app.core import validation
from app.core.errors import LeaseMismatchError, NotFoundError, ValidationError
from app.core.models import AckResult, LeaseRef, Message
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import could_exist, lease_uuid
from app.core.service.refusals import lease_refusal
from app.core.states import Event, State


class Leases(ServiceBase):
    """The lease holder's transitions."""

    @again_if_catalogue_changed
    async def complete(
        self, namespace: str, queue_name: str, message_id: str, lease_id: str
    ) -> Message:
        """Complete a message with its current lease.

        Completing again with the lease that completed it returns the message unchanged, so a
        consumer can safely retry a complete whose answer it lost.
        """
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        lease = lease_uuid(lease_id)
        message = await self.store.complete(queue, message_id, lease)
        if message is not None:
            self.observer.transitioned(queue, Event.COMPLETE, 1)
            return message
        guard = await self.store.guard_state(queue, message_id)
        if guard is not None and guard.state is State.COMPLETED and guard.lease_id == lease:
            again = await self.store.get_message(queue, message_id)
            if again is not None:
                return again
        if lease is not None:
            # The same retry after the scheduler moved the message into history (even while
            # this was looking, or once its id was enqueued again): history keeps the lease
            # that completed it.
            archived = await self.store.archived_completions(queue, [(message_id, lease)])
            if message_id in archived:
                return archived[message_id]
        raise lease_refusal(queue, message_id, guard is not None)

    @again_if_catalogue_changed
    async def fail(
        self,
        namespace: str,
        queue_name: str,
        message_id: str,
        lease_id: str,
        *,
        error: str | None = None,
        retry_delay_seconds: int | None = None,
    ) -> Message:
        """Fail an attempt: retried (after the retry delay) while attempts remain, else errored."""
        if error is not None:
            validation.text("error", error)
        if retry_delay_seconds is not None:
            validation.integer(
                "retry_delay_seconds", retry_delay_seconds, 0, validation.MAX_DELAY_SECONDS
            )
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.fail(
            queue, message_id, lease_uuid(lease_id), error, retry_delay_seconds
        )
        if message is not None:
            self.observer.transitioned(queue, Event.FAIL, 1)
            return message
        exists = await self.store.guard_state(queue, message_id) is not None
        raise lease_refusal(queue, message_id, exists)

    @again_if_catalogue_changed
    async def extend(
        self, namespace: str, queue_name: str, message_id: str, lease_id: str, lease_seconds: int
    ) -> Message:
        """Heartbeat: the lease now expires ``lease_seconds`` from now."""
        validation.integer("lease_seconds", lease_seconds, 1, validation.MAX_LEASE_SECONDS)
        queue = await self._queue_with_message(namespace, queue_name, message_id)
        message = await self.store.extend(queue, message_id, lease_uuid(lease_id), lease_seconds)
        if message is not None:
            return message
        exists = await self.store.guard_state(queue, message_id) is not None
        raise lease_refusal(queue, message_id, exists)

    @again_if_catalogue_changed
    async def ack(
        self,
        namespace: str,
        queue_name: str,
        complete: Sequence[LeaseRef],
        fail: Sequence[LeaseRef],
    ) -> list[AckResult]:
        """Complete and fail many messages; each item succeeds or fails on its own."""
        if len(complete) + len(fail) > validation.MAX_BATCH_ACK:
            raise ValidationError("complete", f"at most {validation.MAX_BATCH_ACK} items in all")
        for index, item in enumerate(fail):
            if item.error is not None:
                validation.text(f"fail[{index}].error", item.error)
        queue = await self.get_queue_or_404(namespace, queue_name)

        # Each lease id as the database compares it, resolved once per item.
        to_complete = [(i, lease_uuid(i.lease_id)) for i in complete]
        to_fail = [(i, lease_uuid(i.lease_id)) for i in fail]

        def well_formed(item: LeaseRef) -> bool:
            return could_exist(validation.MESSAGE_ID_PATTERN, item.id)

        completed, failed = await self.store.acknowledge(
            queue,
            [(i.id, lease) for i, lease in to_complete if well_formed(i)],
            [(i.id, lease, i.error) for i, lease in to_fail if well_formed(i)],
        )
        self.observer.transitioned(queue, Event.COMPLETE, len(completed))
        self.observer.transitioned(queue, Event.FAIL, len(failed))
        # Each item is judged by its own (id, lease) pair: a stale lease listed next to the
        # current one for the same id is refused, as fencing requires.
        refused = {i.id for i, lease in to_complete if (i.id, lease) not in completed}
        refused |= {i.id for i, lease in to_fail if (i.id, lease) not in failed}
        known = [i for i in refused if could_exist(validation.MESSAGE_ID_PATTERN, i)]
        guards = await self.store.guard_states(queue, known) if known else {}

        def repeated_live(item_id: str, lease: str | None) -> bool:
            guard = guards.get(item_id)
            return guard is not None and guard.state is State.COMPLETED and guard.lease_id == lease

        # Refused completes that may repeat one whose message is in history by now (as in
        # complete()): history keeps the lease that completed it.
        archived = await self.store.archived_completions(
            queue,
            [
                (i.id, lease)
                for i, lease in to_complete
                if lease is not None
                and (i.id, lease) not in completed
                and well_formed(i)
                and not repeated_live(i.id, lease)
            ],
        )

        def result(
            item: LeaseRef, lease: str | None, done: set[tuple[str, str]], *, completing: bool
        ) -> AckResult:
            if (item.id, lease) in done:
                return AckResult(item.id, ok=True)
            if completing and lease is not None:
                # The same idempotent retry that complete() accepts, live or from history.
                repeated_archived = item.id in archived and archived[item.id].lease_id == lease
                if repeated_live(item.id, lease) or repeated_archived:
                    return AckResult(item.id, ok=True)
            if item.id not in guards:
                return AckResult(item.id, ok=False, error=NotFoundError.code)
            return AckResult(item.id, ok=False, error=LeaseMismatchError.code)

        return [result(i, lease, completed, completing=True) for i, lease in to_complete] + [
            result(i, lease, failed, completing=False) for i, lease in to_fail
        ]
