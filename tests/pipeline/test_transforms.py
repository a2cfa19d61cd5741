"""The report's pure DataFrame functions on tiny, hand-made histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.pipeline.lake import history_spark_schema
from app.pipeline.report import day_window
from app.pipeline.transforms import (
    attempts_distribution,
    busiest_exclusive_values,
    enqueued_counts,
    hourly_report,
    outcome_counts,
    run_percentiles,
    wait_percentiles,
    with_measures,
)

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
US = timedelta(microseconds=1)


def _message(
    i: int,
    *,
    state: str = "completed",
    wait_us: int | None = 1000,
    run_us: int = 500,
    attempts: int = 1,
    value: str | None = None,
    error: str | None = None,
    enqueued: datetime = T0,
    queue: str = "q",
) -> dict:
    first = enqueued + wait_us * US if wait_us is not None else None
    finished = (first + run_us * US) if first else enqueued + timedelta(minutes=1)
    return {
        "queue_id": 1,
        "id": f"m{i}",
        "seq": i,
        "priority": 0,
        "state": state,
        "payload": "null",
        "metadata": "{}",
        "exclusive_value": value,
        "attempts": attempts,
        "max_attempts": 3,
        "enqueued_at": enqueued,
        "first_leased_at": first,
        "leased_at": first,
        "finished_at": finished,
        "last_error": error,
        "archived_at": finished,
        "namespace": "ns",
        "queue": queue,
        "day": finished.date(),
    }


@pytest.fixture
def history(spark):
    def make(*messages: dict):
        return spark.createDataFrame(list(messages), schema=history_spark_schema())

    return make


def _rows(df):
    return [row.asDict(recursive=True) for row in df.orderBy(*df.columns[:3]).collect()]


def test_measures_are_whole_microseconds_and_expired_is_its_own_outcome(history):
    measures = with_measures(
        history(
            _message(1, wait_us=1_234_567, run_us=7),
            _message(2, state="canceled", wait_us=None, error="expired"),
            _message(3, state="canceled", error="canceled"),
            _message(4, state="errored", error="lease expired"),
        )
    )
    rows = {
        r["outcome"]: r
        for r in _rows(measures.select("outcome", "wait_us", "run_us", "lease_expired"))
    }
    assert rows["completed"] == {
        "outcome": "completed",
        "wait_us": 1_234_567,
        "run_us": 7,
        "lease_expired": False,
    }
    assert rows["expired"]["wait_us"] is None
    assert rows["expired"]["run_us"] is None
    assert rows["canceled"]["wait_us"] == 1000
    assert rows["errored"]["lease_expired"] is True


def test_counts_use_the_hour_of_enqueue_and_the_hour_of_finish(history):
    late = T0 + timedelta(minutes=59, seconds=59)
    measures = with_measures(
        history(
            _message(1, enqueued=late, wait_us=2_000_000),  # enqueued 10:59, finished 11:00
            _message(2, state="errored", enqueued=T0),
            _message(3, state="canceled", wait_us=None, error="expired", enqueued=T0),
        )
    )
    enqueued = {r["hour"].hour: r["enqueued"] for r in _rows(enqueued_counts(measures))}
    assert enqueued == {10: 3}
    outcomes = {r["hour"].hour: r for r in _rows(outcome_counts(measures))}
    assert (outcomes[10]["errored"], outcomes[10]["expired"], outcomes[10]["completed"]) == (
        1,
        1,
        0,
    )
    assert outcomes[11]["completed"] == 1


def test_percentiles_are_discrete_observed_values(history):
    waits = [1, 2, 3, 4, 10]
    measures = with_measures(
        history(*[_message(i, wait_us=w, run_us=w * 100) for i, w in enumerate(waits)])
    )
    (wait,) = _rows(wait_percentiles(measures))
    assert (wait["wait_p50_us"], wait["wait_p95_us"], wait["wait_p99_us"]) == (3, 10, 10)
    (run,) = _rows(run_percentiles(measures))
    assert (run["run_p50_us"], run["run_p95_us"], run["run_p99_us"]) == (300, 1000, 1000)


def test_attempts_distribution_and_busiest_values(history):
    measures = with_measures(
        history(
            _message(1, attempts=1, value="b"),
            _message(2, attempts=1, value="a"),
            _message(3, attempts=2, value="b"),
            _message(4, attempts=3, value="c"),
            _message(5, attempts=3, value="a"),
            _message(6, attempts=3, value="d"),
        )
    )
    (attempts,) = _rows(attempts_distribution(measures))
    assert attempts["attempts"] == {1: 2, 2: 1, 3: 3}
    (busiest,) = _rows(busiest_exclusive_values(measures, top=3))
    # Most messages first; a tie goes to the smaller value.
    assert busiest["busiest_exclusive"] == [
        {"value": "a", "messages": 2},
        {"value": "b", "messages": 2},
        {"value": "c", "messages": 1},
    ]


def test_report_fills_empty_figures_and_keeps_to_its_window(history):
    report = hourly_report(
        history(
            _message(1, queue="quiet", state="canceled", wait_us=None, error="expired"),
            _message(2, queue="busy", state="errored", error="lease expired"),
            _message(3, queue="busy"),
            _message(4, queue="busy", enqueued=T0 + timedelta(hours=3)),
        ),
        since=T0,
        until=T0 + timedelta(hours=1),
    )
    rows = {r["queue"]: r for r in _rows(report)}
    assert set(rows) == {"busy", "quiet"}
    quiet = rows["quiet"]
    assert (quiet["expired"], quiet["canceled"], quiet["completed"]) == (1, 0, 0)
    assert quiet["wait_p50_us"] is None
    assert quiet["busiest_exclusive"] == []
    assert quiet["lease_expiry_rate"] == 0.0
    busy = rows["busy"]
    assert (busy["enqueued"], busy["completed"], busy["errored"]) == (2, 1, 1)
    assert busy["lease_expired"] == 1
    assert busy["lease_expiry_rate"] == 0.5


def test_windows_widen_to_whole_utc_days():
    assert day_window(T0, T0 + timedelta(hours=1)) == (
        datetime(2026, 11, 20, tzinfo=UTC),
        datetime(2026, 11, 21, tzinfo=UTC),
    )
    midnight = datetime(2026, 11, 21, tzinfo=UTC)
    assert day_window(None, midnight) == (None, midnight)
