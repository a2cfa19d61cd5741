"""The hourly report as pure DataFrame -> DataFrame functions over the history dataset.

Every figure is per namespace, queue and UTC hour; which timestamp picks the hour depends on the
figure, as in the reporting views of migration 0003:

=====================  ==========================================================  ============
figure                 definition                                                  hour of
=====================  ==========================================================  ============
enqueued               finished messages enqueued in the hour                      enqueued_at
completed, errored     by final state                                              finished_at
canceled, expired      canceled with ``last_error = 'expired'`` is *expired*       finished_at
wait_p50/p95/p99_us    first_leased_at - enqueued_at, over messages ever leased    first_leased_at
run_p50/p95/p99_us     finished_at - leased_at (the last lease), over leased ones  finished_at
attempts               {attempts: messages} over finished messages                 finished_at
lease_expired, rate    finished messages whose last error is ``lease expired``     finished_at
busiest_exclusive      top exclusive values by finished messages (ties by value)   finished_at
=====================  ==========================================================  ============

Percentiles are ``percentile_disc`` (an actual observed value, so durations stay whole
microseconds), the same function PostgreSQL offers, so plain SQL can check every figure.
History records only the *last* error, so ``lease_expired`` counts messages whose last failed
attempt ended by lease expiry: a lower bound of messages that ever lost a lease.
"""

from __future__ import annotations

from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from app.core.states import State

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KEY = ("namespace", "queue", "hour")
COUNTS = ("enqueued", "completed", "errored", "canceled", "expired", "lease_expired")
QUANTILES = (0.5, 0.95, 0.99)
EXPIRED_ERROR = "expired"
LEASE_EXPIRED_ERROR = "lease expired"


def _hour(column: str) -> Column:
    return F.date_trunc("hour", F.col(column))


def _micros_between(start: str, end: str) -> Column:
    return F.unix_micros(F.col(end)) - F.unix_micros(F.col(start))


def with_measures(history: DataFrame) -> DataFrame:
    """History plus ``outcome``, ``wait_us`` and ``run_us`` (whole microseconds)."""
    canceled = F.col("state") == State.CANCELED.value
    return history.select(
        "namespace",
        "queue",
        "attempts",
        "exclusive_value",
        "enqueued_at",
        "first_leased_at",
        "finished_at",
        F.when(canceled & (F.col("last_error") == EXPIRED_ERROR), F.lit("expired"))
        .otherwise(F.col("state"))
        .alias("outcome"),
        F.coalesce(F.col("last_error") == LEASE_EXPIRED_ERROR, F.lit(False)).alias("lease_expired"),
        _micros_between("enqueued_at", "first_leased_at").alias("wait_us"),
        _micros_between("leased_at", "finished_at").alias("run_us"),
    )


def _count_if(condition: Column) -> Column:
    return F.count(F.when(condition, True))


def enqueued_counts(measures: DataFrame) -> DataFrame:
    """Messages per hour of enqueue."""
    return measures.groupBy("namespace", "queue", _hour("enqueued_at").alias("hour")).agg(
        F.count(F.lit(1)).alias("enqueued")
    )


def outcome_counts(measures: DataFrame) -> DataFrame:
    """Finished messages per hour of finish, by outcome, and how many ended a lease by expiry."""
    outcomes = ("completed", "errored", "canceled", "expired")
    return measures.groupBy("namespace", "queue", _hour("finished_at").alias("hour")).agg(
        *[_count_if(F.col("outcome") == name).alias(name) for name in outcomes],
        _count_if(F.col("lease_expired")).alias("lease_expired"),
    )


def _percentiles(column: str, prefix: str) -> list[Column]:
    return [
        F.expr(f"percentile_disc({q}) WITHIN GROUP (ORDER BY {column})")
        .cast("bigint")
        .alias(f"{prefix}_p{round(q * 100)}_us")
        for q in QUANTILES
    ]


