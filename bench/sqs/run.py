"""One SQS bench run: a PostgreSQL and ``sundial serve``, a namespace with a bearer token and an
SQS access key; then per run, for each door a fresh queue and a generator process, the produce
phases and the consume phases in turn (SQS and REST alternating which goes first); then,
whatever happened (an error, Ctrl-C, SIGTERM), everything stopped, the temp dir removed (unless
``--keep``) and the report written."""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

from bench.checks import record
from bench.harness import NAMESPACE, Environment
from bench.interrupts import terminate_as_interrupt, uninterrupted
from bench.machine import machine_facts
from bench.processes import Server
from bench.sqs.clients import REGION
from bench.sqs.loads import Generator
from bench.sqs.model import BEST, PHASES, REST, SQS, order, summarise
from bench.sqs.report import render_report

QUICK: dict[str, Any] = {
    "mode": "quick",
    "runs": 3,
    "messages": 6_000,
    "warmup_messages": 400,
    "threads": 4,
    "batch": 10,
    "best_batch": 100,
}
FULL: dict[str, Any] = {
    "mode": "full",
    "runs": 5,
    "messages": 20_000,
    "warmup_messages": 1_000,
    "threads": 4,
    "batch": 10,
    "best_batch": 100,
}


def issue_access_key(server: Server) -> dict[str, str]:
    """An SQS access key of the bench's namespace, issued through the admin API."""
    answer = httpx.post(
        f"{server.base}/v1/namespaces/{NAMESPACE}/tokens",
        json={"kind": "sqs", "label": "bench-sqs"},
        headers={"Authorization": f"Bearer {server.admin_token}"},
        timeout=30,
    )
    answer.raise_for_status()
    body = answer.json()
    return {"access_key_id": body["access_key_id"], "secret_access_key": body["token"]}


def _queue_id(env: Environment, name: str) -> int:
    with env.connect() as conn:
        row = conn.execute(
            "SELECT id FROM queues WHERE namespace = %s AND name = %s", (NAMESPACE, name)
        ).fetchone()
    assert row is not None, name
    return int(row[0])


def _specs(
    env: Environment, server: Server, key: dict[str, str], size: dict[str, Any], run: int
) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """A fresh queue for each door, made as each door's user makes one (the SQS door's through
    CreateQueue, the REST API's with PUT), and each generator's spec."""
    common = {
        "base": server.base,
        "threads": size["threads"],
        "messages": size["messages"],
        "warmup_messages": size["warmup_messages"],
    }
    sqs = boto3.session.Session().client(
        "sqs",
        endpoint_url=f"{server.base}/sqs",
        region_name=REGION,
        aws_access_key_id=key["access_key_id"],
        aws_secret_access_key=key["secret_access_key"],
        config=Config(retries={"total_max_attempts": 1}),
    )
    name = f"sqs-{run}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    specs = {
        SQS: {**common, "door": "sqs", "batch": size["batch"], "queue_url": url, **key},
        REST: {
            **common,
            "door": "rest",
            "batch": size["batch"],
            "token": server.token,
            "queue_path": env.queue_path(f"rest-{run}"),
        },
        BEST: {
            **common,
            "door": "rest",
            "batch": size["best_batch"],
            "token": server.token,
            "queue_path": env.queue_path(f"rest{size['best_batch']}-{run}"),
        },
    }
    queues = {
        SQS: _queue_id(env, name),
        REST: env.create_queue(f"rest-{run}"),
        BEST: env.create_queue(f"rest{size['best_batch']}-{run}"),
    }
    return specs, queues


def measure_run(
    env: Environment,
    key: dict[str, str],
    size: dict[str, Any],
    run: int,
    checks: list[dict[str, Any]],
    log: Any,
) -> dict[str, Any]:
    """One run: every door's generator started and warmed up, then each phase on each door in
    turn (a ``CHECKPOINT`` before each), then the checks and the queues dropped."""
    server = env.server
    assert server is not None
    doors = order(run)
    specs, queues = _specs(env, server, key, size, run)
    generators: dict[str, Generator] = {}
    out: dict[str, Any] = {"order": list(doors)}
    try:
        for door in doors:
            generators[door] = Generator(
                specs[door], env.root / f"clients-{door}-{run}.log", env.taskset
            )
        for door in doors:
            out[door] = {"warmup": generators[door].ready()}
        for phase in PHASES:
            for door in doors:
                env.checkpoint()
                out[door][phase] = result = generators[door].phase(phase, server)
                log(f"  {phase} {door}: {result['rate']:,.0f} msg/s")
    finally:
        for generator in generators.values():
            generator.close()
    expected = size["messages"] + size["warmup_messages"]
    for door in doors:
        got = out[door]
        produced, consumed = got["produce"], got["consume"]
        counts = env.counts(queues[door])
        record(
            checks,
            f"run {run + 1} {door}: {size['messages']} sent and deleted once each, no errors,"
            " every row completed",
            produced["messages"] == size["messages"]
            and consumed["messages"] == size["messages"]
            and consumed["received"] == size["messages"]
            and consumed["duplicates"] == 0
            and produced["errors"] + consumed["errors"] == 0
            and produced["refused"] + consumed["refused"] == 0
            and not consumed["timed_out"]
            and counts == {"completed": expected},
            {
                "sent": produced["messages"],
                "deleted": consumed["messages"],
                "received": consumed["received"],
                "duplicates": consumed["duplicates"],
                "errors": produced["errors"] + consumed["errors"],
                "refused": produced["refused"] + consumed["refused"],
                "problems": produced["problems"] + consumed["problems"],
                "counts": counts,
                "expected_completed": expected,
            },
        )
        env.drop_queue(queues[door])
    return out


def run(
    *,
    full: bool = False,
    runs: int | None = None,
    workers: int = 2,
    out: Path,
    keep: bool = False,
    taskset: str | None = None,
) -> int:
    """The whole SQS bench; 1 if a correctness check failed."""
    size = dict(FULL if full else QUICK)
    runs = runs or size["runs"]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", flush=True)

    env = Environment(workers=workers, taskset=taskset, keep=keep)
    checks: list[dict[str, Any]] = []
    res: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": size["mode"],
        "sizes": {**size, "runs": runs},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "checks": checks,
        "runs": [],
    }
    try:
        with terminate_as_interrupt():
            log(f"starting PostgreSQL and `sundial serve` ({workers} workers) in {env.root}")
            server = env.start()
            res["machine"] = machine_facts(env)
            key = issue_access_key(server)
            for run_no in range(runs):
                log(f"run {run_no + 1}/{runs}: {' → '.join(order(run_no))}")
                res["runs"].append(measure_run(env, key, size, run_no, checks, log))
            log_text = (env.root / "serve.log").read_text(errors="replace")
            record(
                checks,
                "the server logged no traceback",
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
            log("stopping the server and PostgreSQL")
            with contextlib.suppress(Exception):
                env.stop()
            res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            res["elapsed_s"] = round(time.monotonic() - started, 1)
            res["summary"] = summarise(res["runs"])
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            path = out / f"results-sqs-{size['mode']}-{stamp}.json"
            path.write_text(json.dumps(res, indent=1, default=str))
            report = render_report(res)
            (out / f"report-sqs-{size['mode']}.md").write_text(report)
            print()
            print(report)
            log(f"results in {path}" + (f"; kept {env.root}" if keep else ""))
    return 1 if any(not c["ok"] for c in checks) else 0
