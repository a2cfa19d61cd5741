"""A campaign's configuration and the names its modules share.

:class:`CampaignConfig` says how big and how long a campaign is. The fault types are named here:
:data:`FAULTS` (injected by :mod:`tests.faults.injector`), :data:`HA_FAULTS` (by
:mod:`tests.faults.formation_faults`) and the sets that say when each applies; so are the
namespace and queues the traffic uses, the harness's own error and its log line.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# --- the faults -------------------------------------------------------------------------------

FAULTS: tuple[str, ...] = (
    "kill_server",
    "proxy_latency",
    "terminate_backends",
    "proxy_cut",
    "pause_server",
    "leader_partition",
    "pg_restart_immediate",
    "leader_loss",
    "proxy_stall",
    "leader_pause",
    "kill_mid_batch",
)
"""Every fault type, in the order the CI campaign injects them (a killed server restarts in the
background, ~5-20 s: the faults that need every server up come after others)."""
HA_FAULTS: tuple[str, ...] = ("switchover", "kill_primary", "stop_standby")
"""The faults of a pg_auto_failover formation (``CampaignConfig.ha`` only)."""
HA_CAMPAIGN_FAULTS: tuple[str, ...] = (
    "switchover",
    "kill_server",
    "terminate_backends",
    "pause_server",
    "kill_primary",
    "leader_loss",
    "stop_standby",
    "leader_pause",
    "kill_mid_batch",
)
"""Every fault of an HA campaign, in the order a campaign without ``repeat`` injects them: the
formation faults and the server faults that need no proxy."""
NEEDS_ALL_UP = frozenset(
    {"kill_server", "leader_loss", "kill_mid_batch", "leader_partition", "leader_pause"}
) | frozenset(HA_FAULTS)
"""Faults that wait until every server is up: a formation fault too, so that its write outage
is the database's alone (and a server restarting meanwhile does not exhaust its start tries)."""

PROXY_FAULTS = frozenset({"proxy_latency", "proxy_cut", "proxy_stall", "leader_partition"})
NOT_IN_HA = PROXY_FAULTS | {"pg_restart_immediate"}
"""Left out of an HA campaign: there are no proxies, and a ``pg_ctl restart`` behind a keeper's
back races the keeper (``kill_primary`` is the crash of a formation)."""
CRASH_FAULTS = frozenset({"pg_restart_immediate", "kill_primary", "switchover"})
"""Faults after which the database may have forgotten a lease (see :mod:`tests.faults.checks`)."""

# --- the namespace and the queues -------------------------------------------------------------

NAMESPACE = "faults"
SIMPLE = "simple"
EXCLUSIVE = "exclusive"
EXCLUSIVE_KEY = "project"
ADMIN_TOKEN = "faults-admin-token-32-characters-ok"  # a throwaway test cluster's token
HARNESS_APP = "faults-harness"


@dataclass
class CampaignConfig:
    """How big and how long a campaign is. The defaults are the CI-sized run."""

    duration: float = 45.0
    """Seconds of traffic with faults (the schedule runs inside it, then traffic continues)."""
    seed: int = 1
    faults: Sequence[str] | None = None
    """Faults to inject, in order; with ``repeat``, shuffled rounds of them until ``duration``.
    None: every fault that applies (:data:`FAULTS`, or :data:`HA_CAMPAIGN_FAULTS` with ``ha``)."""
    repeat: bool = False
    gap: float = 1.5
    """Seconds of undisturbed traffic before each fault."""
    use_proxy: bool = True
    ha: bool = False
    """Run on a pg_auto_failover formation, with its faults (see :mod:`tests.faults.campaign`)."""
    lease_seconds: int = 2
    simple_producers: int = 2
    exclusive_producers: int = 1
    simple_consumers: int = 3
    exclusive_consumers: int = 2
    exclusive_values: int = 6
    produce_interval: float = 0.5
    batch_max: int = 8
    drain_timeout: float = 40.0
    leader_takeover_limit: float = 5.0
    partition_seconds: float = 8.0
    latency: float = 0.05
    latency_seconds: float = 4.0
    stall_seconds: float = 2.5
    server_start_timeout: float = 60.0
    failover_timeout: float = 60.0
    """HA: seconds for a new primary to accept writes (a switchover, a killed primary), and for a
    primary whose standby stopped to run alone."""
    rejoin_timeout: float = 90.0
    """HA: seconds for a killed or stopped node to be back as a caught-up standby."""
    lone_primary_seconds: float = 3.0
    """HA: seconds of traffic on a primary alone (``stop_standby``) before the standby returns."""
    database_patience: float = 30.0
    """HA: seconds the harness's own queries keep retrying (longer than a failover)."""
    simple_retention_seconds: int = 20
    """Short, so that the scheduler moves finished messages into history during the run."""
    workdir: Path | None = None
    keep_workdir: bool = False
    verbose: bool = False

    @property
    def proxied(self) -> bool:
        """Whether the servers reach the database through the fault proxies."""
        return self.use_proxy and not self.ha


class HarnessError(RuntimeError):
    """The harness itself could not do its job (a server would not start, ...)."""


def log(config: CampaignConfig, message: str) -> None:
    """Print one line of the campaign's progress, with ``verbose`` only."""
    if config.verbose:
        print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)
