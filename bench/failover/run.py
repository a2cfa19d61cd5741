"""One failover bench run: both servers up, the alternating throughput runs, the faults; then,
whatever happened (an error, Ctrl-C, SIGTERM), both servers stopped, the formation destroyed
(or, with ``--keep``, stopped and left) and the report written."""

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

from app.embedded.formation import Formation
from bench.checks import record
from bench.failover.databases import SYSTEMS, FormationDatabase, TcpCluster
from bench.failover.outage import measure_outages
from bench.failover.report import machine, render_report
from bench.failover.throughput import measure_pair
from bench.harness import Environment
from bench.interrupts import terminate_as_interrupt, uninterrupted
from bench.processes import Database

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 3,
    "warmup": 0.5,
    "duration": 2.0,
    "switchovers": 2,
    "kills": 1,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 5,
    "warmup": 2.0,
    "duration": 10.0,
    "switchovers": 5,
    "kills": 3,
}


def run(
    *, full: bool = False, runs: int | None = None, workers: int = 2, out: Path, keep: bool = False
) -> int:
    """The whole failover bench; 1 if a correctness check failed (targets are only reported)."""
    size = dict(FULL if full else QUICK)
    runs = runs or size["runs"]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    root = Path(tempfile.mkdtemp(prefix="sundial-bench-failover-"))
    formation = Formation(root / "formation")
    envs = {
        system: Environment(workers=workers, keep=keep, root=root / f"server-{system}")
        for system in SYSTEMS
    }
    checks: list[dict[str, Any]] = []
    res: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": {**size, "runs": runs},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "checks": checks,
        "throughput": [],
    }
    try:
        with terminate_as_interrupt():
            log(f"starting a single PostgreSQL and a formation in {root}")
            for env in envs.values():
                env.root.mkdir(parents=True)
            single = TcpCluster(envs["single"].root / "postgres")
            single.ensure_initialized()
            single.start()
            envs["single"].cluster = single
            formation.up()
            databases: dict[str, Database] = {
                "single": single,
                "formation": FormationDatabase(formation),
            }
            for system, env in envs.items():
                log(f"starting `sundial serve` ({workers} workers) on the {system}")
                env.server = env.serve(databases[system])
            res["machine"] = machine(envs, workers)
            primary = formation.primary()
            standby = next(n.name for n in formation.nodes() if n.reported == "secondary")
            res["roles"] = {"primary": primary.name if primary else "", "standby": standby}
            rates: dict[str, float] = {}
            for run_no in range(runs):
                log(f"run {run_no + 1}/{runs}: enqueue b1 and dequeue+complete b1, both systems")
                pair = measure_pair(envs, formation, size, run_no, rates, checks)
                res["throughput"].append(pair)
                log(
                    "  "
                    + "; ".join(
                        f"{w} " + ", ".join(f"{s} {pair[w][s]['rate']:,.0f}/s" for s in SYSTEMS)
                        for w in pair
                    )
                )
            log(
                f"write outage: {size['switchovers']} switchover(s), "
                f"{size['kills']} kill(s) of the primary"
            )
            res["outage"] = {}
            measure_outages(envs["formation"], formation, size, checks, log, res["outage"])
            serve_log = envs["formation"].root / "serve.log"
            tracebacks = serve_log.read_text(errors="replace").count("Traceback")
            record(
                checks,
                "the formation's server logged no traceback",
                tracebacks == 0,
                {"tracebacks": tracebacks, "log": str(serve_log)},
            )
    except KeyboardInterrupt:
        res["error"] = "interrupted"
        raise
    except Exception as error:
        res["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        with uninterrupted():
            log("stopping the servers, the single PostgreSQL and the formation")
            for env in envs.values():
                with contextlib.suppress(Exception):
                    env.stop()
            with contextlib.suppress(Exception):
                if keep:
                    formation.down()
                else:
                    formation.destroy()
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
            res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            res["elapsed_s"] = round(time.monotonic() - started, 1)
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            path = out / f"results-failover-{size['mode']}-{stamp}.json"
            path.write_text(json.dumps(res, indent=1, default=str))
            report = render_report(res)
            (out / f"report-failover-{size['mode']}.md").write_text(report)
            print()
            print(report)
            log(f"results in {path}" + (f"; kept {root}" if keep else ""))
    return 1 if any(not c["ok"] for c in checks) else 0
