"""``sundial periodic set | list | show | pause | resume | trigger | delete``: a namespace's
periodic (cron) jobs over HTTP through :class:`app.client.Client` (docs/api.md, "Periodic
jobs"). A job is named ``NAMESPACE/NAME``; its queue is a queue of that namespace."""

from __future__ import annotations

from datetime import UTC

import click

from app.client.commands import (
    _short,
    _table,
    connect,
    emit,
    json_option,
    json_payload,
    parse_pairs,
    server_options,
)
from app.client.periodic import PeriodicJob


def _show(job: PeriodicJob, as_json: bool) -> None:
    emit(job, as_json, lambda shown: _rows([shown]))


def _rows(jobs: list[PeriodicJob]) -> None:
    _table(
        ["job", "queue", "schedule", "paused", "next run (UTC)", "last error"],
        [
            [
                j.name,
                j.queue,
                j.schedule if j.timezone == "UTC" else f"{j.schedule} ({j.timezone})",
                "yes" if j.paused else "no",
                f"{j.next_run_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}",
                j.last_error or "",
            ]
            for j in jobs
        ],
    )


@click.group("periodic")
def periodic() -> None:
    """Periodic (cron) jobs: a message enqueued at every tick of a schedule."""


@periodic.command("set")
@click.argument("job", metavar="NAMESPACE/NAME")
@click.option("--queue", required=True, help="The queue of the namespace it enqueues into.")
@click.option(
    "--schedule",
    required=True,
    help="5-field cron (minute hour day-of-month month day-of-week) or @hourly, @daily, …",
)
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--payload", help="The payload of each message, a JSON value.")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Metadata pair (repeat).")
@click.option("--priority", type=int, help="Each message's priority (default: enqueue time).")
@click.option("--ttl", type=int, help="Seconds after which each message expires.")
@click.option("--max-attempts", type=int, help="Attempts of each message (default: queue's).")
@click.option("--lease-seconds", type=int, help="Lease of each message (default: queue's).")
@click.option("--paused", is_flag=True, help="Create or keep it paused.")
@server_options
@json_option
def set_job(
    job: str,
    queue: str,
    schedule: str,
    timezone: str,
    payload: str | None,
    metadata: tuple[str, ...],
    priority: int | None,
    ttl: int | None,
    max_attempts: int | None,
    lease_seconds: int | None,
    paused: bool,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Create the job, or set its whole definition."""
    with connect(url, token) as client:
        found = client.put_periodic(
            job,
            queue=queue,
            schedule=schedule,
            timezone=timezone,
            payload=json_payload(payload),
            metadata=parse_pairs(metadata, "--metadata"),
            priority=priority,
            ttl_seconds=ttl,
            max_attempts=max_attempts,
            lease_seconds=lease_seconds,
            paused=paused,
        )
    _show(found, as_json)


@periodic.command("list")
@click.argument("namespace")
@click.option("--queue", help="Only the jobs of this queue.")
@server_options
@json_option
def list_jobs(
    namespace: str, queue: str | None, url: str, token: str | None, as_json: bool
) -> None:
    """A namespace's periodic jobs."""
    with connect(url, token) as client:
        jobs = client.list_periodic(namespace, queue)
    emit(jobs, as_json, _rows)


@periodic.command("show")
@click.argument("job", metavar="NAMESPACE/NAME")
@server_options
@json_option
def show(job: str, url: str, token: str | None, as_json: bool) -> None:
    """One periodic job, with its template."""
    with connect(url, token) as client:
        found = client.get_periodic(job)
    emit(found, as_json, _details)


def _details(job: PeriodicJob) -> None:
    """The job's row, then its last run and its template."""
    _rows([job])
    last = job.last_run_at.isoformat() if job.last_run_at else "never"
    click.echo(f"last run: {last} ({job.last_message_id or 'no message'})")
    click.echo(f"payload: {_short(job.payload, 200)}  metadata: {job.metadata}")


@periodic.command("pause")
@click.argument("job", metavar="NAMESPACE/NAME")
@server_options
@json_option
def pause(job: str, url: str, token: str | None, as_json: bool) -> None:
    """Stop firing until resumed."""
    with connect(url, token) as client:
        _show(client.update_periodic(job, paused=True), as_json)


@periodic.command("resume")
@click.argument("job", metavar="NAMESPACE/NAME")
@server_options
@json_option
def resume(job: str, url: str, token: str | None, as_json: bool) -> None:
    """Fire again, from the next tick after now."""
    with connect(url, token) as client:
        _show(client.update_periodic(job, paused=False), as_json)


@periodic.command("trigger")
@click.argument("job", metavar="NAMESPACE/NAME")
@server_options
@json_option
def trigger(job: str, url: str, token: str | None, as_json: bool) -> None:
    """Enqueue the job's message now, once."""
    with connect(url, token) as client:
        message_id = client.trigger_periodic(job)
    emit({"id": message_id}, as_json, lambda _: click.echo(message_id))


@periodic.command("delete")
@click.argument("job", metavar="NAMESPACE/NAME")
@server_options
def delete(job: str, url: str, token: str | None) -> None:
    """Delete the job (the messages it enqueued stay)."""
    with connect(url, token) as client:
        client.delete_periodic(job)
    click.echo(f"deleted {job}")
