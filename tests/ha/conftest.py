"""The HA tests' formation: one pg_auto_failover formation (``sundial dev-cluster``'s: a
monitor, a primary and its synchronous standby), migrated, for the whole run; every test leaves
it healthy for the next."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from app.embedded.formation import Formation, NodeState
from app.store.migrate import upgrade

FAILOVER_TIMEOUT = 60.0
REJOIN_TIMEOUT = 120.0


def healthy(nodes: list[NodeState]) -> bool:
    """A primary and a caught-up standby."""
    return sorted(node.reported for node in nodes if node.settled) == ["primary", "secondary"]


def stored_ids(formation: Formation) -> set[str]:
    """Every message id in the database, live or archived."""
    with psycopg.connect(formation.libpq_dsn, autocommit=True) as conn:
        live = conn.execute("SELECT id FROM messages").fetchall()
        archived = conn.execute("SELECT id FROM message_history").fetchall()
    return {row[0] for row in (*live, *archived)}


@pytest.fixture(scope="session")
def formation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Formation]:
    formation = Formation(tmp_path_factory.mktemp("formation"))
    try:
        formation.up()
        upgrade(formation.sqlalchemy_url)
        yield formation
    finally:
        formation.destroy()
    assert not formation.processes(), "processes of the formation outlived it"


@pytest.fixture(autouse=True)
def leaves_the_formation_healthy(formation: Formation) -> Iterator[None]:
    yield
    formation.wait_until(healthy, REJOIN_TIMEOUT, "a primary and a caught-up standby")
