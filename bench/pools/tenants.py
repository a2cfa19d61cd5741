"""The databases of the pools bench and the namespaces on them: a second database of a running
embedded PostgreSQL, and a :class:`Tenant` (a namespace of a server, its token and the database
that holds its rows) with the helpers the measurements use on its queues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import psycopg

from app.embedded import LocalCluster
from bench.processes import Server


def database_on(cluster: LocalCluster, name: str) -> LocalCluster:
    """Another database of ``cluster``'s running PostgreSQL, created if missing, as a
    :class:`LocalCluster` whose URLs name it (same directory, same postmaster)."""
    other = LocalCluster(cluster.base_dir, database=name, user=cluster.user)
    other.start()  # the server runs already: this only creates the database
    return other


@dataclass
class Tenant:
    """A namespace on a server: its token and the database (its pool's) that holds its rows."""

    server: Server
    name: str
    pool: str
    home: LocalCluster
    token: str

    @classmethod
    def create(cls, server: Server, name: str, pool: str, home: LocalCluster) -> Tenant:
        """Make the namespace ``name`` on ``pool`` through the admin API, and a token for it;
        refuse if the server placed it elsewhere."""
        admin = {"Authorization": f"Bearer {server.admin_token}"}
        answer = httpx.post(
            f"{server.base}/v1/namespaces",
            json={"name": name, "pool": pool},
            headers=admin,
            timeout=30,
        )
        answer.raise_for_status()
        placed = answer.json()["pool"]
        if placed != pool:
            raise RuntimeError(f"namespace {name} was placed on {placed}, not {pool}")
        token = httpx.post(
            f"{server.base}/v1/namespaces/{name}/tokens",
            json={"label": "bench"},
            headers=admin,
            timeout=30,
        )
        token.raise_for_status()
        return cls(server, name, pool, home, token.json()["token"])

    def placed_on(self) -> str | None:
        """The pool the server says holds this namespace now."""
        answer = httpx.get(
            f"{self.server.base}/v1/namespaces",
            headers={"Authorization": f"Bearer {self.server.admin_token}"},
            timeout=30,
        )
        answer.raise_for_status()
        for namespace in answer.json()["namespaces"]:
            if namespace["name"] == self.name:
                return str(namespace["pool"])
        return None

    def connect(self, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A connection to the database that holds the namespace's rows."""
        return psycopg.connect(self.home.libpq_dsn, autocommit=autocommit)

    def queue_path(self, queue: str) -> str:
        return f"/v1/namespaces/{self.name}/queues/{queue}"

    def create_queue(self, queue: str) -> int:
        """Make ``queue`` through the API; its id, read from the namespace's database."""
        answer = httpx.put(
            f"{self.server.base}{self.queue_path(queue)}",
            json={},
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )
        answer.raise_for_status()
        with self.connect() as conn:
            row = conn.execute(
                "SELECT id FROM queues WHERE namespace = %s AND name = %s", (self.name, queue)
            ).fetchone()
        if row is None:
            raise RuntimeError(f"queue {self.name}/{queue} is not in {self.home.database}")
        return int(row[0])

    def drop_queue(self, queue_id: int) -> None:
        with self.connect() as conn:
            conn.execute("DELETE FROM messages WHERE queue_id = %s", (queue_id,))
            conn.execute("DELETE FROM queues WHERE id = %s", (queue_id,))

    def counts(self, queue_id: int) -> dict[str, int]:
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT state::text, count(*) FROM messages WHERE queue_id = %s GROUP BY 1",
                (queue_id,),
            ).fetchall()
        return {state: int(n) for state, n in rows}


def checkpoint(*clusters: LocalCluster) -> None:
    """``CHECKPOINT`` on each PostgreSQL, so that no measurement pays for the previous one's
    dirty pages."""
    for cluster in clusters:
        with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
