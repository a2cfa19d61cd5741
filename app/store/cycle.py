"""A worker's cycle in one call: acknowledge what it finished and lease what comes next
(``POST …/ack`` with ``dequeue``).

On a simple queue both are one transaction on one connection: the batch acknowledgement's
statements (:func:`~app.store.messages.acknowledgement`) and then the dequeue's own claim
(:mod:`app.store.sql.claim`), committed together; either both stand or neither does, and the
consumer pays one commit and one round trip for both (psycopg's pipeline mode). On an
exclusive queue the acknowledgement commits first, and the claim then runs in rounds as a
dequeue does (a round can lose a race for an exclusive value, which would abort a shared
transaction); should the claim fail once the acknowledgement has committed, the answer still
carries the acknowledgement's results, with no message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.core.errors import CatalogueChangedError, UnavailableError
from app.core.models import LeasedMessage, NextLease, Queue
from app.core.ports import Acked
from app.store.dequeue import DequeueStore, leased_messages
from app.store.errors import retry_transient
from app.store.messages import MessageStore, acknowledged, acknowledgement

log = logging.getLogger("sundial.store")

_Pairs = Acked


class CycleStore(MessageStore, DequeueStore):
    """Acknowledgement and claim together."""

    async def acknowledge_and_claim(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
        claim: NextLease,
    ) -> tuple[_Pairs, _Pairs, list[LeasedMessage]]:
        """Acknowledge as :meth:`acknowledge` does, then lease up to ``claim.count`` messages;
        the pairs completed, the pairs failed and the messages leased."""
        if queue.config.kind != "exclusive":
            return await self._in_one_transaction(queue, complete, fail, claim)
        completed, failed = await self.acknowledge(queue, complete, fail)
        try:
            leased = await self.dequeue(queue, claim.count, claim.lease_seconds, claim.metadata)
        except (UnavailableError, CatalogueChangedError) as error:
            # The acknowledgement stands; its results must reach the consumer, which asks for
            # messages again.
            log.warning("claim after an acknowledgement on queue %s failed: %s", queue.id, error)
            leased = []
        return completed, failed, leased

    @retry_transient
    async def _in_one_transaction(
        self,
        queue: Queue,
        complete: Sequence[tuple[str, str | None]],
        fail: Sequence[tuple[str, str | None, str | None]],
        claim: NextLease,
    ) -> tuple[_Pairs, _Pairs, list[LeasedMessage]]:
        statements = [
            *acknowledgement(queue, complete, fail),
            self._claim(queue, claim.count, claim.lease_seconds, claim.metadata),
        ]
        *acks, claimed = await self._driver_rows_together(statements)
        changed = [{(r.id, r.lease_id): r.held_seconds for r in rows} for rows in acks]
        completed, failed = acknowledged(changed, complete, fail)
        return completed, failed, leased_messages(claimed, queue)
