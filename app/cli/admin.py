"""Operator administration: ``sundial namespace | token | queue``, on the configured database
(or the embedded default), through the queue service the composition root hands out.

Argument parsing and printing only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, TypeVar

import click

from app.bootstrap import database
from app.commandline import split_queue_path
from app.config import get_settings
from app.core.errors import SundialError
from app.core.models import QueueConfig, QueueOrdering, Token
from app.core.service import QueueService

T = TypeVar("T")


def _run(work: Callable[[QueueService], Awaitable[T]]) -> T:
    """Run one service call against the configured (or embedded) database."""
    settings = get_settings()

    async def call(url: str) -> T:
        async with database.pooled_service(settings, url, pool_size=2) as service:
            return await work(service)

    # An embedded database is this command's own: bring it to the newest schema on first use.
    with database.open_database(settings, migrate_schema=settings.database_url is None) as url:
        try:
            return asyncio.run(call(url))
        except SundialError as error:
            raise click.ClickException(f"{error.code}: {error.message}") from error


def _token(token: Token) -> dict[str, Any]:
    """A token as printed: its fields and its kind (``bearer``, or ``sqs`` for an access key)."""
    kind = "bearer" if token.access_key_id is None else "sqs"
    return {**_plain(token), "kind": kind}


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _print(value: Any) -> None:
    click.echo(json.dumps(_plain(value), indent=2, sort_keys=True))


@click.group()
def namespace() -> None:
    """Manage namespaces (tenants)."""


@namespace.command("create")
@click.argument("name")
@click.option("--description", default="")
@click.option("--pool", help="The pool to hold it (default: the one with fewest waiting messages).")
def namespace_create(name: str, description: str, pool: str | None) -> None:
    """Create namespace NAME."""
    _print(_run(lambda s: s.create_namespace(name, description, pool)))


@namespace.command("list")
def namespace_list() -> None:
    """List namespaces."""
    _print(_run(lambda s: s.list_namespaces()))


@namespace.command("delete")
@click.argument("name")
@click.confirmation_option(prompt="Delete the namespace with all its queues and messages?")
def namespace_delete(name: str) -> None:
    """Delete namespace NAME with everything in it."""
    _run(lambda s: s.delete_namespace(name))


@click.group()
def token() -> None:
    """Manage namespace tokens."""


@token.command("issue")
@click.argument("namespace_name", metavar="NAMESPACE")
@click.option("--label", default="")
@click.option(
    "--sqs",
    is_flag=True,
    help="Issue an SQS access key (an access key id and a secret access key) for the SQS door.",
)
@click.option("--read-rate", type=float, help="Read requests per second (default: no limit).")
@click.option("--write-rate", type=float, help="Write requests per second (default: no limit).")
def token_issue(
    namespace_name: str,
    label: str,
    sqs: bool,
    read_rate: float | None,
    write_rate: float | None,
) -> None:
    """Issue a token for NAMESPACE (its secret is shown only now)."""
    if sqs:
        issued = _run(
            lambda s: s.issue_access_key(
                namespace_name, label, read_rate=read_rate, write_rate=write_rate
            )
        )
        _print({"secret_access_key": issued.secret, **_token(issued.token)})
        return
    issued = _run(
        lambda s: s.issue_token(namespace_name, label, read_rate=read_rate, write_rate=write_rate)
    )
    _print({"token": issued.secret, **_token(issued.token)})


def _rate(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    """A rate option: a number of requests per second, or ``none`` (no limit)."""
    if value is None or value.lower() == "none":
        return None
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter("a number of requests per second, or none") from None


@token.command("limit")
@click.argument("namespace_name", metavar="NAMESPACE")
@click.argument("token_id")
@click.option("--read-rate", callback=_rate, help="Read requests per second, or none.")
@click.option("--write-rate", callback=_rate, help="Write requests per second, or none.")
@click.pass_context
def token_limit(
    ctx: click.Context,
    namespace_name: str,
    token_id: str,
    read_rate: float | None,
    write_rate: float | None,
) -> None:
    """Set token TOKEN_ID's rate limits (requests per second, or `none` for no limit; an option
    left out stays); the change applies to its next request, in every server."""
    changes = {
        name: rate
        for name, rate in (("read_rate", read_rate), ("write_rate", write_rate))
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    }
    _print(_token(_run(lambda s: s.set_token_limits(namespace_name, token_id, changes))))


@token.command("list")
@click.argument("namespace_name", metavar="NAMESPACE")
def token_list(namespace_name: str) -> None:
    """List NAMESPACE's tokens (without secrets)."""
    _print([_token(t) for t in _run(lambda s: s.list_tokens(namespace_name))])


