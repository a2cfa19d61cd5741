"""One pools bench run: the routing overhead (two servers on one PostgreSQL, alternating), then two
pools against one (one server, two PostgreSQL clusters, alternating); then, whatever happened
(an error, Ctrl-C, SIGTERM), every server and PostgreSQL stopped, the temp dir removed (unless
``--keep``) and the report written."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.embedded import LocalCluster
from bench.checks import record
from bench.harness import NAMESPACE, Environment
from bench.interrupts import terminate_as_interrupt, uninterrupted
from bench.machine import machine_facts
from bench.pools import overhead, split
from bench.pools.loads import idle_cpu
from bench.pools.model import summarise
from bench.pools.report import render_report
from bench.pools.router import measure_router
from bench.pools.tenants import Tenant, checkpoint, database_on

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 3,
    "warmup": 0.5,
    "duration": 2.0,
    "guess_b1": 600,
    "guess_b100": 8_000,
    "idle_seconds": 3.0,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 5,
    "warmup": 2.0,
    "duration": 10.0,
    "guess_b1": 600,
    "guess_b100": 8_000,
    "idle_seconds": 10.0,
}
ROUTED_POOL = "routed"
"""The pool of the routed server's namespace: a second database of the same PostgreSQL."""
SECOND_POOL = "second"
"""The pool on the second PostgreSQL cluster."""


def _placed(tenant: Tenant, checks: list[dict[str, Any]], label: str) -> None:
    placed = tenant.placed_on()
    record(
        checks,
        f"{label}: namespace {tenant.name} is on pool {tenant.pool}",
        placed == tenant.pool,
        {"placed_on": placed, "database": tenant.home.database},
    )


def run(
    *,
    full: bool = False,
    runs: int | None = None,
    workers: int = 2,
    out: Path,
    keep: bool = False,
    taskset: str | None = None,
) -> int:
    """The whole pools bench; 1 if a correctness check failed (the target is only reported)."""
    size = dict(FULL if full else QUICK)
    runs = runs or size["runs"]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    root = Path(tempfile.mkdtemp(prefix="sundial-bench-pools-"))
    envs = {
        name: Environment(workers=workers, taskset=taskset, keep=True, root=root / name)
        for name in ("single", "routed", "split")
    }
    second = LocalCluster(root / "second" / "postgres")
    checks: list[dict[str, Any]] = []
    res: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": {**size, "runs": runs},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "checks": checks,
        "overhead": [],
        "split": [],
        "idle": {},
    }
    try:
        with terminate_as_interrupt():
            for env in envs.values():
                env.root.mkdir(parents=True)
            log("the router in process: a namespace lookup with one pool and with two")
            res["router"] = measure_router()
            log(f"starting PostgreSQL and `sundial serve` without pools ({workers} workers)")
            single = envs["single"].start()
            first = envs["single"].cluster
            assert first is not None
            res["machine"] = machine_facts(envs["single"])
            catalogue = database_on(first, "routed_catalogue")
            routed_db = database_on(first, "routed_pool")
            log(f"starting `sundial serve` with pool {ROUTED_POOL!r}: a second database")
            routed = envs["routed"].serve(
                catalogue, pools={ROUTED_POOL: routed_db.local_sqlalchemy_url}, pool=ROUTED_POOL
            )
            envs["routed"].server = routed
            tenants = {
                "single": Tenant(single, NAMESPACE, "default", first, single.token),
                "routed": Tenant(routed, NAMESPACE, ROUTED_POOL, routed_db, routed.token),
            }
            for system, tenant in tenants.items():
                _placed(tenant, checks, system)
            log(f"both servers idle for {size['idle_seconds']:g} s: their background CPU")
            idle_servers = {"single": single, "routed": routed}
            res["idle"]["overhead"] = [
                idle_cpu(idle_servers, {"first": first}, size["idle_seconds"])
            ]
            rates: dict[str, float] = {}
            for run_no in range(runs):
                log(f"overhead run {run_no + 1}/{runs}: enqueue b1, dequeue+complete b1")
                pair = overhead.measure_run(
                    tenants, {"first": first}, size, run_no, rates, checks, taskset
                )
                res["overhead"].append(pair)
                log("  " + _progress(pair))
            log(f"both servers idle again for {size['idle_seconds']:g} s")
            checkpoint(first)
            res["idle"]["overhead"].append(
                idle_cpu(idle_servers, {"first": first}, size["idle_seconds"])
            )
            for name in ("single", "routed"):
                envs[name].stop_server()

            log("starting a second PostgreSQL and `sundial serve` with both as pools")
            second.ensure_initialized()
            second.start()
            split_db = database_on(first, "split_catalogue")
            server = envs["split"].serve(split_db, pools={SECOND_POOL: second.local_sqlalchemy_url})
            envs["split"].server = server
            a = Tenant.create(server, "split-a", "default", split_db)
            b = Tenant.create(server, "split-b", "default", split_db)
            c = Tenant.create(server, "split-c", SECOND_POOL, second)
            for tenant in (a, b, c):
                _placed(tenant, checks, "split")
            setups = {"one": [a, b], "two": [a, c]}
            log(
                f"the server idle for {size['idle_seconds']:g} s: its and both clusters' background"
            )
            both = {"first": first, "second": second}
            res["idle"]["split"] = [idle_cpu({"split": server}, both, size["idle_seconds"])]
            rates = {}
            for run_no in range(runs):
                log(f"split run {run_no + 1}/{runs}: enqueue b100, dequeue+ack b100")
                pair = split.measure_run(setups, both, size, run_no, rates, checks, taskset)
                res["split"].append(pair)
                log("  " + _progress(pair))
            log(f"the server idle again for {size['idle_seconds']:g} s")
            checkpoint(first, second)
            res["idle"]["split"].append(idle_cpu({"split": server}, both, size["idle_seconds"]))
            for name, env in envs.items():
                log_text = (env.root / "serve.log").read_text(errors="replace")
                record(
                    checks,
                    f"the {name} server logged no traceback",
                    "Traceback" not in log_text,
                    {"log": str(env.root / "serve.log")},
                )
    except KeyboardInterrupt:
        res["error"] = "interrupted"
        raise
    except Exception as error:
        res["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        with uninterrupted():
            log("stopping the servers and both PostgreSQL clusters")
            for env in envs.values():
                with contextlib.suppress(Exception):
                    env.stop_server()
            for cluster in (second, envs["single"].cluster):
                with contextlib.suppress(Exception):
                    if cluster is not None:
                        cluster.stop(mode="fast")
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
            res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            res["elapsed_s"] = round(time.monotonic() - started, 1)
            res["summary"] = summarise(res)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            path = out / f"results-pools-{size['mode']}-{stamp}.json"
            path.write_text(json.dumps(res, indent=1, default=str))
            report = render_report(res)
            (out / f"report-pools-{size['mode']}.md").write_text(report)
            print()
            print(report)
            log(f"results in {path}" + (f"; kept {root}" if keep else ""))
    return 1 if any(not c["ok"] for c in checks) else 0


def _progress(pair: dict[str, dict[str, Any]]) -> str:
    return "; ".join(
        f"{workload} " + ", ".join(f"{system} {r['rate']:,.0f}/s" for system, r in systems.items())
        for workload, systems in pair.items()
    )
