"""The raw-SQL baselines of ``bench/`` bind what the server binds.

pgbench cannot import Sundial's statements, so ``bench/pgbench/*.sql`` repeat them; these tests
fail when a batch statement's JSON document changes shape in ``app/store/queries.py`` and the
baseline is not changed with it (the baseline would then measure a different statement).
"""

from __future__ import annotations

import re
from pathlib import Path

from app.store import queries

PGBENCH = Path(__file__).resolve().parents[2] / "bench" / "pgbench"


def recordset_columns(sql: str) -> list[list[str]]:
    """The column lists of every ``json_to_recordset(...) AS (...)`` in ``sql``, normalised."""
    lists = re.findall(
        r"json_to_recordset\(CAST\(:\w+ AS json\)\)\s+AS\s+\w*\s*\((.*?)\)", sql, re.S
    )
    return [[" ".join(column.split()) for column in found.split(",")] for found in lists]


def test_the_raw_enqueue_reads_the_servers_document() -> None:
    server = recordset_columns(queries.MESSAGES_ENQUEUE.text)
    assert [len(columns) for columns in server] == [11]
    assert recordset_columns((PGBENCH / "enqueue.sql").read_text()) == server


def test_the_raw_ack_reads_the_servers_document() -> None:
    server = recordset_columns(queries.MESSAGES_COMPLETE_MANY.text)
    assert server == [["id text", "lease_id uuid"]]
    assert recordset_columns((PGBENCH / "process.sql").read_text()) == server
