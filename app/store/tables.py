"""The schema as SQLAlchemy metadata: the reference that ``alembic check`` compares migrations
against. Tables are created only by the revisions in ``migrations/``; hot-path statements live
in :mod:`app.store.sql` as SQL.

Storage parameters (fillfactor, per-table autovacuum) and the history partitions are set by the
migrations and the scheduler; SQLAlchemy does not model them.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from app.core.states import State

metadata = sa.MetaData()

message_state = pg.ENUM(
    *[s.value for s in State], name="message_state", metadata=metadata, create_type=False
)

TERMINAL = "state IN ('completed', 'canceled', 'errored')"

namespaces = sa.Table(
    "namespaces",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    # active | incoming | frozen | moved (migration 0012: a namespace moving between pools)
    sa.Column(
        "state",
        sa.Text,
        sa.CheckConstraint(
            "state IN ('active', 'incoming', 'frozen', 'moved')", name="namespaces_state_check"
        ),
        nullable=False,
        server_default="active",
    ),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", pg.UUID(as_uuid=False), primary_key=True),
    sa.Column(
        "namespace",
        sa.Text,
        sa.ForeignKey("namespaces.name", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("label", sa.Text, nullable=False, server_default=""),
    # SHA-256 of the secret. Secrets are 256 random bits, so a fast hash is as strong as a slow one.
    sa.Column("secret_hash", pg.BYTEA, nullable=False, unique=True),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    # An SQS access key (migration 0014): its id, and its secret sealed (AES-GCM) by the server.
    sa.Column("access_key_id", sa.Text, unique=True),
    sa.Column("sealed_secret", pg.BYTEA),
    sa.CheckConstraint(
        "(access_key_id IS NULL) = (sealed_secret IS NULL)", name="tokens_access_key_check"
    ),
    # Per-token rate limits (migration 0018): requests per second of each kind, NULL: none.
    sa.Column("read_rate", sa.Double),
    sa.Column("write_rate", sa.Double),
    sa.CheckConstraint("read_rate > 0", name="tokens_read_rate_check"),
    sa.CheckConstraint("write_rate > 0", name="tokens_write_rate_check"),
)

queues = sa.Table(
    "queues",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
    sa.Column(
        "namespace",
        sa.Text,
        sa.ForeignKey("namespaces.name", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("exclusive_key", sa.Text),
    # The metadata key whose value is indexed for filtered dequeues (messages.filter_value).
    sa.Column("filter_key", sa.Text),
    # A second indexed key (migration 0019; messages.filter_value_2): only beside a first one.
    sa.Column("filter_key_2", sa.Text),
    # The claim's order (migration 0017): 'priority' (priority, then enqueue order) or 'due'
    # (visible_at first, then priority, then enqueue order).
    sa.Column("ordering", sa.Text, nullable=False, server_default="priority"),
    sa.Column("lease_seconds", sa.Integer, nullable=False),
    sa.Column("delay_seconds", sa.Integer, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("retry_delay_seconds", sa.Integer, nullable=False),
    sa.Column("retry_delay_max_seconds", sa.Integer, nullable=False),
    sa.Column("retention_seconds", sa.Integer, nullable=False),
    sa.Column("enqueue_paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("dequeue_paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    # The queue of the same namespace that takes this one's dead letters (migration 0014).
    sa.Column("dead_letter_queue", sa.Text),
    # What the SQS door keeps for the queue: its SQS-only attributes and tags (docs/sqs.md).
    sa.Column("sqs", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.UniqueConstraint("namespace", "name", name="queues_namespace_name_key"),
    sa.CheckConstraint(
        "dead_letter_queue IS DISTINCT FROM name", name="queues_dead_letter_queue_check"
    ),
    sa.CheckConstraint("kind IN ('simple', 'exclusive')", name="queues_kind_check"),
    sa.CheckConstraint("ordering IN ('priority', 'due')", name="queues_ordering_check"),
    sa.CheckConstraint(
        "(kind = 'exclusive') = (exclusive_key IS NOT NULL)", name="queues_exclusive_key_check"
    ),
    sa.CheckConstraint(
        "filter_key_2 IS NULL OR (filter_key IS NOT NULL AND filter_key_2 <> filter_key)",
        name="queues_filter_key_2_check",
    ),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column(
        "queue_id", sa.BigInteger, sa.ForeignKey("queues.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("id", sa.Text, primary_key=True),
    # Enqueue order: breaks priority ties and orders "newest first" listings.
    sa.Column("seq", sa.BigInteger, sa.Identity(always=True), nullable=False),
    sa.Column("priority", sa.BigInteger, nullable=False),
    sa.Column("state", message_state, nullable=False),
    sa.Column("payload", pg.JSONB, nullable=False, server_default=sa.text("'null'::jsonb")),
    sa.Column("metadata", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("exclusive_value", sa.Text),
    # metadata ->> the queue's filter_key (NULL when the queue has none or the key is absent).
    sa.Column("filter_value", sa.Text),
    # metadata ->> the queue's second filter key, filter_key_2 (migration 0019).
    sa.Column("filter_value_2", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    # Per-message overrides; NULL means "the queue's current setting".
    sa.Column("max_attempts", sa.Integer),
    sa.Column("lease_seconds", sa.Integer),
    sa.Column("lease_id", pg.UUID(as_uuid=False)),
    sa.Column("lease_expires_at", sa.DateTime(timezone=True)),
    sa.Column("visible_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    sa.Column(
        "enqueued_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    # When the first lease was granted (wait time) and when the latest began (run time).
    sa.Column("first_leased_at", sa.DateTime(timezone=True)),
    sa.Column("leased_at", sa.DateTime(timezone=True)),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("last_error", sa.Text),
    # Dequeue: walk the ready set of one queue in (priority, seq) order.
    sa.Index(
        "messages_pending_idx",
        "queue_id",
        "priority",
        "seq",
        postgresql_where=sa.text("state = 'pending'"),
    ),
    # Filtered dequeue on the queue's filter_key: the matches of one value in (priority, seq)
    # order. Messages without a filter value stay out, so other queues' writes never touch it.
    sa.Index(
        "messages_filter_pending_idx",
        "queue_id",
        "filter_value",
        "priority",
        "seq",
        postgresql_where=sa.text("state = 'pending' AND filter_value IS NOT NULL"),
    ),
    # The same for the queue's second filter key.
    sa.Index(
        "messages_filter_2_pending_idx",
        "queue_id",
        "filter_value_2",
        "priority",
        "seq",
        postgresql_where=sa.text("state = 'pending' AND filter_value_2 IS NOT NULL"),
    ),
    # Scheduler promotion, and dequeue's look for due messages not promoted yet.
    sa.Index(
        "messages_invisible_idx", "visible_at", postgresql_where=sa.text("state = 'invisible'")
    ),
    # Scheduler: expired leases.
    sa.Index(
        "messages_lease_idx", "lease_expires_at", postgresql_where=sa.text("state = 'running'")
    ),
    # Exclusivity, enforced by the database: one running message per (queue, value).
    sa.Index(
        "messages_running_exclusive_uidx",
        "queue_id",
        "exclusive_value",
        unique=True,
        postgresql_where=sa.text("state = 'running' AND exclusive_value IS NOT NULL"),
    ),
    # Scheduler: messages whose expires_at passes before they finish.
    sa.Index(
        "messages_expires_idx",
        "expires_at",
        postgresql_where=sa.text(
            "expires_at IS NOT NULL AND state IN ('invisible', 'pending', 'running')"
        ),
    ),
    # Scheduler: finished messages past retention, per queue.
    sa.Index(
        "messages_finished_idx", "queue_id", "finished_at", postgresql_where=sa.text(TERMINAL)
    ),
    # Listings: newest first within a queue.
    sa.Index("messages_queue_seq_idx", "queue_id", "seq"),
    # A queue's oldest pending message: the first entry of its range (migration 0010); and the
    # claim of a queue with ordering 'due', which walks it in order (migration 0017).
    sa.Index(
        "messages_pending_visible_idx",
        "queue_id",
        "visible_at",
        "priority",
        "seq",
        postgresql_where=sa.text("state = 'pending'"),
    ),
)

# Append-only record of finished messages, partitioned by day of finished_at. Queue and namespace
# are copied by name so the record outlives the queue.
message_history = sa.Table(
    "message_history",
    metadata,
    sa.Column("namespace", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("queue_id", sa.BigInteger, nullable=False),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("priority", sa.BigInteger, nullable=False),
    sa.Column("state", message_state, nullable=False),
    sa.Column("payload", pg.JSONB, nullable=False),
    sa.Column("metadata", pg.JSONB, nullable=False),
    sa.Column("exclusive_value", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("first_leased_at", sa.DateTime(timezone=True)),
    sa.Column("leased_at", sa.DateTime(timezone=True)),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_error", sa.Text),
    sa.Column(
        "archived_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    # Since migration 0008 (NULL in rows archived before): the lease that finished the message
    # and what a repeated complete with it answers.
    sa.Column("lease_id", pg.UUID(as_uuid=False)),
    sa.Column("lease_seconds", sa.Integer),
    sa.Column("visible_at", sa.DateTime(timezone=True)),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    sa.Index("message_history_queue_idx", "namespace", "queue", "finished_at"),
    # A message by id, for a repeated complete that finds it archived.
    sa.Index("message_history_message_idx", "queue_id", "id"),
    postgresql_partition_by="RANGE (finished_at)",
)

# Who runs the scheduler: one row per server process that has ever contended, for operators and
# metrics. Leadership itself is a PostgreSQL advisory lock; this table only reports it.
scheduler_nodes = sa.Table(
    "scheduler_nodes",
    metadata,
    sa.Column("node_id", sa.Text, primary_key=True),
    sa.Column("is_leader", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column(
        "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "heartbeat_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("last_tick_at", sa.DateTime(timezone=True)),
    prefixes=["UNLOGGED"],
)

# Server processes with long-polling consumers waiting on a queue, by the backend pid of their
# LISTEN connection: statements NOTIFY only queues someone listens to (see migration 0002).
queue_listeners = sa.Table(
    "queue_listeners",
    metadata,
    sa.Column(
        "queue_id",
        sa.BigInteger,
        sa.ForeignKey("queues.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("listener_pid", sa.Integer, primary_key=True),
    sa.Column("since", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    prefixes=["UNLOGGED"],
)

# The counts of the per-token rate limits (migration 0018, app/store/sql/token_limits.py): each
# limited token's theoretical arrival time per kind of request (read, write), shared by every
# server process. UNLOGGED: a crash only forgets the counts.
token_rate_limits = sa.Table(
    "token_rate_limits",
    metadata,
    sa.Column("token_id", pg.UUID(as_uuid=False), primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("tat", sa.DateTime(timezone=True), nullable=False),
    sa.Column("step", sa.Interval, nullable=False),
    sa.Column("allowed", sa.Boolean, nullable=False),
    prefixes=["UNLOGGED"],
)

# The data pipeline (migration 0004, docs/pipeline.md): each export of history to the Parquet
# lake is a window [low, high) of archived_at; the last committed run's high is the watermark.
pipeline_export_runs = sa.Table(
    "pipeline_export_runs",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
    sa.Column("low", sa.DateTime(timezone=True), nullable=False),
    sa.Column("high", sa.DateTime(timezone=True), nullable=False),
    sa.Column(
        "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("committed_at", sa.DateTime(timezone=True)),
    sa.Column("rows", sa.BigInteger),
    sa.Column("files", sa.Integer),
    sa.CheckConstraint("low < high", name="pipeline_export_runs_window_check"),
)

# The Spark report job's output: one row per namespace, queue and UTC hour.
report_hourly = sa.Table(
    "report_hourly",
    metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("queue", sa.Text, primary_key=True),
    sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
    *[
        sa.Column(name, sa.BigInteger, nullable=False)
        for name in ("enqueued", "completed", "errored", "canceled", "expired")
    ],
    *[
        sa.Column(f"{kind}_p{q}_us", sa.BigInteger)
        for kind in ("wait", "run")
        for q in (50, 95, 99)
    ],
    sa.Column("attempts", pg.JSONB, nullable=False),
    sa.Column("lease_expired", sa.BigInteger, nullable=False),
    sa.Column("lease_expiry_rate", sa.Double),
    sa.Column("busiest_exclusive", pg.JSONB, nullable=False),
    sa.Column(
        "computed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Index("report_hourly_hour_idx", "hour"),
)

# The catalogue's version (migration 0006, docs/adr/0011-catalogue-version.md): one row, counted
# up by triggers on every change to namespaces, tokens and queues; a request's statements check
# that it has not moved since they looked those up (sql.guards.CATALOGUE_IS_CURRENT).
catalogue_version = sa.Table(
    "catalogue_version",
    metadata,
    sa.Column(
        "one", sa.Boolean, sa.CheckConstraint("one"), primary_key=True, server_default="true"
    ),
    sa.Column("version", sa.BigInteger, nullable=False),
)

# Signed-in dashboard sessions (migration 0007, app/store/sessions.py): a session is live while
# its row is; signing out deletes it, so a copied cookie stops working in every process.
dashboard_sessions = sa.Table(
    "dashboard_sessions",
    metadata,
    sa.Column("id_hash", pg.BYTEA, primary_key=True),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("dashboard_sessions_expires_idx", "expires_at"),
)

# Messages per queue and state (migration 0010, docs/adr/0014-counts-kept-by-triggers.md): the
# counts as of the scheduler's last fold (no row for a count of 0, no foreign key: a deleted
# queue's deltas bring its counts to 0), and the changes since, appended by statement-level
# triggers on messages (one row per queue and state a statement changed, with its net change).
# A read adds the two up in one statement (app/store/sql/reads.py, KEPT_COUNTS_SQL).
queue_state_counts = sa.Table(
    "queue_state_counts",
    metadata,
    sa.Column("queue_id", sa.BigInteger, primary_key=True),
    sa.Column("state", message_state, primary_key=True),
    sa.Column("n", sa.BigInteger, nullable=False),
)

# Append-only between folds: no key, no index, no foreign key (the deltas of a queue being
# deleted are written after it is gone; the fold drops them).
queue_state_count_deltas = sa.Table(
    "queue_state_count_deltas",
    metadata,
    sa.Column("queue_id", sa.BigInteger, nullable=False),
    sa.Column("state", message_state, nullable=False),
    sa.Column("delta", sa.BigInteger, nullable=False),
)

# Pools (migration 0011, docs/scaling.md). Read in the catalogue database: the pool that holds
# each namespace, and the pools registered so far with the number that gives each its range of
# queue ids. Written in every pool at registration: which pool the database is.
namespace_pools = sa.Table(
    "namespace_pools",
    metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("pool", sa.Text, nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

pools = sa.Table(
    "pools",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, sa.CheckConstraint("number >= 0"), nullable=False, unique=True),
    sa.Column(
        "registered_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

pool_identity = sa.Table(
    "pool_identity",
    metadata,
    sa.Column(
        "one", sa.Boolean, sa.CheckConstraint("one"), primary_key=True, server_default=sa.true()
    ),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("number", sa.Integer, sa.CheckConstraint("number >= 0"), nullable=False),
)

# Moves of a namespace between pools (migration 0012, docs/adr/0015): the catalogue's journal,
# and on the source pool the namespaces being moved out and the message keys changed since.
namespace_moves = sa.Table(
    "namespace_moves",
    metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column(
        "phase",
        sa.Text,
        sa.CheckConstraint(
            "phase IN ('copying', 'frozen', 'flipped')", name="namespace_moves_phase_check"
        ),
        nullable=False,
    ),
    sa.Column(
        "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

namespace_moves_out = sa.Table(
    "namespace_moves_out", metadata, sa.Column("namespace", sa.Text, primary_key=True)
)

namespace_move_changes = sa.Table(
    "namespace_move_changes",
    metadata,
    sa.Column("n", sa.BigInteger, sa.Identity(always=True), primary_key=True),
    sa.Column("queue_id", sa.BigInteger, nullable=False),
    sa.Column("id", sa.Text, nullable=False),
)

# Fan-out topics (migration 0016, docs/concepts.md "Topics"): a topic of a namespace and the
# queues subscribed to it, each with an optional tag filter (metadata[tag_key] IN tags). Keyed
# by names and queue ids, which a namespace keeps when it moves between pools.
topics = sa.Table(
    "topics",
    metadata,
    sa.Column(
        "namespace",
        sa.Text,
        sa.ForeignKey("namespaces.name", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

topic_subscriptions = sa.Table(
    "topic_subscriptions",
    metadata,
    sa.Column("namespace", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column(
        "queue_id",
        sa.BigInteger,
        sa.ForeignKey("queues.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tag_key", sa.Text),
    sa.Column("tags", pg.ARRAY(sa.Text)),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.ForeignKeyConstraint(
        ["namespace", "topic"], ["topics.namespace", "topics.name"], ondelete="CASCADE"
    ),
    sa.CheckConstraint(
        "(tag_key IS NULL) = (tags IS NULL)", name="topic_subscriptions_filter_check"
    ),
    sa.Index("topic_subscriptions_queue_idx", "queue_id"),
)

# Periodic (cron) jobs (migration 0015, docs/concepts.md "Periodic jobs"). The target queue is
# named, not referenced: a job whose queue is missing skips its ticks (last_error says why).
periodic_jobs = sa.Table(
    "periodic_jobs",
    metadata,
    sa.Column(
        "namespace",
        sa.Text,
        sa.ForeignKey("namespaces.name", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("schedule", sa.Text, nullable=False),
    sa.Column("timezone", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("payload", pg.JSONB, nullable=False, server_default=sa.text("'null'::jsonb")),
    sa.Column("metadata", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("priority", sa.BigInteger),
    sa.Column("ttl_seconds", sa.Integer),
    sa.Column("max_attempts", sa.Integer),
    sa.Column("lease_seconds", sa.Integer),
    sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
    # The tick the job fires next; the leader fires it once now() reaches it.
    sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=False),
    # The tick of the last firing, the id of the message it enqueued, and why it enqueued none.
    sa.Column("last_run_at", sa.DateTime(timezone=True)),
    sa.Column("last_message_id", sa.Text),
    sa.Column("last_error", sa.Text),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Index("periodic_jobs_due_idx", "next_run_at", postgresql_where=sa.text("NOT paused")),
)
