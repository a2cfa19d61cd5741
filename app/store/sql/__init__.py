"""Every statement the store runs, as SQL, one module per table or concern:

- :mod:`~app.store.sql.guards`: the guards statements carry (the catalogue's, the state's);
- :mod:`~app.store.sql.listeners`: ``queue_listeners`` and the ``sundial_ready`` wake-up;
- :mod:`~app.store.sql.catalogue`: tokens and queues, read with their catalogue version;
- :mod:`~app.store.sql.reads`: messages read (one, its state, counts, archived completions);
- :mod:`~app.store.sql.enqueue`: messages inserted;
- :mod:`~app.store.sql.claim`: the claim (dequeue) of ready and due messages;
- :mod:`~app.store.sql.transitions`: every other state change a client makes, and deletions;
- :mod:`~app.store.sql.retry`: the rule of a failed attempt (retry, backoff or dead letter);
- :mod:`~app.store.sql.scheduler`: the scheduler's passes (promotion, lease release, expiry,
  archiving into history, statistics);
- :mod:`~app.store.sql.leadership`: the scheduler's leader lock and heartbeats;
- :mod:`~app.store.sql.insights`: the dashboard's reads (series per minute, exclusive values)
  and its guarded delete;
- :mod:`~app.store.sql.stats`: the metrics' one statement and the queues' ids;
- :mod:`~app.store.sql.sessions`: ``dashboard_sessions``.

A statement's name says what it does and, after ``IF``, what must hold for it to change a row,
in the manner of River's ``JobSetStateIfRunningMany``: ``MESSAGE_COMPLETE_IF_LEASED`` completes a
message only while the caller holds its current lease. Each state change is one guarded
statement whose source states come from :mod:`app.core.states`, so a stale caller changes
nothing. ``now()`` (the database clock, the transaction's start) is the only clock.

Bind parameters use SQLAlchemy's ``:name`` form; casts are written ``CAST(:x AS type)`` because
``:x::type`` does not parse as a bind.
"""
