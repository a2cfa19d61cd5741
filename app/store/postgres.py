"""The PostgreSQL store: :class:`PostgresStore`, the one class the application builds
(``PostgresStore(engine, lookup_cache_seconds)``) to provide :class:`app.core.ports.Store`.

It is composed of one part per concern, each a :class:`~app.store.paths.StorePaths` sharing the
engine, the lookup cache and the two ways to the database:

- :class:`~app.store.admin.AdminStore`: namespaces, tokens and queues;
- :class:`~app.store.messages.MessageStore`: enqueue, transitions, acknowledgement, deletion;
- :class:`~app.store.dequeue.DequeueStore`: the claim;
- :class:`~app.store.cycle.CycleStore`: an acknowledgement and the claim after it, together;
- :class:`~app.store.browse.BrowseStore`: the listing of a queue's messages.

It decides nothing about the state machine; it passes the guards that :mod:`app.core.states`
gives and reports what changed. Statements live in :mod:`app.store.sql`; driver errors are
translated in :mod:`app.store.errors`.
"""

from __future__ import annotations

from app.store.admin import AdminStore
from app.store.browse import BrowseStore
from app.store.cycle import CycleStore


class PostgresStore(AdminStore, CycleStore, BrowseStore):
    """Implements :class:`app.core.ports.Store` on PostgreSQL through SQLAlchemy + psycopg."""
