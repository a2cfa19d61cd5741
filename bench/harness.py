"""The bench's environment: its own durable PostgreSQL and the real ``sundial serve`` process on
it, the queues the workloads use, and the load generator and pgbench run as separate processes
with the CPU of every process counted around them (bench/processes.py).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.embedded import LocalCluster, find_postgres_bindir
from bench.processes import Database, Server, children_cpu, cpu_delta
from bench.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
SUNDIAL = Path(sys.executable).parent / "sundial"
NAMESPACE = "bench"


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _with_literals(script: Path, defines: dict[str, Any], directory: Path) -> Path:
    """A copy of ``script`` in ``directory`` with ``@NAME@`` replaced by each integer define's
    value."""
    text = script.read_text()
    for key, value in defines.items():
        if isinstance(value, int):
            text = text.replace(f"@{key.upper()}@", str(value))
    copy = directory / script.name
    copy.write_text(text)
    return copy


@dataclass
class Environment:
    """A temp dir with a private durable PostgreSQL and one Sundial server on it."""

    workers: int = 2
    taskset: str | None = None
    keep: bool = False
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sundial-bench-")))
    cluster: LocalCluster | None = None
    server: Server | None = None
    pg_version: str = ""

    def start(self) -> Server:
        self.cluster = LocalCluster(self.root / "postgres")
        self.cluster.ensure_initialized()
        self.cluster.start()
        with self.connect() as conn:
            self.pg_version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            settings = dict(
                conn.execute(
                    "SELECT name, setting FROM pg_settings WHERE name IN "
                    "('fsync','synchronous_commit','full_page_writes','shared_buffers',"
                    "'max_connections','wal_level')"
                ).fetchall()
            )
            assert settings["fsync"] == "on", settings
            assert settings["synchronous_commit"] == "on", settings
            self.pg_settings = settings
        self.server = self.serve()
        return self.server

    def connect(self, autocommit: bool = True) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, autocommit=autocommit)

    @property
    def dsn(self) -> str:
        """A libpq DSN of the database the server uses (this environment's cluster if none)."""
        database = self.server.cluster if self.server is not None else self.cluster
        assert database is not None
        return database.libpq_dsn

    def serve(
        self,
        database: Database | None = None,
        *,
        pools: Mapping[str, str] | None = None,
        pool: str | None = None,
    ) -> Server:
        """Start ``sundial serve`` on ``database`` (default: this environment's cluster) and
        wait until every worker answers. ``pools`` is given to the server as ``SUNDIAL_POOLS``
        (name → URL, docs/scaling.md) and ``pool`` names the pool of the bench's namespace
        (default: the server's choice)."""
        database = database or self.cluster
        assert database is not None
        port = free_port()
        token = secrets.token_urlsafe(24)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUNDIAL_")}
        env.update(
            # What `sundial serve` uses for its embedded default: the unix socket.
            SUNDIAL_DATABASE_URL=database.local_sqlalchemy_url,
            SUNDIAL_ADMIN_TOKEN=token,
            SUNDIAL_PORT=str(port),
            SUNDIAL_WORKERS=str(self.workers),
            SUNDIAL_LOG_LEVEL="WARNING",
            SUNDIAL_DATA_DIR=str(self.root / "data"),
        )
        if pools:
            env["SUNDIAL_POOLS"] = json.dumps(dict(pools))
        log = self.root / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(SUNDIAL), "serve"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        server = Server(database, process, base, token, log, self.workers, admin_token=token)
        # Wait until every worker answers (each has its own pool and listener).
        deadline = time.monotonic() + 60
        while len(server.worker_processes()) < self.workers and time.monotonic() < deadline:
            time.sleep(0.2)
        admin = {"Authorization": f"Bearer {token}"}
        created = httpx.post(
            f"{base}/v1/namespaces",
            json={"name": NAMESPACE, **({"pool": pool} if pool else {})},
            headers=admin,
            timeout=10,
        )
        if created.status_code != 409:  # 409: it exists already
            created.raise_for_status()
        answer = httpx.post(
            f"{base}/v1/namespaces/{NAMESPACE}/tokens",
            json={"label": "bench"},
            headers=admin,
            timeout=10,
        )
        answer.raise_for_status()
        server.token = answer.json()["token"]
        return server

    def stop(self) -> None:
        self.stop_server()
        if self.cluster is not None:
            self.cluster.stop(mode="fast")
        if not self.keep:
            subprocess.run(["rm", "-rf", str(self.root)], check=False)

    def stop_server(self) -> None:
        """Stop ``sundial serve`` (SIGTERM, then SIGKILL after a minute), not the database."""
        if self.server is not None and self.server.process.poll() is None:
            self.server.process.send_signal(signal.SIGTERM)
            try:
                self.server.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.server.process.kill()
                self.server.process.wait()

    # --- helpers the workloads use ------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        assert self.server is not None
        return {"Authorization": f"Bearer {self.server.token}"}

    def queue_path(self, name: str) -> str:
        return f"/v1/namespaces/{NAMESPACE}/queues/{name}"

    def create_queue(self, name: str, **config: Any) -> int:
        assert self.server is not None
        answer = httpx.put(
            f"{self.server.base}{self.queue_path(name)}",
            json=config,
            headers=self.headers(),
            timeout=30,
        )
        answer.raise_for_status()
        with self.connect() as conn:
            row = conn.execute(
                "SELECT id FROM queues WHERE namespace = %s AND name = %s", (NAMESPACE, name)
            ).fetchone()
        assert row is not None
        return int(row[0])

    def drop_queue(self, queue_id: int) -> None:
        with self.connect() as conn:
            conn.execute("DELETE FROM messages WHERE queue_id = %s", (queue_id,))
            conn.execute("DELETE FROM queues WHERE id = %s", (queue_id,))

    def checkpoint(self) -> None:
        with self.connect() as conn:
            conn.execute("CHECKPOINT")

    def counts(self, queue_id: int) -> dict[str, int]:
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT state::text, count(*) FROM messages WHERE queue_id = %s GROUP BY 1",
                (queue_id,),
            ).fetchall()
        return {state: int(n) for state, n in rows}

    def wrap(self, argv: list[str]) -> list[str]:
        return ["taskset", "-c", self.taskset, *argv] if self.taskset else argv

    def loadgen(self, spec: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
        """Run the load generator (a separate process) with ``spec``; its JSON result, plus the
        CPU of the server workers, PostgreSQL and the generator itself during the run."""
        assert self.server is not None
        spec = {"base": self.server.base, "token": self.server.token, "dsn": self.dsn, **spec}
        before = self.server.snapshot()
        child_before = children_cpu()
        proc = subprocess.run(
            self.wrap([sys.executable, "-m", "bench.loadgen"]),
            input=json.dumps(spec).encode(),
            capture_output=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
        )
        after = self.server.snapshot()
        if proc.returncode != 0:
            raise RuntimeError(f"loadgen failed ({spec['mode']}):\n{proc.stderr.decode()[-3000:]}")
        result: dict[str, Any] = json.loads(proc.stdout)
        result["cpu"] = cpu_delta(before, after)
        result["cpu"]["loadgen_cpu_s"] = round(children_cpu() - child_before, 2)
        return result

    def pgbench(
        self,
        script: str,
        *,
        clients: int,
        defines: dict[str, Any],
        seconds: float | None = None,
        transactions: int | None = None,
    ) -> dict[str, Any]:
        """Run pgbench (prepared mode) with one of bench/pgbench/*.sql; tps, latencies, CPU.

        Each define is passed as a pgbench variable (``:name``, a bound parameter in prepared
        mode) and also written where ``@NAME@`` stands in the script (a literal)."""
        assert self.cluster is not None
        assert self.server is not None
        bindir = find_postgres_bindir()
        logdir = Path(tempfile.mkdtemp(prefix="pgbench-", dir=self.root))
        argv = [
            str(bindir / "pgbench"),
            "-h",
            # The unix socket when there is one, as the server uses (Environment._serve).
            str(self.cluster.socket_dir or self.cluster.host),
            "-p",
            str(self.cluster.port),
            "-U",
            self.cluster.user,
            "-n",
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(min(clients, os.cpu_count() or 2)),
            *(["-t", str(transactions)] if transactions else ["-T", str(round(seconds or 1))]),
            "-f",
            str(_with_literals(BENCH / "pgbench" / script, defines, logdir)),
            "-l",
            "--log-prefix",
            str(logdir / "log"),
        ]
        for key, value in defines.items():
            argv += ["-D", f"{key}={value}"]
        argv.append(self.cluster.database)
        before = self.server.snapshot()
        child_before = children_cpu()
        proc = subprocess.run(
            self.wrap(argv), capture_output=True, cwd=logdir, timeout=600, check=False
        )
        after = self.server.snapshot()
        out = proc.stdout.decode()
        if proc.returncode != 0:
            raise RuntimeError(f"pgbench {script} failed:\n{out}\n{proc.stderr.decode()[-2000:]}")
        tps = float(re.search(r"tps = ([\d.]+) \(without initial", out).group(1))  # type: ignore[union-attr]
        txns = int(re.search(r"actually processed: (\d+)", out).group(1))  # type: ignore[union-attr]
        lat_ms = []
        for log in logdir.glob("log*"):
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) >= 3:
                    lat_ms.append(int(parts[2]) / 1000)
        subprocess.run(["rm", "-rf", str(logdir)], check=False)
        cpu = cpu_delta(before, after)
        cpu["pgbench_cpu_s"] = round(children_cpu() - child_before, 2)
        return {
            "tps": tps,
            "transactions": txns,
            "latency_ms": {"p50": percentile(lat_ms, 50), "p99": percentile(lat_ms, 99)},
            "cpu": cpu,
        }
