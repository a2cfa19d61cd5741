"""The write outage: planned switchovers and unplanned losses of the primary, one at a time on a
healthy formation under steady writes, and what the writers saw of each."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.embedded.formation import Formation
from bench.checks import record
from bench.failover.databases import healthy
from bench.failover.writers import Producer, SqlProbe, longest_gap
from bench.harness import Environment

FAILOVER_TIMEOUT = 60.0
REJOIN_TIMEOUT = 180.0
TARGETS = {"switchover": 2.0, "kill": 15.0}
"""The issue's write-outage targets, seconds: planned switchover, unplanned loss of the primary."""
LABELS = {"switchover": "planned switchover", "kill": "unplanned: primary SIGKILLed"}


def inject(
    kind: str,
    formation: Formation,
    producer: Producer,
    probe: SqlProbe,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One fault on a healthy formation under steady writes; what the writers saw."""
    formation.wait_until(healthy, REJOIN_TIMEOUT, "a primary and a caught-up standby")
    producer.wait_steady(time.monotonic(), FAILOVER_TIMEOUT)
    primary = formation.primary()
    assert primary is not None
    started = time.monotonic()
    if kind == "switchover":
        formation.switchover(timeout=FAILOVER_TIMEOUT)
    else:
        formation.kill_node(primary.name)
        formation.wait_until(
            lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
            FAILOVER_TIMEOUT,
            "a new primary",
        )
    formation_done = time.monotonic()
    steady = producer.wait_steady(formation_done, FAILOVER_TIMEOUT)
    new_primary = formation.primary()
    event: dict[str, Any] = {
        "kind": kind,
        "from": primary.name,
        "to": new_primary.name if new_primary else None,
        "outage_s": longest_gap(producer.ok_times, started, steady),
        "database_outage_s": longest_gap(probe.ok_times, started, steady),
        "formation_s": formation_done - started,
        "writes_steady_after_s": steady - started,
        "failures": producer.failures_between(started, steady),
    }
    if kind == "kill":
        restarted = time.monotonic()
        formation.start_node(primary.name)
        formation.wait_until(healthy, REJOIN_TIMEOUT, f"{primary.name} back as the standby")
        rejoined = time.monotonic()
        steady = producer.wait_steady(rejoined, FAILOVER_TIMEOUT)
        event["rejoin_s"] = rejoined - restarted
        event["rejoin_gap_s"] = longest_gap(producer.ok_times, restarted, steady)
    log(
        f"  {kind}: {event['from']} -> {event['to']}, write outage {event['outage_s']:.2f} s"
        f" (database alone {event['database_outage_s']:.2f} s; the formation took"
        f" {event['formation_s']:.1f} s), failed requests "
        f"{event['failures'] or 'none'}"
        + (
            f"; rejoined in {event['rejoin_s']:.1f} s, longest gap meanwhile "
            f"{event['rejoin_gap_s']:.2f} s"
            if kind == "kill"
            else ""
        )
    )
    return event


def measure_outages(
    env: Environment,
    formation: Formation,
    size: dict[str, Any],
    checks: list[dict[str, Any]],
    log: Callable[[str], None],
    outage: dict[str, Any],
) -> None:
    """Every fault in turn; each event goes into ``outage["events"]`` as soon as it is measured,
    so a run that fails later still reports it."""
    assert env.server is not None
    queue_id = env.create_queue("outage")
    producer = Producer(env.server.base, env.server.token, env.queue_path("outage"))
    probe = SqlProbe(formation.libpq_dsn)
    producer.start()
    probe.start()
    faults = ["switchover"] * size["switchovers"] + ["kill"] * size["kills"]
    events: list[dict[str, Any]] = outage.setdefault("events", [])
    try:
        for number, kind in enumerate(faults, 1):
            log(f"fault {number}/{len(faults)}: {LABELS[kind]}")
            events.append(inject(kind, formation, producer, probe, log))
    finally:
        producer.stop()
        probe.stop()
        outage["acknowledged"] = len(producer.acknowledged)
    formation.wait_writable(FAILOVER_TIMEOUT)
    with env.connect() as conn:
        rows = conn.execute("SELECT id FROM messages WHERE queue_id = %s", (queue_id,)).fetchall()
    stored = {row[0] for row in rows}
    lost = set(producer.acknowledged) - stored
    record(
        checks,
        "outage: every acknowledged enqueue is stored after the failovers",
        not lost,
        {"acknowledged": len(set(producer.acknowledged)), "lost": sorted(lost)[:20]},
    )
    answers = Counter(what for _, what in producer.failures)
    unexpected = {what: n for what, n in answers.items() if what[:1].isdigit() and what != "503"}
    record(
        checks,
        "outage: the server answered only 2xx or 503 (never a 500)",
        not unexpected,
        {"unexpected": unexpected},
    )
    outage["failures"] = dict(answers)
    env.drop_queue(queue_id)
