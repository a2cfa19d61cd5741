"""The fault campaign: Jepsen's method on one machine, with real processes.

A campaign starts a private PostgreSQL cluster (:class:`app.embedded.LocalCluster`, migrated), the
TCP fault proxy in front of it (:mod:`tests.faults.proxy`; one proxy per server, so that one server
can be cut off alone) and two ``sundial serve`` processes that reach the database through them.
While producers and consumers run against both servers it injects faults one after another, then
lets the system drain and checks the history it recorded against what the database holds.

It drives, one job to a module: :mod:`~tests.faults.servers` (the server processes),
:mod:`~tests.faults.database` (the harness's own connections, the live exclusivity watcher),
:mod:`~tests.faults.workload` (producers and consumers), :mod:`~tests.faults.injector` and
:mod:`~tests.faults.formation_faults` (the faults), :mod:`~tests.faults.history` (what was
recorded), :mod:`~tests.faults.checks` (the guarantees) and :mod:`~tests.faults.report` (write
outages, the report); :mod:`~tests.faults.config` says how big and how long it is.

High availability (``CampaignConfig.ha``, ``python -m tests.faults --ha``). The database is a
pg_auto_failover formation (:class:`app.embedded.formation.Formation`: a monitor, a primary and
its synchronous standby) instead of one cluster; both servers get its multi-host URL directly (no
proxies, so no proxy faults) and the harness's own connections follow the primary and wait out a
failover. Its faults are :mod:`tests.faults.formation_faults`'.

Use :func:`run_campaign` (``tests/faults/test_faults.py``, ``python -m tests.faults``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from app.embedded import LocalCluster
from app.embedded.formation import NODE_NAMES, Formation, FormationError
from app.store import migrate
from tests.faults.checks import run_checks
from tests.faults.config import (
    ADMIN_TOKEN,
    EXCLUSIVE,
    EXCLUSIVE_KEY,
    FAULTS,
    HA_CAMPAIGN_FAULTS,
    HA_FAULTS,
    NAMESPACE,
    NOT_IN_HA,
    PROXY_FAULTS,
    SIMPLE,
    CampaignConfig,
    log,
)
from tests.faults.database import Database, DatabaseTarget, ExclusivityWatcher
from tests.faults.history import History
from tests.faults.injector import Injector
from tests.faults.proxy import FaultProxy
from tests.faults.report import Report, measure_outages
from tests.faults.servers import ServerProcess
from tests.faults.workload import Workload
from tests.processes import free_port


def schedule(config: CampaignConfig) -> list[str]:
    """The faults to inject: the configured list, or shuffled rounds of it with ``repeat``.

    The proxy faults are left out when there is no proxy, and :data:`NOT_IN_HA` with ``ha``.

    Raises:
        ValueError: an unknown fault, or a formation fault without ``ha``.
    """
    chosen = config.faults
    if chosen is None:
        chosen = HA_CAMPAIGN_FAULTS if config.ha else FAULTS
    unknown = set(chosen) - set(FAULTS) - set(HA_FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS + HA_FAULTS}")
    if not config.ha and set(chosen) & set(HA_FAULTS):
        raise ValueError(f"{sorted(set(chosen) & set(HA_FAULTS))} need a formation (ha=True)")
    left_out = NOT_IN_HA if config.ha else frozenset() if config.use_proxy else PROXY_FAULTS
    faults = [f for f in chosen if f not in left_out]
    if not config.repeat:
        return faults
    rng = random.Random(config.seed + 2)
    rounds = []
    for _ in range(1000):
        batch = list(faults)
        rng.shuffle(batch)
        rounds += batch
    return rounds


class Campaign:
    """One run: set up, traffic + faults, drain, check (see the module docstring)."""

    def __init__(self, config: CampaignConfig) -> None:
        self.config = config
        self.history = History()
        self.workdir = config.workdir or Path(tempfile.mkdtemp(prefix="sundial-faults-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)  # the cluster runs as an unprivileged user when we are root
        self.cluster: LocalCluster | None = None
        self.formation: Formation | None = None
        self.target: DatabaseTarget
        if config.ha:
            self.formation = self.target = Formation(self.workdir / "formation")
            self.database = Database(self.target, patience=config.database_patience)
        else:
            self.cluster = self.target = LocalCluster(self.workdir / "cluster")
            self.database = Database(self.target)
        self.proxies: dict[str, FaultProxy] = {}
        self.servers: list[ServerProcess] = []

    async def run(self) -> Report:
        config = self.config
        began = time.monotonic()
        hard_deadline = began + config.duration + config.drain_timeout + 240
        try:
            await self.setup()
            token = await self.create_queues()
            self.history.started = time.time()
            workload = Workload(config, self.servers, self.history, token, hard_deadline)
            injector = Injector(
                config,
                self.database,
                self.proxies,
                self.servers,
                workload,
                self.history,
                cluster=self.cluster,
                formation=self.formation,
            )
            injector.queue_ids = await self.queue_ids()
            stop_watcher = asyncio.Event()
            watcher = asyncio.create_task(
                ExclusivityWatcher(self.database, self.history).run(stop_watcher, hard_deadline)
            )
            workload.start()
            traffic_began = time.monotonic()
            try:
                await self.inject(injector, traffic_began)
                # Traffic goes on after the last fault for `gap` at least: its aftermath (and
                # the end of its write outage) is observed too.
                remaining = config.duration - (time.monotonic() - traffic_began)
                await asyncio.sleep(max(remaining, config.gap))
                traffic_seconds = time.monotonic() - traffic_began
                log(config, "stopping producers, draining")
                await workload.stop_producers()
                drained = await self.drain(workload)
                await injector.all_up()
            finally:
                await workload.stop()
                stop_watcher.set()
                await asyncio.wait_for(watcher, 10)
            db, twice = await self.database.final_state()
            measure_outages(self.history)
            checks = run_checks(self.history, db, twice)
            try:
                self.history.save(self.workdir / "history.json")
            except (OSError, TypeError, ValueError) as error:  # the report matters more
                log(config, f"could not save the history: {error!r}")
            return Report(
                config=config,
                history=self.history,
                checks=checks,
                traffic_seconds=traffic_seconds,
                total_seconds=time.monotonic() - began,
                workdir=self.workdir,
                drained=drained,
                server_log_errors=sum(s.tracebacks() for s in self.servers),
                failed_starts=sum(len(s.failed_starts) for s in self.servers),
                unexpected_errors=[e for s in self.servers for e in s.unexpected_errors()],
            )
        finally:
            await self.teardown()

    async def inject(self, injector: Injector, began: float) -> None:
        for name in schedule(self.config):
            elapsed = time.monotonic() - began
            if self.config.repeat and elapsed + self.config.gap + 8 > self.config.duration:
                break
            await asyncio.sleep(self.config.gap)
            await injector.inject(name)

    async def drain(self, workload: Workload) -> bool:
        """Consumers only complete now; wait (bounded) until nothing is live."""
        workload.draining = True
        limit = time.monotonic() + self.config.drain_timeout
        while time.monotonic() < limit:
            live = await self.database.live_count()
            if live == 0 and not workload.stall_tasks:
                log(self.config, "drained")
                return True
            log(self.config, f"draining: {live} live")
            await asyncio.sleep(0.5)
        return False

    async def setup(self) -> None:
        config = self.config
        if self.formation is not None:
            log(config, f"starting a pg_auto_failover formation in {self.workdir}")
            await asyncio.to_thread(self.formation.up)
        else:
            assert self.cluster is not None
            log(config, f"starting PostgreSQL in {self.workdir}")
            await asyncio.to_thread(self.cluster.start)
        await asyncio.to_thread(migrate.upgrade, self.target.sqlalchemy_url)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("SUNDIAL_")}
        for name in ("a", "b"):
            url = self.database_url_for(name)
            port = free_port()
            env = {
                **base_env,
                "SUNDIAL_DATABASE_URL": url,
                "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                "SUNDIAL_PORT": str(port),
                "SUNDIAL_WORKERS": "1",
                "SUNDIAL_SCHEDULER_TICK_SECONDS": "0.05",
                "SUNDIAL_LEADER_POLL_SECONDS": "0.5",
                "SUNDIAL_SCHEDULER_CLEANUP_SECONDS": "2",
                "SUNDIAL_DATA_DIR": str(self.workdir / f"data-{name}"),
            }
            self.servers.append(ServerProcess(name, port, env, self.workdir / f"server-{name}.log"))
        log(config, "starting servers")
        await asyncio.gather(*(s.start(config.server_start_timeout) for s in self.servers))

    def database_url_for(self, name: str) -> str:
        """Server ``name``'s database URL: the formation's (every node; writes go to the
        primary), or the cluster's, through a fault proxy of its own when proxied (this starts
        that proxy)."""
        if self.formation is not None:
            return self.formation.sqlalchemy_url
        assert self.cluster is not None
        db_port = self.cluster.port
        if self.config.proxied:
            proxy = self.proxies[name] = FaultProxy("127.0.0.1", db_port)
            proxy.start()
            db_port = proxy.port
        user, database = self.cluster.user, self.cluster.database
        return f"postgresql+psycopg://{user}@127.0.0.1:{db_port}/{database}"

    async def create_queues(self) -> str:
        """The namespace, a token for it, and the two queues; returns the token."""
        base = self.servers[0].base
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=f"{base}/v1", headers=admin, timeout=10) as http:
            answer = await http.post("/namespaces", json={"name": NAMESPACE})
            assert answer.status_code == 201, answer.text
            answer = await http.post(f"/namespaces/{NAMESPACE}/tokens", json={"label": "faults"})
            assert answer.status_code == 201, answer.text
            token: str = answer.json()["token"]
            common = {"lease_seconds": self.config.lease_seconds, "max_attempts": 10}
            queues = {
                SIMPLE: {
                    "kind": "simple",
                    "retention_seconds": self.config.simple_retention_seconds,
                    **common,
                },
                EXCLUSIVE: {"kind": "exclusive", "exclusive_key": EXCLUSIVE_KEY, **common},
            }
            for name, body in queues.items():
                answer = await http.put(f"/namespaces/{NAMESPACE}/queues/{name}", json=body)
                assert answer.status_code == 201, answer.text
        return token

    async def queue_ids(self) -> dict[str, int]:
        rows = await self.database.fetch(
            "SELECT name, id FROM queues WHERE namespace = %s", (NAMESPACE,)
        )
        return dict(rows)

    async def teardown(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers), return_exceptions=True)
        for proxy in self.proxies.values():
            proxy.stop()
        if self.formation is not None:
            await asyncio.to_thread(self._stop_formation, self.formation)
        elif self.cluster is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.cluster.stop, "fast")

    @staticmethod
    def _stop_formation(formation: Formation) -> None:
        """Stop every keeper (they run detached); SIGKILL whatever did not stop. The data and
        the logs stay for the post-mortem."""
        with contextlib.suppress(FormationError):
            formation.down(timeout=30)
        for name in ("monitor", *NODE_NAMES):
            formation.kill_node(name)


def run_campaign(config: CampaignConfig) -> Report:
    """Run a whole campaign (blocking) and return its report.

    The working directory (cluster, server logs, ``history.json``) is removed afterwards when the
    campaign found no violation and no 500 and ``keep_workdir`` is false; otherwise it is kept for
    the post-mortem.
    """
    report = asyncio.run(Campaign(config).run())
    if not report.needs_post_mortem and not config.keep_workdir:
        shutil.rmtree(report.workdir, ignore_errors=True)
    return report
