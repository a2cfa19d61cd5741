"""The rules of app/core/periodic.py, without a database: schedules, time zones, templates, the
catch-up rule and the ids of ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core import periodic
from app.core.errors import PayloadTooLargeError, ValidationError
from app.core.periodic import MessageTemplate, PeriodicSpec
from app.core.validation import Limits

LIMITS = Limits(max_payload_bytes=64)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("*/15 * * * *", "*/15 * * * *"),
        ("  0   9 * * MON-FRI ", "0 9 * * MON-FRI"),
        ("@hourly", "@hourly"),
        ("@Daily", "@daily"),
        ("0 0 L * *", "0 0 L * *"),
    ],
)
def test_accepted_schedules(given: str, kept: str) -> None:
    assert periodic.schedule("schedule", given) == kept


@pytest.mark.parametrize(
    "bad",
    ["", "* * * *", "* * * * * *", "61 * * * *", "@reboot", "@every 5m", "0 0 30 2 *", "x"],
)
def test_refused_schedules_name_the_field(bad: str) -> None:
    with pytest.raises(ValidationError) as error:
        periodic.schedule("schedule", bad)
    assert error.value.field == "schedule"


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"])
def test_accepted_time_zones(zone: str) -> None:
    assert periodic.timezone("timezone", zone) == zone


@pytest.mark.parametrize("zone", ["", "Mars/Olympus", "../etc/passwd", "/UTC", "+02:00", "x" * 80])
def test_refused_time_zones(zone: str) -> None:
    with pytest.raises(ValidationError) as error:
        periodic.timezone("timezone", zone)
    assert error.value.field == "timezone"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        (MessageTemplate(payload=b"{"), None),
        (MessageTemplate(metadata={"": "x"}), "metadata"),
        (MessageTemplate(priority=2**63), "priority"),
        (MessageTemplate(ttl_seconds=0), "ttl_seconds"),
        (MessageTemplate(max_attempts=0), "max_attempts"),
        (MessageTemplate(lease_seconds=0), "lease_seconds"),
    ],
)
def test_template_rules(template: MessageTemplate, field: str | None) -> None:
    if field is None:  # a payload's JSON syntax is the edge's to check (it decodes the body)
        periodic.template(template, LIMITS)
        return
    with pytest.raises(ValidationError) as error:
        periodic.template(template, LIMITS)
    assert error.value.field == field


def test_a_payload_over_the_limit_is_refused() -> None:
    with pytest.raises(PayloadTooLargeError):
        periodic.template(MessageTemplate(payload=b"1" * 65), LIMITS)


def test_spec_names_its_fields() -> None:
    for spec, field in [
        (PeriodicSpec("bad queue", "* * * * *"), "queue"),
        (PeriodicSpec("q", "nope"), "schedule"),
        (PeriodicSpec("q", "* * * * *", "Nowhere/Land"), "timezone"),
    ]:
        with pytest.raises(ValidationError) as error:
            periodic.spec(spec, LIMITS)
        assert error.value.field == field


def test_patch_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError) as error:
        periodic.patched(PeriodicSpec("q", "* * * * *"), {"name": "x"})
    assert error.value.field == "name"


def test_next_and_latest_tick() -> None:
    now = at("2026-11-27T10:15:00")
    assert periodic.next_tick("*/15 * * * *", "UTC", now) == at("2026-11-27T10:30:00")
    assert periodic.latest_tick("*/15 * * * *", "UTC", now) == now
    assert periodic.latest_tick("*/15 * * * *", "UTC", now - timedelta(microseconds=1)) == at(
        "2026-11-27T10:00:00"
    )
    assert periodic.next_tick("@daily", "UTC", now) == at("2026-11-28T00:00:00")


def test_ticks_follow_the_time_zone_across_daylight_saving() -> None:
    """02:30 every day in Berlin: on the spring-forward day 02:30 does not exist, and the tick
    comes at 03:00 local time (cronsim's rule); the day after, 02:30 CEST is 00:30 UTC."""
    before = at("2026-03-28T12:00:00")
    assert periodic.next_tick("30 2 * * *", "Europe/Berlin", before) == at("2026-03-29T01:00:00")
    after = at("2026-03-29T12:00:00")
    assert periodic.next_tick("30 2 * * *", "Europe/Berlin", after) == at("2026-03-30T00:30:00")


def test_a_fixed_time_in_the_repeated_hour_fires_once_when_clocks_fall_back() -> None:
    """02:30 in Berlin on 25 October 2026 happens twice (CEST, then CET): the tick comes once,
    at the first; a half-hourly schedule keeps its half hours through both."""
    start = at("2026-10-24T12:00:00")
    first = periodic.next_tick("30 2 * * *", "Europe/Berlin", start)
    assert first == at("2026-10-25T00:30:00")
    assert periodic.next_tick("30 2 * * *", "Europe/Berlin", first) == at("2026-10-26T01:30:00")
    ticks = [at("2026-10-24T23:59:00")]
    for _ in range(4):
        ticks.append(periodic.next_tick("*/30 * * * *", "Europe/Berlin", ticks[-1]))
    assert ticks[1:] == [
        at("2026-10-25T00:00:00"),
        at("2026-10-25T00:30:00"),
        at("2026-10-25T01:00:00"),
        at("2026-10-25T01:30:00"),
    ]


def test_on_time_a_job_fires_for_its_own_tick() -> None:
    due = at("2026-11-27T10:15:00")
    firing = periodic.due_tick("*/15 * * * *", "UTC", due, due + timedelta(seconds=0.2))
    assert firing == periodic.Firing(due, at("2026-11-27T10:30:00"), skipped=0)


def test_catch_up_fires_the_most_recent_missed_tick_only() -> None:
    """Down from 10:14 to 11:07 on a 15-minute schedule: 10:15, 10:30 and 10:45 are skipped,
    11:00 fires, and the next run is 11:15."""
    firing = periodic.due_tick(
        "*/15 * * * *", "UTC", at("2026-11-27T10:15:00"), at("2026-11-27T11:07:00")
    )
    assert firing == periodic.Firing(at("2026-11-27T11:00:00"), at("2026-11-27T11:15:00"), 3)


def test_a_next_run_set_between_ticks_fires_for_itself() -> None:
    """A next run that is not a tick of the schedule (set by hand) fires for that instant."""
    next_run = at("2026-11-27T10:20:00")
    firing = periodic.due_tick("*/15 * * * *", "UTC", next_run, at("2026-11-27T10:21:00"))
    assert firing.tick == next_run
    assert firing.next_run_at == at("2026-11-27T10:30:00")


def test_skipped_ticks_are_counted_up_to_a_bound() -> None:
    firing = periodic.due_tick(
        "* * * * *", "UTC", at("2020-01-01T00:00:00"), at("2026-11-27T10:15:30")
    )
    assert firing.tick == at("2026-11-27T10:15:00")
    assert firing.skipped == periodic.COUNT_SKIPPED_UP_TO + 1


def test_ids_of_ticks() -> None:
    assert periodic.tick_message_id("nightly", at("2026-11-27T10:15:00")) == (
        "cron:nightly:20261127T101500Z"
    )
    tick = datetime(2026, 11, 27, 11, 15, tzinfo=UTC).astimezone(periodic.ZoneInfo("Europe/Paris"))
    assert periodic.tick_message_id("j", tick) == "cron:j:20261127T111500Z"
    assert periodic.trigger_message_id("j", at("2026-11-27T10:15:00.5")) == (
        "cron:j:trigger:20261127T101500.500000Z"
    )
    longest = periodic.trigger_message_id("j" * 64, at("2026-11-27T10:15:00.123456"))
    assert len(longest) <= 200
