"""The PostgreSQL server programs a private cluster or formation runs: who runs them (an
unprivileged account when we are root) and where they are, each found once, on first use."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from app.embedded.binaries import find_postgres_bindir
from app.embedded.privileges import PgAccount, get_pg_account


class ServerPrograms:
    """``bindir`` overrides the search for the binaries (:func:`find_postgres_bindir`)."""

    def __init__(self, bindir: Path | None = None) -> None:
        self._bindir_override = bindir

    @cached_property
    def account(self) -> PgAccount:
        """The account that runs the programs (:func:`get_pg_account`)."""
        return get_pg_account()

    @cached_property
    def bindir(self) -> Path:
        """The directory of ``initdb``, ``pg_ctl`` and ``postgres``."""
        return find_postgres_bindir(self._bindir_override)
