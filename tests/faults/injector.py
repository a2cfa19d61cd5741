"""The fault injector: kills, pauses and partitions of servers, database and network faults.

Faults (:data:`FAULTS`): ``proxy_latency`` (+50 ms each way for a few seconds), ``kill_server``
(kill -9 and restart), ``terminate_backends`` (``pg_terminate_backend`` of every server
connection), ``leader_loss`` (kill -9 of the process whose scheduler leads, found through
``scheduler_nodes``), ``proxy_cut`` (reset every database connection), ``kill_mid_batch``
(kill -9 while a 400-message enqueue is in flight), ``pg_restart_immediate``
(``pg_ctl restart -m immediate``), ``proxy_stall`` (nothing flows for longer than a lease) and
``pause_server`` (SIGSTOP of a server that does not lead for longer than a lease, then SIGCONT),
``leader_partition`` (the leading server alone is cut off from the database, its connections left
open) and ``leader_pause`` (SIGSTOP of the leading server for ``partition_seconds``); after the
last three another node must lead within the takeover limit (it fences the stalled leader).

On a formation (``CampaignConfig.ha``) the faults of :data:`HA_FAULTS` are
:mod:`tests.faults.formation_faults`', and the server faults that do not need a proxy run too
(:data:`HA_CAMPAIGN_FAULTS`); ``terminate_backends`` hits the current primary (the harness's
connections reach only the node that accepts writes); ``pg_restart_immediate`` is left out: a
``pg_ctl restart`` behind a keeper's back races the keeper, and ``kill_primary`` is the crash of
a formation.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from datetime import datetime
from typing import Any

from app.embedded import LocalCluster
from app.embedded.formation import Formation, FormationError
from tests.faults.config import HA_FAULTS, NEEDS_ALL_UP, SIMPLE, CampaignConfig, log
from tests.faults.database import Database
from tests.faults.formation_faults import FormationFaults
from tests.faults.history import FaultEvent, History
from tests.faults.proxy import FaultProxy
from tests.faults.servers import ServerProcess
from tests.faults.workload import Workload


class Injector:
    """Injects the faults of :data:`FAULTS` and :data:`HA_FAULTS` into the running system.

    ``cluster`` is needed by ``pg_restart_immediate`` only, ``formation`` by the faults of
    :data:`HA_FAULTS` only (:class:`FormationFaults`); every other fault reaches the database
    through ``database``.
    """

    def __init__(
        self,
        config: CampaignConfig,
        database: Database,
        proxies: dict[str, FaultProxy],
        servers: list[ServerProcess],
        workload: Workload | None,
        history: History,
        *,
        cluster: LocalCluster | None = None,
        formation: Formation | None = None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.formation_faults = FormationFaults(config, formation)
        self.database = database
        self.proxies = proxies
        self.servers = servers
        self.workload = workload
        self.history = history
        self.rng = random.Random(config.seed + 1)
        self.queue_ids: dict[str, int] = {}
        self.restarts: dict[str, asyncio.Task[None]] = {}
        self.event: FaultEvent | None = None

    async def inject(self, name: str) -> FaultEvent:
        if name in NEEDS_ALL_UP:
            await self.all_up()
        started = time.time()
        log(self.config, f"fault {name} ...")
        self.event = event = FaultEvent(name, started, started, "")
        self.history.faults.append(event)
        try:
            if name in HA_FAULTS:
                event.detail = await getattr(self.formation_faults, name)(event)
            else:
                event.detail = await getattr(self, name)()
        except FormationError as error:  # it did not recover: the campaign has failed
            self.formation_faults.broken = True
            self.history.fault_violations.append(f"{name}: {error}")
            event.detail = f"FAILED: {str(error).splitlines()[0]}"
        event.ended = time.time()
        log(self.config, f"fault {name}: {event.detail}")
        return event

    def server_by_pid(self, pid: int) -> ServerProcess | None:
        return next((s for s in self.servers if s.pid == pid and s.up), None)

    def restart_later(self, server: ServerProcess) -> None:
        """Start a killed server again in the background; the fault's detail gets its time."""
        event = self.event

        async def restart() -> None:
            await asyncio.sleep(0.3)
            ready = await server.start(self.config.server_start_timeout)
            if event is not None:
                event.detail += f"; {server.name} ready again in {ready:.1f} s"
            log(self.config, f"server {server.name} ready again in {ready:.1f} s")

        self.restarts[server.name] = asyncio.create_task(restart())

    async def all_up(self) -> None:
        """Wait for the servers being restarted (bounded by their start timeout)."""
        tasks, self.restarts = list(self.restarts.values()), {}
        if tasks:
            await asyncio.gather(*tasks)

    # --- process faults

    async def kill_server(self) -> str:
        server = self.rng.choice([s for s in self.servers if s.up])
        pid = server.kill()
        self.restart_later(server)
        return f"kill -9 {server.name} (pid {pid})"

    async def kill_mid_batch(self) -> str:
        assert self.workload is not None, "kill_mid_batch needs the workload"
        server = self.rng.choice([s for s in self.servers if s.up])
        messages = self.workload.new_messages(SIMPLE, "mid", 400)
        ids = [m["id"] for m in messages]
        # The retry waits until the probe below is done, so that what the probe sees is the
        # killed request's doing only.
        batch = asyncio.create_task(
            self.workload.enqueue(SIMPLE, messages, first=server, first_retry_delay=1.0)
        )
        await asyncio.sleep(self.rng.uniform(0.005, 0.04))
        pid = server.kill()
        # All or nothing (guarantee 6): at any instant none or all of the batch is visible.
        seen = set()
        for _ in range(5):
            rows = await self.database.fetch(
                "SELECT count(*) FROM messages WHERE queue_id = %s AND id = ANY(%s)",
                (self.queue_ids[SIMPLE], ids),
            )
            seen.add(int(rows[0][0]))
            await asyncio.sleep(0.1)
        partial = seen - {0, len(ids)}
        if partial:
            self.history.fault_violations.append(
                f"kill_mid_batch: a 400-message batch was partially visible: {sorted(seen)}"
            )
        self.restart_later(server)
        outcomes = await asyncio.wait_for(batch, 30)
        created = sum(
            1 for e in self.history.enqueues if e.queue == SIMPLE and e.id in set(ids) and e.created
        )
        return (
            f"kill -9 {server.name} (pid {pid}) during a 400-message enqueue; attempts "
            f"{outcomes}; visible after the kill: {sorted(seen)}; created by the retry: {created}"
        )

    async def find_leader(self) -> tuple[ServerProcess, str] | None:
        """The server whose scheduler leads now (``scheduler_nodes``: is_leader, recent
        heartbeat; the node id holds the pid), waiting up to 10 s for one."""
        limit = time.monotonic() + 10
        while time.monotonic() < limit:
            rows = await self.database.fetch(
                "SELECT node_id FROM scheduler_nodes WHERE is_leader "
                "AND heartbeat_at > now() - interval '2.5 seconds' ORDER BY heartbeat_at DESC"
            )
            for (node_id,) in rows:
                server = self.server_by_pid(int(node_id.split(":")[-2]))
                if server is not None:
                    return server, node_id
            await asyncio.sleep(0.2)
        return None

    async def wait_for_successor(self, node: str, since: datetime) -> tuple[Any, float]:
        """Another node that led (heartbeat as leader) after ``since``; and the seconds waited."""
        began = time.monotonic()
        while time.monotonic() - began < max(10.0, self.config.leader_takeover_limit * 2):
            rows = await self.database.fetch(
                "SELECT node_id, heartbeat_at FROM scheduler_nodes WHERE is_leader "
                "AND node_id <> %s AND heartbeat_at >= %s ORDER BY heartbeat_at LIMIT 1",
                (node, since),
            )
            if rows:
                return rows[0], time.monotonic() - began
            await asyncio.sleep(0.1)
        return None, time.monotonic() - began

    def judge_takeover(self, fault: str, node: str, successor: Any, observed: float) -> str:
        if successor is None or observed > self.config.leader_takeover_limit:
            self.history.fault_violations.append(
                f"{fault}: no other scheduler led within {self.config.leader_takeover_limit} s"
                f" of losing {node} (observed {observed:.1f} s, successor {successor})"
            )
        if successor is None:
            return f"NO successor within {observed:.1f} s"
        return f"{successor[0]} led, seen after {observed:.2f} s"

    async def leader_loss(self) -> str:
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_loss: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        killed_at = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        pid = leader.kill()
        successor, observed = await self.wait_for_successor(node, killed_at)
        self.restart_later(leader)
        verdict = self.judge_takeover("leader_loss", node, successor, observed)
        return f"kill -9 leader {leader.name} (pid {pid}); {verdict}"

    async def pause_server(self) -> str:
        """Freeze a server that does not lead (a long GC pause, a frozen VM) past its leases."""
        for _ in range(2):
            found = await self.find_leader()
            leader = found[0] if found is not None else None
            candidates = [s for s in self.servers if s.up and s is not leader]
            if candidates:
                break
            await self.all_up()
        else:
            return "no server to pause"
        server = self.rng.choice(candidates)
        assert server.process is not None
        seconds = self.config.stall_seconds + 0.5
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        return f"SIGSTOP {server.name} (pid {server.process.pid}) for {seconds:.1f} s, then SIGCONT"

    async def leader_pause(self) -> str:
        """Freeze the leading server (SIGSTOP): its connections stay open. Another node must
        lead within the limit."""
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_pause: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        assert leader.process is not None
        since = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        os.kill(leader.process.pid, signal.SIGSTOP)
        try:
            successor, observed = await self.wait_for_successor(node, since)
            rest = self.config.partition_seconds - observed
            if rest > 0:
                await asyncio.sleep(rest)
        finally:
            os.kill(leader.process.pid, signal.SIGCONT)
        verdict = self.judge_takeover("leader_pause", node, successor, observed)
        return f"SIGSTOP of leader {leader.name} (pid {leader.process.pid}); {verdict}"

    async def leader_partition(self) -> str:
        """Cut the leading server alone off from the database: nothing flows between them, but
        the connections stay open, as in a network partition. Another node must lead."""
        found = await self.find_leader()
        if found is None:
            self.history.fault_violations.append("leader_partition: no live leader found in 10 s")
            return "no leader found"
        leader, node = found
        proxy = self.proxies[leader.name]
        since = (await self.database.fetch("SELECT clock_timestamp()"))[0][0]
        await asyncio.to_thread(proxy.stall)
        try:
            successor, observed = await self.wait_for_successor(node, since)
            rest = self.config.partition_seconds - observed
            if rest > 0:
                await asyncio.sleep(rest)
        finally:
            await asyncio.to_thread(proxy.resume)
        verdict = self.judge_takeover("leader_partition", node, successor, observed)
        return f"partitioned leader {leader.name} from the database; {verdict}"

    # --- database faults

    async def pg_restart_immediate(self) -> str:
        assert self.cluster is not None, "pg_restart_immediate needs the cluster"
        began = time.monotonic()
        await asyncio.to_thread(self.cluster.restart, "immediate")
        return f"pg_ctl restart -m immediate took {time.monotonic() - began:.1f} s"

    async def terminate_backends(self) -> str:
        """``pg_terminate_backend`` of every server connection (on a formation: the primary's).
        The servers connect over TCP; a formation's keeper holds a local (socket) one."""
        rows = await self.database.fetch(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend' AND application_name NOT LIKE 'faults-%%' "
            "AND client_addr IS NOT NULL"
        )
        return f"pg_terminate_backend of {rows[0][0]} server connections"

    # --- network faults

    async def proxy_latency(self) -> str:
        for proxy in self.proxies.values():
            proxy.set_latency(self.config.latency)
        await asyncio.sleep(self.config.latency_seconds)
        for proxy in self.proxies.values():
            proxy.set_latency(0)
        return (
            f"+{self.config.latency * 1000:.0f} ms each way for {self.config.latency_seconds:.1f} s"
        )

    async def proxy_cut(self) -> str:
        cut = 0
        for proxy in self.proxies.values():
            cut += await asyncio.to_thread(proxy.cut)
        return f"reset {cut} database connections"

    async def proxy_stall(self) -> str:
        for proxy in self.proxies.values():
            await asyncio.to_thread(proxy.stall)
        try:
            await asyncio.sleep(self.config.stall_seconds)
        finally:
            for proxy in self.proxies.values():
                await asyncio.to_thread(proxy.resume)
        return f"nothing forwarded for {self.config.stall_seconds:.1f} s (longer than a lease)"
