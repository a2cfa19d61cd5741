"""The database a command works on: the configured one, or the embedded default, started on
demand; and the ``NAMESPACE/QUEUE`` argument every queue command takes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import click

from app.config import Settings

log = logging.getLogger("sundial.cli")


@contextlib.contextmanager
def database(
    settings: Settings, *, migrate: bool = True, prefer_socket: bool = False
) -> Iterator[str]:
    """The database URL to use: the configured one, or the embedded default (started here).

    With ``migrate``, waits for the database to accept connections (it may still be starting,
    e.g. beside the server in docker compose), then upgrades its schema to the newest revision.
    The embedded cluster is stopped again on exit if this call started it. With
    ``prefer_socket`` (the server), the embedded cluster is reached through its unix socket
    when it has one; other commands use TCP, which Spark's JDBC driver needs.
    """
    with database_url(settings, prefer_socket=prefer_socket) as url:
        if migrate:
            from app.store import migrate as migrations

            try:
                migrations.wait_until_reachable(url, settings.startup_timeout_seconds)
            except migrations.DatabaseUnreachable as error:
                raise click.ClickException(str(error)) from error
            migrations.upgrade(url)
        yield url


@contextlib.contextmanager
def database_url(settings: Settings, *, prefer_socket: bool = False) -> Iterator[str]:
    if settings.database_url is not None:
        yield settings.database_url
        return
    from app.embedded import LocalCluster, PostgresNotFound

    try:
        cluster = LocalCluster(settings.data_dir.resolve() / "postgres", bindir=settings.pg_bindir)
        was_running = cluster.is_running()
        cluster.ensure_initialized()
        cluster.start()
    except PostgresNotFound as error:
        raise click.ClickException(str(error)) from error
    log.info("embedded PostgreSQL in %s on port %d", cluster.data_dir, cluster.port)
    try:
        yield cluster.local_sqlalchemy_url if prefer_socket else cluster.sqlalchemy_url
    finally:
        if not was_running:
            cluster.stop()


def split_queue_path(queue_path: str) -> tuple[str, str]:
    namespace_name, _, queue_name = queue_path.partition("/")
    if not namespace_name or not queue_name:
        raise click.BadParameter("use NAMESPACE/QUEUE", param_hint="QUEUE")
    return namespace_name, queue_name
