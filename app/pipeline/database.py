"""Connections of the pipeline: plain synchronous psycopg, for COPY and set-based statements."""

from __future__ import annotations

from typing import Any

import psycopg

from app.database_url import psycopg_dsn


def connect(database_url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A new connection in UTC, named so operators can tell it in ``pg_stat_activity``."""
    return psycopg.connect(
        psycopg_dsn(database_url),
        autocommit=autocommit,
        application_name="sundial-pipeline",
        options="-c TimeZone=UTC",
    )
