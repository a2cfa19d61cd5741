"""Consuming: leasing visible messages (dequeue), planned once and run as often as a long poll
is woken, each run checking that the caller and the queue are still what the plan found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.core import catalogue, validation
from app.core.errors import CatalogueChangedError
from app.core.models import FilterValue, LeasedMessage, Queue
from app.core.service.base import ServiceBase
from app.core.service.catalogue_retry import replanned_if_catalogue_changed


@dataclass(slots=True)
class DequeuePlan:
    """A validated dequeue request with its resolved queue (looked up again when it changed)."""

    queue: Queue
    count: int
    lease_seconds: int | None
    metadata: dict[str, FilterValue]


class Consuming(ServiceBase):
    """The consumer's claim."""

    @replanned_if_catalogue_changed
    async def plan_dequeue(
        self,
        namespace: str,
        queue_name: str,
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, FilterValue] | None = None,
    ) -> DequeuePlan:
        """Validate a dequeue request and resolve its queue (a long poll plans once, then
        dequeues as often as it is woken). The plan's lookups are confirmed by the claim that
        runs it (or, on a paused queue, by :meth:`dequeue_planned`'s own check)."""
        wanted = validation.dequeue_request(count, lease_seconds, metadata or {})
        queue = await self.get_queue_or_404(namespace, queue_name)
        return DequeuePlan(queue, count, lease_seconds, wanted)

    async def dequeue(
        self,
        namespace: str,
        queue_name: str,
        *,
        count: int = 1,
        lease_seconds: int | None = None,
        metadata: Mapping[str, FilterValue] | None = None,
    ) -> list[LeasedMessage]:
        """Lease up to ``count`` visible messages; none while the queue is dequeue-paused.
        Both steps look up again when the catalogue changes under them."""
        plan = await self.plan_dequeue(
            namespace, queue_name, count=count, lease_seconds=lease_seconds, metadata=metadata
        )
        return await self.dequeue_planned(plan)

    async def next_due_in(self, plan: DequeuePlan) -> float | None:
        """Seconds until the next delayed message of the plan's queue becomes visible (a long
        poll then looks again, as the claim takes a due message at once); None if none."""
        return await self.store.next_due_in(plan.queue)

    async def dequeue_planned(self, plan: DequeuePlan) -> list[LeasedMessage]:
        """Run a planned dequeue (again and again, for a long poll).

        Each run checks that the caller and the queue are still what the plan found, however
        long ago it planned: a queue paused (or resumed, reconfigured, deleted) since, or a token
        revoked since, is seen here; the plan is then made again from the queue as it is now.
        """
        for attempt in range(1, catalogue.ATTEMPTS + 1):
            catalogue.recheck()
            try:
                if plan.queue.config.dequeue_paused:
                    await self.store.confirm_lookups()  # still paused?
                    return []
                leased = await self.store.dequeue(
                    plan.queue, plan.count, plan.lease_seconds, plan.metadata
                )
                break
            except CatalogueChangedError:
                if attempt == catalogue.ATTEMPTS:
                    raise
                await catalogue.renew()
                plan.queue = await self.get_queue_or_404(plan.queue.namespace, plan.queue.name)
        self._handed_out(plan.queue, leased)
        return leased
