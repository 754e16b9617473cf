"""Fairness without a database: defaults of a job's group, where a sweep resumes, the most
starved group, and the fair statement's finishing part held to the plain one's."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from queue_core.errors import InvalidJob
from queue_core.model.fairness import (
    TENANT_POSITIONS,
    FairState,
    GroupStats,
    most_starved,
    start_between,
    sweep_position,
    tenant_of,
)
from queue_core.model.jobs import Job
from queue_core.model.transitions import new_job
from queue_core.model.validation import default_group, job_spec

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


def test_a_groups_tenant_is_its_key_up_to_the_first_slash():
    assert [tenant_of(g) for g in ("a", "a/b", "a/b/c", "", "/x", "a-b")] == [
        "a",
        "a",
        "a",
        "",
        "",
        "a-b",
    ]


def _job_of(group: str) -> Job:
    spec = job_spec("t", group=group)
    return new_job(spec, id=uuid4(), now=datetime(2030, 1, 1, tzinfo=UTC))


def test_a_worker_resumes_after_the_last_tenant_and_each_tenants_last_group():
    state = FairState()
    state.advance("q", [_job_of(g) for g in ("a", "t/2", "t/3", "u")])
    # Tenants a, t, u were swept; t's groups went after its bare key, to t/3.
    assert state.after["q"] == "u"
    assert state.positions_of("q") == ["t/3"]
    state.advance("q", [_job_of("t/1")])  # past t/3 the sweep wrapped to t/1
    assert state.positions_of("q") == ["t/1"]
    state.advance("q", [_job_of("t")])  # back at the bare key: nothing to remember
    assert state.positions_of("q") == []


def test_a_worker_remembers_a_bounded_number_of_tenants():
    state = FairState()
    for n in range(TENANT_POSITIONS + 5):
        state.advance("q", [_job_of(f"t{n:04}/g")])
    kept = state.positions_of("q")
    assert len(kept) == TENANT_POSITIONS
    assert kept[-1] == f"t{TENANT_POSITIONS + 4:04}/g" and "t0000/g" not in kept
