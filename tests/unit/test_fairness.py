"""Fairness without a database: defaults of a job's group, where a sweep resumes, the most
starved group, and the fair statement's finishing part held to the plain one's."""

from __future__ import annotations

from uuid import UUID

import pytest

from queue_core.errors import InvalidJob
from queue_core.fairness import GroupStats, most_starved, start_between, sweep_position
from queue_core.validation import default_group, job_spec

OWNER = UUID("0190c0de-0000-7000-8000-000000000001")


def test_a_group_defaults_to_the_owner_then_to_the_shared_group():
    assert default_group("tenant-1", OWNER) == "tenant-1"
    assert default_group(None, OWNER) == str(OWNER)
    assert default_group(None, None) == ""
    assert job_spec("t", user_id=OWNER).group_key == str(OWNER)
    assert job_spec("t", group="g").group_key == "g"


@pytest.mark.parametrize("group", ["", " x", "x" * 129, 3, ["g"]])
def test_a_bad_group_is_refused(group):
    with pytest.raises(InvalidJob, match="group"):
        job_spec("t", group=group)


def test_a_sweep_resumes_after_its_greatest_group_when_it_did_not_wrap():
    assert sweep_position("c", ["d", "f", "e"]) == "f"


def test_a_sweep_that_wrapped_resumes_after_the_last_group_it_reached_past_the_end():
    assert sweep_position("m", ["x", "z", "a", "b"]) == "b"
    assert sweep_position("m", ["m"]) == "m"


def test_a_first_sweep_began_at_the_oldest_jobs_group():
    assert sweep_position(None, ["k", "z", "a"], began="k") == "a"
    assert sweep_position(None, ["k", "z"], began="k") == "z"


def test_a_sweep_that_claimed_nothing_stays_where_it_was():
    assert sweep_position("m", []) == "m"
    assert sweep_position(None, []) is None


def test_the_most_starved_group_is_the_one_waiting_longest():
    groups = [
        GroupStats("q", "a", 3, 0, 5.0),
        GroupStats("q", "b", 0, 2, None),
        GroupStats("q", "c", 1, 0, 40.0),
    ]
    starved = most_starved(groups)
    assert starved is not None and starved.group == "c"
    assert most_starved([GroupStats("q", "b", 0, 2, None)]) is None


@pytest.mark.parametrize("roll", [0.0, 0.3, 0.5, 0.99])
def test_a_first_sweep_starts_between_the_first_and_last_group(roll):
    start = start_between("tenant-0", "tenant-999", roll)
    assert "tenant-0" <= start <= "tenant-999"
    assert start.startswith("tenant-")


def test_random_starts_spread_over_the_groups():
    starts = {start_between("a-1", "z-9", i / 10) for i in range(10)}
    assert len(starts) == 10


def test_a_start_between_a_group_and_its_extension_stays_between():
    start = start_between("t", "t9", 0.5)
    assert "t" <= start <= "t9"


@pytest.mark.parametrize("roll", [0.0, 0.001, 0.5, 0.999])
@pytest.mark.parametrize(("first", "last"), [("", "b"), ("", "0d3f"), ("t", "t9")])
def test_a_start_after_a_prefix_never_holds_a_nul_character(
    first: str, last: str, roll: float
) -> None:
    # Given the shared group '' (or any group that prefixes the last one) first in order,
    # When a fresh worker draws where its first sweep begins
    start = start_between(first, last, roll)
    # Then the start is text PostgreSQL can take, and lies between the two groups
    assert "\x00" not in start
    assert first < start <= last
