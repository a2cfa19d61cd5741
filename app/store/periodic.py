"""Periodic (cron) jobs in the store: create or change, read, list, delete and trigger
(:class:`PeriodicStore`, a part of :class:`~app.store.postgres.PostgresStore`). Their firing is
the scheduler's (:mod:`app.store.periodic_firing`). Each call is one statement, so each is its
own transaction; the next tick is computed from the database's ``now()``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping

from app.core import periodic
from app.core.periodic import MessageTemplate, PeriodicJob, PeriodicSpec
from app.store.admin import AdminStore
from app.store.paths import StorePaths
from app.store.sql import periodic as sql


class PeriodicStore(StorePaths):
    """A namespace's periodic jobs."""

    async def put_periodic_job(
        self,
        namespace: str,
        name: str,
        spec: PeriodicSpec,
        expected_updated_at: datetime | None = None,
    ) -> tuple[PeriodicJob, bool] | None:
        """Create the job or bring it to ``spec``; (job, created). With ``expected_updated_at``
        (a PATCH), only change the job as it was read: never create it. None when nothing was
        written: the target queue does not exist, or the job is gone or changed since it was
        read. NotFoundError when the namespace does not exist here."""
        async with self._transaction() as conn:
            now = (await conn.execute(sql.DATABASE_NOW)).scalar_one()
            params = {
                "namespace": namespace,
                "name": name,
                **_spec_params(spec),
                "next_run_at": periodic.next_tick(spec.schedule, spec.timezone, now),
            }
            if expected_updated_at is not None:
                params["expected_updated_at"] = expected_updated_at
            statement = (
                sql.PERIODIC_JOB_PUT
                if expected_updated_at is None
                else sql.PERIODIC_JOB_REPLACE_IF_UNCHANGED
            )
            row = (await conn.execute(statement, params)).mappings().first()
            if row is None:
                await _require_namespace(conn, namespace)
                return None
        return job_from_row(row), bool(row["created"])

    async def get_periodic_job(self, namespace: str, name: str) -> PeriodicJob | None:
        """The job, or None."""
        async with self._transaction() as conn:
            params = {"namespace": namespace, "name": name}
            row = (await conn.execute(sql.PERIODIC_JOB_GET, params)).mappings().first()
        return None if row is None else job_from_row(row)

    async def list_periodic_jobs(
        self, namespace: str, queue: str | None = None
    ) -> list[PeriodicJob]:
        """A namespace's jobs by name (those of ``queue`` only, when given); NotFoundError when
        the namespace does not exist."""
        async with self._transaction() as conn:
            await _require_namespace(conn, namespace)
            params = {"namespace": namespace, "queue": queue}
            rows = (await conn.execute(sql.PERIODIC_JOBS_LIST, params)).mappings().all()
        return [job_from_row(row) for row in rows]

    async def delete_periodic_job(self, namespace: str, name: str) -> bool:
        """Delete the job; whether it existed (not while its namespace moves)."""
        async with self._transaction() as conn:
            params = {"namespace": namespace, "name": name}
            if (await conn.execute(sql.PERIODIC_JOB_DELETE, params)).first() is not None:
                return True
            await _namespace_here(conn, namespace)  # raises while it moves
            return False

    async def trigger_periodic_job(
        self, namespace: str, name: str
    ) -> tuple[bool, str | None, str | None]:
        """Enqueue the job's message now, once: (job found, message id, refusal). The id is
        ``cron:<job>:trigger:<now>``; the refusal, a code, says why nothing was enqueued:
        ``missing`` (the queue), ``paused`` (for enqueue) or ``key`` (the exclusive queue's key
        has no value in the job's metadata)."""
        async with self._transaction() as conn:
            now = (await conn.execute(sql.DATABASE_NOW)).scalar_one()
            message_id = periodic.trigger_message_id(name, now)
            params = {"namespace": namespace, "name": name, "message_id": message_id}
            row = (await conn.execute(sql.PERIODIC_JOB_TRIGGER, params)).one()
        if not row.found:
            return False, None, None
        return True, message_id if row.inserted else None, row.refusal_code


_require_namespace = AdminStore._require_active
"""Nothing, or NotFoundError when the namespace is not here (NamespaceMovingError while a move
has it)."""
_namespace_here = AdminStore._namespace_is_active
"""Whether the namespace is here and served (NamespaceMovingError while a move has it)."""


def _spec_params(spec: PeriodicSpec) -> dict[str, Any]:
    tpl = spec.template
    return {
        "queue": spec.queue,
        "schedule": spec.schedule,
        "timezone": spec.timezone,
        "payload": tpl.payload.decode() if tpl.payload is not None else "null",
        "metadata": json.dumps(tpl.metadata),
        "priority": tpl.priority,
        "ttl_seconds": tpl.ttl_seconds,
        "max_attempts": tpl.max_attempts,
        "lease_seconds": tpl.lease_seconds,
        "paused": spec.paused,
    }


def job_from_row(row: RowMapping) -> PeriodicJob:
    """A ``periodic_jobs`` row (as :mod:`app.store.sql.periodic` selects it) as the core's."""
    return PeriodicJob(
        namespace=row["namespace"],
        name=row["name"],
        spec=PeriodicSpec(
            queue=row["queue"],
            schedule=row["schedule"],
            timezone=row["timezone"],
            template=MessageTemplate(
                payload=row["payload"].encode(),
                metadata=dict(row["metadata"]),
                priority=row["priority"],
                ttl_seconds=row["ttl_seconds"],
                max_attempts=row["max_attempts"],
                lease_seconds=row["lease_seconds"],
            ),
            paused=row["paused"],
        ),
        next_run_at=row["next_run_at"],
        last_run_at=row["last_run_at"],
        last_message_id=row["last_message_id"],
        last_error=row["last_error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
