"""Periodic (cron) jobs in the client: the answer's model and the calls of
``/v1/namespaces/{ns}/periodic``. A job is named ``"namespace/name"``, as queues are; its
``queue`` is a queue of the same namespace, by name."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec

from app.client.calls import Call, decoder, namespace_path, nothing, segment, split_queue
from app.client.models import Model


class PeriodicJob(Model, frozen=True, kw_only=True):
    """A periodic job: what it enqueues, into which queue, on which schedule, and when it runs.
    ``next_run_at`` is the tick it fires next; ``last_run_at`` the tick it last fired,
    ``last_message_id`` the message that firing enqueued, ``last_error`` why it enqueued none."""

    namespace: str
    name: str
    queue: str
    schedule: str
    timezone: str
    payload: Any = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    priority: int | None = None
    ttl_seconds: int | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    paused: bool
    next_run_at: datetime
    last_run_at: datetime | None = None
    last_message_id: str | None = None
    last_error: str | None = None
    created_at: datetime
    updated_at: datetime

    @property
    def path(self) -> str:
        """``namespace/name``, as the client's methods take it."""
        return f"{self.namespace}/{self.name}"


def _jobs(namespace: str) -> str:
    return f"{namespace_path(namespace)}/periodic"


def _job(job: str) -> str:
    namespace, name = split_queue(job)
    return f"{_jobs(namespace)}/{segment(name)}"


_JOB = decoder(PeriodicJob)


def put_periodic(job: str, definition: Mapping[str, Any]) -> Call[PeriodicJob]:
    """``PUT …/periodic/{name}``: the whole job (absent fields: defaults)."""
    return Call("PUT", _job(job), _JOB, dict(definition), safe=True)


def list_periodic(namespace: str, queue: str | None = None) -> Call[list[PeriodicJob]]:
    """``GET …/periodic`` (only the jobs of ``queue``, when given)."""
    params = [] if queue is None else [("queue", queue)]
    decode = decoder(list[PeriodicJob], "periodic")
    return Call("GET", _jobs(namespace), decode, params=params, safe=True)


def get_periodic(job: str) -> Call[PeriodicJob]:
    """``GET …/periodic/{name}``."""
    return Call("GET", _job(job), _JOB, safe=True)


def update_periodic(job: str, changes: Mapping[str, Any]) -> Call[PeriodicJob]:
    """``PATCH …/periodic/{name}``."""
    return Call("PATCH", _job(job), _JOB, dict(changes), safe=True)


def delete_periodic(job: str) -> Call[None]:
    """``DELETE …/periodic/{name}``."""
    return Call("DELETE", _job(job), nothing, safe=True)


def trigger_periodic(job: str) -> Call[str]:
    """``POST …/periodic/{name}/trigger``: the id of the message enqueued. Not safe: each
    trigger enqueues a message of its own."""
    return Call("POST", f"{_job(job)}/trigger", decoder(str, "id"))
