"""The claim (dequeue): leases on the best ready messages of a queue, and on its due ones.

Its states are not bound but written into the text, from :data:`app.core.states.CLAIM`, when a
variant is built: PostgreSQL uses a partial index such as ``messages_pending_idx (…) WHERE state =
'pending'`` only for a condition it can prove from the statement's text, so the claim names its
sources as literals, and the literals come from the state machine (tests/store/test_claim_states.py
holds them to the migrations' index predicates; tests/store/golden/ holds every compiled variant).
"""

from __future__ import annotations

from sqlalchemy import TextClause, text

from app.core.states import CLAIM
from app.core.validation import MAX_BATCH_DEQUEUE
from app.store.sql.guards import CATALOGUE_IS_CURRENT

# Grant leases on up to `count` messages, lowest priority first, ties by enqueue order.
# Two sources, each locked with FOR UPDATE SKIP LOCKED so concurrent consumers pass over rows
# another claim holds instead of waiting:
#   ready: walks messages_pending_idx (queue_id, priority, seq) WHERE state = 'pending' in order;
#   due:   invisible messages whose visible_at has passed but that the scheduler has not
#          promoted yet (found through messages_invisible_idx; few, so ranking them by
#          priority is cheap), so a due message never waits for its tick.
# MATERIALIZED fences the candidate set: the ranking runs once, not once per updated row.
#
# ``match`` holds the filter's conditions, written only when there is a filter (see
# messages_claim). A metadata filter is tested row by row on the walk, which is cheap while
# matches are common but walks past every non-matching message ahead of a rare value's first
# match. When the filter names the queue's filter_key, ``filter_value = :filter_value`` makes the
# ready source walk messages_filter_pending_idx (queue_id, filter_value, priority, seq), which
# holds exactly that value's ready messages in order, and stop at the first unlocked ones.
_KEYED = "AND filter_value = CAST(:filter_value AS text)"
_FILTERED = "AND metadata @> CAST(:filter AS jsonb)"


def _claim_simple(match: str, count: int) -> str:
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE queue_id = :queue_id AND state = '{CLAIM.ready}' {match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT {count}
        FOR UPDATE SKIP LOCKED
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq FROM messages
        WHERE state = '{CLAIM.due}' AND visible_at <= now() AND queue_id = :queue_id {match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY priority, seq
        LIMIT {count}
        FOR UPDATE SKIP LOCKED
    ) AS due
),
picked AS (
    SELECT id, 0 AS scanned FROM candidate ORDER BY priority, seq LIMIT {count}
)
"""


# Exclusive queues add two rules: skip messages whose exclusive value already has a running
# message (NOT EXISTS probes messages_running_exclusive_uidx), and take at most one message per
# value from this batch (DISTINCT ON). Two consumers racing for the same idle value can still both
# pass NOT EXISTS; the partial unique index then refuses the second UPDATE (unique_violation) and
# the store retries the claim. The index, not this query, is what guarantees exclusivity.
# Each source looks at `scan` candidates only; when they share fewer values than `count`, the
# batch comes back short although other values may wait further on. Every leased row therefore
# carries ``scanned``, the candidates looked at: when it reached `scan` the store claims again for
# the rest (the values just leased are running by then, so NOT EXISTS passes over them).
#
# A claim locks only what it leases, so that concurrent claims share the idle values:
# - the candidates are read, not locked: a claim that row-locked its whole window would hide
#   the first message of every value in it from the others, which would then lease a later
#   message of such a value, out of order, or nothing at all;
# - the values are taken best first, and only while fewer than `count` messages are (the LIMIT
#   stops asking for rows): each with a non-blocking advisory lock (one that fails takes
#   nothing), so that another claim skips a value being leased instead of queueing behind it on
#   the unique index (two claims taking two values in opposite orders would deadlock there);
# - then the value's message is locked (FOR UPDATE SKIP LOCKED), which re-reads it at its newest
#   version: one that another claim leased and committed since this statement's snapshot is no
#   longer ready and is passed over, and no claim waits for another's rows.
def _claim_exclusive(match: str, count: int, scan: int) -> str:
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT id, priority, seq, exclusive_value FROM messages c
        WHERE queue_id = :queue_id AND state = '{CLAIM.ready}' {match}
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = :queue_id AND r.state = '{CLAIM.leased}'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY priority, seq
        LIMIT {scan}
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, seq, exclusive_value FROM messages c
        WHERE state = '{CLAIM.due}' AND visible_at <= now() AND queue_id = :queue_id {match}
          AND (expires_at IS NULL OR expires_at > now())
          AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = :queue_id AND r.state = '{CLAIM.leased}'
                AND r.exclusive_value = c.exclusive_value)
        ORDER BY priority, seq
        LIMIT {scan}
    ) AS due
),
one_per_value AS (
    SELECT DISTINCT ON (exclusive_value) id, priority, seq, exclusive_value FROM candidate
    ORDER BY exclusive_value, priority, seq
),
-- MATERIALIZED keeps the locks below out of this sort: PostgreSQL would otherwise push the
-- advisory lock into it and try it on every value before sorting.
best_first AS MATERIALIZED (
    SELECT id, priority, seq, exclusive_value FROM one_per_value ORDER BY priority, seq
),
picked AS (
    -- A nested loop over best_first, in its order, that the LIMIT stops at `count` rows: each
    -- value's advisory lock is tried, then its message locked, only while more are wanted.
    SELECT best_first.id, (SELECT count(*) FROM candidate) AS scanned
    FROM best_first
    CROSS JOIN LATERAL (
        SELECT 1 FROM messages m
        WHERE m.queue_id = :queue_id AND m.id = best_first.id
          AND (m.state = '{CLAIM.ready}' OR (m.state = '{CLAIM.due}' AND m.visible_at <= now()))
          AND (m.expires_at IS NULL OR m.expires_at > now())
        FOR UPDATE SKIP LOCKED
    ) AS still_ready
    WHERE pg_try_advisory_xact_lock(
        hashtextextended(CAST(:queue_id AS text) || '/' || best_first.exclusive_value, 0))
    LIMIT {count}
)
"""


