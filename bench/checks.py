"""The correctness checks' record: each check is kept with the run's results, and a failed one is
said at once (a failed check makes the bench's exit status 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _print(message: str) -> None:
    print(message, flush=True)


def record(
    checks: list[dict[str, Any]],
    label: str,
    ok: bool,
    detail: dict[str, Any],
    say: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Append the check ``label`` (``ok`` and ``detail``) to ``checks``; say it if it failed."""
    entry = {"check": label, "ok": bool(ok), **detail}
    checks.append(entry)
    if not ok:
        say(f"  !! correctness check FAILED: {label}: {detail}")
    return entry
