"""The faults of a pg_auto_failover formation (``CampaignConfig.ha``): :data:`HA_FAULTS`.

``switchover`` (planned: the standby takes over), ``kill_primary`` (SIGKILL of the primary's
keeper and PostgreSQL; the standby is promoted, then the killed node is started again and must
rejoin as the standby) and ``stop_standby`` (the standby stops cleanly; the primary serves alone,
without synchronous replication, for a few seconds; the standby comes back). After each the
formation must be healthy again (a primary and a caught-up standby) before the next fault.

A kill of the primary and a switchover both count as database crashes for the checks (see
:mod:`tests.faults.checks`, Crashes), to be safe: a claim's commit waits for the standby like any
other, so the new primary knows every lease the old one granted, and ``leases forgotten by a
database crash`` must stay at zero; a non-zero count would be a regression to investigate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from app.embedded.formation import NODE_NAMES, Formation, NodeState
from tests.faults.config import CampaignConfig
from tests.faults.history import FaultEvent


class FormationFaults:
    """Injects the faults of :data:`HA_FAULTS` into the campaign's formation.

    Each takes the :class:`FaultEvent` it is part of and ends its crash window when a node accepts
    writes again. The injector (:class:`tests.faults.injector.Injector`) dispatches to them.
    """

    def __init__(self, config: CampaignConfig, formation: Formation | None) -> None:
        self.config = config
        self.formation = formation
        self.broken = False
        """A formation fault failed: the formation faults that follow are skipped."""

    async def _healthy_formation(self) -> tuple[Formation, NodeState, NodeState]:
        """The formation once it is healthy (bounded), its primary and its standby."""
        assert self.formation is not None, "a formation fault needs the formation (ha=True)"
        nodes = await asyncio.to_thread(
            self.formation.wait_until,
            formation_healthy,
            self.config.rejoin_timeout,
            "a primary and a caught-up standby",
        )
        primary = next(n for n in nodes if n.reported == "primary")
        standby = next(n for n in nodes if n.reported == "secondary")
        return self.formation, primary, standby

    async def _rejoin(self, formation: Formation, name: str) -> float:
        """Start a stopped or killed node; seconds until it is a caught-up standby again.

        Raises:
            FormationError: not within ``rejoin_timeout`` (with the keepers' log tails).
        """
        began = time.monotonic()
        await asyncio.to_thread(formation.start_node, name)
        await asyncio.to_thread(
            formation.wait_until,
            formation_healthy,
            self.config.rejoin_timeout,
            f"{name} back as a caught-up standby",
        )
        return time.monotonic() - began

    async def _wait_writable(self, formation: Formation, began: float, event: FaultEvent) -> float:
        """Wait until a node accepts writes again; ends the event's crash window there, and
        returns the seconds since ``began`` (a monotonic time)."""
        await asyncio.to_thread(formation.wait_writable, self.config.failover_timeout)
        event.crash = (event.started, time.time())
        return time.monotonic() - began

    async def switchover(self, event: FaultEvent) -> str:
        """A planned switchover: the standby takes over, the primary follows it."""
        if self.broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, standby = await self._healthy_formation()
        began = time.monotonic()

        async def promoted() -> float:
            await asyncio.to_thread(
                formation.wait_until,
                lambda nodes: any(n.writable and n.name == standby.name for n in nodes),
                self.config.failover_timeout,
                f"{standby.name} promoted",
            )
            return await self._wait_writable(formation, began, event)

        # The monitor is watched while pg_autoctl waits for the whole switchover: the crash
        # window ends as soon as the new primary accepts writes.
        _, writable = await asyncio.gather(
            asyncio.to_thread(formation.switchover, self.config.failover_timeout), promoted()
        )
        switched = time.monotonic() - began
        await self._healthy_formation()
        return (
            f"{primary.name} -> {standby.name}: {standby.name} accepts writes after "
            f"{writable:.1f} s; switchover complete after {switched:.1f} s"
        )

    async def kill_primary(self, event: FaultEvent) -> str:
        """SIGKILL of the primary's keeper and PostgreSQL (the machine is lost); the standby must
        be promoted, and the killed node must rejoin as the standby once started again."""
        if self.broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, _ = await self._healthy_formation()
        began = time.monotonic()
        await asyncio.to_thread(formation.kill_node, primary.name)
        nodes = await asyncio.to_thread(
            formation.wait_until,
            lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
            self.config.failover_timeout,
            f"a new primary after the loss of {primary.name}",
        )
        promoted = next(n.name for n in nodes if n.writable)
        writable = await self._wait_writable(formation, began, event)
        rejoined = await self._rejoin(formation, primary.name)
        return (
            f"SIGKILL {primary.name}; {promoted} accepts writes after {writable:.1f} s; "
            f"{primary.name} started again, a caught-up standby after {rejoined:.1f} s"
        )

    async def stop_standby(self, event: FaultEvent) -> str:
        """Stop the standby cleanly; the primary runs alone (``wait_primary``: no synchronous
        replication) for ``lone_primary_seconds``; then the standby comes back."""
        if self.broken:
            return "skipped: the formation did not recover from an earlier fault"
        formation, primary, standby = await self._healthy_formation()
        began = time.monotonic()
        await asyncio.to_thread(formation.stop_node, standby.name)
        await asyncio.to_thread(
            formation.wait_until,
            lambda nodes: any(
                n.name == primary.name and n.settled and n.reported == "wait_primary" for n in nodes
            ),
            self.config.failover_timeout,
            f"{primary.name} alone (wait_primary)",
        )
        alone = time.monotonic() - began
        await asyncio.sleep(self.config.lone_primary_seconds)
        rejoined = await self._rejoin(formation, standby.name)
        return (
            f"stopped standby {standby.name}; {primary.name} alone (wait_primary) after "
            f"{alone:.1f} s, for {self.config.lone_primary_seconds:.1f} s; {standby.name} a "
            f"caught-up standby again after {rejoined:.1f} s"
        )


def formation_healthy(nodes: Sequence[NodeState]) -> bool:
    """One primary with synchronous replication, and the other node its caught-up standby."""
    roles = sorted(node.reported for node in nodes if node.settled)
    return len(nodes) == len(NODE_NAMES) and roles == ["primary", "secondary"]
