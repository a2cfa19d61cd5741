"""``sundial dead-letters requeue | delete``: a queue's dead letters (errored or canceled
messages) in bulk, over HTTP through :class:`app.client.Client`, as ``POST …/requeue`` and
``POST …/dead-letters/delete`` take them: up to ``--limit``, oldest finished first, by state and
optionally by id (docs/api.md, "Dead letters")."""

from __future__ import annotations

from datetime import datetime

import click

from app.client.commands import F, connect, emit, json_option, server_options


def _selection(command: F) -> F:
    """``--state``, ``--id`` and ``--limit``: which dead letters."""
    command = click.option(
        "--limit",
        type=int,
        help="Most dead letters to take, oldest finished first (1-100000) [default: 1000].",
    )(command)
    command = click.option(
        "--id", "ids", multiple=True, help="Only this message (repeat; up to 1000)."
    )(command)
    return click.option(
        "--state",
        "states",
        multiple=True,
        type=click.Choice(["errored", "canceled"]),
        help="Dead letters in this state (repeat) [default: errored].",
    )(command)


@click.group("dead-letters")
def dead_letters() -> None:
    """Requeue or delete a queue's dead letters in bulk."""


@dead_letters.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@_selection
@click.option("--delay", type=int, help="Seconds before they become visible (default 0).")
@click.option("--ttl", type=int, help="Seconds after the requeue at which they expire.")
@click.option(
    "--expires-at",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z"]),
    help="When they expire, e.g. 2030-01-01T00:00:00+00:00 (instead of --ttl).",
)
@server_options
@json_option
def requeue(
    queue: str,
    states: tuple[str, ...],
    ids: tuple[str, ...],
    limit: int | None,
    delay: int | None,
    ttl: int | None,
    expires_at: datetime | None,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Send dead letters back to pending, attempts reset; they expire after --ttl or at
    --expires-at, else never."""
    with connect(url, token) as client:
        requeued = client.requeue_dead_letters(
            queue,
            states or ("errored",),
            ids or None,
            limit,
            delay_seconds=delay,
            ttl_seconds=ttl,
            expires_at=expires_at,
        )
    _report({"requeued": requeued}, f"requeued {requeued}", as_json)


@dead_letters.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@_selection
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@server_options
@json_option
def delete(
    queue: str,
    states: tuple[str, ...],
    ids: tuple[str, ...],
    limit: int | None,
    yes: bool,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Delete dead letters for good: the ones ``requeue`` would take."""
    if not yes:
        click.confirm(f"Delete dead letters of {queue} for good?", abort=True, err=True)
    with connect(url, token) as client:
        deleted = client.delete_dead_letters(queue, states or ("errored",), ids or None, limit)
    _report({"deleted": deleted}, f"deleted {deleted}", as_json)


def _report(answer: dict[str, int], line: str, as_json: bool) -> None:
    """The answer as JSON (``--json``), else as a line."""
    emit(answer, as_json, lambda _: click.echo(line))
