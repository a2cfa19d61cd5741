"""Locate the PostgreSQL server binaries (``initdb``, ``postgres``, ``pg_ctl``).

The search order is:

1. an explicit directory given by the caller (the CLI passes ``SUNDIAL_PG_BINDIR``
   from :mod:`app.config`; this module never reads the environment itself),
2. ``pg_config --bindir``, but only if that directory really holds the server
   binaries (Debian's ``pg_config`` comes with the client package and points at
   a server directory that may not be installed),
3. the highest-numbered ``/usr/lib/postgresql/<version>/bin`` (Debian/Ubuntu),
4. the directory of ``initdb`` found on ``PATH``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SERVER_BINARIES", "PostgresNotFound", "find_postgres_bindir"]

logger = logging.getLogger("sundial.embedded")

SERVER_BINARIES: tuple[str, ...] = ("initdb", "postgres", "pg_ctl")
"""Programs that a usable bindir must contain."""

DEBIAN_LIB_DIR = Path("/usr/lib/postgresql")


class PostgresNotFound(RuntimeError):
    """Raised when no directory with the PostgreSQL server binaries can be found."""


def find_postgres_bindir(override: Path | None = None) -> Path:
    """Return the directory that contains ``initdb``, ``postgres`` and ``pg_ctl``.

    Args:
        override: A directory chosen by the user (e.g. from ``SUNDIAL_PG_BINDIR``).
            When given, it is the only candidate: a wrong override is an error
            rather than something to silently work around.

    Returns:
        The first candidate directory that holds all server binaries.

    Raises:
        PostgresNotFound: No candidate holds the binaries. The message explains
            how to install PostgreSQL and how to point Sundial at it.
    """
    if override is not None:
        if has_server_binaries(override):
            return override
        raise PostgresNotFound(_not_found_message([override], explicit=True))

    searched: list[Path] = []
    for candidate in _candidates():
        searched.append(candidate)
        if has_server_binaries(candidate):
            logger.debug("using PostgreSQL binaries in %s", candidate)
            return candidate
    raise PostgresNotFound(_not_found_message(searched, explicit=False))


def has_server_binaries(directory: Path) -> bool:
    """Tell whether ``directory`` holds executable ``initdb``, ``postgres`` and ``pg_ctl``.

    Args:
        directory: The directory to inspect.

    Returns:
        True if every program in :data:`SERVER_BINARIES` is an executable file there.
    """
    return all(_is_executable(directory / name) for name in SERVER_BINARIES)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _candidates() -> Iterator[Path]:
    pg_config_dir = _pg_config_bindir()
    if pg_config_dir is not None:
        yield pg_config_dir
    yield from _debian_bindirs()
    yield from _path_bindirs()


def _pg_config_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        result = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.debug("pg_config --bindir failed: %s", exc)
        return None
    output = result.stdout.strip()
    if result.returncode != 0 or not output:
        return None
    return Path(output)


def _version_key(name: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in name.split("."))
    except ValueError:
        return None


def _debian_bindirs() -> list[Path]:
    """Return ``/usr/lib/postgresql/<version>/bin`` directories, highest version first."""
    if not DEBIAN_LIB_DIR.is_dir():
        return []
    versioned: list[tuple[tuple[int, ...], Path]] = []
    for entry in DEBIAN_LIB_DIR.iterdir():
        key = _version_key(entry.name)
        if key is not None:
            versioned.append((key, entry / "bin"))
    versioned.sort(reverse=True)
    return [path for _, path in versioned]


def _path_bindirs() -> list[Path]:
    """Return the directory of ``initdb`` on PATH, then that of its symlink target."""
    initdb = shutil.which("initdb")
    if initdb is None:
        return []
    found = Path(initdb)
    return list(dict.fromkeys([found.parent, found.resolve().parent]))


def _install_hint() -> str:
    sudo = "" if os.geteuid() == 0 else "sudo "
    return (
        "Install the PostgreSQL server:\n"
        f"  Debian/Ubuntu: {sudo}apt-get update && "
        f"{sudo}apt-get install -y postgresql\n"
        "  macOS (Homebrew): brew install postgresql@16\n"
        "or set SUNDIAL_PG_BINDIR to the directory that contains initdb, postgres and pg_ctl "
        "(for example /usr/lib/postgresql/16/bin)."
    )


def _not_found_message(searched: list[Path], *, explicit: bool) -> str:
    names = ", ".join(SERVER_BINARIES)
    if explicit:
        head = f"The PostgreSQL binaries directory {searched[0]} does not contain {names}."
    else:
        where = ", ".join(str(path) for path in searched) or "nothing found to search"
        head = (
            f"PostgreSQL server binaries ({names}) were not found "
            f"(searched pg_config --bindir, {DEBIAN_LIB_DIR}/*/bin and PATH: {where})."
        )
    return f"{head}\n{_install_hint()}"
