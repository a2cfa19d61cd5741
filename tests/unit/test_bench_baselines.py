"""The raw-SQL baselines of ``bench/`` bind what the server binds.

pgbench cannot import Sundial's statements, so ``bench/pgbench/*.sql`` repeat them; these tests
fail when a batch statement's JSON document changes shape in ``app/store/sql/`` and the
baseline is not changed with it (the baseline would then measure a different statement).
"""

from __future__ import annotations

import re
from pathlib import Path

from app.store.sql.enqueue import MESSAGES_ENQUEUE_IF_NEW
from app.store.sql.transitions import MESSAGES_COMPLETE_IF_LEASED

PGBENCH = Path(__file__).resolve().parents[2] / "bench" / "pgbench"


def recordset_columns(sql: str) -> list[list[str]]:
    """The column lists of every ``json_to_recordset(...) AS (...)`` in ``sql``, normalised."""
    lists = re.findall(
        r"json_to_recordset\(CAST\(:\w+ AS json\)\)\s+AS\s+\w*\s*\((.*?)\)", sql, re.S
    )
    return [[" ".join(column.split()) for column in found.split(",")] for found in lists]


def test_the_raw_enqueue_reads_the_servers_document() -> None:
    server = recordset_columns(MESSAGES_ENQUEUE_IF_NEW.text)
    assert [len(columns) for columns in server] == [11]
    assert recordset_columns((PGBENCH / "enqueue.sql").read_text()) == server


def test_the_raw_ack_reads_the_servers_document() -> None:
    server = recordset_columns(MESSAGES_COMPLETE_IF_LEASED.text)
    assert server == [["id text", "lease_id uuid"]]
    assert recordset_columns((PGBENCH / "process.sql").read_text()) == server


def test_the_raw_cycle_reads_the_servers_document() -> None:
    server = recordset_columns(MESSAGES_COMPLETE_IF_LEASED.text)
    assert recordset_columns((PGBENCH / "cycle.sql").read_text()) == server
