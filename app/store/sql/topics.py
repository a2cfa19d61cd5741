"""Fan-out topics (migration 0016): topics and their subscriptions read with the subscribed
queues, changed, and the lock a publish holds on its topic.

A publish (:meth:`app.store.topics.TopicStore.publish`) is one transaction: :data:`TOPIC_LOCK`,
then the ordinary enqueue statement (:mod:`app.store.sql.enqueue`) once per subscribed queue,
each carrying the catalogue guard of the version the subscriptions were read at. Every change to
a topic's subscriptions updates the topic row (so it waits for the publishes holding it, and
later ones wait for it) and counts the catalogue version up (triggers), so a publish reaches
exactly the queues subscribed when it commits.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import TextClause, text

from app.store.sql.catalogue import NAMESPACE_IS_ACTIVE
from app.store.sql.guards import CATALOGUE_IS_CURRENT

# A namespace's topics (or one, :name not NULL), each with a row per subscription and the
# subscribed queue's columns (NULLs for a topic without any), the catalogue version and the
# namespace's state, ordered by topic then queue name.
TOPICS_GET: Final[TextClause] = text(
    """
    SELECT t.namespace AS topic_namespace, t.name AS topic_name,
           t.created_at AS topic_created_at, t.updated_at AS topic_updated_at,
           s.tag_key, s.tags, s.created_at AS subscribed_at, q.*,
           v.version AS catalogue_version, n.state AS namespace_state
    FROM topics t
    JOIN namespaces n ON n.name = t.namespace
    CROSS JOIN catalogue_version v
    LEFT JOIN topic_subscriptions s ON s.namespace = t.namespace AND s.topic = t.name
    LEFT JOIN queues q ON q.id = s.queue_id
    WHERE t.namespace = :namespace
      AND (CAST(:name AS text) IS NULL OR t.name = CAST(:name AS text))
    ORDER BY t.name, q.name
    """
)

# The topic made (or, when it exists, touched: the update waits for the publishes that hold it
# and counts the catalogue version up) with exactly the subscriptions of :subscriptions, a JSON
# array of {queue_id, tag_key, tags}: the others deleted, these inserted or their filter set.
# One statement, so the set is replaced whole. No row when the namespace is not active here.
TOPIC_PUT: Final[TextClause] = text(
    f"""
    WITH topic AS (
        INSERT INTO topics (namespace, name)
        SELECT :namespace, :name
        WHERE {NAMESPACE_IS_ACTIVE.format(":namespace")}
        ON CONFLICT (namespace, name) DO UPDATE SET updated_at = now()
        RETURNING namespace, name, (xmax = 0) AS created
    ),
    wanted AS (
        SELECT * FROM json_to_recordset(CAST(:subscriptions AS json))
                      AS w(queue_id bigint, tag_key text, tags text[])
    ),
    dropped AS (
        DELETE FROM topic_subscriptions s USING topic t
        WHERE s.namespace = t.namespace AND s.topic = t.name
          AND s.queue_id NOT IN (SELECT queue_id FROM wanted)
    ),
    kept AS (
        INSERT INTO topic_subscriptions (namespace, topic, queue_id, tag_key, tags)
        SELECT t.namespace, t.name, w.queue_id, w.tag_key, w.tags FROM topic t CROSS JOIN wanted w
        ON CONFLICT (namespace, topic, queue_id) DO UPDATE
            SET tag_key = EXCLUDED.tag_key, tags = EXCLUDED.tags
    )
    SELECT created FROM topic
    """
)

# One subscription made (the topic too, when it does not exist) or its filter set, the topic
# touched as by TOPIC_PUT. ``created``: the subscription is new. No row when the namespace is
# not active here.
SUBSCRIPTION_PUT: Final[TextClause] = text(
    f"""
    WITH topic AS (
        INSERT INTO topics (namespace, name)
        SELECT :namespace, :topic
        WHERE {NAMESPACE_IS_ACTIVE.format(":namespace")}
        ON CONFLICT (namespace, name) DO UPDATE SET updated_at = now()
        RETURNING namespace, name
    )
    INSERT INTO topic_subscriptions (namespace, topic, queue_id, tag_key, tags)
    SELECT t.namespace, t.name, :queue_id, :tag_key, CAST(:tags AS text[]) FROM topic t
    ON CONFLICT (namespace, topic, queue_id) DO UPDATE
        SET tag_key = EXCLUDED.tag_key, tags = EXCLUDED.tags
    RETURNING (xmax = 0) AS created
    """
)

# One subscription deleted, the topic touched as by TOPIC_PUT. A row when it existed; when it
# did not, nothing is touched (the catalogue version stays).
SUBSCRIPTION_DELETE: Final[TextClause] = text(
    f"""
    WITH topic AS (
        UPDATE topics SET updated_at = now()
        WHERE namespace = :namespace AND name = :topic
          AND {NAMESPACE_IS_ACTIVE.format(":namespace")}
          AND EXISTS (SELECT 1 FROM topic_subscriptions
                      WHERE namespace = :namespace AND topic = :topic AND queue_id = :queue_id)
        RETURNING namespace, name
    )
    DELETE FROM topic_subscriptions s USING topic t
    WHERE s.namespace = t.namespace AND s.topic = t.name AND s.queue_id = :queue_id
    RETURNING s.queue_id
    """
)

# A topic deleted with its subscriptions (not its queues). A row when it existed.
TOPIC_DELETE: Final[TextClause] = text(
    f"""
    DELETE FROM topics
    WHERE namespace = :namespace AND name = :name AND {NAMESPACE_IS_ACTIVE.format(":namespace")}
    RETURNING name
    """
)

# The first statement of a publish's transaction: the topic row held (FOR SHARE) until the
# publish commits, so that no change to its subscriptions commits in between (each updates
# the row). The enqueue statements that follow start after it holds the row, so their
# catalogue guard sees any change committed before: a publish applies to exactly the
# subscriptions current at its commit.
TOPIC_LOCK: Final[TextClause] = text(
    f"""
    SELECT 1 FROM topics
    WHERE namespace = :namespace AND name = :name AND {CATALOGUE_IS_CURRENT}
    FOR SHARE
    """
)
