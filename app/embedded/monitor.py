"""The pg_auto_failover monitor of a formation: how it is tuned, and what it says of the nodes
(:class:`NodeState`), read from its own database."""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg

from app.embedded.errors import FormationError

MONITOR_SETTINGS: dict[str, int] = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 4000,
}
"""The monitor's timeouts (ms), tuned so that an unplanned failover takes seconds, not the
defaults' ~50 s: a dead primary is noticed within ~3 s, and its standby is promoted ~4 s later
if the primary has not reported itself demoted."""


@dataclass(frozen=True)
class NodeState:
    """One node as the monitor sees it."""

    name: str
    port: int
    reported: str
    """The state the node's keeper last reported (``primary``, ``secondary``, ...)."""
    assigned: str
    """The state the monitor wants the node in."""
    healthy: bool
    """Whether the monitor's last health check of the node's PostgreSQL succeeded."""

    @property
    def settled(self) -> bool:
        """Whether the node is where the monitor wants it."""
        return self.reported == self.assigned

    @property
    def writable(self) -> bool:
        """Whether the node is a primary accepting writes (alone or with its standby): the
        monitor's last check of it succeeded, and it is where the monitor wants it."""
        return (
            self.healthy and self.settled and self.reported in ("single", "wait_primary", "primary")
        )


def read_nodes(monitor_dsn: str) -> list[NodeState]:
    """Every node as the monitor sees it now.

    Raises:
        FormationError: the monitor cannot be asked.
    """
    try:
        with psycopg.connect(monitor_dsn, connect_timeout=3, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT nodename, nodeport, reportedstate::text, goalstate::text, health = 1"
                " FROM pgautofailover.node ORDER BY nodename"
            ).fetchall()
    except psycopg.Error as error:
        raise FormationError(f"the monitor cannot be asked: {error}") from error
    return [NodeState(*row) for row in rows]


def tune(monitor_dsn: str, timeout: float) -> None:
    """Set :data:`MONITOR_SETTINGS` on a monitor that has just started, waiting up to
    ``timeout`` seconds for it to accept connections."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(monitor_dsn, connect_timeout=3, autocommit=True) as conn:
                for name, value in MONITOR_SETTINGS.items():
                    conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
                conn.execute("SELECT pg_reload_conf()")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
