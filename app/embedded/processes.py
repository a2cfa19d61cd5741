"""Processes as Linux's ``/proc`` shows them: the pid a pid file names, whether a process is
alive, its children and working directory, every command line, and the processes whose
environment holds a given variable. Callers check :data:`PROC` exists where they must also work
without it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

PROC = Path("/proc")


def read_pid(pid_file: Path) -> int | None:
    """Return the pid on the first line of a pid file (PostgreSQL's, pg_autoctl's), if
    readable."""
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


def command_lines() -> Iterator[tuple[int, list[str]]]:
    """Every process readable here, with its argv."""
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                raw = (entry / "cmdline").read_bytes()
                yield int(entry.name), raw.decode(errors="replace").rstrip("\0").split("\0")


def working_dir(pid: int) -> Path | None:
    """The working directory of ``pid``; None when it is gone, a zombie or someone else's."""
    try:
        return Path(os.readlink(PROC / str(pid) / "cwd"))
    except OSError:
        return None


def with_environment(variable: str) -> list[int]:
    """Every live process but this one whose environment holds ``variable`` (``NAME=value``)."""
    marker = variable.encode()
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return [pid for pid in found if alive(pid)]
