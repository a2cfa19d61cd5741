"""Operations endpoints at the server root, without a token: liveness and readiness."""

from __future__ import annotations

import asyncio
import logging

from litestar import get
from sqlalchemy import exc as sa_exc

from app.api.schemas.health import Health, Ready
from app.core.errors import UnavailableError
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, Runtime, runtime

log = logging.getLogger("sundial.api")

READY_TIMEOUT_SECONDS = 2.0


async def database_revision(rt: Runtime) -> str | None:
    """The schema revision of the database.

    Raises:
        UnavailableError: the database does not answer (within 2 s).
    """
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            return await rt.schema_revision()
    except (TimeoutError, OSError, sa_exc.SQLAlchemyError) as error:
        log.warning("readiness check: database unavailable: %s", error)
        raise UnavailableError("the database is unavailable") from error


@get("/healthz", tags=["operations"])
async def healthz() -> Health:
    """200 while the process is up."""
    return Health()


@get("/readyz", tags=["operations"], responses=error_specs(503))
async def readyz(request: AnyRequest) -> Ready:
    """200 when the database answers and its schema is at the head revision, else 503."""
    rt = runtime(request)
    revision = await database_revision(rt)
    if revision != rt.head_revision:
        raise UnavailableError(
            f"the database schema is at {revision}, not {rt.head_revision}: run sundial db upgrade",
            revision=revision,
            head=rt.head_revision,
        )
    return Ready("ready", revision)


HANDLERS = [healthz, readyz]
