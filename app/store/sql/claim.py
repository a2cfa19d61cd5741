"""The claim (dequeue): leases on the best ready messages of a queue, and on its due ones.

Its states are not bound but written into the text, from :data:`app.core.states.CLAIM`, when a
variant is built: PostgreSQL uses a partial index such as ``messages_pending_idx (…) WHERE state =
'pending'`` only for a condition it can prove from the statement's text, so the claim names its
sources as literals, and the literals come from the state machine (tests/store/test_claim_states.py
holds them to the migrations' index predicates; tests/store/golden/ holds every compiled variant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from sqlalchemy import TextClause, text

from app.core.states import CLAIM
from app.core.validation import MAX_BATCH_DEQUEUE
from app.store.sql.guards import CATALOGUE_IS_CURRENT

Match = bool | Literal["any"]
"""How a claim matches a filter's part: not at all (False), one value (True), any of a list."""

# Grant leases on up to `count` messages, lowest priority first, ties by enqueue order (a queue
# with ordering 'due': earliest visible_at first, then priority, then enqueue order).
# Two sources, each locked with FOR UPDATE SKIP LOCKED so concurrent consumers pass over rows
# another claim holds instead of waiting:
#   ready: walks messages_pending_idx (queue_id, priority, seq) WHERE state = 'pending' in order
#          (ordering 'due': messages_pending_visible_idx (queue_id, visible_at, priority, seq));
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
# holds exactly that value's ready messages in order, and stop at the first unlocked ones. A
# filter naming the queue's second filter key (and not the first) does the same on
# ``filter_value_2`` and messages_filter_2_pending_idx. ``{column}`` is the one the filter takes.
_KEYED = "AND {column} = CAST(:filter_value AS text)"
_FILTERED = "AND metadata @> CAST(:filter AS jsonb)"
# A filter whose filter_key pair is a list ("any of"): the due source (few rows) tests each
# row's value against the list. The ready source of a priority-ordered queue does not: it walks
# the index once per value (_keyed_walk).
_KEYED_ANY = "AND {column} = ANY(CAST(:filter_values AS text[]))"
# A filter with lists beyond the filter_key: :filters holds every combination of the pairs'
# values (validation.dequeue_filter bounds them), and a row matches when it holds one.
_FILTERED_ANY = "AND metadata @> ANY(CAST(:filters AS jsonb[]))"

_PRIORITY_ORDER = "priority, seq"
_DUE_ORDER = "visible_at, priority, seq"


@dataclass(frozen=True, slots=True)
class _Variant:
    """The parts of the text one claim variant is built from."""

    keyed: Match
    filtered: Match
    due: bool
    second_key: bool

    @property
    def column(self) -> str:
        """The indexed column the filter's key match reads."""
        return "filter_value_2" if self.second_key else "filter_value"

    @property
    def order(self) -> str:
        return _DUE_ORDER if self.due else _PRIORITY_ORDER

    @property
    def columns(self) -> str:
        return "id, visible_at, priority, seq" if self.due else "id, priority, seq"

    @property
    def walks_per_value(self) -> bool:
        """The ready source walks messages_filter_pending_idx once per listed value, merging
        the walks: the index is in (priority, seq) order, which a due-ordered queue's claim
        cannot use."""
        return self.keyed == "any" and not self.due

    def match(self, *, source: Literal["ready", "due"]) -> str:
        """The filter's conditions on a source's rows (the per-value walk matches the key
        itself)."""
        keyed = {False: "", True: _KEYED, "any": _KEYED_ANY}[self.keyed].format(column=self.column)
        if source == "ready" and self.walks_per_value:
            keyed = ""
        filtered = {False: "", True: _FILTERED, "any": _FILTERED_ANY}[self.filtered]
        return " ".join(condition for condition in (keyed, filtered) if condition)


