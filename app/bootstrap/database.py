"""What stands on PostgreSQL, built here and handed out: the one module that imports the store.

The edges (the HTTP API, the dashboard, the metrics, the scheduler, the commands, the pipeline)
get a ready engine, :class:`QueueService`, read side or database URL from here and never build
them from the store themselves (``.importlinter`` checks it).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import click
import msgspec
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.config import Settings
from app.core.errors import UnavailableError
from app.core.insights import QueueInsights
from app.core.models import DEFAULT_POOL
from app.core.service import QueueService
from app.core.validation import Limits
from app.database_url import connection_defaults, psycopg_dsn

# History retention by SQL alone, with the history's advisory lock: the pipeline's prune and
# export and `sundial history prune` use them as the store writes them.
from app.store import history_lock as history_lock
from app.store import history_prune as history_prune
from app.store import migrate, pool_registry

# What the scheduler does to the database (app/scheduler), and what the metrics read
# (app/observability/database.py): handed out as the store writes them.
from app.store import scheduling as scheduling
from app.store.connections import prepare_for_failover
from app.store.insights import PooledInsights, PostgresInsights
from app.store.moves import MoveReport as MoveReport
from app.store.moves import MoveUnderWay as MoveUnderWay
from app.store.moves import NamespaceMover
from app.store.notifications import ListenerRegistrations, NotificationListener
from app.store.postgres import PostgresStore
from app.store.routing import PooledStore
from app.store.sessions import DashboardSessions
from app.store.stats import read_database_stats as read_database_stats
from app.store.stats import read_live_queue_ids as read_live_queue_ids
from app.web.waiters import WaiterRegistry

log = logging.getLogger("sundial.bootstrap")

ADMIN_TOKEN_FILE = "admin-token"  # noqa: S105 - a file name, not a secret


def create_engine(database_url: str, pool_size: int = 10) -> AsyncEngine:
    """An async engine for ``database_url`` with the pool settings the server uses.

    No pre-ping on checkout (it would cost a round trip per statement): when the database
    restarts, the first statement on a dead connection fails (503 for that request) and
    SQLAlchemy then invalidates every connection of the pool made before the failure, so the
    server recovers by itself.

    Connections get :data:`app.database_url.CONNECTION_DEFAULTS` (a connect timeout, TCP keepalives)
    unless the URL sets them: a connection to a database machine that has vanished from the
    network fails within seconds, not the kernel's minutes or hours, and a multi-host URL moves
    on to the next host. A statement that finds its connection reaching a standby (a primary
    demoted by a failover) counts as a disconnect: the pool is renewed, toward the new primary;
    and a commit cut short before the synchronous standby confirmed it is never acknowledged
    (:func:`app.store.connections.prepare_for_failover`).

    ``jsonb`` columns (a leased message's metadata, on every dequeue) are decoded by msgspec
    rather than the standard library's ``json``, several times faster for the same values.

    Sessions run in UTC whatever the database's default: timestamps come back with a whole-hour
    offset of zero (in some zones, dates before about 1900 carry offsets with seconds, which the
    JSON encoding would truncate), and the bounds of ``app.core.validation`` hold exactly.
    """
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=3600,
        connect_args={**connection_defaults(database_url), "options": "-c TimeZone=UTC"},
        json_deserializer=msgspec.json.decode,
    )
    prepare_for_failover(engine)
    return engine


def pool_urls(settings: Settings, catalogue_url: str) -> dict[str, str]:
    """Every pool's database URL by name: ``default`` (the catalogue's) first, then
    ``SUNDIAL_POOLS`` (docs/scaling.md)."""
    return {DEFAULT_POOL: catalogue_url, **settings.pools}


def build_service(engines: Mapping[str, AsyncEngine], settings: Settings) -> QueueService:
    """The queue service over PostgreSQL, one store per pool (``engines`` by pool name,
    ``default`` the catalogue's), with the configured limits and admin token."""
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    stores = {
        name: PostgresStore(engine, settings.lookup_cache_seconds, pool=name)
        for name, engine in engines.items()
    }
    return QueueService(
        PooledStore(stores),
        limits=Limits(max_payload_bytes=settings.max_payload_bytes),
        admin_token=admin,
        sealing_secret=sealing_secret(settings),
    )


def sealing_secret(settings: Settings) -> str | None:
    """What SQS access keys' secrets are sealed under (docs/sqs.md): ``SUNDIAL_SQS_SEALING_KEY``,
    else the admin token, configured or kept in the data dir (as the server finds it: a command
    run beside the server seals and opens keys as the server does)."""
    if settings.sqs_sealing_key is not None:
        return settings.sqs_sealing_key.get_secret_value()
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value()
    path = Path(settings.data_dir) / ADMIN_TOKEN_FILE
    return path.read_text().strip() if path.exists() else None


@contextlib.asynccontextmanager
async def pooled_service(
    settings: Settings, catalogue_url: str, pool_size: int
) -> AsyncIterator[QueueService]:
    """The queue service over every pool, for one command (its engines disposed after)."""
    async with _engines(settings, catalogue_url, pool_size) as engines:
        yield build_service(engines, settings)


@contextlib.asynccontextmanager
async def _engines(
    settings: Settings, catalogue_url: str, pool_size: int
) -> AsyncIterator[dict[str, AsyncEngine]]:
    engines = {
        name: create_engine(url, pool_size)
        for name, url in pool_urls(settings, catalogue_url).items()
    }
    try:
        yield engines
    finally:
        for engine in engines.values():
            await engine.dispose()


def build_insights(engines: Mapping[str, AsyncEngine], service: QueueService) -> QueueInsights:
    """The operator's read side (the dashboard's), over ``service`` and every pool's database
    (``engines`` by pool name)."""
    pools = {name: PostgresInsights(engine) for name, engine in engines.items()}
    return QueueInsights(service, PooledInsights(pools))


def dashboard_sessions(engine: AsyncEngine, idle_seconds: int) -> DashboardSessions:
    """The dashboard's server-side sessions, over PostgreSQL (live in every server process)."""
    return DashboardSessions(engine, idle_seconds)


def notification_listener(engine: AsyncEngine, waiters: WaiterRegistry) -> NotificationListener:
    """The process's LISTEN connection, waking ``waiters``, which register their queues with it
    (not started: the server's lifespan starts and stops it)."""
    listener = NotificationListener(
        psycopg_dsn(engine.url), on_notify=waiters.notify, on_connect=waiters.reconnected
    )
    waiters.registrar = ListenerRegistrations(engine, listener)
    return listener


def ensure_admin_token(settings: Settings) -> tuple[str, bool]:
    """The admin token: configured, else read from (or generated once into) the data dir.

    Returns the token and whether it was generated now (so it can be printed once).
    """
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value(), False
    path = Path(settings.data_dir) / ADMIN_TOKEN_FILE
    if path.exists():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    token = "sdl_admin_" + secrets.token_urlsafe(32)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token, True


async def read_schema_revision(engine: AsyncEngine) -> str | None:
    """The schema revision the database is at, read now."""
    async with engine.connect() as conn:
        return await conn.run_sync(migrate.database_revision)


def head_revision() -> str | None:
    """The newest schema revision this code knows."""
    return migrate.head_revision()


POOL_START_WAIT_SECONDS = 10.0
"""How long the server's start waits for a pool other than the catalogue before it serves
without it."""


@contextlib.contextmanager
def open_database(
    settings: Settings,
    *,
    migrate_schema: bool = True,
    prefer_socket: bool = False,
    serving: bool = False,
) -> Iterator[str]:
    """The database URL a command works on: the configured one, or the embedded default
    (started here).

    With ``migrate_schema``, waits for the database to accept connections (it may still be
    starting, e.g. beside the server in docker compose), then upgrades its schema to the newest
    revision. The embedded cluster is stopped again on exit if this call started it. With
    ``prefer_socket`` (the server), the embedded cluster is reached through its unix socket
    when it has one; other commands use TCP, which Spark's JDBC driver needs.
    ``serving`` (the server): see :func:`upgrade_pools`.

    Raises:
        click.ClickException: the database cannot be reached or started (said in one line).
    """
    with _database_url(settings, prefer_socket=prefer_socket) as url:
        if migrate_schema:
            try:
                migrate.wait_until_reachable(url, settings.startup_timeout_seconds)
            except migrate.DatabaseUnreachable as error:
                raise click.ClickException(str(error)) from error
            upgrade_pools(settings, url, serving=serving)
        yield url


def upgrade_pools(
    settings: Settings, catalogue_url: str, revision: str = "head", *, serving: bool = False
) -> None:
    """Migrate every pool's database to ``revision`` (the catalogue's first); at the head,
    register each as its pool (docs/scaling.md), or check that it still is.

    ``serving`` (the server's start): a pool other than the catalogue that does not answer
    within :data:`POOL_START_WAIT_SECONDS` is passed over with a warning, so that a pool that is
    down keeps only its own namespaces from being served; ``/readyz`` reports it, and namespaces
    and queues are made on it only once it is registered.

    Raises:
        click.ClickException: a pool cannot be reached, or its database is not that pool.
    """
    for name, url in pool_urls(settings, catalogue_url).items():
        try:
            if name != DEFAULT_POOL:
                wait = settings.startup_timeout_seconds
                if serving:
                    wait = min(wait, POOL_START_WAIT_SECONDS)
                try:
                    migrate.wait_until_reachable(url, wait)
                except migrate.DatabaseUnreachable as error:
                    if not serving:
                        raise
                    log.warning(
                        "pool %r does not answer; serving without it until it does (neither"
                        " migrated nor checked now): %s",
                        name,
                        error,
                    )
                    continue
            migrate.upgrade(url, revision)
            if revision == "head":
                pool_registry.register(catalogue_url, name, url)
        except (migrate.DatabaseUnreachable, pool_registry.PoolMisconfigured) as error:
            raise click.ClickException(f"pool {name!r}: {error}") from error


@contextlib.contextmanager
def _database_url(settings: Settings, *, prefer_socket: bool = False) -> Iterator[str]:
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


def namespace_mover(
    settings: Settings,
    catalogue_url: str,
    on_phase: Callable[[str], Awaitable[None]] | None = None,
) -> NamespaceMover:
    """The mover of namespaces between the configured pools (docs/scaling.md)."""
    return NamespaceMover(pool_urls(settings, catalogue_url), on_phase=on_phase)


@dataclass(frozen=True, slots=True)
class PoolState:
    """A pool as ``sundial pools list`` shows it."""

    name: str
    number: int | None
    """Its number in the catalogue (its range of queue ids); None before it is registered."""
    available: bool
    namespaces: int
    """Namespaces the catalogue places on it."""
    waiting: int | None
    """Messages waiting in it (pending or delayed); None when it does not answer."""


async def describe_pools(settings: Settings, catalogue_url: str) -> list[PoolState]:
    """Every configured pool: its number, whether it answers, its namespaces and load."""
    numbers = {p.name: p.number for p in pool_registry.registered(catalogue_url)}
    async with _engines(settings, catalogue_url, pool_size=1) as engines:
        stores = {name: PostgresStore(engine, pool=name) for name, engine in engines.items()}
        placed = Counter((await PooledStore(stores).map.read_all()).values())
        described = []
        for name, store in stores.items():
            try:
                waiting: int | None = await store.waiting_messages()
            except UnavailableError:
                waiting = None
            described.append(
                PoolState(name, numbers.get(name), waiting is not None, placed[name], waiting)
            )
        return described
