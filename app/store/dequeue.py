"""The claim's part of the store: :meth:`DequeueStore.dequeue` leases up to ``count`` messages
with one statement of :mod:`app.store.sql.claim`, compiled once per variant and count
(:func:`claim_sql`); on an exclusive queue, in rounds until the batch is full, and again when
another consumer wins the race for an exclusive value. Concurrent dequeues of a queue in a
process share claims (:mod:`app.store.coalesce`)."""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import msgspec
from psycopg import errors as pg_errors

from app.core.errors import UnavailableError
from app.core.models import FilterValue, LeasedMessage, Queue
from app.core.validation import MAX_BATCH_DEQUEUE
from app.store.coalesce import StatementJoiner
from app.store.errors import is_unique_violation, retry_transient
from app.store.paths import StorePaths, driver_sql
from app.store.rows import queue_guard
from app.store.sql.claim import Match, exclusive_scan, messages_claim
from app.store.sql.due import MESSAGES_NEXT_DUE, MESSAGES_NEXT_DUE_ANY, NEXT_DUE_SCAN

log = logging.getLogger("sundial.store")

# How often a dequeue on an exclusive queue is retried after losing a race for an exclusive
# value (unique_violation on messages_running_exclusive_uidx).
EXCLUSIVE_CLAIM_RETRIES = 20

_json = msgspec.json.Encoder()
_NEXT_DUE = driver_sql(MESSAGES_NEXT_DUE)
_NEXT_DUE_ANY = driver_sql(MESSAGES_NEXT_DUE_ANY)


@functools.cache
def claim_sql(
    count: int,
    *,
    exclusive: bool,
    keyed: Match,
    filtered: Match,
    due: bool = False,
    second_key: bool = False,
) -> LiteralString:
    """A claim statement as the driver runs it, compiled once per variant and count
    (tests/store/golden/ holds what it compiles to)."""
    claim = messages_claim(
        count=count,
        exclusive=exclusive,
        keyed=keyed,
        filtered=filtered,
        due=due,
        second_key=second_key,
    )
    return driver_sql(claim)


@dataclass(frozen=True, slots=True)
class _FilterVariant:
    """How a claim matches a dequeue's metadata filter (:func:`messages_claim`'s arguments)."""

    keyed: Match = False
    filtered: Match = False
    second_key: bool = False


def _filter_params(
    filter_keys: Sequence[str], metadata: Mapping[str, FilterValue], params: dict[str, Any]
) -> _FilterVariant:
    """The claim variant a dequeue's metadata filter takes, its parameters added to
    ``params``. A pair on one of the queue's indexed keys (the first the filter names, in the
    queue's order) takes the index of that key's values (one value, or any of a list); the
    other pairs are tested on the rows it reads: all of one value with ``metadata @> filter`` as
    before, any list with ``metadata @> ANY`` of every combination of their values."""
    key = next((k for k in filter_keys if k in metadata), None)
    value = metadata[key] if key is not None else None
    keyed: Match = False if value is None else True if isinstance(value, str) else "any"
    second = key is not None and key != filter_keys[0]
    if isinstance(value, str):
        params["filter_value"] = value
    elif value is not None:
        params["filter_values"] = list(value)
    others = {k: v for k, v in metadata.items() if keyed is False or k != key}
    if not others:
        return _FilterVariant(keyed, False, second)
    if all(isinstance(v, str) for v in others.values()):
        # The whole filter (the key's single value too, as before: it matches anyway).
        whole = others if keyed == "any" else metadata
        params["filter"] = _json.encode(whole).decode()
        return _FilterVariant(keyed, True, second)
    params["filters"] = _filter_alternatives(others)
    return _FilterVariant(keyed, "any", second)


_UNFILTERED = _FilterVariant()


def _filter_alternatives(pairs: Mapping[str, FilterValue]) -> list[str]:
    """Every combination of a filter's values, one JSON object each: a row matches the filter
    when its metadata holds one of them (``metadata @> ANY``); validation.dequeue_filter bounds
    their number."""
    keys = list(pairs)
    choices = [(value,) if isinstance(value, str) else value for value in pairs.values()]
    return [
        _json.encode(dict(zip(keys, values, strict=True))).decode()
        for values in itertools.product(*choices)
    ]


@dataclass(frozen=True, slots=True)
class _Claim:
    """One message a dequeue wants, with the lease and filter it asks for."""

    lease_seconds: int | None
    metadata: dict[str, FilterValue]


def leased_messages(rows: list[Any], queue: Queue) -> list[LeasedMessage]:
    """The claim's rows of ``queue`` as leased messages in the queue's order: lowest priority
    first, ties in enqueue order (ordering ``due``: earliest visible_at first, then so)."""
    if queue.config.ordering == "due":
        ordered = sorted(rows, key=lambda r: (r.visible_at, r.priority, r.seq))
    else:
        ordered = sorted(rows, key=lambda r: (r.priority, r.seq))
    return [
        LeasedMessage(
            id=r.id,
            lease_id=r.lease_id,
            lease_expires_at=r.lease_expires_at,
            attempt=r.attempts,
            priority=r.priority,
            payload=r.payload.encode(),
            metadata=r.metadata,
            enqueued_at=r.enqueued_at,
            first_leased_at=r.first_leased_at,
            seq=r.seq,
            leased_at=r.leased_at,
            visible_at=r.visible_at,
            expires_at=r.expires_at,
            max_attempts=r.max_attempts or queue.config.max_attempts,
        )
        for r in ordered
    ]


