"""Periodic (cron) jobs: creating or changing them, reading, listing, deleting, and firing one
now. The rules (schedule, time zone, template, catch-up, ids) are :mod:`app.core.periodic`'s;
the scheduler's leader fires due jobs (``app/store/periodic_firing.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core import periodic, validation
from app.core.errors import ConflictError, NotFoundError, QueuePausedError, ValidationError
from app.core.periodic import PeriodicJob, PeriodicSpec
from app.core.service.base import ServiceBase
from app.core.service.identifiers import could_exist

PATCH_ATTEMPTS = 5
"""Reads and writes a PATCH tries when the job changes between them."""


class Periodic(ServiceBase):
    """The operations on periodic jobs."""

    async def put_periodic(
        self, namespace: str, name: str, spec: PeriodicSpec
    ) -> tuple[PeriodicJob, bool]:
        """Create a job (created True) or bring it to ``spec``. Its next run is the first tick
        after now when it is new, its schedule or time zone changed, or it is resumed."""
        validation.name("name", name)
        checked = periodic.spec(spec, self.limits)
        put = await self.store.put_periodic_job(namespace, name, checked)
        if put is None:
            raise _queue_not_found(namespace, checked.queue)
        return put

    async def get_periodic(self, namespace: str, name: str) -> PeriodicJob:
        """The job, or NotFoundError."""
        job = None
        if could_exist(validation.NAME_PATTERN, name):
            job = await self.store.get_periodic_job(namespace, name)
        if job is None:
            await self._require_namespace(namespace)
            raise _job_not_found(namespace, name)
        return job

    async def list_periodic(self, namespace: str, queue: str | None = None) -> list[PeriodicJob]:
        """A namespace's jobs by name; with ``queue``, only those that target it."""
        if not could_exist(validation.NAME_PATTERN, namespace):
            raise NotFoundError(f"namespace {namespace!r} does not exist", namespace=namespace)
        if queue is not None:
            validation.name("queue", queue)
        return await self.store.list_periodic_jobs(namespace, queue)

    async def update_periodic(
        self, namespace: str, name: str, changes: Mapping[str, Any]
    ) -> PeriodicJob:
        """Change some of a job's fields (``paused`` to pause or resume it); the others keep
        their values. Applied only to the job as it was read (ConflictError if it keeps
        changing under the request)."""
        for _ in range(PATCH_ATTEMPTS):
            job = await self.get_periodic(namespace, name)
            checked = periodic.spec(periodic.patched(job.spec, changes), self.limits)
            put = await self.store.put_periodic_job(namespace, name, checked, job.updated_at)
            if put is not None:
                return put[0]
            if (await self.store.get_periodic_job(namespace, name)) is None:
                raise _job_not_found(namespace, name)
            if await self._target_missing(namespace, checked.queue):
                raise _queue_not_found(namespace, checked.queue)
        raise ConflictError(f"periodic job {namespace}/{name} kept changing; try again", name=name)

    async def delete_periodic(self, namespace: str, name: str) -> None:
        """Delete a job (messages it enqueued stay)."""
        if not (
            could_exist(validation.NAME_PATTERN, name)
            and could_exist(validation.NAME_PATTERN, namespace)
            and await self.store.delete_periodic_job(namespace, name)
        ):
            raise _job_not_found(namespace, name)

    async def trigger_periodic(self, namespace: str, name: str) -> str:
        """Enqueue the job's message now, once, whatever its schedule (paused or not); its next
        run does not change. Returns the message's id, ``cron:<job>:trigger:<now>``."""
        queue = (await self.get_periodic(namespace, name)).spec.queue
        found, message_id, refusal = await self.store.trigger_periodic_job(namespace, name)
        if not found:
            raise _job_not_found(namespace, name)
        if message_id is not None:
            return message_id
        match refusal:
            case None:  # the id was taken: a trigger in the same microsecond
                raise ConflictError("a trigger of this job at this instant exists; try again")
            case "missing":
                raise _queue_not_found(namespace, queue)
            case "paused":
                raise QueuePausedError(f"queue {namespace}/{queue} is paused for enqueue")
            case _:  # "key": the exclusive queue's key, named from the queue
                target = await self.store.get_queue(namespace, queue)
                key = target.config.exclusive_key if target is not None else None
                raise ValidationError(
                    "metadata", f"has no value for {key}, the key of the exclusive queue {queue}"
                )

    async def _target_missing(self, namespace: str, queue: str) -> bool:
        return await self.store.get_queue(namespace, queue) is None


def _job_not_found(namespace: str, name: str) -> NotFoundError:
    return NotFoundError(f"periodic job {namespace}/{name} does not exist", name=name)


def _queue_not_found(namespace: str, queue: str) -> NotFoundError:
    return NotFoundError(f"queue {namespace}/{queue} does not exist", queue=queue)