# The lease: attempts + 1, a fresh random lease_id (the fencing token), and an expiry from the
# request's lease_seconds, else the message's override, else the queue's default.
_GRANT = f"""
UPDATE messages m
SET state = '{CLAIM.leased}',
    attempts = m.attempts + 1,
    lease_id = gen_random_uuid(),
    lease_expires_at = now() + make_interval(
        secs => coalesce(CAST(:lease_override AS integer), m.lease_seconds,
                         CAST(:queue_lease AS integer))),
    leased_at = now(),
    first_leased_at = coalesce(m.first_leased_at, now()),
    updated_at = now()
FROM picked
WHERE m.queue_id = :queue_id AND m.id = picked.id AND {CATALOGUE_IS_CURRENT}
RETURNING m.id, m.lease_id::text AS lease_id, m.lease_expires_at, m.attempts, m.priority,
          m.seq, m.payload::text AS payload, m.metadata, m.enqueued_at, m.first_leased_at,
          picked.scanned
"""


def exclusive_scan(count: int) -> int:
    """How many candidates an exclusive claim of ``count`` looks at: 4 per wanted message, as
    several may share a value, and at most 400."""
    return min(count * 4, 400)


def messages_claim(
    *, count: int, exclusive: bool = False, keyed: bool = False, filtered: bool = False
) -> TextClause:
    """The claim of up to ``count`` ready or due messages of a simple or an exclusive queue.

    ``keyed``: the filter names the queue's filter_key (binds ``:filter_value``); ``filtered``:
    the filter has pairs beyond that (binds ``:filter``, the whole filter). A filter of the key
    alone needs no ``metadata @>`` test: the filter value is that key's value.

    ``count`` is written into the text as a literal, not bound, and a claim without a filter
    has no filter condition at all: PostgreSQL then plans each variant once per connection and
    reuses the plan. With ``LIMIT $n`` it estimates the LIMIT at a tenth of the table, with
    ``metadata @> $filter`` a fixed selectivity; either makes the generic plan look far dearer
    than a custom one, so it planned the claim again on every execution, which cost more
    database CPU than running it (0.49 -> 0.22 ms per claim, docs/adr/0009-claim-plans.md).
    The counts a consumer uses are few; claims with a filter beyond the key stay custom-planned.
    """
    if not (isinstance(count, int) and 1 <= count <= MAX_BATCH_DEQUEUE):
        raise ValueError(f"claim count must be an integer from 1 to {MAX_BATCH_DEQUEUE}: {count!r}")
    match = " ".join(condition for on, condition in ((keyed, _KEYED), (filtered, _FILTERED)) if on)
    if exclusive:
        return text(_claim_exclusive(match, count, exclusive_scan(count)) + _GRANT)
    return text(_claim_simple(match, count) + _GRANT)
