"""The pools bench's report: the routing overhead against its target, the CPU of every process
per message, two pools against one, and the capacity model's figures from this run."""

from __future__ import annotations

from typing import Any

from bench.pools.model import TARGET_OVERHEAD, summarise


def fmt(x: Any) -> str:
    """A figure as the suite's tables show it: — for none, 2 decimals under 10, 1 under 100."""
    if x is None:
        return "—"
    if isinstance(x, float) and abs(x) < 100:
        return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"
    return f"{x:,.0f}"


def ratio(r: dict[str, Any]) -> str:
    """A per-run ratio's median with its spread: ``1.03 (0.98-1.07)``."""
    if r.get("median") is None:
        return "—"
    return f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f})"


def overhead_table(overhead: dict[str, Any]) -> list[str]:
    """(b) routed against (a) single: throughput and server CPU per message, the ratio of the
    latter against the target."""
    lines = [
        "| workload | (a) msg/s | (b) msg/s | (b)/(a) msg/s | (a) server µs/msg"
        " | (b) server µs/msg | **(b)/(a) server CPU/msg** (min-max) | target | met?"
        " | (b)/(a) net of idle |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, c in overhead.items():
        cpu = c["server_us"]["ratio"]
        met = "—" if cpu["median"] is None else "yes" if cpu["median"] <= TARGET_OVERHEAD else "NO"
        lines.append(
            f"| {workload} | {fmt(c['rate']['single'])} | {fmt(c['rate']['routed'])} "
            f"| {ratio(c['rate']['ratio'])} | {fmt(c['server_us']['single'])} "
            f"| {fmt(c['server_us']['routed'])} | {ratio(cpu)} "
            f"| <= {TARGET_OVERHEAD:.2f} | {met} | {ratio(c['server_net_us']['ratio'])} |"
        )
    return lines


def cpu_table(
    compared: dict[str, Any], systems: tuple[str, str], labels: dict[str, str]
) -> list[str]:
    """Per workload and setup (medians over runs): throughput, each process's CPU per message,
    the database's share, and the cores the machine's other processes kept busy."""
    lines = [
        "| workload | setup | msg/s | server µs/msg | PostgreSQL µs/msg | generator µs/msg"
        " | PostgreSQL's share | server / PostgreSQL µs/msg net of idle | others' cores |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, c in compared.items():
        for system in systems:
            total = c["total_us"][system]
            db = c["database_us"][system]
            share = f"{db / total:.0%}" if db is not None and total else "—"
            lines.append(
                f"| {workload} | {labels[system]} | {fmt(c['rate'][system])} "
                f"| {fmt(c['server_us'][system])} | {fmt(db)} "
                f"| {fmt(c['generator_us'][system])} | {share} "
                f"| {fmt(c['server_net_us'][system])} / {fmt(c['database_net_us'][system])} "
                f"| {fmt(c['others_cores'][system])} |"
            )
    return lines


def split_table(split: dict[str, Any], cores: int) -> list[str]:
    """Two pools against one: throughput, the database's CPU per message, and how busy the
    machine's cores were (all of them busy and no I/O wait: CPU was the bound, not commits)."""
    lines = [
        "| workload | one pool msg/s | two pools msg/s | **two/one msg/s** (min-max)"
        " | PostgreSQL µs/msg one / two | two/one PostgreSQL µs/msg (min-max)"
        f" | cores busy one / two (of {cores}) | I/O wait one / two |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload, c in split.items():
        lines.append(
            f"| {workload} | {fmt(c['rate']['one'])} | {fmt(c['rate']['two'])} "
            f"| {ratio(c['rate']['ratio'])} "
            f"| {fmt(c['database_us']['one'])} / {fmt(c['database_us']['two'])} "
            f"| {ratio(c['database_us']['ratio'])} "
            f"| {fmt(c['busy_cores']['one'])} / {fmt(c['busy_cores']['two'])} "
            f"| {fmt(c['iowait_cores']['one'])} / {fmt(c['iowait_cores']['two'])} |"
        )
    return lines


def capacity_lines(summary: dict[str, Any]) -> list[str]:
    """The capacity model's inputs from this run and its worked examples."""
    db = summary["database_us"]
    costs = summary["lifecycle_us"]
    util = summary["utilisation"]
    if not costs:
        return []
    lines = [
        "",
        "Capacity model (docs/scaling.md): database cores = rate x PostgreSQL CPU"
        f" per message / {util:.0%} utilisation. PostgreSQL µs per message net of idle, from"
        " this run: "
        + ", ".join(f"{w} {fmt(v)}" for w, v in db.items())
        + "; a message's life (enqueue + dequeue and complete): "
        + ", ".join(f"{label} {fmt(v)} µs" for label, v in costs.items())
        + ". A pool served by one server (2 workers) spends "
        + fmt(summary.get("pool_idle_cores"))
        + " cores idle (the second cluster's PostgreSQL with nothing to do).",
        "",
    ]
    sizes = sorted(next(iter(summary["capacity"]))["pools"]) if summary["capacity"] else []
    lines += [
        "| a message's life | msg/s | database cores | "
        + " | ".join(f"pools of {n} cores" for n in sizes)
        + " |",
        "|---|---|---|" + "---|" * len(sizes),
    ]
    for row in summary["capacity"]:
        lines.append(
            f"| {row['lifecycle']} | {row['rate']:,} | {fmt(row['cores'])} | "
            + " | ".join(str(row["pools"][n]) for n in sizes)
            + " |"
        )
    return lines


def idle_line(idle: dict[str, Any] | list[dict[str, Any]], labels: dict[str, str]) -> str:
    """What the servers and the databases spend with nothing to do, in cores (before / after the
    phase's runs when both were measured)."""
    readings = idle if isinstance(idle, list) else [idle]

    def both(kind: str, name: str) -> str:
        return " / ".join(fmt(r[kind].get(name)) for r in readings)

    servers = ", ".join(f"{labels.get(n, n)} {both('servers', n)}" for n in readings[0]["servers"])
    clusters = ", ".join(f"{n} {both('clusters', n)}" for n in readings[0]["clusters"])
    when = "before / after the runs" if len(readings) > 1 else "before the runs"
    return (
        f"Idle for {readings[0]['wall_s']:.0f} s, {when} (cores): server {servers};"
        f' PostgreSQL {clusters}. The "net of idle" figures take the mean off each'
        " measurement's CPU."
    )


def router_line(router: dict[str, Any], shares: dict[str, float]) -> str:
    """The router's cost per lookup in process, and what it adds per message."""
    added = ", ".join(f"{w} {share:.2%}" for w, share in shares.items())
    return (
        f"In process (no server, no database): a namespace lookup through the router costs"
        f" {router['single_ns'] / 1000:.2f} µs of CPU with one pool,"
        f" {router['routed_ns'] / 1000:.2f} µs routed to a second"
        f" ({router['added_ns']:+,.0f} ns; medians of"
        f" {len(router['runs']['single'])} x {router['calls']:,} calls). At two lookups per request"
        " (token, queue), that adds to (a)'s server CPU per message: " + (added or "—") + "."
    )


def _per_run(runs: list[dict[str, Any]], systems: tuple[str, str]) -> str:
    parts = []
    for workload in runs[0] if runs else []:
        pairs = []
        for r in runs:
            if workload not in r:
                continue
            x, y = (r[workload].get(s) for s in systems)
            if x is None or y is None:
                continue
            us = [x["cpu"]["server_cpu_s"] / x["handled"] * 1e6 if x["handled"] else None]
            us += [y["cpu"]["server_cpu_s"] / y["handled"] * 1e6 if y["handled"] else None]
            pairs.append(f"{fmt(x['rate'])}/{fmt(y['rate'])} msg/s, {fmt(us[0])}/{fmt(us[1])} µs")
        parts.append(f"{workload}: " + "; ".join(pairs))
    return ". ".join(parts)


def render_report(res: dict[str, Any]) -> str:
    """The whole report of a pools bench run, in Markdown."""
    summary = res.get("summary") or summarise(res)
    m = res.get("machine", {})
    cores = m.get("cores") or 2
    n = len(res.get("overhead", []))
    lines = [
        f"## Sundial pools bench — {res['mode']} mode, {n} alternating run(s) per phase"
        f" (medians), {res.get('elapsed_s')} s",
    ]
    if summary["overhead"]:
        lines += [
            "",
            "Routing overhead, 8 clients, 1 message per request: (a) `sundial serve` without"
            " `SUNDIAL_POOLS`, its namespace on the single database; (b) with `SUNDIAL_POOLS`"
            " naming a second database of the same PostgreSQL, its namespace there (every request"
            " routed). Ratios are medians of per-run ratios, each pair measured back to back:",
            "",
            *overhead_table(summary["overhead"]),
            "",
            "Per run, (a)/(b) (odd runs measure (a) first): "
            + _per_run(res["overhead"], ("single", "routed"))
            + ".",
            "",
            *cpu_table(
                summary["overhead"], ("single", "routed"), {"single": "(a)", "routed": "(b)"}
            ),
        ]
        if res.get("idle", {}).get("overhead"):
            lines += ["", idle_line(res["idle"]["overhead"], {"single": "(a)", "routed": "(b)"})]
        if res.get("router"):
            lines += ["", router_line(res["router"], summary.get("router_share", {}))]
    if summary["split"]:
        lines += [
            "",
            "Two pools against one: one server (pools `default` and `second`), the load split"
            " over two namespaces, 8 clients each, 100 messages per request; **one**: both"
            " namespaces on the first PostgreSQL; **two**: one on each of two PostgreSQL clusters"
            f" (on this machine's {cores} cores both). PostgreSQL µs/msg counts both clusters:",
            "",
            *split_table(summary["split"], cores),
            "",
            *cpu_table(summary["split"], ("one", "two"), {"one": "one pool", "two": "two pools"}),
        ]
        if res.get("idle", {}).get("split"):
            lines += ["", idle_line(res["idle"]["split"], {})]
    lines += capacity_lines(summary)
    lines += [
        "",
        f"Machine: {m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB, PostgreSQL"
        f" {m.get('postgresql')} (fsync/synchronous_commit on), {m.get('server_workers')} server"
        " workers per server, servers on the unix socket.",
        f"Load average before/after: {res.get('loadavg_before')} → {res.get('loadavg_after')}."
        " \"others' cores\": CPU the machine spent outside this bench's processes during a"
        " measurement, over its wall time.",
    ]
    checks = res.get("checks", [])
    bad = [c for c in checks if not c["ok"]]
    lines += ["", f"Correctness checks: {len(checks) - len(bad)}/{len(checks)} passed."]
    lines += [f"- FAILED: {c['check']}: {c}" for c in bad]
    if res.get("error"):
        lines += ["", f"The run stopped early: {res['error']}"]
    return "\n".join(lines) + "\n"
