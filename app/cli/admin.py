"""The ``sundial`` command: serve, database migrations, and operator administration.

Argument parsing and printing only; the work is done by :mod:`app.bootstrap`, the store's
migrations and the queue service.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from app import bootstrap
from app.cli.database import database, split_queue_path
from app.cli.dev_cluster import dev_cluster
from app.cli.messages import COMMANDS as MESSAGE_COMMANDS
from app.cli.pipeline import pipeline
from app.cli.reader import create_reader
from app.cli.work import work
from app.config import Settings, describe_invalid, get_settings
from app.core.errors import SundialError
from app.core.models import QueueConfig
from app.core.service import QueueService

T = TypeVar("T")


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _server_settings() -> Settings:
    """The configuration, or a stop with what is wrong in it (no traceback, no values)."""
    try:
        return get_settings()
    except ValidationError as error:
        raise click.ClickException(describe_invalid(error)) from None


@click.group()
@click.version_option(package_name="sundial")
def main() -> None:
    """Sundial: a priority and delay queue server backed by PostgreSQL."""


@main.command()
@click.option("--host", help="Address to bind (default: SUNDIAL_HOST or 127.0.0.1).")
@click.option("--port", type=int, help="Port to bind (default: SUNDIAL_PORT or 8080).")
@click.option("--workers", type=int, help="Worker processes (default: SUNDIAL_WORKERS or cores).")
@click.option("--no-migrate", is_flag=True, help="Do not apply pending migrations at start.")
def serve(host: str | None, port: int | None, workers: int | None, no_migrate: bool) -> None:
    """Run the HTTP server (and the background scheduler).

    Without SUNDIAL_DATABASE_URL, a private PostgreSQL cluster is created in SUNDIAL_DATA_DIR
    (default ./.sundial) and started; its data survives restarts.
    """
    import uvicorn

    settings = _server_settings()
    _configure_logging(settings.log_level)
    updates: dict[str, Any] = {
        key: value
        for key, value in {"host": host, "port": port, "workers": workers}.items()
        if value is not None
    }
    settings = settings.model_copy(update=updates)
    embedded = settings.database_url is None
    with database(settings, migrate=not no_migrate, prefer_socket=True) as url:
        admin_token = None
        if embedded or settings.admin_token is None:
            admin_token, generated = bootstrap.ensure_admin_token(settings)
            if generated:
                click.echo(f"Generated admin token (kept in {settings.data_dir}): {admin_token}")
        # Workers are separate processes: hand them the resolved configuration.
        os.environ["SUNDIAL_DATABASE_URL"] = url
        if admin_token is not None:
            os.environ["SUNDIAL_ADMIN_TOKEN"] = admin_token
        get_settings.cache_clear()
        _server_settings()  # what the workers will read, the data dir's admin token included
        click.echo(
            f"Sundial listening on http://{settings.host}:{settings.port}"
            f" ({settings.workers} workers); API docs at /schema"
        )
        # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal to the
        # handler it found: make that a normal exit, so the embedded database is stopped too.
        signal.signal(signal.SIGTERM, _exit_normally)
        # Workers add up their metrics through files in a directory of this run's own.
        from app.observability.multiprocess import fresh_directory

        with fresh_directory():
            uvicorn.run(
                "app.api.app:create_app_from_env",
                factory=True,
                host=settings.host,
                port=settings.port,
                workers=settings.workers,
                loop="uvloop",
                http="httptools",
                log_level=settings.log_level.lower(),
                access_log=False,
                timeout_graceful_shutdown=25,
            )


def _exit_normally(signum: int, frame: object) -> None:
    raise SystemExit(0)


# --- database ---------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """Database schema migrations (Alembic)."""


@db.command()
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Apply migrations up to REVISION (default: head)."""
    from app.store import migrate

    with database(get_settings(), migrate=False) as url:
        migrate.upgrade(url, revision)


