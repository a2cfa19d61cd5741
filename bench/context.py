"""What every workload of the suite is given: the environment, the sizes, the run's results and
log, and the rates measured so far (the next backlog is sized from them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.checks import record
from bench.harness import Environment
from bench.sizes import CLIENTS


@dataclass
class Ctx:
    """One suite run as the workloads see it."""

    env: Environment
    size: dict[str, Any]
    runs: int
    out: Path
    peer: bool
    profile: bool
    log: Callable[[str], None]
    results: dict[str, Any]
    seq: int = 0
    estimates: dict[str, float] = field(default_factory=dict)

    def backlog_for(self, key: str, seconds: float) -> int:
        """Messages enough for ``seconds`` at the last measured (or guessed) rate, x1.5."""
        rate = self.estimates.get(key) or self.size["guess"][key]
        return max(2_000, int(rate * seconds * 2.5))

    def learn(self, key: str, rate: float | None) -> None:
        """Remember the rate just measured for ``key``, to size its next backlog."""
        if rate:
            self.estimates[key] = rate

    def name(self, prefix: str) -> str:
        """A queue name not used before in this run."""
        self.seq += 1
        return f"{prefix}-{self.seq}"

    def timed(self, **spec: Any) -> dict[str, Any]:
        """A load generator spec with the mode's warm-up and measured window."""
        return {"warmup": self.size["warmup"], "duration": self.size["duration"], **spec}

    @property
    def dsn_uri(self) -> str:
        """PgQueuer's (asyncpg's) connection URI: through the unix socket, like the server."""
        from sqlalchemy.engine import make_url

        assert self.env.cluster is not None
        url = make_url(self.env.cluster.local_sqlalchemy_url).set(drivername="postgresql")
        return url.render_as_string(hide_password=False)  # asyncpg reads a "+" as a space


def check(ctx: Ctx, label: str, ok: bool, detail: dict[str, Any]) -> dict[str, Any]:
    """Record a correctness check in the run's results (logged if it failed)."""
    return record(ctx.results.setdefault("checks", []), label, ok, detail, ctx.log)


def drain(ctx: Ctx, path: str) -> dict[str, Any]:
    """Complete everything left in the queue (batch 100, 8 consumers, until empty)."""
    return ctx.env.loadgen(
        {"mode": "process", "queue_path": path, "clients": CLIENTS, "batch": 100, "drain": True}
    )
