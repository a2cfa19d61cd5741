"""Signals around a bench run: SIGTERM interrupts it as Ctrl-C does, and its clean-up is not
cut short by a second one (what it started, detached servers and clusters, must not outlive
it). Shared by the benches that run only when named (bench/failover, bench/pools)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM interrupts the run as Ctrl-C does, so that it cleans up on either."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Cleaning up is not cut short by a second Ctrl-C."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
