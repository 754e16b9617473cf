"""Cron occurrences and the scheduler's decisions, as plain values (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queue_core.errors import InvalidJob
from queue_core.policies.schedules import (
    Missed,
    Schedule,
    cron,
    latest_occurrence,
    next_occurrence,
    occurrence_key,
    occurrences,
    plan,
    zone,
)

NEW_YORK = zone("America/New_York")
TOKYO = zone("Asia/Tokyo")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def schedule(expression: str, tz: str, next_at: datetime, missed: Missed = Missed.LATEST):
    return Schedule(
        name="s",
        cron=expression,
        timezone=tz,
        type="t",
        payload={},
        queue="default",
        priority=0,
        max_attempts=3,
        missed=missed,
        enabled=True,
        last_fired=None,
        next_at=next_at,
    )


def take(expression: str, tz, after: datetime, n: int) -> list[datetime]:
    found = occurrences(expression, tz, after)
    return [next(found) for _ in range(n)]


def test_tokyo_morning_is_2300_utc_the_day_before_all_year_round():
    # Asia/Tokyo has no daylight saving: 08:00 JST is 23:00 UTC in winter and in summer.
    for month in (1, 3, 7, 11):
        first = next_occurrence("0 8 * * *", TOKYO, utc(2026, month, 10, 12))
        assert first == utc(2026, month, 10, 23)


def test_new_york_spring_forward_runs_a_skipped_fixed_time_once_right_after_the_jump():
    # 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
    days = take("30 2 * * *", NEW_YORK, utc(2026, 3, 7, 12), 3)
    assert days == [utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30), utc(2026, 3, 10, 6, 30)]


def test_new_york_fall_back_runs_a_fixed_time_in_the_repeated_hour_once():
    # 2026-11-01 01:30 happens twice (EDT, then EST); a daily job runs at the first only.
    days = take("30 1 * * *", NEW_YORK, utc(2026, 10, 31, 12), 3)
    assert days == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30), utc(2026, 11, 3, 6, 30)]


def test_new_york_fall_back_runs_an_hourly_job_in_both_copies_of_the_repeated_hour():
    hours = take("0 * * * *", NEW_YORK, utc(2026, 11, 1, 4, 30), 3)
    assert hours == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]


def test_new_york_spring_forward_hourly_job_has_no_0200_and_no_gap_in_utc():
    hours = take("0 * * * *", NEW_YORK, utc(2026, 3, 8, 5, 30), 3)
    # 01:00 EST = 06:00 UTC, then 03:00 EDT = 07:00 UTC: one hour apart in real time.
    assert hours == [utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), utc(2026, 3, 8, 8)]


def test_latest_occurrence_counts_an_occurrence_exactly_at_now():
    at = utc(2026, 5, 1, 8, 0)
    assert latest_occurrence("0 8 * * *", zone("UTC"), at) == at
    assert latest_occurrence("0 8 * * *", zone("UTC"), at - timedelta(microseconds=1)) == utc(
        2026, 4, 30, 8
    )


def test_latest_occurrence_in_the_repeated_hour_is_the_est_copy_for_a_quarter_hourly_job():
    at = utc(2026, 11, 1, 6, 20)  # 01:20 EST, the second 01:xx of the night
    assert latest_occurrence("*/15 * * * *", NEW_YORK, at) == utc(2026, 11, 1, 6, 15)


def test_plan_fires_the_due_occurrence_and_moves_next_at_past_now():
    due = utc(2026, 5, 1, 8)
    firing = plan(schedule("0 8 * * *", "UTC", due), due + timedelta(seconds=20))
    assert firing.fire == due
    assert firing.next_at == utc(2026, 5, 2, 8)
    assert not firing.passed_over


def test_plan_latest_policy_fires_only_the_most_recent_missed_occurrence():
    sched = schedule("0 * * * *", "UTC", utc(2026, 5, 1, 8))
    firing = plan(sched, utc(2026, 5, 1, 13, 10))  # five hours of downtime
    assert firing.fire == utc(2026, 5, 1, 13)
    assert firing.passed_over
    assert firing.next_at == utc(2026, 5, 1, 14)


def test_plan_skip_policy_fires_nothing_that_is_later_than_the_grace_period():
    sched = schedule("0 * * * *", "UTC", utc(2026, 5, 1, 8), Missed.SKIP)
    late = plan(sched, utc(2026, 5, 1, 13, 10), grace=120)
    assert late.fire is None
    assert late.next_at == utc(2026, 5, 1, 14)
    on_time = plan(sched, utc(2026, 5, 1, 13, 1), grace=120)
    assert on_time.fire == utc(2026, 5, 1, 13)


def test_occurrence_key_names_the_schedule_and_the_utc_instant():
    local = datetime(2026, 5, 1, 8, tzinfo=TOKYO)
    assert occurrence_key("morning", local) == "cron:morning:2026-04-30T23:00:00Z"


@pytest.mark.parametrize(
    "expression",
    ["", "   ", "61 * * * *", "* * * *", "0 8 * * * * *", "0 8 31 2 *", "every day", 7, None],
)
def test_bad_cron_expressions_are_refused_with_the_field_named(expression):
    with pytest.raises(InvalidJob) as caught:
        cron(expression)
    assert caught.value.field == "cron"


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "EST5EDT ", 3, None])
def test_bad_time_zones_are_refused(name):
    with pytest.raises(InvalidJob) as caught:
        zone(name)
    assert caught.value.field == "timezone"


def test_cron_normalises_whitespace():
    assert cron("  0   8 *  * 1-5 ", "Asia/Tokyo") == "0 8 * * 1-5"
