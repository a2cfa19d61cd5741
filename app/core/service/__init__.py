"""The queue service: every operation of docs/concepts.md and the admin plane of docs/api.md.

It validates input (:mod:`app.core.validation`), resolves queue defaults, calls the store's
guarded statements, and turns "the guard matched nothing" into the precise error. It knows no
HTTP and no SQL; authorization of a caller for a namespace is the edge's job
(:meth:`Principal.may_access`), authentication is :meth:`QueueService.authenticate`.

:class:`QueueService` is one object over one store, joined from a part per resource, each a
module of this package:

- :mod:`~app.core.service.tokens`: authentication, token hashing, issuing and revoking tokens;
- :mod:`~app.core.service.namespaces`: creating, listing and deleting namespaces;
- :mod:`~app.core.service.queues`: creating, configuring, reading, purging and deleting queues;
- :mod:`~app.core.service.producing`: enqueue;
- :mod:`~app.core.service.consuming`: dequeue, planned once for a long poll;
- :mod:`~app.core.service.consuming_many`: dequeue from several queues, in their order;
- :mod:`~app.core.service.leases`: complete, fail, extend and the batch ack, fenced by a lease;
- :mod:`~app.core.service.lease_by_id`: the lease of one message a consumer names;
- :mod:`~app.core.service.messages`: reading, listing, changing, cancelling and requeueing
  messages;
- :mod:`~app.core.service.topics`: fan-out topics, their subscriptions and the publish.

Their shared ground: :mod:`~app.core.service.base` (the store, limits and observer, and the
lookups every operation starts from), :mod:`~app.core.service.catalogue_retry` (running an
operation again when the catalogue changed under it), :mod:`~app.core.service.refusals` (the
error a guard that matched nothing becomes), :mod:`~app.core.service.identifiers` (ids that
could exist, lease ids as the database compares them) and :mod:`~app.core.service.observer`
(the metrics hook).
"""

from __future__ import annotations

from app.core import validation
from app.core.ports import Store
from app.core.sealing import Sealer
from app.core.service.consuming import Consuming
from app.core.service.consuming_many import ConsumingMany
from app.core.service.lease_by_id import LeasingById
from app.core.service.leases import Leases
from app.core.service.messages import Messages
from app.core.service.namespaces import Namespaces
from app.core.service.observer import NoObserver, Observer
from app.core.service.periodic import Periodic
from app.core.service.producing import Producing
from app.core.service.queues import Queues
from app.core.service.tokens import Tokens
from app.core.service.topics import Topics


class QueueService(
    Tokens,
    Namespaces,
    Queues,
    Producing,
    Consuming,
    ConsumingMany,
    Leases,
    Messages,
    Topics,
    LeasingById,
    Periodic,
):
    """The operations of Sundial, over a :class:`Store`."""

    def __init__(
        self,
        store: Store,
        *,
        limits: validation.Limits | None = None,
        admin_token: str | None = None,
        observer: Observer | None = None,
        sealing_secret: str | None = None,
    ) -> None:
        """``sealing_secret``: what SQS access keys' secrets are sealed under (default: the
        admin token); without either, no access key can be issued or used."""
        self.store = store
        secret = sealing_secret or admin_token
        self.sealer = Sealer(secret) if secret else None
        self.limits = limits or validation.Limits()
        self._admin_token = admin_token
        self.observer = observer or NoObserver()


__all__ = ["QueueService"]
