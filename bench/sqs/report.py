"""The SQS bench's report: each door's throughput and CPU per message per phase, and the SQS
door against the REST API (per-run ratios, medians and spread)."""

from __future__ import annotations

from typing import Any

from bench.pools.report import fmt, ratio
from bench.sqs.model import BEST, BOTH, DOORS, PHASES, REST, SQS, run_figures, summarise

CALLS = {
    "produce": {SQS: "SendMessageBatch", REST: "POST …/messages"},
    "consume": {SQS: "ReceiveMessage + DeleteMessageBatch", REST: "POST …/dequeue + …/ack"},
}


def door_labels(sizes: dict[str, Any]) -> dict[str, str]:
    """How the report names each door, with its client and batch size."""
    return {
        SQS: f"SQS door (boto3), {sizes['batch']} per request",
        REST: f"REST API (httpx), {sizes['batch']} per request",
        BEST: f"REST API (httpx), {sizes['best_batch']} per request",
    }


def doors_table(summary: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """Per phase and door (medians over runs): throughput, CPU per message of each process,
    request latency, and the cores other processes kept busy."""
    lines = [
        "| phase | door | msg/s | server µs/msg | PostgreSQL µs/msg | client µs/msg"
        " | request p50 / p99 ms | cores busy (others') |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase, c in summary["phases"].items():
        for door in DOORS:
            f = c["doors"].get(door)
            if f is None:
                continue
            latency = "—" if phase == BOTH else f"{fmt(f['p50_ms'])} / {fmt(f['p99_ms'])}"
            busy = "—" if phase == BOTH else f"{fmt(f['busy_cores'])} ({fmt(f['others_cores'])})"
            lines.append(
                f"| {phase} | {labels[door]} | {fmt(f['rate'])} | {fmt(f['server_us'])}"
                f" | {fmt(f['database_us'])} | {fmt(f['generator_us'])} | {latency} | {busy} |"
            )
    return lines


def ratio_table(summary: dict[str, Any]) -> list[str]:
    """SQS against REST at the same batch size, per phase: medians of per-run ratios."""
    lines = [
        "| phase | **SQS/REST msg/s** (min-max) | SQS/REST server µs/msg"
        " | SQS/REST PostgreSQL µs/msg | SQS/REST client µs/msg | SQS / REST at its best msg/s |",
        "|---|---|---|---|---|---|",
    ]
    for phase, c in summary["phases"].items():
        r = c["sqs_rest"]
        lines.append(
            f"| {phase} | {ratio(r['rate'])} | {ratio(r['server_us'])}"
            f" | {ratio(r['database_us'])} | {ratio(r['generator_us'])}"
            f" | {ratio(c['sqs_best_rate'])} |"
        )
    return lines


def per_run_line(runs: list[dict[str, Any]]) -> str:
    """Each run's rates, SQS/REST/REST-best, per phase, in the order measured."""
    parts = []
    for number, run in enumerate(runs, 1):
        figs = run_figures(run)
        rates = "; ".join(
            f"{phase} " + "/".join(fmt(figs[d][phase]["rate"]) if d in figs else "—" for d in DOORS)
            for phase in PHASES
        )
        parts.append(f"run {number} ({' → '.join(run.get('order', []))}): {rates}")
    return ". ".join(parts)


def render_report(res: dict[str, Any]) -> str:
    """The whole report of an SQS bench run, in Markdown."""
    summary = res.get("summary") or summarise(res.get("runs", []))
    sizes = res["sizes"]
    labels = door_labels(sizes)
    m = res.get("machine", {})
    lines = [
        f"## Sundial SQS door bench — {res['mode']} mode, {summary['n']} alternating run(s)"
        f" (medians), {res.get('elapsed_s')} s",
        "",
        f"One server, one namespace; per run and door a fresh queue: {sizes['messages']:,}"
        f" messages produced by {sizes['threads']} clients (one per thread, one process per"
        f" door), then consumed by the same {sizes['threads']}. SQS: "
        + ", ".join(f"{p} = {CALLS[p][SQS]}" for p in PHASES)
        + "; REST: "
        + ", ".join(f"{p} = {CALLS[p][REST]}" for p in PHASES)
        + ". CPU per message is each process's CPU over the phase divided by its messages;"
        " client = the generator process (boto3 or httpx and the bench's threads).",
        "",
        *doors_table(summary, labels),
        "",
        "SQS door against the REST API at the same batch size (medians of per-run ratios, each"
        " pair measured back to back, which goes first alternating):",
        "",
        *ratio_table(summary),
        "",
        "Per run, msg/s SQS/REST/REST at its best: " + per_run_line(res.get("runs", [])) + ".",
        "",
        f"Machine: {m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB, PostgreSQL"
        f" {m.get('postgresql')} (fsync/synchronous_commit on), {m.get('server_workers')} server"
        " workers, the server on the unix socket.",
        f"Load average before/after: {res.get('loadavg_before')} → {res.get('loadavg_after')}."
        " \"cores busy (others')\": the machine's busy cores during a phase, and those busy"
        " outside this bench's processes.",
    ]
    checks = res.get("checks", [])
    bad = [c for c in checks if not c["ok"]]
    lines += ["", f"Correctness checks: {len(checks) - len(bad)}/{len(checks)} passed."]
    lines += [f"- FAILED: {c['check']}: {c}" for c in bad]
    if res.get("error"):
        lines += ["", f"The run stopped early: {res['error']}"]
    return "\n".join(lines) + "\n"