class DequeueStore(StorePaths):
    """The claim."""

    _joined_claims: StatementJoiner[_Claim, LeasedMessage | None] | None = None

    async def dequeue(
        self,
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
    ) -> list[LeasedMessage]:
        """Lease up to ``count`` messages (fewer, or none, when fewer are ready). Concurrent
        dequeues of a queue in this process with the same lease and filter share claims
        (:mod:`app.store.coalesce`), the best messages going to the first to ask."""
        if self._joined_claims is None:
            self._joined_claims = StatementJoiner(self._claim_joined, max_items=MAX_BATCH_DEQUEUE)
        wanted = _Claim(lease_seconds, dict(metadata))
        pairs = ((k, v if isinstance(v, str) else tuple(v)) for k, v in metadata.items())
        variant = (lease_seconds, tuple(sorted(pairs)))
        leased = await self._joined_claims.run(queue, [wanted] * count, queue_guard(queue), variant)
        return [message for message in leased if message is not None]

    async def _claim_joined(
        self, queue: Queue, wanted: Sequence[_Claim], guard: dict[str, Any]
    ) -> list[LeasedMessage | None]:
        """One claim for every message ``wanted`` (all with the same lease and filter): the
        leased messages in order, then None for each that found nothing."""
        first = wanted[0]
        leased: list[LeasedMessage | None] = [
            *await self._claim_now(queue, len(wanted), first.lease_seconds, first.metadata, guard)
        ]
        return leased + [None] * (len(wanted) - len(leased))

    @retry_transient
    async def _claim_now(
        self,
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
        guard: dict[str, Any],
    ) -> list[LeasedMessage]:
        if queue.config.kind != "exclusive":
            rows = await self._driver_rows(
                *self._claim(queue, count, lease_seconds, metadata, guard)
            )
        else:
            rows = await self._claim_exclusive(queue, count, lease_seconds, metadata, guard)
        return leased_messages(rows, queue)

    async def next_due_in(self, queue: Queue) -> float | None:
        """Seconds until the next delayed message of ``queue`` becomes visible (or a time to
        look again, at most :data:`~app.store.sql.due.NEXT_DUE_SCAN` entries away); None when
        it has none."""
        rows = await self._driver_rows(_NEXT_DUE, {"queue_id": queue.id, "scan": NEXT_DUE_SCAN})
        seconds = rows[0].seconds if rows else None
        return None if seconds is None else float(seconds)

    async def next_due_in_any(self, queues: Sequence[Queue]) -> float | None:
        """As :meth:`next_due_in`, for the next delayed message of any of ``queues`` (a
        consumer of several queues); one statement whatever their number."""
        params = {"queue_ids": [queue.id for queue in queues], "scan": NEXT_DUE_SCAN}
        rows = await self._driver_rows(_NEXT_DUE_ANY, params)
        seconds = rows[0].seconds if rows else None
        return None if seconds is None else float(seconds)

    @staticmethod
    def _claim(
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
        guard: Mapping[str, Any] | None = None,
    ) -> tuple[LiteralString, dict[str, Any]]:
        """The claim statement for this queue and request, and its parameters (``guard``: the
        catalogue guard it carries; default the current request's)."""
        params: dict[str, Any] = {
            **(queue_guard(queue) if guard is None else guard),
            "queue_id": queue.id,
            "lease_override": lease_seconds,
            "queue_lease": queue.config.lease_seconds,
        }
        variant = _UNFILTERED
        if metadata:  # most claims have no filter: nothing to encode
            variant = _filter_params(queue.config.filter_keys, metadata, params)
        statement = claim_sql(
            count,
            exclusive=queue.config.kind == "exclusive",
            keyed=variant.keyed,
            filtered=variant.filtered,
            due=queue.config.ordering == "due",
            second_key=variant.second_key,
        )
        return statement, params

    async def _claim_exclusive(
        self,
        queue: Queue,
        count: int,
        lease_seconds: int | None,
        metadata: Mapping[str, FilterValue],
        guard: dict[str, Any],
    ) -> list[Any]:
        """Claim on an exclusive queue, in rounds until the batch is full or nothing is left.

        A round looks at a window of candidates and leases one message per free value in it;
        when the window was full (``scanned`` reached ``scan``), values beyond it may be free,
        so the next round claims the rest. Each round commits: its leases stand even if a later
        round fails, and they are returned.
        """
        leased: list[Any] = []
        while len(leased) < count:
            wanted = count - len(leased)
            claim = self._claim(queue, wanted, lease_seconds, metadata, guard)
            try:
                rows = await self._claim_exclusive_round(queue, *claim)
            except UnavailableError:
                if not leased:
                    raise
                log.warning("exclusive claim round failed; returning %d leases", len(leased))
                break
            leased.extend(rows)
            if not rows or rows[0].scanned < exclusive_scan(wanted):
                break  # nothing more to take, or every candidate was seen
        return leased

    async def _claim_exclusive_round(
        self, queue: Queue, statement: LiteralString, params: Mapping[str, Any]
    ) -> list[Any]:
        for attempt in range(EXCLUSIVE_CLAIM_RETRIES):
            try:
                return await self._driver_rows(statement, params)
            except pg_errors.UniqueViolation as error:
                # Lost a race for an exclusive value to another consumer: the unique index
                # refused the second lease, nothing was changed; claim again.
                if not is_unique_violation(error, "messages_running_exclusive_uidx"):
                    raise
                log.debug("exclusive claim race on queue %s (attempt %d)", queue.id, attempt + 1)
        return []
