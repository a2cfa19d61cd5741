"""Initial schema: namespaces, tokens, queues, the hot messages table, partitioned history.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Written as SQL so it is reviewed as SQL; ``app/store/tables.py`` mirrors it and ``alembic check``
(run by the tests) proves the two agree.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the schema."""
    op.execute(
        """
        CREATE TYPE message_state AS ENUM
            ('invisible', 'pending', 'running', 'completed', 'canceled', 'errored');

        CREATE TABLE namespaces (
            name        text PRIMARY KEY,
            description text NOT NULL DEFAULT '',
            created_at  timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE tokens (
            id          uuid PRIMARY KEY,
            namespace   text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
            label       text NOT NULL DEFAULT '',
            secret_hash bytea NOT NULL UNIQUE,
            created_at  timestamptz NOT NULL DEFAULT now(),
            expires_at  timestamptz
        );
        CREATE INDEX ix_tokens_namespace ON tokens (namespace);

        CREATE TABLE queues (
            id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            namespace               text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
            name                    text NOT NULL,
            kind                    text NOT NULL,
            exclusive_key           text,
            lease_seconds           integer NOT NULL,
            delay_seconds           integer NOT NULL,
            max_attempts            integer NOT NULL,
            retry_delay_seconds     integer NOT NULL,
            retry_delay_max_seconds integer NOT NULL,
            retention_seconds       integer NOT NULL,
            enqueue_paused          boolean NOT NULL DEFAULT false,
            dequeue_paused          boolean NOT NULL DEFAULT false,
            created_at              timestamptz NOT NULL DEFAULT now(),
            updated_at              timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT queues_namespace_name_key UNIQUE (namespace, name),
            CONSTRAINT queues_kind_check CHECK (kind IN ('simple', 'exclusive')),
            CONSTRAINT queues_exclusive_key_check
                CHECK ((kind = 'exclusive') = (exclusive_key IS NOT NULL))
        );

        -- The hot table. It holds live messages and finished ones until their queue's retention
        -- passes; the scheduler then moves them to message_history, so it stays small.
        -- fillfactor leaves room on each page for HOT updates (heartbeats); autovacuum runs after
        -- ~1% churn instead of 20%, because dead tuples are what slow a queue down.
        CREATE TABLE messages (
            queue_id         bigint NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
            id               text NOT NULL,
            seq              bigint GENERATED ALWAYS AS IDENTITY,
            priority         bigint NOT NULL,
            state            message_state NOT NULL,
            payload          jsonb NOT NULL DEFAULT 'null'::jsonb,
            metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
            exclusive_value  text,
            attempts         integer NOT NULL DEFAULT 0,
            max_attempts     integer,
            lease_seconds    integer,
            lease_id         uuid,
            lease_expires_at timestamptz,
            visible_at       timestamptz NOT NULL,
            expires_at       timestamptz,
            enqueued_at      timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now(),
            first_leased_at  timestamptz,
            leased_at        timestamptz,
            finished_at      timestamptz,
            last_error       text,
            PRIMARY KEY (queue_id, id)
        ) WITH (
            fillfactor = 70,
            autovacuum_vacuum_scale_factor = 0.01,
            autovacuum_vacuum_threshold = 1000,
            autovacuum_vacuum_insert_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.02,
            autovacuum_vacuum_cost_delay = 0
        );

        -- Dequeue walks this in ORDER BY (priority, seq) for one queue: the ready set only.
        CREATE INDEX messages_pending_idx ON messages (queue_id, priority, seq)
            WHERE state = 'pending';
        -- Promotion of due delayed messages (scheduler, and dequeue before the scheduler).
        CREATE INDEX messages_invisible_idx ON messages (visible_at) WHERE state = 'invisible';
        -- Release of expired leases.
        CREATE INDEX messages_lease_idx ON messages (lease_expires_at) WHERE state = 'running';
        -- Exclusivity is the database's rule: never two running messages of one value.
        CREATE UNIQUE INDEX messages_running_exclusive_uidx ON messages (queue_id, exclusive_value)
            WHERE state = 'running' AND exclusive_value IS NOT NULL;
        -- Cancellation of messages whose expires_at passes.
        CREATE INDEX messages_expires_idx ON messages (expires_at)
            WHERE expires_at IS NOT NULL AND state IN ('invisible', 'pending', 'running');
        -- Retention: finished messages per queue by age.
        CREATE INDEX messages_finished_idx ON messages (queue_id, finished_at)
            WHERE state IN ('completed', 'canceled', 'errored');
        -- Listings, newest first.
        CREATE INDEX messages_queue_seq_idx ON messages (queue_id, seq);

        -- The record of every finished message, one partition per day of finished_at.
        -- Partitions are created ahead by the scheduler (app/store/history.py) and dropped by the
        -- pipeline once exported.
        CREATE TABLE message_history (
            namespace       text NOT NULL,
            queue           text NOT NULL,
            queue_id        bigint NOT NULL,
            id              text NOT NULL,
            seq             bigint NOT NULL,
            priority        bigint NOT NULL,
            state           message_state NOT NULL,
            payload         jsonb NOT NULL,
            metadata        jsonb NOT NULL,
            exclusive_value text,
            attempts        integer NOT NULL,
            max_attempts    integer NOT NULL,
            enqueued_at     timestamptz NOT NULL,
            first_leased_at timestamptz,
            leased_at       timestamptz,
            finished_at     timestamptz NOT NULL,
            last_error      text,
            archived_at     timestamptz NOT NULL DEFAULT now()
        ) PARTITION BY RANGE (finished_at);
        CREATE INDEX message_history_queue_idx
            ON message_history (namespace, queue, finished_at);

        -- The retry delay after failed attempt `attempt` (1-based): base * 2^(attempt-1) seconds,
        -- capped. app/core/states.py:backoff_seconds is the same rule; a test keeps them equal.
        CREATE FUNCTION sundial_retry_delay(attempt integer, base integer, cap integer)
            RETURNS double precision
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            RETURN CASE WHEN base <= 0 THEN 0
                        ELSE least(base * power(2::double precision,
                                                least(greatest(attempt - 1, 0), 62)), cap)
                   END;

        -- Server processes contending for the scheduler (reporting only; the advisory lock
        -- decides who leads). UNLOGGED: it is rebuilt by the running servers after a crash.
        CREATE UNLOGGED TABLE scheduler_nodes (
            node_id      text PRIMARY KEY,
            is_leader    boolean NOT NULL DEFAULT false,
            started_at   timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz NOT NULL DEFAULT now(),
            last_tick_at timestamptz
        );
        """
    )


def downgrade() -> None:
    """Drop the schema."""
    op.execute(
        """
        DROP TABLE scheduler_nodes;
        DROP FUNCTION sundial_retry_delay(integer, integer, integer);
        DROP TABLE message_history;
        DROP TABLE messages;
        DROP TABLE queues;
        DROP TABLE tokens;
        DROP TABLE namespaces;
        DROP TYPE message_state;
        """
    )