@db.command()
@click.argument("revision")
def downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (`base` removes the schema)."""
    from app.store import migrate

    with database(get_settings(), migrate=False) as url:
        migrate.downgrade(url, revision)


@db.command()
def current() -> None:
    """Show the database's current revision."""
    from app.store import migrate

    with database(get_settings(), migrate=False) as url:
        migrate.current(url)


@db.command()
def history() -> None:
    """List the migration history."""
    from app.store import migrate

    migrate.history()


@db.command()
def check() -> None:
    """Fail if the models and the migrations disagree."""
    from alembic.util.exc import AutogenerateDiffsDetected

    from app.store import migrate

    with database(get_settings(), migrate=False) as url:
        try:
            migrate.check(url)
        except AutogenerateDiffsDetected as error:
            raise click.ClickException(str(error)) from error


# --- administration -----------------------------------------------------------------------------


def _run(work: Callable[[QueueService], Awaitable[T]]) -> T:
    """Run one service call against the configured (or embedded) database."""
    settings = get_settings()

    async def call(url: str) -> T:
        engine = bootstrap.create_engine(url, pool_size=2)
        try:
            return await work(bootstrap.build_service(engine, settings))
        finally:
            await engine.dispose()

    # An embedded database is this command's own: bring it to the newest schema on first use.
    with database(settings, migrate=settings.database_url is None) as url:
        try:
            return asyncio.run(call(url))
        except SundialError as error:
            raise click.ClickException(f"{error.code}: {error.message}") from error


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


@main.group()
def namespace() -> None:
    """Manage namespaces (tenants)."""


@namespace.command("create")
@click.argument("name")
@click.option("--description", default="")
def namespace_create(name: str, description: str) -> None:
    """Create namespace NAME."""
    _print(_run(lambda s: s.create_namespace(name, description)))


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


@main.group()
def token() -> None:
    """Manage namespace tokens."""


@token.command("issue")
@click.argument("namespace_name", metavar="NAMESPACE")
@click.option("--label", default="")
def token_issue(namespace_name: str, label: str) -> None:
    """Issue a token for NAMESPACE (its secret is shown only now)."""
    issued = _run(lambda s: s.issue_token(namespace_name, label))
    _print({"token": issued.secret, **_plain(issued.token)})


@token.command("list")
@click.argument("namespace_name", metavar="NAMESPACE")
def token_list(namespace_name: str) -> None:
    """List NAMESPACE's tokens (without secrets)."""
    _print(_run(lambda s: s.list_tokens(namespace_name)))


@token.command("revoke")
@click.argument("namespace_name", metavar="NAMESPACE")
@click.argument("token_id")
def token_revoke(namespace_name: str, token_id: str) -> None:
    """Revoke token TOKEN_ID of NAMESPACE at once."""
    _run(lambda s: s.revoke_token(namespace_name, token_id))


@main.group()
def queue() -> None:
    """Manage queues (NAMESPACE/QUEUE)."""


@queue.command("create")
@click.argument("queue_path", metavar="NAMESPACE/QUEUE")
@click.option("--exclusive-key", help="Make an exclusive queue keyed on this metadata key.")
@click.option(
    "--filter-key",
    help="Index this metadata key's value for filtered dequeues (fixed at creation).",
)
@click.option("--lease-seconds", type=int, default=30, show_default=True)
@click.option("--max-attempts", type=int, default=3, show_default=True)
@click.option("--delay-seconds", type=int, default=0, show_default=True)
@click.option("--retry-delay-seconds", type=int, default=0, show_default=True)
@click.option("--retention-seconds", type=int, default=604800, show_default=True)
def queue_create(
    queue_path: str,
    exclusive_key: str | None,
    filter_key: str | None,
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
        filter_key=filter_key,
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


for _command in (*MESSAGE_COMMANDS, work, pipeline, dev_cluster):
    main.add_command(_command)
db.add_command(create_reader)


if __name__ == "__main__":
    main()
