"""Wiring: the one module that joins the core to the store. Edges (HTTP API, CLI, scheduler)
get a ready :class:`QueueService` or engine from here and never build them themselves.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import msgspec
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.config import Settings
from app.core.insights import QueueInsights
from app.core.service import QueueService
from app.core.validation import Limits
from app.database_url import connection_defaults
from app.store.connections import prepare_for_failover
from app.store.insights import PostgresInsights
from app.store.postgres import PostgresStore

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


def build_service(engine: AsyncEngine, settings: Settings) -> QueueService:
    """The queue service over PostgreSQL, with the configured limits and admin token."""
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    return QueueService(
        PostgresStore(engine, settings.lookup_cache_seconds),
        limits=Limits(max_payload_bytes=settings.max_payload_bytes),
        admin_token=admin,
    )


def build_insights(engine: AsyncEngine, service: QueueService) -> QueueInsights:
    """The operator's read side (the dashboard's), over ``service`` and PostgreSQL."""
    return QueueInsights(service, PostgresInsights(engine))


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
