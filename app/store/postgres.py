"""The PostgreSQL store: :class:`PostgresStore`, the one class the application builds
(``PostgresStore(engine, lookup_cache_seconds)``) to provide :class:`app.core.ports.Store`.

It is composed of one part per concern, each a :class:`~app.store.paths.StorePaths` sharing the
engine, the lookup cache and the two ways to the database:

- :class:`~app.store.admin.AdminStore`: namespaces, tokens and queues;
- :class:`~app.store.messages.MessageStore`: enqueue, transitions, acknowledgement, deletion;
- :class:`~app.store.dequeue.DequeueStore`: the claim;
- :class:`~app.store.cycle.CycleStore`: an acknowledgement and the claim after it, together;
- :class:`~app.store.browse.BrowseStore`: the listing of a queue's messages;
- :class:`~app.store.lease_by_id.LeaseByIdStore`: the lease of one named message;
- :class:`~app.store.topics.TopicStore`: fan-out topics, their subscriptions and the publish.

It decides nothing about the state machine; it passes the guards that :mod:`app.core.states`
gives and reports what changed. Statements live in :mod:`app.store.sql`; driver errors are
translated in :mod:`app.store.errors`.
"""

from __future__ import annotations

from app.store.admin import AdminStore
from app.store.browse import BrowseStore
from app.store.cycle import CycleStore
from app.store.lease_by_id import LeaseByIdStore
from app.store.periodic import PeriodicStore
from app.store.topics import TopicStore


class PostgresStore(AdminStore, CycleStore, BrowseStore, TopicStore, LeaseByIdStore, PeriodicStore):
    """Implements :class:`app.core.ports.Store` on PostgreSQL through SQLAlchemy + psycopg."""
