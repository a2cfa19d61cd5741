"""Connections of the pipeline: plain synchronous psycopg, for COPY and set-based statements."""

from __future__ import annotations

from typing import Any, Final

import psycopg

from app.bootstrap.database import history_lock

APPLICATION_NAME: Final = "sundial-pipeline"
"""How the pipeline's sessions show in ``pg_stat_activity``."""


def connect(database_url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A new connection in UTC, named the pipeline's (the history lock's
    :func:`~app.store.history_lock.connect`)."""
    return history_lock.connect(database_url, APPLICATION_NAME, autocommit=autocommit)
