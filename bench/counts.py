"""The kept counts (docs/adr/0014-counts-kept-by-triggers.md): what they save the reads and what
they cost the writes. Not part of ``python -m bench``: run it on its own.

    python -m bench.counts reads [--backlog 10000000] [--rounds 7]
    python -m bench.counts writes [--whole]       # needs valgrind

``reads``: a private PostgreSQL and ``sundial serve`` (:class:`bench.harness.Environment`), one
queue with ``--backlog`` pending messages (:func:`bench.prepare.prefill`) beside two empty ones;
times ``GET …/queues/{queue}``, ``GET …/queues`` and ``GET /metrics`` through HTTP (each scrape
5.2 s after the previous one, past the metrics' 5 s cache, so that it reads the database), and,
for reference, counting the backlog's rows per state as those reads did before migration 0010.

``writes``: instructions PostgreSQL executes per run of Sundial's hot statements (one message and
a hundred: enqueue, claim, extend, complete), with the count triggers disabled, enabled, and
enabled with ``messages_pending_visible_idx``: a single-user backend under valgrind's callgrind
runs each statement PREPAREd, after warm-up runs, and only its EXECUTEs are counted (the
statement and its AFTER triggers, not parsing, protocol or commit). ``--whole`` also counts
whole transactions (parse and commit included), as the difference between a run with the
measured EXECUTEs and one without. Instruction counts do not move with the load of a shared
machine, as time does.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import TextClause

from app.core.states import Event
from app.embedded import LocalCluster, find_postgres_bindir
from app.embedded.privileges import get_pg_account
from app.store import migrate
from app.store.sql import claim, enqueue, transitions
from app.store.sql.guards import from_states
from bench.harness import NAMESPACE, Environment
from bench.prepare import prefill

# --- reads ------------------------------------------------------------------------------------

# How GET …/queues/{queue} counted before migration 0010 (for reference).
COUNTED = (
    "SELECT m.queue_id, m.state::text AS state, count(*) AS n FROM messages m"
    " WHERE m.queue_id = ANY(%(ids)s) GROUP BY m.queue_id, m.state"
)


def _timed(get: Callable[[], httpx.Response], rounds: int, pause: float) -> list[float]:
    get().raise_for_status()
    times = []
    for _ in range(rounds):
        time.sleep(pause)
        start = time.perf_counter()
        get().raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
    return times


def reads(backlog: int, rounds: int) -> None:
    env = Environment(workers=1)
    try:
        server = env.start()
        big = env.create_queue("big")
        ids = [big, env.create_queue("empty1"), env.create_queue("empty2")]
        seconds = prefill(env, big, backlog)
        print(f"{backlog:,} pending messages in one queue, prefilled in {seconds:.0f} s")
        headers = env.headers()
        base = f"{server.base}/v1/namespaces/{NAMESPACE}/queues"
        with httpx.Client(timeout=120) as client:
            reads_ = {
                "GET …/queues/{queue}": (lambda: client.get(f"{base}/big", headers=headers), 0.0),
                "GET …/queues": (lambda: client.get(base, headers=headers), 0.0),
                "GET /metrics": (lambda: client.get(f"{server.base}/metrics"), 5.2),
            }
            for name, (get, pause) in reads_.items():
                ms = _timed(get, rounds, pause)
                print(f"{name:22s} ms: median {statistics.median(ms):8.1f}  min {min(ms):8.1f}")
            counts = client.get(f"{base}/big", headers=headers).json()["counts"]
            assert counts["pending"] == backlog, counts
        with env.connect() as conn:
            start = time.perf_counter()
            conn.execute(COUNTED, {"ids": ids}).fetchall()
            counted = (time.perf_counter() - start) * 1000
        print(f"{'counting rows instead':22s} ms: {counted:8.1f} (the statement alone)")
    finally:
        env.stop()


# --- writes -----------------------------------------------------------------------------------

TRIGGERS = ("messages_counts_inserted", "messages_counts_deleted", "messages_counts_updated")
VARIANTS = ("none", "triggers", "triggers+index")


def _render(stmt: TextClause, params: list[str], **literals: str) -> str:
    """``stmt`` with ``literals`` written in and ``params`` as $1, $2… (for PREPARE)."""
    order: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in literals:
            return literals[name]
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    sql = re.sub(r"(?<![:\w]):(\w+)", sub, stmt.text).strip()
    assert order == params, (order, params)
    return sql


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _lease(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"p{i}"))


def _rows(prefix: str, n: int) -> str:
    return _lit(
        json.dumps([{"id": f"{prefix}-{k}", "payload": "1", "delay_seconds": 0} for k in range(n)])
    )


def _items(first: int, n: int) -> str:
    return _lit(
        json.dumps([{"id": f"p{i}", "lease_id": _lease(i)} for i in range(first, first + n)])
    )


def _ids(first: int, n: int) -> list[list[str]]:
    return [[_lit(f"p{i}"), _lit(_lease(i))] for i in range(first, first + n)]


# (name, statement, messages to prefill and their state, warm-up arguments, measured arguments).
# Every case starts from a few thousand messages, analyzed: with the statistics of an empty
# table the planner would read the table for the ids an enqueue finds taken, a cost that grows
# with every message the measured runs add.
Case = tuple[str, str, int, str, list[list[str]], list[list[str]]]


def _cases() -> list[Case]:
    q = {"queue_id": "1", "catalogue_version": "NULL", "valid_until": "NULL"}
    one = _render(
        enqueue.MESSAGE_ENQUEUE_ONE_IF_NEW, ["id"], **q, filter_key="NULL", priority="NULL",
        payload="'1'", metadata="'{}'", exclusive_value="NULL", max_attempts="NULL",
        lease_seconds="NULL", delay="0", visible_at="NULL", ttl="NULL", expires_at="NULL",
    )  # fmt: skip
    batch = _render(enqueue.MESSAGES_ENQUEUE_IF_NEW, ["rows"], **q, filter_key="NULL")
    lease = {"lease_override": "NULL", "queue_lease": "30"}
    claims = {n: _render(claim.messages_claim(count=n), [], **q, **lease) for n in (1, 100)}
    running = f"'{from_states(Event.COMPLETE)}'"
    held = {"queue_lease": "30", "queue_max_attempts": "3"}
    extend = _render(
        transitions.MESSAGE_EXTEND_IF_LEASED, ["id", "lease_id"], **q, **held,
        from_states=f"'{from_states(Event.EXTEND)}'", lease_seconds="60",
    )  # fmt: skip
    complete = _render(
        transitions.MESSAGE_COMPLETE_IF_LEASED, ["id", "lease_id"], **q, **held,
        frees_value="false", from_states=running,
    )  # fmt: skip
    completes = _render(
        transitions.MESSAGES_COMPLETE_IF_LEASED, ["items"], **q, frees_value="false",
        from_states=running,
    )  # fmt: skip
    return [
        ("enqueue x1", one, 3700, "pending", [[_lit(f"w{i}")] for i in range(6)],
         [[_lit(f"e{i}")] for i in range(400)]),
        ("enqueue x100", batch, 3700, "pending", [[_rows(f"w{i}", 100)] for i in range(6)],
         [[_rows(f"b{i}", 100)] for i in range(30)]),
        ("claim x1", claims[1], 420, "pending", [[]] * 6, [[]] * 400),
        ("extend x1", extend, 420, "running", _ids(0, 6), _ids(6, 400)),
        ("complete x1", complete, 420, "running", _ids(0, 6), _ids(6, 400)),
        ("claim x100", claims[100], 3700, "pending", [[]] * 6, [[]] * 30),
        ("complete x100", completes, 3700, "running",
         [[_items(100 * j, 100)] for j in range(6)],
         [[_items(100 * j, 100)] for j in range(6, 36)]),
    ]  # fmt: skip


def _script(variant: str, case: Case, measured: list[list[str]]) -> str:
    _, stmt, rows, state, warm, _ = case
    on = "DISABLE" if variant == "none" else "ENABLE"
    commands = [f"ALTER TABLE messages {on} TRIGGER {trigger}" for trigger in TRIGGERS]
    if variant.endswith("index"):
        commands.append(
            "CREATE INDEX IF NOT EXISTS messages_pending_visible_idx ON messages "
            "(queue_id, visible_at) WHERE state = 'pending'"
        )
    else:
        commands.append("DROP INDEX IF EXISTS messages_pending_visible_idx")
    commands += ["TRUNCATE messages", "DELETE FROM queue_state_count_deltas"]
    if rows:
        commands.append(
            "INSERT INTO messages (queue_id, id, priority, state, payload, visible_at) SELECT 1,"
            f" 'p' || g, g, 'pending', '1', now() FROM generate_series(0, {rows - 1}) g"
        )
    if state == "running":
        values = ",".join(f"('p{i}', '{_lease(i)}'::uuid)" for i in range(rows))
        commands.append(
            "UPDATE messages m SET state = 'running', lease_id = v.lease_id, lease_expires_at ="
            f" now() + interval '1 hour' FROM (VALUES {values}) AS v (id, lease_id)"
            " WHERE m.queue_id = 1 AND m.id = v.id"
        )
    commands += ["VACUUM ANALYZE messages", f"PREPARE s AS {stmt}"]

    def run(args: list[str]) -> str:
        return "EXECUTE s" + (f"({', '.join(args)})" if args else "")

    # Warm-up runs (plans cached, the trigger's plan too) through EXPLAIN, which is not counted.
    commands += [f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {run(args)}" for args in warm]
    commands += [run(args) for args in measured]
    return "".join(command + ";\n\n" for command in commands)


def _instructions(cluster: LocalCluster, script: str, out: Path, *, whole: bool) -> int:
    collect = ["--collect-atstart=yes"] if whole else [
        "--collect-atstart=no", "--toggle-collect=ExecuteQuery",
    ]  # fmt: skip
    postgres = str(find_postgres_bindir() / "postgres")
    answer = subprocess.run(
        ["valgrind", "--tool=callgrind", *collect, f"--callgrind-out-file={out}", postgres,
         "--single", "-j", "-D", str(cluster.data_dir), "-c", "jit=off", "-c", "autovacuum=off",
         cluster.database],
        input=script, capture_output=True, text=True, check=False,
        **get_pg_account().subprocess_kwargs(),
    )  # fmt: skip
    if answer.returncode or "ERROR" in answer.stdout + answer.stderr:
        raise RuntimeError((answer.stdout + answer.stderr)[-3000:])
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


def writes(whole: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="sundial-counts-"))
    cluster = LocalCluster(root / "postgres")
    cluster.ensure_initialized()
    cluster.start()
    try:
        migrate.upgrade(cluster.sqlalchemy_url)
        with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO namespaces (name) VALUES ('ns')")
            conn.execute(
                "INSERT INTO queues (namespace, name, kind, lease_seconds, delay_seconds,"
                " max_attempts, retry_delay_seconds, retry_delay_max_seconds, retention_seconds)"
                " VALUES ('ns', 'q', 'simple', 30, 0, 3, 0, 3600, 604800)"
            )
    finally:
        cluster.stop(mode="fast")
    (root / "callgrind").mkdir()
    (root / "callgrind").chmod(0o777)  # written by the server's account
    modes = [("statement", False)] + ([("whole transaction", True)] if whole else [])
    try:
        for mode, everything in modes:
            print(f"\nthousand instructions per {mode}, and the change against 'none'")
            print(f"{'statement':15s}" + "".join(f"{v:>18s}" for v in VARIANTS))
            for case in _cases():
                counted = {}
                for variant in VARIANTS:
                    out = root / "callgrind" / f"{variant}-{case[0].replace(' ', '_')}.out"
                    total = _instructions(
                        cluster, _script(variant, case, case[5]), out, whole=everything
                    )
                    if everything:
                        total -= _instructions(cluster, _script(variant, case, []), out, whole=True)
                    counted[variant] = total / len(case[5])
                base = counted["none"]
                cells = [f"{base / 1000:18.1f}"] + [
                    f"{counted[v] / 1000:11.1f} {(counted[v] / base - 1) * 100:+5.1f}%"
                    for v in VARIANTS[1:]
                ]
                print(f"{case[0]:15s}" + "".join(cells), flush=True)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.counts", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    read = sub.add_parser("reads", help="time the count reads over a large backlog")
    read.add_argument("--backlog", type=int, default=10_000_000)
    read.add_argument("--rounds", type=int, default=7)
    write = sub.add_parser("writes", help="instructions per hot statement, with and without")
    write.add_argument("--whole", action="store_true", help="whole transactions too")
    args = parser.parse_args()
    if args.what == "reads":
        reads(args.backlog, args.rounds)
    else:
        writes(args.whole)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
