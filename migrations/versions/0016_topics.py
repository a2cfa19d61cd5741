"""Schema for fan-out topics and subscriptions.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

A topic (docs/concepts.md, "Topics") belongs to a namespace and names the queues of that
namespace subscribed to it: publishing to the topic enqueues each message into every subscribed
queue in one transaction (a RocketMQ consumer group is one subscribed queue). A subscription may
carry a tag filter: the values of one metadata key it accepts (RocketMQ's ``"A || B"``).

- ``topics``: keyed by (namespace, name), no surrogate id, so that a namespace moving to another
  pool takes its topics along as they are;
- ``topic_subscriptions``: (namespace, topic) and the subscribed queue's id; deleting the topic
  or the queue deletes the subscription.

Subscriptions are part of the catalogue (migration 0006): every change to them, and to a topic,
counts the catalogue version up, so that a publish prepared from subscriptions read before an
(un)subscribe commits applies nothing and is run again (docs/adr/0011). Unlike the other
catalogue tables an INSERT counts too: a new subscription changes what a topic already known
reaches.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the tables and their catalogue triggers."""
    op.execute(
        """
        CREATE TABLE topics (
            namespace  text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
            name       text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, name)
        );

        CREATE TABLE topic_subscriptions (
            namespace  text NOT NULL,
            topic      text NOT NULL,
            queue_id   bigint NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
            -- The tag filter: the message's metadata[tag_key] must be one of tags.
            tag_key    text,
            tags       text[],
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, topic, queue_id),
            FOREIGN KEY (namespace, topic) REFERENCES topics (namespace, name) ON DELETE CASCADE,
            CONSTRAINT topic_subscriptions_filter_check CHECK ((tag_key IS NULL) = (tags IS NULL))
        );
        CREATE INDEX topic_subscriptions_queue_idx ON topic_subscriptions (queue_id);

        CREATE TRIGGER topics_catalogue_changed
        AFTER UPDATE OR DELETE ON topics
        FOR EACH ROW EXECUTE FUNCTION sundial_catalogue_changed();
        CREATE TRIGGER topics_catalogue_truncated
        AFTER TRUNCATE ON topics
        FOR EACH STATEMENT EXECUTE FUNCTION sundial_catalogue_changed();
        CREATE TRIGGER topic_subscriptions_catalogue_changed
        AFTER INSERT OR UPDATE OR DELETE ON topic_subscriptions
        FOR EACH STATEMENT EXECUTE FUNCTION sundial_catalogue_changed();
        CREATE TRIGGER topic_subscriptions_catalogue_truncated
        AFTER TRUNCATE ON topic_subscriptions
        FOR EACH STATEMENT EXECUTE FUNCTION sundial_catalogue_changed();
        """
    )


def downgrade() -> None:
    """Drop the tables (their triggers go with them)."""
    op.execute("DROP TABLE topic_subscriptions; DROP TABLE topics;")
