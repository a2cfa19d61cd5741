"""Moving a namespace between pools (docs/adr/0015-namespaces-on-pools.md): the statements of
:mod:`app.store.moves`, on the source pool, the target pool and the catalogue.

They run on the mover's own psycopg connections, so they are written with ``%(name)s``
placeholders. Column lists come from :mod:`app.store.tables`, so a copy carries every column a
later migration adds.
"""

from __future__ import annotations

from typing import LiteralString

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import JSONB

from app.store.tables import (
    messages,
    periodic_jobs,
    queues,
    tokens,
    topic_subscriptions,
    topics,
)


def _columns(names: list[str]) -> LiteralString:
    # Column names of app.store.tables: never input.
    return ", ".join(names)


# A catalogue row travels from pool to pool as parameters: its jsonb columns as their text
# (read as ``::text``, written back with a cast), which the driver passes through unchanged.
def _read_columns(table: Table) -> LiteralString:
    return ", ".join(
        f"{c.name}::text AS {c.name}" if isinstance(c.type, JSONB) else c.name for c in table.c
    )


def _values(table: Table) -> LiteralString:
    return ", ".join(
        f"CAST(%({c.name})s AS jsonb)" if isinstance(c.type, JSONB) else f"%({c.name})s"
        for c in table.c
    )


def _set_from_excluded(table: Table) -> LiteralString:
    """An upsert's SET list: every column but the key, to the row that was to be inserted."""
    return ", ".join(f"{c.name} = EXCLUDED.{c.name}" for c in table.c if not c.primary_key)


MESSAGE_COLUMNS: LiteralString = _columns([c.name for c in messages.c])
QUEUE_COLUMNS: LiteralString = _columns([c.name for c in queues.c])
TOKEN_COLUMNS: LiteralString = _columns([c.name for c in tokens.c])

# --- the catalogue: the journal of moves, and the flip ---------------------------------------

MOVE_JOURNAL_START: LiteralString = """
    INSERT INTO namespace_moves (namespace, source, target, phase)
    VALUES (%(namespace)s, %(source)s, %(target)s, 'copying')
    ON CONFLICT (namespace) DO NOTHING
"""

MOVE_JOURNAL_READ: LiteralString = """
    SELECT source, target, phase FROM namespace_moves WHERE namespace = %(namespace)s
"""

MOVE_JOURNAL_PHASE: LiteralString = """
    UPDATE namespace_moves SET phase = %(phase)s, updated_at = now()
    WHERE namespace = %(namespace)s
"""

MOVE_JOURNAL_END: LiteralString = "DELETE FROM namespace_moves WHERE namespace = %(namespace)s"

MOVES_UNDER_WAY: LiteralString = """
    SELECT namespace, source, target, phase, started_at, updated_at
    FROM namespace_moves ORDER BY started_at
"""

# The move's linearisation point: from its commit every request finds the namespace on the
# target (a request that found the source in its cached map finds it frozen there and reads the
# map again).
MAP_FLIP: LiteralString = """
    UPDATE namespace_pools SET pool = %(target)s
    WHERE namespace = %(namespace)s AND pool = %(source)s
"""

MAP_POOL: LiteralString = "SELECT pool FROM namespace_pools WHERE namespace = %(namespace)s"

# --- the source pool ------------------------------------------------------------------------

MOVING_OUT: LiteralString = "SELECT namespace FROM namespace_moves_out"

MOVING_OUT_ADD: LiteralString = """
    INSERT INTO namespace_moves_out (namespace) VALUES (%(namespace)s)
    ON CONFLICT DO NOTHING
"""

MOVING_OUT_REMOVE: LiteralString = "DELETE FROM namespace_moves_out WHERE namespace = %(namespace)s"

# Statement-level triggers that log the keys of every changed message of the namespaces being
# moved out (sundial_move_log, migration 0012), installed while a move runs. CREATE TRIGGER
# waits for the writers of messages in flight and holds new ones until it commits, so every
# change that commits after it is logged.
MOVE_LOG_TRIGGERS_INSTALL: tuple[LiteralString, ...] = (
    """
    CREATE OR REPLACE TRIGGER messages_move_log_insert AFTER INSERT ON messages
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sundial_move_log()
    """,
    """
    CREATE OR REPLACE TRIGGER messages_move_log_update AFTER UPDATE ON messages
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sundial_move_log()
    """,
    """
    CREATE OR REPLACE TRIGGER messages_move_log_delete AFTER DELETE ON messages
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sundial_move_log()
    """,
)

