"""What the holder of a lease does with it: complete, fail or extend one message, or complete
and fail many at once (ack). Each is fenced by the lease id; completing again with the lease
that completed a message is accepted (live or from history), so a lost answer can be retried."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.core import validation
from app.core.errors import LeaseMismatchError, NotFoundError, ValidationError
from app.core.models import AckResult, LeasedMessage, LeaseRef, Message, NextLease, Queue
from app.core.ports import Acked
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import again_if_catalogue_changed
from app.core.service.identifiers import could_exist, lease_uuid
from app.core.service.observer import held
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
            self.observer.processed(queue, held(message))
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
            self.observer.processed(queue, held(message))
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
        self._check_ack(complete, fail)
        queue = await self.get_queue_or_404(namespace, queue_name)
        results, _ = await self._acknowledge(queue, complete, fail, None)
        return results

    @again_if_catalogue_changed
    async def ack_and_dequeue(
        self,
        namespace: str,
        queue_name: str,
        complete: Sequence[LeaseRef],
        fail: Sequence[LeaseRef],
        then: NextLease,
    ) -> tuple[list[AckResult], list[LeasedMessage]]:
        """Acknowledge as :meth:`ack` does, then lease up to ``then.count`` messages, in one
        transaction on a simple queue (a worker's whole cycle in one call). Nothing is leased
        while the queue is dequeue-paused. Everything is validated before anything applies."""
        self._check_ack(complete, fail)
        wanted = validation.dequeue_request(
            then.count, then.lease_seconds, then.metadata, prefix="dequeue."
        )
        queue = await self.get_queue_or_404(namespace, queue_name)
        claim = None if queue.config.dequeue_paused else replace(then, metadata=wanted)
        results, leased = await self._acknowledge(queue, complete, fail, claim)
        self._handed_out(queue, leased)
        return results, leased

    @staticmethod
    def _check_ack(complete: Sequence[LeaseRef], fail: Sequence[LeaseRef]) -> None:
        if len(complete) + len(fail) > validation.MAX_BATCH_ACK:
            raise ValidationError("complete", f"at most {validation.MAX_BATCH_ACK} items in all")
        for index, item in enumerate(fail):
            if item.error is not None:
                validation.text(f"fail[{index}].error", item.error)

    async def _acknowledge(
        self,
        queue: Queue,
        complete: Sequence[LeaseRef],
        fail: Sequence[LeaseRef],
        claim: NextLease | None,
    ) -> tuple[list[AckResult], list[LeasedMessage]]:
        """Apply an acknowledgement (and the claim after it, if any); each item's result."""
        # Each lease id as the database compares it, resolved once per item.
        to_complete = [(i, lease_uuid(i.lease_id)) for i in complete]
        to_fail = [(i, lease_uuid(i.lease_id)) for i in fail]

        def well_formed(item: LeaseRef) -> bool:
            return could_exist(validation.MESSAGE_ID_PATTERN, item.id)

        completing = [(i.id, lease) for i, lease in to_complete if well_formed(i)]
        failing = [(i.id, lease, i.error) for i, lease in to_fail if well_formed(i)]
        leased: list[LeasedMessage] = []
        if claim is None:
            completed, failed = await self.store.acknowledge(queue, completing, failing)
        else:
            completed, failed, leased = await self.store.acknowledge_and_claim(
                queue, completing, failing, claim
            )
        self.observer.transitioned(queue, Event.COMPLETE, len(completed))
        self.observer.transitioned(queue, Event.FAIL, len(failed))
        ended = [*completed.values(), *failed.values()]
        self.observer.processed(queue, [seconds for seconds in ended if seconds is not None])
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
            item: LeaseRef, lease: str | None, done: Acked, *, completing: bool
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

        results = [result(i, lease, completed, completing=True) for i, lease in to_complete]
        results += [result(i, lease, failed, completing=False) for i, lease in to_fail]
        return results, leased
