"""Firing: a due job enqueues its tick's message once, with its template, into its queue; the
catch-up rule after downtime; a paused or missing target skips the tick and says why; the
trigger. Ticks are run by hand (``maintenance.tick``); time moves by setting ``next_run_at`` in
the past."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import (
    NamespaceMovingError,
    NotFoundError,
    QueuePausedError,
    ValidationError,
)
from app.core.periodic import latest_tick, next_tick, tick_message_id
from app.core.service import QueueService
from app.store.sql.periodic import PERIODIC_JOB_FIRE
from tests.helpers import execute, make_queue, scalar
from tests.periodic.helpers import NS, cron_messages, job_row, make_job, set_next_run, tick


async def db_now(engine: AsyncEngine) -> datetime:
    now: datetime = await scalar(engine, "SELECT now()")
    return now


async def test_a_new_job_waits_for_its_first_tick(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    before = await db_now(engine)
    job = await make_job(service, schedule="*/5 * * * *")
    assert job.next_run_at == next_tick("*/5 * * * *", "UTC", before)
    assert job.next_run_at > before
    assert await tick(engine) == 0
    assert await cron_messages(engine) == []


async def test_a_due_job_fires_once_for_its_tick(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    await make_job(
        service,
        payload=b'{"report": "daily"}',
        metadata={"kind": "report"},
        priority=7,
        ttl_seconds=600,
        max_attempts=3,
        lease_seconds=45,
    )
    now = await db_now(engine)
    due = latest_tick("* * * * *", "UTC", now)
    await set_next_run(engine, "job", due)
    assert await tick(engine) == 1
    assert await tick(engine) == 0  # the next tick is in the future
    [message] = await cron_messages(engine)
    assert message["id"] == tick_message_id("job", due) == f"cron:job:{due:%Y%m%dT%H%M%S}Z"
    assert message["state"] == "pending"
    assert message["payload"] == {"report": "daily"}
    assert message["metadata"] == {"kind": "report"}
    assert (message["priority"], message["max_attempts"], message["lease_seconds"]) == (7, 3, 45)
    assert message["expires_at"] - message["enqueued_at"] == timedelta(seconds=600)
    row = await job_row(engine)
    assert row["last_run_at"] == due
    assert row["last_message_id"] == message["id"]
    assert row["last_error"] is None
    assert row["next_run_at"] == next_tick("* * * * *", "UTC", row["updated_at"])


async def test_catch_up_fires_only_the_most_recent_missed_tick(
    service: QueueService, engine: AsyncEngine
) -> None:
    """After downtime (the next run three hours ago, on an hourly schedule) the job fires once,
    for the latest tick at or before now; the two before it are skipped; the next run is the
    first tick after now."""
    await make_queue(service, NS, "q")
    await make_job(service, schedule="@hourly")
    await set_next_run(engine, "job", "date_trunc('hour', now()) - interval '2 hours'")
    now = await db_now(engine)
    assert await tick(engine) == 1
    [message] = await cron_messages(engine)
    latest = now.replace(minute=0, second=0, microsecond=0)
    assert message["id"] == tick_message_id("job", latest)
    row = await job_row(engine)
    assert row["last_run_at"] == latest
    assert row["next_run_at"] == latest + timedelta(hours=1)
    assert await tick(engine) == 0


async def test_a_paused_job_does_not_fire_and_resumes_from_the_next_tick(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    await make_job(service)
    await service.update_periodic(NS, "job", {"paused": True})
    await set_next_run(engine, "job", "now() - interval '1 hour'")
    assert await tick(engine) == 0
    resumed = await service.update_periodic(NS, "job", {"paused": False})
    assert resumed.next_run_at > await db_now(engine) - timedelta(seconds=1)
    assert await tick(engine) == 0
    assert await cron_messages(engine) == []


@pytest.mark.parametrize("why", ["paused", "missing"])
async def test_a_target_that_cannot_take_the_message_skips_the_tick(
    service: QueueService, engine: AsyncEngine, why: str
) -> None:
    """A queue paused for enqueue, or deleted: the tick is skipped (not fired later), the job
    says why in last_error and moves on to its next tick; the tick itself goes on."""
    await make_queue(service, NS, "q")
    await make_job(service)
    if why == "paused":
        await service.update_queue(NS, "q", {"enqueue_paused": True})
    else:
        await service.delete_queue(NS, "q")
    await set_next_run(engine, "job", "now() - interval '1 second'")
    assert await tick(engine) == 0
    row = await job_row(engine)
    expected = "is paused for enqueue" if why == "paused" else "does not exist"
    assert row["last_error"] == f"queue q {expected}"
    assert row["last_message_id"] is None
    assert row["next_run_at"] > await db_now(engine)
    # The queue back: the next tick fires, and the error is cleared.
    if why == "paused":
        await service.update_queue(NS, "q", {"enqueue_paused": False})
    else:
        await make_queue(service, NS, "q")
    await set_next_run(engine, "job", "now() - interval '1 second'")
    assert await tick(engine) == 1
    assert (await job_row(engine))["last_error"] is None


async def test_the_queue_delay_applies(service: QueueService, engine: AsyncEngine) -> None:
    await make_queue(service, NS, "q", delay_seconds=60)
    await make_job(service)
    await set_next_run(engine, "job", "now() - interval '1 second'")
    assert await tick(engine) == 1
    [message] = await cron_messages(engine)
    assert message["state"] == "invisible"


async def test_an_exclusive_queue_takes_the_value_from_the_template(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q", kind="exclusive", exclusive_key="tenant")
    await make_job(service, "with", metadata={"tenant": "a"})
    await make_job(service, "without")
    await set_next_run(engine, "with", "now() - interval '1 second'")
    await set_next_run(engine, "without", "now() - interval '1 second'")
    assert await tick(engine) == 1
    [message] = await cron_messages(engine)
    assert message["id"].startswith("cron:with:")
    assert "tenant" in (await job_row(engine, "without"))["last_error"]


async def test_trigger_fires_now_once_and_keeps_the_schedule(
    service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    job = await make_job(service, schedule="0 0 1 1 *", payload=b"1")
    message_id = await service.trigger_periodic(NS, "job")
    assert message_id.startswith("cron:job:trigger:")
    [message] = await cron_messages(engine)
    assert message["id"] == message_id
    assert message["payload"] == 1
    assert (await service.get_periodic(NS, "job")).next_run_at == job.next_run_at
    await service.update_queue(NS, "q", {"enqueue_paused": True})
    with pytest.raises(QueuePausedError):
        await service.trigger_periodic(NS, "job")
    await service.delete_queue(NS, "q")
    with pytest.raises(NotFoundError):
        await service.trigger_periodic(NS, "job")
    with pytest.raises(NotFoundError):
        await service.trigger_periodic(NS, "nope")


async def test_a_trigger_missing_an_exclusive_key_is_invalid_whatever_the_queue_name(
    service: QueueService, engine: AsyncEngine
) -> None:
    """The refusal is told apart by its kind, not its text: an exclusive queue named
    ``held-paused`` whose key the template lacks refuses with a validation error (400)."""
    await make_queue(service, NS, "held-paused", kind="exclusive", exclusive_key="tenant")
    await make_job(service, queue="held-paused")
    with pytest.raises(ValidationError):
        await service.trigger_periodic(NS, "job")
    assert await cron_messages(engine, "held-paused") == []


async def test_a_job_is_not_deleted_while_its_namespace_moves(
    service: QueueService, engine: AsyncEngine
) -> None:
    """A delete committed during a move's last copy would be lost: it is refused instead."""
    await make_queue(service, NS, "q")
    await make_job(service)
    await execute(engine, "UPDATE namespaces SET state = 'frozen' WHERE name = :n", n=NS)
    try:
        with pytest.raises(NamespaceMovingError):
            await service.delete_periodic(NS, "job")
    finally:
        await execute(engine, "UPDATE namespaces SET state = 'active' WHERE name = :n", n=NS)
    assert (await service.get_periodic(NS, "job")).name == "job"


