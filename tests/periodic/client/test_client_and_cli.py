"""Periodic jobs through the Python client (blocking and asyncio) and ``sundial periodic``,
against a real server."""

from __future__ import annotations

import json

import pytest

from app.client import AsyncClient, Client, NotFound, PeriodicJob, ValidationError
from tests.client.conftest import Sundial


def test_client_manages_and_triggers_a_job(client: Client, q: str, namespace: str) -> None:
    client.put_queue(q)
    job = client.put_periodic(
        f"{namespace}/nightly",
        queue="jobs",
        schedule="0 3 * * *",
        timezone="Europe/Paris",
        payload={"task": "cleanup"},
        metadata={"kind": "cron"},
        ttl_seconds=3600,
    )
    assert isinstance(job, PeriodicJob)
    assert (job.path, job.queue, job.schedule, job.paused) == (
        f"{namespace}/nightly",
        "jobs",
        "0 3 * * *",
        False,
    )
    assert job.payload == {"task": "cleanup"}
    assert [j.name for j in client.list_periodic(namespace)] == ["nightly"]
    assert client.list_periodic(namespace, queue="other") == []
    assert client.get_periodic(job.path).next_run_at == job.next_run_at

    paused = client.update_periodic(job.path, paused=True)
    assert paused.paused

    message_id = client.trigger_periodic(job.path)
    assert message_id.startswith("cron:nightly:trigger:")
    [leased] = client.dequeue(q)
    assert (leased.id, leased.payload, leased.metadata) == (
        message_id,
        {"task": "cleanup"},
        {"kind": "cron"},
    )

    with pytest.raises(ValidationError) as error:
        client.update_periodic(job.path, schedule="every day")
    assert error.value.field == "schedule"
    client.delete_periodic(job.path)
    with pytest.raises(NotFound):
        client.get_periodic(job.path)


async def test_async_client(aclient: AsyncClient, q: str, namespace: str) -> None:
    await aclient.put_queue(q)
    job = await aclient.put_periodic(f"{namespace}/hourly", queue="jobs", schedule="@hourly")
    assert job.payload is None
    assert [j.name for j in await aclient.list_periodic(namespace)] == ["hourly"]
    assert (await aclient.update_periodic(job.path, paused=True)).paused
    assert (await aclient.trigger_periodic(job.path)).startswith("cron:hourly:trigger:")
    await aclient.delete_periodic(job.path)
    assert await aclient.list_periodic(namespace) == []


def test_cli(sundial: Sundial, client: Client, q: str, namespace: str) -> None:
    def periodic(*args: str, code: int = 0) -> str:
        return sundial("periodic", *args, code=code).output

    client.put_queue(q)
    job = f"{namespace}/report"
    out = periodic(
        "set", job, "--queue", "jobs", "--schedule", "*/10 * * * *",
        "--payload", '{"r": 1}', "--metadata", "k=v", "--json",
    )  # fmt: skip
    created = json.loads(out)
    assert (created["schedule"], created["payload"], created["metadata"]) == (
        "*/10 * * * *",
        {"r": 1},
        {"k": "v"},
    )
    table = periodic("list", namespace)
    assert "report" in table
    assert "*/10 * * * *" in table
    assert json.loads(periodic("pause", job, "--json"))["paused"] is True
    assert json.loads(periodic("resume", job, "--json"))["paused"] is False
    assert json.loads(periodic("show", job, "--json"))["name"] == "report"
    message_id = periodic("trigger", job).strip()
    assert message_id.startswith("cron:report:trigger:")
    assert client.get_message(q, message_id).payload == {"r": 1}
    bad = periodic("set", job, "--queue", "jobs", "--schedule", "nope", code=1)
    assert "schedule" in bad
    missing = periodic("set", job, "--queue", "nowhere", "--schedule", "@daily", code=1)
    assert "not_found" in missing
    periodic("delete", job)
    assert "not_found" in periodic("show", job, code=1)
