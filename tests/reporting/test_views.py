"""Every reporting view, read through the read-only role, agrees with the same figure computed in
Python from the generated messages (live and archived)."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from tests.reporting.conftest import QUEUES, Generated, Row


def hour(ts: datetime) -> datetime:
    return ts.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def disc(values: list[float], fraction: float) -> float:
    """percentile_disc: the first value whose cumulative share reaches ``fraction``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-6


def test_the_data_covers_live_and_archived_messages_of_every_outcome(generated: Generated):
    rows = generated.rows
    assert {r.archived for r in rows} == {True, False}
    assert {r.outcome for r in rows if r.archived} >= {"completed", "errored", "expired"}
    assert {r.state for r in rows if not r.archived} >= {"pending", "running", "completed"}


def test_messages_view_is_live_and_history_together(reader, generated: Generated):
    got = {
        row[0]: row[1:]
        for row in reader.execute("SELECT id, state, outcome, archived FROM reporting.messages")
    }
    assert got == {r.id: (r.state, r.outcome, r.archived) for r in generated.rows}


def test_queue_depth(reader, generated: Generated):
    got = {
        (ns, q, state): (messages, live)
        for ns, q, state, messages, live in reader.execute(
            "SELECT namespace, queue, state, messages, live FROM reporting.queue_depth"
        )
    }
    states = ("invisible", "pending", "running", "completed", "canceled", "errored")
    assert set(got) == {(ns, q, s) for ns, q in QUEUES for s in states}
    for (ns, q, state), (messages, live) in got.items():
        rows = [r for r in generated.rows if (r.namespace, r.queue, r.state) == (ns, q, state)]
        assert (messages, live) == (len(rows), sum(not r.archived for r in rows)), (ns, q, state)


def test_throughput_hourly(reader, generated: Generated):
    got = {
        (ns, q, h, outcome): n
        for ns, q, h, outcome, n in reader.execute(
            "SELECT namespace, queue, hour, outcome, messages FROM reporting.throughput_hourly"
        )
    }
    expected = Counter(
        (r.namespace, r.queue, hour(r.finished_at), r.outcome)
        for r in generated.rows
        if r.outcome is not None and r.finished_at is not None
    )
    assert got == dict(expected)


@pytest.mark.parametrize(
    ("view", "start", "end", "by_outcome"),
    [
        ("wait_time_hourly", "enqueued_at", "first_leased_at", False),
        ("run_time_hourly", "leased_at", "finished_at", True),
    ],
)
def test_duration_percentiles(reader, generated: Generated, view, start, end, by_outcome):
    groups: dict[tuple[object, ...], list[float]] = {}
    for r in generated.rows:
        begin: datetime | None = getattr(r, start)
        finish: datetime | None = getattr(r, end)
        if begin is None or finish is None or (by_outcome and r.outcome is None):
            continue
        key = (r.namespace, r.queue, hour(finish)) + ((r.outcome,) if by_outcome else ())
        groups.setdefault(key, []).append((finish - begin).total_seconds())
    outcome = ", outcome" if by_outcome else ""
    rows = reader.execute(
        f"SELECT namespace, queue, hour{outcome}, messages, p50_seconds, p95_seconds,"
        f" p99_seconds, max_seconds FROM reporting.{view}"
    ).fetchall()
    width = 4 if by_outcome else 3
    got = {tuple(row[:width]): row[width:] for row in rows}
    assert set(got) == set(groups)
    for key, values in groups.items():
        messages, p50, p95, p99, top = got[key]
        assert messages == len(values)
        assert close(p50, disc(values, 0.5)), key
        assert close(p95, disc(values, 0.95)), key
        assert close(p99, disc(values, 0.99)), key
        assert close(top, max(values)), key


def test_attempts_distribution(reader, generated: Generated):
    got = {
        tuple(row[:4]): row[4]
        for row in reader.execute(
            "SELECT namespace, queue, outcome, attempts, messages"
            " FROM reporting.attempts_distribution"
        )
    }
    expected = Counter(
        (r.namespace, r.queue, r.outcome, r.attempts) for r in generated.rows if r.outcome
    )
    assert got == dict(expected)


def test_dead_letters(reader, generated: Generated):
    got = {
        row[0]: row[1:]
        for row in reader.execute(
            "SELECT id, state, outcome, last_error, archived, metadata ->> 'customer'"
            " FROM reporting.dead_letters"
        )
    }

    def dead(r: Row) -> bool:
        return r.state in ("errored", "canceled")

    assert got == {
        r.id: (r.state, r.outcome, r.last_error, r.archived, r.metadata["customer"])
        for r in generated.rows
        if dead(r)
    }
    assert any(archived for *_, archived, _ in got.values())
    assert not all(archived for *_, archived, _ in got.values())


def test_hours_are_utc_hours(reader, generated: Generated):
    reader.execute("SET TIME ZONE 'Asia/Kolkata'")  # a +05:30 offset: local hours differ
    hours = [h for (h,) in reader.execute("SELECT DISTINCT hour FROM reporting.throughput_hourly")]
    assert hours
    for h in hours:
        assert h.astimezone(UTC).minute == 0
        assert h.utcoffset() == timedelta(hours=5, minutes=30)
