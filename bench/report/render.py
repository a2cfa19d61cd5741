"""The printed report: the summary table, the machine, the CPU seconds of every process, the
soak's timeline, the correctness checks and the profiles; and the one-line progress of a run."""

from __future__ import annotations

from typing import Any

from bench.stats import median

THROUGHPUT_KEYS = (
    "enqueue_b100",
    "enqueue_b1",
    "process_b100",
    "process_b1",
    "process_cycle",
    "worker",
    "wake",
)
"""The workloads measured beside their baselines, whose CPU the report tabulates."""


def _fmt(x: Any) -> str:
    """A figure as the table shows it: — for none, 2 decimals under 10, 1 under 100."""
    if x is None:
        return "—"
    if isinstance(x, tuple | list):
        return "/".join(_fmt(v) for v in x)
    if isinstance(x, float) and abs(x) < 100:
        return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:,.0f}"


def render_table(rows: list[dict[str, Any]]) -> str:
    """The summary table, in Markdown."""
    head = [
        "workload",
        "unit",
        "Sundial",
        "raw SQL",
        "PgQueuer",
        "S/raw",
        "S/peer",
        "p50 ms",
        "p99 ms",
        "target",
        "met?",
    ]
    body = [
        [
            r["workload"],
            r["unit"],
            _fmt(r["sundial"]),
            _fmt(r["raw"]),
            _fmt(r["peer"]),
            _fmt(r["vs_raw"]),
            _fmt(r["vs_peer"]),
            _fmt(r["p50_ms"]),
            _fmt(r["p99_ms"]),
            r["target"],
            "—" if r["met"] is None else "yes" if r["met"] else "NO",
        ]
        for r in rows
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _per_message_us(cpu_s: float, rate: float, wall_s: float) -> float | None:
    """CPU microseconds per message: CPU seconds over the messages of the measured window."""
    messages = rate * wall_s
    return cpu_s / messages * 1e6 if messages else None


def cpu_table(res: dict[str, Any]) -> str:
    """Per-workload median CPU seconds of every process, for the reader to see who saturated,
    and what each process spent per message. ``ceiling`` is the rate the machine's cores would
    carry if the server cost nothing: cores over PostgreSQL's and the generator's CPU per
    message (the bound on a ratio against a baseline that runs without the server)."""
    cores = res.get("machine", {}).get("cores") or 1
    lines = [
        "| workload | system | wall s | server workers CPU s | PostgreSQL CPU s"
        " | generator CPU s | server µs/msg | PostgreSQL µs/msg | generator µs/msg"
        " | ceiling msg/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, runs in res.get("workloads", {}).items():
        if key not in THROUGHPUT_KEYS:
            continue
        for system in ("sundial", "raw", "peer"):
            measured = [r[system] for r in runs if system in r and "cpu" in r[system]]
            if not measured:
                continue
            cpu = [m["cpu"] for m in measured]
            gen = (
                "pgbench_cpu_s"
                if system == "raw" and "pgbench_cpu_s" in cpu[0]
                else "loadgen_cpu_s"
            )
            wall = median([c["wall_s"] for c in cpu])
            server = median([c["server_cpu_s"] for c in cpu])
            postgres = median([c["postgres_cpu_s"] for c in cpu])
            generator = median([c.get(gen, 0.0) for c in cpu])
            rate = median([m.get("rate", 0.0) for m in measured])
            per = [_per_message_us(x, rate, wall) for x in (server, postgres, generator)]
            others = per[1] + per[2] if per[1] is not None and per[2] is not None else None
            ceiling = cores * 1e6 / others if others else None
            lines.append(
                f"| {key} | {system} | {_fmt(wall)} | {_fmt(server)} | {_fmt(postgres)} | "
                f"{_fmt(generator)} | {_fmt(per[0])} | {_fmt(per[1])} | {_fmt(per[2])} | "
                f"{_fmt(ceiling)} |"
            )
    return "\n".join(lines)


def soak_timeline(soak: dict[str, Any], every_s: float = 60.0) -> str:
    """The soak's throughput and latencies, and its samples about once a minute: RSS of each
    worker, the hot table's size, live and dead tuples."""
    load = soak.get("loadgen", {})
    samples = soak.get("samples", [])
    span = samples[-1]["t"] if samples else 0
    rate = load.get("completed_total", 0) / span if span else 0
    lines = [
        f"Soak: {load.get('enqueued_total')} enqueued, {load.get('completed_total')} completed"
        f" in {span:.0f} s ({rate:.0f} msg/s). Request latency p50/p99 ms: enqueue of 10 "
        f"{load.get('enqueue_p50_ms')}/{load.get('enqueue_p99_ms')}, dequeue of up to 10 "
        f"{load.get('dequeue_p50_ms')}/{load.get('dequeue_p99_ms')}, ack "
        f"{load.get('ack_p50_ms')}/{load.get('ack_p99_ms')}.",
        "",
        "| t s | worker RSS MB | messages table MB | live tuples | dead tuples |",
        "|---|---|---|---|---|",
    ]
    next_t = 0.0
    for sample in samples:
        if sample["t"] + 1e-9 < next_t and sample is not samples[-1]:
            continue
        rss = ", ".join(f"{v:.0f}" for v in sample["rss_mb"].values())
        lines.append(
            f"| {sample['t']:.0f} | {rss} | {sample['messages_bytes'] / 2**20:.1f} "
            f"| {sample['live']} | {sample['dead']} |"
        )
        next_t = sample["t"] + every_s
    return "\n".join(lines)


def render_report(res: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The whole report of a suite run, in Markdown."""
    m = res.get("machine", {})
    out = [
        f"## Sundial bench — {res['mode']} mode, {res['runs']} run(s) per workload "
        f"(medians), {res.get('elapsed_s')} s",
        "",
        render_table(rows),
        "",
        f"Machine: {m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB, "
        f"PostgreSQL {m.get('postgresql')} (fsync/synchronous_commit on), Python "
        f"{m.get('python')}, {m.get('server_workers')} server workers, "
        f"taskset {m.get('taskset') or 'none'}.",
        f"Load average before/after: {_fmt(list(res.get('loadavg_before', [])))} → "
        f"{_fmt(list(res.get('loadavg_after', [])))}.",
        "",
        "CPU seconds per process during each measurement (median over runs):",
        "",
        cpu_table(res),
    ]
    soak = res.get("workloads", {}).get("soak")
    if soak:
        out += ["", soak_timeline(soak[0])]
    checks = res.get("checks", [])
    bad = [c for c in checks if not c["ok"]]
    out += ["", f"Correctness checks: {len(checks) - len(bad)}/{len(checks)} passed."]
    out += [f"- FAILED: {c['check']}: {c}" for c in bad]
    for label, prof in res.get("profiles", {}).items():
        for pid, s in prof.get("profile", {}).items():
            out += [
                "",
                f"Profile of worker {pid} during {label} ({s['samples']} samples, "
                f"busy {s['busy_share']}):",
                "",
            ]
            out += [f"- {name}: {pct}%" for name, pct in s["by_library_pct"]]
            out += ["", "  top self:"]
            out += [f"  - {pct}% {name}" for name, pct in s["top_self_pct"][:12]]
    return "\n".join(out) + "\n"


def progress_line(r: dict[str, Any]) -> str:
    """The figures of one run of a throughput workload, as the log shows them."""
    parts = []
    for system in ("sundial", "raw", "peer"):
        if system in r:
            x = r[system]
            if "rate" in x:
                parts.append(f"{system} {x['rate']:,.0f}/s")
            elif "latency_ms" in x and "wake" in x["latency_ms"]:
                lat = x["latency_ms"]["wake"]
                parts.append(f"{system} {_fmt(lat['p50'])}/{_fmt(lat['p99'])} ms")
    return "  " + ", ".join(parts)