MOVE_LOG_TRIGGERS_DROP: tuple[LiteralString, ...] = (
    "DROP TRIGGER IF EXISTS messages_move_log_insert ON messages",
    "DROP TRIGGER IF EXISTS messages_move_log_update ON messages",
    "DROP TRIGGER IF EXISTS messages_move_log_delete ON messages",
)

MOVE_LOG_CLEAR: LiteralString = "DELETE FROM namespace_move_changes"

MOVE_LOG_LAST: LiteralString = "SELECT max(n) AS last FROM namespace_move_changes"

MOVE_LOG_KEYS: LiteralString = """
    SELECT coalesce(array_agg(queue_id), '{}') AS queue_ids, coalesce(array_agg(id), '{}') AS ids
    FROM (SELECT DISTINCT queue_id, id FROM namespace_move_changes WHERE n <= %(last)s) AS k
"""

MOVE_LOG_FORGET: LiteralString = "DELETE FROM namespace_move_changes WHERE n <= %(last)s"

NAMESPACE_ROW: LiteralString = """
    SELECT name, description, created_at, state FROM namespaces WHERE name = %(namespace)s
"""

NAMESPACE_SET_STATE: LiteralString = """
    UPDATE namespaces SET state = %(state)s
    WHERE name = %(namespace)s AND state = ANY(%(from_states)s)
    RETURNING name
"""

# The freeze wakes the namespace's parked long polls, so they look again: their next claim is
# refused (the catalogue changed), and they find the namespace where it is now.
NAMESPACE_WAKE_CONSUMERS: LiteralString = """
    SELECT count(pg_notify('sundial_ready', CAST(id AS text)))
    FROM queues WHERE namespace = %(namespace)s
"""

# The transactions in progress now: the freeze waits until each has ended, since one of them
# may have passed every guard before the freeze and still commit a change (which its trigger
# logged, visible once it commits).
TRANSACTIONS_IN_PROGRESS: LiteralString = """
    SELECT coalesce(array_agg(CAST(xid AS text)), '{}') AS xids
    FROM pg_snapshot_xip(pg_current_snapshot()) AS xid
"""

TRANSACTIONS_STILL_RUNNING: LiteralString = """
    SELECT count(*) AS running FROM unnest(CAST(%(xids)s AS xid8[])) AS xid
    WHERE pg_xact_status(xid) = 'in progress'
"""

QUEUES_OF: LiteralString = (
    f"SELECT {_read_columns(queues)} FROM queues WHERE namespace = %(namespace)s ORDER BY id"
)

TOKENS_OF: LiteralString = (
    f"SELECT {_read_columns(tokens)} FROM tokens WHERE namespace = %(namespace)s ORDER BY id"
)

MESSAGES_OF_COPY_OUT: LiteralString = f"""
    COPY (SELECT {MESSAGE_COLUMNS} FROM messages
          WHERE queue_id IN (SELECT id FROM queues WHERE namespace = %(namespace)s))
    TO STDOUT (FORMAT BINARY)
"""

MESSAGES_CHANGED_COPY_OUT: LiteralString = f"""
    COPY (SELECT {MESSAGE_COLUMNS} FROM messages
          WHERE (queue_id, id) IN (
              SELECT * FROM unnest(CAST(%(queue_ids)s AS bigint[]), CAST(%(ids)s AS text[]))))
    TO STDOUT (FORMAT BINARY)
"""

# The copy left behind, deleted in batches after the flip (its triggers dropped first).
MESSAGES_LEFT_BEHIND_DELETE: LiteralString = """
    DELETE FROM messages WHERE (queue_id, id) IN (
        SELECT queue_id, id FROM messages
        WHERE queue_id IN (SELECT id FROM queues WHERE namespace = %(namespace)s)
        LIMIT %(batch)s)
"""

NAMESPACE_DELETE: LiteralString = "DELETE FROM namespaces WHERE name = %(namespace)s"

# --- the target pool ------------------------------------------------------------------------

NAMESPACE_INCOMING: LiteralString = """
    INSERT INTO namespaces (name, description, created_at, state)
    VALUES (%(name)s, %(description)s, %(created_at)s, 'incoming')
"""

NAMESPACE_DESCRIBE: LiteralString = """
    UPDATE namespaces SET description = %(description)s WHERE name = %(name)s
"""

