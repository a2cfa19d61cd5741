"""The store's retry delay (the SQL function ``sundial_retry_delay``) equals the state machine's
:func:`~app.core.states.backoff_seconds` over a grid of attempts, bases and caps."""

from __future__ import annotations

from app.core.states import backoff_seconds
from app.core.validation import MAX_DELAY_SECONDS
from tests.helpers import fetch


async def test_sql_retry_delay_equals_backoff_seconds(engine):
    attempts = [-5, 0, 1, 2, 3, 4, 7, 10, 11, 20, 31, 32, 62, 63, 64, 100, 10_000, 2**31 - 1]
    bases = [0, 1, 2, 3, 7, 10, 30, 3600, MAX_DELAY_SECONDS]
    caps = [0, 1, 15, 60, 3600, 86_400, MAX_DELAY_SECONDS, 2**31 - 1]
    grid = [(a, b, c) for a in attempts for b in bases for c in caps]
    rows = await fetch(
        engine,
        "SELECT a, b, c, sundial_retry_delay(a, b, c) AS d FROM unnest("
        "CAST(:a AS integer[]), CAST(:b AS integer[]), CAST(:c AS integer[])) AS g(a, b, c)",
        a=[g[0] for g in grid],
        b=[g[1] for g in grid],
        c=[g[2] for g in grid],
    )
    assert len(rows) == len(grid)
    mismatches = [
        (r["a"], r["b"], r["c"], r["d"])
        for r in rows
        if r["d"] != backoff_seconds(attempt=r["a"], base_seconds=r["b"], cap_seconds=r["c"])
    ]
    assert mismatches == []
