"""One suite run: start the environment, run the selected workloads (the throughput ones
``--runs`` times, interleaved; the others once), profile the workers, then, whatever happened,
stop everything and write the results and the report."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.context import Ctx
from bench.harness import Environment
from bench.machine import machine_facts
from bench.peers import pgqueuer, raw
from bench.processes import cpu_delta
from bench.report.render import progress_line, render_report
from bench.report.rows import build_rows
from bench.workloads import (
    backlog,
    cycle,
    delays,
    enqueue,
    exclusive,
    filter_or,
    process,
    soak,
    wake,
    worker,
)
from bench.workloads import filter as metadata_filter

THROUGHPUT: tuple[tuple[str, Callable[[Ctx], dict[str, Any]]], ...] = (
    ("enqueue_b100", lambda ctx: enqueue.measure(ctx, 100)),
    ("enqueue_b1", lambda ctx: enqueue.measure(ctx, 1)),
    ("process_b100", lambda ctx: process.measure(ctx, 100)),
    ("process_b1", lambda ctx: process.measure(ctx, 1)),
    ("process_cycle", cycle.measure),
    ("worker", worker.measure),
    ("wake", wake.measure),
)
"""The workloads measured ``--runs`` times, one run of each in turn, beside their baselines."""
ONCE: tuple[tuple[str, Callable[[Ctx], dict[str, Any]]], ...] = (
    ("backlog", backlog.measure),
    ("filter", metadata_filter.measure),
    ("filter_or", filter_or.measure),
    ("exclusive", exclusive.measure),
    ("delays", delays.measure),
    ("soak", soak.measure),
)
"""The workloads run once, after the throughput ones (those with several runs do them inside)."""


def run(
    *,
    size: dict[str, Any],
    runs: int,
    selected: list[str],
    out: Path,
    workers: int,
    taskset: str | None,
    keep: bool,
    peer: bool,
    profile: bool,
) -> int:
    """The suite on ``selected`` workloads; 1 if a correctness check failed."""
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    env = Environment(workers=workers, taskset=taskset, keep=keep)
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": size,
        "runs": runs,
        "workloads": {},
    }
    ctx = Ctx(env, size, runs, out, peer, profile, log, results)
    load_before = os.getloadavg()
    try:
        log(f"starting PostgreSQL and `sundial serve` ({workers} workers) in {env.root}")
        server = env.start()
        raw.setup(env)
        if ctx.peer:
            asyncio.run(pgqueuer.install(ctx.dsn_uri))
        rss_start = server.rss_mb()
        results["machine"] = machine_facts(env)
        snap0 = server.snapshot()
        w = results["workloads"]
        for run_no in range(runs):
            for key, measure in THROUGHPUT:
                if key in selected:
                    log(f"run {run_no + 1}/{runs}: {key}")
                    w.setdefault(key, []).append(measure(ctx))
                    log(progress_line(w[key][-1]))
        for key, measure in ONCE:
            if key in selected:
                log(key)
                w[key] = [measure(ctx)]
        if ctx.profile and ("process_b100" in selected or "process_b1" in selected):
            for batch in (100, 1):
                log(f"profiling the server workers during process b{batch} (py-spy, not counted)")
                results.setdefault("profiles", {})[f"process_b{batch}"] = process.measure(
                    ctx, batch, profile=True
                )
        results["server_cpu_total"] = cpu_delta(snap0, server.snapshot())
        results["rss_mb"] = {"start": rss_start, "end": server.rss_mb()}
    finally:
        results["loadavg_before"] = load_before
        results["loadavg_after"] = os.getloadavg()
        results["elapsed_s"] = round(time.monotonic() - started, 1)
        env.stop()
        rows = build_rows(results)
        results["table"] = rows
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = out / f"results-{size['mode']}-{stamp}.json"
        path.write_text(json.dumps(results, indent=1, default=str))
        (out / f"latest-{size['mode']}.json").write_text(path.read_text())
        report = render_report(results, rows)
        (out / f"report-{size['mode']}.md").write_text(report)
        print()
        print(report)
        log(f"results in {path}")
    failed = [c for c in results.get("checks", []) if not c["ok"]]
    return 1 if failed else 0
