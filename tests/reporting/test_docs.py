"""The analyst queries of docs/reporting.md, taken from the document itself (so the two cannot
drift), run through the read-only role, and their answers checked against the generated
messages. Each query runs in one transaction with a read of ``now()``, so the Python side uses
the very clock the query saw."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.reporting.conftest import Generated, Row

DOC = Path(__file__).resolve().parents[2] / "docs" / "reporting.md"
BLOCK = re.compile(r"```sql\n(.*?)```", re.DOTALL)
NAME = re.compile(r"--\s*name:\s*(\w+)")


def doc_queries() -> dict[str, str]:
    queries = {}
    for block in BLOCK.findall(DOC.read_text()):
        name = NAME.match(block)
        assert name, f"every SQL block of the doc starts with '-- name: …':\n{block}"
        queries[name.group(1)] = block
    return queries


def hour(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def disc(values: list[Any], fraction: float) -> Any:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def seconds(value: timedelta) -> float:
    return value.total_seconds()


Check = Callable[[list[tuple[Any, ...]], list[Row], datetime], None]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


@check("depth")
def _depth(got, rows, now):
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.namespace, r.queue, r.state), []).append(r)
    expected = [
        (*key, sum(not r.archived for r in members), len(members))
        for key, members in sorted(groups.items())
    ]
    assert got == expected


@check("outcomes_last_day")
def _outcomes_last_day(got, rows, now):
    counts = Counter(
        (r.namespace, r.queue, r.outcome)
        for r in rows
        if r.outcome and r.finished_at and hour(r.finished_at) >= now - timedelta(hours=24)
    )
    assert got == [(*key, n) for key, n in sorted(counts.items())]
    assert got


@check("failure_rate_hourly")
def _failure_rate(got, rows, now):
    finished: Counter[datetime] = Counter()
    completed: Counter[datetime] = Counter()
    for r in rows:
        if (r.namespace, r.queue) != ("shop", "emails") or not r.outcome or not r.finished_at:
            continue
        h = hour(r.finished_at)
        if h >= now - timedelta(hours=48):
            finished[h] += 1
            completed[h] += r.outcome == "completed"
    expected = [
        (
            h,
            finished[h],
            completed[h],
            (Decimal(100 * (finished[h] - completed[h])) / finished[h]).quantize(
                Decimal("0.1"), ROUND_HALF_UP
            ),
        )
        for h in sorted(finished)
    ]
    assert got == expected
    assert got


def _durations(rows, start, end, keep) -> dict[tuple[Any, ...], list[timedelta]]:
    groups: dict[tuple[Any, ...], list[timedelta]] = {}
    for r in rows:
        begin, finish = getattr(r, start), getattr(r, end)
        if begin is not None and finish is not None and keep(r, finish):
            groups.setdefault((r.namespace, r.queue, hour(finish)), []).append(finish - begin)
    return groups


@check("wait_hourly")
def _wait_hourly(got, rows, now):
    groups = _durations(
        rows, "enqueued_at", "first_leased_at", lambda r, t: hour(t) >= now - timedelta(hours=24)
    )
    expected = [
        (
            *key,
            len(values),
            *(
                Decimal(str(seconds(disc(values, p)))).quantize(Decimal("0.001"), ROUND_HALF_UP)
                for p in (0.5, 0.95, 0.99)
            ),
        )
        for key, values in sorted(groups.items())
    ]
    assert got == expected
    assert got


@check("wait_last_day")
def _wait_last_day(got, rows, now):
    groups: dict[tuple[str, str], list[timedelta]] = {}
    for r in rows:
        if r.first_leased_at and r.first_leased_at >= now - timedelta(hours=24):
            groups.setdefault((r.namespace, r.queue), []).append(r.first_leased_at - r.enqueued_at)
    expected = [(*key, len(v), disc(v, 0.5), disc(v, 0.95)) for key, v in sorted(groups.items())]
    assert got == expected
    assert got


@check("run_time_completed")
def _run_time_completed(got, rows, now):
    groups = _durations(
        rows,
        "leased_at",
        "finished_at",
        lambda r, t: r.outcome == "completed" and hour(t) >= now - timedelta(hours=24),
    )
    expected = [
        (*key, len(v), seconds(disc(v, 0.5)), seconds(disc(v, 0.95)), seconds(max(v)))
        for key, v in sorted(groups.items())
    ]
    assert [row[:4] for row in got] == [row[:4] for row in expected]
    for g, e in zip(got, expected, strict=True):
        assert all(abs(a - b) < 1e-6 for a, b in zip(g[4:], e[4:], strict=True))
    assert got


@check("attempts")
def _attempts(got, rows, now):
    counts = Counter(
        (r.namespace, r.queue, r.attempts, r.outcome)
        for r in rows
        if r.outcome in ("completed", "errored")
    )
    keys = sorted({k[:3] for k in counts})
    expected = [
        (*k, counts[(*k, "completed")] or None, counts[(*k, "errored")] or None) for k in keys
    ]
    assert got == expected
    assert got


def _dead(r: Row) -> bool:
    return r.state in ("errored", "canceled")


@check("dead_letter_reasons")
def _dead_letter_reasons(got, rows, now):
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        if _dead(r):
            groups.setdefault((r.namespace, r.queue, r.outcome, r.last_error), []).append(r)
    expected = [
        (*key, len(members), max(m.finished_at for m in members if m.finished_at))
        for key, members in groups.items()
    ]
    expected.sort(key=lambda row: (-row[4], row[0], row[1], row[2]))
    assert got == expected
    assert got


@check("requeueable")
def _requeueable(got, rows, now):
    live = [r for r in rows if _dead(r) and not r.archived]
    live.sort(key=lambda r: r.id)
    live.sort(key=lambda r: r.finished_at or now, reverse=True)
    expected = [
        (r.namespace, r.queue, r.id, r.state, r.attempts, r.last_error, r.finished_at)
        for r in live[:50]
    ]
    assert got == expected
    assert got


@check("errors_by_customer")
def _errors_by_customer(got, rows, now):
    counts = Counter(
        r.metadata["customer"]
        for r in rows
        if r.state == "errored" and r.finished_at and r.finished_at >= now - timedelta(days=7)
    )
    assert got == sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    assert got


def test_every_documented_query_has_a_check():
    assert set(doc_queries()) == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_documented_query(name: str, reader, generated: Generated):
    query = doc_queries()[name]
    with reader.transaction():
        now: datetime = reader.execute("SELECT now()").fetchone()[0]
        got = reader.execute(query).fetchall()
    CHECKS[name](got, generated.rows, now)
