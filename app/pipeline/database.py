"""Connections of the pipeline: plain synchronous psycopg, for COPY and set-based statements."""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy.engine import make_url


def conninfo(database_url: str) -> str:
    """The libpq connection string for Sundial's SQLAlchemy URL (``postgresql+psycopg://``)."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def connect(database_url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A new connection in UTC, named so operators can tell it in ``pg_stat_activity``."""
    return psycopg.connect(
        conninfo(database_url),
        autocommit=autocommit,
        application_name="sundial-pipeline",
        options="-c TimeZone=UTC",
    )
