"""The lock that serialises, between processes, what changes a private server's directory
(creating, starting, stopping): flock(2) on its ``.lock`` file."""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("sundial.embedded")


@contextlib.contextmanager
def directory_lock(directory: Path, *, log_wait: bool = False) -> Iterator[None]:
    """Hold the lock of ``directory`` (created if missing) while the block runs, waiting for
    another process that holds it; with ``log_wait``, say so when it has to wait."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as handle:
        if log_wait:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info("waiting for another process using %s", directory)
                fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
