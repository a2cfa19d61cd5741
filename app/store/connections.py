"""Connections for the store's read sides (dashboard insights, dashboard sessions): one place
that turns a lost or overloaded database into :class:`UnavailableError`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.errors import UnavailableError

log = logging.getLogger("sundial.store")


@asynccontextmanager
async def available(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection of ``engine``; a lost or overloaded database is UnavailableError."""
    try:
        async with engine.connect() as conn:
            yield conn
    except sa_exc.TimeoutError as error:
        raise UnavailableError("the server is busy; retry later") from error
    except (sa_exc.OperationalError, sa_exc.InterfaceError, OSError) as error:
        log.warning("database unavailable: %s", error)
        raise UnavailableError("the database is unavailable; retry later") from error
