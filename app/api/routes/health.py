"""Operations endpoints at the server root, without a token: liveness and readiness."""

from __future__ import annotations

import asyncio
import logging

from litestar import get
from sqlalchemy import exc as sa_exc

from app.api.schemas.health import Health, PoolReady, Ready
from app.core.errors import UnavailableError
from app.core.models import DEFAULT_POOL
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, Pool, runtime

log = logging.getLogger("sundial.api")

READY_TIMEOUT_SECONDS = 2.0


async def database_revision(pool: Pool) -> str | None:
    """The schema revision of a pool's database.

    Raises:
        UnavailableError: the database does not answer (within 2 s).
    """
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            return await pool.schema_revision()
    except (TimeoutError, OSError, sa_exc.SQLAlchemyError) as error:
        log.warning("readiness check: pool %r unavailable: %s", pool.name, error)
        what = "the database" if pool.name == DEFAULT_POOL else f"pool {pool.name!r}"
        raise UnavailableError(f"{what} is unavailable") from error


async def _pool_ready(pool: Pool, head: str | None) -> PoolReady:
    """How a pool is: ready, or unavailable; 503 when its schema is not at the head."""
    try:
        revision = await database_revision(pool)
    except UnavailableError:
        if pool.name == DEFAULT_POOL:
            raise
        return PoolReady("unavailable", None)
    if revision != head:
        what = "the database" if pool.name == DEFAULT_POOL else f"pool {pool.name!r}"
        raise UnavailableError(
            f"{what} schema is at {revision}, not {head}: run sundial db upgrade",
            revision=revision,
            head=head,
            pool=pool.name,
        )
    return PoolReady("ready", revision)


@get("/healthz", tags=["operations"])
async def healthz() -> Health:
    """200 while the process is up."""
    return Health()


@get("/readyz", tags=["operations"], responses=error_specs(503))
async def readyz(request: AnyRequest) -> Ready:
    """200 when the catalogue's database answers and its schema is at the head revision, and so
    is every pool's that answers (a pool that does not is reported, and only its namespaces
    answer 503); else 503."""
    rt = runtime(request)
    pools = await asyncio.gather(
        *(_pool_ready(pool, rt.head_revision) for pool in rt.pools.values())
    )
    by_name = dict(zip(rt.pools, pools, strict=True))
    return Ready("ready", by_name[DEFAULT_POOL].revision, by_name)


HANDLERS = [healthz, readyz]