# The ready source of a filter listing several values of the queue's filter_key (priority
# order): one walk of messages_filter_pending_idx per value, each stopping at its first `limit`
# matches in (priority, seq) order, so the claim costs what one keyed claim per value does,
# whatever the backlog. The caller merges the walks by priority, seq. The simple claim locks in
# each walk (FOR UPDATE SKIP LOCKED, passing over rows other claims hold), so a walk never
# comes back short while its value has unlocked messages; the rows locked but not leased (at
# most count per value beyond the first) are released when the claim's statement commits.
# The list is read through a scalar subquery so that the planner never sees its length: a plan
# made for three values would look far cheaper than the generic one, which cannot know it, and
# the claim would be planned again on every execution (docs/adr/0009-claim-plans.md).
def _keyed_walk(select: str, column: str, where: str, tail: str) -> str:
    match = f"AND {column} = wanted.value {where}"
    return f"""SELECT walk.* FROM unnest((SELECT CAST(:filter_values AS text[]))) AS wanted(value)
        CROSS JOIN LATERAL (
            {select}
            WHERE queue_id = :queue_id AND state = '{CLAIM.ready}' {match}
            {tail}
        ) AS walk"""


def _claim_simple(variant: _Variant, count: int) -> str:
    match, order, columns = variant.match(source="ready"), variant.order, variant.columns
    due_match = variant.match(source="due")
    if variant.walks_per_value:
        ready = _keyed_walk(
            f"SELECT {columns} FROM messages",
            variant.column,
            match,
            f"""  AND (expires_at IS NULL OR expires_at > now())
            ORDER BY {order}
            LIMIT {count}
            FOR UPDATE SKIP LOCKED""",
        )
    else:
        ready = f"""SELECT {columns} FROM messages
        WHERE queue_id = :queue_id AND state = '{CLAIM.ready}' {match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY {order}
        LIMIT {count}
        FOR UPDATE SKIP LOCKED"""
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        {ready}
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT {columns} FROM messages
        WHERE state = '{CLAIM.due}' AND visible_at <= now() AND queue_id = :queue_id {due_match}
          AND (expires_at IS NULL OR expires_at > now())
        ORDER BY {order}
        LIMIT {count}
        FOR UPDATE SKIP LOCKED
    ) AS due
),
picked AS (
    SELECT id, 0 AS scanned FROM candidate ORDER BY {order} LIMIT {count}
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
# A filter listing several filter_key values walks each value's first `scan` candidates and
# keeps the best `scan` of them all, so the window means what it means for one value.
NOT_RUNNING: Final = f"""AND NOT EXISTS (
              SELECT 1 FROM messages r
              WHERE r.queue_id = :queue_id AND r.state = '{CLAIM.leased}'
                AND r.exclusive_value = c.exclusive_value)"""


def ready_now(alias: str) -> str:
    """The condition that the message ``alias`` may be leased now: ready, or invisible and due,
    and not expired (read on its newest version when the row is locked)."""
    ready, due = f"{alias}.state = '{CLAIM.ready}'", f"{alias}.state = '{CLAIM.due}'"
    return f"""({ready} OR ({due} AND {alias}.visible_at <= now()))
          AND ({alias}.expires_at IS NULL OR {alias}.expires_at > now())"""


def _claim_exclusive(variant: _Variant, count: int, scan: int) -> str:
    match, due_match, order = (
        variant.match(source="ready"),
        variant.match(source="due"),
        variant.order,
    )
    columns = f"{variant.columns}, exclusive_value"
    if variant.walks_per_value:
        ready = (
            _keyed_walk(
                f"SELECT {columns} FROM messages c",
                variant.column,
                match,
                f"""  AND (expires_at IS NULL OR expires_at > now())
              {NOT_RUNNING.replace(chr(10), chr(10) + "    ")}
            ORDER BY {order}
            LIMIT {scan}""",
            )
            + f"""
        ORDER BY {order}
        LIMIT {scan}"""
        )
    else:
        ready = f"""SELECT {columns} FROM messages c
        WHERE queue_id = :queue_id AND state = '{CLAIM.ready}' {match}
          AND (expires_at IS NULL OR expires_at > now())
          {NOT_RUNNING}
        ORDER BY {order}
        LIMIT {scan}"""
    return f"""
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        {ready}
    ) AS ready
    UNION ALL
    SELECT * FROM (
        SELECT {columns} FROM messages c
        WHERE state = '{CLAIM.due}' AND visible_at <= now() AND queue_id = :queue_id {due_match}
          AND (expires_at IS NULL OR expires_at > now())
          {NOT_RUNNING}
        ORDER BY {order}
        LIMIT {scan}
    ) AS due
),
one_per_value AS (
    SELECT DISTINCT ON (exclusive_value) {columns} FROM candidate
    ORDER BY exclusive_value, {order}
),
-- MATERIALIZED keeps the locks below out of this sort: PostgreSQL would otherwise push the
-- advisory lock into it and try it on every value before sorting.
best_first AS MATERIALIZED (
    SELECT {columns} FROM one_per_value ORDER BY {order}
),
picked AS (
    -- A nested loop over best_first, in its order, that the LIMIT stops at `count` rows: each
    -- value's advisory lock is tried, then its message locked, only while more are wanted.
    SELECT best_first.id, (SELECT count(*) FROM candidate) AS scanned
    FROM best_first
    CROSS JOIN LATERAL (
        SELECT 1 FROM messages m
        WHERE m.queue_id = :queue_id AND m.id = best_first.id
          AND {ready_now("m")}
        FOR UPDATE SKIP LOCKED
    ) AS still_ready
    WHERE pg_try_advisory_xact_lock(
        hashtextextended(CAST(:queue_id AS text) || '/' || best_first.exclusive_value, 0))
    LIMIT {count}
)
"""


# The lease: attempts + 1, a fresh random lease_id (the fencing token), and an expiry from the
# request's lease_seconds, else the message's override, else the queue's default. It returns
# what the consumer's answer tells (how long the message waited, its TTL, its tries left) and
# visible_at, which a due-ordered queue's leased messages are ordered by. Lease by id
# (app/store/sql/lease_by_id.py) grants its lease with the same text after its own ``picked``.
LEASE_GRANT: Final = f"""
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
          picked.scanned, m.leased_at, m.visible_at, m.expires_at, m.max_attempts
"""


def exclusive_scan(count: int) -> int:
    """How many candidates an exclusive claim of ``count`` looks at: 4 per wanted message, as
    several may share a value, and at most 400."""
    return min(count * 4, 400)


def messages_claim(
    *,
    count: int,
    exclusive: bool = False,
    keyed: Match = False,
    filtered: Match = False,
    due: bool = False,
    second_key: bool = False,
) -> TextClause:
    """The claim of up to ``count`` ready or due messages of a simple or an exclusive queue.

    ``keyed``: the filter names the queue's filter_key, with one value (True; binds
    ``:filter_value``) or a list of them ("any"; binds ``:filter_values``, a text array);
    ``filtered``: the filter has pairs beyond that, all with one value (True; binds ``:filter``,
    the whole filter) or some with lists ("any"; binds ``:filters``, every combination of the
    other pairs' values as JSON objects, a text array). A filter of the key alone needs no
    ``metadata`` test: the filter value is that key's value. ``due``: the queue's ordering is
    ``due`` (visible_at, then priority, then enqueue order). ``second_key``: the key ``keyed``
    matches is the queue's second filter key (``filter_value_2`` and its index).

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
    if second_key and keyed is False:
        raise ValueError("a claim on the second filter key needs a key match (keyed)")
    variant = _Variant(keyed=keyed, filtered=filtered, due=due, second_key=second_key)
    if exclusive:
        return text(_claim_exclusive(variant, count, exclusive_scan(count)) + LEASE_GRANT)
    return text(_claim_simple(variant, count) + LEASE_GRANT)