def wait_percentiles(measures: DataFrame) -> DataFrame:
    """p50/p95/p99 of enqueue-to-first-lease per hour of first lease."""
    leased = measures.where(F.col("wait_us").isNotNull())
    return leased.groupBy("namespace", "queue", _hour("first_leased_at").alias("hour")).agg(
        *_percentiles("wait_us", "wait")
    )


def run_percentiles(measures: DataFrame) -> DataFrame:
    """p50/p95/p99 of last-lease-to-finish per hour of finish."""
    leased = measures.where(F.col("run_us").isNotNull())
    return leased.groupBy("namespace", "queue", _hour("finished_at").alias("hour")).agg(
        *_percentiles("run_us", "run")
    )


def attempts_distribution(measures: DataFrame) -> DataFrame:
    """``attempts``: a map from number of attempts to finished messages, per hour of finish."""
    per_value = measures.groupBy(
        "namespace", "queue", _hour("finished_at").alias("hour"), "attempts"
    ).agg(F.count(F.lit(1)).alias("messages"))
    return per_value.groupBy(*KEY).agg(
        F.map_from_entries(F.array_sort(F.collect_list(F.struct("attempts", "messages")))).alias(
            "attempts"
        )
    )


def busiest_exclusive_values(measures: DataFrame, top: int) -> DataFrame:
    """``busiest_exclusive``: the ``top`` exclusive values by finished messages per hour of
    finish, most first (ties by value), as ``[{value, messages}]``."""
    per_value = (
        measures.where(F.col("exclusive_value").isNotNull())
        .groupBy("namespace", "queue", _hour("finished_at").alias("hour"), "exclusive_value")
        .agg(F.count(F.lit(1)).alias("messages"))
    )
    rank = F.row_number().over(
        Window.partitionBy(*KEY).orderBy(F.desc("messages"), F.asc("exclusive_value"))
    )
    ranked = per_value.withColumn("rank", rank).where(F.col("rank") <= top)
    return ranked.groupBy(*KEY).agg(
        F.transform(
            F.array_sort(F.collect_list(F.struct("rank", "exclusive_value", "messages"))),
            lambda entry: F.struct(
                entry["exclusive_value"].alias("value"), entry["messages"].alias("messages")
            ),
        ).alias("busiest_exclusive")
    )


def hourly_report(
    history: DataFrame,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    top_exclusive: int = 3,
) -> DataFrame:
    """The report: one row per namespace, queue and hour in ``[since, until)`` that has any
    figure, sorted by key. Counts are 0 where nothing happened, other figures NULL or empty."""
    return report_from_measures(
        with_measures(history), since=since, until=until, top_exclusive=top_exclusive
    )


def report_from_measures(
    measures: DataFrame,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    top_exclusive: int = 3,
) -> DataFrame:
    """:func:`hourly_report` from :func:`with_measures` (which a job may cache: every figure
    reads it)."""
    parts = [
        enqueued_counts(measures),
        outcome_counts(measures),
        wait_percentiles(measures),
        run_percentiles(measures),
        attempts_distribution(measures),
        busiest_exclusive_values(measures, top_exclusive),
    ]
    report = reduce(lambda left, right: left.join(right, list(KEY), "full_outer"), parts)
    if since is not None:
        report = report.where(F.col("hour") >= F.lit(since))
    if until is not None:
        report = report.where(F.col("hour") < F.lit(until))
    finished = reduce(
        Column.__add__, [F.col(name) for name in ("completed", "errored", "canceled", "expired")]
    )
    report = report.fillna(0, subset=list(COUNTS))
    return report.select(
        *KEY,
        *COUNTS[:5],
        "wait_p50_us",
        "wait_p95_us",
        "wait_p99_us",
        "run_p50_us",
        "run_p95_us",
        "run_p99_us",
        F.coalesce("attempts", F.create_map().cast("map<int,bigint>")).alias("attempts"),
        "lease_expired",
        F.when(finished > 0, F.col("lease_expired") / finished).alias("lease_expiry_rate"),
        F.coalesce(
            "busiest_exclusive",
            F.array().cast("array<struct<value:string,messages:bigint>>"),
        ).alias("busiest_exclusive"),
    ).orderBy(*KEY)
