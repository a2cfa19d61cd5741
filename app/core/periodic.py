"""Periodic (cron) jobs: the rules, with no database and no clock of their own.

A periodic job enqueues a message built from its template into a queue of its namespace at
every tick of its cron schedule, evaluated in its IANA time zone. The scheduler's leader fires
the jobs that are due (``app/store/periodic_firing.py``); these functions decide, from the
database's ``now()``, which tick a firing stands for, when the next one is and the message id
of a tick:

- **schedule**: a standard 5-field cron expression (minute hour day-of-month month
  day-of-week, with names, ranges, steps and lists; ``L`` and ``#`` as cronsim reads them) or
  one of :data:`ALIASES`. Cron arithmetic is cronsim's (a library), never ours.
- **catch-up**: a job found due at ``now`` fires once, for the most recent tick at or before
  ``now``, and then waits for the first tick after ``now``; older ticks missed while no
  scheduler ran are skipped (:func:`due_tick`).
- **message id**: ``cron:<job>:<tick in UTC as 20261127T101500Z>`` (:func:`tick_message_id`),
  so a tick has one id: enqueue of an id that exists creates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from app.core import validation
from app.core.errors import ValidationError

ALIASES: Mapping[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The ``@`` shorthands accepted for a schedule, and the 5-field expressions they stand for."""

MAX_SCHEDULE = 256
"""The longest schedule text accepted."""

JOB_ID_PREFIX = "cron"
"""Message ids of a job's ticks begin ``cron:<job>:``."""

_ONE_MICROSECOND = timedelta(microseconds=1)
_CHECKED_FROM = datetime(2000, 1, 1, tzinfo=UTC)
"""Where a schedule is checked from: it must fire within 30 years of it."""


@dataclass(frozen=True, slots=True)
class MessageTemplate:
    """What each firing enqueues: ``None`` means the target queue's default."""

    payload: bytes | None = None
    """The payload as JSON text (``null`` when absent)."""
    metadata: dict[str, str] = field(default_factory=dict)
    priority: int | None = None
    ttl_seconds: int | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class PeriodicSpec:
    """A periodic job as its owner writes it (``PUT``)."""

    queue: str
    schedule: str
    timezone: str = "UTC"
    template: MessageTemplate = field(default_factory=MessageTemplate)
    paused: bool = False


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    """A stored periodic job."""

    namespace: str
    name: str
    spec: PeriodicSpec
    next_run_at: datetime
    """The tick the job fires next (while paused, the tick it would fire next)."""
    last_run_at: datetime | None
    """The tick of the last firing (scheduled time, not the moment it ran)."""
    last_message_id: str | None
    """The id of the message the last firing enqueued (``None`` if it enqueued none)."""
    last_error: str | None
    """Why the last firing enqueued nothing (its queue missing or paused), else ``None``."""
    created_at: datetime
    updated_at: datetime


_SPEC_FIELDS = ("queue", "schedule", "timezone", "paused")
_TEMPLATE_FIELDS = (
    "payload",
    "metadata",
    "priority",
    "ttl_seconds",
    "max_attempts",
    "lease_seconds",
)
PERIODIC_FIELDS = frozenset((*_SPEC_FIELDS, *_TEMPLATE_FIELDS))
"""The fields a PATCH of a periodic job may change."""


def schedule(field_name: str, value: str) -> str:
    """A 5-field cron expression or an ``@`` alias, as the job keeps it (whitespace
    normalised, aliases kept as written); ValidationError naming ``field_name`` otherwise."""
    validation.text(field_name, value, MAX_SCHEDULE)
    expression = _expression(value)
    fields = expression.split()
    if len(fields) != 5:
        raise ValidationError(
            field_name,
            "must be a 5-field cron expression (minute hour day-of-month month day-of-week)"
            f" or one of {', '.join(ALIASES)}",
        )
    try:
        ticks = CronSim(" ".join(fields), _CHECKED_FROM)
    except CronSimError as error:
        raise ValidationError(field_name, f"is not a valid cron expression: {error}") from None
    if _never_fires(ticks):
        raise ValidationError(field_name, "never fires (no such date)")
    stripped = value.strip()
    return stripped.lower() if stripped.lower() in ALIASES else " ".join(fields)


def timezone(field_name: str, value: str) -> str:
    """An IANA time zone name (``UTC``, ``Europe/Paris``)."""
    validation.text(field_name, value, 64)
    try:
        if not value or value.startswith(("/", ".")) or ".." in value:
            raise ValueError(value)
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            field_name, "must be an IANA time zone name, e.g. UTC or Europe/Paris"
        ) from None
    return value