async def test_a_tick_time_zone_is_the_jobs(service: QueueService, engine: AsyncEngine) -> None:
    """09:00 every day in Tokyo is 00:00 UTC."""
    await make_queue(service, NS, "q")
    job = await make_job(service, schedule="0 9 * * *", timezone="Asia/Tokyo")
    assert job.next_run_at.astimezone(UTC).hour == 0
    assert job.next_run_at.astimezone(UTC).minute == 0


async def test_the_advance_is_guarded_by_the_next_run_it_read(
    service: QueueService, engine: AsyncEngine
) -> None:
    """The firing statement run twice for the same read of ``next_run_at`` (a stale leader
    that read the job before another fired it), even with another message id: the second
    advances nothing and so enqueues nothing."""
    await make_queue(service, NS, "q")
    await make_job(service)
    now = await db_now(engine)
    was = latest_tick("* * * * *", "UTC", now)
    await set_next_run(engine, "job", was)
    params = {
        "namespace": NS,
        "name": "job",
        "was": was,
        "tick": was,
        "next_run_at": next_tick("* * * * *", "UTC", now),
    }
    async with engine.begin() as conn:
        first = (await conn.execute(PERIODIC_JOB_FIRE, {**params, "message_id": "a"})).one()
    async with engine.begin() as conn:
        second = (await conn.execute(PERIODIC_JOB_FIRE, {**params, "message_id": "b"})).one()
    assert (first.advanced, first.inserted) == (1, 1)
    assert (second.advanced, second.inserted) == (0, 0)
    ids = await scalar(engine, "SELECT array_agg(id) FROM messages")
    assert ids == ["a"]


async def test_a_job_whose_firing_fails_waits_for_the_next_tick_and_holds_back_no_other(
    service: QueueService, engine: AsyncEngine
) -> None:
    """A firing the database refuses applies nothing: that job stays due and fires at a later
    tick; the jobs due with it fire meanwhile."""
    await make_queue(service, NS, "q")
    # Yearly: no tick of their own falls due again between the two passes.
    await make_job(service, "bad", schedule="@yearly")
    await make_job(service, "good", schedule="@yearly")
    await set_next_run(engine, "bad", "now() - interval '2 seconds'")  # first in line
    await set_next_run(engine, "good", "now() - interval '1 second'")
    await execute(
        engine, "ALTER TABLE messages ADD CONSTRAINT refuse_bad CHECK (id NOT LIKE 'cron:bad:%')"
    )
    assert await tick(engine) == 1
    assert [m["id"].split(":")[1] for m in await cron_messages(engine)] == ["good"]
    bad = await job_row(engine, "bad")
    assert bad["next_run_at"] < await db_now(engine)
    assert bad["last_run_at"] is None
    await execute(engine, "ALTER TABLE messages DROP CONSTRAINT refuse_bad")
    assert await tick(engine) == 1
    assert [m["id"].split(":")[1] for m in await cron_messages(engine)] == ["good", "bad"]
