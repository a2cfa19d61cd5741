"""The bodies of the periodic (cron) job endpoints of a namespace: create or replace, change,
read, list, trigger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from app.api.schemas.common import In, Out, Patch, payload_bytes
from app.core.periodic import MessageTemplate, PeriodicJob, PeriodicSpec


class PeriodicPut(In):
    """``PUT …/periodic/{name}``: the whole job; absent optional fields take their defaults.
    ``schedule``: 5-field cron (minute hour day-of-month month day-of-week) or ``@hourly``,
    ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``; ``timezone``: IANA name the schedule is
    read in. The other fields are the message each tick enqueues (``null``: the queue's
    default)."""

    queue: str
    schedule: str
    timezone: str = "UTC"
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    priority: int | None = None
    ttl_seconds: int | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    paused: bool = False

    def to_model(self) -> PeriodicSpec:
        """As the core's job."""
        return PeriodicSpec(
            queue=self.queue,
            schedule=self.schedule,
            timezone=self.timezone,
            template=MessageTemplate(
                payload=payload_bytes(self.payload),
                metadata=self.metadata,
                priority=self.priority,
                ttl_seconds=self.ttl_seconds,
                max_attempts=self.max_attempts,
                lease_seconds=self.lease_seconds,
            ),
            paused=self.paused,
        )


class PeriodicPatch(Patch):
    """``PATCH …/periodic/{name}``: only the fields given change (``paused`` pauses or resumes
    the job)."""

    queue: str | UnsetType = UNSET
    schedule: str | UnsetType = UNSET
    timezone: str | UnsetType = UNSET
    payload: Raw | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    priority: int | UnsetType | None = UNSET
    ttl_seconds: int | UnsetType | None = UNSET
    max_attempts: int | UnsetType | None = UNSET
    lease_seconds: int | UnsetType | None = UNSET
    paused: bool | UnsetType = UNSET

    def to_changes(self) -> dict[str, Any]:
        """The fields that were given (a payload as its JSON text)."""
        changes = super().to_changes()
        if "payload" in changes:
            changes["payload"] = payload_bytes(self.payload)
        return changes


class PeriodicOut(Out):
    """A periodic job: its schedule, its message template and when it runs.
    ``next_run_at``: the tick it fires next (while paused, the one it would); ``last_run_at``:
    the tick of its last firing; ``last_message_id``: the message that firing enqueued;
    ``last_error``: why the last firing enqueued nothing (its queue missing or paused)."""

    namespace: str
    name: str
    queue: str
    schedule: str
    timezone: str
    payload: Raw
    metadata: dict[str, str]
    priority: int | None
    ttl_seconds: int | None
    max_attempts: int | None
    lease_seconds: int | None
    paused: bool
    next_run_at: datetime
    last_run_at: datetime | None
    last_message_id: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, job: PeriodicJob) -> PeriodicOut:
        """From the core model."""
        spec, tpl = job.spec, job.spec.template
        return cls(
            namespace=job.namespace,
            name=job.name,
            queue=spec.queue,
            schedule=spec.schedule,
            timezone=spec.timezone,
            payload=Raw(tpl.payload if tpl.payload is not None else b"null"),
            metadata=tpl.metadata,
            priority=tpl.priority,
            ttl_seconds=tpl.ttl_seconds,
            max_attempts=tpl.max_attempts,
            lease_seconds=tpl.lease_seconds,
            paused=spec.paused,
            next_run_at=job.next_run_at,
            last_run_at=job.last_run_at,
            last_message_id=job.last_message_id,
            last_error=job.last_error,
            created_at=job.created_at,
            updated_at=job.updated_at,
        )


class PeriodicList(Out):
    """``GET …/periodic``."""

    periodic: list[PeriodicOut]


class Triggered(Out):
    """``POST …/periodic/{name}/trigger``: the id of the message enqueued."""

    id: str
