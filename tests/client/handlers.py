"""Handlers for worker tests, importable by a `sundial work` subprocess."""

from __future__ import annotations

import sys
import time

from app.client import Leased

WORK_SECONDS = 0.3


def print_and_work(message: Leased) -> None:
    """Announce the start on stdout (the test waits for it), then work a little."""
    sys.stdout.write(f"start {message.id}\n")  # one write: lines from threads do not mix
    sys.stdout.flush()
    time.sleep(WORK_SECONDS)  # the work itself, not synchronisation


def echo(message: Leased) -> object:
    """Reply with the payload."""
    return {"echo": message.payload}


def fail_loudly(message: Leased) -> None:
    print(f"failing {message.id}", file=sys.stderr)
    raise RuntimeError("handler exploded")
