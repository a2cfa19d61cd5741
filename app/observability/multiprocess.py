"""Several worker processes, one ``/metrics``: prometheus_client's multi-process mode.

``sundial serve`` gives every run a fresh directory (:func:`fresh_directory`) and names it in
``PROMETHEUS_MULTIPROC_DIR`` before the workers start; each worker then keeps its metric values
in files there, and whichever worker answers a scrape adds up all the files. Counters of a
worker that died stay counted (they are totals); its ``live*`` gauges are dropped, by the worker
itself at shutdown and, for a worker that crashed, by the next scrape
(:func:`forget_dead_workers`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"

# prometheus_client is imported inside the functions: it picks its mode when first imported,
# and ``sundial serve`` (which imports this module) must set ENV before that happens.


def enabled() -> bool:
    """Whether this process keeps its metrics in the shared directory (decided by
    prometheus_client when it was first imported, from the environment)."""
    from prometheus_client import values

    return values.ValueClass is not values.MutexValue


def directory() -> str | None:
    """The shared directory, when multi-process mode is on."""
    return os.environ.get(ENV) if enabled() else None


@contextlib.contextmanager
def fresh_directory() -> Iterator[Path]:
    """A new, empty directory for one server run's metric files, named in the environment the
    workers inherit, and removed when the run ends."""
    path = Path(tempfile.mkdtemp(prefix="sundial-metrics-"))
    os.environ[ENV] = str(path)
    try:
        yield path
    finally:
        os.environ.pop(ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_dead_workers(path: str) -> list[int]:
    """Drop the live gauges of worker processes that no longer exist; returns their pids."""
    dead = set()
    for file in Path(path).glob("gauge_live*_*.db"):
        suffix = file.stem.rsplit("_", 1)[-1]
        if suffix.isdigit() and not _alive(int(suffix)):
            dead.add(int(suffix))
    from prometheus_client import multiprocess

    for pid in dead:
        multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]
    return sorted(dead)


def process_exiting() -> None:
    """Drop this process's live gauges (a worker shutting down)."""
    path = directory()
    if path is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), path)  # type: ignore[no-untyped-call]