@token.command("revoke")
@click.argument("namespace_name", metavar="NAMESPACE")
@click.argument("token_id")
def token_revoke(namespace_name: str, token_id: str) -> None:
    """Revoke token TOKEN_ID of NAMESPACE at once."""
    _run(lambda s: s.revoke_token(namespace_name, token_id))


@click.group()
def queue() -> None:
    """Manage queues (NAMESPACE/QUEUE)."""


@queue.command("create")
@click.argument("queue_path", metavar="NAMESPACE/QUEUE")
@click.option("--exclusive-key", help="Make an exclusive queue keyed on this metadata key.")
@click.option(
    "--filter-key",
    "filter_keys",
    multiple=True,
    help="Index this metadata key's value for filtered dequeues (fixed at creation;"
    " give it twice for two keys).",
)
@click.option(
    "--ordering",
    type=click.Choice(["priority", "due"]),
    default="priority",
    show_default=True,
    help="Serve by priority, or by due time first (fixed at creation).",
)
@click.option("--lease-seconds", type=int, default=30, show_default=True)
@click.option("--max-attempts", type=int, default=3, show_default=True)
@click.option("--delay-seconds", type=int, default=0, show_default=True)
@click.option("--retry-delay-seconds", type=int, default=0, show_default=True)
@click.option("--retention-seconds", type=int, default=604800, show_default=True)
def queue_create(
    queue_path: str,
    exclusive_key: str | None,
    filter_keys: tuple[str, ...],
    ordering: QueueOrdering,
    lease_seconds: int,
    max_attempts: int,
    delay_seconds: int,
    retry_delay_seconds: int,
    retention_seconds: int,
) -> None:
    """Create (or reconfigure) a queue."""
    ns, name = split_queue_path(queue_path)
    config = QueueConfig(
        kind="exclusive" if exclusive_key else "simple",
        exclusive_key=exclusive_key,
        filter_keys=filter_keys,
        ordering=ordering,
        lease_seconds=lease_seconds,
        max_attempts=max_attempts,
        delay_seconds=delay_seconds,
        retry_delay_seconds=retry_delay_seconds,
        retention_seconds=retention_seconds,
    )
    created_queue, created = _run(lambda s: s.put_queue(ns, name, config))
    _print({"created": created, "queue": created_queue})


@queue.command("list")
@click.argument("namespace_name", metavar="NAMESPACE")
def queue_list(namespace_name: str) -> None:
    """List NAMESPACE's queues with message counts."""
    rows = _run(lambda s: s.list_queues(namespace_name))
    _print([{"queue": q, "counts": counts} for q, counts in rows])


@queue.command("show")
@click.argument("queue_path", metavar="NAMESPACE/QUEUE")
def queue_show(queue_path: str) -> None:
    """Show a queue's configuration and counts."""
    ns, name = split_queue_path(queue_path)
    _print(_run(lambda s: s.queue_detail(ns, name)))


@queue.command("pause")
@click.argument("queue_path", metavar="NAMESPACE/QUEUE")
@click.option("--enqueue/--no-enqueue", default=True, help="Pause enqueue.")
@click.option("--dequeue/--no-dequeue", default=True, help="Pause dequeue.")
def queue_pause(queue_path: str, enqueue: bool, dequeue: bool) -> None:
    """Pause a queue (enqueue and dequeue by default)."""
    ns, name = split_queue_path(queue_path)
    changes = {
        k: True for k, v in {"enqueue_paused": enqueue, "dequeue_paused": dequeue}.items() if v
    }
    _print(_run(lambda s: s.update_queue(ns, name, changes)))


@queue.command("resume")
@click.argument("queue_path", metavar="NAMESPACE/QUEUE")
def queue_resume(queue_path: str) -> None:
    """Resume a paused queue."""
    ns, name = split_queue_path(queue_path)
    changes = {"enqueue_paused": False, "dequeue_paused": False}
    _print(_run(lambda s: s.update_queue(ns, name, changes)))