# Queues and tokens keep their ids: a queue id names one queue across every pool (each pool
# numbers its own from a range of its own), and a message's queue_id stays what it was.
QUEUE_UPSERT: LiteralString = f"""
    INSERT INTO queues ({QUEUE_COLUMNS}) OVERRIDING SYSTEM VALUE
    VALUES ({_values(queues)})
    ON CONFLICT (id) DO UPDATE SET
    {", ".join(f"{c.name} = EXCLUDED.{c.name}" for c in queues.c if c.name != "id")}
"""

QUEUES_DELETE_OTHERS: LiteralString = """
    DELETE FROM queues WHERE namespace = %(namespace)s AND id <> ALL(CAST(%(ids)s AS bigint[]))
"""

TOKEN_UPSERT: LiteralString = f"""
    INSERT INTO tokens ({TOKEN_COLUMNS})
    VALUES ({_values(tokens)})
    ON CONFLICT (id) DO UPDATE SET
    {", ".join(f"{c.name} = EXCLUDED.{c.name}" for c in tokens.c if c.name != "id")}
"""

TOKENS_DELETE_OTHERS: LiteralString = """
    DELETE FROM tokens WHERE namespace = %(namespace)s AND id <> ALL(CAST(%(ids)s AS uuid[]))
"""

# Topics and their subscriptions (migration 0016) travel with their namespace: keyed by names
# and queue ids, which the move keeps. The target's subscriptions of the namespace are replaced
# whole, after its queues (a subscription names one of them).
TOPICS_OF: LiteralString = (
    f"SELECT {_read_columns(topics)} FROM topics WHERE namespace = %(namespace)s ORDER BY name"
)

SUBSCRIPTIONS_OF: LiteralString = f"""
    SELECT {_read_columns(topic_subscriptions)} FROM topic_subscriptions
    WHERE namespace = %(namespace)s ORDER BY topic, queue_id
"""

TOPIC_UPSERT: LiteralString = f"""
    INSERT INTO topics ({_columns([c.name for c in topics.c])})
    VALUES ({_values(topics)})
    ON CONFLICT (namespace, name) DO UPDATE SET
    {_set_from_excluded(topics)}
"""

TOPICS_DELETE_OTHERS: LiteralString = """
    DELETE FROM topics WHERE namespace = %(namespace)s AND name <> ALL(CAST(%(names)s AS text[]))
"""

SUBSCRIPTIONS_DELETE: LiteralString = (
    "DELETE FROM topic_subscriptions WHERE namespace = %(namespace)s"
)

SUBSCRIPTION_INSERT: LiteralString = f"""
    INSERT INTO topic_subscriptions ({_columns([c.name for c in topic_subscriptions.c])})
    VALUES ({_values(topic_subscriptions)})
"""

# Periodic jobs (migration 0015) travel with their namespace, next_run_at included: only an
# active namespace's jobs fire, so a job fires on the source until the freeze and on the target
# from the flip, each tick once (the last copy is made under the freeze).
PERIODIC_JOBS_OF: LiteralString = f"""
    SELECT {_read_columns(periodic_jobs)} FROM periodic_jobs
    WHERE namespace = %(namespace)s ORDER BY name
"""

PERIODIC_JOB_UPSERT: LiteralString = f"""
    INSERT INTO periodic_jobs ({_columns([c.name for c in periodic_jobs.c])})
    VALUES ({_values(periodic_jobs)})
    ON CONFLICT (namespace, name) DO UPDATE SET
    {_set_from_excluded(periodic_jobs)}
"""

PERIODIC_JOBS_DELETE_OTHERS: LiteralString = """
    DELETE FROM periodic_jobs
    WHERE namespace = %(namespace)s AND name <> ALL(CAST(%(names)s AS text[]))
"""

MESSAGES_DELETE_KEYS: LiteralString = """
    DELETE FROM messages m
    USING unnest(CAST(%(queue_ids)s AS bigint[]), CAST(%(ids)s AS text[])) AS k (queue_id, id)
    WHERE m.queue_id = k.queue_id AND m.id = k.id
"""

MESSAGES_COPY_IN: LiteralString = f"COPY messages ({MESSAGE_COLUMNS}) FROM STDIN (FORMAT BINARY)"

# Messages the target numbers after the move sort after the ones it received (seq breaks ties
# of priority): its sequence starts past the highest seq copied.
MESSAGE_SEQ_PAST_COPIED: LiteralString = """
    SELECT setval(s, greatest(m, coalesce(pg_sequence_last_value(s), 1)))
    FROM (SELECT CAST(pg_get_serial_sequence('messages', 'seq') AS regclass) AS s,
                 (SELECT max(seq) FROM messages) AS m) AS seq
    WHERE m IS NOT NULL
"""