def template(tpl: MessageTemplate, limits: validation.Limits) -> MessageTemplate:
    """Check a message template with the rules of an enqueued message's fields."""
    if tpl.payload is not None:
        validation.payload("payload", tpl.payload, limits)
    validation.metadata("metadata", tpl.metadata)
    if tpl.priority is not None:
        validation.integer("priority", tpl.priority, validation.INT64_MIN, validation.INT64_MAX)
    if tpl.ttl_seconds is not None:
        validation.integer("ttl_seconds", tpl.ttl_seconds, 1, validation.MAX_RETENTION_SECONDS)
    if tpl.max_attempts is not None:
        validation.integer("max_attempts", tpl.max_attempts, 1, validation.MAX_ATTEMPTS)
    if tpl.lease_seconds is not None:
        validation.integer("lease_seconds", tpl.lease_seconds, 1, validation.MAX_LEASE_SECONDS)
    return tpl


def spec(value: PeriodicSpec, limits: validation.Limits) -> PeriodicSpec:
    """Check a whole periodic job; the schedule comes back normalised."""
    validation.name("queue", value.queue)
    normalised = schedule("schedule", value.schedule)
    timezone("timezone", value.timezone)
    template(value.template, limits)
    return PeriodicSpec(value.queue, normalised, value.timezone, value.template, value.paused)


def patched(current: PeriodicSpec, changes: Mapping[str, Any]) -> PeriodicSpec:
    """``current`` with a PATCH's fields applied (not yet checked: see :func:`spec`)."""
    for key in changes:
        if key not in PERIODIC_FIELDS:
            raise ValidationError(key, "is not a periodic job setting")
    template_changes = {key: changes[key] for key in _TEMPLATE_FIELDS if key in changes}
    spec_changes = {key: changes[key] for key in _SPEC_FIELDS if key in changes}
    return replace(current, **spec_changes, template=replace(current.template, **template_changes))


def next_tick(expression: str, zone: str, after: datetime) -> datetime:
    """The first tick of ``expression`` in ``zone`` strictly after ``after``, in UTC."""
    local = after.astimezone(ZoneInfo(zone))
    return next(CronSim(_expression(expression), local)).astimezone(UTC)


def latest_tick(expression: str, zone: str, at: datetime) -> datetime:
    """The last tick of ``expression`` in ``zone`` at or before ``at``, in UTC."""
    local = (at + _ONE_MICROSECOND).astimezone(ZoneInfo(zone))
    return next(CronSim(_expression(expression), local, reverse=True)).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Firing:
    """What one firing of a due job does: enqueue for ``tick``, then wait for ``next_run_at``."""

    tick: datetime
    next_run_at: datetime
    skipped: int
    """Ticks missed before ``tick`` and skipped by the catch-up rule (0 when on time; at most
    :data:`COUNT_SKIPPED_UP_TO`, counting stops there)."""


COUNT_SKIPPED_UP_TO = 1000


def due_tick(expression: str, zone: str, next_run_at: datetime, now: datetime) -> Firing:
    """The catch-up rule, for a job whose ``next_run_at`` has come (``next_run_at <= now``).

    It fires once, for the most recent tick at or before ``now`` (``next_run_at`` itself when
    that was the last, as it is when the scheduler is on time, or when it was set by hand: a
    trigger, a test); the ticks between ``next_run_at`` and that one are skipped. Its next run
    is the first tick after ``now``.
    """
    latest = latest_tick(expression, zone, now)
    tick = max(latest, next_run_at)
    skipped = 0
    if latest > next_run_at:
        ticks = CronSim(_expression(expression), next_run_at.astimezone(ZoneInfo(zone)))
        while skipped < COUNT_SKIPPED_UP_TO and next(ticks).astimezone(UTC) < latest:
            skipped += 1
        skipped += 1  # next_run_at itself was a tick missed too
    return Firing(tick=tick, next_run_at=next_tick(expression, zone, now), skipped=skipped)


def tick_message_id(job: str, tick: datetime) -> str:
    """The id of the message a job enqueues for ``tick``: ``cron:<job>:20261127T101500Z``
    (with ``.123456`` before the ``Z`` when the tick is not on a whole second)."""
    return f"{JOB_ID_PREFIX}:{job}:{_stamp(tick)}"


def trigger_message_id(job: str, at: datetime) -> str:
    """The id of the message a manual trigger enqueues at ``at``: ``cron:<job>:trigger:…``."""
    return f"{JOB_ID_PREFIX}:{job}:trigger:{_stamp(at)}"


def _stamp(at: datetime) -> str:
    utc = at.astimezone(UTC)
    fraction = f".{utc.microsecond:06d}" if utc.microsecond else ""
    return f"{utc:%Y%m%dT%H%M%S}{fraction}Z"


def _expression(value: str) -> str:
    stripped = value.strip()
    return ALIASES.get(stripped.lower(), stripped)


def _never_fires(ticks: CronSim) -> bool:
    """Whether a valid expression's ticks from :data:`_CHECKED_FROM` hold none in the next 30
    years (``0 0 31 2 *``)."""
    first = next(ticks, None)
    return first is None or first > _CHECKED_FROM.replace(year=2030)
